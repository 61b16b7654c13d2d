/* viewer.js part: the What if tab, "would free-threading help?" (payload.what_if, schema in core/viewer/README.md). Joined with the other parts (CMakeLists.txt GT_VIEWER_JS) inside one closure. */
/* == what if == */
function wiSec(s) { var v = num(s, NaN); return isFinite(v) ? fmtDur(v * 1e9) : '\u2014'; }
function wiX(v) { v = num(v, NaN); return isFinite(v) ? v.toFixed(2) + '\u00d7' : '\u2014'; }
/* one bar of segments [fraction of the scale, GIL strip colour class] */
function wiBar(td, segs, text, title) {
  var bar = el('span', 'gt-bar gt-wibar', null, td);
  segs.forEach(function (g) { el('i', g[1], null, bar).style.width = Math.max(0, Math.min(100, 100 * g[0])) + '%'; });
  td.appendChild(D.createTextNode(' ' + text));
  if (title) td.title = title;
}
/* The tab shows only when the payload has a what_if object (older traces have none). */
function buildWhatIf() {
  var W = P.what_if, btn = D.querySelector('.gt-tab[data-tab="whatif"]');
  var ok = !!W && typeof W === 'object' && !Array.isArray(W);
  if (btn) btn.hidden = !ok;
  if (!ok) return;
  var cpus = num(W.cpus, 0) | 0, head = $('gt-wihead');
  head.textContent = '';
  el('span', 'gt-wibig', 'Measured ' + wiSec(W.measured_wall_s) + ' \u2192 predicted ' + wiSec(W.predicted_wall_s) +
    ' without the GIL on ' + plural(cpus, 'CPU') + ': ' + wiX(W.speedup) + ' speed-up', head);
  var ps = num(W.parallel_speed, 1);
  el('span', 'gt-muted', ' (free-threading single-thread cost factor ' + wiX(W.ft_factor) +
    (cpus > 1 && ps < 1 ? '; each CPU at ' + ps.toFixed(2) + ' of its speed alone with all busy' : '') + ')', head);
  var ths = Array.isArray(W.threads) ? W.threads : [], tbl = $('gt-withreads');
  tbl.textContent = '';
  thead(tbl, [['Thread'], ['Measured (with the GIL)', 'fill'], ['Predicted (without)', 'fill'], ['Change', 'n'], ['GIL wait (measured)', 'n']]);
  var tb = el('tbody', null, null, tbl), scale = 0;
  ths.forEach(function (r) { scale = Math.max(scale, num(r.measured_s, 0), num(r.predicted_s, 0)); });
  scale = scale || 1;
  ths.forEach(function (r) {
    var tr = el('tr', null, null, tb), m = num(r.measured_s, 0), p = num(r.predicted_s, 0), w = Math.min(m, num(r.gil_wait_s, 0));
    cell(tr, r.name == null ? String(r.tid) : String(r.name), 'nm', 'thread ' + r.tid);
    wiBar(cell(tr, null, 'gt-wim'), [[(m - w) / scale, 'gt-b2'], [w / scale, 'gt-b1']], wiSec(r.measured_s),
      'measured wall time of this thread; striped: its GIL wait');
    wiBar(cell(tr, null, 'gt-wip'), [[p / scale, 'gt-b2']], wiSec(r.predicted_s), 'predicted wall time of this thread without the GIL');
    cell(tr, m > 0 && p > 0 ? wiX(m / p) : '\u2014', 'n', 'measured / predicted');
    cell(tr, wiSec(r.gil_wait_s), 'n', 'time this thread waited for the GIL in the trace');
  });
  if (!ths.length) emptyRow(tb, 'No threads.', 5);
  var fs = Array.isArray(W.functions) ? W.functions : [], ft = $('gt-wifuncs');
  ft.textContent = '';
  thead(ft, [['If this function released the GIL'], ['Location'], ['GIL wait it caused', 'n'], ['Predicted wall', 'n'], ['Speed-up', 'n']]);
  var fb = el('tbody', null, null, ft);
  fs.forEach(function (r) {
    var tr = el('tr', null, null, fb), loc = r.file ? String(r.file) + (r.line ? ':' + r.line : '') : '';
    cell(tr, r.name == null ? '?' : String(r.name), 'nm', loc);
    cell(tr, loc ? loc.replace(/^.*[\\/]/, '') : '\u2014', 'nm gt-muted', loc);
    cell(tr, wiSec(r.gil_wait_caused_s), 'n');
    cell(tr, wiSec(r.release_predicted_wall_s), 'n', 'predicted wall time of the cell, with the GIL, if this function ran with it released');
    cell(tr, wiX(r.release_speedup), 'n');
  });
  if (!fs.length) emptyRow(fb, 'No function caused a GIL wait.', 5);
  var ul = $('gt-wiassume');
  ul.textContent = '';
  (Array.isArray(W.assumptions) ? W.assumptions : []).forEach(function (a) { el('li', null, String(a), ul); });
}

/* viewer.js part: tabs, the top-functions table, init (closes the closure decode.js opens). Joined with the other parts (CMakeLists.txt GT_VIEWER_JS) inside one closure. */
/* == tabs & top functions == */
var topSort = { key: 'self', dir: -1 };
var tabs = D.querySelectorAll('.gt-tab');
function showTab(name) {
  tabs.forEach(function (b) { b.classList.toggle('on', b.getAttribute('data-tab') === name); });
  $('gt-tab-timeline').hidden = name !== 'timeline';
  $('gt-tab-top').hidden = name !== 'top';
  $('gt-tab-blame').hidden = name !== 'blame';
  $('gt-overview').hidden = name !== 'timeline';
  $('gt-zoomctl').style.visibility = name === 'timeline' ? '' : 'hidden';
  if (name === 'top') renderTop(); else resize();
}
tabs.forEach(function (b) { b.onclick = function () { showTab(b.getAttribute('data-tab')); }; });
function buildTopCtl() {
  var sel = $('gt-topthread');
  el('option', null, 'All threads', sel).value = '-1';
  threads.forEach(function (th) { el('option', null, th.name + ' (' + th.tid + ')', sel).value = String(th.idx); });
  sel.addEventListener('change', renderTop);
}
var TOP_COLS = [['Function', 'name'], ['Location', 'loc'], ['Thread', 'thread'], ['Calls', 'n', 'n'],
  ['Total', 'tot', 'n'], ['Self', 'self', 'n'], ['Self %', 'pct', 'n'], ['Avg / call', 'avg', 'n']];
function renderTop() {
  var tbl = $('gt-top'), ti = +$('gt-topthread').value, rows = [];
  threads.forEach(function (th) {
    if (ti >= 0 && th.idx !== ti) return;
    var st = th.stats, wall = num(th.sum.wall_ns, th.end - th.start) || 1;
    for (var k = 0; k < st.f.length; k++) {
      var f = st.f[k];
      if (fMatch && !fMatch[f]) continue;
      rows.push({ f: f, th: th, name: fName[f], loc: fnLoc(f), thread: th.name, n: st.n[k], tot: st.tot[k],
        self: st.self[k], pct: 100 * st.self[k] / wall, avg: st.tot[k] / st.n[k] });
    }
  });
  var key = topSort.key, dir = topSort.dir;
  rows.sort(function (a, b) {
    var x = a[key], y = b[key];
    return (typeof x === 'string' ? String(x).localeCompare(y) : x - y) * dir;
  });
  tbl.textContent = '';
  var ths = thead(tbl, TOP_COLS.map(function (c) { return [c[0], 'sort' + (c[2] ? ' n' : '')]; }));
  ths.forEach(function (h, i) {
    var key2 = TOP_COLS[i][1];
    if (key2 === key) h.textContent += dir < 0 ? ' \u25be' : ' \u25b4';
    h.addEventListener('click', function () {
      topSort = { key: key2, dir: key2 === key ? -dir : (TOP_COLS[i][2] ? -1 : 1) };
      renderTop();
    });
  });
  var tb = el('tbody', null, null, tbl), N = 300;
  rows.slice(0, N).forEach(function (r) {
    var tr = el('tr', null, null, tb);
    cell(tr, r.name, 'nm' + (fIsC[r.f] ? ' gt-c' : ''), r.name);
    cell(tr, shortLoc(r.f), 'nm gt-muted', r.loc);
    cell(tr, r.thread, 'nm');
    cell(tr, fmtInt(r.n), 'n'); cell(tr, fmtDur(r.tot), 'n'); cell(tr, fmtDur(r.self), 'n');
    cell(tr, fmtPct(r.pct), 'n'); cell(tr, fmtDur(r.avg), 'n');
    tr.title = 'Click to highlight this function in the timeline';
    tr.addEventListener('click', function () { setSearch(r.name); selectThread(r.th.idx, true); });
  });
  if (!rows.length) emptyRow(tb, fMatch ? 'No function matches the search.' : 'No calls recorded.', 8);
  $('gt-topnote').textContent = (rows.length > N ? 'top ' + N + ' of ' + fmtInt(rows.length) + ' rows' : fmtInt(rows.length) + ' rows') +
    ' \u00b7 total = inclusive time, recursion counted once' + (fMatch ? ' \u00b7 filtered by the search' : '');
}

/* == init == */
function init() {
  try { P = JSON.parse(raw); } catch (e) {
    $('gt-loading').hidden = true;
    showError(/^\s*[{[]/.test(raw) ? 'Could not read the trace payload: ' + e.message : 'This page contains no trace data.');
    return;
  }
  raw = null;
  if (dataEl) dataEl.textContent = '';
  perf.parsed = performance.now();
  P = P || {};
  meta = P.meta || {};
  var F = P.funcs || {};
  fName = arr(F, 'name').map(function (x) { return x == null ? '?' : String(x); });
  fName.push('(unknown function)'); /* sentinel for out-of-range func indexes */
  nF = fName.length;
  fFile = arr(F, 'file').slice(); fLine = arr(F, 'line');
  var cc = arr(F, 'c');
  fIsC = new Uint8Array(nF);
  for (var i = 0; i < nF; i++) { fFile[i] = fFile[i] == null ? '' : String(fFile[i]); fIsC[i] = cc[i] ? 1 : 0; }
  gilKnown = meta.gil_known !== false;
  scCount = new Float64Array(nF); scTotal = new Float64Array(nF); scSelf = new Float64Array(nF); scActive = new Int32Array(nF);
  threads = (Array.isArray(P.threads) ? P.threads : []).map(prepThread);
  scCount = scTotal = scSelf = scActive = null;
  threads.forEach(function (th) {
    if (th.tid !== '?') byTid[th.tid] = th;
    var t = P.threads[th.idx]; if (t) t.spans = null;
  });
  hasOS = threads.some(function (th) { return th.os.n > 0; });
  if (!threads.some(function (th) { return th.gil.n > 0; }) && meta.gil_known == null) gilKnown = false;
  tMin = 0;
  tMax = Math.max(0, num(meta.duration_ns, 0));
  threads.forEach(function (th) { tMax = Math.max(tMax, th.end, th.maxE); tMin = Math.min(tMin, th.start); });
  if (tMax - tMin < 1000) tMax = tMin + (tMax > tMin ? 1000 : 1e6);
  span = tMax - tMin; vs = tMin; ve = tMax;
  perf.prepared = performance.now();
  mkColors();
  nameW = new Float32Array(nF).fill(-1);
  var hc = D.createElement('canvas'); hc.width = hc.height = 6;
  var hx = hc.getContext('2d');
  hx.strokeStyle = 'rgba(60,70,85,.28)'; hx.lineWidth = 1.2;
  hx.beginPath(); hx.moveTo(0, 6); hx.lineTo(6, 0); hx.moveTo(-1, 1); hx.lineTo(1, -1); hx.moveTo(5, 7); hx.lineTo(7, 5); hx.stroke();
  hatch = ctx.createPattern(hc, 'repeat');
  ctx.font = FONT_B;
  var mw = 0;
  threads.forEach(function (th) { mw = Math.max(mw, ctx.measureText(th.name).width); });
  gutterW = Math.round(Math.max(130, Math.min(230, mw + 56)));
  $('gt-loading').hidden = true;
  buildHeader(); buildSummary(); buildBlame(); buildLegend(); buildTopCtl(); details(null);
  if (typeof ResizeObserver === 'function') new ResizeObserver(function () { resize(); }).observe(tl);
  else window.addEventListener('resize', resize);
  resize();
  perf.ready = performance.now();
  perf.firstFrameMs = perf.lastFrameMs;
  D.documentElement.setAttribute('data-gt-ready', String(Math.round(perf.ready))); /* for tests and benchmarks */
}
window.gtViewer = {
  perf: perf,
  view: function (a, b) { setView(a, b); },
  redraw: function () { var t = performance.now(); draw(); return performance.now() - t; }
};
if (raw.length > 1500000) {
  var started = false;
  var go = function () { if (!started) { started = true; init(); } };
  requestAnimationFrame(function () { setTimeout(go, 0); });
  setTimeout(go, 250);
} else {
  $('gt-loading').hidden = true;
  init();
}
})();

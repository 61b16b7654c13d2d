/* viewer.js part: the cell's scope: frames outside the traced code, background threads, lane
 * order. Joined with the other parts (CMakeLists.txt GT_VIEWER_JS) inside one closure.
 *
 * Both are decided once by the merge (core/analyze/merge.c) and carried in the payload:
 * thread.outer, the leading depths of the thread that started the trace (meta.scope_tid)
 * that lie outside the traced code (open when the trace started, runpy's, or C functions:
 * the kernel's stack above a %%giltracer cell, the CLI's runpy frames); they fold into one
 * root span named after the trace (meta.title) in the timeline, and out of the Profile and
 * Top functions (thread.profile is folded, thread.profile_outer is not), unfolded by the
 * "outer frames" toggle. thread.background: not started during the trace, and it held the
 * GIL under 1 % of its life or under 1 ms; such threads fold into one "N background threads"
 * row without a lane, and out of the merged Profile and Top functions, shown by "Show
 * background threads". */
/* == scope == */
var scopeFolded = true, showIdle = false, SCOPE_F = -1, nIdle = 0, nOuter = 0;
var HARNESS_RE = /(^|[\/\\])runpy\.py$|^<frozen runpy>$/;
function harness(f) { return f >= 0 && f < nF && (fIsC[f] === 1 || HARNESS_RE.test(fFile[f])); }
/* {depth, s, e}: the first depth of the traced code and the time of the outer span above it */
function outerDepth(th) {
  var none = { depth: 0, s: 0, e: 0 }, raw = P.threads[th.src] || {}, k = num(raw.outer, -1);
  if (k < 0 && (meta.scope_tid == null || +th.tid !== +meta.scope_tid)) return none;
  var a = 0, b = 0;
  for (var d = 0; d < th.rows.length; d++) { /* follow the longest span of each depth */
    var r = th.rows[d], m = 0;
    for (var i = 1; i < r.n; i++) if (r.e[i] - r.s[i] > r.e[m] - r.s[m]) m = i;
    if (d === k || (k < 0 && (!r.n || (!(r.fl[m] & 1) && !harness(r.f[m]))))) return d ? { depth: d, s: a, e: b } : none;
    a = r.s[m]; b = r.e[m];
  }
  return none; /* nothing of the traced code's own: show everything */
}
/* functions seen only in the folded frames above the traced code (left out of Top functions) */
function outerOnly(th) {
  if (!scopeFolded || !(th.outer > 0)) return null;
  if (th.outerOnly) return th.outerOnly;
  var m = new Uint8Array(nF);
  th.fullRows.forEach(function (r, d) { for (var i = 0; i < r.n; i++) m[r.f[i]] |= d < th.outer ? 1 : 2; });
  return (th.outerOnly = m);
}
/* a row's spans that start in [a, b), as views on its arrays */
function rowWithin(r, a, b) {
  var i0 = lowerGE(r.s, a, 0, r.n), i1 = lowerGE(r.s, b, i0, r.n);
  var q = { s: r.s.subarray(i0, i1), e: r.e.subarray(i0, i1), f: r.f.subarray(i0, i1), fl: r.fl.subarray(i0, i1), pn: r.pn ? r.pn.subarray(i0, i1) : null, me: null, pre: null, n: i1 - i0 };
  q.me = prefixMax(q.e);
  return q;
}
function isIdle(th) {
  var raw = P.threads[th.src] || {};
  if ('outer' in raw || 'background' in raw || meta.scope_tid != null) return !!raw.background;
  for (var d = 0; d < th.rows.length; d++) {
    var r = th.rows[d];
    for (var i = 0; i < r.n; i++) if (!(r.fl[i] & 1)) return false;
  }
  if (!gilKnown) return true;
  var s = th.sum;
  return !(num(s.held_ns, 0) > 0 || num(s.wait_ns, 0) > 0 || num(s.acquisitions, 0) > 0 || th.gil.by[2].n || th.gil.by[1].n);
}
/* Child processes followed (meta.processes): lanes grouped by process, the traced one first,
 * then each child in the order it started; the lane's second line names its pid. */
function procRank(th) {
  var ps = meta.processes || [];
  if (!ps.length || th.pid == null || +th.pid === +meta.pid) return -1;
  for (var k = 0; k < ps.length; k++) if (+ps[k].pid === +th.pid) return k;
  return ps.length;
}
function procSub(th) {
  if (!(meta.processes && meta.processes.length && th.pid != null)) return 'tid ' + th.tid;
  return +th.pid === +th.tid ? 'pid ' + th.pid : 'pid ' + th.pid + ' \u00b7 tid ' + th.tid;
}
/* Child processes that did next to nothing: each held its GIL under 2 % of the trace (the
 * text table's rule, core/emit/text.c idle_process), so a pool of many short tasks does not
 * show a half-empty group of lanes per worker: they fold with the background threads. */
var idlePids = [];
function idleProcesses() {
  var ps = meta.processes || [], held = {}, wall = num(meta.duration_ns, span);
  if (!ps.length || !gilKnown) return {};
  threads.forEach(function (th) {
    if (th.pid != null && +th.pid !== +meta.pid) held[th.pid] = (held[th.pid] || 0) + num(th.sum.held_ns, 0);
  });
  var out = {};
  ps.forEach(function (p) { if (p.pid in held && held[p.pid] < 0.02 * wall) { out[p.pid] = true; idlePids.push(+p.pid); } });
  return out;
}
function isMain(th) { return th.name === 'MainThread' || (meta.pid != null && +th.tid === +meta.pid); }
function scopeThreads() {
  SCOPE_F = fName.length;
  fName.push(String(meta.title || 'traced code')); fFile.push(''); fLine.push(0);
  nF = fName.length;
  var isC = new Uint8Array(nF); isC.set(fIsC.subarray(0, nF - 1)); fIsC = isC;
  var idleProc = idleProcesses();
  threads.forEach(function (th) {
    th.src = th.idx;
    th.fullRows = th.rows;
    var o = outerDepth(th);
    th.outer = o.depth;
    if (th.outer > 0) {
      /* the root spans the thread's traced life; below it only what ran inside the innermost
       * outer frame (not, say, runpy's imports beside the script) */
      var r0 = th.rows[0], a = r0.s[0], b = r0.me[r0.n - 1];
      nOuter++;
      var root = { s: Float64Array.of(a), e: Float64Array.of(b), f: Int32Array.of(SCOPE_F), fl: new Uint8Array(1),
        me: Float64Array.of(b), pre: null, n: 1 };
      th.scopeRows = [root].concat(th.rows.slice(th.outer).map(function (r) { return rowWithin(r, o.s, o.e); }));
      while (th.scopeRows.length > 1 && !th.scopeRows[th.scopeRows.length - 1].n) th.scopeRows.pop();
      th.rows = scopeFolded ? th.scopeRows : th.fullRows;
    }
    th.idle = isIdle(th) || !!idleProc[th.pid];
    th.idleProc = !!idleProc[th.pid];
    th.gilBusy = num(th.sum.held_ns, 0) + num(th.sum.wait_ns, 0);
  });
  nIdle = threads.filter(function (th) { return th.idle; }).length;
  if (nIdle === threads.length) { nIdle = 0; idlePids = []; threads.forEach(function (th) { th.idle = th.idleProc = false; }); }
  threads.sort(function (a, b) {
    return (a.idle - b.idle) || (procRank(a) - procRank(b)) || (isMain(b) - isMain(a)) || (b.gilBusy - a.gilBusy) || (b.nSpans - a.nSpans) || (a.src - b.src);
  });
  threads.forEach(function (th, i) { th.idx = i; });
  var btn = $('gt-scope');
  if (btn) {
    btn.hidden = !nOuter;
    btn.onclick = function () { setScopeFolded(!scopeFolded); };
    scopeButton();
    if (nIdle) {
      var bg = D.createElement('button');
      bg.type = 'button'; bg.id = 'gt-background'; bg.className = 'gt-btn';
      bg.onclick = function () { setShowIdle(!showIdle); };
      btn.parentNode.insertBefore(bg, btn.nextSibling);
      idleButton();
    }
  }
}
function idleButton() {
  var bg = $('gt-background');
  if (!bg) return;
  bg.textContent = showIdle ? 'Fold background threads' : 'Show background threads';
  bg.classList.toggle('on', showIdle);
  bg.title = idleText() + ': ' + (showIdle ? 'shown in every view' : 'folded out of the lanes, Profile and Top functions');
}
/* the merged profile and the per-thread trees follow the two toggles */
function scopeChanged() {
  mergedTree = null;
  threads.forEach(function (th) { th.ptree = null; });
  if (pf.built) { pf.zoom = 0; pf.sw = null; if (!$('gt-tab-profile').hidden) drawProfile(); }
  if (!$('gt-tab-top').hidden) renderTop();
  buildBlame();
}
function scopeButton() {
  var btn = $('gt-scope');
  if (!btn) return;
  btn.textContent = scopeFolded ? 'Show outer frames' : 'Fold outer frames';
  btn.classList.toggle('on', !scopeFolded);
  btn.title = 'Frames already open when the trace started, outside the traced code (e.g. the kernel\'s stack above the cell): ' +
    (scopeFolded ? 'folded into one span named after the trace' : 'shown');
}
function setScopeFolded(on) {
  scopeFolded = !!on;
  threads.forEach(function (th) { if (th.outer > 0) th.rows = scopeFolded ? th.scopeRows : th.fullRows; });
  selSpan = null; hover = null; tip.hidden = true; details(null);
  searchQ = '\u0000'; applySearch();
  scopeButton(); scopeChanged(); layout(); requestDraw();
}
function setShowIdle(on) {
  showIdle = !!on;
  sumRows.forEach(function (tr, k) { if (threads[k].idle) tr.hidden = !showIdle; });
  var t = $('gt-idlerow');
  if (t) t.firstChild.textContent = (showIdle ? '\u25be ' : '\u25b8 ') + idleText();
  idleButton(); scopeChanged(); layout(); requestDraw();
}
function idleText() {
  var bg = threads.filter(function (th) { return th.idle && !th.idleProc; }), out = [];
  if (bg.length)
    out.push(plural(bg.length, 'background thread') + ' (not started by the traced code, GIL held under 1 % or 1 ms): ' +
      bg.map(function (th) { return th.name; }).join(', '));
  if (idlePids.length)
    out.push(fmtInt(idlePids.length) + ' idle worker process' + (idlePids.length === 1 ? '' : 'es') +
      ' (each held its GIL under 2 % of the trace): pid ' + idlePids.slice(0, 8).join(', ') + (idlePids.length > 8 ? ', ...' : ''));
  return out.join(' \u00b7 ');
}
/* the summary table: idle threads behind one row */
function scopeSummary() {
  if (!nIdle) return;
  var tb = $('gt-summary').querySelector('tbody');
  var tr = el('tr', 'gt-idle', null, tb), td = el('td', null, '\u25b8 ' + idleText(), tr);
  tr.id = 'gt-idlerow'; td.colSpan = 11; td.title = 'Click to show or hide the background threads';
  tr.addEventListener('click', function () { setShowIdle(!showIdle); });
  sumRows.forEach(function (r, k) { if (threads[k].idle) { r.hidden = true; tb.appendChild(r); } });
}

/* viewer.js part: tabs, the top-functions table, init (closes the closure decode.js opens). Joined with the other parts (CMakeLists.txt GT_VIEWER_JS) inside one closure. */
/* == tabs & top functions == */
var topSort = { key: 'self', dir: -1 };
var tabs = D.querySelectorAll('.gt-tab');
function showTab(name) {
  tabs.forEach(function (b) { b.classList.toggle('on', b.getAttribute('data-tab') === name); });
  $('gt-tab-timeline').hidden = name !== 'timeline';
  $('gt-tab-top').hidden = name !== 'top';
  $('gt-tab-blame').hidden = name !== 'blame';
  $('gt-tab-profile').hidden = name !== 'profile';
  $('gt-tab-whatif').hidden = name !== 'whatif';
  $('gt-overview').hidden = name !== 'timeline';
  $('gt-zoomctl').style.visibility = name === 'timeline' ? '' : 'hidden';
  if (name === 'top') renderTop(); else if (name === 'profile') showProfile(); else resize();
}
tabs.forEach(function (b) { b.onclick = function () { showTab(b.getAttribute('data-tab')); }; });
function buildTopCtl() {
  var sel = $('gt-topthread');
  el('option', null, 'All threads', sel).value = '-1';
  threads.forEach(function (th) { el('option', null, th.name + ' (' + th.tid + ')', sel).value = String(th.idx); });
  sel.addEventListener('change', renderTop);
}
var TOP_COLS = [['Function', 'name'], ['Location', 'loc'], ['Thread', 'thread'], ['Calls', 'n', 'n'],
  ['Total', 'tot', 'n'], ['Self', 'self', 'n'], ['Self %', 'pct', 'n'], ['Avg / call', 'avg', 'n'],
  ['Running', 's0', 'n', 'self time holding the GIL on CPU'],
  ['Held off CPU', 's1', 'n', 'self time holding the GIL while preempted or blocked'],
  ['Waiting', 's2', 'n', 'self time waiting for the GIL'], ['Released', 's3', 'n', 'self time with the GIL released'],
  ['GIL wait caused', 'caused', 'n', 'time other threads waited for the GIL while this function held it (innermost Python function)']];
/* A free-threaded build's headings: no GIL, its states are running / parked / released
 * (waiting for another thread). */
function ftHeadings() {
  var ft = {s0: ['Running', 'self time not parked, on CPU'],
    s1: ['Off CPU, not parked', 'self time not parked but off CPU: preempted, or released to the OS'],
    s2: ['Parked', 'self time parked: a contended lock, a stop-the-world pause or a join'],
    s3: ['Released', 'self time waiting for another thread: a lock\'s acquire, an event, a queue (no contention)'],
    caused: ['Parked time caused', 'time other threads were parked while this function ran and woke them (innermost Python function)']};
  TOP_COLS.forEach(function (c) { if (ft[c[1]]) { c[0] = ft[c[1]][0]; c[3] = ft[c[1]][1]; } });
  var tab = D.querySelector('.gt-tab[data-tab="blame"]');
  if (tab) tab.textContent = 'Contention blame';
  var note = D.querySelector('#gt-tab-blame > .gt-muted');
  if (note) note.textContent = 'Each park, attributed to the thread that woke the parked one and the Python function it ran. Click a row to highlight it.';
}
function topCols() {
  return TOP_COLS.filter(function (c) {
    if (c[1] === 's1') return gilKnown && hasOS;
    return gilKnown || ['s0', 's2', 's3', 'caused'].indexOf(c[1]) < 0;
  });
}
function renderTop() {
  var tbl = $('gt-top'), ti = +$('gt-topthread').value, rows = [];
  threads.forEach(function (th) {
    if (ti >= 0 ? th.idx !== ti : th.idle && !showIdle) return;
    var st = th.stats, wall = num(th.sum.wall_ns, th.end - th.start) || 1;
    var sp = funcSplit(threadTree(th)), caused = waitCaused(th.tid), outer = outerOnly(th);
    for (var k = 0; k < st.f.length; k++) {
      var f = st.f[k];
      if ((fMatch && !fMatch[f]) || (outer && outer[f] === 1)) continue;
      rows.push({ f: f, th: th, name: fName[f], loc: fnLoc(f), thread: th.name, n: st.n[k], tot: st.tot[k],
        self: st.self[k], pct: 100 * st.self[k] / wall, avg: st.tot[k] / st.n[k],
        s0: sp.self[0][f], s1: sp.self[1][f], s2: sp.self[2][f], s3: sp.self[3][f], caused: caused[f] });
    }
  });
  var key = topSort.key, dir = topSort.dir;
  rows.sort(function (a, b) {
    var x = a[key], y = b[key];
    return (typeof x === 'string' ? String(x).localeCompare(y) : x - y) * dir;
  });
  tbl.textContent = '';
  var cols = topCols(), ths = thead(tbl, cols.map(function (c) { return [c[0], 'sort' + (c[2] ? ' n' : '')]; }));
  ths.forEach(function (h, i) {
    var key2 = cols[i][1];
    if (cols[i][3]) h.title = cols[i][3];
    if (key2 === key) h.textContent += dir < 0 ? ' \u25be' : ' \u25b4';
    h.addEventListener('click', function () {
      topSort = { key: key2, dir: key2 === key ? -dir : (cols[i][2] ? -1 : 1) };
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
    cols.slice(8).forEach(function (c) { cell(tr, fmtDur(r[c[1]]), 'n'); });
    tr.title = 'Click to highlight this function in the timeline';
    tr.addEventListener('click', function () { setSearch(r.name); selectThread(r.th.idx, true); });
  });
  if (!rows.length) emptyRow(tb, fMatch ? 'No function matches the search.' : 'No calls recorded.', cols.length);
  $('gt-topnote').textContent = (rows.length > N ? 'top ' + N + ' of ' + fmtInt(rows.length) + ' rows' : fmtInt(rows.length) + ' rows') +
    ' \u00b7 total = inclusive time, recursion counted once' + (fMatch ? ' \u00b7 filtered by the search' : '');
}

/* == init == */
function init(payload) {
  perf.parsed = performance.now();
  P = payload || {};
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
  freeThreaded = !!meta.free_threaded;
  if (freeThreaded) { /* the profile's split: running / parked / off CPU (released to the OS) */
    PS_NAME[1] = 'off CPU, not parked'; PS_NAME[2] = 'parked';
    PS_HELP[0] = 'not parked, on CPU'; PS_HELP[1] = 'not parked but off CPU: preempted, or released to the OS (I/O, sleep)';
    PS_HELP[2] = 'parked: waiting for a contended lock, a stop-the-world pause or a join';
    PS_HELP[3] = 'released: waiting for another thread (a lock\'s acquire, an event, a queue)'; PS_HELP[4] = 'no contention data';
    ftHeadings();
  }
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
  scopeThreads(); /* fold frames outside the traced code and idle threads; order the lanes */
  applyTheme(meta.theme);
  mkColors();
  nameW = new Float32Array(nF).fill(-1);
  mkHatch();
  ctx.font = FONT_B;
  var mw = 0;
  threads.forEach(function (th) { mw = Math.max(mw, ctx.measureText(th.name).width); });
  gutterW = Math.round(Math.max(130, Math.min(230, mw + 56)));
  $('gt-loading').hidden = true;
  buildHeader(); buildSummary(); scopeSummary(); buildBlame(); buildWhatIf(); buildLegend(); buildTopCtl(); details(null);
  /* inline (in a notebook's iframe) the lanes come first: the table folds to one line */
  var inFrame = false;
  try { inFrame = window.self !== window.top; } catch (e) { inFrame = true; }
  if (inFrame) { $('gt-overview').open = false; fitLanes = true; }
  $('gt-sumnote').textContent = '(' + plural(threads.length, 'thread') + ': held / waiting / released, off CPU, blame)';
  if (typeof ResizeObserver === 'function') new ResizeObserver(function () { resize(); }).observe(tl);
  else window.addEventListener('resize', resize);
  resize();
  perf.ready = performance.now();
  perf.firstFrameMs = perf.lastFrameMs;
  if (P.view === 'profile' || P.view === 'blame' || P.view === 'top' || (P.view === 'whatif' && P.what_if)) showTab(P.view);
  D.documentElement.setAttribute('data-gt-ready', String(Math.round(perf.ready))); /* for tests and benchmarks */
}
window.gtViewer = {
  perf: perf,
  view: function (a, b) { setView(a, b); },
  redraw: function () { var t = performance.now(); draw(); return performance.now() - t; },
  /* the Profile tab's drawn frames, for tests: [{name, x, w, row, y, h, split: [[state, x, w]]}] */
  profileFrames: function () {
    return pf.frames.map(function (fr) {
      return { name: pfName(fr.T, fr.i), x: fr.x, w: fr.w, row: fr.row, y: fr.row * PF_ROW, h: PF_ROW - 1,
        context: !!fr.ctx, total_ns: fr.T.total[fr.i], split: pfSegs(fr) };
    });
  },
  profileZoom: function () { var T = pfTree(); return pfName(T, Math.min(pf.zoom, T.n - 1)); },
  showTab: function (name) { showTab(name); },
  /* for tests: the view, the theme, the scope folds, lanes and a call's place on screen */
  range: function () { return [vs, ve]; },
  theme: function (mode) { if (mode) { applyTheme(mode); restyle(); } return { mode: themeMode, name: themeName, palette: C }; },
  palette: function () { return { gil: GIL_COL.slice(), os: OS_COL.slice(), profile: PS_COL.slice() }; },
  scopeFolded: function (on) { if (on != null) setScopeFolded(on); return scopeFolded; },
  lanes: function () {
    return threads.map(function (th) {
      return { name: th.name, tid: th.tid, pid: th.pid, idle: !!th.idle, hidden: !!th.hidden, outer: th.outer || 0, cut: th.cut, kept: th.kept, y0: th.y0, h: th.h,
        shownRows: th.nRows,
        rows: th.rows.map(function (r) { var n = []; for (var i = 0; i < Math.min(r.n, 50); i++) n.push(fName[r.f[i]]); return n; }) };
    });
  },
  /* client coordinates of the middle of thread `name`'s longest GIL interval in state q
   * (1 = waiting, or parked), the view zoomed to it; or null */
  gilAt: function (name, q) {
    var th = threads.filter(function (t) { return t.name === name && !t.hidden && t.gilY >= 0; })[0], best = -1;
    if (!th) return null;
    for (var i = 0; i < th.gil.n; i++) if (th.gil.st[i] === q && (best < 0 || th.gil.e[i] - th.gil.s[i] > th.gil.e[best] - th.gil.s[best])) best = i;
    if (best < 0) return null;
    var a = th.gil.s[best], b = th.gil.e[best], pad = (b - a) / 4 + 1;
    setView(a - pad, b + pad);
    if (th.gilY < tl.scrollTop || th.gilY + GIL_H > tl.scrollTop + H - AXIS_H) tl.scrollTop = Math.max(0, th.gilY - 40);
    draw();
    var bx = ov.getBoundingClientRect();
    return { x: bx.left + xOf((a + b) / 2), y: bx.top + AXIS_H + th.gilY - tl.scrollTop + GIL_H / 2, start: a, end: b };
  },
  handoffs: function () { return handoffsDrawn; },
  cuts: function () { return cutsDrawn.slice(); },
  plotWidth: function () { return plotW; },
  /* client coordinates of the middle of the longest call of `func` in thread `name`'s lane
   * (with a flag of `flags` set, when given: 16 = a packed record), or null */
  spanAt: function (name, func, flags) {
    var best = null;
    threads.forEach(function (th) {
      if (th.name !== name || th.hidden || th.collapsed) return;
      th.rows.forEach(function (r, d) {
        if (d >= th.nRows) return;
        for (var i = 0; i < r.n; i++) if (fName[r.f[i]] === func && (!flags || r.fl[i] & flags) && (!best || r.e[i] - r.s[i] > best.e - best.s)) best = { th: th, d: d, i: i, s: r.s[i], e: r.e[i] };
      });
    });
    if (!best) return null;
    var top = best.th.flameY + best.d * ROW_H;
    if (top < tl.scrollTop || top + ROW_H > tl.scrollTop + H - AXIS_H) { tl.scrollTop = Math.max(0, top - 40); draw(); }
    var a = Math.max(xOf(best.s), gutterW), b = Math.min(xOf(best.e), W), y = AXIS_H + top - tl.scrollTop + ROW_H / 2;
    var bx = ov.getBoundingClientRect();
    return { x: bx.left + (a + b) / 2, y: bx.top + y, start: best.s, end: best.e, visible: b > a && y > AXIS_H && y < H };
  }
};
function boot() {
  var hadData = /^\s*([{[]|[A-Za-z0-9+/]+={0,2}\s*$)/.test(raw); /* JSON, or base64 of it deflated */
  loadPayload().then(init, function (e) {
    $('gt-loading').hidden = true;
    showError(hadData ? 'Could not read the trace payload: ' + (e && e.message || e) : 'This page contains no trace data.');
  }).catch(function (e) { setTimeout(function () { throw e; }); }); /* to the window's error handler */
}
if (raw.length > 1500000 || (binEl && binEl.textContent.length > 1500000)) {
  var started = false;
  var go = function () { if (!started) { started = true; boot(); } };
  requestAnimationFrame(function () { setTimeout(go, 0); });
  setTimeout(go, 250);
} else {
  boot();
}
})();

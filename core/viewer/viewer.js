/* giltracer viewer: renders the payload in #gt-data (schema: core/viewer/README.md).
 * Vanilla ES2017, no dependencies, no network. Payload strings only go through
 * textContent or canvas fillText, never innerHTML. */
(function () {
'use strict';
var perf = { start: performance.now() };
var D = document;
function $(id) { return D.getElementById(id); }
function el(tag, cls, text, parent) {
  var e = D.createElement(tag);
  if (cls) e.className = cls;
  if (text != null) e.textContent = String(text);
  if (parent) parent.appendChild(e);
  return e;
}
var errBox = $('gt-errors');
function showError(msg) {
  errBox.hidden = false;
  el('div', null, msg, errBox);
}
window.addEventListener('error', function (ev) {
  if (/ResizeObserver/.test(ev.message)) return;
  showError('Viewer error: ' + (ev.message || ev) + (ev.lineno ? ' (line ' + ev.lineno + ')' : ''));
});

/* == formatting == */
function sig(v) {
  var a = Math.abs(v);
  return a >= 100 ? v.toFixed(0) : a >= 10 ? v.toFixed(1) : v.toFixed(2);
}
function fmtDur(ns) {
  if (ns == null || !isFinite(ns)) return '\u2014';
  var a = Math.abs(ns);
  if (a < 1e3) return Math.round(ns) + ' ns';
  if (a < 1e6) return sig(ns / 1e3) + ' \u00b5s';
  if (a < 1e9) return sig(ns / 1e6) + ' ms';
  return sig(ns / 1e9) + ' s';
}
function fmtInt(n) {
  return n == null || !isFinite(n) ? '\u2014' : String(Math.round(n)).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}
function fmtPct(p) {
  if (p == null || !isFinite(p)) return '\u2014';
  return (p === 0 || p >= 10 ? p.toFixed(0) : p.toFixed(1)) + '%';
}
var UNITS = [[1e9, 's'], [1e6, 'ms'], [1e3, '\u00b5s'], [1, 'ns']];
/* a timestamp (ns since trace start) with a precision fitting `step` */
function fmtTs(t, step) {
  var u = 3;
  while (u > 0 && step >= UNITS[u - 1][0]) u--;
  var dec = 0;
  while (u > 0 && Math.abs(t) / UNITS[u][0] >= 1e4) { u--; }
  var q = step / UNITS[u][0];
  while (q < 1 && dec < 9) { q *= 10; dec++; }
  if (Math.abs(q - Math.round(q)) > 1e-6 && dec < 9) dec++;
  return (t / UNITS[u][0]).toFixed(dec) + ' ' + UNITS[u][1];
}
function fmtAt(t) { return fmtTs(t, span > 1e7 ? 1000 : 1); }

/* == payload == */
var dataEl = $('gt-data');
var raw = dataEl ? dataEl.textContent : '';
var P, meta, fName, fFile, fLine, fIsC, nF, threads = [], byTid = {}, gilKnown, hasOS;
var tMin = 0, tMax = 1, span = 1;
var vs = 0, ve = 1;

function num(v, d) { v = +v; return isFinite(v) ? v : d; }
function lowerGT(a, v, lo, hi) { /* first i in [lo,hi) with a[i] > v */
  while (lo < hi) { var m = (lo + hi) >>> 1; if (a[m] > v) hi = m; else lo = m + 1; }
  return lo;
}
function lowerGE(a, v, lo, hi) { /* first i in [lo,hi) with a[i] >= v */
  while (lo < hi) { var m = (lo + hi) >>> 1; if (a[m] >= v) hi = m; else lo = m + 1; }
  return lo;
}
function arr(o, k) { return o && Array.isArray(o[k]) ? o[k] : []; }
function prefixMax(e) {
  var n = e.length, m = e, i;
  for (i = 1; i < n; i++) if (e[i] < e[i - 1]) break;
  if (i >= n) return e;
  m = new Float64Array(n);
  var x = -Infinity;
  for (i = 0; i < n; i++) { if (e[i] > x) x = e[i]; m[i] = x; }
  return m;
}
/* interval list (GIL or OS): typed arrays, per-state prefix sums and per-state lists */
function mkIv(o) {
  var S = arr(o, 'start'), Du = arr(o, 'dur'), St = arr(o, 'state');
  var n = Math.min(S.length, Du.length, St.length), i;
  var ord = null;
  for (i = 1; i < n; i++) if (+S[i] < +S[i - 1]) break;
  if (i < n) { ord = []; for (i = 0; i < n; i++) ord.push(i); ord.sort(function (a, b) { return S[a] - S[b]; }); }
  var s = new Float64Array(n), e = new Float64Array(n), st = new Uint8Array(n);
  var cum = [new Float64Array(n + 1), new Float64Array(n + 1), new Float64Array(n + 1)];
  var cnt = [0, 0, 0];
  for (i = 0; i < n; i++) {
    var j = ord ? ord[i] : i, x = num(S[j], 0), d = Math.max(0, num(Du[j], 0)), q = St[j] | 0;
    if (q < 0 || q > 2) q = 0;
    s[i] = x; e[i] = x + d; st[i] = q; cnt[q]++;
    for (var k = 0; k < 3; k++) cum[k][i + 1] = cum[k][i] + (k === q ? d : 0);
  }
  var by = [];
  for (var q2 = 0; q2 < 3; q2++) by.push({ s: new Float64Array(cnt[q2]), e: new Float64Array(cnt[q2]), n: 0 });
  for (i = 0; i < n; i++) { var b = by[st[i]]; b.s[b.n] = s[i]; b.e[b.n] = e[i]; b.n++; }
  return { n: n, s: s, e: e, st: st, me: prefixMax(e), cum: cum, by: by };
}

function prepThread(t, idx) {
  t = t || {};
  var th = {
    idx: idx, tid: t.tid == null ? '?' : t.tid, name: t.name == null || t.name === '' ? 'thread ' + (t.tid == null ? idx : t.tid) : String(t.name),
    sum: t.summary || {}, start: num(t.start, 0), end: num(t.end, 0),
    gil: mkIv(t.gil), os: mkIv(t.os), rows: [], nSpans: 0, collapsed: false,
    y0: 0, h: 0, gilY: -1, osY: -1, flameY: 0, stats: null
  };
  var sp = t.spans || {};
  var S = arr(sp, 'start'), Du = arr(sp, 'dur'), Fu = arr(sp, 'func'), De = arr(sp, 'depth'), Fl = arr(sp, 'flags');
  var n = Math.min(S.length, Du.length, Fu.length, De.length), i, d;
  th.nSpans = n;
  var cnt = [];
  for (i = 0; i < n; i++) { d = De[i] | 0; if (d < 0) d = 0; while (cnt.length <= d) cnt.push(0); cnt[d]++; }
  for (d = 0; d < cnt.length; d++) {
    th.rows.push({ s: new Float64Array(cnt[d]), e: new Float64Array(cnt[d]), f: new Int32Array(cnt[d]),
      fl: new Uint8Array(cnt[d]), me: null, pre: null, n: 0 });
  }
  /* per-function stats in one pre-order pass: calls, total (recursion counted once), self */
  var stack = new Int32Array(cnt.length + 1), sp0 = 0;
  var touched = [];
  var maxE = th.end;
  for (i = 0; i < n; i++) {
    d = De[i] | 0; if (d < 0) d = 0;
    var f = Fu[i] | 0; if (f < 0 || f >= nF) f = nF - 1;
    var s = num(S[i], 0), du = Math.max(0, num(Du[i], 0)), fl = Fl[i] | 0;
    if (f >= 0 && fIsC[f]) fl |= 8;
    var r = th.rows[d], j = r.n++;
    r.s[j] = s; r.e[j] = s + du; r.f[j] = f; r.fl[j] = fl;
    if (s + du > maxE) maxE = s + du;
    while (sp0 > d) { sp0--; if (stack[sp0] >= 0) scActive[stack[sp0]]--; }
    while (sp0 < d) stack[sp0++] = -1;
    if (d > 0 && stack[d - 1] >= 0) scSelf[stack[d - 1]] -= du;
    if (scCount[f] === 0) touched.push(f);
    scCount[f]++; scSelf[f] += du;
    if (scActive[f] === 0) scTotal[f] += du;
    scActive[f]++;
    stack[sp0++] = f;
  }
  while (sp0 > 0) { sp0--; if (stack[sp0] >= 0) scActive[stack[sp0]]--; }
  touched.sort(function (a, b) { return a - b; });
  var st = { f: new Int32Array(touched.length), n: new Float64Array(touched.length),
    tot: new Float64Array(touched.length), self: new Float64Array(touched.length) };
  touched.forEach(function (f, k) {
    st.f[k] = f; st.n[k] = scCount[f]; st.tot[k] = scTotal[f]; st.self[k] = Math.max(0, scSelf[f]);
    scCount[f] = 0; scTotal[f] = 0; scSelf[f] = 0; scActive[f] = 0;
  });
  th.stats = st;
  th.rows.forEach(function (r) {
    for (i = 1; i < r.n; i++) if (r.s[i] < r.s[i - 1]) break;
    if (i < r.n) sortRow(r);
    r.me = prefixMax(r.e);
  });
  [th.gil, th.os].forEach(function (iv) { if (iv.n && iv.e[iv.n - 1] > maxE) maxE = iv.me[iv.n - 1]; });
  th.maxE = maxE;
  return th;
}
var scCount, scTotal, scSelf, scActive;
function sortRow(r) {
  var o = [], i;
  for (i = 0; i < r.n; i++) o.push(i);
  o.sort(function (a, b) { return r.s[a] - r.s[b]; });
  ['s', 'e', 'f', 'fl'].forEach(function (k) {
    var a = r[k], b = new a.constructor(a.length);
    for (i = 0; i < o.length; i++) b[i] = a[o[i]];
    r[k] = b;
  });
}

/* == colors == */
var GIL_COL = ['#dee2e6', '#e03131', '#2f9e44'], GIL_NAME = ['released', 'waiting for the GIL', 'holding the GIL'];
var OS_COL = ['#339af0', '#f08c00', '#c5cbd3'], OS_NAME = ['on CPU', 'preempted (runnable, off CPU)', 'blocked (sleeping)'];
var GIL_ORDER = [2, 1, 0], OS_ORDER = [0, 1, 2];
var DIM = '#e9ebee', colPy, colC;
function hash(s) {
  var h = 2166136261;
  for (var i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 16777619); }
  return h >>> 0;
}
function mkColors() {
  /* stable hue from the name; the 16 busiest functions are nudged apart so they stay distinguishable */
  colPy = new Array(nF); colC = new Array(nF);
  var self = new Float64Array(nF), ord = [], used = [], i;
  threads.forEach(function (th) { for (var k = 0; k < th.stats.f.length; k++) self[th.stats.f[k]] += th.stats.self[k]; });
  for (i = 0; i < nF; i++) ord.push(i);
  ord.sort(function (a, b) { return self[b] - self[a]; });
  ord.forEach(function (f, rank) {
    var h = hash(fName[f] + '\u0000' + fFile[f]), hue = h % 360, tries = 0;
    var clash = function (x) { return used.some(function (u) { var d = Math.abs(u - x) % 360; return Math.min(d, 360 - d) < 24; }); };
    if (rank < 16 && !fIsC[f]) { while (clash(hue) && tries++ < 15) hue = (hue + 137) % 360; used.push(hue); }
    var l = 70 + ((h >>> 10) % 8), sat = 55 + ((h >>> 16) % 20);
    colPy[f] = 'hsl(' + hue + ',' + sat + '%,' + l + '%)';
    colC[f] = 'hsl(' + hue + ',28%,88%)';
  });
}

/* == DOM: header, banners, tables == */
function kv(parent, k, v, title) {
  if (parent.childNodes.length) el('span', 'gt-dot', '\u00b7', parent);
  var s = el('span', null, null, parent);
  if (k) s.appendChild(D.createTextNode(k + ' '));
  el('b', null, v, s);
  if (title) s.title = title;
  return s;
}
function buildHeader() {
  $('gt-title').textContent = meta.title || 'trace';
  $('gt-title').title = meta.title || '';
  var st = $('gt-stats');
  var nSp = threads.reduce(function (a, t) { return a + t.nSpans; }, 0);
  el('b', null, fmtDur(num(meta.duration_ns, span)), st);
  st.appendChild(D.createTextNode(' \u00b7 ' + plural(threads.length, 'thread') + ' \u00b7 ' + plural(nSp, 'call')));
  var m = $('gt-meta');
  var be = kv(m, 'GIL probe:', String(meta.backend || '?'), meta.backend_reason || '');
  if (meta.backend_reason) be.appendChild(D.createTextNode(' (' + meta.backend_reason + ')'));
  kv(m, 'OS states:', String(meta.sched || 'unknown'), meta.sched || '');
  if (meta.python) kv(m, 'Python', String(meta.python), String(meta.python));
  if (meta.pid != null) kv(m, 'pid', String(meta.pid));
  kv(m, 'events', fmtInt(num(meta.event_count, 0)));
  m.title = m.textContent;
  var b = $('gt-banners');
  function banner(cls, strong, text) {
    var d = el('div', 'gt-banner ' + cls, null, b);
    el('b', null, strong, d);
    d.appendChild(D.createTextNode(' ' + text));
  }
  var de = num(meta.dropped_events, 0), gd = num(meta.gil_dropped, 0), sl = num(meta.sched_lost, 0);
  if (de > 0) banner('gt-warn', '\u26a0 ' + fmtInt(de) + ' call events were dropped',
    '(--max-events reached): the call trace is incomplete; GIL states are still complete.');
  var cap = num(meta.max_events, 0) > 0 ? ' (max_events=' + fmtInt(num(meta.max_events, 0)) + ' reached, or lost):' : ' (lost):';
  if (gd > 0) banner('gt-warn', '\u26a0 ' + fmtInt(gd) + ' GIL events were not recorded' + cap, 'GIL states, percentages and blame may be inaccurate.');
  if (meta.tracer_note) banner('gt-warn', '\u26a0 Some threads were not fully traced:', String(meta.tracer_note));
  if (sl > 0) banner('gt-warn', '\u26a0 ' + fmtInt(sl) + ' scheduler records were not recorded' + cap, 'OS states may have gaps.');
  if (!gilKnown) banner('gt-note', '\u2139 GIL state unknown.',
    (meta.backend_reason ? String(meta.backend_reason) + '. ' : '') + 'No GIL strips or GIL percentages; calls' +
    (hasOS ? ' and OS states' : '') + ' are shown.');
}

function cell(tr, text, cls, title) {
  var td = el('td', cls, text, tr);
  if (title) td.title = title;
  return td;
}
function emptyRow(tb, text, cols) { el('td', null, text, el('tr', 'gt-empty', null, tb)).colSpan = cols; }
function plural(n, w) { return fmtInt(n) + ' ' + w + (n === 1 ? '' : 's'); }
function thead(tbl, cols) {
  var tr = el('tr', null, null, el('thead', null, null, tbl));
  return cols.map(function (c) { return el('th', c[1] || null, c[0], tr); });
}
function gilBar(parent, s) {
  var bar = el('span', 'gt-bar', null, parent), w = num(s.wall_ns, 0) || 1;
  [[2, s.held_ns], [1, s.wait_ns], [0, s.released_ns]].forEach(function (p) {
    var i = el('i', 'gt-b' + p[0], null, bar);
    i.style.width = Math.max(0, Math.min(100, 100 * num(p[1], 0) / w)) + '%';
  });
  bar.title = 'held ' + fmtPct(s.held_pct) + ', waiting ' + fmtPct(s.wait_pct) + ', released ' + fmtPct(s.released_pct);
}
var sumRows = [];
function buildSummary() {
  var tbl = $('gt-summary');
  var hd = thead(tbl, [['Thread'], ['TID', 'n'], ['Wall', 'n'], ['GIL'], ['Held', 'n'], ['Wait', 'n'],
    ['Released', 'n'], ['Off-CPU', 'n'], ['Acq.', 'n'], ['Longest wait', 'n'], ['Waited mostly on', 'fill']]);
  hd[10].title = 'the GIL holder and function this thread waited on most (GIL blame)';
  hd[3].title = 'held / waiting / released, as a share of the thread\'s traced life';
  hd[8].title = 'GIL acquisitions';
  var top = {};
  (Array.isArray(P.blame) ? P.blame : []).forEach(function (r) {
    var w = r.waiter, t = top[w] || (top[w] = { tot: 0, best: null });
    t.tot += num(r.wait_ns, 0);
    if (!t.best || num(r.wait_ns, 0) > num(t.best.wait_ns, 0)) t.best = r;
  });
  var tb = el('tbody', null, null, tbl);
  if (!threads.length) emptyRow(tb, 'No threads were traced.', 11);
  threads.forEach(function (th) {
    var s = th.sum, tr = el('tr', null, null, tb);
    cell(tr, th.name, 'nm', th.name);
    cell(tr, th.tid, 'n');
    cell(tr, fmtDur(num(s.wall_ns, th.end - th.start)), 'n');
    var bc = el('td', null, null, tr);
    if (gilKnown) gilBar(bc, s); else bc.textContent = 'unknown';
    ['held', 'wait', 'released'].forEach(function (q) {
      cell(tr, gilKnown ? fmtPct(s[q + '_pct']) : '\u2014', 'n', gilKnown ? fmtDur(s[q + '_ns']) : '');
    });
    var off = s.off_cpu_ns == null ? null : 100 * s.off_cpu_ns / (num(s.wall_ns, 0) || 1);
    cell(tr, fmtPct(off), 'n', s.off_cpu_ns == null ? 'no OS-state data' :
      fmtDur(s.off_cpu_ns) + ' off CPU' + (s.preempted_ns != null ? ', of which ' + fmtDur(s.preempted_ns) + ' preempted' : ''));
    cell(tr, gilKnown ? fmtInt(s.acquisitions) : '\u2014', 'n');
    cell(tr, gilKnown ? fmtDur(s.longest_wait_ns) : '\u2014', 'n',
      s.drop_requests ? fmtInt(s.drop_requests) + ' drop requests' : '');
    var tb2 = top[th.tid], b = tb2 && tb2.best, bf = b ? (b.func == null ? -1 : b.func | 0) : -1;
    cell(tr, b ? '\u2190 ' + thName(b.holder) + ' in ' + fnLabel(bf) + ' (' + fmtPct(100 * num(b.wait_ns, 0) / (tb2.tot || 1)) + ')' :
      (gilKnown ? '\u2014' : ''), 'fill', b ? fmtDur(b.wait_ns) + ' of ' + fmtDur(tb2.tot) + ' blamed wait; see the GIL blame tab' : '');
    tr.addEventListener('click', function () { selectThread(th.idx, true); });
    sumRows.push(tr);
  });
}
function thName(tid) { var t = byTid[tid]; return t ? t.name : 'tid ' + tid; }
function fnLabel(f) { return f >= 0 && f < nF ? fName[f] : f === -2 ? 'unknown (calls truncated: max_events)' : '(no Python function)'; }
function fnLoc(f) {
  if (f < 0 || f >= nF) return '';
  return fFile[f] ? fFile[f] + (fLine[f] ? ':' + fLine[f] : '') : (fIsC[f] ? 'C function' : '');
}
function shortLoc(f) {
  var l = fnLoc(f), i = l.lastIndexOf('/');
  return i >= 0 ? l.slice(i + 1) : l;
}
function shareBar(td, frac) {
  var bar = el('span', 'gt-bar gt-bar-s', null, td), i = el('i', 'gt-b1', null, bar);
  i.style.width = Math.max(0, Math.min(100, 100 * frac)) + '%';
  td.appendChild(D.createTextNode(' ' + fmtPct(100 * frac)));
}
function buildBlame() {
  var tbl = $('gt-blame'), rows = Array.isArray(P.blame) ? P.blame.slice() : [];
  thead(tbl, [['Waiter'], ['Holder'], ['Holder was in'], ['Location'], ['Wait', 'n'], ['Count', 'n'], ['Avg wait', 'n'],
    ['Share', 'n']]);
  var tb = el('tbody', null, null, tbl);
  rows.sort(function (a, b) { return num(b.wait_ns, 0) - num(a.wait_ns, 0); });
  var N = 300;
  if (!rows.length) emptyRow(tb, gilKnown ? 'No thread waited for the GIL.' : 'GIL state unknown: no blame.', 8);
  rows.slice(0, N).forEach(function (r) {
    var tr = el('tr', null, null, tb), f = r.func == null ? -1 : r.func | 0;
    cell(tr, thName(r.waiter), 'nm');
    cell(tr, '\u2190 ' + thName(r.holder), 'nm');
    var fc = cell(tr, fnLabel(f), 'nm' + (f < 0 ? ' gt-muted' : ''), fnLoc(f));
    if (f >= 0 && fIsC[f]) fc.className += ' gt-c';
    cell(tr, shortLoc(f), 'nm gt-muted', fnLoc(f));
    cell(tr, fmtDur(num(r.wait_ns, 0)), 'n');
    cell(tr, fmtInt(num(r.count, 0)), 'n');
    cell(tr, num(r.count, 0) > 0 ? fmtDur(num(r.wait_ns, 0) / num(r.count, 1)) : '\u2014', 'n');
    var w = byTid[r.waiter], tot = w ? num(w.sum.wait_ns, 0) : 0;
    var sc = cell(tr, tot > 0 ? null : '\u2014', 'n', 'of ' + thName(r.waiter) + "'s total GIL wait");
    if (tot > 0) shareBar(sc, num(r.wait_ns, 0) / tot);
    tr.title = 'Click to highlight ' + fnLabel(f);
    tr.addEventListener('click', function () { if (f >= 0) setSearch(fName[f]); if (byTid[r.holder]) selectThread(byTid[r.holder].idx, true); });
  });
  if (rows.length > N) emptyRow(tb, (rows.length - N) + ' more rows not shown', 8);
}
function buildLegend() {
  var lg = $('gt-legend');
  function group(name) { el('span', 'g', name, lg); }
  function sw(col, text, cls) {
    var s = el('span', null, null, lg), w = el('i', 'gt-sw' + (cls ? ' ' + cls : ''), null, s);
    if (col) w.style.background = col;
    s.appendChild(D.createTextNode(text));
  }
  if (gilKnown) { group('GIL'); sw(GIL_COL[2], 'held'); sw(GIL_COL[1], 'waiting'); sw(GIL_COL[0], 'released'); }
  if (hasOS) { group('OS'); sw(OS_COL[0], 'on CPU'); sw(OS_COL[1], 'preempted'); sw(OS_COL[2], 'blocked'); }
  group('Calls'); sw(null, 'Python (color = function)', 'gt-swp'); sw(null, 'C function', 'gt-swc');
  sw('#333', 'clipped edge'); sw('#e03131', 'exception');
}

/* == timeline state & layout == */
var tl = $('gt-tl'), stick = $('gt-stick'), cv = $('gt-cv'), ov = $('gt-ov'), tip = $('gt-tip'), spacer = $('gt-spacer');
var ctx = cv.getContext('2d'), octx = ov.getContext('2d');
var W = 300, H = 200, dpr = 1, gutterW = 150, plotW = 150;
var AXIS_H = 24, ROW_H = 16, GIL_H = 10, OS_H = 6, PAD = 5, MINW = 2;
var FAM = 'system-ui,-apple-system,"Segoe UI",Roboto,Arial,sans-serif', FONT = '11px ' + FAM, FONT_B = '600 12px ' + FAM;
var contentH = 0, selThread = -1, selSpan = null, hover = null, mouse = null, rangeSel = null;
var nameW = null, ELL_W = 8, hatch = null, searchQ = '';

function layout() {
  var y = 0;
  threads.forEach(function (th) {
    th.y0 = y;
    var yy = y + PAD;
    if (gilKnown) { th.gilY = yy; yy += GIL_H + 2; } else th.gilY = -1;
    if (hasOS) { th.osY = yy; yy += OS_H + 3; } else th.osY = -1;
    if (!gilKnown && !hasOS) yy += 2;
    th.flameY = yy;
    var rows = th.collapsed ? 0 : Math.max(1, th.rows.length);
    th.h = Math.max(yy + rows * ROW_H + PAD - y, 36);
    y += th.h + 1;
  });
  contentH = y;
  spacer.style.height = Math.max(0, AXIS_H + contentH + 8 - H) + 'px';
}
function resize() {
  var w = tl.clientWidth, h = tl.clientHeight;
  if (w < 10 || h < 10) return;
  dpr = window.devicePixelRatio || 1;
  W = w; H = h;
  stick.style.height = H + 'px';
  [cv, ov].forEach(function (c) {
    c.width = Math.round(W * dpr); c.height = Math.round(H * dpr);
    c.style.width = W + 'px'; c.style.height = H + 'px';
  });
  plotW = Math.max(20, W - gutterW);
  layout();
  draw();
}
function clampView() {
  var w = ve - vs, minW = 20;
  if (w < minW) { var c = (vs + ve) / 2; vs = c - minW / 2; ve = c + minW / 2; w = minW; }
  if (w >= span) { vs = tMin; ve = tMax; return; }
  if (vs < tMin) { vs = tMin; ve = vs + w; }
  if (ve > tMax) { ve = tMax; vs = ve - w; }
}
function setView(a, b) { vs = a; ve = b; clampView(); requestDraw(); }
function zoomAt(t, f) {
  var w = ve - vs, nw = Math.min(span, Math.max(20, w * f));
  setView(t - (t - vs) * nw / w, t - (t - vs) * nw / w + nw);
}
function pan(dt) { setView(vs + dt, ve + dt); }
function xOf(t) { return gutterW + (t - vs) * plotW / (ve - vs); }
function tOf(x) { return vs + (x - gutterW) * (ve - vs) / plotW; }

var pending = false;
function requestDraw() {
  if (pending) return;
  pending = true;
  requestAnimationFrame(function () { pending = false; draw(); });
}

/* == drawing == */
function niceStep(x) {
  var p = Math.pow(10, Math.floor(Math.log10(x))), m = x / p;
  return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}
/* Sub-pixel aggregation: from the narrow item i, swallow the following items that start
 * before the run's right pixel edge (extending it by narrow ones) with binary searches, so a
 * frame costs O(pixels * log n) however many items fall into the view. Returns the end index;
 * the run's right edge is left in mPx. */
var mPx = 0;
function merge(s, e, me, n, i, px1, k) {
  var X0 = gutterW, j = i + 1, last;
  for (;;) {
    j = lowerGE(s, vs + (px1 - X0) / k, j, n);
    last = j - 1;
    if (last > i && X0 + (me[last] - vs) * k > px1) {
      if ((e[last] - s[last]) * k < MINW) { px1 = Math.ceil(X0 + (me[last] - vs) * k); continue; }
      j = last;
    }
    break;
  }
  mPx = px1;
  return j;
}
function drawIv(c, iv, y, h, pal, order, k) {
  var s = iv.s, e = iv.e, st = iv.st, me = iv.me, n = iv.n, cum = iv.cum;
  if (!n) return;
  var X0 = gutterW, i = lowerGT(me, vs, 0, n);
  while (i < n && s[i] < ve) {
    var x0 = X0 + (s[i] - vs) * k, x1 = X0 + (e[i] - vs) * k;
    if (x1 - x0 >= MINW) {
      var a = Math.max(Math.round(x0), X0 - 1), b = Math.min(Math.round(x1), W + 1);
      c.fillStyle = pal[st[i]];
      c.fillRect(a, y, Math.max(1, b - a), h);
      i++;
      continue;
    }
    var px0 = Math.floor(x0), j = merge(s, e, me, n, i, Math.max(px0 + 1, Math.ceil(x1)), k), px1 = mPx;
    if (j === i + 1) { c.fillStyle = pal[st[i]]; c.fillRect(px0, y, px1 - px0, h); }
    else {
      var tot = 0, q, yy = y, acc = 0;
      for (q = 0; q < 3; q++) tot += cum[q][j] - cum[q][i];
      for (var oi = 0; oi < 3 && tot > 0; oi++) {
        q = order[oi];
        var part = cum[q][j] - cum[q][i];
        if (part <= 0) continue;
        acc += part;
        var ny = y + Math.round(h * acc / tot);
        if (ny > yy) { c.fillStyle = pal[q]; c.fillRect(px0, yy, px1 - px0, ny - yy); }
        yy = ny;
      }
    }
    i = j;
  }
}
function label(c, f, avail) {
  var w = nameW[f];
  if (w < 0) w = nameW[f] = c.measureText(fName[f]).width;
  if (w <= avail) return fName[f];
  var nch = Math.floor(fName[f].length * (avail - ELL_W) / w);
  return nch < 1 ? '' : fName[f].slice(0, nch) + '\u2026';
}
function drawRow(c, r, y, k) {
  var s = r.s, e = r.e, me = r.me, f = r.f, fl = r.fl, n = r.n, pre = r.pre, X0 = gutterW, h = ROW_H - 1;
  var i = lowerGT(me, vs, 0, n), cur = null, col;
  while (i < n && s[i] < ve) {
    var x0 = X0 + (s[i] - vs) * k, x1 = X0 + (e[i] - vs) * k, fi = f[i], isC = fl[i] & 8;
    var match = !pre || pre[i + 1] > pre[i];
    if (x1 - x0 >= MINW) {
      var a = Math.max(Math.round(x0), X0 - 2), b = Math.min(Math.round(x1), W + 2);
      var w = Math.max(1, b - a - (x1 - x0 > 5 ? 1 : 0));
      c.fillStyle = cur = match ? (isC ? colC[fi] : colPy[fi]) : DIM;
      c.fillRect(a, y, w, h);
      if (isC && match && w > 2) { c.fillStyle = hatch; c.fillRect(a, y, w, h); cur = null; }
      if (fl[i] & 7 && w > 4) {
        c.fillStyle = '#333'; cur = null;
        if (fl[i] & 1 && x0 >= X0 - 1) c.fillRect(a, y, 2, h);
        if (fl[i] & 2 && x1 <= W + 1) c.fillRect(a + w - 2, y, 2, h);
        if (fl[i] & 4) {
          c.fillStyle = '#e03131'; c.beginPath();
          c.moveTo(a + w, y); c.lineTo(a + w, y + 7); c.lineTo(a + w - 7, y); c.fill();
        }
      }
      if (w > 24) {
        var lx = Math.max(a, X0) + 3, avail = Math.min(a + w, W) - lx - 3;
        if (avail > 12) {
          var t = label(c, fi, avail);
          if (t) { c.fillStyle = match ? (isC ? '#3d4650' : '#15191e') : '#9aa1a9'; c.fillText(t, lx, y + 11.5); cur = null; }
        }
      }
      i++;
      continue;
    }
    var px0 = Math.floor(x0), j = merge(s, e, me, n, i, Math.max(px0 + 1, Math.ceil(x1)), k), px1 = mPx;
    if (pre) match = pre[j] > pre[i];
    col = match ? (isC ? colC[fi] : colPy[fi]) : DIM;
    if (col !== cur) c.fillStyle = cur = col; /* parsing a color string per rect is costly */
    c.fillRect(px0, y, px1 - px0, h);
    i = j;
  }
}
function draw() {
  var t0 = performance.now();
  var c = ctx, sy = tl.scrollTop, k = plotW / (ve - vs);
  c.setTransform(dpr, 0, 0, dpr, 0, 0);
  c.fillStyle = '#fff'; c.fillRect(0, 0, W, H);
  c.font = FONT; c.textBaseline = 'alphabetic';
  var step = niceStep((ve - vs) / Math.max(2, plotW / 110)), first = Math.ceil(vs / step) * step, t;
  c.save();
  c.beginPath(); c.rect(gutterW, AXIS_H, plotW, H - AXIS_H); c.clip();
  threads.forEach(function (th) {
    var y = AXIS_H + th.y0 - sy;
    if (y > H || y + th.h < AXIS_H) return;
    if (th.idx === selThread) { c.fillStyle = '#fff8dc'; c.fillRect(gutterW, y, plotW, th.h); }
    else if (th.idx % 2) { c.fillStyle = '#fbfbfc'; c.fillRect(gutterW, y, plotW, th.h); }
  });
  c.fillStyle = '#eef0f3';
  for (t = first; t <= ve; t += step) c.fillRect(Math.round(xOf(t)), AXIS_H, 1, H - AXIS_H);
  threads.forEach(function (th) {
    var y = AXIS_H + th.y0 - sy;
    if (y > H || y + th.h < AXIS_H) return;
    if (th.gilY >= 0) {
      c.fillStyle = '#f3f4f6'; c.fillRect(gutterW, AXIS_H + th.gilY - sy, plotW, GIL_H);
      drawIv(c, th.gil, AXIS_H + th.gilY - sy, GIL_H, GIL_COL, GIL_ORDER, k);
    }
    if (th.osY >= 0) {
      c.fillStyle = '#f3f4f6'; c.fillRect(gutterW, AXIS_H + th.osY - sy, plotW, OS_H);
      drawIv(c, th.os, AXIS_H + th.osY - sy, OS_H, OS_COL, OS_ORDER, k);
    }
    if (!th.collapsed) {
      var fy = AXIS_H + th.flameY - sy;
      if (!th.nSpans) {
        c.fillStyle = '#8c959f';
        c.fillText('no calls recorded in this thread', gutterW + 6, fy + 11.5);
      }
      var d0 = Math.max(0, Math.floor((AXIS_H - fy) / ROW_H)), d1 = Math.min(th.rows.length, Math.ceil((H - fy) / ROW_H));
      for (var d = d0; d < d1; d++) drawRow(c, th.rows[d], fy + d * ROW_H, k);
    }
    c.fillStyle = '#d8dde3'; c.fillRect(gutterW, y + th.h, plotW, 1);
  });
  c.restore();
  /* gutter */
  c.fillStyle = '#f6f8fa'; c.fillRect(0, AXIS_H, gutterW, H - AXIS_H);
  threads.forEach(function (th) {
    var y0 = AXIS_H + th.y0 - sy;
    if (y0 > H || y0 + th.h < AXIS_H) return;
    if (th.idx === selThread) { c.fillStyle = '#fff1c2'; c.fillRect(0, y0, gutterW, th.h); c.fillStyle = '#0969da'; c.fillRect(0, y0, 3, th.h); }
    c.fillStyle = '#d8dde3'; c.fillRect(0, y0 + th.h, gutterW, 1);
    var y = Math.max(y0, Math.min(AXIS_H, y0 + th.h - 36)); /* the name sticks while the lane is visible */
    c.fillStyle = '#57606a'; c.font = '10px ' + FAM;
    c.fillText(th.collapsed ? '\u25b8' : '\u25be', 7, y + 17);
    c.font = FONT_B; c.fillStyle = '#1f2328';
    var nm = th.name, avail = gutterW - 24 - 30, wN = c.measureText(nm).width;
    if (wN > avail) { var nn = Math.max(1, Math.floor(nm.length * (avail - 10) / wN)); nm = nm.slice(0, nn) + '\u2026'; }
    c.fillText(nm, 18, y + 17);
    c.font = FONT; c.fillStyle = '#656d76';
    var sub = 'tid ' + th.tid;
    if (gilKnown && th.sum.held_pct != null) sub += ' \u00b7 held ' + fmtPct(th.sum.held_pct);
    c.fillText(sub, 18, y + 31);
    c.font = '9px ' + FAM; c.textAlign = 'right'; c.fillStyle = '#8c959f';
    if (th.gilY >= 0) c.fillText('GIL', gutterW - 5, AXIS_H + th.gilY - sy + 8.5);
    if (th.osY >= 0) c.fillText('OS', gutterW - 5, AXIS_H + th.osY - sy + 6);
    c.textAlign = 'left';
  });
  c.fillStyle = '#d0d7de'; c.fillRect(gutterW - 1, AXIS_H, 1, H - AXIS_H);
  if (!threads.length) {
    c.font = '13px ' + FAM; c.fillStyle = '#656d76';
    c.fillText('No threads were traced.', gutterW + 16, AXIS_H + 30);
  }
  /* axis */
  c.font = FONT;
  c.fillStyle = '#fff'; c.fillRect(0, 0, W, AXIS_H);
  c.fillStyle = '#d0d7de'; c.fillRect(0, AXIS_H - 1, W, 1);
  c.save(); c.beginPath(); c.rect(gutterW, 0, plotW, AXIS_H); c.clip();
  for (t = first; t <= ve; t += step) {
    var x = Math.round(xOf(t));
    c.fillStyle = '#8c959f'; c.fillRect(x, AXIS_H - 7, 1, 6);
    c.fillStyle = '#424a53'; c.fillText(fmtTs(t, step), x + 3, 14);
  }
  c.restore();
  c.fillStyle = '#656d76';
  c.fillText('time \u2192', 8, 15);
  $('gt-range').textContent = 'Visible ' + fmtDur(ve - vs) + (ve - vs < span ? ' of ' + fmtDur(span) : '');
  perf.lastFrameMs = performance.now() - t0;
  drawOverlay();
}

/* overlay: hover outline, selection, cursor line, range selection */
function spanRect(th, d, i) {
  var r = th.rows[d], y = AXIS_H + th.flameY + d * ROW_H - tl.scrollTop;
  var a = Math.max(gutterW - 4, xOf(r.s[i])), b = Math.min(W + 4, xOf(r.e[i]));
  return { x: a, y: y, w: Math.max(1, b - a), h: ROW_H - 1 };
}
function drawOverlay() {
  var c = octx;
  c.setTransform(dpr, 0, 0, dpr, 0, 0);
  c.clearRect(0, 0, W, H);
  c.save(); c.beginPath(); c.rect(gutterW, AXIS_H, plotW, H - AXIS_H); c.clip();
  if (hover && hover.kind === 'span') {
    var q = spanRect(threads[hover.th], hover.d, hover.i);
    c.strokeStyle = 'rgba(0,0,0,.55)'; c.lineWidth = 1; c.strokeRect(q.x + 0.5, q.y + 0.5, q.w - 1, q.h - 1);
  }
  if (hover && (hover.kind === 'gil' || hover.kind === 'os')) {
    var th = threads[hover.th], iv = th[hover.kind];
    var y = AXIS_H + (hover.kind === 'gil' ? th.gilY : th.osY) - tl.scrollTop, hh = hover.kind === 'gil' ? GIL_H : OS_H;
    var a = Math.max(gutterW - 4, xOf(iv.s[hover.i])), b = Math.min(W + 4, xOf(iv.e[hover.i]));
    c.strokeStyle = '#111'; c.lineWidth = 1.5; c.strokeRect(a, y - 1, Math.max(1, b - a), hh + 2);
  }
  if (selSpan && selSpan.th < threads.length) {
    var r = spanRect(threads[selSpan.th], selSpan.d, selSpan.i);
    c.strokeStyle = '#0969da'; c.lineWidth = 2; c.strokeRect(r.x + 1, r.y + 1, Math.max(1, r.w - 2), r.h - 2);
  }
  c.restore();
  if (rangeSel) {
    var x0 = Math.min(rangeSel.x0, rangeSel.x1), x1 = Math.max(rangeSel.x0, rangeSel.x1);
    c.fillStyle = 'rgba(9,105,218,.12)'; c.fillRect(x0, 0, x1 - x0, H);
    c.fillStyle = '#0969da'; c.fillRect(x0, 0, 1, H); c.fillRect(x1, 0, 1, H);
    pill(c, fmtDur(Math.abs(tOf(x1) - tOf(x0))), (x0 + x1) / 2, true);
  } else if (mouse && mouse.x > gutterW) {
    c.fillStyle = 'rgba(31,35,40,.35)'; c.fillRect(Math.round(mouse.x), AXIS_H, 1, H - AXIS_H);
    pill(c, fmtTs(tOf(mouse.x), (ve - vs) / plotW), mouse.x, false);
  }
}
function pill(c, text, x, center) {
  c.font = FONT;
  var w = c.measureText(text).width + 8, lx = center ? x - w / 2 : x + 4;
  lx = Math.max(gutterW, Math.min(W - w - 1, lx));
  c.fillStyle = '#1f2328'; c.fillRect(lx, 3, w, 16);
  c.fillStyle = '#fff'; c.fillText(text, lx + 4, 15);
}

/* == hit testing == */
function findIn(s, e, me, n, t, tol) {
  var i = lowerGT(me, t - tol, 0, n), best = -1, bd = Infinity;
  for (var j = i; j < n && s[j] <= t + tol; j++) {
    var dd = t < s[j] ? s[j] - t : t > e[j] ? t - e[j] : 0;
    if (dd < bd) { bd = dd; best = j; if (!dd) break; }
  }
  return best;
}
function threadAt(y) {
  var cy = y - AXIS_H + tl.scrollTop;
  for (var i = 0; i < threads.length; i++) if (cy >= threads[i].y0 && cy < threads[i].y0 + threads[i].h + 1) return i;
  return -1;
}
function hit(x, y) {
  if (y < AXIS_H) return { kind: 'axis' };
  var ti = threadAt(y);
  if (ti < 0) return null;
  if (x < gutterW) return { kind: 'gutter', th: ti };
  var th = threads[ti], cy = y - AXIS_H + tl.scrollTop, t = tOf(x), tol = 3 * (ve - vs) / plotW, i;
  if (th.gilY >= 0 && cy >= th.gilY - 1 && cy < th.gilY + GIL_H + 1) {
    i = findIn(th.gil.s, th.gil.e, th.gil.me, th.gil.n, t, tol);
    return i < 0 ? { kind: 'lane', th: ti } : { kind: 'gil', th: ti, i: i, t: t };
  }
  if (th.osY >= 0 && cy >= th.osY - 1 && cy < th.osY + OS_H + 2) {
    i = findIn(th.os.s, th.os.e, th.os.me, th.os.n, t, tol);
    return i < 0 ? { kind: 'lane', th: ti } : { kind: 'os', th: ti, i: i, t: t };
  }
  var d = Math.floor((cy - th.flameY) / ROW_H);
  if (!th.collapsed && d >= 0 && d < th.rows.length) {
    var r = th.rows[d];
    i = findIn(r.s, r.e, r.me, r.n, t, tol);
    if (i >= 0) return { kind: 'span', th: ti, d: d, i: i, t: t };
  }
  return { kind: 'lane', th: ti };
}

/* == GIL analysis for tooltips == */
function overlapBy(th0, state, a, b) {
  var out = [];
  threads.forEach(function (th) {
    if (th === th0) return;
    var L = th.gil.by[state];
    if (!L.n) return;
    var i = lowerGT(L.e, a, 0, L.n), tot = 0, first = -1;
    for (; i < L.n && L.s[i] < b; i++) { tot += Math.min(b, L.e[i]) - Math.max(a, L.s[i]); if (first < 0) first = i; }
    if (tot > 0) out.push({ th: th, ns: tot, list: L, i0: first });
  });
  out.sort(function (x, y) { return y.ns - x.ns; });
  return out;
}
function innermostPy(th, t) {
  var best = null;
  for (var d = 0; d < th.rows.length; d++) {
    var r = th.rows[d], i = lowerGT(r.me, t, 0, r.n);
    while (i < r.n && r.s[i] <= t && r.e[i] <= t) i++;
    if (i >= r.n || r.s[i] > t) break;
    if (!(r.fl[i] & 8)) best = { d: d, i: i, f: r.f[i] };
  }
  return best;
}
function holderFuncText(o, a, b, t) {
  /* time inside the holder's overlapping held interval nearest to t */
  var L = o.list, i = lowerGT(L.e, Math.max(a, Math.min(b, t)), 0, L.n);
  if (i >= L.n || L.s[i] > b) i = o.i0;
  var lo = Math.max(L.s[i], a), hi = Math.min(L.e[i], b);
  var tt = t >= lo && t < hi ? t : lo + (hi - lo) / 2;
  var ip = innermostPy(o.th, tt);
  return ip ? fName[ip.f] : null;
}

/* == tooltip & details == */
function line(parent, cls, text) { return el('div', cls, text, parent); }
function fillSpan(box, th, d, i, full) {
  var r = th.rows[d], f = r.f[i], fl = r.fl[i], dur = r.e[i] - r.s[i];
  var hd = line(box, full ? null : 't' + (fl & 8 ? ' gt-c' : ''), full ? null : fName[f] != null ? fName[f] : '?');
  if (full) el('span', 't' + (fl & 8 ? ' gt-c' : ''), fName[f], hd);
  var loc = fnLoc(f), flags = [];
  if (loc && !(fl & 8 && !fFile[f])) { if (full) el('span', 'l', '  ' + loc, hd); else line(box, 'l', loc); }
  if (fl & 8) flags.push('C function');
  if (fl & 1) flags.push('clipped at start');
  if (fl & 2) flags.push('clipped at end');
  if (fl & 4) flags.push('left by an exception');
  var kvs = [['start', fmtAt(r.s[i])], ['duration', fmtDur(dur)], ['depth', d]];
  if (full) {
    kvs.push(['self', fmtDur(selfTime(th, d, i))]);
    kvs.push(['thread', th.name]);
  }
  var p = line(box, null, null);
  kvs.forEach(function (q) { var s = el('span', 'kv', null, p); el('i', null, q[0] + ' ', s); s.appendChild(D.createTextNode(String(q[1]))); });
  if (flags.length) { if (full) el('span', 'l', '  [' + flags.join(', ') + ']', hd); else line(box, 'l', flags.join(' \u00b7 ')); }
  return f;
}
function selfTime(th, d, i) {
  var r = th.rows[d], own = r.e[i] - r.s[i];
  if (d + 1 >= th.rows.length) return own;
  var c = th.rows[d + 1], j = lowerGE(c.s, r.s[i], 0, c.n), kids = 0;
  for (; j < c.n && c.s[j] < r.e[i]; j++) kids += Math.min(c.e[j], r.e[i]) - c.s[j];
  return Math.max(0, own - kids);
}
function fillIv(box, th, kind, i, t, full) {
  var iv = th[kind], q = iv.st[i], a = iv.s[i], b = iv.e[i];
  line(box, 't', (kind === 'gil' ? 'GIL: ' + GIL_NAME[q] : 'OS: ' + OS_NAME[q]) + ' \u00b7 ' + fmtDur(b - a));
  line(box, 'l', th.name + ' \u00b7 ' + fmtAt(a) + ' \u2192 ' + fmtAt(b));
  if (kind !== 'gil') return;
  if (q === 1) {
    var hs = overlapBy(th, 2, a, b);
    line(box, 'h', hs.length ? 'Held meanwhile by:' : 'No other thread held the GIL meanwhile (hand-off latency).');
    hs.slice(0, full ? 6 : 3).forEach(function (o) {
      var fn = holderFuncText(o, a, b, t);
      line(box, null, '\u2190 ' + o.th.name + ' for ' + fmtDur(o.ns) + (fn ? ', in ' + fn : ''));
    });
  } else if (q === 2) {
    var ws = overlapBy(th, 1, a, b);
    var ip = innermostPy(th, Math.max(a, Math.min(t, b - 1)));
    if (ip) line(box, null, 'running ' + fName[ip.f] + ' here');
    if (ws.length) {
      line(box, 'h', 'Threads waiting meanwhile:');
      ws.slice(0, full ? 6 : 3).forEach(function (o) { line(box, null, o.th.name + ' for ' + fmtDur(o.ns)); });
    }
  }
}
function showTip(h, x, y) {
  tip.textContent = '';
  if (h.kind === 'span') fillSpan(tip, threads[h.th], h.d, h.i, false);
  else fillIv(tip, threads[h.th], h.kind, h.i, h.t, false);
  tip.hidden = false;
  var tw = tip.offsetWidth, thh = tip.offsetHeight;
  var lx = x + 14 + tw > W ? Math.max(0, x - tw - 10) : x + 14;
  var ly = y + 16 + thh > H ? Math.max(0, y - thh - 8) : y + 16;
  tip.style.left = lx + 'px'; tip.style.top = ly + 'px';
}
var HINT = 'Click: details \u00b7 wheel, +/\u2212: zoom \u00b7 drag, shift+wheel, \u2190/\u2192: pan \u00b7 ' +
  'double-click: zoom to call \u00b7 drag the time axis: zoom to range \u00b7 click a thread name: fold';
function details(h) {
  var box = $('gt-details');
  box.textContent = '';
  if (!h) { el('span', 'gt-muted', HINT, box); return; }
  var th = threads[h.th];
  if (h.kind === 'span') {
    var f = fillSpan(box, th, h.d, h.i, true), r = th.rows[h.d];
    var st = th.stats, k = lowerGE(st.f, f, 0, st.f.length);
    var last = box.firstChild;
    if (k < st.f.length && st.f[k] === f) {
      var sk = el('span', 'kv', null, box.children[1]);
      el('i', null, 'this function in this thread: ', sk);
      sk.appendChild(D.createTextNode(plural(st.n[k], 'call') + ', total ' +
        fmtDur(st.tot[k]) + ', self ' + fmtDur(st.self[k])));
      sk.title = 'total = inclusive time, recursion counted once';
    }
    el('button', null, 'Zoom to call', last).onclick = function () { zoomTo(r.s[h.i], r.e[h.i]); };
    el('button', null, 'Highlight function', last).onclick = function () { setSearch(fName[f]); };
  } else fillIv(box, th, h.kind, h.i, h.t, true);
}
function zoomTo(a, b) {
  var pad = Math.max((b - a) * 0.06, 10);
  setView(a - pad, b + pad);
}

/* == selection == */
function selectThread(i, scroll) {
  selThread = i;
  sumRows.forEach(function (tr, k) { tr.classList.toggle('on', k === i); });
  var th = threads[i];
  if (th && scroll) {
    if (th.collapsed) { th.collapsed = false; layout(); }
    showTab('timeline');
    tl.scrollTop = Math.max(0, th.y0 - 2);
  }
  requestDraw();
}

/* == search == */
var searchIn = $('gt-search'), matchEl = $('gt-match'), fMatch = null;
function applySearch() {
  var q = searchIn.value.trim().toLowerCase();
  if (q === searchQ) return;
  searchQ = q;
  fMatch = null;
  var total = 0, nfun = 0;
  if (q) {
    fMatch = new Uint8Array(nF);
    for (var i = 0; i < nF; i++) if (String(fName[i]).toLowerCase().indexOf(q) >= 0) { fMatch[i] = 1; nfun++; }
  }
  threads.forEach(function (th) {
    th.rows.forEach(function (r) {
      if (!fMatch) { r.pre = null; return; }
      var pre = r.pre && r.pre.length === r.n + 1 ? r.pre : new Int32Array(r.n + 1), c = 0;
      for (var j = 0; j < r.n; j++) { c += fMatch[r.f[j]]; pre[j + 1] = c; }
      r.pre = pre; total += c;
    });
  });
  matchEl.textContent = q ? plural(total, 'call') + ' in ' + plural(nfun, 'function') : '';
  requestDraw();
  if (!$('gt-tab-top').hidden) renderTop();
}
var searchTimer = 0;
searchIn.addEventListener('input', function () { clearTimeout(searchTimer); searchTimer = setTimeout(applySearch, 120); });
searchIn.addEventListener('keydown', function (ev) {
  if (ev.key === 'Escape') { searchIn.value = ''; applySearch(); searchIn.blur(); }
  if (ev.key === 'Enter') { clearTimeout(searchTimer); applySearch(); nextMatch(ev.shiftKey ? -1 : 1); }
});
/* Enter / shift+Enter in the search box: select the next / previous matching call in time */
function nextMatch(dir) {
  if (!fMatch) return;
  var cur = selSpan ? threads[selSpan.th].rows[selSpan.d].s[selSpan.i] : dir > 0 ? vs - 1 : ve + 1, best = null;
  threads.forEach(function (th, ti) {
    th.rows.forEach(function (r, d) {
      var pre = r.pre, j, m;
      if (!pre || !pre[r.n]) return;
      if (dir > 0) {
        j = lowerGT(r.s, cur, 0, r.n);
        if (j >= r.n || pre[r.n] === pre[j]) return;
        m = lowerGT(pre, pre[j], j + 1, r.n + 1) - 1;
        if (!best || r.s[m] < best.t) best = { t: r.s[m], th: ti, d: d, i: m };
      } else {
        j = lowerGE(r.s, cur, 0, r.n) - 1;
        if (j < 0 || !pre[j + 1]) return;
        m = lowerGE(pre, pre[j + 1], 0, j + 2) - 1;
        if (!best || r.s[m] > best.t) best = { t: r.s[m], th: ti, d: d, i: m };
      }
    });
  });
  if (!best) { matchEl.textContent = matchEl.textContent.replace(/ \u00b7 .*$/, '') + ' \u00b7 no more'; return; }
  var th = threads[best.th], r = th.rows[best.d], a = r.s[best.i], b = r.e[best.i], w = ve - vs;
  if (th.collapsed) { th.collapsed = false; layout(); }
  if (b - a > w * 0.9 || (b - a) * plotW / w < 3) zoomTo(a, b);
  else if (a < vs || b > ve) setView((a + b) / 2 - w / 2, (a + b) / 2 + w / 2);
  selSpan = { kind: 'span', th: best.th, d: best.d, i: best.i };
  details(selSpan); selectThread(best.th, false);
  if (tl.clientHeight !== H || tl.clientWidth !== W) resize();
  var y = th.flameY + best.d * ROW_H, top = tl.scrollTop, vh = tl.clientHeight - AXIS_H;
  if (y < top || y + ROW_H > top + vh) tl.scrollTop = Math.max(0, y - vh / 2);
}
function setSearch(name) { searchIn.value = name; applySearch(); }

/* == input == */
var drag = null;
function local(ev) {
  var b = ov.getBoundingClientRect();
  return { x: ev.clientX - b.left, y: ev.clientY - b.top };
}
ov.addEventListener('mousemove', function (ev) {
  if (drag) return;
  var p = local(ev);
  mouse = p;
  var h = hit(p.x, p.y);
  hover = h && (h.kind === 'span' || h.kind === 'gil' || h.kind === 'os') ? h : null;
  ov.style.cursor = !h ? 'default' : h.kind === 'axis' ? 'col-resize' : h.kind === 'gutter' ? 'pointer' : 'grab';
  if (hover) showTip(hover, p.x, p.y); else tip.hidden = true;
  drawOverlay();
});
ov.addEventListener('mouseleave', function () {
  if (drag) return;
  mouse = null; hover = null; tip.hidden = true; drawOverlay();
});
ov.addEventListener('mousedown', function (ev) {
  if (ev.button !== 0) return;
  var p = local(ev);
  tl.focus({ preventScroll: true });
  ev.preventDefault();
  tip.hidden = true;
  drag = { x: p.x, y: p.y, vs: vs, ve: ve, st: tl.scrollTop, moved: false, axis: p.y < AXIS_H && p.x > gutterW };
  if (drag.axis) rangeSel = { x0: p.x, x1: p.x };
  else ov.style.cursor = 'grabbing';
});
window.addEventListener('mousemove', function (ev) {
  if (!drag) return;
  if (!ev.buttons) { drag = null; rangeSel = null; ov.style.cursor = 'grab'; drawOverlay(); return; }
  var p = local(ev), dx = p.x - drag.x, dy = p.y - drag.y;
  if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
  if (drag.axis) { rangeSel.x1 = Math.max(gutterW, Math.min(W, p.x)); drawOverlay(); return; }
  if (!drag.moved) return;
  var dt = -dx * (drag.ve - drag.vs) / plotW;
  vs = drag.vs + dt; ve = drag.ve + dt; clampView();
  tl.scrollTop = drag.st - dy;
  hover = null;
  requestDraw();
});
window.addEventListener('mouseup', function (ev) {
  if (!drag) return;
  var d = drag, p = local(ev);
  drag = null;
  ov.style.cursor = 'grab';
  if (d.axis) {
    var a = tOf(Math.min(rangeSel.x0, rangeSel.x1)), b = tOf(Math.max(rangeSel.x0, rangeSel.x1));
    rangeSel = null;
    if (Math.abs(p.x - d.x) > 3) setView(a, b); else drawOverlay();
    return;
  }
  if (d.moved) return;
  var h = hit(p.x, p.y);
  if (!h) return;
  if (h.kind === 'gutter') {
    threads[h.th].collapsed = !threads[h.th].collapsed;
    if (selSpan && selSpan.th === h.th) selSpan = null;
    selectThread(h.th, false);
    layout(); requestDraw();
    return;
  }
  if (h.kind === 'span') { selSpan = h; details(h); selectThread(h.th, false); }
  else if (h.kind === 'gil' || h.kind === 'os') { selSpan = null; details(h); selectThread(h.th, false); }
  else { selSpan = null; details(null); }
  drawOverlay();
});
ov.addEventListener('dblclick', function (ev) {
  var p = local(ev), h = hit(p.x, p.y);
  if (h && h.kind === 'span') { var r = threads[h.th].rows[h.d]; zoomTo(r.s[h.i], r.e[h.i]); }
  else if (h && (h.kind === 'gil' || h.kind === 'os')) { var iv = threads[h.th][h.kind]; zoomTo(iv.s[h.i], iv.e[h.i]); }
  else if (p.x > gutterW) zoomAt(tOf(p.x), 0.5);
});
tl.addEventListener('wheel', function (ev) {
  var p = local(ev);
  if (p.x < gutterW) return; /* native vertical scroll over the thread names */
  var m = ev.deltaMode === 1 ? 16 : ev.deltaMode === 2 ? H : 1, dx = ev.deltaX * m, dy = ev.deltaY * m;
  ev.preventDefault();
  if (ev.shiftKey && !dx) { dx = dy; dy = 0; }
  if (ev.ctrlKey || Math.abs(dy) > Math.abs(dx)) {
    zoomAt(tOf(p.x), Math.exp(Math.max(-1, Math.min(1, dy * (ev.ctrlKey ? 0.01 : 0.0022)))));
  } else if (dx) pan(dx * (ve - vs) / plotW);
  mouse = p; hover = null; tip.hidden = true;
}, { passive: false });
tl.addEventListener('scroll', function () { hover = null; tip.hidden = true; requestDraw(); });
D.addEventListener('keydown', function (ev) {
  var tg = ev.target && ev.target.tagName;
  if (tg === 'INPUT' || tg === 'SELECT' || tg === 'TEXTAREA' || ev.metaKey || ev.ctrlKey || ev.altKey) return;
  if ($('gt-tab-timeline').hidden) return;
  var w = ve - vs, c = mouse && mouse.x > gutterW ? tOf(mouse.x) : (vs + ve) / 2, used = true;
  switch (ev.key) {
    case '+': case '=': case 'w': zoomAt(c, 0.6); break;
    case '-': case '_': case 's': zoomAt(c, 1 / 0.6); break;
    case 'ArrowLeft': case 'a': pan(-w * 0.15); break;
    case 'ArrowRight': case 'd': pan(w * 0.15); break;
    case 'ArrowUp': tl.scrollTop -= 48; break;
    case 'ArrowDown': tl.scrollTop += 48; break;
    case '0': setView(tMin, tMax); break;
    case 'Escape': selSpan = null; details(null); drawOverlay(); break;
    case '/': searchIn.focus(); break;
    default: used = false;
  }
  if (used) ev.preventDefault();
});
$('gt-zin').onclick = function () { zoomAt((vs + ve) / 2, 0.5); };
$('gt-zout').onclick = function () { zoomAt((vs + ve) / 2, 2); };
$('gt-zreset').onclick = function () { setView(tMin, tMax); };

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

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

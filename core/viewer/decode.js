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
var dataEl = $('gt-data'), binEl = $('gt-bin');
var raw = dataEl ? dataEl.textContent : '';
var P, meta, fName, fFile, fLine, fIsC, nF, threads = [], byTid = {}, gilKnown, hasOS;
/* A free-threaded build: the GIL strip and figures are the park probe's (lock contention). */
var freeThreaded = false;
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
function arr(o, k) { var v = o && o[k]; return v && (Array.isArray(v) || ArrayBuffer.isView(v)) ? v : []; }

/* == binary columns (payload version 2) ==
 * #gt-bin holds base64 of one zlib stream of chunks (uvarint length + bytes); the JSON's
 * {"n": N, "c": k} objects name the first chunk of a block (core/emit.c bin_spans,
 * bin_intervals, w_profile; core/viewer/README.md). Decoded into typed arrays in place,
 * so the rest of the viewer reads the same columns as in version 1. */
function b64bytes(s) {
  s = s.trim();
  if (typeof Uint8Array.fromBase64 === 'function') return Uint8Array.fromBase64(s);
  var pad = s.length && s[s.length - 1] === '=' ? (s[s.length - 2] === '=' ? 2 : 1) : 0;
  var out = new Uint8Array(s.length / 4 * 3 - pad), o = 0, step = 1 << 22; /* a multiple of 4 */
  for (var at = 0; at < s.length; at += step) {
    var bin = atob(s.substring(at, at + step));
    for (var j = 0; j < bin.length; j++) out[o++] = bin.charCodeAt(j);
  }
  return out;
}
function inflate(bytes) {
  if (typeof DecompressionStream !== 'function') {
    return Promise.reject(new Error('this browser cannot unpack the trace (it needs DecompressionStream: ' +
      'Chrome 80+, Firefox 113+, Safari 16.4+)'));
  }
  var st = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('deflate'));
  return new Response(st).arrayBuffer().then(function (b) { return new Uint8Array(b); });
}
function chunkTable(u) {
  var offs = [], p = 0;
  while (p < u.length) {
    var b = u[p++], v = b & 127, m = 128;
    while (b >= 128) { b = u[p++]; v += (b & 127) * m; m *= 128; }
    offs.push(p);
    p += v;
  }
  if (p !== u.length) throw new Error('the trace columns are truncated');
  return offs;
}
/* n uvarints (zz: zigzag-signed) from offset p into a new array of type T */
function uvCol(u, p, n, T, zz) {
  var out = new T(n);
  for (var i = 0; i < n; i++) {
    var b = u[p++], v = b & 127;
    if (b >= 128) { var m = 128; do { b = u[p++]; v += (b & 127) * m; m *= 128; } while (b >= 128); }
    out[i] = zz ? (v % 2 ? -(v + 1) / 2 : v / 2) : v;
  }
  return out;
}
/* n time deltas (core/emit.c col_delta: d + 1, or 0 then zigzag d when negative) */
function deltaCol(u, p, n) {
  var out = new Float64Array(n);
  for (var i = 0; i < n; i++) {
    var b = u[p++], v = b & 127, m;
    if (b >= 128) { m = 128; do { b = u[p++]; v += (b & 127) * m; m *= 128; } while (b >= 128); }
    if (v === 0) {
      b = u[p++]; v = b & 127;
      if (b >= 128) { m = 128; do { b = u[p++]; v += (b & 127) * m; m *= 128; } while (b >= 128); }
      out[i] = v % 2 ? -(v + 1) / 2 : v / 2;
    } else out[i] = v - 1;
  }
  return out;
}
/* spans: depth steps, func + 1, flags, enter deltas, exit deltas (in event order); a packed
 * thread's sixth column: the calls each record stands for, less one */
function binSpans(u, offs, ref) {
  var n = ref.n | 0, c = ref.c | 0;
  var depth = uvCol(u, offs[c], n, Int32Array, true), func = uvCol(u, offs[c + 1], n, Int32Array, false);
  var flags = uvCol(u, offs[c + 2], n, Uint16Array, false), start = deltaCol(u, offs[c + 3], n);
  var dur = new Float64Array(n), stI = new Int32Array(Math.min(n, 65537) + 1), stD = new Int32Array(stI.length);
  var p = offs[c + 4], top = 0, clock = 0, prevd = -1, i, b, v, m;
  for (i = 0; i <= n; i++) {
    var d = i < n ? prevd + 1 + depth[i] : -1;
    while (top > 0 && stD[top - 1] >= d) {
      b = u[p++]; v = b & 127;
      if (b >= 128) { m = 128; do { b = u[p++]; v += (b & 127) * m; m *= 128; } while (b >= 128); }
      if (v === 0) {
        b = u[p++]; v = b & 127;
        if (b >= 128) { m = 128; do { b = u[p++]; v += (b & 127) * m; m *= 128; } while (b >= 128); }
        clock += v % 2 ? -(v + 1) / 2 : v / 2;
      } else clock += v - 1;
      top--; dur[stI[top]] = clock;
    }
    if (i === n) break;
    depth[i] = prevd = d; func[i] -= 1;
    clock += start[i]; start[i] = clock;
    stI[top] = i; stD[top++] = d;
  }
  for (i = 0; i < n; i++) dur[i] -= start[i];
  var o = { start: start, dur: dur, func: func, depth: depth, flags: flags };
  if (ref.p) o.packed = uvCol(u, offs[c + 5], n, Float64Array, false);
  return o;
}
function binIntervals(u, offs, ref) {
  var n = ref.n | 0, c = ref.c | 0;
  var start = uvCol(u, offs[c], n, Float64Array, true), dur = uvCol(u, offs[c + 1], n, Float64Array, false);
  var end = 0;
  for (var i = 0; i < n; i++) { start[i] += end; end = start[i] + dur[i]; }
  var o = { start: start, dur: dur, state: uvCol(u, offs[c + 2], n, Uint8Array, false) };
  if (ref.i) o.interp = uvCol(u, offs[c + 3], n, Float64Array, false); /* whose GIL */
  return o;
}
var PROFILE_COLS = ['calls', 'run', 'hoff', 'wait', 'rel', 'unk'];
function binProfile(u, offs, ref) {
  var n = ref.n | 0, c = ref.c | 0, i;
  var o = { parent: uvCol(u, offs[c], n, Int32Array, false), func: uvCol(u, offs[c + 1], n, Int32Array, false) };
  for (i = 0; i < n; i++) { o.parent[i] = i - o.parent[i]; o.func[i] -= 1; }
  PROFILE_COLS.forEach(function (k, j) { o[k] = uvCol(u, offs[c + 2 + j], n, Float64Array, false); });
  return o;
}
function isRef(o) { return o && typeof o.c === 'number' && typeof o.n === 'number'; }
function decodeColumns(p, u) {
  var offs = chunkTable(u);
  (Array.isArray(p.threads) ? p.threads : []).forEach(function (t) {
    if (isRef(t.spans)) t.spans = binSpans(u, offs, t.spans);
    if (isRef(t.gil)) t.gil = binIntervals(u, offs, t.gil);
    if (isRef(t.os)) t.os = binIntervals(u, offs, t.os);
    if (isRef(t.profile)) t.profile = binProfile(u, offs, t.profile);
    if (isRef(t.profile_outer)) t.profile_outer = binProfile(u, offs, t.profile_outer);
  });
}
/* For tests: thread i as laid out for drawing, {tid, t0, spans: [[start, end, name, depth,
 * flags]] (ns since t0, row by row), gil: [[start, end, state]]}. */
window.gtPayload = {
  thread: function (i) {
    var th = threads[i], out = { tid: th.tid, t0: meta.t0_ns, spans: [], gil: [] };
    (th.fullRows || th.rows).forEach(function (r, d) { /* as recorded, not folded (scope.js) */
      for (var j = 0; j < r.n; j++) out.spans.push([r.s[j], r.e[j], fName[r.f[j]], d, r.fl[j]]);
    });
    for (var j = 0; j < th.gil.n; j++) out.gil.push([th.gil.s[j], th.gil.e[j], th.gil.st[j]]);
    return out;
  },
  threads: function () { return threads.length; }
};
/* Unpacking in a worker keeps the page responsive on big traces: the same functions,
 * their source joined into a blob; the typed arrays come back transferred, not copied. */
var BLOCKS = ['spans', 'gil', 'os', 'profile', 'profile_outer'];
function workerSource() {
  var fns = [b64bytes, inflate, chunkTable, uvCol, deltaCol, binSpans, binIntervals, binProfile, isRef, decodeColumns,
    arr, num, prefixMax, sortRow, layoutSpans];
  return '"use strict";\nvar PROFILE_COLS = ' + JSON.stringify(PROFILE_COLS) + ';\n' + fns.map(String).join('\n') +
    '\nonmessage = function (e) {\n' +
    '  var p = { threads: e.data.threads };\n' +
    '  inflate(b64bytes(e.data.b64)).then(function (u) {\n' +
    '    decodeColumns(p, u);\n' +
    '    var fIsC = Uint8Array.from(e.data.c), moved = new Set();\n' +
    '    var add = function (o) { for (var c in o) { var v = o[c]; if (ArrayBuffer.isView(v)) moved.add(v.buffer);\n' +
    '      else if (v && typeof v === "object") add(v); } };\n' +
    '    p.threads.forEach(function (t, i) {\n' +
    '      if (t.spans) t.spans = layoutSpans(t.spans, fIsC.length, fIsC, e.data.ends[i]);\n' +
    '      add(t);\n' +
    '    });\n' +
    '    postMessage({ threads: p.threads }, Array.from(moved));\n' +
    '  }).catch(function (err) { postMessage({ error: String(err && err.message || err) }); });\n' +
    '};\n';
}
/* resolves with the decoded blocks per thread; rejects with {noWorker: true} if no worker ran */
function decodeInWorker(p, b64) {
  return new Promise(function (ok, fail) {
    var w, url;
    try {
      url = URL.createObjectURL(new Blob([workerSource()], { type: 'text/javascript' }));
      w = new Worker(url);
    } catch (e) { if (url) URL.revokeObjectURL(url); fail({ noWorker: true }); return; }
    var done = function () { w.terminate(); URL.revokeObjectURL(url); };
    w.onmessage = function (e) { done(); if (e.data.error) fail(new Error(e.data.error)); else ok(e.data.threads); };
    w.onerror = function (e) { if (e.preventDefault) e.preventDefault(); done(); fail({ noWorker: true }); };
    /* what layoutSpans needs: which functions are C ones (plus the sentinel), thread ends */
    var F = p.funcs || {}, names = arr(F, 'name'), cc = arr(F, 'c'), c = [];
    for (var i = 0; i <= names.length; i++) c.push(cc[i] ? 1 : 0);
    w.postMessage({ b64: b64, c: c, ends: p.threads.map(function (t) { return num(t && t.end, 0); }),
      threads: p.threads.map(function (t) {
      var o = {};
      BLOCKS.forEach(function (k) { if (isRef(t[k])) o[k] = t[k]; });
      return o;
    })
    });
  });
}
function decodeHere(p, b64) {
  return inflate(b64bytes(b64)).then(function (u) { decodeColumns(p, u); perf.decodedIn = 'page'; return p; });
}
/* #gt-data: base64 of the zlib'd JSON (plain JSON in a page written before): the JSON, or a
 * promise of it. */
function parseData(s) {
  if (/^\s*[{[]/.test(s)) return JSON.parse(s);
  return inflate(b64bytes(s)).then(function (u) { return JSON.parse(new TextDecoder().decode(u)); });
}
/* The payload, parsed and with its columns unpacked: a promise. */
function loadPayload() {
  return new Promise(function (ok) { ok(parseData(raw)); }).then(function (p) {
    raw = null;
    if (dataEl) dataEl.textContent = '';
    if (!p || !(p.version >= 2)) return p;
    if (!Array.isArray(p.threads)) p.threads = [];
    var b64 = binEl ? binEl.textContent : '';
    if (binEl) binEl.textContent = '';
    return decodeInWorker(p, b64).then(function (threads) {
      threads.forEach(function (o, i) { BLOCKS.forEach(function (k) { if (o[k]) p.threads[i][k] = o[k]; }); });
      perf.decodedIn = 'worker';
      return p;
    }, function (e) {
      if (e && e.noWorker) return decodeHere(p, b64); /* e.g. workers not allowed here */
      throw e;
    });
  }).then(function (p) { perf.decoded = performance.now(); return p; });
}
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
  var S = arr(o, 'start'), Du = arr(o, 'dur'), St = arr(o, 'state'), G = o && o.interp ? arr(o, 'interp') : null;
  var n = Math.min(S.length, Du.length, St.length), i;
  var ord = null;
  for (i = 1; i < n; i++) if (+S[i] < +S[i - 1]) break;
  if (i < n) { ord = []; for (i = 0; i < n; i++) ord.push(i); ord.sort(function (a, b) { return S[a] - S[b]; }); }
  var s = new Float64Array(n), e = new Float64Array(n), st = new Uint8Array(n), g = G ? new Float64Array(n) : null;
  var cum = [new Float64Array(n + 1), new Float64Array(n + 1), new Float64Array(n + 1)];
  var cnt = [0, 0, 0];
  for (i = 0; i < n; i++) {
    var j = ord ? ord[i] : i, x = num(S[j], 0), d = Math.max(0, num(Du[j], 0)), q = St[j] | 0;
    if (q < 0 || q > 2) q = 0;
    s[i] = x; e[i] = x + d; st[i] = q; cnt[q]++;
    if (g) g[i] = num(G[j], 0);
    for (var k = 0; k < 3; k++) cum[k][i + 1] = cum[k][i] + (k === q ? d : 0);
  }
  var by = [];
  /* g: whose GIL (interpreter id) each interval is, when subinterpreters ran */
  for (var q2 = 0; q2 < 3; q2++) by.push({ s: new Float64Array(cnt[q2]), e: new Float64Array(cnt[q2]), g: G ? new Float64Array(cnt[q2]) : null, n: 0 });
  for (i = 0; i < n; i++) {
    var b = by[st[i]]; b.s[b.n] = s[i]; b.e[b.n] = e[i];
    if (g) b.g[b.n] = g[i];
    b.n++;
  }
  return { n: n, s: s, e: e, st: st, g: g, me: prefixMax(e), cum: cum, by: by };
}

function prepThread(t, idx) {
  t = t || {};
  var th = {
    idx: idx, tid: t.tid == null ? '?' : t.tid, pid: t.pid, name: (t.name == null || t.name === '' ? 'thread ' + (t.tid == null ? idx : t.tid) : String(t.name)) + (t.interp ? ' [interp ' + t.interp + ']' : ''),
    sum: t.summary || {}, start: num(t.start, 0), end: num(t.end, 0),
    gil: mkIv(t.gil), os: mkIv(t.os), rows: [], nSpans: 0, collapsed: false,
    y0: 0, h: 0, gilY: -1, osY: -1, flameY: 0, stats: null,
    cut: t.calls_cut == null ? null : num(t.calls_cut, 0), /* the budget mark: calls recorded until here */
    kept: t.calls_kept_from == null ? null : num(t.calls_kept_from, 0) /* keep last: calls recorded from here */
  };
  /* laid out already by the worker, or here */
  var L = t.spans && t.spans.rows ? t.spans : layoutSpans(t.spans || {}, nF, fIsC, th.end);
  th.rows = L.rows; th.nSpans = L.nSpans; th.stats = L.stats;
  if (t.span_stats) th.stats = packedStats(t.span_stats); /* a packed thread's: from the spans as recorded */
  var maxE = L.maxE;
  [th.gil, th.os].forEach(function (iv) { if (iv.n && iv.e[iv.n - 1] > maxE) maxE = iv.me[iv.n - 1]; });
  th.maxE = maxE;
  return th;
}
/* A thread's spans as rows by depth (sorted by start, with prefix-max ends) and its
 * per-function stats; pure, so the worker can run it too. */
function layoutSpans(sp, nF, fIsC, end) {
  var S = arr(sp, 'start'), Du = arr(sp, 'dur'), Fu = arr(sp, 'func'), De = arr(sp, 'depth'), Fl = arr(sp, 'flags');
  var Pk = sp && sp.packed, n = Math.min(S.length, Du.length, Fu.length, De.length), i, d;
  var rows = [], cnt = [];
  for (i = 0; i < n; i++) { d = De[i] | 0; if (d < 0) d = 0; while (cnt.length <= d) cnt.push(0); cnt[d]++; }
  for (d = 0; d < cnt.length; d++) {
    rows.push({ s: new Float64Array(cnt[d]), e: new Float64Array(cnt[d]), f: new Int32Array(cnt[d]),
      fl: new Uint8Array(cnt[d]), pn: Pk ? new Float64Array(cnt[d]) : null, me: null, pre: null, n: 0 });
  }
  /* per-function stats in one pre-order pass: calls, total (recursion counted once), self */
  var scCount = new Float64Array(nF), scTotal = new Float64Array(nF), scSelf = new Float64Array(nF), scActive = new Int32Array(nF);
  var stack = new Int32Array(cnt.length + 1), sp0 = 0;
  var touched = [];
  var maxE = end;
  for (i = 0; i < n; i++) {
    d = De[i] | 0; if (d < 0) d = 0;
    var f = Fu[i] | 0; if (f < 0 || f >= nF) f = nF - 1;
    var s = num(S[i], 0), du = Math.max(0, num(Du[i], 0)), fl = Fl[i] | 0;
    if (f >= 0 && fIsC[f]) fl |= 8;
    var r = rows[d], j = r.n++;
    r.s[j] = s; r.e[j] = s + du; r.f[j] = f; r.fl[j] = fl;
    if (Pk) r.pn[j] = Pk[i] + 1; /* calls a packed record (flag 16) stands for */
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
  touched.sort(function (a, b) { return a - b; });
  var st = { f: new Int32Array(touched.length), n: new Float64Array(touched.length),
    tot: new Float64Array(touched.length), self: new Float64Array(touched.length) };
  touched.forEach(function (f, k) {
    st.f[k] = f; st.n[k] = scCount[f]; st.tot[k] = scTotal[f]; st.self[k] = Math.max(0, scSelf[f]);
  });
  rows.forEach(function (r) {
    for (i = 1; i < r.n; i++) if (r.s[i] < r.s[i - 1]) break;
    if (i < r.n) sortRow(r);
    r.me = prefixMax(r.e);
  });
  var calls = n; /* a packed record counts its calls */
  if (Pk) for (i = 0; i < n; i++) calls += Pk[i];
  return { rows: rows, nSpans: calls, stats: st, maxE: maxE };
}
function packedStats(o) {
  return { f: Int32Array.from(arr(o, 'f')), n: Float64Array.from(arr(o, 'n')), tot: Float64Array.from(arr(o, 'tot')),
    self: Float64Array.from(arr(o, 'self')) };
}
var scCount, scTotal, scSelf, scActive; /* set by init (main.js); layoutSpans keeps its own */
function sortRow(r) {
  var o = [], i;
  for (i = 0; i < r.n; i++) o.push(i);
  o.sort(function (a, b) { return r.s[a] - r.s[b]; });
  ['s', 'e', 'f', 'fl', 'pn'].forEach(function (k) {
    if (!r[k]) return;
    var a = r[k], b = new a.constructor(a.length);
    for (i = 0; i < o.length; i++) b[i] = a[o[i]];
    r[k] = b;
  });
}

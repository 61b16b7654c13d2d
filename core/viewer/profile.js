/* viewer.js part: the Profile tab (GIL-split icicle graph, sandwich) and the per-function
 * split for the top-functions table. Joined with the other parts (CMakeLists.txt GT_VIEWER_JS) inside one closure. */
/* == profile: call trees == */
/* States of the payload's profile columns (core/analyze/profile.h order). */
var PS_KEYS = ['run', 'hoff', 'wait', 'rel', 'unk'], NPS = 5;
var PS_NAME = ['running', 'held off CPU', 'waiting for the GIL', 'released', 'unknown'];
var PS_HELP = ['GIL held, on CPU', 'GIL held while preempted or blocked: everyone else is stuck',
  'waiting to take the GIL', 'GIL released: sleep, I/O, C code without the GIL', 'no GIL data'];
var PF_ROW = 18, PF_MINPX = 0.35;

/* A tree: node 0 is the root; a parent's index is below its children's. */
function treeNew() {
  var T = { n: 0, parent: [], func: [], calls: [], self: [], map: new Map() };
  for (var s = 0; s < NPS; s++) T.self.push([]);
  treeAdd(T, -1, -1);
  return T;
}
function treeAdd(T, parent, func) {
  var key = (parent + 1) * (nF + 2) + func + 1, i = T.map.get(key);
  if (i !== undefined) return i;
  i = T.n++;
  T.map.set(key, i); T.parent.push(parent); T.func.push(func); T.calls.push(0);
  for (var s = 0; s < NPS; s++) T.self[s].push(0);
  return i;
}
/* totals bottom-up, children lists, and which nodes repeat a function of their path */
function treeFinish(T) {
  var n = T.n, s, i;
  T.parent = Int32Array.from(T.parent); T.func = Int32Array.from(T.func); T.calls = Float64Array.from(T.calls);
  T.tot = [];
  for (s = 0; s < NPS; s++) { T.self[s] = Float64Array.from(T.self[s]); T.tot.push(Float64Array.from(T.self[s])); }
  T.total = new Float64Array(n);
  for (i = n - 1; i >= 0; i--) {
    var p = T.parent[i], t = 0;
    for (s = 0; s < NPS; s++) { t += T.tot[s][i]; if (p >= 0) T.tot[s][p] += T.tot[s][i]; }
    T.total[i] = t;
  }
  var cnt = new Int32Array(n + 1);
  for (i = 1; i < n; i++) cnt[T.parent[i] + 1]++;
  for (i = 0; i < n; i++) cnt[i + 1] += cnt[i];
  T.kidAt = cnt.slice(); T.kids = new Int32Array(Math.max(0, n - 1));
  var fill = cnt.slice();
  for (i = 1; i < n; i++) T.kids[fill[T.parent[i]]++] = i;
  T.rec = new Uint8Array(n);
  var on = new Int32Array(nF + 1), stack = [0], out = [];
  while (stack.length) { /* DFS; a negative entry leaves a node */
    var v = stack.pop();
    if (v < 0) { v = -v - 1; if (T.func[v] >= 0) on[T.func[v]]--; continue; }
    var f = T.func[v];
    if (f >= 0) { T.rec[v] = on[f] > 0 ? 1 : 0; on[f]++; }
    stack.push(-v - 1);
    for (var k = T.kidAt[v]; k < T.kidAt[v + 1]; k++) stack.push(T.kids[k]);
  }
  T.map = null; T.order = {};
  return T;
}
function threadTree(th) {
  if (th.ptree) return th.ptree;
  var pt = P.threads[th.src] || {}, raw = (!scopeFolded && pt.profile_outer) || pt.profile || {};
  var f = arr(raw, 'func'), par = arr(raw, 'parent');
  var T = { n: Math.max(1, f.length), parent: [], func: [], calls: [], self: [] }, s, i;
  for (i = 0; i < T.n; i++) { T.parent.push(i ? num(par[i], 0) : -1); T.func.push(i ? num(f[i], nF - 1) : -1); T.calls.push(num(arr(raw, 'calls')[i], 0)); }
  for (s = 0; s < NPS; s++) { var c = arr(raw, PS_KEYS[s]); T.self.push([]); for (i = 0; i < T.n; i++) T.self[s].push(num(c[i], 0)); }
  th.ptree = treeFinish(T);
  return th.ptree;
}
var mergedTree = null;
function allTree() {
  if (mergedTree) return mergedTree;
  var M = treeNew();
  threads.forEach(function (th) {
    if (th.idle && !showIdle) return; /* background threads (scope.js) */
    var T = threadTree(th), map = new Int32Array(T.n);
    for (var i = 0; i < T.n; i++) {
      var m = map[i] = i ? treeAdd(M, map[T.parent[i]], T.func[i]) : 0;
      M.calls[m] += T.calls[i];
      for (var s = 0; s < NPS; s++) M.self[s][m] += T.self[s][i];
    }
  });
  mergedTree = treeFinish(M);
  return mergedTree;
}
/* Per function: self time per state, total per state (recursion counted once). */
function funcSplit(T) {
  if (T.fsplit) return T.fsplit;
  var sp = { self: [], tot: [] }, s, i;
  for (s = 0; s < NPS; s++) { sp.self.push(new Float64Array(nF)); sp.tot.push(new Float64Array(nF)); }
  for (i = 1; i < T.n; i++) {
    var f = T.func[i];
    for (s = 0; s < NPS; s++) { sp.self[s][f] += T.self[s][i]; if (!T.rec[i]) sp.tot[s][f] += T.tot[s][i]; }
  }
  T.fsplit = sp;
  return sp;
}
/* State 0 without OS states: the GIL held, or on a free-threaded build not parked. */
function heldWord() { return freeThreaded ? 'running' : 'held'; }
var causedBy = null; /* holder tid -> per-function GIL wait caused */
function waitCaused(tid) {
  if (!causedBy) {
    causedBy = { all: new Float64Array(nF) };
    (Array.isArray(P.blame) ? P.blame : []).forEach(function (b) {
      var f = num(b.func, -1), w = num(b.wait_ns, 0);
      if (f < 0 || f >= nF) return;
      var h = causedBy[b.holder] || (causedBy[b.holder] = new Float64Array(nF));
      h[f] += w; causedBy.all[f] += w;
    });
  }
  return tid == null ? causedBy.all : causedBy[tid] || new Float64Array(nF);
}

/* == profile: sandwich trees for one function == */
function sandwich(T, f) {
  var occ = [], i, s;
  for (i = 1; i < T.n; i++) if (T.func[i] === f && !T.rec[i]) occ.push(i);
  var callees = treeNew(), callers = treeNew();
  callees.func[0] = callers.func[0] = f;
  occ.forEach(function (o) {
    /* callees: o's subtree, by path relative to o */
    var stack = [[o, 0]];
    while (stack.length) {
      var e = stack.pop(), v = e[0], m = e[1];
      callees.calls[m] += T.calls[v];
      for (s = 0; s < NPS; s++) callees.self[s][m] += T.self[s][v];
      for (var k = T.kidAt[v]; k < T.kidAt[v + 1]; k++) { var c = T.kids[k]; stack.push([c, treeAdd(callees, m, T.func[c])]); }
    }
    /* callers: the path from o up, weighted by o's time (put at the outermost caller) */
    var cur = 0;
    for (var a = T.parent[o]; a > 0; a = T.parent[a]) cur = treeAdd(callers, cur, T.func[a]);
    callers.calls[0] += T.calls[o];
    for (s = 0; s < NPS; s++) callers.self[s][cur] += T.tot[s][o];
  });
  return { callers: treeFinish(callers), callees: treeFinish(callees), n: occ.length };
}

/* == profile: state, layout, drawing == */
var pf = { thread: -1, state: -1, zoom: 0, sel: -1, sand: false, frames: [], hover: null, built: false, sw: null };
var pfCv, pfCtx, pfTip, pfBox;
function pfTree() { return pf.thread < 0 ? allTree() : threadTree(threads[pf.thread]); }
function pfWeight(T, i) { return pf.state < 0 ? T.total[i] : T.tot[pf.state][i]; }
function pfKids(T, i) { /* children, heaviest first under the current state filter */
  var key = pf.state, ord = T.order[key];
  if (!ord) ord = T.order[key] = {};
  var k = ord[i];
  if (!k) {
    k = ord[i] = Array.prototype.slice.call(T.kids, T.kidAt[i], T.kidAt[i + 1]);
    k.sort(function (a, b) { return pfWeight(T, b) - pfWeight(T, a); });
  }
  return k;
}
function pfName(T, i) {
  var f = T.func[i];
  if (f >= 0) return fName[f];
  return pf.thread < 0 ? 'all threads' : threads[pf.thread].name;
}
/* Frames of `T` from node `root` at (x, depth) with `scale` px/ns, depth first (a loop,
 * not recursion: deep recursion in the traced program makes deep trees). */
function pfLayout(T, root, x0, d0, scale, out, up) {
  var stack = [[root, x0, d0]];
  while (stack.length) {
    var e = stack.pop(), i = e[0], x = e[1], d = e[2], kids = pfKids(T, i), todo = [], cx = x;
    out.push({ T: T, i: i, x: x, w: pfWeight(T, i) * scale, d: d, up: up });
    for (var k = 0; k < kids.length; k++) {
      var cw = pfWeight(T, kids[k]) * scale;
      if (cw < PF_MINPX) break; /* the rest are smaller still: level of detail */
      todo.push([kids[k], cx, d + 1]);
      cx += cw;
    }
    for (k = todo.length - 1; k >= 0; k--) stack.push(todo[k]);
  }
}
function pfPath(T, i) { var p = []; for (; i >= 0; i = T.parent[i]) p.unshift(i); return p; }
function pfBuild() {
  var T = pfTree(), W = Math.max(200, pfBox.clientWidth - 2), frames = [], maxd = 0;
  if (pf.sand && pf.sel >= 0) {
    var sw = pf.sw && pf.sw.f === pf.sel && pf.sw.T === T ? pf.sw : (pf.sw = { f: pf.sel, T: T, t: sandwich(T, pf.sel) });
    var up = [], down = [];
    var wUp = pfWeight(sw.t.callers, 0), wDown = pfWeight(sw.t.callees, 0);
    if (wUp > 0) pfLayout(sw.t.callers, 0, 0, 0, W / wUp, up, true);
    if (wDown > 0) pfLayout(sw.t.callees, 0, 0, 0, W / wDown, down, false);
    var top = 0;
    up.forEach(function (fr) { top = Math.max(top, fr.d); });
    up.forEach(function (fr) { fr.row = top - fr.d; if (fr.d === 0) fr.row = -1; });
    up = up.filter(function (fr) { return fr.d > 0; }); /* the function itself is drawn once, below */
    down.forEach(function (fr) { fr.row = top + fr.d; });
    frames = up.concat(down);
    frames.forEach(function (fr) { maxd = Math.max(maxd, fr.row); });
  } else {
    var path = pfPath(T, Math.min(pf.zoom, T.n - 1)), z = path[path.length - 1], wz = pfWeight(T, z);
    path.slice(0, -1).forEach(function (a, k) { frames.push({ T: T, i: a, x: 0, w: W, d: k, row: k, ctx: true }); });
    if (wz > 0) pfLayout(T, z, 0, path.length - 1, W / wz, frames, false);
    frames.forEach(function (fr) { if (fr.row == null) fr.row = fr.d; maxd = Math.max(maxd, fr.row); });
  }
  pf.frames = frames; pf.W = W; pf.H = (maxd + 1) * PF_ROW + 4;
}
function pfSegs(fr) { /* [state, x, w] pieces of a frame */
  var T = fr.T, i = fr.i, w = fr.w, out = [], x = fr.x;
  if (pf.state >= 0) return [[pf.state, x, w]];
  var t = T.total[i];
  if (!(t > 0)) return [[4, x, w]];
  for (var s = 0; s < NPS; s++) {
    var sw = T.tot[s][i] / t * w;
    if (sw > 0) out.push([s, x, sw]);
    x += sw;
  }
  return out;
}
function drawProfile() {
  if (!pfCv || $('gt-tab-profile').hidden) return;
  pfBuild();
  var dpr = window.devicePixelRatio || 1, W = pf.W, H = Math.max(pf.H, 60), c = pfCtx;
  pfCv.width = Math.round(W * dpr); pfCv.height = Math.round(H * dpr);
  pfCv.style.width = W + 'px'; pfCv.style.height = H + 'px';
  c.setTransform(dpr, 0, 0, dpr, 0, 0);
  c.clearRect(0, 0, W, H);
  c.font = FONT; c.textBaseline = 'middle';
  pf.frames.forEach(function (fr) {
    var y = fr.row * PF_ROW, f = fr.T.func[fr.i], dim = fMatch && (f < 0 || !fMatch[f]);
    c.globalAlpha = dim ? 0.28 : fr.ctx ? 0.7 : 1;
    var gap = fr.w > 3 ? 1 : 0;
    pfSegs(fr).forEach(function (g) { c.fillStyle = PS_COL[g[0]]; c.fillRect(g[1], y, Math.max(g[2] - (g[1] + g[2] >= fr.x + fr.w - 0.01 ? gap : 0), 0.35), PF_ROW - 1); });
    if (f >= 0 && f === pf.sel) { c.globalAlpha = 1; c.strokeStyle = C.fg; c.lineWidth = 1.5; c.strokeRect(fr.x + 0.75, y + 0.75, Math.max(0, fr.w - 2.5), PF_ROW - 2.5); }
    if (fr.w > 30) {
      var name = pfName(fr.T, fr.i), avail = fr.w - 8;
      c.globalAlpha = dim ? 0.45 : 1;
      c.fillStyle = C.label;
      if (c.measureText(name).width > avail) {
        var lo = 0, hi = name.length;
        while (lo < hi) { var m = (lo + hi + 1) >> 1; if (c.measureText(name.slice(0, m) + '\u2026').width <= avail) lo = m; else hi = m - 1; }
        name = lo ? name.slice(0, lo) + '\u2026' : '';
      }
      if (name) c.fillText(name, fr.x + 4, y + PF_ROW / 2);
    }
  });
  c.globalAlpha = 1;
  pfCrumbs();
}
function pfCrumbs() {
  var box = $('gt-pfcrumbs'), T = pfTree();
  box.textContent = '';
  if (pf.sand && pf.sel >= 0) {
    el('span', 'gt-muted', 'Sandwich of ', box);
    el('b', null, fName[pf.sel], box);
    el('span', 'gt-muted', ': its callers above, what it calls below (' + plural(pf.sw ? pf.sw.t.n : 0, 'outermost call path') + ')', box);
    return;
  }
  pfPath(T, Math.min(pf.zoom, T.n - 1)).forEach(function (i, k) {
    if (k) el('span', 'gt-muted', ' \u203a ', box);
    var b = el('button', 'gt-crumb' + (i === pf.zoom ? ' on' : ''), pfName(T, i), box);
    b.type = 'button';
    b.onclick = function () { pf.zoom = i; drawProfile(); };
  });
}
function pfHit(x, y) {
  var row = Math.floor(y / PF_ROW);
  for (var k = pf.frames.length - 1; k >= 0; k--) {
    var fr = pf.frames[k];
    if (fr.row === row && x >= fr.x && x < fr.x + Math.max(fr.w, 1)) return fr;
  }
  return null;
}
function pfTipFill(fr) {
  var T = fr.T, i = fr.i, f = T.func[i], root = T.total[0] || 1;
  pfTip.textContent = '';
  line(pfTip, 't', pfName(T, i));
  if (f >= 0 && fFile[f]) line(pfTip, 'l', fnLoc(f));
  line(pfTip, null, fmtInt(T.calls[i]) + ' calls \u00b7 total ' + fmtDur(T.total[i]) + ' (' + fmtPct(100 * T.total[i] / root) + ' of ' + pfName(T, 0) + ') \u00b7 self ' + fmtDur(T.self.reduce(function (a, v) { return a + v[i]; }, 0)));
  var tb = el('table', 'gt-pftab', null, pfTip), hr = el('tr', null, null, tb);
  ['', 'total', '%', 'self'].forEach(function (h) { el('th', null, h, hr); });
  for (var s = 0; s < NPS; s++) {
    if (!T.tot[s][i] && (s === 4 || (s === 1 && !hasOS))) continue;
    var tr = el('tr', null, null, tb), td = el('td', null, null, tr);
    el('i', 'gt-sw', null, td).style.background = PS_COL[s];
    td.appendChild(D.createTextNode(s === 0 && !hasOS ? heldWord() : PS_NAME[s]));
    el('td', 'n', fmtDur(T.tot[s][i]), tr);
    el('td', 'n', fmtPct(T.total[i] ? 100 * T.tot[s][i] / T.total[i] : 0), tr);
    el('td', 'n', fmtDur(T.self[s][i]), tr);
  }
  line(pfTip, 'gt-muted', fr.ctx ? 'Click to zoom out to here' : pf.sand ? 'Click for the sandwich of this function' : 'Click to zoom in; the Sandwich button shows its callers and callees');
}
function pfLegend() {
  var lg = $('gt-pflegend');
  lg.textContent = '';
  el('span', 'g', 'Time of each frame', lg);
  for (var s = 0; s < NPS; s++) {
    if ((s === 1 && !hasOS) || (s === 4 && gilKnown)) continue;
    var sp = el('span', null, null, lg), w = el('i', 'gt-sw', null, sp);
    w.style.background = PS_COL[s];
    sp.title = PS_HELP[s];
    sp.appendChild(D.createTextNode(s === 0 && !hasOS ? heldWord() + ' (OS states not recorded)' : PS_NAME[s]));
  }
  el('span', 'gt-muted', 'width \u221d time (one state with "Size by"); frames < ' + PF_MINPX + ' px are left out', lg);
}
function initProfile() {
  if (pf.built) return;
  pf.built = true;
  pfCv = $('gt-pfcv'); pfCtx = pfCv.getContext('2d'); pfTip = $('gt-pftip'); pfBox = $('gt-pfbox');
  var ts = $('gt-pfthread'), ss = $('gt-pfstate');
  el('option', null, 'All threads (merged)', ts).value = '-1';
  threads.forEach(function (th) { el('option', null, th.name + ' (' + th.tid + ')', ts).value = String(th.idx); });
  el('option', null, 'all states', ss).value = '-1';
  for (var s = 0; s < 4; s++) if (s !== 1 || hasOS) el('option', null, s === 0 && !hasOS ? heldWord() : PS_NAME[s], ss).value = String(s);
  ts.onchange = function () { pf.thread = +ts.value; pf.zoom = 0; pf.sw = null; drawProfile(); };
  ss.onchange = function () { pf.state = +ss.value; drawProfile(); };
  $('gt-pfsand').onclick = function () { if (pf.sel >= 0) { pf.sand = !pf.sand; pfSandBtn(); drawProfile(); } };
  pfCv.addEventListener('mousemove', function (ev) {
    var b = pfCv.getBoundingClientRect(), x = ev.clientX - b.left, y = ev.clientY - b.top, fr = pfHit(x, y);
    pf.hover = fr;
    pfCv.style.cursor = fr ? 'pointer' : 'default';
    if (!fr) { pfTip.hidden = true; return; }
    pfTipFill(fr);
    pfTip.hidden = false;
    var bx = pfBox.getBoundingClientRect();
    var tx = ev.clientX - bx.left + pfBox.scrollLeft + 14, ty = ev.clientY - bx.top + pfBox.scrollTop + 14;
    if (tx + pfTip.offsetWidth > pfBox.scrollLeft + pfBox.clientWidth) tx = Math.max(0, tx - pfTip.offsetWidth - 24);
    pfTip.style.left = tx + 'px'; pfTip.style.top = ty + 'px';
  });
  pfCv.addEventListener('mouseleave', function () { pfTip.hidden = true; pf.hover = null; });
  pfCv.addEventListener('click', function (ev) {
    var b = pfCv.getBoundingClientRect(), fr = pfHit(ev.clientX - b.left, ev.clientY - b.top);
    if (!fr) return;
    var f = fr.T.func[fr.i];
    if (pf.sand) { if (f >= 0) { pf.sel = f; pf.sw = null; } }
    else { pf.zoom = fr.i; if (f >= 0) pf.sel = f; }
    pfTip.hidden = true;
    pfSandBtn();
    drawProfile();
  });
  window.addEventListener('resize', function () { if (!$('gt-tab-profile').hidden) drawProfile(); });
  pfLegend();
  pfSandBtn();
}
function pfSandBtn() {
  var b = $('gt-pfsand');
  b.disabled = pf.sel < 0;
  b.classList.toggle('on', pf.sand);
  b.textContent = pf.sand ? 'Back to the call tree' : pf.sel >= 0 ? 'Sandwich: ' + fName[pf.sel] : 'Sandwich (click a frame first)';
}
function showProfile() { initProfile(); pfTip.hidden = true; drawProfile(); }

/* viewer.js part: palettes (light, dark), the theme switch, colours of functions. Joined with
 * the other parts (CMakeLists.txt GT_VIEWER_JS) inside one closure.
 * GIL colours are from the Okabe-Ito set: held, waiting and released stay >= 30 apart
 * (CIEDE2000) under deuteranopia and protanopia (tests/test_palette.py reads THEMES). */
/* == palettes == */
var THEMES = {
  light: {
    held: '#0072b2', wait: '#d55e00', rel: '#dee2e6', heldOff: '#cc79a7', unk: '#eef0f2',
    cpu: '#009e73', preempt: '#f0e442', blocked: '#c5cbd3',
    bg: '#ffffff', soft: '#f6f8fa', lane: '#fbfbfc', laneSel: '#fff8dc', gutterSel: '#fff1c2', strip: '#f3f4f6',
    grid: '#eef0f3', sep: '#d8dde3', bd: '#d0d7de', fg: '#1f2328', mut: '#656d76', faint: '#8c959f', axis: '#424a53',
    acc: '#0969da', edge: '#333333', exc: '#d55e00', label: '#15191e', labelC: '#3d4650', labelDim: '#9aa1a9',
    dim: '#e9ebee', hover: 'rgba(0,0,0,.55)', cursor: 'rgba(31,35,40,.35)', hatch: 'rgba(60,70,85,.28)',
    waitHatch: 'rgba(255,255,255,.55)', pill: '#1f2328', pillFg: '#ffffff', fnL: 70, fnS: 55, fnCL: 88, arrow: '#1f2328'
  },
  dark: {
    held: '#56b4e9', wait: '#e69f00', rel: '#3a4049', heldOff: '#cc79a7', unk: '#2a2f36',
    cpu: '#009e73', preempt: '#f0e442', blocked: '#4a515b',
    bg: '#16191d', soft: '#1e2227', lane: '#1a1d22', laneSel: '#2c2a1c', gutterSel: '#3a3416', strip: '#23272d',
    grid: '#262a30', sep: '#30353c', bd: '#3a4049', fg: '#e6edf3', mut: '#9ba5b0', faint: '#7d8590', axis: '#c2cad3',
    acc: '#58a6ff', edge: '#d0d7de', exc: '#e69f00', label: '#0d1014', labelC: '#1f2429', labelDim: '#6e7681',
    dim: '#2a2e34', hover: 'rgba(255,255,255,.7)', cursor: 'rgba(230,237,243,.4)', hatch: 'rgba(20,24,28,.35)',
    waitHatch: 'rgba(0,0,0,.4)', pill: '#e6edf3', pillFg: '#16191d', fnL: 62, fnS: 50, fnCL: 72, arrow: '#e6edf3'
  }
};
var C = THEMES.light, themeMode = 'auto', themeName = 'light';
var GIL_COL, OS_COL, PS_COL, DIM;
var GIL_NAME = ['released', 'waiting for the GIL', 'holding the GIL'];
var OS_NAME = ['on CPU', 'preempted (runnable, off CPU)', 'blocked (sleeping)'];
var GIL_ORDER = [2, 1, 0], OS_ORDER = [0, 1, 2];
var darkQuery = window.matchMedia ? window.matchMedia('(prefers-color-scheme: dark)') : null;
/* mode: auto (follows prefers-color-scheme), light or dark */
function applyTheme(mode) {
  themeMode = mode === 'light' || mode === 'dark' ? mode : 'auto';
  themeName = themeMode === 'auto' ? (darkQuery && darkQuery.matches ? 'dark' : 'light') : themeMode;
  C = THEMES[themeName];
  GIL_COL = [C.rel, C.wait, C.held];
  OS_COL = [C.cpu, C.preempt, C.blocked];
  PS_COL = [C.held, C.heldOff, C.wait, C.rel, C.unk]; /* profile states: running, held off CPU, waiting, released, unknown */
  DIM = C.dim;
  var root = D.documentElement;
  root.setAttribute('data-gt-theme', themeName);
  ['held', 'wait', 'rel'].forEach(function (k) { root.style.setProperty('--' + k, C[k]); });
  var b = $('gt-theme');
  if (b) { b.textContent = 'Theme: ' + themeMode; b.title = 'Colour theme: auto (follows the system), light or dark'; }
}
applyTheme('auto');
function restyle() { /* after a theme change: everything drawn from the palette */
  if (!meta) return;
  if (colPy) mkColors();
  if (hatch) mkHatch();
  var lg = $('gt-legend');
  if (lg && meta) { lg.textContent = ''; buildLegend(); }
  requestDraw();
  if (typeof drawProfile === 'function' && pfCv) { pfLegend(); drawProfile(); }
}
if (darkQuery && darkQuery.addEventListener) darkQuery.addEventListener('change', function () { if (themeMode === 'auto') { applyTheme('auto'); restyle(); } });
(function () {
  var b = $('gt-theme');
  if (!b) return;
  b.addEventListener('click', function () {
    applyTheme({ auto: 'light', light: 'dark', dark: 'auto' }[themeMode]);
    restyle();
  });
})();
var hatch = null, waitHatch = null;
function patternOf(stroke, w) {
  var hc = D.createElement('canvas'); hc.width = hc.height = 6;
  var hx = hc.getContext('2d');
  hx.strokeStyle = stroke; hx.lineWidth = w;
  hx.beginPath(); hx.moveTo(0, 6); hx.lineTo(6, 0); hx.moveTo(-1, 1); hx.lineTo(1, -1); hx.moveTo(5, 7); hx.lineTo(7, 5); hx.stroke();
  return ctx.createPattern(hc, 'repeat');
}
/* C functions: light diagonal hatch; waiting for the GIL: a stripe pattern on top of its colour */
function mkHatch() { hatch = patternOf(C.hatch, 1.2); waitHatch = patternOf(C.waitHatch, 1.5); }

/* == colours of functions == */
var colPy, colC;
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
    var l = C.fnL + ((h >>> 10) % 8), sat = C.fnS + ((h >>> 16) % 20);
    colPy[f] = 'hsl(' + hue + ',' + sat + '%,' + l + '%)';
    colC[f] = 'hsl(' + hue + ',28%,' + C.fnCL + '%)';
  });
}

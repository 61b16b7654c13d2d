/* viewer.js part: the timeline: layout, drawing, hit testing, tooltips, search, input. Joined with the other parts (CMakeLists.txt GT_VIEWER_JS) inside one closure. */
/* == timeline state & layout == */
var tl = $('gt-tl'), stick = $('gt-stick'), cv = $('gt-cv'), ov = $('gt-ov'), tip = $('gt-tip'), spacer = $('gt-spacer');
var ctx = cv.getContext('2d'), octx = ov.getContext('2d');
var W = 300, H = 200, dpr = 1, gutterW = 150, plotW = 150;
var AXIS_H = 24, ROW_H = 16, GIL_H = 16, OS_H = 6, PAD = 5, MINW = 2;
var FAM = 'system-ui,-apple-system,"Segoe UI",Roboto,Arial,sans-serif', FONT = '11px ' + FAM, FONT_B = '600 12px ' + FAM;
var contentH = 0, selThread = -1, selSpan = null, hover = null, mouse = null, rangeSel = null;
var nameW = null, ELL_W = 8, searchQ = '';

var idleY = -1, IDLE_H = 24;
/* Inline (fitLanes) every lane fits the view: the lanes' call rows share the height left
 * after their GIL and OS strips, shallow stacks whole and the rest cut to an equal depth
 * (at least MIN_ROWS); a click on a cut lane's name shows all its rows. */
var fitLanes = false, MIN_ROWS = 3;
function rowBudget() {
  var fixed = 0, open = [];
  threads.forEach(function (th) {
    if (th.idle && !showIdle) return;
    var strips = PAD * 2 + (gilKnown ? GIL_H + 2 : 0) + (hasOS ? OS_H + 3 : 0) + 1;
    if (th.collapsed) { fixed += 37; return; }
    if (th.full) { fixed += strips + th.rows.length * ROW_H; return; }
    fixed += strips;
    open.push(Math.max(1, th.rows.length));
  });
  if (threads.some(function (th) { return th.idle; })) fixed += IDLE_H + 1;
  var left = Math.floor((H - AXIS_H - fixed - 8) / ROW_H), cap = MIN_ROWS, i; /* 8: the spacer's margin */
  open.sort(function (a, b) { return a - b; });
  for (i = 0; i < open.length; i++) { /* water-filling: the shallow lanes first */
    cap = Math.max(MIN_ROWS, Math.floor(left / (open.length - i)));
    if (open[i] > cap) break;
    left -= open[i];
  }
  if (i === open.length) return { cap: Infinity, extra: 0 };
  return { cap: cap, extra: Math.max(0, left - cap * (open.length - i)) }; /* one more row for the first cut lanes */
}
function layout() {
  var y = 0, budget = fitLanes ? rowBudget() : { cap: Infinity, extra: 0 };
  idleY = -1;
  threads.forEach(function (th) {
    if (th.idle && idleY < 0) { idleY = y; y += IDLE_H + 1; }
    th.hidden = th.idle && !showIdle;
    th.y0 = y;
    if (th.hidden) { th.h = 0; return; }
    var yy = y + PAD;
    if (gilKnown) { th.gilY = yy; yy += GIL_H + 2; } else th.gilY = -1;
    if (hasOS) { th.osY = yy; yy += OS_H + 3; } else th.osY = -1;
    if (!gilKnown && !hasOS) yy += 2;
    th.flameY = yy;
    th.nRows = th.collapsed ? 0 : th.full ? th.rows.length : Math.min(th.rows.length, budget.cap);
    if (th.nRows < th.rows.length && !th.collapsed && !th.full && budget.extra > 0) { th.nRows++; budget.extra--; }
    var rows = th.collapsed ? 0 : Math.max(1, th.nRows);
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
function drawIv(c, iv, y, h, pal, order, k, patQ) { /* patQ: the state drawn with the stripe pattern too */
  var s = iv.s, e = iv.e, st = iv.st, me = iv.me, n = iv.n, cum = iv.cum;
  if (!n) return;
  var X0 = gutterW, i = lowerGT(me, vs, 0, n);
  while (i < n && s[i] < ve) {
    var x0 = X0 + (s[i] - vs) * k, x1 = X0 + (e[i] - vs) * k;
    if (x1 - x0 >= MINW) {
      var a = Math.max(Math.round(x0), X0 - 1), b = Math.min(Math.round(x1), W + 1);
      c.fillStyle = pal[st[i]];
      c.fillRect(a, y, Math.max(1, b - a), h);
      if (st[i] === patQ && b - a >= 3) { c.fillStyle = waitHatch; c.fillRect(a, y, b - a, h); }
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
      if (fl[i] & 16 && w > 2) { c.fillStyle = C.edge; c.fillRect(a, y + h - 2, w, 2); cur = null; } /* packed */
      if (fl[i] & 7 && w > 4) {
        c.fillStyle = C.edge; cur = null;
        if (fl[i] & 1 && x0 >= X0 - 1) c.fillRect(a, y, 2, h);
        if (fl[i] & 2 && x1 <= W + 1) c.fillRect(a + w - 2, y, 2, h);
        if (fl[i] & 4) {
          c.fillStyle = C.exc; c.beginPath();
          c.moveTo(a + w, y); c.lineTo(a + w, y + 7); c.lineTo(a + w - 7, y); c.fill();
        }
      }
      if (w > 24) {
        var lx = Math.max(a, X0) + 3, avail = Math.min(a + w, W) - lx - 3;
        if (avail > 12) {
          var t = label(c, fi, avail);
          if (t) { c.fillStyle = match ? (isC ? C.labelC : C.label) : C.labelDim; c.fillText(t, lx, y + 11.5); cur = null; }
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
/* A lane off screen (or folded away) draws nothing. */
function laneHidden(th, y) { return th.hidden || y > H || y + th.h < AXIS_H; }
function drawLaneBacks(c, sy) {
  threads.forEach(function (th) {
    var y = AXIS_H + th.y0 - sy;
    if (laneHidden(th, y)) return;
    if (th.idx === selThread) { c.fillStyle = C.laneSel; c.fillRect(gutterW, y, plotW, th.h); }
    else if (th.idx % 2) { c.fillStyle = C.lane; c.fillRect(gutterW, y, plotW, th.h); }
  });
}
function drawGrid(c, first, step) {
  c.fillStyle = C.grid;
  for (var t = first; t <= ve; t += step) c.fillRect(Math.round(xOf(t)), AXIS_H, 1, H - AXIS_H);
}
/* One lane's plot: its GIL and OS strips, its call rows in view, the marks over them. */
function drawLane(c, th, sy, k) {
  var y = AXIS_H + th.y0 - sy;
  if (laneHidden(th, y)) return;
  if (th.gilY >= 0) {
    c.fillStyle = C.strip; c.fillRect(gutterW, AXIS_H + th.gilY - sy, plotW, GIL_H);
    drawIv(c, th.gil, AXIS_H + th.gilY - sy, GIL_H, GIL_COL, GIL_ORDER, k, 1);
  }
  if (th.osY >= 0) {
    c.fillStyle = C.strip; c.fillRect(gutterW, AXIS_H + th.osY - sy, plotW, OS_H);
    drawIv(c, th.os, AXIS_H + th.osY - sy, OS_H, OS_COL, OS_ORDER, k, -1);
  }
  if (!th.collapsed) {
    var fy = AXIS_H + th.flameY - sy;
    if (!th.nSpans) {
      c.fillStyle = C.faint;
      c.fillText('no calls recorded in this thread', gutterW + 6, fy + 11.5);
    }
    var d0 = Math.max(0, Math.floor((AXIS_H - fy) / ROW_H)), d1 = Math.min(th.nRows, Math.ceil((H - fy) / ROW_H));
    for (var d = d0; d < d1; d++) drawRow(c, th.rows[d], fy + d * ROW_H, k);
  }
  if (th.cut != null) drawCut(c, th, y, AXIS_H + th.flameY - sy);
  if (th.kept != null) drawKept(c, th, y, AXIS_H + th.flameY - sy);
  c.fillStyle = C.sep; c.fillRect(gutterW, y + th.h, plotW, 1);
}
/* One lane's gutter: fold arrow, name, its process and GIL share, cut rows, strip labels. */
function drawLaneName(c, th, sy) {
  var y0 = AXIS_H + th.y0 - sy;
  if (laneHidden(th, y0)) return;
  if (th.idx === selThread) { c.fillStyle = C.gutterSel; c.fillRect(0, y0, gutterW, th.h); c.fillStyle = C.acc; c.fillRect(0, y0, 3, th.h); }
  c.fillStyle = C.sep; c.fillRect(0, y0 + th.h, gutterW, 1);
  var y = Math.max(y0, Math.min(AXIS_H, y0 + th.h - 36)); /* the name sticks while the lane is visible */
  c.fillStyle = C.mut; c.font = '10px ' + FAM;
  c.fillText(th.collapsed ? '\u25b8' : '\u25be', 7, y + 17);
  c.font = FONT_B; c.fillStyle = C.fg;
  var nm = th.name, avail = gutterW - 24 - 30, wN = c.measureText(nm).width;
  if (wN > avail) { var nn = Math.max(1, Math.floor(nm.length * (avail - 10) / wN)); nm = nm.slice(0, nn) + '\u2026'; }
  c.fillText(nm, 18, y + 17);
  c.font = FONT; c.fillStyle = C.mut;
  var sub = procSub(th);
  if (gilKnown && th.sum.held_pct != null) sub += (freeThreaded ? ' \u00b7 parked ' + fmtPct(th.sum.wait_pct) : ' \u00b7 held ' + fmtPct(th.sum.held_pct));
  c.fillText(sub, 18, y + 31);
  if (!th.collapsed && th.nRows < th.rows.length && th.h >= 52) {
    c.fillStyle = C.acc;
    c.fillText('+' + plural(th.rows.length - th.nRows, 'deeper level') + ' \u25be', 18, y0 + th.h - 7);
  }
  c.font = '9px ' + FAM; c.textAlign = 'right'; c.fillStyle = C.faint;
  if (th.gilY >= 0) c.fillText('GIL', gutterW - 5, AXIS_H + th.gilY - sy + GIL_H / 2 + 3);
  if (th.osY >= 0) c.fillText('OS', gutterW - 5, AXIS_H + th.osY - sy + 6);
  c.textAlign = 'left';
}
/* The gutter: lane names, the idle threads' row, the line between gutter and plot. */
function drawGutter(c, sy) {
  c.fillStyle = C.soft; c.fillRect(0, AXIS_H, gutterW, H - AXIS_H);
  threads.forEach(function (th) { drawLaneName(c, th, sy); });
  if (idleY >= 0) {
    var iy = AXIS_H + idleY - sy;
    c.fillStyle = C.soft; c.fillRect(0, iy, W, IDLE_H); c.fillStyle = C.sep; c.fillRect(0, iy + IDLE_H, W, 1);
    c.font = FONT; c.fillStyle = C.mut;
    c.fillText((showIdle ? '\u25be ' : '\u25b8 ') + idleText(), 7, iy + 16);
  }
  c.fillStyle = C.bd; c.fillRect(gutterW - 1, AXIS_H, 1, H - AXIS_H);
  if (!threads.length) {
    c.font = '13px ' + FAM; c.fillStyle = C.mut;
    c.fillText('No threads were traced.', gutterW + 16, AXIS_H + 30);
  }
}
function drawAxis(c, first, step) {
  c.font = FONT;
  c.fillStyle = C.bg; c.fillRect(0, 0, W, AXIS_H);
  c.fillStyle = C.bd; c.fillRect(0, AXIS_H - 1, W, 1);
  c.save(); c.beginPath(); c.rect(gutterW, 0, plotW, AXIS_H); c.clip();
  for (var t = first; t <= ve; t += step) {
    var x = Math.round(xOf(t));
    c.fillStyle = C.faint; c.fillRect(x, AXIS_H - 7, 1, 6);
    c.fillStyle = C.axis; c.fillText(fmtTs(t, step), x + 3, 14);
  }
  c.restore();
  c.fillStyle = C.mut;
  c.fillText('time \u2192', 8, 15);
}
function draw() {
  var t0 = performance.now();
  cutsDrawn = [];
  var c = ctx, sy = tl.scrollTop, k = plotW / (ve - vs);
  c.setTransform(dpr, 0, 0, dpr, 0, 0);
  c.fillStyle = C.bg; c.fillRect(0, 0, W, H);
  c.font = FONT; c.textBaseline = 'alphabetic';
  var step = niceStep((ve - vs) / Math.max(2, plotW / 110)), first = Math.ceil(vs / step) * step;
  c.save();
  c.beginPath(); c.rect(gutterW, AXIS_H, plotW, H - AXIS_H); c.clip();
  drawLaneBacks(c, sy);
  drawGrid(c, first, step);
  threads.forEach(function (th) { drawLane(c, th, sy, k); });
  if (gilKnown) drawHandoffs(c, sy);
  c.restore();
  drawGutter(c, sy);
  drawAxis(c, first, step);
  $('gt-range').textContent = 'Visible ' + fmtDur(ve - vs) + (ve - vs < span ? ' of ' + fmtDur(span) : '');
  perf.lastFrameMs = performance.now() - t0;
  drawOverlay();
}

/* The budget mark: where a thread's recorded calls end (max_events reached); the calls
 * after it are in the Profile and Top functions only, so the flame area past it is shaded. */
var CUT_TEXT = 'calls past here: in Profile/Top functions only', cutsDrawn = [];
function drawCut(c, th, y, fy) {
  var x = xOf(th.cut), yb = y + th.h;
  if (x > W) return;
  var xa = Math.max(gutterW, x), ya = th.collapsed ? y : Math.max(y, fy);
  c.globalAlpha = 0.08; c.fillStyle = C.fg; c.fillRect(xa, ya, W - xa, yb - ya); c.globalAlpha = 1;
  if (x < gutterW) return;
  c.fillStyle = C.acc; c.fillRect(Math.round(x) - 1, y, 2, th.h);
  c.font = FONT; var tw = c.measureText(CUT_TEXT).width, tx = x + 4 + tw <= W ? x + 4 : x - 4 - tw;
  c.fillStyle = C.bg; c.globalAlpha = 0.85; c.fillRect(tx - 2, ya + 2, tw + 4, 14); c.globalAlpha = 1;
  c.fillStyle = C.acc; c.fillText(CUT_TEXT, tx, ya + 13);
  cutsDrawn.push({ name: th.name, tid: th.tid, t: th.cut, x: x, text: CUT_TEXT });
}

/* keep="last": where a thread's recorded calls start (the last events of a flight
 * recorder); the calls before it are in the Profile and Top functions only, so the flame
 * area before it is shaded. Listed with the budget marks (cuts()). */
function keptText(th) {
  var n = num(meta.max_events, 0);
  return 'last ' + (n > 0 ? fmtInt(n) + ' ' : '') + 'events: from t=' + fmtAt(th.kept) +
    ' (earlier calls: in Profile/Top functions only)';
}
function drawKept(c, th, y, fy) {
  var x = xOf(th.kept), yb = y + th.h, text = keptText(th);
  if (x < gutterW) return;
  var xb = Math.min(W, x), ya = th.collapsed ? y : Math.max(y, fy);
  c.globalAlpha = 0.08; c.fillStyle = C.fg; c.fillRect(gutterW, ya, xb - gutterW, yb - ya); c.globalAlpha = 1;
  if (x > W) return;
  c.fillStyle = C.acc; c.fillRect(Math.round(x) - 1, y, 2, th.h);
  c.font = FONT; var tw = c.measureText(text).width, tx = x + 4 + tw <= W ? x + 4 : x - 4 - tw;
  c.fillStyle = C.bg; c.globalAlpha = 0.85; c.fillRect(tx - 2, ya + 2, tw + 4, 14); c.globalAlpha = 1;
  c.fillStyle = C.acc; c.fillText(text, tx, ya + 13);
  cutsDrawn.push({ name: th.name, tid: th.tid, t: th.kept, x: x, text: text });
}

/* GIL hand-offs: an arrow from each release to the next acquisition by another thread,
 * drawn once they are few enough in view to tell apart (at most 200, 8 px apart on average). */
var handoffsDrawn = 0;
function drawHandoffs(c, sy) {
  var acq = [], nView = 0;
  handoffsDrawn = 0;
  threads.forEach(function (th) {
    if (th.hidden || th.gilY < 0) return;
    var L = th.gil.by[2], i0 = lowerGE(L.s, vs, 0, L.n), i1 = lowerGE(L.s, ve, i0, L.n);
    nView += i1 - i0;
    for (var i = Math.max(0, i0 - 1); i < i1; i++) acq.push({ s: L.s[i], e: L.e[i], th: th });
  });
  if (nView > 200 || nView * 8 > plotW || acq.length < 2) return;
  acq.sort(function (x, y) { return x.s - y.s; });
  c.strokeStyle = c.fillStyle = C.arrow; c.globalAlpha = 0.7; c.lineWidth = 1.2;
  for (var k = 1; k < acq.length; k++) {
    var p = acq[k - 1], q = acq[k];
    if (p.th === q.th || p.e > q.s + 1) continue;
    var x0 = xOf(p.e), x1 = xOf(q.s), y0 = AXIS_H + p.th.gilY - sy + GIL_H / 2, y1 = AXIS_H + q.th.gilY - sy + (q.th.gilY > p.th.gilY ? 0 : GIL_H);
    if (x1 < gutterW || x0 > W) continue;
    var dir = y1 > y0 ? 1 : -1;
    c.beginPath(); c.moveTo(x0, y0); c.lineTo(x1, y1 - dir * 1); c.stroke();
    var ang = Math.atan2(y1 - y0, x1 - x0), hl = 6;
    c.beginPath(); c.moveTo(x1, y1);
    c.lineTo(x1 - hl * Math.cos(ang - 0.4), y1 - hl * Math.sin(ang - 0.4));
    c.lineTo(x1 - hl * Math.cos(ang + 0.4), y1 - hl * Math.sin(ang + 0.4));
    c.fill();
    handoffsDrawn++;
  }
  c.globalAlpha = 1;
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
    c.strokeStyle = C.hover; c.lineWidth = 1; c.strokeRect(q.x + 0.5, q.y + 0.5, q.w - 1, q.h - 1);
  }
  if (hover && (hover.kind === 'gil' || hover.kind === 'os')) {
    var th = threads[hover.th], iv = th[hover.kind];
    var y = AXIS_H + (hover.kind === 'gil' ? th.gilY : th.osY) - tl.scrollTop, hh = hover.kind === 'gil' ? GIL_H : OS_H;
    var a = Math.max(gutterW - 4, xOf(iv.s[hover.i])), b = Math.min(W + 4, xOf(iv.e[hover.i]));
    c.strokeStyle = C.fg; c.lineWidth = 1.5; c.strokeRect(a, y - 1, Math.max(1, b - a), hh + 2);
  }
  if (selSpan && selSpan.th < threads.length) {
    var r = spanRect(threads[selSpan.th], selSpan.d, selSpan.i);
    c.strokeStyle = C.acc; c.lineWidth = 2; c.strokeRect(r.x + 1, r.y + 1, Math.max(1, r.w - 2), r.h - 2);
  }
  c.restore();
  if (rangeSel) {
    var x0 = Math.min(rangeSel.x0, rangeSel.x1), x1 = Math.max(rangeSel.x0, rangeSel.x1);
    c.globalAlpha = 0.14; c.fillStyle = C.acc; c.fillRect(x0, 0, x1 - x0, H);
    c.globalAlpha = 1; c.fillStyle = C.acc; c.fillRect(x0, 0, 1, H); c.fillRect(x1, 0, 1, H);
    pill(c, fmtDur(Math.abs(tOf(x1) - tOf(x0))), (x0 + x1) / 2, true);
  } else if (mouse && mouse.x > gutterW) {
    c.fillStyle = C.cursor; c.fillRect(Math.round(mouse.x), AXIS_H, 1, H - AXIS_H);
    pill(c, fmtTs(tOf(mouse.x), (ve - vs) / plotW), mouse.x, false);
  }
}
function pill(c, text, x, center) {
  c.font = FONT;
  var w = c.measureText(text).width + 8, lx = center ? x - w / 2 : x + 4;
  lx = Math.max(gutterW, Math.min(W - w - 1, lx));
  c.fillStyle = C.pill; c.fillRect(lx, 3, w, 16);
  c.fillStyle = C.pillFg; c.fillText(text, lx + 4, 15);
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
  for (var i = 0; i < threads.length; i++) if (!threads[i].hidden && cy >= threads[i].y0 && cy < threads[i].y0 + threads[i].h + 1) return i;
  return -1;
}
function hit(x, y) {
  if (y < AXIS_H) return { kind: 'axis' };
  if (idleY >= 0 && y - AXIS_H + tl.scrollTop >= idleY && y - AXIS_H + tl.scrollTop < idleY + IDLE_H) return { kind: 'idle' };
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
  if (!th.collapsed && d >= 0 && d < th.nRows) {
    var r = th.rows[d];
    i = findIn(r.s, r.e, r.me, r.n, t, tol);
    if (i >= 0) return { kind: 'span', th: ti, d: d, i: i, t: t };
  }
  return { kind: 'lane', th: ti };
}

/* == GIL analysis for tooltips == */
/* gid: only intervals of that interpreter's GIL (a wait is for one GIL); undefined: any */
function overlapBy(th0, state, a, b, gid) {
  var out = [];
  threads.forEach(function (th) {
    if (th === th0) return;
    var L = th.gil.by[state];
    if (!L.n) return;
    var i = lowerGT(L.e, a, 0, L.n), tot = 0, first = -1;
    for (; i < L.n && L.s[i] < b; i++) {
      if (gid !== undefined && (L.g ? L.g[i] : 0) !== gid) continue;
      tot += Math.min(b, L.e[i]) - Math.max(a, L.s[i]); if (first < 0) first = i;
    }
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

/* time of state q in [a, b) of an interval list (sorted, non-overlapping) */
function ivPart(iv, q, a, b) {
  var n = iv.n;
  if (!n || b <= a) return 0;
  var i0 = lowerGT(iv.me, a, 0, n), i1 = lowerGE(iv.s, b, i0, n);
  if (i1 <= i0) return 0;
  var tot = iv.cum[q][i1] - iv.cum[q][i0];
  if (iv.st[i0] === q && iv.s[i0] < a) tot -= a - iv.s[i0];
  if (iv.st[i1 - 1] === q && iv.e[i1 - 1] > b) tot -= iv.e[i1 - 1] - b;
  return Math.max(0, tot);
}
/* A call's time [a, b) split by the GIL state of its thread, time off CPU, and the thread that
 * held the GIL longest while this one waited (exact over up to 4000 waits, else over the call). */
var MAX_WAITS = 4000;
function gilSplit(th, a, b) {
  var g = th.gil, out = { held: ivPart(g, 2, a, b), wait: ivPart(g, 1, a, b), rel: ivPart(g, 0, a, b), off: null, holder: null, approx: false };
  out.unk = Math.max(0, (b - a) - out.held - out.wait - out.rel);
  if (hasOS) out.off = ivPart(th.os, 1, a, b) + ivPart(th.os, 2, a, b);
  if (!out.wait) return out;
  var L = g.by[1], i = lowerGT(L.e, a, 0, L.n), by = new Map(), n = 0;
  var j = lowerGE(L.s, b, i, L.n);
  if (j - i > MAX_WAITS) { out.approx = true; overlapBy(th, 2, a, b).forEach(function (o) { by.set(o.th, o.ns); }); }
  else for (; i < j; i++, n++) {
    overlapBy(th, 2, Math.max(a, L.s[i]), Math.min(b, L.e[i]), L.g ? L.g[i] : 0).forEach(function (o) { by.set(o.th, (by.get(o.th) || 0) + o.ns); });
  }
  by.forEach(function (ns, t) { if (!out.holder || ns > out.holder.ns) out.holder = { th: t, ns: ns }; });
  return out;
}
function splitTable(box, th, a, b) {
  var sp = gilSplit(th, a, b), tot = b - a || 1, tb = el('table', 'gt-split', null, box);
  function row(name, ns, key, sw, cls) {
    var tr = el('tr', null, null, tb), td = el('td', null, null, tr);
    if (sw) el('i', 'gt-sw' + (cls ? ' ' + cls : ''), null, td).style.backgroundColor = sw;
    td.appendChild(D.createTextNode(name));
    var v = el('td', 'n', fmtDur(ns), tr);
    v.setAttribute('data-ns', String(Math.round(ns))); v.setAttribute('data-key', key);
    el('td', 'n gt-muted', fmtPct(100 * ns / tot), tr);
  }
  function axis(text, title) { var th = el('th', null, text, el('tr', 'gt-axis', null, tb)); th.colSpan = 3; th.title = title; }
  axis('GIL', 'these add up to the call\'s time');
  row('GIL held', sp.held, 'held', GIL_COL[2]);
  row('waiting for the GIL', sp.wait, 'wait', GIL_COL[1], 'gt-swwait');
  row('GIL released', sp.rel, 'released', GIL_COL[0]);
  if (sp.unk > 0.5) row('GIL unknown', sp.unk, 'unknown', null);
  if (sp.off != null) {
    /* another axis: time off CPU overlaps the GIL states (a thread waits for the GIL asleep) */
    axis('OS \u00b7 separate axis, overlaps the GIL states', 'the OS scheduler\'s view of the same time');
    row('off CPU', sp.off, 'off_cpu', OS_COL[1]);
  }
  if (sp.holder) {
    var hl = line(box, null, (sp.approx ? '\u2248 ' : '') + 'waited longest on \u2190 ' + sp.holder.th.name + ' (' + fmtDur(sp.holder.ns) + ')');
    hl.setAttribute('data-holder', sp.holder.th.name);
  }
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
  if (fl & 16) flags.push('packed: ' + fmtInt(r.pn ? r.pn[i] : 0) + ' calls, each under a pixel at full zoom-out');
  var kvs = [['start', fmtAt(r.s[i])], ['duration', fmtDur(dur)]];
  if (!(fl & 16)) kvs.push(['self', fmtDur(selfTime(th, d, i))]); /* a packed block's calls are inside it */
  if (full) { kvs.push(['depth', d]); kvs.push(['thread', th.name]); }
  var p = line(box, null, null);
  kvs.forEach(function (q) { var s = el('span', 'kv', null, p); el('i', null, q[0] + ' ', s); s.appendChild(D.createTextNode(String(q[1]))); });
  if (flags.length) { if (full) el('span', 'l', '  [' + flags.join(', ') + ']', hd); else line(box, 'l', flags.join(' \u00b7 ')); }
  if (gilKnown) splitTable(box, th, r.s[i], r.e[i]);
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
  var iv = th[kind], q = iv.st[i], a = iv.s[i], b = iv.e[i], gid = iv.g ? iv.g[i] : 0;
  var gname = freeThreaded ? ['released', 'parked', 'running'][q] : 'GIL: ' + GIL_NAME[q] + (gid && q ? ' (interp ' + gid + '\u2019s GIL)' : '');
  line(box, 't', (kind === 'gil' ? gname : 'OS: ' + OS_NAME[q]) + ' \u00b7 ' + fmtDur(b - a));
  line(box, 'l', th.name + ' \u00b7 ' + fmtAt(a) + ' \u2192 ' + fmtAt(b));
  if (kind !== 'gil') return;
  var lab = q === 1 ? parkLabel(th, a) : '';
  if (lab) line(box, 'l gt-lk', lab);
  if (q === 1) {
    var hs = overlapBy(th, 2, a, b, gid);
    line(box, 'h', hs.length ? (freeThreaded ? 'Running meanwhile:' : 'Held meanwhile by:') :
      freeThreaded ? 'No other thread ran meanwhile.' : 'No other thread held the GIL meanwhile (hand-off latency).');
    hs.slice(0, full ? 6 : 3).forEach(function (o) {
      var fn = holderFuncText(o, a, b, t);
      line(box, null, '\u2190 ' + o.th.name + ' for ' + fmtDur(o.ns) + (fn ? ', in ' + fn : ''));
    });
  } else if (q === 2) {
    var ws = overlapBy(th, 1, a, b, gid);
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
var HINT = 'Click: details \u00b7 Ctrl+wheel: zoom \u00b7 drag: pan \u00b7 click a thread name: more rows, fold \u00b7 ? all keys';
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
  if (!$('gt-tab-profile').hidden) drawProfile();
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
  if (th.collapsed || best.d >= th.nRows) { th.collapsed = false; th.full = true; layout(); }
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
  ov.style.cursor = !h ? 'default' : h.kind === 'axis' ? 'col-resize' : h.kind === 'gutter' || h.kind === 'idle' ? 'pointer' : 'grab';
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
  if (h.kind === 'idle') { setShowIdle(!showIdle); return; }
  if (h.kind === 'gutter') {
    var g = threads[h.th];
    if (!g.collapsed && g.nRows < g.rows.length) g.full = true; /* a cut lane: all its rows */
    else g.collapsed = !g.collapsed;
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
/* Ctrl/Cmd+wheel and pinch (a wheel event with ctrlKey in browsers) zoom, shift+wheel and
 * horizontal swipes pan, a plain wheel scrolls the lanes when they overflow, else the page
 * (so a notebook scrolls past the output instead of being trapped by it). */
tl.addEventListener('wheel', function (ev) {
  var p = local(ev);
  if (p.x < gutterW && !ev.ctrlKey && !ev.metaKey) return; /* native vertical scroll over the thread names */
  var m = ev.deltaMode === 1 ? 16 : ev.deltaMode === 2 ? H : 1, dx = ev.deltaX * m, dy = ev.deltaY * m;
  if (ev.ctrlKey || ev.metaKey) {
    ev.preventDefault();
    zoomAt(tOf(Math.max(p.x, gutterW)), Math.exp(Math.max(-1, Math.min(1, dy * 0.01))));
  } else if (ev.shiftKey || Math.abs(dx) > Math.abs(dy)) {
    ev.preventDefault();
    pan((ev.shiftKey && !dx ? dy : dx) * (ve - vs) / plotW);
  } else return; /* the browser scrolls the lanes or the page */
  mouse = p; hover = null; tip.hidden = true;
}, { passive: false });
/* Keys work while the pointer is over the viewer: a real pointer move over the lanes takes the
 * focus (not content scrolling under a resting pointer, say while typing in a notebook cell). */
tl.addEventListener('mousemove', function (ev) {
  var a = D.activeElement, tg = a && a.tagName;
  if (a === tl || (!ev.movementX && !ev.movementY) || tg === 'INPUT' || tg === 'SELECT' || tg === 'TEXTAREA') return;
  try { window.focus(); } catch (e) { /* a cross-origin parent may refuse */ }
  tl.focus({ preventScroll: true });
});
tl.addEventListener('scroll', function () { hover = null; tip.hidden = true; requestDraw(); });
D.addEventListener('keydown', function (ev) {
  var tg = ev.target && ev.target.tagName;
  if (tg === 'INPUT' || tg === 'SELECT' || tg === 'TEXTAREA' || ev.metaKey || ev.ctrlKey || ev.altKey) return;
  if (ev.key === '?') { toggleKeys(); ev.preventDefault(); return; }
  if (ev.key === 'Escape' && !keysBox.hidden) { keysBox.hidden = true; ev.preventDefault(); return; }
  if ($('gt-tab-timeline').hidden) return;
  var w = ve - vs, c = mouse && mouse.x > gutterW ? tOf(mouse.x) : (vs + ve) / 2, used = true;
  switch (ev.key.length === 1 ? ev.key.toLowerCase() : ev.key) { /* W/A/S/D with or without shift or caps lock */
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
var keysBox = $('gt-keys');
var KEYS = [['W / +', 'zoom in at the pointer'], ['S / \u2212', 'zoom out'], ['A / \u2190', 'pan left'], ['D / \u2192', 'pan right'],
  ['\u2191 / \u2193', 'scroll the lanes'], ['0', 'show the whole trace'], ['/', 'search functions'], ['Enter', 'next match (shift: previous)'],
  ['Esc', 'clear the selection'], ['?', 'this help'], ['Ctrl/\u2318 + wheel, pinch', 'zoom'], ['Shift + wheel', 'pan'],
  ['wheel', 'scroll (the lanes, else the page)'], ['drag', 'pan'], ['drag the time axis', 'zoom to a range'],
  ['double-click', 'zoom to a call'], ['click a thread name', 'fold its lane']];
function toggleKeys() {
  if (keysBox.hidden && !keysBox.firstChild) {
    var tb = el('table', null, null, keysBox);
    KEYS.forEach(function (k) { var tr = el('tr', null, null, tb); el('kbd', null, k[0], el('td', null, null, tr)); el('td', null, k[1], tr); });
  }
  keysBox.hidden = !keysBox.hidden;
}
$('gt-help').onclick = toggleKeys;
$('gt-zin').onclick = function () { zoomAt((vs + ve) / 2, 0.5); };
$('gt-zout').onclick = function () { zoomAt((vs + ve) / 2, 2); };
$('gt-zreset').onclick = function () { setView(tMin, tMax); };


/* viewer.js part: header, banners, summary and blame tables. Joined with the other parts (CMakeLists.txt GT_VIEWER_JS) inside one closure. */
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
  /* one short line (GIL probe and OS-state source); the probe's details in its tooltip */
  var m = $('gt-meta'), sched = String(meta.sched || 'unknown'), full = [];
  kv(m, 'GIL probe:', String(meta.backend || '?'), meta.backend_reason || '');
  kv(m, 'OS states:', /^perf/.test(sched) ? 'perf' : sched.split(/[\s:(]/)[0] || sched, sched);
  if (meta.backend_reason) full.push('GIL probe: ' + meta.backend + ' (' + meta.backend_reason + ')');
  full.push('OS states: ' + sched);
  if (meta.python) full.push('Python ' + meta.python);
  if (meta.pid != null) full.push('pid ' + meta.pid);
  full.push(fmtInt(num(meta.event_count, 0)) + ' call events');
  m.title = full.join('\n');
  var b = $('gt-banners');
  function banner(cls, strong, text) {
    var d = el('div', 'gt-banner ' + cls, null, b);
    el('b', null, strong, d);
    d.appendChild(D.createTextNode(' ' + text));
  }
  var de = num(meta.dropped_events, 0), gd = num(meta.gil_dropped, 0), sl = num(meta.sched_lost, 0);
  if (de > 0) banner('gt-warn', '\u26a0 ' + fmtInt(de) + ' call events were dropped',
    '(--max-events reached): the call trace is incomplete; GIL states are still complete.');
  var why = ' (a probe\'s buffer overflowed, or memory ran out):';
  if (gd > 0) banner('gt-warn', '\u26a0 ' + fmtInt(gd) + ' GIL events were lost' + why, 'GIL states, percentages and blame may be inaccurate.');
  if (meta.sampling) banner('gt-note', '\u2139 Calls were sampled, not traced:', String(meta.sampling) +
    '. Profile, Top functions and blame weigh each stack by the time to the next sample; the GIL table is exact.');
  var ca = num(meta.calls_aggregated, 0);
  if (ca > 0 && meta.keep === 'last') banner('gt-note', '\u2139 max_events reached, keep last: the timeline shows each thread\'s last calls, from where its window starts (marked).',
    'The ' + fmtInt(ca) + ' call events before them were kept as per-thread call trees: Profile and Top functions cover the whole run; GIL blame before the window is unknown.');
  else if (ca > 0) banner('gt-note', '\u2139 max_events reached: the timeline shows the calls recorded until then.',
    'The ' + fmtInt(ca) + ' call events after it were kept as per-thread call trees: Profile and Top functions cover the whole run; GIL blame after that point names the function that held the GIL most of each stretch. Raise --max-events for more of the timeline.');
  var ga = num(meta.gil_aggregated, 0) + num(meta.sched_aggregated, 0);
  if (ga > 0) banner('gt-note', '\u2139 ' + fmtInt(ga) + ' GIL and scheduler events past max_events were aggregated:',
    'the table is exact; the end of each such thread\'s GIL and OS strips is coalesced (at most 2048 tiles, each drawn as held, waiting, released) and not in the blame.');
  if (meta.tool_note) banner('gt-note', '\u2139 giltracer\'s own cost:', String(meta.tool_note) + '.');
  if (meta.tracer_note) banner('gt-warn', '\u26a0 Some threads were not fully traced:', String(meta.tracer_note));
  if (sl > 0) banner('gt-warn', '\u26a0 ' + fmtInt(sl) + ' scheduler records were lost' + why, 'OS states may have gaps.');
  if (freeThreaded) banner('gt-note', '\u2139 free-threaded build: no GIL; showing lock contention.',
    'The strip is running / parked (waiting in the parking lot for a contended lock, a stop-the-world ' +
    'pause or a join) / released (waiting for another thread: a lock\'s acquire, an event, a queue, as ' +
    'on a GIL build); blame is parked waiter \u2190 the thread that woke it, in its function.');
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
  bar.title = freeThreaded ? 'running ' + fmtPct(s.held_pct) + ', parked ' + fmtPct(s.wait_pct) +
    ', released ' + fmtPct(s.released_pct) : 'held ' + fmtPct(s.held_pct) + ', waiting ' + fmtPct(s.wait_pct) + ', released ' + fmtPct(s.released_pct);
}
var sumRows = [];
function buildSummary() {
  var tbl = $('gt-summary');
  var ft = freeThreaded, k = stwKnown() ? 1 : 0;
  var cols = [['Thread'], ['TID', 'n'], ['Wall', 'n'], [ft ? 'Contention' : 'GIL'], [ft ? 'Running' : 'Held', 'n'],
    [ft ? 'Parked' : 'Wait', 'n'], ['Released', 'n'], ['Off-CPU', 'n gt-ax'], [ft ? 'Parks' : 'Acq.', 'n'],
    [ft ? 'Longest park' : 'Longest wait', 'n'], [ft ? 'Woken mostly by' : 'Waited mostly on', 'fill']];
  if (k) cols.splice(6, 0, ['Stop-the-world', 'n']);
  var hd = thead(tbl, cols);
  hd[10 + k].title = 'the GIL holder and function this thread waited on most (GIL blame)';
  hd[3].title = 'held / waiting / released, as a share of the thread\'s traced life';
  hd[8 + k].title = 'GIL acquisitions';
  hd[7 + k].title = 'time off CPU (preempted or blocked): the OS\'s axis, overlapping held / waiting / released, which add up to Wall';
  if (k) hd[6].title = 'of Parked: stopped by a stop-the-world pause (GC, or a sys.monitoring change)' + lkSource();
  var top = {};
  (Array.isArray(P.blame) ? P.blame : []).forEach(function (r) {
    var w = r.waiter, t = top[w] || (top[w] = { tot: 0, best: null });
    t.tot += num(r.wait_ns, 0);
    if (!t.best || num(r.wait_ns, 0) > num(t.best.wait_ns, 0)) t.best = r;
  });
  var tb = el('tbody', null, null, tbl);
  if (!threads.length) emptyRow(tb, 'No threads were traced.', 11 + k);
  threads.forEach(function (th) {
    var s = th.sum, tr = el('tr', null, null, tb);
    cell(tr, th.name, 'nm', th.name);
    cell(tr, th.tid, 'n');
    cell(tr, fmtDur(num(s.wall_ns, th.end - th.start)), 'n');
    var bc = el('td', null, null, tr);
    if (gilKnown) gilBar(bc, s); else bc.textContent = 'unknown';
    ['held', 'wait', 'released'].forEach(function (q) {
      cell(tr, gilKnown ? fmtPct(s[q + '_pct']) : '\u2014', 'n', gilKnown ? fmtDur(s[q + '_ns']) : '');
      if (k && q === 'wait') stwCell(tr, th, s);
    });
    var off = s.off_cpu_ns == null ? null : 100 * s.off_cpu_ns / (num(s.wall_ns, 0) || 1);
    cell(tr, fmtPct(off), 'n gt-ax', s.off_cpu_ns == null ? 'no OS-state data' :
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
/* Free-threaded builds: P.lock_kinds (Trace._page_lock_kinds) has each thread's stop-the-world
 * time and, with the lock-kind probe (root + bpf), what its parks waited for. */
function lkThread(tid) { var lk = P.lock_kinds; return lk && lk.threads ? lk.threads[tid] : null; }
function stwKnown() {
  return freeThreaded && threads.some(function (th) { var t = lkThread(th.tid); return t && t.stw_ns != null; });
}
function lkSource() {
  var lk = P.lock_kinds || {};
  return lk.labelled ? ' (the lock-kind probe)' : ' (parked inside another thread\'s garbage collection, from gc.callbacks)';
}
function stwCell(tr, th, s) {
  var t = lkThread(th.tid), ns = t ? t.stw_ns : null, kinds = t && Array.isArray(t.kinds) ? t.kinds : [];
  var tip = ns == null ? 'not known' : fmtDur(ns) + ' stop-the-world' + (kinds.length ? '; parked: ' +
    kinds.map(function (kv) { return (kv[0] || 'unknown') + ' ' + fmtDur(kv[1]); }).join(', ') : '');
  cell(tr, ns == null ? '\u2014' : fmtDur(ns) + ' \u00b7 ' + fmtPct(100 * ns / (num(s.wall_ns, 0) || 1)), 'n', tip);
}
/* "waiter:waker" -> [[label, ns]] largest first (P.lock_kinds.blame), or null without labels */
function blameKinds() {
  var lk = P.lock_kinds, out = {};
  if (!freeThreaded || !lk || !lk.labelled || !Array.isArray(lk.blame)) return null;
  lk.blame.forEach(function (b) { out[b[0] + ':' + b[1]] = Array.isArray(b[2]) ? b[2] : []; });
  return out;
}
/* What the park starting at `a` (ns since t0) waited for: '' when nothing is known. */
function parkLabel(th, a) {
  var lk = P.lock_kinds;
  if (!lk || !freeThreaded) return '';
  if (!lk.labelled) return lk.reason ? 'not labelled: ' + lk.reason : '';
  var p = (lkThread(th.tid) || {}).parks, s = p && Array.isArray(p.s) ? p.s : [];
  var i = lowerGE(s, a, 0, s.length);
  return 'waited for: ' + (i < s.length && s[i] === a && lk.labels[p.l[i]] != null ? lk.labels[p.l[i]] : 'unknown (no probed park contains it)');
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
  tbl.textContent = ''; /* rebuilt when background threads are shown or folded (scope.js) */
  rows = rows.filter(function (r) { var w = byTid[r.waiter]; return showIdle || !(w && w.idle); });
  var kb = blameKinds(), cols = freeThreaded ? [['Parked'], ['Woken by'], ['Waker was in'], ['Location'], ['Parked', 'n'], ['Count', 'n'],
    ['Avg park', 'n'], ['Share', 'n']] : [['Waiter'], ['Holder'], ['Holder was in'], ['Location'], ['Wait', 'n'], ['Count', 'n'],
    ['Avg wait', 'n'], ['Share', 'n']];
  if (kb) cols.push(['Waited for']);
  var hk = thead(tbl, cols);
  if (kb) hk[8].title = 'what the parked thread waited for, of its parks this thread woke (all its functions; the lock-kind probe)';
  var tb = el('tbody', null, null, tbl);
  rows.sort(function (a, b) { return num(b.wait_ns, 0) - num(a.wait_ns, 0); });
  var N = 300;
  if (!rows.length) emptyRow(tb, freeThreaded ? 'No thread parked on a contended lock.' : gilKnown ? 'No thread waited for the GIL.' : 'GIL state unknown: no blame.', kb ? 9 : 8);
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
    if (kb) {
      var ks = kb[r.waiter + ':' + r.holder] || [], known = ks.filter(function (kv) { return kv[0]; });
      cell(tr, known.length ? known[0][0] : 'unknown', 'nm' + (known.length ? '' : ' gt-muted'),
        ks.map(function (kv) { return (kv[0] || 'unknown') + ' ' + fmtDur(kv[1]); }).join(', '));
    }
    tr.title = 'Click to highlight ' + fnLabel(f);
    tr.addEventListener('click', function () { if (f >= 0) setSearch(fName[f]); if (byTid[r.holder]) selectThread(byTid[r.holder].idx, true); });
  });
  if (rows.length > N) emptyRow(tb, (rows.length - N) + ' more rows not shown', kb ? 9 : 8);
}
function buildLegend() {
  var lg = $('gt-legend');
  function group(name) { el('span', 'g', name, lg); }
  function sw(col, text, cls) {
    var s = el('span', null, null, lg), w = el('i', 'gt-sw' + (cls ? ' ' + cls : ''), null, s);
    if (col) w.style.backgroundColor = col;
    s.appendChild(D.createTextNode(text));
  }
  if (gilKnown && freeThreaded) { group('No GIL'); sw(GIL_COL[2], 'running'); sw(GIL_COL[1], 'parked (lock contention)', 'gt-swwait'); sw(GIL_COL[0], 'released (waiting for another thread)'); }
  else if (gilKnown) { group('GIL'); sw(GIL_COL[2], 'held'); sw(GIL_COL[1], 'waiting', 'gt-swwait'); sw(GIL_COL[0], 'released'); }
  if (hasOS) { group('OS'); sw(OS_COL[0], 'on CPU'); sw(OS_COL[1], 'preempted'); sw(OS_COL[2], 'blocked'); }
  group('Calls'); sw(null, 'Python (color = function)', 'gt-swp'); sw(null, 'C function', 'gt-swc');
  sw(C.edge, 'clipped edge'); sw(C.exc, 'exception');
}


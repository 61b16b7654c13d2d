/* SPDX-License-Identifier: MIT */
/* A session's finish (session.h): every stream put on one clock and converted to the
 * merge's input (aggregates, folded call trees, a followed child's spools joined),
 * merged, and the run described (backend, notes, sampling, giltracer's own cost). */
#include "session_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bpfprobe.h"
#include "interps.h"
#include "gt_agg.h"
#include "gt_ctree.h"
#include "gt_sched.h"
#include "children.h"
#include "note.h"
#include "spool.h"
#include "registry.h"

struct convert_ctx {
    const struct gt_clock_fit *fit;
};

static void convert_block(void *events, size_t n, void *ctx)
{
    const struct gt_clock_fit *fit = ((struct convert_ctx *)ctx)->fit;
    struct gt_gil_event *e = events; /* a GIL stream's */
    for (size_t i = 0; i < n; i++)
        e[i].ts = gt_clock__to_ns(fit, e[i].ts);
}

static uint64_t fit_to_ns(uint64_t t, const void *ctx)
{
    return gt_clock__to_ns(ctx, t);
}

/* A stream's aggregate as the merge's input (NULL: it has none, or no memory: then
 * *nomem is set). */
struct coalesced_store {
    struct gt_coalesced c;
    struct gt_gil_event lead[GT_AGG_LEAD];
    uint64_t tiles[GT_AGG_TILES][3];
};

static struct gt_coalesced *stream_more(const struct gt_stream *st, const struct gt_clock_fit *fit,
                                        int *nomem)
{
    const struct gt_agg *a = st->overflow;
    if (!a || !a->events)
        return NULL;
    struct coalesced_store *cs = malloc(sizeof(*cs));
    if (!cs) {
        *nomem = 1;
        return NULL;
    }
    gt_agg__export(a, fit ? fit_to_ns : NULL, fit, fit ? fit->ns_per_tick : 1.0, &cs->c,
                   cs->lead, cs->tiles);
    return &cs->c;
}

/* The call stream's tree as the merge's input, in ns (NULL: none, or *nomem set). */
static struct gt_calltree *calls_more(const struct gt_stream *st, const struct gt_clock_fit *fit,
                                      int *nomem)
{
    const struct gt_ctree *c = st->overflow;
    if (!c || !c->events || !c->n)
        return NULL;
    struct gt_calltree *ct = malloc(sizeof(*ct) + c->n * sizeof(struct gt_cnode) +
                                    c->ntiles * sizeof(uint32_t));
    if (!ct) {
        *nomem = 1;
        return NULL;
    }
    struct gt_cnode *nodes = (struct gt_cnode *)(ct + 1);
    /* The nodes' times add up to the ticks from the first event to the last: converted
     * cumulatively, they add up to exactly the ns between them as well. */
    uint64_t cum = 0, prev = 0, ns0 = gt_clock__to_ns(fit, c->first);
    for (size_t i = 0; i < c->n; i++) {
        nodes[i] = c->nodes[i];
        for (int k = 0; k < 4; k++) {
            cum += c->nodes[i].self[k];
            uint64_t at = gt_clock__to_ns(fit, c->first + cum) - ns0;
            nodes[i].self[k] = at - prev;
            prev = at;
        }
    }
    uint32_t *tile_node = (uint32_t *)(nodes + c->n);
    for (size_t i = 0; i < c->ntiles; i++)
        tile_node[i] = c->tiles[i].node == UINT32_MAX ? GT_NO_FUNC : c->tiles[i].node;
    *ct = (struct gt_calltree){nodes, c->n, c->cur, gt_clock__to_ns(fit, c->first),
                               gt_clock__to_ns(fit, c->last), c->events, tile_node, c->ntiles,
                               gt_clock__to_ns(fit, c->tbase),
                               (double)((uint64_t)1 << c->tshift) * (fit ? fit->ns_per_tick : 1.0),
                               gt_ctree__pynode(c, c->cur)};
    return ct;
}

static struct gt_chunk *stream_chunks(const struct gt_stream *st, size_t *n)
{
    size_t need = gt_stream__chunks(st, NULL, 0);
    struct gt_chunk *c = calloc(need ? need : 1, sizeof(*c));
    if (c)
        gt_stream__chunks(st, c, need);
    *n = need;
    return c;
}

/* Keep last, a stream that folded its oldest events: its chunks after one of its own,
 * the frames open at the first kept event (outermost first, as its tree of the folded
 * events has them), opened at the tree's last event, so the kept window nests and draws
 * them from there (the profile does not count these calls twice). */
static struct gt_chunk *kept_chunks(const struct gt_stream *st, size_t *n)
{
    const struct gt_ctree *c = st->overflow;
    size_t depth = 0, need = gt_stream__chunks(st, NULL, 0);
    for (uint32_t x = c->cur; x < c->n && c->nodes[x].func != GT_CNODE_ANCHOR; x = c->nodes[x].parent)
        depth++;
    struct gt_chunk *ch = calloc(1, (need + 1) * sizeof(*ch) + (depth + 1) * sizeof(struct gt_call_rec));
    if (!ch)
        return NULL;
    struct gt_call_rec *rec = (struct gt_call_rec *)(ch + need + 1);
    rec[0] = gt_call_rec__base((uint32_t)(c->last >> 32));
    size_t k = depth;
    for (uint32_t x = c->cur; k; x = c->nodes[x].parent, k--) {
        /* A frame with no call in the tree was open at the session start. */
        uint32_t kind = (gt_ctree__pynode(c, x) == x ? GT_CALL : GT_CCALL) |
                        (c->nodes[x].calls ? 0 : GT_CALL_OPEN_AT_START);
        rec[k] = (struct gt_call_rec){(uint32_t)c->last, gt_call_rec__word(c->nodes[x].func, kind)};
    }
    ch[0] = (struct gt_chunk){rec, depth + 1};
    gt_stream__chunks(st, ch + 1, need);
    *n = need + 1;
    return ch;
}

static const char *name_for(PyObject *names, int32_t tid)
{
    PyObject *key = PyLong_FromLong(tid);
    PyObject *v = NULL; /* borrowed */
    if (key && names && PyDict_Check(names))
        v = PyDict_GetItemWithError(names, key);
    if (!v && !PyErr_Occurred() && key && gt_tracer__thread_names())
        v = PyDict_GetItemWithError(gt_tracer__thread_names(), key);
    Py_XDECREF(key);
    if (!v || !PyUnicode_Check(v)) {
        PyErr_Clear();
        return NULL;
    }
    const char *u = PyUnicode_AsUTF8(v);
    if (!u)
        PyErr_Clear();
    return u;
}

/* A thread's name: the one Python gave, or the sampler's. */
static const char *thread_name(const struct gt_session *s, PyObject *names, int32_t tid)
{
    const char *nm = name_for(names, tid);
    if (!nm && s->sampled && tid == s->sampler_stats.tid)
        nm = "giltracer sampler";
    return nm;
}

static void fill_python(char *buf, size_t len)
{
    const char *v = Py_GetVersion();
    size_t n = strcspn(v, " ");
    snprintf(buf, len, "%.*s (%s%s)", (int)n, v,
#ifdef Py_GIL_DISABLED
             "free-threaded",
#else
             "with GIL",
#endif
             "");
}

static struct gt_run *finish(struct gt_session *s, PyObject *names, const char *title,
                             PyObject *file_labels);

struct gt_run *gt_session__finish(struct gt_session *s, PyObject *names, const char *title,
                                  PyObject *file_labels)
{
    s->busy++;
    struct gt_run *run = finish(s, names, title, file_labels);
    s->busy--;
    return run;
}

/* Stops a recording session; -1 with an exception unless it is stopped now. */
static int stop_for_finish(struct gt_session *s)
{
    if (session_refuse_released(s) < 0)
        return -1;
    if (s->state == GT_SESSION_RECORDING && gt_session__stop(s) < 0)
        PyErr_Clear(); /* stopping problems were already reported as unraisable */
    if (s->state != GT_SESSION_STOPPED) {
        PyErr_SetString(PyExc_RuntimeError, "giltracer: the session was never started "
                                            "or is already finished");
        return -1;
    }
    return 0;
}

/* The session's clock fit (*fit), and the threads' GIL blocks converted to ns by it;
 * the number of threads. */
static size_t convert_gil(const struct gt_session *s, struct gt_thread *threads,
                          struct gt_clock_fit *fit)
{
    size_t nthreads = 0;
    /* Anchored at this session's start and stop, not at import: in a long-lived
     * kernel NTP slews CLOCK_MONOTONIC against the TSC, and a rate averaged over the
     * process's life would skew this session's events. */
    if (gt_clock_use_tsc)
        gt_clock__fit_between(fit, &s->start_pair, &s->stop_pair);
    else
        gt_clock__fit(fit);
    struct convert_ctx cc = {fit};
    for (struct gt_thread *t = threads; t; t = t->next) {
        /* (Call records are converted by merge, as it decodes them: calls_fit.) */
        if (s->used == USED_HOOKS || s->used == USED_PARK)
            gt_stream__each(&t->gil, convert_block, &cc);
        nthreads++;
    }
    return nthreads;
}

/* The call events a run's threads recorded and those the budget refused. */
struct run_counts {
    uint64_t recorded, dropped;
};

/* One arena for the threads' names (freed with the run). */
static int alloc_names(const struct gt_session *s, PyObject *names,
                       struct gt_thread *threads, struct gt_run *run)
{
    size_t names_len = 0;
    for (struct gt_thread *t = threads; t; t = t->next) {
        const char *nm = thread_name(s, names, t->tid);
        names_len += (nm ? strlen(nm) : 0) + 1;
    }
    run->names_arena = malloc(names_len ? names_len : 1);
    return run->names_arena ? 0 : -ENOMEM;
}

/* Thread t's merge input: its name (copied to *np), identity and flags, its streams'
 * blocks and aggregates (more[0..3) keep the aggregates for the cleanup), counted into
 * run and c. -ENOMEM: an allocation failed (what was made is in `in` and `more`). */
static int fill_input(const struct gt_session *s, PyObject *names, struct gt_thread *t,
                      const struct gt_clock_fit *fit, struct gt_thread_input *in,
                      char **np, const void **more, struct gt_run *run,
                      struct run_counts *c)
{
    const char *nm = thread_name(s, names, t->tid);
    size_t l = nm ? strlen(nm) : 0;
    memcpy(*np, nm ? nm : "", l);
    (*np)[l] = '\0';
    in->name = l ? *np : NULL;
    *np += l + 1;
    in->tid = t->tid;
    in->pid = t->pid;
    in->ident = t->ident;
    in->flags = t->flags;
    in->flags |= session_alive_flags(s, t->tid);
    if (s->sampled && t->tid == s->sampler_stats.tid)
        in->flags |= GT_THREAD_TOOL; /* giltracer's own: in no view, its cost a note */
    in->interp = t->interp;
    if ((s->sched && t->sched_state) || (s->used == USED_BPF && s->o.sched))
        in->flags |= GT_THREAD_HAS_SCHED;
    const struct gt_ctree *folded = t->calls.folded ? t->calls.overflow : NULL;
    in->calls = folded && folded->n ? kept_chunks(&t->calls, &in->ncalls)
                                    : stream_chunks(&t->calls, &in->ncalls);
    if (folded && folded->n)
        in->calls_kept_from = gt_clock__to_ns(fit, folded->last);
    in->gil = stream_chunks(&t->gil, &in->ngil);
    in->sched = stream_chunks(&t->sched, &in->nsched);
    int nomem = 0;
    in->gil_more = stream_more(&t->gil, s->used == USED_HOOKS ? fit : NULL, &nomem);
    in->sched_more = stream_more(&t->sched, NULL, &nomem);
    in->calls_more = calls_more(&t->calls, fit, &nomem);
    more[0] = in->gil_more;
    more[1] = in->sched_more;
    more[2] = in->calls_more;
    if (in->calls_more)
        run->meta.calls_aggregated += in->calls_more->events;
    if (in->gil_more)
        run->meta.gil_aggregated += in->gil_more->events;
    if (in->sched_more)
        run->meta.sched_aggregated += in->sched_more->events;
    if (!in->calls || !in->gil || !in->sched || nomem)
        return -ENOMEM;
    in->func_map = gt_tracer__func_map(t, &in->func_map_len);
    if (t->calls.refused_at)
        in->calls_truncated_at = gt_clock__to_ns(fit, t->calls.refused_at);
    c->recorded += gt_stream__events(&t->calls);
    c->dropped += t->calls.dropped;
    run->gil_events += gt_stream__count(&t->gil);
    run->meta.gil_dropped += t->gil.dropped;
    if (!s->sched) /* the perf poller counts its refused pushes in its own `lost` */
        run->meta.sched_lost += t->sched.dropped;
    return 0;
}

/* Every thread's merge input, in registration order (the registry list is newest
 * first). */
static int fill_inputs(const struct gt_session *s, PyObject *names,
                       struct gt_thread *threads, const struct gt_clock_fit *fit,
                       struct gt_thread_input *inputs, size_t nthreads, const void **more,
                       struct gt_run *run, struct run_counts *c)
{
    size_t i = nthreads;
    char *np = run->names_arena;
    for (struct gt_thread *t = threads; t; t = t->next) {
        --i;
        if (fill_input(s, names, t, fit, &inputs[i], &np, &more[3 * i], run, c) < 0)
            return -ENOMEM;
    }
    return 0;
}

/* A child: its streams go to the parent, which merges them; its own result is empty (a
 * failure is the parent's note: no spool). A parent: its children's spools join its
 * threads (*all, *maps: free after the merge). */
static int join_children(const struct gt_session *s, struct gt_run *run,
                         struct gt_trace_input *ti, const struct run_counts *c,
                         char *child_note, size_t nlen, struct gt_thread_input **all,
                         uint32_t **maps)
{
    int err = 0;
    if (s->spool) {
        /* Events past max_events (the budget it shares with the parent) went into this
         * process's aggregates, which the spool carries to the parent. */
        struct gt_emit_meta sm = {
            .event_count = c->recorded,
            .dropped_events = c->dropped,
            .gil_dropped = run->meta.gil_dropped,
            .sched_lost = run->meta.sched_lost,
            .calls_aggregated = run->meta.calls_aggregated,
            .gil_aggregated = run->meta.gil_aggregated,
            .sched_aggregated = run->meta.sched_aggregated};
        gt_children__write_spool(s->spool, ti, &sm);
        ti->nthreads = 0;
    } else if (s->children) {
        gt_children__read_spools(s->children, run, ti->t0, ti->t1, child_note, nlen);
        if (run->nspools)
            err = gt_children__add(run, ti, &run->meta, all, maps);
        run->procs = calloc(run->nspools ? run->nspools : 1, sizeof(*run->procs));
        if (!run->procs)
            err = -ENOMEM;
        for (size_t k = 0; run->procs && k < run->nspools; k++)
            run->procs[k] = (struct gt_emit_process){run->spools[k]->meta.pid,
                                                     run->spools[k]->meta.cmd};
        run->meta.processes = run->procs;
        run->meta.nprocesses = run->nspools;
    }
    return err;
}

/* The same threads with the bpf probe's GIL stream and nothing else: run->check. */
static int merge_check(struct gt_thread *threads, struct gt_thread_input *inputs,
                       size_t nthreads, struct gt_trace_input *ti, struct gt_run *run)
{
    size_t i = nthreads;
    for (struct gt_thread *t = threads; t; t = t->next) {
        struct gt_thread_input *in = &inputs[--i];
        free((void *)in->gil);
        in->gil = stream_chunks(&t->gil_check, &in->ngil);
        in->ncalls = in->nsched = 0;
        in->gil_more = in->sched_more = NULL; /* (its own view is never aggregated) */
        in->calls_more = NULL;
        in->flags &= ~(uint32_t)GT_THREAD_HAS_SCHED;
        if (!in->gil)
            return -ENOMEM;
    }
    return gt_merge__run(ti, &run->check);
}

/* The sampling line every output shows: the interval, the samples, and the sampler's
 * own use of the GIL as it measured it (its thread is in no view: giltracer's own). */
static void describe_sampling(const struct gt_session *s, uint64_t wall_ns, char *buf, size_t len)
{
    const struct gt_sampler_stats *st = &s->sampler_stats;
    double iv = (double)st->interval_ns;
    const char *unit = iv >= 1e6 ? "ms" : "us";
    double div = iv >= 1e6 ? 1e6 : 1e3;
    snprintf(buf, len,
             "sampled every %g %s, %llu samples (%llu ticks skipped while the sampler waited "
             "for the GIL); the sampler held the GIL %.3f ms (%.2f %% of %.3f s, at most "
             "%.3f ms at a time) and waited %.3f ms for it",
             iv / div, unit, (unsigned long long)st->samples, (unsigned long long)st->skipped,
             (double)st->held_ns / 1e6, wall_ns ? 100.0 * (double)st->held_ns / (double)wall_ns : 0.0,
             (double)wall_ns / 1e9, (double)st->max_held_ns / 1e6, (double)st->waited_ns / 1e6);
}

/* What giltracer's own threads cost the traced code (they are in no view), or "": their
 * names, the GIL they held (free-threaded: their time not parked) and the waits they
 * caused. */
static void describe_tool(const struct gt_session *s, struct gt_run *run)
{
    const struct gt_tool_cost *tc = &run->result->tool;
    char names[160] = "";
    uint64_t held = 0;
    if (!tc->nthreads)
        return;
    for (size_t i = 0; i < tc->nthreads; i++) {
        const char *nm = tc->threads[i].name ? tc->threads[i].name : "unnamed";
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++)
            seen = strcmp(nm, tc->threads[j].name ? tc->threads[j].name : "unnamed") == 0;
        size_t n = strlen(names);
        if (!seen && n + 1 < sizeof(names))
            snprintf(names + n, sizeof(names) - n, "%s%s", n ? ", " : "", nm);
        held += tc->threads[i].summary.held_ns;
    }
    if (!run->result->gil_known)
        snprintf(run->tool_note, sizeof(run->tool_note),
                 "giltracer's own threads (%s) are left out of every table", names);
    else if (s->used == USED_PARK)
        snprintf(run->tool_note, sizeof(run->tool_note),
                 "giltracer's own threads (%s) ran %.3f ms (not parked) and woke other "
                 "threads' parks of %.3f ms (%llu park%s); they are left out of every table",
                 names, (double)held / 1e6, (double)tc->caused_ns / 1e6,
                 (unsigned long long)tc->caused_waits, tc->caused_waits == 1 ? "" : "s");
    else
        snprintf(run->tool_note, sizeof(run->tool_note),
                 "giltracer's own threads (%s) held the GIL %.3f ms and made other threads "
                 "wait %.3f ms for it (%llu wait%s); they are left out of every table",
                 names, (double)held / 1e6, (double)tc->caused_ns / 1e6,
                 (unsigned long long)tc->caused_waits, tc->caused_waits == 1 ? "" : "s");
    run->meta.tool_note = run->tool_note;
}

/* The run's description: backend, title, Python, counts, notes, sampling. */
static void describe_run(const struct gt_session *s, struct gt_run *run,
                         const char *title, const struct run_counts *c,
                         const char *child_note, uint64_t wall_ns)
{
    snprintf(run->backend, sizeof(run->backend), "%s",
             s->used == USED_BPF ? "bpf" : s->used != USED_NONE ? "hooks" : "none");
    snprintf(run->backend_reason, sizeof(run->backend_reason), "%s", s->backend_reason);
    snprintf(run->sched_status, sizeof(run->sched_status), "%s", s->sched_status);
    snprintf(run->title, sizeof(run->title), "%s", title ? title : "giltracer");
    fill_python(run->python, sizeof(run->python));
    if (s->sched) {
        struct gt_sched_stats st;
        gt_sched__stats(s->sched, &st);
        run->meta.sched_lost += st.lost;
    }
    if (s->used == USED_BPF) {
        struct gt_bpf_stats st;
        gt_bpf__stats(session_bpf(), &st);
        run->meta.gil_dropped += st.lost;
    }
    run->meta.title = run->title;
    run->meta.backend = run->backend;
    run->meta.backend_reason = run->backend_reason;
    run->meta.sched_status = run->sched_status;
    run->meta.python = run->python;
    run->meta.pid = (int32_t)getpid();
    run->meta.scope_tid = s->start_tid;
    run->meta.event_count += c->recorded;
    run->meta.dropped_events += c->dropped;
    run->meta.max_events = s->o.max_events;
    run->meta.keep_last = s->o.keep == GT_KEEP_LAST && !s->spool;
    if (s->o.functions)
        gt_tracer__untraced_note(run->tracer_note, sizeof(run->tracer_note));
    gt_interps__note(run->tracer_note, sizeof(run->tracer_note));
    if (child_note[0])
        gt_note__add(run->tracer_note, sizeof(run->tracer_note), "%s", child_note);
    if (run->tracer_note[0])
        run->meta.tracer_note = run->tracer_note;
    if (s->sampled) {
        run->sampled = 1;
        run->sampler = s->sampler_stats;
        describe_sampling(s, wall_ns, run->sampling, sizeof(run->sampling));
        run->meta.sampling = run->sampling;
    }
    describe_tool(s, run);
}

static void free_inputs(struct gt_thread_input *inputs, const void **more,
                        size_t nthreads)
{
    if (inputs) {
        for (size_t k = 0; k < nthreads; k++) {
            free((void *)inputs[k].calls);
            free((void *)inputs[k].gil);
            free((void *)inputs[k].sched);
        }
        free(inputs);
    }
    if (more) {
        for (size_t k = 0; k < 3 * nthreads; k++)
            free((void *)more[k]);
        free(more);
    }
}

static struct gt_run *finish(struct gt_session *s, PyObject *names, const char *title,
                             PyObject *file_labels)
{
    struct gt_run *run = NULL;
    struct gt_thread_input *inputs = NULL;
    const void **more = NULL; /* each input's gil_more, sched_more, calls_more */
    size_t nthreads = 0;
    if (stop_for_finish(s) < 0)
        return NULL;
    run = calloc(1, sizeof(*run));
    if (!run) {
        PyErr_NoMemory();
        goto cleanup;
    }
    /* A forked copy has no records here (the registry may be the child's own). */
    struct gt_thread *threads = session_forked_copy(s) ? NULL : gt_registry__threads();
    if ((s->o.functions || s->o.sample_ns) &&
        gt_tracer__collect(threads, file_labels, &run->funcs) < 0)
        goto cleanup;
    struct gt_clock_fit fit;
    nthreads = convert_gil(s, threads, &fit);
    uint64_t t0 = gt_clock__to_ns(&fit, s->t0_ticks);
    uint64_t t1 = gt_clock__to_ns(&fit, s->t1_ticks);
    if (t1 < t0)
        t1 = t0;

    inputs = calloc(nthreads ? nthreads : 1, sizeof(*inputs));
    more = calloc(nthreads ? 3 * nthreads : 1, sizeof(*more));
    if (!inputs || !more || alloc_names(s, names, threads, run) < 0) {
        PyErr_NoMemory();
        goto cleanup;
    }
    struct run_counts counts = {0, 0};
    if (fill_inputs(s, names, threads, &fit, inputs, nthreads, more, run, &counts) < 0) {
        PyErr_NoMemory();
        goto cleanup;
    }
    struct gt_trace_input ti = {
        .t0 = t0,
        .t1 = t1,
        .funcs = run->funcs.funcs,
        .nfuncs = run->funcs.n,
        .threads = inputs,
        .nthreads = nthreads,
        .gil_known = s->used != USED_NONE,
        .calls_fit = &fit,
        .free_threaded = s->used == USED_PARK,
    };
    struct gt_thread_input *all = NULL;
    uint32_t *maps = NULL;
    char child_note[400] = "";
    int err = join_children(s, run, &ti, &counts, child_note, sizeof(child_note), &all,
                            &maps);
    if (err == 0)
        err = gt_merge__run(&ti, &run->result);
    free(all);
    free(maps);
    if (err == 0 && s->check_bpf && !run->nspools)
        err = merge_check(threads, inputs, nthreads, &ti, run);
    if (err < 0) {
        errno = -err;
        PyErr_SetFromErrno(err == -ENOMEM ? PyExc_MemoryError : PyExc_RuntimeError);
        goto cleanup;
    }
    describe_run(s, run, title, &counts, child_note, t1 - t0);
    s->state = GT_SESSION_FINISHED;
cleanup:
    free_inputs(inputs, more, nthreads);
    session_release_records(s);
    session_release_probes(s);
    if (s->state != GT_SESSION_FINISHED) {
        s->state = GT_SESSION_FINISHED;
        gt_run__free(run);
        return NULL;
    }
    return run;
}

void gt_run__free(struct gt_run *run)
{
    if (!run)
        return;
    gt_result__free(run->result);
    gt_result__free(run->check);
    gt_functable__free(&run->funcs);
    for (size_t k = 0; k < run->nspools; k++)
        gt_spool__free(run->spools[k]);
    free(run->spools);
    free(run->procs);
    free(run->all_funcs);
    free(run->names_arena);
    free(run);
}

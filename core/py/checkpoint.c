/* SPDX-License-Identifier: MIT */
/* A followed child's spooler (gt_session__spool, session.h): while the child records,
 * checkpoints of what its threads recorded since the last one, written into the parent's
 * session folder, with the functions and thread names its looks with the GIL saw; and a
 * SIGTERM the main thread does not answer, answered. */
#include "session_impl.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "children.h"
#include "termwatch.h"
#include "registry.h"

/* A look's function table, shared by the session and the checkpoints written with it
 * (a later look replaces it while one is written). Counted under ck_lock. */
struct ck_table {
    struct gt_functable funcs;
    unsigned refs;
};

static void ck_table_drop(struct ck_table *t)
{
    if (t && --t->refs == 0) {
        gt_functable__free(&t->funcs);
        free(t);
    }
}

#ifndef Py_GIL_DISABLED /* (no checkpoints there: gt_session__spool) */
/* A child's checkpoint (gt_session__spool): what every thread recorded since the last
 * one, its open (tail) blocks' published records included, gathered with the registry
 * locked. */
struct checkpoint {
    struct gt_thread_input *in;
    struct gt_thread **th; /* in's threads, whose `spooled` advance once written ... */
    struct gt_stream_pos (*pos)[3]; /* ... to these */
    struct gt_chunk *chunks; /* three runs per thread: calls, gil (copies), sched */
    size_t n, max, nchunks, maxchunks;
    const struct gt_clock_fit *fit;
    const struct gt_session *s;
    uint64_t calls, dropped, gil_dropped;
    int nomem;
};

/* Room for one more thread in c->in and c->th. */
static int checkpoint_room(struct checkpoint *c)
{
    if (c->n < c->max)
        return 0;
    size_t cap = 2 * c->max + 8;
    struct gt_thread_input *in = realloc(c->in, cap * sizeof(*in));
    if (in)
        c->in = in;
    struct gt_thread **th = realloc(c->th, cap * sizeof(*th));
    if (th)
        c->th = th;
    struct gt_stream_pos(*pos)[3] = realloc(c->pos, cap * sizeof(*pos));
    if (pos)
        c->pos = pos;
    if (!in || !th || !pos) {
        c->nomem = 1;
        return -ENOMEM;
    }
    c->max = cap;
    return 0;
}

/* The GIL blocks are in ticks (converted in place at finish): chunks [at, at + n) become
 * copies, converted. On -ENOMEM none is a copy. */
static int copy_gil_chunks(struct checkpoint *c, size_t at, size_t n)
{
    for (size_t k = at; k < at + n; k++) {
        struct gt_gil_event *e = malloc(c->chunks[k].n * sizeof(*e));
        if (!e) {
            for (size_t j = at; j < k; j++)
                free((void *)c->chunks[j].data);
            return -ENOMEM;
        }
        memcpy(e, c->chunks[k].data, c->chunks[k].n * sizeof(*e));
        for (size_t j = 0; j < c->chunks[k].n; j++)
            e[j].ts = gt_clock__to_ns(c->fit, e[j].ts);
        c->chunks[k].data = e;
    }
    return 0;
}

static const uint32_t ck_no_map[1] = {GT_NO_FUNC};

static void checkpoint_thread(struct gt_thread *t, void *ctx)
{
    struct checkpoint *c = ctx;
    if (c->nomem || checkpoint_room(c) < 0)
        return;
    memset(&c->in[c->n], 0, sizeof(c->in[c->n]));
    struct gt_stream *st[3] = {&t->calls, &t->gil, &t->sched};
    size_t need[3], total = 0;
    for (int k = 0; k < 3; k++) /* (at most: the tail's are published meanwhile) */
        total += need[k] = gt_stream__closed_chunks(st[k], t->spooled[k].blocks, NULL, 0) + 1;
    if (c->nchunks + total > c->maxchunks) {
        size_t cap = 2 * (c->nchunks + total) + 16;
        struct gt_chunk *more = realloc(c->chunks, cap * sizeof(*more));
        if (!more) {
            c->nomem = 1;
            return;
        }
        /* (the inputs point into the chunks: rebased below, once all are gathered) */
        c->chunks = more;
        c->maxchunks = cap;
    }
    c->th[c->n] = t;
    struct gt_stream_pos *pos = c->pos[c->n];
    struct gt_thread_input *in = &c->in[c->n++];
    in->tid = t->tid;
    in->pid = t->pid;
    in->ident = t->ident;
    in->flags = t->flags;
    in->flags |= session_alive_flags(c->s, t->tid);
    if (c->s->checkpoints) /* (its GIL at the start is the first checkpoint's) */
        in->flags &= ~(uint32_t)GT_THREAD_HELD_GIL_AT_START;
    in->interp = t->interp;
    if (c->s->o.functions) { /* the last refresh's (ck_refresh), copied: a look may
                                redo it while the checkpoint is written */
        size_t len;
        const uint32_t *map = gt_tracer__func_map(t, &len);
        uint32_t *copy = map ? malloc((len ? len : 1) * sizeof(*copy)) : NULL;
        in->func_map = ck_no_map; /* new since: its functions are named by the next */
        if (copy) {
            memcpy(copy, map, len * sizeof(*copy));
            in->func_map = copy;
            in->func_map_len = len;
        } else if (map) {
            c->nomem = 1;
        }
    }
    size_t at[3];
    for (int k = 0; k < 3; k++) {
        at[k] = c->nchunks;
        need[k] = gt_stream__live_chunks(st[k], &t->spooled[k], c->chunks + c->nchunks, need[k],
                                         &pos[k]);
        c->nchunks += need[k];
    }
    /* Offsets for now (realloc may move the array). */
    in->calls = (const struct gt_chunk *)(uintptr_t)at[0];
    in->ncalls = need[0];
    in->gil = (const struct gt_chunk *)(uintptr_t)at[1];
    in->ngil = need[1];
    in->sched = (const struct gt_chunk *)(uintptr_t)at[2];
    in->nsched = need[2];
    if (copy_gil_chunks(c, at[1], need[1]) < 0) {
        in->ngil = 0;
        c->nomem = 1;
        return;
    }
    for (size_t k = at[0]; k < at[0] + need[0]; k++)
        c->calls += c->chunks[k].n;
    c->dropped += __atomic_load_n(&t->calls.dropped, __ATOMIC_RELAXED);
    c->gil_dropped += __atomic_load_n(&t->gil.dropped, __ATOMIC_RELAXED);
}

#endif

struct ck_name {
    int32_t tid;
    char *name;
};

#ifndef Py_GIL_DISABLED
/* A thread's name as the last look with the GIL saw it, or NULL. */
static const char *ck_name(const struct gt_session *s, int32_t tid)
{
    for (size_t i = 0; i < s->nck_names; i++)
        if (s->ck_names[i].tid == tid)
            return s->ck_names[i].name;
    return NULL;
}

#endif

static void ck_names_free(struct gt_session *s)
{
    for (size_t i = 0; i < s->nck_names; i++)
        free(s->ck_names[i].name);
    free(s->ck_names);
    s->ck_names = NULL;
    s->nck_names = 0;
}

void ck_release(struct gt_session *s)
{
    ck_table_drop(s->ck_table);
    ck_names_free(s);
    if (s->ck_lock_ok)
        pthread_mutex_destroy(&s->ck_lock);
}

#ifndef Py_GIL_DISABLED
static int ck_names(struct gt_session *s, PyObject *names_fn);

#ifndef NDEBUG
static __thread int ck_lock_mine; /* this thread holds a session's ck_lock */
#endif

/* ck_lock (its order: at its definition). */
static void ck_lock_take(struct gt_session *s)
{
    assert(!ck_lock_mine);
    pthread_mutex_lock(&s->ck_lock);
#ifndef NDEBUG
    ck_lock_mine = 1;
#endif
}

static void ck_lock_drop(struct gt_session *s)
{
    assert(ck_lock_mine);
#ifndef NDEBUG
    ck_lock_mine = 0;
#endif
    pthread_mutex_unlock(&s->ck_lock);
}

/* With the GIL: the functions and the thread names a checkpoint writes (the functions
 * a live collect maps; `names_fn()` a dict native id -> name, called by the spooler
 * only, before ck_lock is taken: it runs Python). 0 or -ENOMEM. */
static int ck_refresh(struct gt_session *s, PyObject *names_fn)
{
    assert(!ck_lock_mine);
    ck_names(s, names_fn);
    struct ck_table *t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    t->refs = 1;
#if PY_VERSION_HEX >= 0x030A0000
    int gc = PyGC_Disable(); /* (no finalizer runs, and is recorded, amid the look) */
#endif
    ck_lock_take(s);
    int err = s->o.functions ? gt_tracer__collect_live(gt_registry__threads(), &t->funcs) : 0;
    if (!err) { /* (the checkpoint being written, if any, keeps the one it took) */
        struct ck_table *old = s->ck_table;
        s->ck_table = t;
        t = old;
    }
    ck_table_drop(t);
    ck_lock_drop(s);
#if PY_VERSION_HEX >= 0x030A0000
    if (gc)
        PyGC_Enable();
#endif
    if (err < 0) {
        PyErr_Clear();
        return -ENOMEM;
    }
    return 0;
}

/* With the GIL, on the spooler's thread (the names are its own): the names of the
 * threads (`names_fn()`: a dict native id -> name; NULL: the last ones stay) for the
 * checkpoints. 0 (names it cannot read are left out). */
static int ck_names(struct gt_session *s, PyObject *names_fn)
{
    assert(!ck_lock_mine); /* (Python may let the GIL go) */
    PyObject *names = names_fn ? PyObject_CallObject(names_fn, NULL) : NULL;
    if (!names || !PyDict_Check(names)) {
        PyErr_Clear();
        Py_XDECREF(names);
        return 0; /* (unnamed threads) */
    }
    ck_names_free(s);
    Py_ssize_t pos = 0, n = PyDict_Size(names);
    PyObject *k, *v;
    s->ck_names = calloc(n > 0 ? (size_t)n : 1, sizeof(*s->ck_names));
    while (s->ck_names && PyDict_Next(names, &pos, &k, &v)) {
        long tid = PyLong_AsLong(k);
        const char *u = PyUnicode_Check(v) ? PyUnicode_AsUTF8(v) : NULL;
        char *copy = u ? strdup(u) : NULL;
        if (tid == -1 || !copy) {
            PyErr_Clear();
            free(copy);
            continue;
        }
        s->ck_names[s->nck_names++] = (struct ck_name){(int32_t)tid, copy};
    }
    Py_DECREF(names);
    return 0;
}

#define GT_CK_LOOK_NS 1000000000u
/* 3.13+: the main thread looks, asked by a pending call. On 3.12.1 a pending call added
 * by the spooler (its thread state detached) never ran: the checkpoints named nothing. */
#define GT_CK_PENDING_LOOK (PY_VERSION_HEX >= 0x030D0000)

#if !GT_CK_PENDING_LOOK
/* Whether no thread of this process holds the GIL now (the hooks' live account): a look
 * taken then makes no busy thread wait. */
static int ck_gil_free(void)
{
    struct gt_live sum;
    struct gt_live_thread th[64];
    if (gt_registry__live(&sum, th, 64) < 0 || sum.nthreads > 64)
        return 0;
    for (size_t i = 0; i < sum.nthreads; i++)
        if (th[i].gil_live == GT_GIL_LIVE_HELD)
            return 0;
    return 1;
}
#endif

#if GT_CK_PENDING_LOOK
static uint64_t ck_gens; /* spool loops started */

/* 3.13+: the main thread looks, at its next check of the eval breaker, with the GIL it
 * holds (before 3.12 a pending call added by another thread may wait for a GIL switch).
 * The names stay the last look's: naming runs Python, which the trace would show. */
static int ck_look_pending(void *arg)
{
    struct gt_session *s = session_active();
    if (!s || s->ck_gen != (uint64_t)(uintptr_t)arg ||
        !__atomic_load_n(&s->spooling, __ATOMIC_ACQUIRE) || s->state != GT_SESSION_RECORDING)
        return 0; /* that loop ended (its session may be gone) */
    ck_refresh(s, NULL);
    __atomic_store_n(&s->ck_pending, 0, __ATOMIC_RELEASE);
    return 0;
}
#endif

#if GT_CK_PENDING_LOOK
#define GT_CK_ANSWER_NS 20000000u
/* Whether the main thread answers the pending look within GT_CK_ANSWER_NS (it does at
 * its next check of the eval breaker, unless it is away in C). */
static int ck_answered(struct gt_session *s)
{
    for (uint64_t until = gt_now_ns() + GT_CK_ANSWER_NS;
         __atomic_load_n(&s->ck_pending, __ATOMIC_ACQUIRE) && gt_now_ns() < until &&
         !__atomic_load_n(&s->spool_stop, __ATOMIC_ACQUIRE);)
        nanosleep(&(struct timespec){0, 200000}, NULL);
    return !__atomic_load_n(&s->ck_pending, __ATOMIC_ACQUIRE);
}
#endif

static void ck_probe(struct gt_thread *t, void *ctx)
{
    size_t *c = ctx;
    c[0]++;
    if (gt_tracer__unmapped(t))
        c[1] = 1;
}

/* Without the GIL (no Python here): writes checkpoint s->checkpoints, what every thread
 * recorded since the last, with the functions and names ck_refresh() saw last (copied
 * under ck_lock; the file is written without it, so that a look waits for no write). */
static int ck_write(struct gt_session *s, uint32_t interval_ms)
{
    assert(!ck_lock_mine && !PyGILState_Check());
    struct gt_clock_pair now;
    gt_clock__pair(&now);
    uint64_t now_ticks = gt_ticks();
    struct gt_clock_fit fit;
    if (gt_clock_use_tsc)
        gt_clock__fit_between(&fit, &s->start_pair, &now);
    else
        gt_clock__fit(&fit);
    struct checkpoint c = {.fit = &fit, .s = s};
    ck_lock_take(s);
    int err = gt_registry__each_locked(checkpoint_thread, &c);
    struct ck_table *table = s->ck_table;
    if (table)
        table->refs++;
    ck_lock_drop(s);
    if (!err && c.nomem)
        err = -ENOMEM;
    for (size_t i = 0; i < c.n; i++) {
        struct gt_thread_input *in = &c.in[i];
        in->calls = c.chunks + (uintptr_t)in->calls;
        in->gil = c.chunks + (uintptr_t)in->gil;
        in->sched = c.chunks + (uintptr_t)in->sched;
    }
    if (!err) {
        /* Oldest first, as finish orders them. */
        for (size_t i = 0; i < c.n / 2; i++) {
            struct gt_thread_input tmp = c.in[i];
            c.in[i] = c.in[c.n - 1 - i];
            c.in[c.n - 1 - i] = tmp;
            struct gt_thread *tt = c.th[i];
            c.th[i] = c.th[c.n - 1 - i];
            c.th[c.n - 1 - i] = tt;
            struct gt_stream_pos tp[3];
            memcpy(tp, c.pos[i], sizeof(tp));
            memcpy(c.pos[i], c.pos[c.n - 1 - i], sizeof(tp));
            memcpy(c.pos[c.n - 1 - i], tp, sizeof(tp));
        }
        for (size_t i = 0; i < c.n; i++)
            c.in[i].name = ck_name(s, c.in[i].tid);
        struct gt_trace_input ti = {
            .t0 = gt_clock__to_ns(&fit, s->t0_ticks),
            .t1 = gt_clock__to_ns(&fit, now_ticks),
            .funcs = table ? table->funcs.funcs : NULL,
            .nfuncs = table ? table->funcs.n : 0,
            .threads = c.in,
            .nthreads = c.n,
            .gil_known = 1,
        };
        struct gt_emit_meta m = {.event_count = c.calls, .dropped_events = c.dropped,
                                 .gil_dropped = c.gil_dropped};
        err = gt_children__write_checkpoint(s->spool, s->checkpoints, &ti, &m, interval_ms);
    }
    for (size_t i = 0; !err && i < c.n; i++) /* the next one writes only what follows */
        memcpy(c.th[i]->spooled, c.pos[i], sizeof(c.pos[i]));
    if (!err)
        s->checkpoints++;
    for (size_t i = 0; i < c.n; i++)
        for (size_t k = 0; k < c.in[i].ngil; k++)
            free((void *)c.in[i].gil[k].data);
    for (size_t i = 0; i < c.n; i++)
        if (c.in[i].func_map != ck_no_map)
            free((void *)c.in[i].func_map);
    ck_lock_take(s);
    ck_table_drop(table);
    ck_lock_drop(s);
    free(c.chunks);
    free(c.in);
    free(c.th);
    free(c.pos);
    return err;
}


/* The spooler's state between checkpoints. */
struct ck_loop {
    PyThreadState *ts; /* this thread's, while it runs without the GIL */
    size_t known;      /* threads the last look saw */
    uint64_t wanted;   /* since when a look is wanted, or 0 */
};

/* A thread or a function new since the last look: a look again, made without making a
 * busy thread wait for the GIL where it can: by this thread when the GIL is free, else
 * (3.13+) by the main thread, else (before 3.13, or the main thread away in C) by this
 * thread once GT_CK_LOOK_NS passed. Meanwhile the checkpoints write what the last look
 * saw (a later one's maps cover the earlier ones'). But calls of functions no look has
 * mapped would be written nameless (a child killed after this checkpoint keeps them so):
 * then this thread looks before writing (3.13+: unless the main thread answers within
 * GT_CK_ANSWER_NS), as long as functions are new. probe: ck_probe's counts. */
static int ck_maybe_look(struct gt_session *s, PyObject *names_fn, struct ck_loop *l,
                         const size_t probe[2])
{
    int err = 0;
    uint64_t now = gt_now_ns();
    if (probe[0] == l->known && !probe[1]) {
        l->wanted = 0;
        return 0;
    }
    if (!l->wanted)
        l->wanted = now;
#if GT_CK_PENDING_LOOK
    int mine = now - l->wanted >= 3 * (uint64_t)GT_CK_LOOK_NS; /* (main thread away) */
    if (!mine && !__atomic_load_n(&s->ck_pending, __ATOMIC_ACQUIRE)) {
        __atomic_store_n(&s->ck_pending, 1, __ATOMIC_RELEASE);
        if (Py_AddPendingCall(ck_look_pending, (void *)(uintptr_t)s->ck_gen) < 0)
            __atomic_store_n(&s->ck_pending, 0, __ATOMIC_RELEASE);
        else
            l->known = probe[0]; /* (its functions: the pending look maps them) */
    }
    if (!mine && probe[1] && !ck_answered(s))
        mine = 1;
#else
    int mine = now - l->wanted >= GT_CK_LOOK_NS || ck_gil_free() || probe[1];
#endif
    if (mine) {
        assert(!ck_lock_mine);
        PyEval_RestoreThread(l->ts);
        err = ck_refresh(s, names_fn);
        l->ts = PyEval_SaveThread();
        l->known = probe[0];
        l->wanted = 0;
    }
    return err;
}

#endif

/* Until the deadline (not a sum of sleeps, which a busy machine stretches) or stop, or a
 * SIGTERM seen (with `term`). */
static void spool_sleep(struct gt_session *s, uint64_t wait, int term)
{
    for (uint64_t until = gt_now_ns() + wait, t;
         (t = gt_now_ns()) < until && !__atomic_load_n(&s->spool_stop, __ATOMIC_ACQUIRE) &&
         !(term && gt_termwatch__seen());)
        nanosleep(&(struct timespec){0, until - t < 10000000u ? (long)(until - t) : 10000000},
                  NULL);
}

/* A SIGTERM the main thread did not answer: its Python handler ends the session (which
 * stops the spooler) within GT_TERM_GRACE_NS of the signal when it runs at all. */
#define GT_TERM_GRACE_NS 100000000ull
static int term_unanswered(struct gt_session *s)
{
    if (!gt_termwatch__seen())
        return 0;
    spool_sleep(s, GT_TERM_GRACE_NS, 0);
    return !__atomic_load_n(&s->spool_stop, __ATOMIC_ACQUIRE);
}

#ifndef Py_GIL_DISABLED
/* The spooler's loop once the session records (this thread's state `ts` let go): a
 * checkpoint every ~every_ms until stop, the parent's folder gone or a SIGTERM
 * unanswered; then the GIL again. 0 or -errno as gt_session__spool. */
static int ck_spool_loop(struct gt_session *s, PyObject *names_fn, uint32_t every_ms,
                         PyThreadState *ts)
{
    int err = 0;
    uint64_t every = (uint64_t)(every_ms ? every_ms : 500) * 1000000u, wait = every;
    struct ck_loop l = {.ts = ts};
#if GT_CK_PENDING_LOOK
    s->ck_gen = ++ck_gens; /* (before any pending look is asked for) */
#endif
    for (;;) {
        spool_sleep(s, wait, 1);
        if (__atomic_load_n(&s->spool_stop, __ATOMIC_ACQUIRE))
            break;
        if (term_unanswered(s)) {
            err = -EINTR;
            break;
        }
        uint64_t cpu = gt_clock_ns(CLOCK_THREAD_CPUTIME_ID);
        size_t probe[2] = {0, 0};
        err = gt_registry__each_locked(ck_probe, probe);
        if (err)
            break;
        err = ck_maybe_look(s, names_fn, &l, probe);
        err = ck_write(s, (uint32_t)(wait / 1000000u));
        if (err == -ENOENT) /* the parent's trace stopped: its folder is gone */
            break;
        err = 0; /* (e.g. a full disk: the next may do) */
        /* At least 20 times its CPU time: at most ~5 % of a core. */
        cpu = gt_clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu;
        wait = 20 * cpu > every ? 20 * cpu : every;
    }
    __atomic_store_n(&s->spooling, 0, __ATOMIC_RELEASE);
    /* The GIL again once stop is through: taken while the probes still record, it would
     * show as a wait of the thread that stops. */
    for (int i = 0; i < 5000 && __atomic_load_n(&s->spool_stop, __ATOMIC_ACQUIRE) &&
                    __atomic_load_n(&s->state, __ATOMIC_ACQUIRE) == GT_SESSION_RECORDING;
         i++)
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    assert(!ck_lock_mine);
    PyEval_RestoreThread(l.ts);
    return err;
}
#endif

int gt_session__spool(struct gt_session *s, PyObject *names_fn, uint32_t every_ms)
{
    if (!s->spool || s->released || s->busy || s->spooling || session_forked_copy(s) ||
        (s->state != GT_SESSION_NEW && s->state != GT_SESSION_RECORDING) || s->o.sample_ns)
        return -EINVAL;
    /* This thread (giltracer's own, ended when this returns) takes no signal: one sent to
     * the process (Pool.terminate()'s SIGTERM) must reach the main thread. Taken here, it
     * only flagged its Python handler, which the main thread, asleep in a wait the
     * signal did not interrupt (a pool worker's get()), never ran: the worker hung. One
     * the main thread does not answer, this thread does (term_unanswered: -EINTR). */
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
#ifdef Py_GIL_DISABLED
    (void)names_fn;
    (void)every_ms;
#else
    if (!s->ck_lock_ok) {
        if (pthread_mutex_init(&s->ck_lock, NULL) != 0)
            return -ENOMEM;
        s->ck_lock_ok = 1;
    }
#endif
    s->spooling = 1;
#ifndef Py_GIL_DISABLED
    ck_names(s, names_fn); /* (this thread's and the main one's: the names known now) */
#endif
    PyThreadState *ts = PyEval_SaveThread();
    /* Called before start (its caller's GIL then costs the trace nothing): until it. */
    for (int i = 0; i < 10000 && __atomic_load_n(&s->state, __ATOMIC_ACQUIRE) == GT_SESSION_NEW &&
                    !__atomic_load_n(&s->spool_stop, __ATOMIC_ACQUIRE); i++)
        nanosleep(&(struct timespec){0, 1000000}, NULL);
#ifdef Py_GIL_DISABLED
    int probes_ok = 1; /* (its GIL-less probe: the park probe; no checkpoints to read) */
#else
    int probes_ok = s->used == USED_HOOKS;
#endif
    if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != GT_SESSION_RECORDING || !probes_ok) {
        __atomic_store_n(&s->spooling, 0, __ATOMIC_RELEASE);
        PyEval_RestoreThread(ts);
        return -EINVAL;
    }
#ifdef Py_GIL_DISABLED
    int err = 0;
    /* No checkpoints here (the tracer's entries grow without a GIL to keep them still):
     * this thread only answers a SIGTERM the main thread does not. */
    while (!__atomic_load_n(&s->spool_stop, __ATOMIC_ACQUIRE)) {
        spool_sleep(s, 1000000000u, 1);
        if (term_unanswered(s)) {
            err = -EINTR;
            break;
        }
    }
    __atomic_store_n(&s->spooling, 0, __ATOMIC_RELEASE);
    PyEval_RestoreThread(ts);
    return err;
#else
    return ck_spool_loop(s, names_fn, every_ms, ts);
#endif
}

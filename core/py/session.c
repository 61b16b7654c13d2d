/* SPDX-License-Identifier: MIT */
/* A session's life (see session.h), in order: new, start (the backend chosen, the
 * registry begun, the recorders started), stop, free; one session at a time. The probes'
 * side is backend.c, the run at finish finish.c, the live view progress.c, a followed
 * child's checkpoints checkpoint.c (their shared insides: session_impl.h). */
#include "session_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "heads.h"
#include "interps.h"
#include "gt_agg.h"
#include "gt_ctree.h"
#include "gt_sched.h"
#include "budget.h"
#include "children.h"
#include "registry.h"

/* The native ids of start()'s (ident, native_id[, service]) items; an item it cannot read
 * is left out (the tracer reports it). service is 1 (True) for a thread of the host's own
 * machinery (a notebook kernel's IOPub, shell channel, heartbeat: the magics know them),
 * which the merge folds as background whatever it did with the GIL, and 2 for one of
 * giltracer's own (the live meter, a child's spooler), which is in no view: its cost is a
 * note. Returns 0 or -1 (no memory) with an exception set. */
static int note_alive(struct gt_session *s, PyObject *threads)
{
    Py_ssize_t n = threads && threads != Py_None ? PySequence_Size(threads) : 0;
    if (n < 0) {
        PyErr_Clear();
        return 0;
    }
    if (n && (!(s->alive_tids = calloc((size_t)n, sizeof(*s->alive_tids))) ||
              !(s->service = calloc((size_t)n, 1)))) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PySequence_GetItem(threads, i);
        unsigned long ident = 0;
        long native = 0;
        int service = 0;
        if (pair && PyArg_ParseTuple(pair, "kl|i", &ident, &native, &service)) {
            s->service[s->nalive] = (unsigned char)service;
            s->alive_tids[s->nalive++] = (int32_t)native;
        }
        else
            PyErr_Clear();
        Py_XDECREF(pair);
    }
    return 0;
}

/* GT_THREAD_ALIVE_AT_START, and GT_THREAD_SERVICE for the host's own threads,
 * GT_THREAD_TOOL for giltracer's. */
unsigned session_alive_flags(const struct gt_session *s, int32_t tid)
{
    for (size_t i = 0; i < s->nalive; i++)
        if (s->alive_tids[i] == tid)
            return GT_THREAD_ALIVE_AT_START | (s->service[i] == 1   ? GT_THREAD_SERVICE
                                               : s->service[i] > 1 ? GT_THREAD_TOOL
                                                                   : 0);
    return 0;
}

/* In a forked child, the parent's session is a copy: the registry, the tracer and
 * the probes it refers to are the parent's (or, by now, the child's own session's). */
int session_forked_copy(const struct gt_session *s)
{
    return s->state != GT_SESSION_NEW && s->pid != getpid();
}

/* The session from its start until it is finished (or freed), or NULL: one session at
 * a time, and a stopped session's records and probes stay its own until it is finished.
 * A forked child inherits the pointer but not the session (pid differs). */
static struct {
    struct gt_session *s;
    pid_t pid;
} active;

static int another_session_active(const struct gt_session *s)
{
    return active.s && active.s != s && active.pid == getpid();
}

static void set_active(struct gt_session *s)
{
    active.s = s;
    active.pid = s ? getpid() : 0;
}

struct gt_session *session_active(void)
{
    return active.pid == getpid() ? active.s : NULL;
}

#define BUSY_MESSAGE                                                                 \
    "giltracer: another session is active in this process (or stopped but not finished); " \
    "stop it first (with its Trace's stop(), or giltracer.stop_active()); one session at a time"

const char *const gt_session__released_message =
    "giltracer: this trace was stopped by giltracer.stop_active(); its records were released";

int session_refuse_released(const struct gt_session *s)
{
    if (!s->released)
        return 0;
    PyErr_SetString(PyExc_RuntimeError, gt_session__released_message);
    return -1;
}

static void watch_thread(struct gt_thread *t, void *ctx)
{
    gt_sched__watch((struct gt_sched *)ctx, t);
}

struct gt_session *gt_session__new(const struct gt_session_opts *o)
{
    struct gt_session *s = calloc(1, sizeof(*s));
    if (!s) {
        PyErr_NoMemory();
        return NULL;
    }
    s->o = *o;
    if ((o->spool && !(s->spool = strdup(o->spool))) ||
        (o->children && !(s->children = strdup(o->children)))) {
        free(s->spool);
        free(s);
        PyErr_NoMemory();
        return NULL;
    }
    s->o.spool = s->o.children = NULL;
    Py_XINCREF(s->o.include);
    Py_XINCREF(s->o.exclude);
    Py_XINCREF(s->o.own_dir);
    Py_XINCREF((PyObject *)s->o.own_type);
    return s;
}

enum gt_session_state gt_session__state(const struct gt_session *s)
{
    return s->released ? GT_SESSION_RELEASED : s->state;
}

/* follow_children with max_events: one budget for the parent and every child (a child
 * whose parent's pool cannot be mapped keeps its own). */
static void share_budget(struct gt_session *s)
{
    if (s->o.max_events && (s->children || s->spool) &&
        gt_children__budget_pool(s->children, s->spool, s->o.max_events, &s->pool) == 0)
        gt_registry__share_budget(s->pool->left);
}

static void unshare_budget(struct gt_session *s)
{
    if (!s->pool)
        return;
    if (!session_forked_copy(s)) /* (a forked child's registry starts with none) */
        gt_registry__share_budget(NULL);
    gt_budget_pool__close(s->pool);
    s->pool = NULL;
}

/* The session lets go of the process (finish, or free without finish): it is no longer
 * the active one, its records and its OS-state watcher are released. Twice is harmless. */
void session_release_records(struct gt_session *s)
{
    /* Before the release: its finalizers may start a session of their own. */
    if (active.s == s)
        set_active(NULL);
    /* A forked copy's records are the parent's: the registry is the child's own. */
    if (s->registry_begun && !session_forked_copy(s))
        gt_registry__release(gt_tracer__free_state);
    s->registry_begun = 0;
    unshare_budget(s);
    gt_sched__free(s->sched);
    s->sched = NULL;
}

/* The registry's generation for this session, its clock pair and t0, and the starting
 * thread's record (it holds the GIL now). Returns 0, or -1 with a Python exception set. */
static int begin_registry(struct gt_session *s)
{
    /* max_events caps every kind of stream, with or without function tracing; GIL and
     * OS-state events past it go on into each stream's aggregate (exact totals). */
    gt_registry__set_overflow(GT_BUDGET_GIL, gt_agg__gil_sink, NULL);
    gt_registry__set_overflow(GT_BUDGET_SCHED, gt_agg__os_sink, NULL);
    gt_registry__set_overflow(GT_BUDGET_CALLS, gt_ctree__sink, gt_ctree__release);
    share_budget(s);
    gt_registry__set_recycle(GT_BUDGET_CALLS,
                             s->o.keep == GT_KEEP_LAST && !s->spool ? gt_ctree__fold : NULL);
    /* The first session of the process waits for it (10-20 ms, other threads running):
     * its GIL hooks then skip the full fence per event that they paid otherwise until
     * the registry's helper had registered, i.e. for the whole first cell. */
    Py_BEGIN_ALLOW_THREADS
    gt_registry__membarrier_register();
    Py_END_ALLOW_THREADS
    int err = gt_registry__begin(s->o.max_events,
                                 s->sched ? watch_thread : NULL, s->sched);
    if (err < 0) {
        PyErr_SetString(PyExc_RuntimeError,
                        err == -EBUSY ? BUSY_MESSAGE : "giltracer: cannot start the thread registry");
        return -1;
    }
    s->registry_begun = 1;
    /* No probe runs yet. A free-threaded build's threads run until they park. */
    gt_registry__set_account(s->used == USED_PARK ? GT_GIL_LIVE_HELD : GT_GIL_LIVE_UNKNOWN,
                             s->used == USED_BPF);
    gt_clock__pair(&s->start_pair);
    s->t0_ticks = gt_ticks();
    struct gt_thread *me = gt_thread_current();
    if (!me) {
        PyErr_NoMemory();
        return -1;
    }
    me->flags |= GT_THREAD_EXISTED_AT_START | GT_THREAD_HELD_GIL_AT_START;
    me->gil_held = 1;
    /* (The live account is in the GIL stream's unit: ticks, or the bpf probe's ns.) */
    gt_thread__gil_live(me, s->used == USED_BPF ? s->start_pair.ns : s->t0_ticks,
                        GT_GIL_LIVE_HELD);
    return 0;
}

int gt_session__start(struct gt_session *s, PyObject *threads)
{
    if (s->state != GT_SESSION_NEW) {
        PyErr_SetString(PyExc_RuntimeError, "giltracer: a session can only be started once");
        return -1;
    }
    /* Before choosing a backend: that prepares (and may reload) the process-wide
     * probes the running session uses. */
    if (another_session_active(s)) {
        PyErr_SetString(PyExc_RuntimeError, BUSY_MESSAGE);
        return -1;
    }
    set_active(s); /* calibration releases the GIL: claim first */
    session_count_start();
    s->pid = getpid();
    gt_clock__init();
    s->start_tid = (int32_t)syscall(SYS_gettid);
    if (note_alive(s, threads) < 0 || session_choose_backend(s) < 0)
        goto fail;
    session_start_sched(s);
    if (begin_registry(s) < 0 || session_start_recorders(s, threads) < 0)
        goto fail;
    atomic_store(&gt_recording, 1);
    s->state = GT_SESSION_RECORDING;
    return 0;
fail:
    if (s->tracer_started) {
        /* Its hooks (threading.setprofile's, sys.monitoring's) go: a failed start leaves
         * the program's own in place. The start's exception is the one reported. */
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        gt_tracer__stop();
        PyErr_Clear();
        PyErr_Restore(et, ev, tb);
        s->tracer_started = 0;
    }
    gt_interps__stop();
    session_stop_probes(s);
    session_release_probes(s);
    if (s->registry_begun)
        gt_registry__end();
    session_release_records(s); /* not a forked copy: the state is still new */
    return -1;
}

/* Did the thread end before stop? (Its /proc entry is gone once it has exited.) */
static int thread_gone(int32_t pid, int32_t tid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task/%d", (int)pid, (int)tid);
    return access(path, F_OK) != 0 && errno == ENOENT;
}

/* Has the thread of this record ended, as at stop (GIL held)? Its tid was reused by a
 * later thread, or its /proc entry is gone, or it is a Python thread (it bound its
 * record: only threads with a thread state run the hooks) whose thread state is gone:
 * a joined thread's kernel thread can take a moment more to exit, and one joined just
 * before stop would otherwise seem alive to t1. A record never bound (registered by
 * tid: idle since start, or seen by the bpf probe only) counts by /proc alone; a C
 * thread without a thread state between its PyGILState_Ensure calls ends at its last
 * event. */
static int thread_ended(const struct gt_thread *t)
{
    if (t->superseded || thread_gone(t->pid, t->tid))
        return 1;
    if (!t->bound)
        return 0;
    /* Under the runtime's lock (heads.h): threads of interpreters with GILs of their own
     * free their thread states, and any thread may add one, without this GIL. */
    return !gt_heads__has_thread(t->ident);
}

int gt_session__stop(struct gt_session *s)
{
    if (session_refuse_released(s) < 0)
        return -1;
    if (s->state != GT_SESSION_RECORDING)
        return 0;
    if (session_forked_copy(s)) {
        /* Stop nothing process-wide: a session of the child's own may be running.
         * The copy is finished empty. */
        gt_sched__free(s->sched); /* forgets the parent's events without touching them */
        s->sched = NULL;
        s->hooks_started = s->bpf_started = s->check_started = 0;
        s->registry_begun = 0;
        s->sampler = NULL; /* the parent's thread: not in this process */
        s->t1_ticks = s->t0_ticks;
        s->stop_pair = s->start_pair;
        s->state = GT_SESSION_STOPPED;
        return 0;
    }
    s->busy++;
    /* The spooler reads blocks that finish frees, without the GIL: it ends first. */
    __atomic_store_n(&s->spool_stop, 1, __ATOMIC_RELEASE);
    while (__atomic_load_n(&s->spooling, __ATOMIC_ACQUIRE)) {
        Py_BEGIN_ALLOW_THREADS
        usleep(1000);
        Py_END_ALLOW_THREADS
    }
    session_stop_sampler(s); /* first: no sample lands after t1 */
    s->t1_ticks = gt_ticks();
    gt_clock__pair(&s->stop_pair);
    gt_interps__stop();
    int err = gt_tracer__stop();
    session_stop_probes(s);
    gt_registry__end();
    /* Which threads ended is decided now: one alive at stop runs to t1 even if it
     * exits before finish. (No record is added after the registry's end.) */
    for (struct gt_thread *t = gt_registry__threads(); t; t = t->next)
        if (thread_ended(t))
            t->flags |= GT_THREAD_ENDED;
    s->state = GT_SESSION_STOPPED;
    s->busy--;
    return err; /* still the active session: its records are released by finish or free */
}

int gt_session__free(struct gt_session *s)
{
    int err = 0;
    if (!s)
        return 0;
    if (s->state == GT_SESSION_RECORDING)
        err = gt_session__stop(s);
    session_release_records(s);
    if (s->state == GT_SESSION_STOPPED) /* finish did it otherwise */
        session_release_probes(s);
    Py_XDECREF(s->o.include);
    Py_XDECREF(s->o.exclude);
    Py_XDECREF(s->o.own_dir);
    free(s->spool);
    free(s->children);
    ck_release(s);
    Py_XDECREF((PyObject *)s->o.own_type);
    free(s->alive_tids);
    free(s->service);
    free(s);
    return err;
}

int gt_session__stop_active(void)
{
    struct gt_session *s = active.s;
    if (!s || active.pid != getpid())
        return 0;
    if (s->busy || (s->state != GT_SESSION_RECORDING && s->state != GT_SESSION_STOPPED)) {
        /* Starting (the claim comes before the GIL is let go), stopping or finishing on
         * another thread: its owner is letting go of it now. */
        PyErr_SetString(PyExc_RuntimeError, "giltracer: the active session is starting, "
                                            "stopping or finishing right now; try again");
        return -1;
    }
    int err = s->state == GT_SESSION_RECORDING ? gt_session__stop(s) : 0;
    /* Released whatever stop said: finishing it means letting go of the process. */
    session_release_records(s);
    session_release_probes(s);
    s->state = GT_SESSION_FINISHED;
    s->released = 1;
    return err < 0 ? -1 : 1;
}

/* SPDX-License-Identifier: MIT */
/* Session orchestration (see session.h): choose the GIL backend and say why, start
 * and stop the probes in a safe order, put every stream on one clock, merge. */
#include "session.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "bpfprobe.h"
#include "gilhook.h"
#include "heads.h"
#include "interps.h"
#include "gt_agg.h"
#include "gt_ctree.h"
#include "gt_clock.h"
#include "gt_sched.h"
#include "budget.h"
#include "children.h"
#include "note.h"
#include "spool.h"
#include "termwatch.h"
#include "registry.h"

/* USED_PARK: a free-threaded build's park probe (lock contention) in the GIL streams. */
enum { USED_NONE = 0, USED_HOOKS = 1, USED_BPF = 2, USED_PARK = 3 };

struct gt_session {
    struct gt_session_opts o; /* Python objects in it are strong references */
    enum gt_session_state state; /* never GT_SESSION_RELEASED: that is `released` */
    int used;
    int registry_begun;
    int hooks_started, bpf_started, check_started; /* what this session must stop */
    char backend_reason[512];
    char sched_status[256];
    struct gt_sched *sched;
    uint64_t t0_ticks, t1_ticks;
    struct gt_clock_pair start_pair, stop_pair; /* the tick fit's anchors */
    int check_bpf; /* bpf runs beside the hooks into gil_check */
    int bpf_held;  /* prepare_bpf() cancelled the linger for it: release_probes() re-arms */
    int released;  /* released by gt_session__stop_active(), not by its owner */
    int busy;      /* in stop or finish, which can let other threads run Python */
    pid_t pid;     /* the process that started it */
    int32_t start_tid; /* the thread that started the trace (the viewer's cell scope) */
    int32_t *alive_tids; /* the threads start() was told of (alive then), for the merge */
    unsigned char *service; /* per alive_tids entry: the host's own machinery (below) */
    size_t nalive;
    int park_started; /* the park probe records for this session */
    int tracer_started; /* a failed start stops the tracer it started (its hooks) */
    struct gt_sampler *sampler; /* sampling mode, while recording */
    PyInterpreterState *interp; /* ... the interpreter it samples */
    PyThreadState *sampler_ts;  /* ... its own thread state (made on its thread) */
    int sampled;
    struct gt_sampler_stats sampler_stats; /* after stop */
    char *spool, *children; /* copies of the options' (session.h) */
    /* A followed child's spooler (gt_session__spool): */
    int spooling;         /* it runs, the GIL let go, reading the session's blocks */
    int spool_stop;       /* stop asks it to end */
    uint32_t checkpoints; /* written so far (the next one's number) */
    struct ck_table *ck_table; /* the functions the last look with the GIL saw */
    struct ck_name *ck_names;  /* ... and the threads' names (the spooler's own) */
    size_t nck_names;
    /* ck_lock guards ck_table and the threads' function maps, which a look rewrites
     * (ck_refresh) and a checkpoint copies (ck_write). Lock order: the GIL, then ck_lock,
     * then the registry's lock. Its holder never takes the GIL nor runs Python (which may
     * let the GIL go): a thread holding the GIL and waiting for ck_lock (the main thread's
     * pending look) would wait for a holder that waits for the GIL. It is held for a
     * collect (C, the GC paused) or a copy, never for naming threads or writing a file
     * (ck_lock_take: asserted where assert() is checked, e.g. -DGT_ASSERTS=ON). */
    pthread_mutex_t ck_lock;
    int ck_lock_ok;
    int ck_pending;  /* 3.13+: a look waits for the main thread */
    uint64_t ck_gen; /* ... for this loop (its number) */
    struct gt_budget_pool *pool; /* the budget shared with the children (budget.h) */
};

static void ck_names_free(struct gt_session *s);

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
static unsigned alive_flags(const struct gt_session *s, int32_t tid)
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
static int forked_copy(const struct gt_session *s)
{
    return s->state != GT_SESSION_NEW && s->pid != getpid();
}

/* Process-wide: the hooks stay installed once installed. A failed install is final
 * (the same object, the same relocations); a failed calibration is retried by later
 * sessions (it can fail transiently), at most GT_CALIBRATION_TRIES times. */
#define GT_CALIBRATION_TRIES 8
static struct {
    int install_failed, ok;
    unsigned calibration_failures;
    uint64_t tried_in; /* 1 + the session start that tried last (one try per start) */
    char why[256];
    struct gt_gil_addrs addrs;
} hooks;

/* Counts session starts: prepare_hooks() calibrates at most once per start, whether the
 * bpf probe (which needs the GIL's address) or the hooks asked first. */
static uint64_t starts;

/* The bpf object stays attached GT_BPF_LINGER_MS after the session that used it, gated
 * off, so that the next session (the next notebook cell) reuses it; then the linger
 * thread detaches it. One attached system-wide for follow_children is detached when its
 * session ends (it would make every process on the machine pay the uprobe traps), and a
 * session that wants the other kind reloads it. */
static struct {
    int tried, ok;
    char why[256];
    struct gt_bpf *obj;
    pid_t owner;         /* the process that loaded obj */
    int follow_children; /* obj's option */
    int reused;          /* the last prepare_bpf() found obj attached already */
} bpf;

/* How long the probe stays attached after a trace. Attaching right after a detach waits
 * in the kernel behind it (uprobe register and unregister share a lock and RCU syncs):
 * a cell traced right after another started 1.7-2.5 s late. Left attached, gated off,
 * its uprobes still trap on every GIL hand-off (~2.5-4.5 us: GIL-churning code ran 4.7x
 * slower for the rest of the process). 2 s covers back-to-back cells (run all, a loop
 * of traces) and costs only those 2 s. GILTRACER_BPF_LINGER_MS overrides it (tests). */
#define GT_BPF_LINGER_MS 2000

/* bpf_lock guards bpf.tried, .ok, .why and .obj (the linger thread takes the object out
 * and clears them) and all of `linger`. Session code (GIL held) uses bpf without it only
 * between its prepare_bpf(), which cancels the linger and joins its thread, and its
 * release_probes(), which arms it again: no other thread touches bpf meanwhile. Detaching
 * (gt_bpf__free) happens outside the lock. */
static pthread_mutex_t bpf_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t linger_once = PTHREAD_ONCE_INIT;
static struct {
    pthread_cond_t wake;      /* CLOCK_MONOTONIC: armed, cancelled or quit */
    pthread_t thread;
    int thread_live;          /* created and not joined yet */
    int armed;                /* detach at deadline */
    int quit;                 /* exit or unload: end without detaching (exit does it) */
    struct timespec deadline; /* CLOCK_MONOTONIC */
    uint64_t released_ns;     /* when the last session let the object go */
    int32_t tid;              /* the thread's, and when it ended: its exit can still */
    uint64_t ended_ns;        /* switch out as the next session starts (gt_bpf__ignore_tid) */
} linger;

/* The object out of the state (bpf_lock held); the caller frees it. */
static struct gt_bpf *take_bpf(void)
{
    struct gt_bpf *obj = bpf.obj;
    bpf.obj = NULL;
    bpf.ok = 0;
    bpf.tried = 0;
    bpf.why[0] = '\0';
    return obj;
}

/* Waits for the deadline (a cancel or quit ends it sooner), detaches and ends. Never
 * takes the GIL: it touches only bpf and the object. */
static void *linger_main(void *arg)
{
    (void)arg;
    struct gt_bpf *obj = NULL;
    pthread_mutex_lock(&bpf_lock);
    linger.tid = (int32_t)syscall(SYS_gettid);
    while (linger.armed && !linger.quit) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec > linger.deadline.tv_sec ||
            (now.tv_sec == linger.deadline.tv_sec && now.tv_nsec >= linger.deadline.tv_nsec)) {
            linger.armed = 0;
            obj = take_bpf();
            break;
        }
        pthread_cond_timedwait(&linger.wake, &bpf_lock, &linger.deadline);
    }
    pthread_mutex_unlock(&bpf_lock);
    gt_bpf__free(obj); /* the helper's exit detaches in the kernel (bpfprobe.c) */
    pthread_mutex_lock(&bpf_lock);
    linger.ended_ns = gt_now_ns();
    pthread_mutex_unlock(&bpf_lock);
    return NULL;
}

/* Disarm, wake the linger thread and join it: it ends at once unless it is detaching
 * (then the object is gone and the caller loads a new one: the kernel serialises that
 * behind the detach anyway). Idempotent. Returns the joined thread's tid if it ended
 * within the last second (its last switch-out may be still to come), else 0: an older
 * tid may be a new thread's by now. */
static int32_t linger_stop(int quit)
{
    pthread_mutex_lock(&bpf_lock);
    linger.quit |= quit;
    linger.armed = 0;
    int join = linger.thread_live;
    pthread_t t = linger.thread;
    linger.thread_live = 0;
    if (join)
        pthread_cond_broadcast(&linger.wake);
    pthread_mutex_unlock(&bpf_lock);
    if (!join)
        return 0;
    pthread_join(t, NULL);
    pthread_mutex_lock(&bpf_lock);
    int32_t tid = gt_now_ns() - linger.ended_ns < 1000000000u ? linger.tid : 0;
    pthread_mutex_unlock(&bpf_lock);
    return tid;
}

/* At exit (or the module's unload: atexit in a shared object runs at its dlclose) no
 * thread may run its code: end the linger thread, leaving the object to the exit. */
static void linger_atexit(void)
{
    (void)linger_stop(1);
}

/* fork: the child has no linger thread, and the object is the parent's (its free only
 * forgets it; prepare_bpf refuses it). The lock is held across fork so that the child's
 * copy of the state is whole. */
static void linger_prefork(void)
{
    pthread_mutex_lock(&bpf_lock);
}

static void linger_postfork_parent(void)
{
    pthread_mutex_unlock(&bpf_lock);
}

static void linger_postfork_child(void)
{
    pthread_mutex_init(&bpf_lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&linger.wake, &ca);
    pthread_condattr_destroy(&ca);
    linger.thread_live = 0;
    linger.armed = 0;
}

static void linger_init(void)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&linger.wake, &ca);
    pthread_condattr_destroy(&ca);
    atexit(linger_atexit);
    pthread_atfork(linger_prefork, linger_postfork_parent, linger_postfork_child);
}

static long linger_ms(void)
{
    const char *e = getenv("GILTRACER_BPF_LINGER_MS");
    long ms = e && *e ? atol(e) : GT_BPF_LINGER_MS;
    return ms < 0 ? 0 : ms;
}

/* Detach this process's object GT_BPF_LINGER_MS from now, unless a session takes it
 * first. Without a thread it detaches now. */
static void linger_arm(void)
{
    pthread_once(&linger_once, linger_init);
    (void)linger_stop(0); /* a thread left from an earlier linger: ended already */
    struct gt_bpf *now = NULL;
    pthread_mutex_lock(&bpf_lock);
    if (!linger.quit && bpf.ok && bpf.obj && bpf.owner == getpid()) {
        long ms = linger_ms();
        clock_gettime(CLOCK_MONOTONIC, &linger.deadline);
        linger.deadline.tv_sec += ms / 1000;
        linger.deadline.tv_nsec += (ms % 1000) * 1000000L;
        if (linger.deadline.tv_nsec >= 1000000000L) {
            linger.deadline.tv_sec++;
            linger.deadline.tv_nsec -= 1000000000L;
        }
        linger.released_ns = gt_now_ns();
        linger.armed = 1;
        /* Signals are for the interpreter's threads. */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        int err = pthread_create(&linger.thread, NULL, linger_main, NULL);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (err == 0) {
            linger.thread_live = 1;
            pthread_setname_np(linger.thread, "gt-bpf-linger");
        } else {
            linger.armed = 0;
            now = take_bpf();
        }
    }
    pthread_mutex_unlock(&bpf_lock);
    gt_bpf__free(now);
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

/* Test-only: GILTRACER_TEST_FAIL_CALIBRATIONS=<n> makes the next n calibrations
 * fail, so the retry can be tested. Read once. */
static int forced_calibration_failure(void)
{
    static int left = -1;
    if (left < 0) {
        const char *env = getenv("GILTRACER_TEST_FAIL_CALIBRATIONS");
        left = env && *env ? atoi(env) : 0;
        if (left < 0)
            left = 0;
    }
    if (left == 0)
        return 0;
    left--;
    return 1;
}

static void drop_and_retake(void *ctx)
{
    (void)ctx;
    Py_BEGIN_ALLOW_THREADS;
    Py_END_ALLOW_THREADS;
}

/* The hooks will not be tried again in this process (hooks.why says why). */
static int hooks_given_up(void)
{
    return hooks.install_failed || hooks.calibration_failures >= GT_CALIBRATION_TRIES;
}

static int prepare_hooks(void)
{
    if (hooks.ok)
        return 0;
    if (hooks_given_up())
        return -1;
    if (hooks.tried_in == starts + 1)
        return -1; /* tried for this session already: the next session tries again */
    hooks.tried_in = starts + 1;
    const char *why = NULL;
    int err = gt_gilhook__install((const void *)&PyEval_SaveThread, &why);
    if (err < 0) {
        hooks.install_failed = 1;
        snprintf(hooks.why, sizeof(hooks.why), "hooks: %s (%s)",
                 why ? why : "cannot interpose the interpreter's pthread calls", strerror(-err));
        return -1;
    }
    if (forced_calibration_failure()) {
        why = "calibration: forced failure (GILTRACER_TEST_FAIL_CALIBRATIONS)";
        err = -EPROTO;
    } else {
        err = gt_gilhook__calibrate(drop_and_retake, NULL, &hooks.addrs, &why);
    }
    if (err < 0) {
        /* A calibration running on another thread (probe_info() while a session starts)
         * is no failure of this process's hooks. */
        hooks.calibration_failures += err != -EBUSY;
        snprintf(hooks.why, sizeof(hooks.why), "hooks: %s (%s; %s)",
                 why ? why : "calibration failed", strerror(-err),
                 hooks.calibration_failures < GT_CALIBRATION_TRIES
                     ? "a later session tries again"
                     : "gave up after repeated failures");
        return -1;
    }
    gt_gilhook__set_addrs(&hooks.addrs);
    hooks.ok = 1;
    hooks.why[0] = '\0';
    return 0;
}

/* Detach the bpf object now (a no-op for the parent's object in a forked child, which
 * only forgets it). The next prepare_bpf() loads a new one. */
static void close_bpf(void)
{
    pthread_mutex_lock(&bpf_lock);
    struct gt_bpf *obj = take_bpf();
    pthread_mutex_unlock(&bpf_lock);
    gt_bpf__free(obj);
}

/* The object for session s: the one still attached (its linger cancelled) or a new one.
 * From here to release_probes(s) no linger thread runs. */
static int prepare_bpf(struct gt_session *s, int follow_children)
{
    int32_t lingered = linger_stop(0);
    s->bpf_held = 1;
    bpf.reused = 0;
    if (bpf.ok && bpf.owner != getpid()) {
        /* A forked child: the object, its ring and its gate are the parent's. */
        snprintf(bpf.why, sizeof(bpf.why),
                 "bpf: the probe belongs to the parent process (pid %d); a forked child "
                 "cannot use it", (int)bpf.owner);
        return -1;
    }
    if (bpf.ok && bpf.follow_children != (follow_children != 0))
        close_bpf(); /* attached with the other option: reload */
    bpf.reused = bpf.ok;
    if (bpf.tried) {
        gt_bpf__ignore_tid(bpf.obj, lingered);
        return bpf.ok ? 0 : -1;
    }
    const char *why = NULL;
    int err = gt_bpf__available(&why);
    if (err < 0) { /* not permanent: privileges can differ later? no: same process */
        bpf.tried = 1;
        snprintf(bpf.why, sizeof(bpf.why), "%s", why ? why : "bpf: unavailable");
        return -1;
    }
    /* The bpf probe filters drops on the GIL's cond: learn it with the hooks. A
     * calibration that failed is tried again by a later session (not marked tried). */
    if (prepare_hooks() < 0) {
        if (hooks_given_up())
            bpf.tried = 1;
        snprintf(bpf.why, sizeof(bpf.why), "bpf: cannot find the GIL's address (%.200s)", hooks.why);
        return -1;
    }
    bpf.tried = 1;
    const char *path = gt_gilhook__object_path();
    struct gt_bpf_opts o = {
        .pid = (int32_t)getpid(),
        .interp_path = path,
        .interp_bias = gt_gilhook__object_bias(),
        .gil_cond = hooks.addrs.cond,
        .gil_switch_cond = hooks.addrs.switch_cond,
        .take_lock_site = hooks.addrs.take_lock_site,
        .take_signal_site = hooks.addrs.take_signal_site,
        .follow_children = follow_children,
        .sched = 1,
    };
    struct gt_bpf *obj = NULL;
    err = gt_bpf__open(&obj, &o, &why);
    pthread_mutex_lock(&bpf_lock);
    bpf.obj = obj;
    if (err < 0)
        snprintf(bpf.why, sizeof(bpf.why), "%s", why ? why : "bpf: could not load the probe");
    else
        bpf.ok = 1;
    pthread_mutex_unlock(&bpf_lock);
    if (err < 0)
        return -1;
    gt_bpf__ignore_tid(bpf.obj, lingered);
    bpf.owner = getpid();
    bpf.follow_children = follow_children != 0;
    return 0;
}

/* A free-threaded build has no GIL to probe: its contention is the parking lot's.
 * GILTRACER_TEST_PARK=1 takes this path on a GIL build too (its lock waits park on
 * the same semaphore calls), so the views can be tested without a free-threaded one. */
static int park_build(void)
{
#ifdef Py_GIL_DISABLED
    return 1;
#else
    const char *e = getenv("GILTRACER_TEST_PARK");
    return e && *e == '1';
#endif
}

/* The types whose parks are waits for another thread (gt_gilhook__set_park_waits):
 * objects that park on the word right after their header, in 3.13's and 3.14's layouts
 * (_thread.RLock holds its mutex inline from 3.14 on); none elsewhere (a GIL build's
 * test mode, an unknown layout): every park is then contention. Never fails. */
static void set_park_waits(void)
{
    const void *types[3];
    size_t n = 0;
#if defined(Py_GIL_DISABLED) && PY_VERSION_HEX >= 0x030D0000 && PY_VERSION_HEX < 0x030F0000
    static const struct {
        const char *mod, *attr;
    } kinds[] = {
        {"_thread", "LockType"},
#if PY_VERSION_HEX >= 0x030E0000
        {"_thread", "RLock"},
#endif
        {"_queue", "SimpleQueue"},
    };
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        PyObject *m = PyImport_ImportModule(kinds[i].mod);
        PyObject *t = m ? PyObject_GetAttrString(m, kinds[i].attr) : NULL;
        if (t && PyType_Check(t))
            types[n++] = t; /* a builtin module's type: lives as long as the interpreter */
        Py_XDECREF(t);
        Py_XDECREF(m);
        PyErr_Clear();
    }
#endif
    gt_gilhook__set_park_waits(types, n);
}

/* The park probe as the backend. Returns 0, or -1 with a Python exception when an
 * explicitly requested backend cannot run. */
static int choose_park(struct gt_session *s)
{
    const char *why = NULL;
    int err = gt_gilhook__install((const void *)&PyEval_SaveThread, &why);
    if (err == 0 && !gt_gilhook__can_park()) {
        why = "no GOT slot for sem_post and a semaphore wait in the interpreter object";
        err = -ENOENT;
    }
    int bpf_asked = s->o.backend == GT_BACKEND_BPF || s->o.crosscheck;
    if (bpf_asked || err < 0) {
        const char *what = err < 0 ? why : "the bpf probe (and so crosscheck) has no "
                                           "contention probe yet";
        if (s->o.backend != GT_BACKEND_AUTO || s->o.crosscheck) {
            PyErr_Format(PyExc_RuntimeError, "giltracer: free-threaded build: no GIL; the "
                         "lock-contention probe cannot run: %s", what);
            return -1;
        }
        snprintf(s->backend_reason, sizeof(s->backend_reason),
                 "free-threaded build: no GIL; the lock-contention probe cannot run: %s", what);
        return 0;
    }
    s->used = USED_PARK;
    set_park_waits();
    snprintf(s->backend_reason, sizeof(s->backend_reason),
             "free-threaded build: no GIL; showing lock contention (hooks: in-process "
             "interposition of %s's parking-lot semaphore calls)",
             *gt_gilhook__object_path() ? gt_gilhook__object_path() : "the interpreter");
    return 0;
}

/* Decide the GIL backend. Returns 0, or -1 with a Python exception when an explicitly
 * requested backend cannot run. */
/* The bpf probe when asked for or permitted: 1 with it in use, 0 when auto goes on to
 * the hooks, -1 with a Python exception when backend='bpf' cannot run. */
static int use_bpf(struct gt_session *s)
{
    if (s->o.backend != GT_BACKEND_BPF && s->o.backend != GT_BACKEND_AUTO)
        return 0;
    if (prepare_bpf(s, s->o.follow_children) == 0) {
        struct gt_bpf_stats st;
        gt_bpf__stats(bpf.obj, &st);
        s->used = USED_BPF;
        double ago = bpf.reused ? (gt_now_ns() - linger.released_ns) / 1e9 : 0;
        char kept[160];
        if (s->o.follow_children)
            snprintf(kept, sizeof(kept), "detached when the trace ends (system-wide)");
        else if (bpf.reused)
            snprintf(kept, sizeof(kept), "reused: still attached from the previous trace "
                     "(%.1f s ago); it detaches %.1f s after a trace", ago, linger_ms() / 1e3);
        else
            snprintf(kept, sizeof(kept), "attached for this trace; it stays attached %.1f s "
                     "after it (a trace right after starts fast), then detaches",
                     linger_ms() / 1e3);
        snprintf(s->backend_reason, sizeof(s->backend_reason),
                 "bpf: %s; uprobes on take_gil (found by %s%s), pthread_cond_signal%s; %s",
                 s->o.backend == GT_BACKEND_BPF ? "requested" : "permitted (running privileged)",
                 st.take_gil_how ? st.take_gil_how : "symbol",
                 st.acquired_by_signal ? "; at its first call, acquired = its switch_cond signal" : "",
                 st.switch_wait_probed ? " and pthread_cond_wait" : "", kept);
        return 1;
    }
    if (s->o.backend == GT_BACKEND_BPF) {
        PyErr_Format(PyExc_PermissionError, "giltracer: backend='bpf' cannot run: %s. "
                     "Use backend='hooks' (no privileges needed) or 'auto'.", bpf.why);
        return -1;
    }
    return 0;
}

static int choose_backend(struct gt_session *s)
{
    s->used = USED_NONE;
    if (!s->o.gil) {
        snprintf(s->backend_reason, sizeof(s->backend_reason), "GIL probe off (gil=False)");
        return 0;
    }
    if (park_build())
        return choose_park(s);
    if (s->o.crosscheck) {
        if (prepare_bpf(s, 0) < 0) {
            PyErr_Format(PyExc_PermissionError, "giltracer: crosscheck needs the bpf probe: %s",
                         bpf.why);
            return -1;
        }
        if (prepare_hooks() < 0) {
            PyErr_Format(PyExc_RuntimeError, "giltracer: crosscheck needs the hooks: %s",
                         hooks.why);
            return -1;
        }
        s->used = USED_HOOKS;
        s->check_bpf = 1;
        snprintf(s->backend_reason, sizeof(s->backend_reason),
                 "hooks, cross-checked by the bpf probe on the same run");
        return 0;
    }
    /* Without the function tracer (GIL only, or sampling: sample_ns implies it) a session
     * is asked for its low cost: auto takes the hooks (~0.1 us per GIL hand-off) before the
     * bpf probe's uprobes (2.5-4.5 us: ~5x on GIL-churning code). With the function tracer,
     * its per-call cost dwarfs either. */
    int cheap_auto = s->o.backend == GT_BACKEND_AUTO && !s->o.functions;
    if (!cheap_auto && use_bpf(s) != 0)
        return s->used == USED_BPF ? 0 : -1;
    if (prepare_hooks() == 0) {
        s->used = USED_HOOKS;
        if (s->o.backend == GT_BACKEND_HOOKS)
            snprintf(s->backend_reason, sizeof(s->backend_reason),
                     "hooks: requested; in-process interposition of %s's GIL pthread calls",
                     *gt_gilhook__object_path() ? gt_gilhook__object_path() : "the interpreter");
        else if (cheap_auto)
            snprintf(s->backend_reason, sizeof(s->backend_reason),
                     "hooks: %s keeps its cost low (~0.1 us per GIL hand-off, "
                     "against the bpf probe's ~3 us; backend='bpf' to use that)",
                     s->o.sample_ns ? "sampling mode" : "a GIL-only trace (functions=False)");
        else
            snprintf(s->backend_reason, sizeof(s->backend_reason),
                     "hooks: in-process, no privileges needed (%s)", bpf.why);
        return 0;
    }
    if (cheap_auto && use_bpf(s) != 0)
        return s->used == USED_BPF ? 0 : -1;
    if (s->o.backend == GT_BACKEND_HOOKS) {
        PyErr_Format(PyExc_RuntimeError, "giltracer: backend='hooks' cannot run: %s", hooks.why);
        return -1;
    }
    snprintf(s->backend_reason, sizeof(s->backend_reason), "no GIL probe could run: %.240s; %.240s",
             bpf.why, hooks.why);
    return 0;
}

/* Open the bpf probe's gate for this session (crosscheck: into gil_check). Returns 0,
 * or -1 with a Python exception set and the tracer stopped. */
static int start_bpf(int crosscheck)
{
    gt_bpf__set_crosscheck(bpf.obj, crosscheck);
    int rc = gt_bpf__start(bpf.obj);
    if (rc == 0)
        return 0;
    gt_tracer__stop();
    PyErr_Clear(); /* the exception below says what went wrong */
    PyErr_Format(PyExc_RuntimeError, "giltracer: the bpf probe failed to start (%s)",
                 rc == -ECHILD ? "a forked child cannot use its parent's bpf probe; "
                                 "use backend='hooks' here"
                               : strerror(-rc));
    return -1;
}

#define BUSY_MESSAGE                                                                 \
    "giltracer: another session is active in this process (or stopped but not finished); " \
    "stop it first (with its Trace's stop(), or giltracer.stop_active()); one session at a time"

const char *const gt_session__released_message =
    "giltracer: this trace was stopped by giltracer.stop_active(); its records were released";

static int refuse_released(const struct gt_session *s)
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

/* Stops what this session started, nothing else (a refused start must leave the
 * running session's probes alone). */
static void stop_probes(struct gt_session *s)
{
    if (s->check_started || s->bpf_started)
        gt_bpf__stop(bpf.obj);
    s->check_started = s->bpf_started = 0;
    /* After this no GIL hook touches a registry record or the sched state. */
    if (s->hooks_started)
        gt_gilhook__set_recording(0);
    s->hooks_started = 0;
    if (s->park_started)
        gt_gilhook__set_park(0);
    s->park_started = 0;
    if (s->sched)
        gt_sched__stop(s->sched);
}

/* The end of a session that held the bpf object: arm the linger (GT_BPF_LINGER_MS), or
 * detach at once one attached system-wide. Once per session (it can be released, then
 * freed while another session runs). */
static void release_probes(struct gt_session *s)
{
    if (!s->bpf_held)
        return;
    if (another_session_active(s) && active.s->bpf_held)
        return; /* the object is the running session's now: it re-arms at its end */
    s->bpf_held = 0;
    if (bpf.ok && bpf.follow_children)
        close_bpf();
    else
        linger_arm();
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
    if (!forked_copy(s)) /* (a forked child's registry starts with none) */
        gt_registry__share_budget(NULL);
    gt_budget_pool__close(s->pool);
    s->pool = NULL;
}

/* The session lets go of the process (finish, or free without finish): it is no longer
 * the active one, its records and its OS-state watcher are released. Twice is harmless. */
static void release_records(struct gt_session *s)
{
    /* Before the release: its finalizers may start a session of their own. */
    if (active.s == s)
        set_active(NULL);
    /* A forked copy's records are the parent's: the registry is the child's own. */
    if (s->registry_begun && !forked_copy(s))
        gt_registry__release(gt_tracer__free_state);
    s->registry_begun = 0;
    unshare_budget(s);
    gt_sched__free(s->sched);
    s->sched = NULL;
}

/* The sampler thread's side (see sampler.h): a thread state of its own, the GIL taken
 * per sample for as long as gt_tracer__sample walks the thread states. */
static int sampler_begin(void *ctx)
{
    struct gt_session *s = ctx;
    s->sampler_ts = PyThreadState_New(s->interp);
    return s->sampler_ts ? 0 : -ENOMEM;
}

static int sampler_take(void *ctx, uint64_t *held_ns, uint64_t *waited_ns)
{
    struct gt_session *s = ctx;
    if (gt_is_finalizing()) /* taking the GIL now would end this thread */
        return -ESHUTDOWN;
    uint64_t asked = gt_now_ns();
    PyEval_RestoreThread(s->sampler_ts);
    uint64_t got = gt_now_ns();
    int err = gt_tracer__sample(gt_ticks());
    uint64_t done = gt_now_ns();
    PyEval_SaveThread();
    *waited_ns = got - asked;
    *held_ns = done - got;
    return err;
}

static void sampler_end(void *ctx)
{
    struct gt_session *s = ctx;
    if (gt_is_finalizing())
        return; /* the thread state goes with the interpreter */
    PyEval_RestoreThread(s->sampler_ts);
    PyThreadState_Clear(s->sampler_ts);
    PyThreadState_DeleteCurrent();
    s->sampler_ts = NULL;
}

static int start_sampler(struct gt_session *s)
{
    struct gt_sampler_ops ops = {sampler_begin, sampler_take, sampler_end, s};
    s->interp = PyThreadState_Get()->interp;
    int err = gt_sampler__start(&s->sampler, s->o.sample_ns, &ops);
    if (err < 0) {
        PyErr_Format(PyExc_RuntimeError, "giltracer: the sampler thread could not start (%s)",
                     strerror(-err));
        return -1;
    }
    return 0;
}

/* Joins the sampler thread (it may be waiting for the GIL: let it go meanwhile). */
static void stop_sampler(struct gt_session *s)
{
    struct gt_sampler *sm = s->sampler;
    if (!sm)
        return;
    s->sampler = NULL;
    Py_BEGIN_ALLOW_THREADS
    gt_sampler__stop(sm, &s->sampler_stats);
    Py_END_ALLOW_THREADS
    s->sampled = 1;
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

/* The OS-state probe, or why there is none (sched_status): the bpf probe records the
 * switches itself; otherwise perf_event's, started before the registry can call
 * gt_sched__watch(). Never fails the start. */
static void start_sched(struct gt_session *s)
{
    if (!s->o.sched) {
        snprintf(s->sched_status, sizeof(s->sched_status), "off (sched=False)");
        return;
    }
    if (s->used == USED_BPF) {
        snprintf(s->sched_status, sizeof(s->sched_status), "bpf sched_switch (with reasons)");
        return;
    }
    const char *why = NULL;
    int err = gt_sched__new(&s->sched, &why);
    if (err < 0) {
        snprintf(s->sched_status, sizeof(s->sched_status), "unavailable: %s",
                 why ? why : "perf_event_open refused");
        return;
    }
    /* A poller that cannot start (pids limit: EAGAIN) leaves no callback behind. */
    err = gt_sched__start(s->sched);
    if (err < 0) {
        gt_sched__free(s->sched);
        s->sched = NULL;
        snprintf(s->sched_status, sizeof(s->sched_status),
                 "unavailable: the scheduler poller thread could not start (%s)",
                 strerror(-err));
        return;
    }
    snprintf(s->sched_status, sizeof(s->sched_status),
             "perf_event context switches (unprivileged)");
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

/* The recorders, in order: the function tracer, the crosscheck's bpf probe, the other
 * interpreters, the chosen GIL probe, the sampler. Returns 0, or -1 with a Python
 * exception set (what started is stopped by the caller). */
static int start_recorders(struct gt_session *s, PyObject *threads)
{
    struct gt_tracer_opts to = {
        .functions = s->o.functions,
        .c_calls = s->o.c_calls,
        .max_depth = s->o.max_depth,
        .include = s->o.include,
        .exclude = s->o.exclude,
        .own_dir = s->o.own_dir,
        .own_type = s->o.own_type,
        .sample = s->o.sample_ns != 0,
    };
    if (gt_tracer__start(&to, s->t0_ticks, threads) < 0)
        return -1;
    s->tracer_started = 1;
    if (s->check_bpf) {
        if (start_bpf(1) < 0)
            return -1;
        s->check_started = 1;
    }
    struct gt_interps_opts io = {
        .functions = s->o.functions,
        .hooks = s->used == USED_HOOKS ? &hooks.addrs : NULL,
        .bpf = s->used == USED_BPF,
    };
    gt_interps__start(&io);
    if (s->used == USED_HOOKS) {
        gt_gilhook__set_recording(1);
        s->hooks_started = 1;
    } else if (s->used == USED_PARK) {
        gt_gilhook__set_park(1);
        s->park_started = 1;
    } else if (s->used == USED_BPF) {
        if (start_bpf(0) < 0)
            return -1;
        s->bpf_started = 1;
    }
    if (s->o.sample_ns && start_sampler(s) < 0)
        return -1;
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
    starts++;
    s->pid = getpid();
    gt_clock__init();
    s->start_tid = (int32_t)syscall(SYS_gettid);
    if (note_alive(s, threads) < 0 || choose_backend(s) < 0)
        goto fail;
    start_sched(s);
    if (begin_registry(s) < 0 || start_recorders(s, threads) < 0)
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
    stop_probes(s);
    release_probes(s);
    if (s->registry_begun)
        gt_registry__end();
    release_records(s); /* not a forked copy: the state is still new */
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
    if (refuse_released(s) < 0)
        return -1;
    if (s->state != GT_SESSION_RECORDING)
        return 0;
    if (forked_copy(s)) {
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
    stop_sampler(s); /* first: no sample lands after t1 */
    s->t1_ticks = gt_ticks();
    gt_clock__pair(&s->stop_pair);
    gt_interps__stop();
    int err = gt_tracer__stop();
    stop_probes(s);
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
    if (refuse_released(s) < 0)
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
    in->flags |= alive_flags(s, t->tid);
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
        gt_bpf__stats(bpf.obj, &st);
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
    struct gt_thread *threads = forked_copy(s) ? NULL : gt_registry__threads();
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
    release_records(s);
    release_probes(s);
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

int gt_session__free(struct gt_session *s)
{
    int err = 0;
    if (!s)
        return 0;
    if (s->state == GT_SESSION_RECORDING)
        err = gt_session__stop(s);
    release_records(s);
    if (s->state == GT_SESSION_STOPPED) /* finish did it otherwise */
        release_probes(s);
    Py_XDECREF(s->o.include);
    Py_XDECREF(s->o.exclude);
    Py_XDECREF(s->o.own_dir);
    free(s->spool);
    free(s->children);
    ck_table_drop(s->ck_table);
    ck_names_free(s);
    if (s->ck_lock_ok)
        pthread_mutex_destroy(&s->ck_lock);
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
    release_records(s);
    release_probes(s);
    s->state = GT_SESSION_FINISHED;
    s->released = 1;
    return err < 0 ? -1 : 1;
}

/* Where each way of finding take_gil finds it ({way: address or None}) and why the
 * others do not apply ({way: text}): the bpf probe uses the first that does. */
static PyObject *take_gil_ways(PyObject **whys)
{
    const char *path = gt_gilhook__object_path();
    struct gt_bpf_opts o = {
        .pid = (int32_t)getpid(),
        .interp_path = path,
        .interp_bias = gt_gilhook__object_bias(),
        .take_lock_site = hooks.addrs.take_lock_site,
        .take_signal_site = hooks.addrs.take_signal_site,
    };
    uint64_t addr[GT_BPF_TG_N];
    const char *why[GT_BPF_TG_N];
    PyObject *ways = PyDict_New();
    *whys = PyDict_New();
    if (!ways || !*whys)
        goto fail;
    gt_bpf__find_take_gil(&o, addr, why);
    for (int h = 0; h < GT_BPF_TG_N; h++) {
        PyObject *v = addr[h] ? PyLong_FromUnsignedLongLong(addr[h]) : Py_NewRef(Py_None);
        int rc = v ? PyDict_SetItemString(ways, gt_bpf__take_gil_how_names[h], v) : -1;
        Py_XDECREF(v);
        if (rc < 0)
            goto fail;
        if (!addr[h]) {
            v = PyUnicode_FromString(why[h] ? why[h] : "");
            rc = v ? PyDict_SetItemString(*whys, gt_bpf__take_gil_how_names[h], v) : -1;
            Py_XDECREF(v);
            if (rc < 0)
                goto fail;
        }
    }
    return ways;
fail:
    Py_XDECREF(ways);
    Py_CLEAR(*whys);
    return NULL;
}

PyObject *gt_session__probe_info(void)
{
    if (!PyGILState_Check()) {
        PyErr_SetString(PyExc_RuntimeError, "needs the GIL");
        return NULL;
    }
    gt_clock__init();
    int ok = prepare_hooks() == 0;
    struct gt_gilhook_stats st;
    gt_gilhook__stats(&st);
    PyObject *whys = NULL, *ways = ok ? take_gil_ways(&whys) : Py_NewRef(Py_None);
    if (!ways)
        return NULL;
    if (!whys)
        whys = Py_NewRef(Py_None);
    return Py_BuildValue("{s:O,s:s,s:s,s:K,s:K,s:K,s:K,s:O,s:s,s:O,s:s,s:N,s:N,s:s}", "hooks_ok",
                         ok ? Py_True : Py_False, "hooks_why", hooks.ok ? "" : hooks.why,
                         "object", gt_gilhook__object_path(), "mutex",
                         (unsigned long long)(uintptr_t)hooks.addrs.mutex, "cond",
                         (unsigned long long)(uintptr_t)hooks.addrs.cond, "switch_cond",
                         (unsigned long long)(uintptr_t)hooks.addrs.switch_cond,
                         "slots_patched", (unsigned long long)st.slots_patched, "membarrier",
                         st.membarrier ? Py_True : Py_False, "take_record",
                         st.take_at_unlock ? "unlock" : "signal", "hooks_floor",
                         st.floor ? Py_True : Py_False, "clock",
                         gt_clock__source(), "take_gil", ways, "take_gil_why", whys,
                         "tls_model", GT_TLS_MODEL);
}

/* Threads gt_session__progress() reports at most (a meter shows a few). */
#define GT_PROGRESS_THREADS 256

/* A free-threaded build's progress thread also names its figures as its summary does:
 * running_ns = held_ns (not parked), parked_ns = wait_ns. 0 or -1 (exception set). */
static int progress_ft_names(PyObject *d)
{
    static const char *const pairs[][2] = {{"running_ns", "held_ns"}, {"parked_ns", "wait_ns"}};
    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
        PyObject *v = PyDict_GetItemString(d, pairs[i][1]); /* borrowed */
        if (!v || PyDict_SetItemString(d, pairs[i][0], v) < 0)
            return -1;
    }
    return 0;
}

/* Whether a live thread is the host's or giltracer's own, not the user's (a live meter
 * leaves it out, as every view does). */
static int not_users(const struct gt_session *s, const struct gt_live_thread *t)
{
    return (t->flags & (GT_THREAD_SERVICE | GT_THREAD_TOOL)) ||
           (alive_flags(s, t->tid) & (GT_THREAD_SERVICE | GT_THREAD_TOOL)) ||
           (s->sampler && t->tid == gt_sampler__tid(s->sampler));
}

PyObject *gt_session__progress(struct gt_session *s)
{
    if (forked_copy(s) || s->released || s->state != GT_SESSION_RECORDING)
        Py_RETURN_NONE;
    struct gt_live_thread *th = calloc(GT_PROGRESS_THREADS, sizeof(*th));
    if (!th)
        return PyErr_NoMemory();
    struct gt_live sum;
    struct gt_clock_pair now;
    int err = gt_registry__live(&sum, th, GT_PROGRESS_THREADS);
    gt_clock__pair(&now);
    if (err < 0) {
        free(th);
        Py_RETURN_NONE;
    }
    struct gt_clock_fit fit;
    gt_clock__fit_between(&fit, &s->start_pair, &now);
    /* The GIL account's unit: ticks with the hooks, CLOCK_MONOTONIC ns with bpf. */
    int ns_unit = s->used == USED_BPF || !gt_clock_use_tsc;
    uint64_t now_unit = ns_unit ? now.ns : now.ticks;
    double rate = ns_unit ? 1.0 : fit.ns_per_tick;
    size_t n = sum.nthreads < GT_PROGRESS_THREADS ? sum.nthreads : GT_PROGRESS_THREADS;
    PyObject *list = PyList_New(0);
    for (size_t i = 0; list && i < n; i++) {
        const struct gt_live_thread *t = &th[i];
        uint64_t ticks[GT_GIL_LIVE_NSTATES];
        memcpy(ticks, t->gil_ticks, sizeof(ticks));
        if (t->gil_live != GT_GIL_LIVE_UNKNOWN && now_unit > t->gil_since)
            ticks[t->gil_live] += now_unit - t->gil_since; /* the state it is in */
        static const char *const states[GT_GIL_LIVE_NSTATES] = {
            [GT_GIL_LIVE_UNKNOWN] = "unknown", [GT_GIL_LIVE_HELD] = "held",
            [GT_GIL_LIVE_WAITING] = "waiting", [GT_GIL_LIVE_RELEASED] = "released",
        };
        /* A free-threaded build's words (the park probe's account: running / parked). */
        static const char *const ft_states[GT_GIL_LIVE_NSTATES] = {
            [GT_GIL_LIVE_UNKNOWN] = "unknown", [GT_GIL_LIVE_HELD] = "running",
            [GT_GIL_LIVE_WAITING] = "parked", [GT_GIL_LIVE_RELEASED] = "released",
        };
        int st = t->gil_live >= 0 && t->gil_live < GT_GIL_LIVE_NSTATES ? t->gil_live : 0;
        PyObject *d = Py_BuildValue(
            "{s:i,s:K,s:O,s:K,s:K,s:K,s:s}", "native_id", (int)t->tid, "ident",
            (unsigned long long)t->ident, "service", not_users(s, t) ? Py_True : Py_False,
            "held_ns",
            (unsigned long long)((double)ticks[GT_GIL_LIVE_HELD] * rate), "wait_ns",
            (unsigned long long)((double)ticks[GT_GIL_LIVE_WAITING] * rate), "released_ns",
            (unsigned long long)((double)ticks[GT_GIL_LIVE_RELEASED] * rate), "state",
            (s->used == USED_PARK ? ft_states : states)[st]);
        if (d && s->used == USED_PARK && progress_ft_names(d) < 0)
            Py_CLEAR(d);
        if (!d || PyList_Append(list, d) < 0)
            Py_CLEAR(list);
        Py_XDECREF(d);
    }
    free(th);
    if (!list)
        return NULL;
    uint64_t t0 = gt_clock__to_ns(&fit, s->t0_ticks);
    PyObject *r = Py_BuildValue(
        "{s:K,s:K,s:K,s:K,s:K,s:O,s:N,s:O}", "elapsed_ns",
        (unsigned long long)(now.ns > t0 ? now.ns - t0 : 0), "calls",
        (unsigned long long)sum.calls, "gil_events", (unsigned long long)sum.gil_events,
        "sched_events", (unsigned long long)sum.sched_events, "dropped",
        (unsigned long long)sum.dropped, "budget_reached",
        sum.budget_reached ? Py_True : Py_False, "threads", list, "free_threaded",
        s->used == USED_PARK ? Py_True : Py_False);
    return r;
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
    in->flags |= alive_flags(c->s, t->tid);
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
    struct gt_session *s = active.s;
    if (!s || active.pid != getpid() || s->ck_gen != (uint64_t)(uintptr_t)arg ||
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

int gt_session__spool(struct gt_session *s, PyObject *names_fn, uint32_t every_ms)
{
    if (!s->spool || s->released || s->busy || s->spooling || forked_copy(s) ||
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
    int err = 0;
#ifdef Py_GIL_DISABLED
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
#endif
}

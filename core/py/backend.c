/* SPDX-License-Identifier: MIT */
/* The probes a session runs (session.c): the GIL backend chosen and why, the bpf object
 * kept attached between sessions (its linger thread), the OS-state probe, the sampler
 * thread's side, and the recorders started and stopped in a safe order. */
#include "session_impl.h"

#include "gt_assert.h"

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
#include "interps.h"
#include "gt_sched.h"
#include "registry.h"

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

void session_count_start(void)
{
    starts++;
}

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
    int follow_forks; /* obj's option */
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
 * session_release_probes(), which arms it again: no other thread touches bpf meanwhile.
 * Detaching (gt_bpf__free) happens outside the lock. */
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
    GT_ASSERT_HELD(&bpf_lock);
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

/* At exit: the linger thread is told to end, leaving the object to the exit, and not
 * waited for (exit ends it). This handler runs after Py_Finalize freed the interpreter,
 * while daemon threads still sit in take_gil's timed wait: on 3.9/3.10 one that wakes
 * before the process is gone touches the freed state and crashes it (fixed in later
 * CPythons), so the exit must not linger here: a join made it crash about 1 run in 20
 * with the bpf backend and spinning daemon threads. (An extension module is never unloaded, so no
 * dlclose runs this with the thread still in our code.) */
static void linger_atexit(void)
{
    pthread_mutex_lock(&bpf_lock);
    linger.quit = 1;
    linger.armed = 0;
    if (linger.thread_live)
        pthread_cond_broadcast(&linger.wake);
    pthread_mutex_unlock(&bpf_lock);
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
 * From here to session_release_probes(s) no linger thread runs. */
static int prepare_bpf(struct gt_session *s, int follow_forks)
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
    if (bpf.ok && bpf.follow_forks != (follow_forks != 0))
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
        .follow_forks = follow_forks,
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
    bpf.follow_forks = follow_forks != 0;
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

int session_choose_backend(struct gt_session *s)
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

/* The OS-state probe, or why there is none (sched_status): the bpf probe records the
 * switches itself; otherwise perf_event's, started before the registry can call
 * gt_sched__watch(). Never fails the start. */
void session_start_sched(struct gt_session *s)
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

/* The recorders, in order: the function tracer, the crosscheck's bpf probe, the other
 * interpreters, the chosen GIL probe, the sampler. Returns 0, or -1 with a Python
 * exception set (what started is stopped by the caller). */
int session_start_recorders(struct gt_session *s, PyObject *threads)
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

/* Joins the sampler thread (it may be waiting for the GIL: let it go meanwhile). */
void session_stop_sampler(struct gt_session *s)
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

/* Stops what this session started, nothing else (a refused start must leave the
 * running session's probes alone). */
void session_stop_probes(struct gt_session *s)
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
void session_release_probes(struct gt_session *s)
{
    if (!s->bpf_held)
        return;
    struct gt_session *a = session_active();
    if (a && a != s && a->bpf_held)
        return; /* the object is the running session's now: it re-arms at its end */
    s->bpf_held = 0;
    if (bpf.ok && bpf.follow_forks)
        close_bpf();
    else
        linger_arm();
}

struct gt_bpf *session_bpf(void)
{
    return bpf.obj;
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

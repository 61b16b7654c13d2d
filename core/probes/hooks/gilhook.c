/* SPDX-License-Identifier: MIT */
/* The "hooks" GIL probe (see gilhook.h): GOT interposition of the interpreter
 * object's pthread_mutex_lock / pthread_cond_signal / pthread_cond_timedwait (and
 * pthread_mutex_unlock, where the take is recorded when the object imports it). */
#define _GNU_SOURCE
#include "gilhook.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "gt_clock.h"
#include "gt_events.h"
#include "got.h"
#include "registry.h"

#if defined(__x86_64__)
#define GH_R_JUMP_SLOT R_X86_64_JUMP_SLOT
#define GH_R_GLOB_DAT R_X86_64_GLOB_DAT
#define GH_SUPPORTED 1
#elif defined(__aarch64__)
#define GH_R_JUMP_SLOT R_AARCH64_JUMP_SLOT
#define GH_R_GLOB_DAT R_AARCH64_GLOB_DAT
#define GH_SUPPORTED 1
#else /* other relocation types: install() refuses */
#define GH_R_JUMP_SLOT 0xffffffffu
#define GH_R_GLOB_DAT 0xffffffffu
#define GH_SUPPORTED 0
#endif

typedef int (*lock_fn)(pthread_mutex_t *);
typedef int (*unlock_fn)(pthread_mutex_t *);
typedef int (*signal_fn)(pthread_cond_t *);
typedef int (*timedwait_fn)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
typedef int (*condwait_fn)(pthread_cond_t *, pthread_mutex_t *);
typedef int (*sem_clockwait_fn)(sem_t *, clockid_t, const struct timespec *);
typedef int (*sem_timedwait_fn)(sem_t *, const struct timespec *);
typedef int (*sem_wait_fn)(sem_t *);
typedef int (*sem_post_fn)(sem_t *);

/* The hooked functions, listed once: X(ID, libc name, hook, needed). The first three
 * are needed to decode the GIL (install patches nothing without them); the others
 * refine it (pthread_cond_wait), move the take's record out of the GIL mutex
 * (pthread_mutex_unlock, see hook_unlock) or are the parking lot's semaphore calls that
 * the park probe decodes (gt_gilhook__set_park), each hooked where the object imports
 * it. */
#define GH_FUNCS(X)                                                    \
    X(LOCK, pthread_mutex_lock, hook_lock, 1)                          \
    X(SIGNAL, pthread_cond_signal, hook_signal, 1)                     \
    X(TIMEDWAIT, pthread_cond_timedwait, hook_timedwait, 1)            \
    X(CONDWAIT, pthread_cond_wait, hook_condwait, 0)                   \
    X(UNLOCK, pthread_mutex_unlock, hook_unlock, 0)                    \
    X(SEM_CLOCKWAIT, sem_clockwait, hook_sem_clockwait, 0)             \
    X(SEM_TIMEDWAIT, sem_timedwait, hook_sem_timedwait, 0)             \
    X(SEM_WAIT, sem_wait, hook_sem_wait, 0)                            \
    X(SEM_POST, sem_post, hook_sem_post, 0)

#define GH_ENUM(id, name, hook, needed) GH_##id,
enum gh_func { GH_FUNCS(GH_ENUM) GH_NFUNCS };
#undef GH_ENUM

#define GH_NAME(id, name, hook, needed) [GH_##id] = #name,
static const char *const func_names[GH_NFUNCS] = {GH_FUNCS(GH_NAME)};
#undef GH_NAME

#define GH_NEEDED(id, name, hook, needed) [GH_##id] = needed,
static const char func_needed[GH_NFUNCS] = {GH_FUNCS(GH_NEEDED)};
#undef GH_NEEDED

/* Where the hook of `id` forwards to, as its own type. */
/* Relaxed atomics: set once before any slot points at a hook (patch_slots' fence), then
 * only read, by threads a GIL of their own may never order after the installer. */
#define NEXT(id, type) ((type)__atomic_load_n(&gh.next[GH_##id], __ATOMIC_RELAXED))

/* GH_FLOOR: every hook decodes as when recording, record() records nothing (the
 * recording section's mark is still set and cleared): what the hooks cost before any
 * clock read or push, bench/churn_cost.py's floor (GILTRACER_HOOKS_FLOOR=1). */
enum gh_mode { GH_OFF = 0, GH_RECORD = 1, GH_CALIBRATE = 2, GH_FLOOR = 3 };

/* Do the hooks decode GIL calls in `mode` (recording, or the floor)? */
static inline int decoding(int mode)
{
    return mode == GH_RECORD || mode == GH_FLOOR;
}

/* Read by every hooked call of the interpreter (GIL or not): kept on its own cache
 * line and written only at install/calibrate/start/stop, so the not-recording path
 * is one load of a line that is never invalidated. */
/* One GIL the hooks decode: the main interpreter's (index 0), and on 3.12+ those of
 * subinterpreters with their own GIL (PEP 684). `locked` and `switch_number` are the
 * fields of _gil_runtime_state before cond (3.9-3.13: locked at cond-16,
 * switch_number at cond-8) when the calibrated layout says they are there, else NULL.
 * `id` is the owning interpreter's id: it goes into each event's aux. */
struct gh_gil {
    _Atomic(const void *) mutex, cond, switch_cond;
    _Atomic(const int *) locked;
    _Atomic(const unsigned long *) switch_number;
    _Atomic uint32_t id;
};

#define GH_MAX_GILS 32

/* Read by every hooked call of the interpreter (GIL or not): kept on its own cache
 * line and written only at install/calibrate/start/stop, so the not-recording path
 * is one load of a line that is never invalidated. */
static struct {
    atomic_int mode; /* enum gh_mode */
    /* Where each hook forwards to. Written before any slot points at a hook and never
     * changed after, so a hook reached through a patched slot always sees it (the slot
     * store is a release; the call through it depends on the loaded address). */
    void *next[GH_NFUNCS];
    atomic_int park; /* the park probe records (gt_gilhook__set_park) */
    /* Takes are recorded at the GIL mutex's unlock (take_at_unlock_chosen). */
    atomic_int take_at_unlock;
    /* The switch-off side can make every running thread of the process execute a
     * full barrier (membarrier, see hot_fence): set by a session's start once the
     * process is registered (gt_registry__membarrier_register), cleared only in a forked
     * child that cannot re-register. */
    atomic_int asym;
    pthread_t calib_thread; /* valid while mode == GH_CALIBRATE */
    /* Entries [0, ngils) are live. Entries are only appended or rewritten in place
     * (never freed), so a hook that reads a stale count still reads valid memory. */
    atomic_uint ngils;
} gh __attribute__((aligned(64)));

static struct gh_gil gils[GH_MAX_GILS];

/* The GIL whose field `which` (0 mutex, 1 cond, 2 switch_cond) is `addr`, or NULL. */
static inline struct gh_gil *gil_of(const void *addr, int which)
{
    unsigned n = atomic_load_explicit(&gh.ngils, memory_order_acquire);
    for (unsigned i = 0; i < n && i < GH_MAX_GILS; i++) {
        const void *f = which == 0   ? atomic_load_explicit(&gils[i].mutex, memory_order_relaxed)
                        : which == 1 ? atomic_load_explicit(&gils[i].cond, memory_order_relaxed)
                                     : atomic_load_explicit(&gils[i].switch_cond,
                                                            memory_order_relaxed);
        if (f == addr && addr)
            return &gils[i];
    }
    return NULL;
}


/* ---- calibration log: filled only by the calibrating thread ------------------- */

#define CALIB_MAX 64

struct calib_call {
    enum gh_func fn;
    const void *a; /* mutex (lock) or cond (signal, timedwait) */
    const void *b; /* mutex of a timedwait */
    const void *site; /* return address: where the interpreter made the call */
};

static struct calib_call calib_log[CALIB_MAX];
static unsigned calib_n;

static void calib_note(enum gh_func fn, const void *a, const void *b, const void *site)
{
    if (!pthread_equal(pthread_self(), gh.calib_thread))
        return;
    if (calib_n < CALIB_MAX)
        calib_log[calib_n] = (struct calib_call){fn, a, b, site};
    calib_n++; /* counts past the end, so overflow is detectable */
}

/* ---- the recording section ----------------------------------------------------- */

/* The recording section is what gt_gilhook__set_recording(0) waits for: it covers
 * the mode check, the registry lookup (which may register the thread and open its
 * scheduler event) and the push, so once the wait returns no hook touches a
 * registry record or the scheduler state. Its in-flight mark comes first and lives
 * in a per-thread slot that is not part of the registry: slots are never freed (the
 * waiter walks them without a lock while threads come and go) and are recycled when
 * their thread exits. Marks are per thread, so two threads trading the GIL never
 * write a shared cache line here. The interpreter relies on errno around its GIL
 * calls: the calls that may change it (a thread's first slot, the registry's slow paths:
 * registration with calloc, perf_event_open; a new block) keep it, on those paths only. The timestamp is
 * read after the lookup so that drop_gil's lock (by the holder: no event) costs no
 * clock read. */
struct hook_slot {
    atomic_int in_flight;
    atomic_int taken;
    struct hook_slot *next; /* set before the slot is published, never changed */
};

/* The in-flight mark and the switch-off are a Dekker pair: the hook stores its mark, then
 * loads the mode (gh.mode, gh.park); the switch-off stores the mode, then loads every mark
 * (quiesce). Either the hook sees recording off or the waiter sees the mark and waits,
 * provided neither side's load passes its own store. The hook runs per GIL event and the
 * switch-off once a session, so the full barrier is paid on the rare side: the hook's is a
 * compiler barrier only (its load stays after its store in program order) and the
 * switch-off's is membarrier(PRIVATE_EXPEDITED), which makes every running thread of the
 * process execute a full barrier at an instruction boundary (a thread not running passes
 * one in the context switch). Wherever a hook was when its barrier ran: before the mark's
 * store, so its later mode load sees the switch-off's store; or after it, so the mark is
 * visible to the waiter's loads (or already cleared: that hook has left). Without
 * membarrier (old kernel, seccomp, valgrind) both sides use a seq_cst fence, and so do
 * the sessions started before the process registered (gt_registry__membarrier_register:
 * a Python session's start registers first; a C caller may leave it to the registry's
 * helper thread). asym then turns on at a start (asym_on), hooks possibly running: a
 * hook that read it off fenced, which the membarrier covers as well; every switch-off
 * after that start reads it on, being ordered after it (one session at a time). */
static int sys_membarrier(int cmd)
{
    return (int)syscall(SYS_membarrier, cmd, 0, 0);
}

static void asym_on(void)
{
    if (!atomic_load(&gh.asym) && gt_registry__membarrier_ready())
        atomic_store(&gh.asym, 1);
}

static inline void hot_fence(void)
{
    if (__builtin_expect(atomic_load_explicit(&gh.asym, memory_order_relaxed), 1))
        atomic_signal_fence(memory_order_seq_cst);
    else
        atomic_thread_fence(memory_order_seq_cst);
}

static _Atomic(struct hook_slot *) hook_slots;
/* GT_TLS_HOT, as gt_tls (registry.h): read per GIL event. */
static __thread struct hook_slot *my_slot GT_TLS_HOT;
/* A take of the GIL this thread made (signal_slow), recorded once it unlocks that GIL's
 * mutex (hook_unlock): in generation `gen` (0: none pending). */
static __thread struct {
    uint64_t gen;
    struct gh_gil *gil;
} take_pending GT_TLS_HOT;
/* The calling thread's GIL state as record() left it (t->gil_held), valid in generation
 * `gen` once the state is known: the lock hook skips record() where it would record
 * nothing (see lock_slow). Thread-local, not the registry's: read outside the section. */
static __thread struct {
    uint64_t gen;
    int held;
} gil_hint GT_TLS_HOT;
static pthread_key_t slot_key;
static int slot_key_ok;
static pthread_once_t slot_once = PTHREAD_ONCE_INIT;

/* A parking thread's account ends with it: from its exit on it is released (off), as a
 * GIL build's thread ends having dropped the GIL; else a free-threaded thread that ended
 * running would run on in the live meter. Inside the recording section (its slot is
 * still its own); the thread's record only if it is bound in this generation. */
static void park_account_ends(struct hook_slot *sl)
{
    atomic_store_explicit(&sl->in_flight, 1, memory_order_relaxed);
    hot_fence();
    uint64_t gen = atomic_load_explicit(&gt_registry_gen, memory_order_relaxed);
    if (atomic_load_explicit(&gh.park, memory_order_relaxed) && gen && gt_tls.gen == gen &&
        gt_tls.thread)
        gt_thread__gil_live(gt_tls.thread, gt_ticks(), GT_GIL_LIVE_RELEASED);
    atomic_store_explicit(&sl->in_flight, 0, memory_order_release);
}

static void slot_release(void *p)
{
    park_account_ends(p);
    /* Should a later destructor of this exiting thread take the GIL, it gets a slot
     * of its own (and glibc runs this destructor again). */
    my_slot = NULL;
    atomic_store_explicit(&((struct hook_slot *)p)->taken, 0, memory_order_release);
}

static void slot_key_init(void)
{
    slot_key_ok = pthread_key_create(&slot_key, slot_release) == 0;
}

/* The calling thread's slot, taken on its first GIL event (errno kept), or NULL without
 * memory. */
static __attribute__((noinline)) struct hook_slot *slot_new(void)
{
    struct hook_slot *sl;
    int saved_errno = errno;
    pthread_once(&slot_once, slot_key_init);
    for (sl = atomic_load_explicit(&hook_slots, memory_order_acquire); sl; sl = sl->next) {
        int expected = 0;
        if (atomic_compare_exchange_strong(&sl->taken, &expected, 1))
            break;
    }
    if (!sl) {
        sl = calloc(1, sizeof(*sl));
        if (!sl) {
            errno = saved_errno;
            return NULL;
        }
        atomic_init(&sl->taken, 1);
        struct hook_slot *head = atomic_load(&hook_slots);
        do
            sl->next = head;
        while (!atomic_compare_exchange_weak(&hook_slots, &head, sl));
    }
    if (slot_key_ok) /* without it the slot is never recycled: a leak, not an error */
        pthread_setspecific(slot_key, sl);
    my_slot = sl;
    errno = saved_errno;
    return sl;
}

static inline struct hook_slot *slot_get(void)
{
    struct hook_slot *sl = my_slot;
    return __builtin_expect(sl != NULL, 1) ? sl : slot_new();
}

/* Enters the recording section: marks the calling thread's slot in flight. Returns the
 * slot (for section_leave), or NULL when the thread has none: then nothing may be
 * recorded. The mark's store is on the thread's own line; hot_fence orders it before
 * the mode's load (see above). */
static inline struct hook_slot *section_enter(void)
{
    struct hook_slot *sl = slot_get();
    if (sl) {
        atomic_store_explicit(&sl->in_flight, 1, memory_order_relaxed);
        hot_fence();
    }
    return sl;
}

static inline void section_leave(struct hook_slot *sl)
{
    atomic_store_explicit(&sl->in_flight, 0, memory_order_release);
}

/* Wants that record() decides on from the thread's state (never stored as such): */
enum {
    /* take_gil's, of a GIL nobody held a moment before: the take needs no wait. Once the
     * thread's state is known it is not recorded (merge reads released -> held as no
     * wait), which saves a clock read per uncontended take, most of a GIL-churning
     * program's hand-offs. Should another thread take the GIL first, this one's wait is
     * recorded where it begins to wait (WANT_AT_WAIT). */
    WANT_UNCONTENDED = 0x10000,
    /* take_gil's wait on the GIL's condition: a want unless the thread already waits. */
    WANT_AT_WAIT,
};

/* Does `t` record a want of kind `kind` (a gt_gil_kind or one of the above)? */
static inline int want_recorded(const struct gt_thread *t, uint32_t kind)
{
    switch (kind) {
    case GT_GIL_WANT: /* drop_gil also locks the mutex: only a non-holder wants it */
        return !t->gil_held;
    case WANT_UNCONTENDED:
        return !t->gil_held && t->gil_live == GT_GIL_LIVE_UNKNOWN;
    case WANT_AT_WAIT:
        return !t->gil_held && t->gil_live != GT_GIL_LIVE_WAITING;
    default:
        return 1;
    }
}

static inline __attribute__((always_inline)) void record(uint32_t kind, uint32_t gil_id)
{
    struct hook_slot *sl = section_enter();
    if (sl) {
        struct gt_thread *t = NULL;
        /* Acquire: what start wrote to records before recording began (a subinterpreter
         * GIL's holder) is seen by threads no GIL orders after it (x86: a plain load). */
        if (atomic_load_explicit(&gh.mode, memory_order_acquire) == GH_RECORD)
            t = gt_thread_current();
        if (t && want_recorded(t, kind)) {
            if (kind == WANT_UNCONTENDED || kind == WANT_AT_WAIT)
                kind = GT_GIL_WANT;
            uint64_t ts = gt_ticks();
            gt_stream__push(&t->gil, ts, kind, gil_id);
            gt_thread__gil_event(t, ts, kind);
            if (gil_id)
                t->interp = gil_id;
            if (kind == GT_GIL_ACQUIRED)
                t->gil_held = 1;
            else if (kind == GT_GIL_RELEASED)
                t->gil_held = 0;
            if (t->gil_live != GT_GIL_LIVE_UNKNOWN) {
                gil_hint.gen = gt_tls.gen;
                gil_hint.held = t->gil_held;
            }
        }
        section_leave(sl);
    }
}

/* After the caller switched recording off (gh.mode or gh.park): waits until no hook
 * is in its recording section (the barrier pairs with hot_fence, see section_enter). */
static void quiesce(void)
{
    /* Registered, the command fails only without memory for its CPU mask (ENOMEM): a
     * transient state worth waiting out, since hooks skip their fence meanwhile. */
    int fenced = 1;
    if (atomic_load(&gh.asym)) {
        int i = 0;
        while (sys_membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0 && ++i < 1000)
            sched_yield();
        fenced = i < 1000;
    }
    atomic_thread_fence(memory_order_seq_cst);
    /* Without the barrier, a hook's in_flight store may still sit in its CPU's store
     * buffer: drained within microseconds, so after 1 ms a hook still in its section shows. */
    if (!fenced)
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    for (struct hook_slot *sl = atomic_load(&hook_slots); sl; sl = sl->next)
        while (atomic_load(&sl->in_flight))
            sched_yield();
}

/* ---- the hooks ------------------------------------------------------------------ */

/* Slow paths are out of line so that the fast path of each hook is a load, a
 * compare and a tail call. */
static __attribute__((noinline)) void lock_slow(pthread_mutex_t *m, const void *site)
{
    if (atomic_load_explicit(&gh.mode, memory_order_relaxed) == GH_CALIBRATE) {
        calib_note(GH_LOCK, m, NULL, site);
        return;
    }
    struct gh_gil *g = gil_of(m, 0);
    if (!g)
        return;
    const int *locked = atomic_load_explicit(&g->locked, memory_order_relaxed);
    int uncontended = locked && __atomic_load_n(locked, __ATOMIC_RELAXED) == 0;
    /* Two locks of every hand-off record nothing once the thread's state is known:
     * drop_gil's, by the holder, and a take of a GIL nobody holds (want_recorded). */
    uint64_t gen = atomic_load_explicit(&gt_registry_gen, memory_order_relaxed);
    if (gen && gil_hint.gen == gen && (gil_hint.held || uncontended))
        return;
    record(uncontended ? WANT_UNCONTENDED : GT_GIL_WANT,
           atomic_load_explicit(&g->id, memory_order_relaxed));
}

static __attribute__((noinline)) void signal_slow(pthread_cond_t *c, const void *site)
{
    if (atomic_load_explicit(&gh.mode, memory_order_relaxed) == GH_CALIBRATE) {
        calib_note(GH_SIGNAL, c, NULL, site);
        return;
    }
    /* take_gil signals switch_cond once (FORCE_SWITCHING), drop_gil signals cond
     * once: both under the GIL mutex, so they are ordered across threads. */
    struct gh_gil *g;
    if ((g = gil_of(c, 2))) {
        /* take_gil holds the GIL's mutex until it returns, and a waiter the last drop
         * woke needs that mutex at once to see the GIL taken: a record made here makes
         * it block on the mutex more often (a futex wait and wake, two context
         * switches). Two threads handing the GIL over at every call (3.11) blocked
         * there 28 % more often than untraced, 12 % with the record after the unlock,
         * which used 3-6 % less CPU on an Intel VM (bench/churn_cost.py, its results'
         * notes; an AMD VM that blocks less reads 0-2 %, 3.15 no change).
         * So the take is recorded just after the mutex is unlocked, a few instructions
         * later: no other thread can take the GIL meanwhile, this one holds it. */
        uint64_t gen = atomic_load_explicit(&gt_registry_gen, memory_order_relaxed);
        if (gen && atomic_load_explicit(&gh.take_at_unlock, memory_order_relaxed)) {
            take_pending.gil = g;
            take_pending.gen = gen;
        } else {
            record(GT_GIL_ACQUIRED, atomic_load_explicit(&g->id, memory_order_relaxed));
        }
    } else if ((g = gil_of(c, 1)))
        record(GT_GIL_RELEASED, atomic_load_explicit(&g->id, memory_order_relaxed));
}

/* take_gil's rule (cpython.md): a timed-out wait sets the drop request only if the
 * GIL is still locked and no other thread took it during the wait
 * (switch_number unchanged). Both are read under the GIL mutex, which the caller
 * of pthread_cond_timedwait holds before and after the wait, as take_gil does.
 * Without a known layout every timed-out wait counts (an overestimate). */
static int drop_requested(const struct gh_gil *g, int rc, unsigned long switches_before,
                          int known)
{
    if (rc != ETIMEDOUT)
        return 0;
    if (!known)
        return 1;
    const int *locked = atomic_load_explicit(&g->locked, memory_order_relaxed);
    const unsigned long *sw = atomic_load_explicit(&g->switch_number, memory_order_relaxed);
    if (!locked || !sw) /* the addresses changed during the wait */
        return 1;
    return __atomic_load_n(locked, __ATOMIC_RELAXED) != 0 &&
           __atomic_load_n(sw, __ATOMIC_RELAXED) == switches_before;
}

/* take_gil waits: the want its lock skipped (WANT_UNCONTENDED) begins here. */
static __attribute__((noinline)) void want_at_wait(const struct gh_gil *g)
{
    if (decoding(atomic_load_explicit(&gh.mode, memory_order_relaxed)))
        record(WANT_AT_WAIT, atomic_load_explicit(&g->id, memory_order_relaxed));
}

static __attribute__((noinline)) void timedwait_slow(pthread_cond_t *c, pthread_mutex_t *m,
                                                     int rc, unsigned long switches_before,
                                                     int known)
{
    if (atomic_load_explicit(&gh.mode, memory_order_relaxed) == GH_CALIBRATE) {
        calib_note(GH_TIMEDWAIT, c, m, NULL);
        return;
    }
    struct gh_gil *g = gil_of(c, 1);
    if (g && drop_requested(g, rc, switches_before, known))
        record(GT_GIL_DROP_REQUEST, atomic_load_explicit(&g->id, memory_order_relaxed));
}

/* After a forced switch, drop_gil waits on switch_cond until another thread has
 * taken the GIL, then this thread retakes it at once: from here on the thread is
 * stalled by the GIL protocol, not idle, so it counts as waiting. */
static __attribute__((noinline)) void condwait_slow(pthread_cond_t *c)
{
    if (atomic_load_explicit(&gh.mode, memory_order_relaxed) == GH_CALIBRATE)
        return;
    struct gh_gil *g = gil_of(c, 2);
    if (g)
        record(GT_GIL_WANT, atomic_load_explicit(&g->id, memory_order_relaxed));
}

/* The wait is over: a forced drop goes on to take_gil (which wants again), a voluntary
 * drop that met a pending request goes on to its I/O: released either way. */
static __attribute__((noinline)) void condwait_done(pthread_cond_t *c)
{
    struct gh_gil *g = gil_of(c, 2);
    if (g)
        record(GT_GIL_SWITCH_DONE, atomic_load_explicit(&g->id, memory_order_relaxed));
}

static int hook_condwait(pthread_cond_t *c, pthread_mutex_t *m)
{
    if (__builtin_expect(atomic_load_explicit(&gh.mode, memory_order_relaxed) == GH_OFF, 1))
        return NEXT(CONDWAIT, condwait_fn)(c, m);
    condwait_slow(c);
    int rc = NEXT(CONDWAIT, condwait_fn)(c, m);
    if (decoding(atomic_load_explicit(&gh.mode, memory_order_relaxed)))
        condwait_done(c);
    return rc;
}

/* The GIL's mutex unlocked after a take (see signal_slow): the take's record. Any
 * other unlock passes through; one of that mutex in a later generation (recording
 * stopped in between) drops the take, as recording off would have. */
static __attribute__((noinline)) int unlock_slow(pthread_mutex_t *m)
{
    struct gh_gil *g = take_pending.gil;
    if (m != atomic_load_explicit(&g->mutex, memory_order_relaxed))
        return NEXT(UNLOCK, unlock_fn)(m);
    uint64_t gen = take_pending.gen;
    take_pending.gen = 0;
    int rc = NEXT(UNLOCK, unlock_fn)(m);
    if (gen == atomic_load_explicit(&gt_registry_gen, memory_order_relaxed))
        record(GT_GIL_ACQUIRED, atomic_load_explicit(&g->id, memory_order_relaxed));
    return rc;
}

/* Every unlock of the object: one thread-local load while nothing is pending. */
static int hook_unlock(pthread_mutex_t *m)
{
    if (__builtin_expect(take_pending.gen != 0, 0))
        return unlock_slow(m);
    return NEXT(UNLOCK, unlock_fn)(m);
}

static int hook_lock(pthread_mutex_t *m)
{
    if (__builtin_expect(atomic_load_explicit(&gh.mode, memory_order_relaxed) != GH_OFF, 0))
        lock_slow(m, __builtin_return_address(0));
    return NEXT(LOCK, lock_fn)(m);
}

static int hook_signal(pthread_cond_t *c)
{
    if (__builtin_expect(atomic_load_explicit(&gh.mode, memory_order_relaxed) != GH_OFF, 0))
        signal_slow(c, __builtin_return_address(0));
    return NEXT(SIGNAL, signal_fn)(c);
}

static int hook_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *abstime)
{
    if (__builtin_expect(atomic_load_explicit(&gh.mode, memory_order_relaxed) == GH_OFF, 1))
        return NEXT(TIMEDWAIT, timedwait_fn)(c, m, abstime);
    /* take_gil's saved_switchnum, read like take_gil under the GIL mutex. */
    const struct gh_gil *g = gil_of(c, 1);
    const unsigned long *sw = g ? atomic_load_explicit(&g->switch_number, memory_order_relaxed)
                                : NULL;
    int known = sw != NULL;
    unsigned long before = known ? __atomic_load_n(sw, __ATOMIC_RELAXED) : 0;
    if (g)
        want_at_wait(g);
    int rc = NEXT(TIMEDWAIT, timedwait_fn)(c, m, abstime);
    /* The wait itself reports through rc; errno is whatever it left (record() keeps
     * it). */
    timedwait_slow(c, m, rc, before, known);
    return rc;
}

/* ---- the park probe ------------------------------------------------------------ */

/* The parking lot parks a thread on its own semaphore and the waker posts that
 * semaphore: the poster's tid is noted per semaphore before the post, so the waiter
 * reads who woke it once its wait returns. A small open-addressing table keyed by the
 * semaphore's address (one per parking thread), emptied when a session starts; a full
 * neighbourhood only loses the waker (aux 0). */
#define WAKER_BITS 10
#define WAKER_PROBE 8

static struct waker {
    _Atomic(const void *) sem;
    atomic_int tid;
} wakers[1u << WAKER_BITS];

static struct waker *waker_slot(const void *sem, int claim)
{
    uint64_t h = ((uint64_t)(uintptr_t)sem >> 4) * 0x9e3779b97f4a7c15ull;
    for (unsigned i = 0; i < WAKER_PROBE; i++) {
        struct waker *w = &wakers[((h >> (64 - WAKER_BITS)) + i) & ((1u << WAKER_BITS) - 1)];
        const void *cur = atomic_load_explicit(&w->sem, memory_order_acquire);
        if (cur == sem)
            return w;
        /* A failed claim may be another poster's of the same semaphore. */
        if (!cur && claim && (atomic_compare_exchange_strong(&w->sem, &cur, sem) || cur == sem))
            return w;
    }
    return NULL;
}

/* Waits for another thread. A blocking acquire of a _thread.lock or RLock (what
 * Condition, Event, Queue, Barrier and Semaphore wait in) and SimpleQueue.get park on
 * the word right after their object's header; that thread waits for another one to
 * release, set or put, as a GIL build's waits with the GIL released, whatever the lock
 * guards: released, not contention. The types whose object that is (set per session,
 * none = every park is contention). Compared as addresses only, never dereferenced, so
 * no reference is kept: a type freed meanwhile can only miss. */
#define WAIT_TYPES 4
static _Atomic(const void *) wait_types[WAIT_TYPES];
static atomic_int nwait_types;

/* A free-threaded PyObject's header: ob_tid (8), ob_flags (2), ob_mutex (1), ob_gc_bits
 * (1), ob_ref_local (4), ob_ref_shared (8), ob_type (8): the word parked on is at +32,
 * its ob_type 8 bytes before it. */
#define PARKED_WORD_OFF 32
#define OB_TYPE_OFF 24

/* Whether the semaphore wait on `s` is a park on such an object. The parking lot's
 * semaphore is the `sema` of its struct wait_entry {park_arg, addr, sema, ...} on the
 * parking thread's stack (Python/parking_lot.c, 3.13 and 3.14), the word before it the
 * address parked on, which the parking lot just read (mapped). Read only for a
 * semaphore a few frames up this stack: a heap one (PyThread locks) is no park. The
 * only other semaphore there is a raw mutex's entry {next, sema}: its `next` is another
 * waiting thread's entry (on a live stack) or NULL. ob_type is read only on the
 * parked-on word's own page. These reads are guesses checked by an address compare, so
 * out of the sanitizers' sight: a word before a global is its neighbour's redzone, one
 * on another waiter's stack may be written meanwhile. */
__attribute__((no_sanitize("address", "thread"))) static int waits_for_thread(const sem_t *s)
{
    int n = atomic_load_explicit(&nwait_types, memory_order_acquire);
    if (!n)
        return 0;
    uintptr_t here = (uintptr_t)__builtin_frame_address(0), at = (uintptr_t)s;
    if (at <= here || at - here > 16384)
        return 0;
    uintptr_t addr = ((const uintptr_t *)(const void *)s)[-1];
    if (addr < 4096 || (addr & 7) || (addr & 4095) < PARKED_WORD_OFF - OB_TYPE_OFF)
        return 0;
    const void *tp = *(const void *const *)(addr - (PARKED_WORD_OFF - OB_TYPE_OFF));
    for (int i = 0; i < n && i < WAIT_TYPES; i++)
        if (tp && tp == atomic_load_explicit(&wait_types[i], memory_order_relaxed))
            return 1;
    return 0;
}

/* One park event of the calling thread, inside the recording section (see record()). */
static void record_park(uint32_t kind, const sem_t *sem, int rc)
{
    struct hook_slot *sl = section_enter();
    if (sl) {
        struct gt_thread *t = NULL;
        if (atomic_load_explicit(&gh.park, memory_order_relaxed))
            t = gt_thread_current();
        if (t && kind == GT_PARK_WAKE) {
            struct waker *w = waker_slot(sem, 1);
            if (w)
                atomic_store_explicit(&w->tid, t->tid, memory_order_release);
        } else if (t) {
            uint32_t aux = 0;
            if (kind == GT_PARK_END || kind == GT_PARK_WAIT_END) {
                struct waker *w = waker_slot(sem, 0);
                int32_t by = w ? atomic_exchange_explicit(&w->tid, 0, memory_order_acquire) : 0;
                aux = rc == 0 && by > 0 && by != t->tid ? (uint32_t)by : 0;
            }
            uint64_t ts = gt_ticks();
            gt_stream__push(&t->gil, ts, kind, aux);
            gt_thread__gil_event(t, ts, kind);
        }
        section_leave(sl);
    }
}

#define PARKING() __builtin_expect(atomic_load_explicit(&gh.park, memory_order_relaxed), 0)

static int hook_sem_clockwait(sem_t *s, clockid_t clock, const struct timespec *abstime)
{
    if (!PARKING())
        return NEXT(SEM_CLOCKWAIT, sem_clockwait_fn)(s, clock, abstime);
    int w = waits_for_thread(s);
    record_park(w ? GT_PARK_WAIT_BEGIN : GT_PARK_BEGIN, s, 0);
    int rc = NEXT(SEM_CLOCKWAIT, sem_clockwait_fn)(s, clock, abstime);
    record_park(w ? GT_PARK_WAIT_END : GT_PARK_END, s, rc);
    return rc;
}

static int hook_sem_timedwait(sem_t *s, const struct timespec *abstime)
{
    if (!PARKING())
        return NEXT(SEM_TIMEDWAIT, sem_timedwait_fn)(s, abstime);
    int w = waits_for_thread(s);
    record_park(w ? GT_PARK_WAIT_BEGIN : GT_PARK_BEGIN, s, 0);
    int rc = NEXT(SEM_TIMEDWAIT, sem_timedwait_fn)(s, abstime);
    record_park(w ? GT_PARK_WAIT_END : GT_PARK_END, s, rc);
    return rc;
}

static int hook_sem_wait(sem_t *s)
{
    if (!PARKING())
        return NEXT(SEM_WAIT, sem_wait_fn)(s);
    int w = waits_for_thread(s);
    record_park(w ? GT_PARK_WAIT_BEGIN : GT_PARK_BEGIN, s, 0);
    int rc = NEXT(SEM_WAIT, sem_wait_fn)(s);
    record_park(w ? GT_PARK_WAIT_END : GT_PARK_END, s, rc);
    return rc;
}

static int hook_sem_post(sem_t *s)
{
    if (PARKING())
        record_park(GT_PARK_WAKE, s, 0);
    return NEXT(SEM_POST, sem_post_fn)(s);
}

#define GH_HOOK(id, name, hook, needed) [GH_##id] = (void *)hook,
static void *const hook_of[GH_NFUNCS] = {GH_FUNCS(GH_HOOK)};
#undef GH_HOOK

/* ---- install ----------------------------------------------------------------- */

#define MAX_SLOTS 24

struct slot {
    void **addr;
    enum gh_func fn;
    int prot; /* protection of its page as the loader left it */
};

static pthread_mutex_t config_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int installed;
static struct slot slots[MAX_SLOTS];
static size_t nslots;
static void *real_of[GH_NFUNCS];
static _Atomic uint64_t slots_patched;
static char object_path[PATH_MAX];
static uintptr_t object_bias;
static char install_why[160];
static int unlock_hooked; /* a slot of pthread_mutex_unlock is patched */

/* Are takes recorded at the GIL mutex's unlock (see signal_slow)? Chosen at each
 * recording start; GILTRACER_TAKE_RECORD=signal keeps the record at the signal (the
 * bench's comparison, bench/churn_cost.py). */
static int take_at_unlock_chosen(void)
{
    const char *env = getenv("GILTRACER_TAKE_RECORD");
    return unlock_hooked && !(env && strcmp(env, "signal") == 0);
}

/* Does a recording started now record nothing (GH_FLOOR)? GILTRACER_HOOKS_FLOOR=1, for
 * the bench only: the session then has no GIL events. */
static int floor_chosen(void)
{
    const char *env = getenv("GILTRACER_HOOKS_FLOOR");
    return env && strcmp(env, "1") == 0;
}

static int add_slot(struct gt_elf_obj *o, const ElfW(Rela) *r, const char **why)
{
    /* ELF64_*: both supported architectures are 64-bit (others never get here). */
    uint32_t type = (uint32_t)ELF64_R_TYPE(r->r_info);
    size_t idx = ELF64_R_SYM(r->r_info);
    if ((type != GH_R_JUMP_SLOT && type != GH_R_GLOB_DAT) || idx == 0)
        return 0;
    ElfW(Word) name = o->symtab[idx].st_name;
    if (name >= o->strsz)
        return 0;
    const char *s = o->strtab + name;
    for (int fn = 0; fn < GH_NFUNCS; fn++) {
        if (strcmp(s, func_names[fn]) != 0)
            continue;
        void **addr = (void **)(o->bias + r->r_offset);
        for (size_t i = 0; i < nslots; i++)
            if (slots[i].addr == addr) /* listed in both DT_RELA and DT_JMPREL */
                return 0;
        if (nslots == MAX_SLOTS) {
            *why = "too many GOT slots for the hooked functions";
            return -E2BIG;
        }
        if (!real_of[fn]) {
            const char *ver = gt_elf_obj__needed_version(o, idx);
            real_of[fn] = ver ? dlvsym(RTLD_DEFAULT, s, ver) : NULL;
            if (!real_of[fn])
                real_of[fn] = dlsym(RTLD_DEFAULT, s);
            if (!real_of[fn]) {
                *why = "dlsym() cannot find a hooked pthread function";
                return -ENOENT;
            }
        }
        slots[nslots++] = (struct slot){addr, (enum gh_func)fn,
                                        gt_elf_obj__page_prot(o, (uintptr_t)addr)};
        return 0;
    }
    return 0;
}

/* Where a hook must forward to, given the slot's current value. The saved value may
 * be the lazy-binding PLT stub inside the object itself (calling it would re-resolve
 * and overwrite our slot), the real function, or another interposer that patched
 * the slot before us (memray...): only the last one is worth chaining to. */
static void *choose_next(const struct gt_elf_obj *o, enum gh_func fn, void *saved)
{
    struct link_map *lm = NULL;
    Dl_info info;
    if (saved == real_of[fn] || saved == hook_of[fn] || !saved)
        return real_of[fn];
    if (dladdr1(saved, &info, (void **)&lm, RTLD_DL_LINKMAP) && lm == o->lm)
        return real_of[fn];
    return saved;
}

static void set_object_path(const struct link_map *lm)
{
    if (lm->l_name && lm->l_name[0]) {
        snprintf(object_path, sizeof(object_path), "%s", lm->l_name);
        return;
    }
    /* The executable's link map has an empty name. */
    ssize_t n = readlink("/proc/self/exe", object_path, sizeof(object_path) - 1);
    object_path[n > 0 ? n : 0] = '\0';
}

static void atfork_child(void)
{
    /* A thread calibrating at fork() held config_lock (and released the GIL to do it):
     * it is not in the child, so neither is its hold. */
    pthread_mutex_init(&config_lock, NULL);
    atomic_store(&gh.mode, GH_OFF);
    atomic_store(&gh.park, 0);
    /* The registration is the process's: a child re-registers (a no-op where the kernel
     * copied it), or its hooks fence again. No hook is in flight: one thread. */
    if (atomic_load(&gh.asym) && sys_membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) != 0)
        atomic_store(&gh.asym, 0);
    /* Only the forking thread exists here: the other slots' threads (maybe caught
     * in flight by fork()) are gone. */
    for (struct hook_slot *sl = atomic_load(&hook_slots); sl; sl = sl->next) {
        atomic_store(&sl->in_flight, 0);
        atomic_store(&sl->taken, sl == my_slot);
    }
    take_pending.gen = 0;
}

/* The object's GOT slots of the hooked functions; all of the ones decoding needs, or
 * -ENOENT (patch nothing rather than half). */
static int collect_slots(struct gt_elf_obj *o, const char **why)
{
    int err = 0;
    nslots = 0;
    for (size_t i = 0; i < o->jmprel_n && err == 0; i++)
        err = add_slot(o, &o->jmprel[i], why);
    for (size_t i = 0; i < o->rela_n && err == 0; i++) /* -fno-plt: GLOB_DAT */
        err = add_slot(o, &o->rela[i], why);
    if (err < 0)
        return err;
    for (int fn = 0; fn < GH_NFUNCS; fn++) {
        int found = 0;
        for (size_t i = 0; i < nslots; i++)
            found |= slots[i].fn == (enum gh_func)fn;
        if (!found && func_needed[fn]) {
            snprintf(install_why, sizeof(install_why),
                     "no GOT slot for %s in the interpreter object (static libc, or not "
                     "the GIL's object?)", func_names[fn]);
            *why = install_why;
            return -ENOENT;
        }
    }
    return 0;
}

/* Point every slot at its hook, after deciding every hook's target (what the slots
 * held, or the next interposer's) before any slot points at a hook. */
static int patch_slots(const struct gt_elf_obj *o, const char **why)
{
    void *next[GH_NFUNCS] = {0};
    for (size_t i = 0; i < nslots; i++) {
        void *saved = __atomic_load_n(slots[i].addr, __ATOMIC_ACQUIRE);
        void *n = choose_next(o, slots[i].fn, saved);
        if (!next[slots[i].fn] || n != real_of[slots[i].fn])
            next[slots[i].fn] = n;
    }
    /* Set once: after a failed install, live hooks keep their first target (a retry
     * sees its own hooks in the slots and could no longer tell what was there). */
    for (int fn = 0; fn < GH_NFUNCS; fn++)
        if (!__atomic_load_n(&gh.next[fn], __ATOMIC_RELAXED))
            __atomic_store_n(&gh.next[fn], next[fn], __ATOMIC_RELAXED);
    atomic_thread_fence(memory_order_seq_cst);

    for (size_t i = 0; i < nslots; i++) {
        if (__atomic_load_n(slots[i].addr, __ATOMIC_ACQUIRE) != hook_of[slots[i].fn]) {
            int err = gt_got__store(slots[i].addr, slots[i].prot, hook_of[slots[i].fn]);
            if (err < 0) {
                /* Slots already patched keep forwarding correctly; leave them. */
                *why = "mprotect() refused to make a read-only GOT page writable";
                return err;
            }
        }
        slots_patched++;
    }
    unlock_hooked = 0;
    for (size_t i = 0; i < nslots; i++)
        unlock_hooked |= slots[i].fn == GH_UNLOCK;
    return 0;
}

int gt_gilhook__install(const void *interp_symbol, const char **why)
{
    const char *dummy;
    struct gt_elf_obj o = {0};
    Dl_info info;
    int err = 0;

    if (!why)
        why = &dummy;
    /* Installed already: no lock (a calibration holds it while it waits for the GIL,
     * which this caller may hold). */
    if (atomic_load(&installed))
        return 0;
    pthread_mutex_lock(&config_lock);
    if (atomic_load(&installed))
        goto cleanup;
    if (!GH_SUPPORTED) {
        *why = "GOT hooks are implemented for x86-64 and aarch64 only";
        err = -ENOTSUP;
        goto cleanup;
    }
    if (!dladdr1(interp_symbol, &info, (void **)&o.lm, RTLD_DL_LINKMAP) || !o.lm) {
        *why = "the interpreter symbol is not inside any loaded object";
        err = -ENOENT;
        goto cleanup;
    }
    err = gt_elf_obj__open(&o, o.lm, why);
    if (err >= 0)
        err = collect_slots(&o, why);
    if (err >= 0)
        err = patch_slots(&o, why);
    if (err < 0)
        goto cleanup;
    set_object_path(o.lm);
    object_bias = o.bias;
    /* A forked child has no session of its own: the parent's streams are copies it
     * will never drain, and hooks caught mid-section by fork() would keep inflight
     * nonzero forever. */
    pthread_atfork(NULL, NULL, atfork_child);
    atomic_store(&installed, 1);
cleanup:
    pthread_mutex_unlock(&config_lock);
    return err;
}

/* A thread that was inside the lazy-binding resolver for one of our slots while we
 * patched it may have stored the resolved function over our hook afterwards. Only
 * that exact value is put back: anything else is an interposer installed after us,
 * which chains to us. */
static void repatch(void)
{
    if (!atomic_load(&installed))
        return;
    for (size_t i = 0; i < nslots; i++)
        if (__atomic_load_n(slots[i].addr, __ATOMIC_ACQUIRE) == real_of[slots[i].fn])
            gt_got__store(slots[i].addr, slots[i].prot, hook_of[slots[i].fn]);
}

/* ---- calibration --------------------------------------------------------------- */

static char calib_why[256];

/* What one drop+take's pthread calls showed: the first mutex locked (the GIL's), the
 * first and second conds signalled (the GIL's cond, then switch_cond), what was locked
 * before each signal, and the call sites of the take's lock and signal. */
struct calib_seen {
    const void *m, *c, *sc;
    const void *lock_before_c, *lock_before_sc;
    const void *take_m_site, *sc_site;
    unsigned m_locks;
};

static int calib_scan(struct calib_seen *s, const char **why)
{
    const void *last_lock = NULL, *m_site = NULL;
    for (unsigned i = 0; i < calib_n; i++) {
        const struct calib_call *e = &calib_log[i];
        switch (e->fn) {
        case GH_LOCK:
            if (!s->m)
                s->m = e->a;
            s->m_locks += e->a == s->m;
            if (e->a == s->m)
                m_site = e->site;
            last_lock = e->a;
            break;
        case GH_SIGNAL:
            if (!s->c) {
                s->c = e->a;
                s->lock_before_c = last_lock;
            } else if (!s->sc) {
                s->sc = e->a;
                s->lock_before_sc = last_lock;
                s->sc_site = e->site;
                s->take_m_site = m_site;
            }
            break;
        case GH_TIMEDWAIT:
            if (s->c && (e->a != s->c || e->b != s->m)) {
                *why = "calibration: a timed wait on another cond/mutex than the GIL's";
                return -EPROTO;
            }
            break;
        default:
            break;
        }
    }
    return 0;
}

/* Read the GIL's addresses off one drop+take by this thread:
 *   drop: lock(M) signal(C) [lock(SM) wait(SC) if a drop request was pending]
 *   take: lock(M) [timedwait(C, M)...] lock(SM) signal(SC)
 * (unlock and cond_wait are not hooked). */
static int calib_decode(struct gt_gil_addrs *a, const char **why)
{
    struct calib_seen s = {0};

    if (calib_n > CALIB_MAX) {
        *why = "calibration: too many pthread calls during one GIL drop+take";
        return -EPROTO;
    }
    if (calib_scan(&s, why) < 0)
        return -EPROTO;
    if (calib_n == 0) {
        *why = "calibration: no pthread calls during a GIL drop+take (free-threaded "
               "build, or the GIL lives in another object)";
        return -EPROTO;
    }
    if (!s.m || !s.c || !s.sc) {
        snprintf(calib_why, sizeof(calib_why),
                 "calibration: expected a mutex lock and two cond signals during a GIL "
                 "drop+take, saw %u calls (lock %s, signals %s)",
                 calib_n, s.m ? "yes" : "no", s.sc ? "2" : s.c ? "1" : "0");
        *why = calib_why;
        return -EPROTO;
    }
    if (s.m_locks < 2) {
        *why = "calibration: the first mutex was locked only once (expected by both the "
               "drop and the take)";
        return -EPROTO;
    }
    if (s.lock_before_c != s.m) {
        *why = "calibration: the drop's signal did not follow a lock of the first mutex";
        return -EPROTO;
    }
    if (s.c == s.sc || s.c == s.m || s.sc == s.m) {
        *why = "calibration: the drop and take signalled the same cond";
        return -EPROTO;
    }
    if (s.lock_before_sc == s.m) {
        *why = "calibration: no switch_mutex lock before the take's signal "
               "(interpreter built without FORCE_SWITCHING?)";
        return -EPROTO;
    }
    /* Fields of one struct _gil_runtime_state: far apart means we misread. */
    intptr_t dm = (const char *)s.m - (const char *)s.c, ds = (const char *)s.sc - (const char *)s.c;
    if (dm < -512 || dm > 512 || ds < -512 || ds > 512) {
        *why = "calibration: the GIL's mutex and conds are not fields of one struct";
        return -EPROTO;
    }
    a->mutex = s.m;
    a->cond = s.c;
    a->switch_cond = s.sc;
    a->take_lock_site = s.take_m_site;
    a->take_signal_site = s.sc_site;
    return 0;
}

int gt_gilhook__calibrate(void (*drop_and_retake)(void *ctx), void *ctx,
                          struct gt_gil_addrs *out, const char **why)
{
    const char *dummy;
    struct gt_gil_addrs first = {0};
    int err = 0;

    if (!why)
        why = &dummy;
    /* trylock: the caller holds the GIL, and another calibrating thread would need
     * it back in order to finish and unlock. */
    if (pthread_mutex_trylock(&config_lock) != 0) {
        *why = "calibration already running";
        return -EBUSY;
    }
    if (!atomic_load(&installed)) {
        *why = "hooks not installed";
        err = -ENOENT;
        goto cleanup;
    }
    repatch();
    gh.calib_thread = pthread_self(); /* published by the mode store below */
    for (int round = 0; round < 3; round++) {
        struct gt_gil_addrs a = {0};
        int expected = GH_OFF;
        calib_n = 0;
        if (!atomic_compare_exchange_strong(&gh.mode, &expected, GH_CALIBRATE)) {
            *why = "cannot calibrate while recording";
            err = -EBUSY;
            goto cleanup;
        }
        drop_and_retake(ctx);
        expected = GH_CALIBRATE;
        if (!atomic_compare_exchange_strong(&gh.mode, &expected, GH_OFF)) {
            *why = "recording started during calibration";
            err = -EBUSY;
            goto cleanup;
        }
        err = calib_decode(&a, why);
        if (err < 0)
            goto cleanup;
        if (round == 0) {
            first = a;
        } else if (a.mutex != first.mutex || a.cond != first.cond ||
                   a.switch_cond != first.switch_cond) {
            *why = "calibration: repeated GIL drop+take passed different addresses";
            err = -EPROTO;
            goto cleanup;
        }
    }
    *out = first;
    /* Informational on success: does the observed layout match the one known for
     * 3.9-3.13 (cond, mutex, switch_cond consecutive)? Addresses come from the
     * observation either way. */
    {
        intptr_t dm = (const char *)first.mutex - (const char *)first.cond;
        intptr_t ds = (const char *)first.switch_cond - (const char *)first.cond;
        intptr_t em = (intptr_t)sizeof(pthread_cond_t);
        intptr_t es = em + (intptr_t)sizeof(pthread_mutex_t);
        snprintf(calib_why, sizeof(calib_why),
                 "layout %s: mutex = cond%+ld, switch_cond = cond%+ld "
                 "(_gil_runtime_state: %+ld, %+ld)",
                 dm == em && ds == es ? "matches _gil_runtime_state" : "differs",
                 (long)dm, (long)ds, (long)em, (long)es);
        *why = calib_why;
    }
cleanup:
    pthread_mutex_unlock(&config_lock);
    return err;
}

/* ---- control ------------------------------------------------------------------- */

/* _gil_runtime_state as in 3.9-3.13: ... int locked; unsigned long switch_number;
 * cond; mutex; switch_cond ... (cond, mutex and switch_cond consecutive is what
 * calibration can check; the two fields before cond come with that layout). */
static void gil_set(struct gh_gil *g, const struct gt_gil_addrs *a, uint32_t id)
{
    const char *c = a->cond;
    int layout = c && (const char *)a->mutex == c + sizeof(pthread_cond_t) &&
                 (const char *)a->switch_cond ==
                     c + sizeof(pthread_cond_t) + sizeof(pthread_mutex_t);
    atomic_store(&g->id, id);
    atomic_store(&g->locked, layout ? (const int *)(c - 2 * sizeof(unsigned long)) : NULL);
    atomic_store(&g->switch_number,
                 layout ? (const unsigned long *)(c - sizeof(unsigned long)) : NULL);
    atomic_store(&g->mutex, a->mutex);
    atomic_store(&g->cond, a->cond);
    atomic_store(&g->switch_cond, a->switch_cond);
}

void gt_gilhook__set_addrs(const struct gt_gil_addrs *a)
{
    gil_set(&gils[0], a, 0);
    atomic_store(&gh.ngils, 1);
}

int gt_gilhook__add_gil(const struct gt_gil_addrs *a, uint32_t id)
{
    static pthread_mutex_t add_lock = PTHREAD_MUTEX_INITIALIZER;
    int err = 0;
    pthread_mutex_lock(&add_lock);
    unsigned n = atomic_load(&gh.ngils), i;
    for (i = 0; i < n; i++)
        if (atomic_load(&gils[i].cond) == a->cond)
            break;
    if (i == n && n == GH_MAX_GILS) {
        err = -ENOSPC;
    } else {
        /* An address seen before belongs to a newer interpreter now: relabel it. */
        gil_set(&gils[i], a, id);
        if (i == n)
            atomic_store(&gh.ngils, n + 1);
    }
    pthread_mutex_unlock(&add_lock);
    return err;
}

unsigned gt_gilhook__ngils(void)
{
    return atomic_load(&gh.ngils);
}

void gt_gilhook__set_recording(int on)
{
    if (on) {
        atomic_store(&gh.take_at_unlock, take_at_unlock_chosen());
        repatch();
        asym_on();
        atomic_store(&gh.mode, floor_chosen() ? GH_FLOOR : GH_RECORD);
        return;
    }
    int expected = atomic_load(&gh.mode);
    if (decoding(expected))
        atomic_compare_exchange_strong(&gh.mode, &expected, GH_OFF);
    /* Hooks that saw GH_RECORD (or GH_FLOOR) may still be in their sections: wait for every
     * thread's mark. */
    quiesce();
}

void gt_gilhook__set_park(int on)
{
    if (on) {
        repatch();
        asym_on();
        /* Quiet (no park hook records while off): each session starts with an empty
         * table, so it holds the semaphores of one session's parking threads only. */
        for (size_t i = 0; i < sizeof(wakers) / sizeof(wakers[0]); i++) {
            atomic_store(&wakers[i].sem, NULL);
            atomic_store(&wakers[i].tid, 0);
        }
        atomic_store(&gh.park, 1);
        return;
    }
    atomic_store(&gh.park, 0);
    quiesce();
}

void gt_gilhook__set_park_waits(const void *const *types, size_t n)
{
    if (n > WAIT_TYPES)
        n = WAIT_TYPES;
    atomic_store(&nwait_types, 0);
    for (size_t i = 0; i < n; i++)
        atomic_store(&wait_types[i], types[i]);
    atomic_store(&nwait_types, (int)n);
}

int gt_gilhook__can_park(void)
{
    return atomic_load(&installed) && NEXT(SEM_POST, void *) &&
           (NEXT(SEM_CLOCKWAIT, void *) || NEXT(SEM_TIMEDWAIT, void *) || NEXT(SEM_WAIT, void *));
}

const char *gt_gilhook__object_path(void)
{
    return object_path;
}

void gt_gilhook__stats(struct gt_gilhook_stats *out)
{
    out->slots_patched = atomic_load(&slots_patched);
    out->membarrier = atomic_load(&gh.asym);
    out->take_at_unlock = take_at_unlock_chosen();
    out->floor = floor_chosen();
}

uintptr_t gt_gilhook__object_bias(void)
{
    return object_bias;
}

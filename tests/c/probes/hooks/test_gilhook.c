/* SPDX-License-Identifier: MIT */
/* Unit test of core/probes/hooks/gilhook.c against a fake interpreter object (fake_interp.c):
 * install, calibrate, and the drop-request decode, which must follow take_gil's own
 * rule: a timed-out wait asks the holder to drop only if the GIL is still locked and
 * no other thread took it during the wait. Plain C. No timing is asserted: the test
 * holds the GIL mutex past the waiter's deadline, so the waiter's timeout and the
 * state it sees are fixed. Only if the test got the mutex after the deadline (a slow
 * or loaded machine, valgrind) is the wait's outcome open: then it measures again. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fake_interp.h"
#include "gilhook.h"
#include "gt_events.h"
#include "registry.h"

#include "check.h"

static void calib_cb(void *ctx)
{
    fake_drop_and_retake(ctx);
}

enum change { NOTHING, SWITCH, UNLOCK };

struct waiter {
    long timeout_ns;
    struct timespec deadline; /* set by the waiter under the mutex */
    int waiting;
    int rc;
    int32_t tid;
};

static void *waiter_main(void *arg)
{
    struct waiter *w = arg;
    w->tid = (int32_t)syscall(SYS_gettid);
    w->rc = fake_timed_wait(w->timeout_ns, &w->deadline, &w->waiting);
    return NULL;
}

static int after(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec > b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec > b->tv_nsec);
}

/* Calls fn(e, arg) on each GIL-stream event of thread `tid`, in stream order. */
static void each_gil_event(int32_t tid, void (*fn)(const struct gt_gil_event *e, void *arg), void *arg)
{
    for (struct gt_thread *t = gt_registry__threads(); t; t = t->next) {
        if (t->tid != tid)
            continue;
        struct gt_chunk c[64];
        size_t k = gt_stream__chunks(&t->gil, c, 64);
        for (size_t i = 0; i < k && i < 64; i++)
            for (size_t j = 0; j < c[i].n; j++)
                fn((const struct gt_gil_event *)c[i].data + j, arg);
    }
}

static void count_drop_request(const struct gt_gil_event *e, void *arg)
{
    *(size_t *)arg += e->kind == GT_GIL_DROP_REQUEST;
}

static size_t drop_requests_of(int32_t tid)
{
    size_t n = 0;
    each_gil_event(tid, count_drop_request, &n);
    return n;
}

struct kind_count {
    uint32_t kind;
    size_t n;
};

static void count_kind(const struct gt_gil_event *e, void *arg)
{
    struct kind_count *k = arg;
    k->n += e->kind == k->kind;
}

static size_t events_of(int32_t tid, uint32_t kind)
{
    struct kind_count k = {kind, 0};
    each_gil_event(tid, count_kind, &k);
    return k.n;
}

/* Another thread "holds" the GIL while a waiter's timed wait runs out; during the
 * wait the test changes nothing, switches the holder, or releases the GIL. Returns the
 * waiter's drop requests, or -1 if the test got the mutex only after the deadline. */
static long one_timed_wait(enum change what, long timeout_ns)
{
    static char holder_a, holder_b;
    fake_take(&holder_a); /* locked, last_holder = a */
    CHECK(gt_registry__begin(0, NULL, NULL) == 0, "registry begin");
    gt_gilhook__set_recording(1);

    struct waiter w = {.timeout_ns = timeout_ns};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, waiter_main, &w) == 0, "pthread_create");
    while (!__atomic_load_n(&w.waiting, __ATOMIC_ACQUIRE))
        sched_yield();
    /* Direct calls (not through the fake object's GOT): no events of ours. The
     * waiter set `waiting` under the mutex, so it is inside the wait once we get it;
     * before its deadline, the wait cannot have ended. */
    pthread_mutex_lock(&fake_gil.mutex);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int in_time = !after(&now, &w.deadline);
    if (what == SWITCH) { /* another waiter took the GIL in the meantime */
        fake_gil.last_holder = &holder_b;
        fake_gil.switch_number++;
    } else if (what == UNLOCK) {
        fake_gil.locked = 0;
    }
    /* Keep the mutex until the deadline has passed: the wait can only time out, and
     * only after the change. */
    do {
        struct timespec nap = {0, 1000000};
        nanosleep(&nap, NULL);
        clock_gettime(CLOCK_REALTIME, &now);
    } while (!after(&now, &w.deadline));
    pthread_mutex_unlock(&fake_gil.mutex);
    pthread_join(th, NULL);
    CHECK(w.rc == ETIMEDOUT, "the wait timed out: %d", w.rc);

    gt_gilhook__set_recording(0);
    gt_registry__end();
    size_t n = drop_requests_of(w.tid);
    size_t wants = events_of(w.tid, GT_GIL_WANT);
    CHECK(wants == 1, "the waiter wanted the GIL once (its lock; not again at its wait): %zu",
          wants);
    gt_registry__release(NULL);
    fake_drop();
    return in_time ? (long)n : -1;
}

/* one_timed_wait, measured again with a longer wait while the test was too late. */
static long timed_wait_in_time(enum change what)
{
    long n = -1;
    for (long timeout_ns = 20000000l; n < 0 && timeout_ns <= 2560000000l; timeout_ns *= 4)
        n = one_timed_wait(what, timeout_ns);
    CHECK(n >= 0, "the test took the mutex before the waiter's deadline (%ld)", n);
    return n;
}

/* A take of a GIL nobody holds records no want once the thread's state is known (the
 * thread's first want is recorded, for merge's initial state); a take that must wait
 * records one (one_timed_wait). */
static void test_uncontended_takes(void *tstate)
{
    fake_take(tstate); /* not recording: no events */
    CHECK(gt_registry__begin(0, NULL, NULL) == 0, "registry begin");
    gt_gilhook__set_recording(1);
    for (int i = 0; i < 3; i++)
        fake_drop_and_retake(tstate);
    gt_gilhook__set_recording(0);
    gt_registry__end();
    int32_t me = (int32_t)syscall(SYS_gettid);
    size_t wants = events_of(me, GT_GIL_WANT), acquired = events_of(me, GT_GIL_ACQUIRED),
           released = events_of(me, GT_GIL_RELEASED);
    /* The first drop's lock is a want: the thread's state was not known yet. */
    CHECK(wants == 1 && acquired == 3 && released == 3,
          "3 uncontended drops and takes: 1 want, 3 acquired, 3 released (%zu, %zu, %zu)",
          wants, acquired, released);
    gt_registry__release(NULL);
    fake_drop();
}

/* A thread that is calibrating when another thread forks: the child has no such
 * thread, so the calibration lock it held must not stay held there (every later
 * calibration in the child would fail "already running"). */
static struct {
    pthread_mutex_t m;
    pthread_cond_t c;
    int inside, forked;
} fk = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};

static void blocking_cb(void *ctx)
{
    (void)ctx; /* no drop and retake: this calibration fails, which is not the point */
    pthread_mutex_lock(&fk.m);
    fk.inside = 1;
    pthread_cond_broadcast(&fk.c);
    while (!fk.forked)
        pthread_cond_wait(&fk.c, &fk.m);
    pthread_mutex_unlock(&fk.m);
}

static void *calibrating_main(void *arg)
{
    struct gt_gil_addrs a;
    const char *why = NULL;
    (void)arg;
    (void)gt_gilhook__calibrate(blocking_cb, NULL, &a, &why);
    return NULL;
}

static void test_fork_during_calibration(void *tstate)
{
    pthread_t th;
    CHECK(pthread_create(&th, NULL, calibrating_main, NULL) == 0, "pthread_create");
    pthread_mutex_lock(&fk.m);
    while (!fk.inside)
        pthread_cond_wait(&fk.c, &fk.m);
    pthread_mutex_unlock(&fk.m);
    pid_t pid = fork();
    if (pid == 0) {
        struct gt_gil_addrs a;
        const char *why = NULL;
        int err = gt_gilhook__calibrate(calib_cb, tstate, &a, &why);
        if (err)
            fprintf(stderr, "child calibration: %d %s\n", err, why ? why : "");
        _exit(err == 0 && a.mutex == (void *)&fake_gil.mutex ? 0 : 1);
    }
    pthread_mutex_lock(&fk.m);
    fk.forked = 1;
    pthread_cond_broadcast(&fk.c);
    pthread_mutex_unlock(&fk.m);
    pthread_join(th, NULL);
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork and wait");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "a child forked during a calibration calibrates (status %d)", status);
}

/* The stop protocol: once gt_gilhook__set_recording(0) returns, no hook touches a
 * registry record, even with a thread trading the GIL nonstop meanwhile. Its stream's
 * write position and its account must not move while it goes on for a while (every
 * round: a hook that still saw recording on would have pushed within a few cycles). */
static struct {
    atomic_int stop;
    atomic_long cycles;
    int32_t tid;
} hammer;

static void *hammer_main(void *arg)
{
    hammer.tid = (int32_t)syscall(SYS_gettid);
    while (!atomic_load_explicit(&hammer.stop, memory_order_relaxed)) {
        fake_drop_and_retake(arg);
        atomic_fetch_add_explicit(&hammer.cycles, 1, memory_order_relaxed);
    }
    return NULL;
}

/* Sleeps, not sched_yield: under valgrind (one thread runs at a time) a yield loop kept
 * the hammer thread from running for minutes (CI killed it at 90 min). */
static void wait_cycles(long n)
{
    long until = atomic_load(&hammer.cycles) + n;
    while (atomic_load(&hammer.cycles) < until) {
        struct timespec nap = {0, 50000};
        nanosleep(&nap, NULL);
    }
}

static void test_stop_while_hooking(void *tstate)
{
    pthread_t th;
    CHECK(pthread_create(&th, NULL, hammer_main, tstate) == 0, "pthread_create");
    /* Under valgrind (make test-valgrind) each begin's arenas are slow to fault in (~30 s a
     * round): two rounds check the records there; the race is this run's and TSan's. */
    int rounds = getenv("GT_TEST_UNDER_VALGRIND") ? 2 : 500, moved = 0, recorded = 0;
    for (int r = 0; r < rounds; r++) {
        if (gt_registry__begin(0, NULL, NULL) < 0) {
            CHECK(0, "gt_registry__begin");
            break;
        }
        gt_gilhook__set_recording(1);
        wait_cycles(1 + r % 50);
        gt_gilhook__set_recording(0);
        struct gt_thread *t = gt_registry__threads();
        for (; t && t->tid != hammer.tid; t = t->next)
            ;
        void *cur = t ? t->gil.cur : NULL;
        uint64_t since = t ? __atomic_load_n(&t->gil_since, __ATOMIC_RELAXED) : 0;
        wait_cycles(200);
        if (t) {
            recorded++;
            moved += t->gil.cur != cur ||
                     __atomic_load_n(&t->gil_since, __ATOMIC_RELAXED) != since;
        }
        gt_registry__end();
        gt_registry__release(NULL);
    }
    atomic_store(&hammer.stop, 1);
    pthread_join(th, NULL);
    CHECK(recorded > rounds / 2, "the thread was recorded (%d of %d rounds)", recorded, rounds);
    CHECK(moved == 0, "no hook wrote a record after the stop returned (%d rounds did)", moved);
    /* The first session's helper registered the process; a later start turned it on. */
    long q = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    struct gt_gilhook_stats st;
    gt_gilhook__stats(&st);
    CHECK(st.membarrier == (q > 0 && (q & MEMBARRIER_CMD_PRIVATE_EXPEDITED)),
          "the stop side pays the barrier wherever the kernel offers membarrier (%d, %ld)",
          st.membarrier, q);
}

/* The park probe: a thread parks on its semaphore, another posts it. The waiter's
 * stream gets BEGIN, then END naming the poster; the poster's stream stays empty. */
struct parker {
    sem_t sem;
    int parking;
    int rc;
    int32_t tid;
};

static void *parker_main(void *arg)
{
    struct parker *p = arg;
    p->tid = (int32_t)syscall(SYS_gettid);
    __atomic_store_n(&p->parking, 1, __ATOMIC_RELEASE);
    p->rc = fake_park(&p->sem);
    return NULL;
}

struct park_events {
    uint32_t *kinds, *aux;
    size_t n, max;
};

static void keep_park_event(const struct gt_gil_event *e, void *arg)
{
    struct park_events *pe = arg;
    if (pe->n < pe->max) {
        pe->kinds[pe->n] = e->kind;
        pe->aux[pe->n] = e->aux;
    }
    pe->n++;
}

static void park_events_of(int32_t tid, uint32_t *kinds, uint32_t *aux, size_t *n, size_t max)
{
    struct park_events pe = {kinds, aux, 0, max};
    each_gil_event(tid, keep_park_event, &pe);
    *n = pe.n;
}

static void test_park(void)
{
    struct parker p = {0};
    CHECK(gt_gilhook__can_park(), "the fake object's sem_wait and sem_post are hooked");
    CHECK(sem_init(&p.sem, 0, 0) == 0, "sem_init");
    CHECK(gt_registry__begin(0, NULL, NULL) == 0, "registry begin");
    gt_gilhook__set_park(1);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, parker_main, &p) == 0, "pthread_create");
    while (!__atomic_load_n(&p.parking, __ATOMIC_ACQUIRE))
        sched_yield();
    struct timespec nap = {0, 20000000}; /* whether it is inside the wait yet or not */
    nanosleep(&nap, NULL);
    int32_t me = (int32_t)syscall(SYS_gettid);
    CHECK(fake_unpark(&p.sem) == 0, "post");
    pthread_join(th, NULL);
    gt_gilhook__set_park(0);
    gt_registry__end();
    uint32_t kinds[8], aux[8];
    size_t n;
    park_events_of(p.tid, kinds, aux, &n, 8);
    CHECK(p.rc == 0 && n == 2 && kinds[0] == GT_PARK_BEGIN && kinds[1] == GT_PARK_END,
          "waiter: BEGIN, END (rc %d, %zu events)", p.rc, n);
    CHECK(n == 2 && aux[1] == (uint32_t)me, "END names the poster %d: %u", (int)me,
          n == 2 ? aux[1] : 0);
    park_events_of(me, kinds, aux, &n, 8);
    CHECK(n == 0, "the poster's stream has no events: %zu", n);
    gt_registry__release(NULL);
    sem_destroy(&p.sem);

    /* Off: no events. */
    CHECK(gt_registry__begin(0, NULL, NULL) == 0, "registry begin");
    sem_init(&p.sem, 0, 1);
    fake_park(&p.sem);
    gt_registry__end();
    park_events_of(me, kinds, aux, &n, 8);
    CHECK(n == 0, "park off: no events: %zu", n);
    gt_registry__release(NULL);
    sem_destroy(&p.sem);
}

/* A wait for another thread: the parking lot's wait entry {park_arg, addr, sema} on the
 * parker's own stack, addr the word after a (free-threaded, 32-byte) object header
 * whose ob_type is a registered type: WAIT_BEGIN, WAIT_END naming the poster. The same
 * entry on an object of another type: a park (contention). */
struct __attribute__((aligned(64))) fake_object { /* the word never starts a page */
    char head[24];
    const void *ob_type;
    uint64_t word; /* parked on */
};

struct entry_parker {
    sem_t *_Atomic sem; /* the parker's entry's, published once it is initialised */
    const struct fake_object *obj;
    int rc;
    int32_t tid;
};

/* Not instrumented, as CPython is not: ASan's detect_stack_use_after_return would put the
 * entry on a fake (heap) stack, where no parking-lot entry ever is. */
__attribute__((no_sanitize("address"))) static void *entry_parker_main(void *arg)
{
    struct entry_parker *p = arg;
    struct {
        void *park_arg;
        uintptr_t addr;
        sem_t sema;
    } wait = {NULL, (uintptr_t)&p->obj->word, {{0}}};
    p->tid = (int32_t)syscall(SYS_gettid);
    sem_init(&wait.sema, 0, 0);
    atomic_store_explicit(&p->sem, &wait.sema, memory_order_release);
    p->rc = fake_park(&wait.sema);
    sem_destroy(&wait.sema);
    return NULL;
}

static void test_park_waits(void)
{
    static const char lock_type, other_type;
    const void *types[] = {&lock_type};
    static const struct fake_object lock = {{0}, &lock_type, 0}, other = {{0}, &other_type, 0};
    const struct fake_object *objs[] = {&lock, &other};
    const uint32_t begin[] = {GT_PARK_WAIT_BEGIN, GT_PARK_BEGIN},
                   end[] = {GT_PARK_WAIT_END, GT_PARK_END};
    gt_gilhook__set_park_waits(types, 1);
    int32_t me = (int32_t)syscall(SYS_gettid);
    for (int k = 0; k < 2; k++) {
        struct entry_parker p = {NULL, objs[k], -1, 0};
        CHECK(gt_registry__begin(0, NULL, NULL) == 0, "registry begin");
        gt_gilhook__set_park(1);
        pthread_t th;
        CHECK(pthread_create(&th, NULL, entry_parker_main, &p) == 0, "pthread_create");
        sem_t *sem;
        while (!(sem = atomic_load_explicit(&p.sem, memory_order_acquire)))
            sched_yield();
        struct timespec nap = {0, 20000000};
        nanosleep(&nap, NULL);
        CHECK(fake_unpark(sem) == 0, "post");
        pthread_join(th, NULL);
        gt_gilhook__set_park(0);
        gt_registry__end();
        uint32_t kinds[8], aux[8];
        size_t n;
        park_events_of(p.tid, kinds, aux, &n, 8);
        CHECK(p.rc == 0 && n == 2 && kinds[0] == begin[k] && kinds[1] == end[k],
              "%s: %u, %u (rc %d, %zu events)", k ? "another type's" : "a lock's", n ? kinds[0] : 0,
              n > 1 ? kinds[1] : 0, p.rc, n);
        CHECK(n == 2 && aux[1] == (uint32_t)me, "END names the poster %d: %u", (int)me,
              n == 2 ? aux[1] : 0);
        gt_registry__release(NULL);
    }
    gt_gilhook__set_park_waits(NULL, 0);
}

int main(void)
{
    const char *why = NULL;
    int err = gt_gilhook__install((const void *)&fake_interp_symbol, &why);
    CHECK(err == 0, "install: %d %s", err, why ? why : "");
    if (err)
        goto out;
    static char me;
    struct gt_gil_addrs a;
    err = gt_gilhook__calibrate(calib_cb, &me, &a, &why);
    CHECK(err == 0, "calibrate: %d %s", err, why ? why : "");
    if (err)
        goto out;
    CHECK(a.mutex == (void *)&fake_gil.mutex && a.cond == (void *)&fake_gil.cond &&
              a.switch_cond == (void *)&fake_gil.switch_cond,
          "calibration found the fake GIL");
    gt_gilhook__set_addrs(&a);

    long n = timed_wait_in_time(NOTHING);
    CHECK(n == 1, "held throughout, no switch: a drop request (%ld)", n);
    n = timed_wait_in_time(SWITCH);
    CHECK(n == 0, "another thread took the GIL during the wait: no request (%ld)", n);
    n = timed_wait_in_time(UNLOCK);
    CHECK(n == 0, "the GIL was free when the wait ended: no request (%ld)", n);
    test_uncontended_takes(&me);
    test_fork_during_calibration(&me);
    test_stop_while_hooking(&me);
    test_park();
    test_park_waits();
out:
    printf("test_gilhook: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

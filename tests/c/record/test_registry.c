/* SPDX-License-Identifier: MIT */
/* Unit test of the thread registry (core/record/registry.c), its event budgets: every kind of
 * stream is capped, counts are exact under many threads, pushes past the cap take no lock;
 * and its block reserve: a pushing thread never maps memory itself while the reserve
 * lasts. The lock and mmap are observed by interposing pthread_mutex_lock and mmap in
 * this executable (the registry is linked statically, so its calls bind here). Plain C. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "registry.h"

#include "check.h"

/* Mutex acquisitions made by the calling thread. */
static __thread uint64_t locks_taken;

int pthread_mutex_lock(pthread_mutex_t *m)
{
    static int (*real)(pthread_mutex_t *);
    if (!real)
        real = (int (*)(pthread_mutex_t *))dlsym(RTLD_NEXT, "pthread_mutex_lock");
    locks_taken++;
    return real(m);
}

/* mmap calls made by the calling thread (the registry maps its block arenas so), and
 * arenas mapped by any thread (the refiller's included). */
static __thread uint64_t maps_made;
static atomic_ullong maps_made_all;
static void *_Atomic last_arena;

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    static void *(*real)(void *, size_t, int, int, int, off_t);
    if (!real)
        real = (void *(*)(void *, size_t, int, int, int, off_t))dlsym(RTLD_NEXT, "mmap");
    maps_made++;
    void *p = real(addr, len, prot, flags, fd, off);
    if (len == (size_t)2 << 20) { /* an arena, not a thread's stack */
        atomic_fetch_add(&maps_made_all, 1);
        last_arena = p;
    }
    return p;
}

/* pthread_create fails (EAGAIN, as under a pids limit) while this is set. */
static atomic_int fail_thread_create;

int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    static int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
    if (!real)
        real = (int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *))dlsym(
            RTLD_NEXT, "pthread_create");
    if (atomic_load(&fail_thread_create))
        return EAGAIN;
    return real(th, attr, fn, arg);
}

enum { NTHREADS = 8, PUSHES = 40000, PAST_CAP_PUSHES = 100000 };

struct worker {
    pthread_t th;
    pthread_barrier_t *start;
    int kind; /* enum gt_budget */
    uint64_t locks_past_cap; /* lock acquisitions while pushing past the cap */
    int capped;
    int bounded; /* a cap is set: push until refused */
    uint64_t pushed;
};

static struct gt_stream *stream_of(struct gt_thread *t, int kind)
{
    switch (kind) {
    case GT_BUDGET_CALLS:
        return &t->calls;
    case GT_BUDGET_GIL:
        return &t->gil;
    case GT_BUDGET_SCHED:
        return &t->sched;
    default:
        return &t->gil_check;
    }
}

static void push(struct gt_stream *s, int kind, uint64_t ts)
{
    if (kind == GT_BUDGET_CALLS)
        gt_stream__push_call(s, ts, 7, 1);
    else
        gt_stream__push(s, ts, 7, 1);
}

static void *work(void *arg)
{
    struct worker *w = arg;
    struct gt_thread *t = gt_thread_current();
    pthread_barrier_wait(w->start);
    if (!t)
        return NULL;
    struct gt_stream *s = stream_of(t, w->kind);
    /* Push until refused, so that no budget is left unused in a block. */
    for (w->pushed = 0; w->pushed < PUSHES || (w->bounded && !s->dropped); w->pushed++)
        push(s, w->kind, w->pushed + 1);
    /* Once this thread's stream has been refused, the budget is spent for good. */
    w->capped = s->dropped > 0;
    if (w->capped) {
        uint64_t before = locks_taken;
        for (uint64_t i = 0; i < PAST_CAP_PUSHES; i++)
            push(s, w->kind, i + 1);
        w->locks_past_cap = locks_taken - before;
    }
    return NULL;
}

static void run_kind(int kind, uint64_t cap)
{
    struct worker w[NTHREADS] = {{0}};
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, NTHREADS);
    CHECK(gt_registry__begin(cap, NULL, NULL) == 0, "begin");
    for (int i = 0; i < NTHREADS; i++) {
        w[i].start = &start;
        w[i].kind = kind;
        w[i].bounded = 1;
        pthread_create(&w[i].th, NULL, work, &w[i]);
    }
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(w[i].th, NULL);
    gt_registry__end();

    uint64_t kept = 0, kept_events = 0, dropped = 0, pushed = 0, others = 0;
    int capped = 0;
    for (struct gt_thread *t = gt_registry__threads(); t; t = t->next) {
        struct gt_stream *s = stream_of(t, kind);
        kept += gt_stream__count(s); /* the budget counts records (a call stream's time bases too) */
        kept_events += gt_stream__events(s);
        dropped += s->dropped;
        for (int k = GT_BUDGET_CALLS; k < GT_BUDGET_END; k++)
            if (k != kind)
                others += gt_stream__count(stream_of(t, k));
    }
    for (int i = 0; i < NTHREADS; i++) {
        pushed += w[i].pushed + (w[i].capped ? PAST_CAP_PUSHES : 0);
        capped += w[i].capped;
        CHECK(w[i].locks_past_cap == 0, "kind %d: %llu locks taken past the cap", kind,
              (unsigned long long)w[i].locks_past_cap);
    }
    CHECK(capped == NTHREADS, "kind %d: %d threads reached the cap", kind, capped);
    CHECK(kept == cap, "kind %d: kept %llu events, cap %llu", kind, (unsigned long long)kept,
          (unsigned long long)cap);
    CHECK(kept_events + dropped == pushed, "kind %d: kept %llu + dropped %llu != pushed %llu", kind,
          (unsigned long long)kept_events, (unsigned long long)dropped, (unsigned long long)pushed);
    CHECK(others == 0, "kind %d: other streams got %llu events", kind, (unsigned long long)others);
    gt_registry__release(NULL);
    pthread_barrier_destroy(&start);
}

/* Without a cap nothing is dropped. */
static void run_unlimited(void)
{
    struct worker w[NTHREADS] = {{0}};
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, NTHREADS);
    CHECK(gt_registry__begin(0, NULL, NULL) == 0, "begin");
    for (int i = 0; i < NTHREADS; i++) {
        w[i].start = &start;
        w[i].kind = GT_BUDGET_GIL;
        pthread_create(&w[i].th, NULL, work, &w[i]);
    }
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(w[i].th, NULL);
    gt_registry__end();
    uint64_t kept = 0, dropped = 0;
    for (struct gt_thread *t = gt_registry__threads(); t; t = t->next) {
        kept += gt_stream__count(&t->gil);
        dropped += t->gil.dropped;
    }
    CHECK(kept == (uint64_t)NTHREADS * PUSHES && dropped == 0, "kept %llu dropped %llu",
          (unsigned long long)kept, (unsigned long long)dropped);
    gt_registry__release(NULL);
    pthread_barrier_destroy(&start);
}

/* Open descriptors in thread `tid`'s table, or -1. */
static int fds_of(int32_t tid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/task/%d/fd", (int)tid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* The refiller leaves the process's fd table (an emptied copy of its own), so a
 * single-threaded traced program keeps the kernel's fdget() fast path on its fd
 * syscalls (churn1: os.fstat 1.14x -> 1.05x). Where the kernel has close_range. */
static void check_refiller_fd_table(void)
{
    int32_t helper = gt_registry__helper_tid();
    int n = fds_of(helper), mine = fds_of((int32_t)syscall(SYS_gettid));
    /* valgrind's close_range does not unshare the table (make test-valgrind). */
    if (getenv("GT_TEST_UNDER_VALGRIND") || syscall(SYS_close_range, ~0u - 1, ~0u, 0) != 0) {
        printf("test_registry: no close_range (%s): the refiller shares the fd table\n",
               strerror(errno));
        return;
    }
    CHECK(mine > 0 && n == 0, "the refiller holds no descriptor (%d; this thread %d)", n, mine);
}

/* The first generation of the process (empty pool): begin fills the reserve before
 * anything records, so a thread's first blocks (fewer than the reserve's 64) come
 * without a mapping on the pushing thread (faulting a 2 MiB arena inside a
 * push stopped the traced thread for 0.3-10 ms). Runs first: the pool must be empty. */
static void run_reserve(void)
{
    enum { BLOCKS = 40 };
    CHECK(gt_registry__helper_tid() == 0, "no refiller before the first generation");
    CHECK(gt_registry__begin(0, NULL, NULL) == 0, "begin");
    CHECK(gt_registry__helper_tid() > 0, "a refiller runs during the generation");
    check_refiller_fd_table();
    struct gt_thread *t = gt_thread_current();
    CHECK(t != NULL, "record");
    uint64_t before = maps_made;
    for (uint64_t i = 0; t && i < (uint64_t)BLOCKS * GT_BLOCK_EVENTS; i++)
        gt_stream__push_call(&t->calls, i + 1, 7, 1);
    CHECK(maps_made == before, "the pushing thread mapped %llu times",
          (unsigned long long)(maps_made - before));
    int32_t helper = gt_registry__helper_tid();
    CHECK(gt_registry__is_helper(helper) && !gt_registry__is_helper(0), "is_helper");
    gt_registry__end();
    CHECK(gt_registry__helper_tid() == 0, "the refiller stopped with the generation");
    /* Its last context switch can come after the join: still known as the helper. */
    CHECK(gt_registry__is_helper(helper), "the last generation's refiller is still known");
    CHECK(t && gt_stream__events(&t->calls) == (uint64_t)BLOCKS * GT_BLOCK_EVENTS && !t->calls.dropped,
          "kept %llu events", t ? (unsigned long long)gt_stream__events(&t->calls) : 0ull);
    gt_registry__release(NULL);
}

/* One generation pushing `n` call events on this thread, 1000 ticks apart from `t0`;
 * checks every one reads back, that every block starts with a time base, and that the
 * bases crossing 2^32 boundaries (mid-block too) are counted apart from the events. */
static void one_big_generation(uint64_t n, uint64_t t0)
{
    CHECK(gt_registry__begin(0, NULL, NULL) == 0, "begin");
    struct gt_thread *t = gt_thread_current();
    CHECK(t != NULL, "record");
    for (uint64_t i = 0; t && i < n; i++)
        gt_stream__push_call(&t->calls, t0 + i * 1000, (uint32_t)i, 1 + (uint32_t)(i & 1));
    gt_registry__end();
    uint64_t i = 0, bad = 0, bases = 0, unbased = 0, hi = 0;
    size_t nchunks = t ? gt_stream__chunks(&t->calls, NULL, 0) : 0;
    struct gt_chunk *c = calloc(nchunks ? nchunks : 1, sizeof(*c));
    if (t && c)
        gt_stream__chunks(&t->calls, c, nchunks);
    for (size_t k = 0; c && k < nchunks; k++) {
        const struct gt_call_rec *rec = c[k].data;
        unbased += !gt_call_rec__is_base(rec[0]);
        for (size_t j = 0; j < c[k].n; j++) {
            struct gt_call_event ev;
            if (!gt_call_rec__decode(rec[j], &hi, &ev)) {
                bases++;
                continue;
            }
            bad += ev.ts != t0 + i * 1000 || ev.func != (uint32_t)i || ev.kind != 1 + (i & 1);
            i++;
        }
    }
    free(c);
    CHECK(i == n && bad == 0, "read back %llu of %llu events, %llu wrong", (unsigned long long)i,
          (unsigned long long)n, (unsigned long long)bad);
    /* one base per block, plus one per 2^32 boundary crossed */
    uint64_t crossed = ((t0 + (n - 1) * 1000) >> 32) - (t0 >> 32);
    CHECK(t && unbased == 0 && bases == t->calls.bases && bases >= nchunks + crossed - 1 &&
              bases <= nchunks + crossed && gt_stream__events(&t->calls) == n,
          "%llu bases in %zu blocks, %llu crossings, %llu without a base first",
          (unsigned long long)bases, nchunks, (unsigned long long)crossed, (unsigned long long)unbased);
    gt_registry__release(NULL);
}

/* Between sessions the pool keeps 64 MiB and up to 256 MiB more as lazy (MADV_FREE)
 * memory: a second session as big as the first maps nothing new, and what it writes
 * into the revived memory reads back intact. */
/* Does this kernel take MADV_FREE (4.5 and later; not every sandbox)? */
static int kernel_has_madv_free(void)
{
#ifdef MADV_FREE
    void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    int ok = p != MAP_FAILED && madvise(p, 4096, MADV_FREE) == 0;
    if (p != MAP_FAILED)
        munmap(p, 4096);
    return ok;
#else
    return 0;
#endif
}

static void run_lazy_keep(void)
{
    const uint64_t n = 13000000; /* ~100 MiB of call records: more than the pool keeps */
    const int lazy_ok = kernel_has_madv_free();
    if (!lazy_ok)
        printf("test_registry: no MADV_FREE here: the lazy memory is not checked\n");
    unsigned long long first = atomic_load(&maps_made_all);
    one_big_generation(n, 0);
    first = atomic_load(&maps_made_all) - first;
    size_t pooled = 0, lazy = 0;
    gt_registry__memory(&pooled, &lazy);
    CHECK(pooled == (size_t)64 << 20, "the pool keeps 64 MiB (%zu)", pooled);
    /* (~50 arenas made, 32 kept in the pool: 18 lazy, 36 MiB) */
    CHECK(!lazy_ok || lazy >= (size_t)30 << 20, "the rest is kept lazily (%zu bytes)", lazy);
    unsigned long long before = atomic_load(&maps_made_all);
    one_big_generation(n, 0x5a5a5a5a5a5aull - 1000000000ull);
    /* (The refiller's reserve ahead of the pushes may end a few arenas further, at most
     * its 4 and one in flight; without the lazy memory it maps every arena beyond the
     * pool's 32: ~18.) */
    CHECK(!lazy_ok || atomic_load(&maps_made_all) - before <= 10, "the second session mapped "
          "%llu arenas (the first %llu)", atomic_load(&maps_made_all) - before, first);
    gt_registry__memory(&pooled, &lazy);
    CHECK(pooled == (size_t)64 << 20 && lazy <= (size_t)256 << 20, "kept %zu + lazy %zu", pooled, lazy);
}

/* Many threads alive at once, each making a few calls, under a budget a few full blocks
 * would take: each is granted 256 records at first (more as it keeps pushing), so none
 * is refused (with a block's 8190 records per grant, 300 threads asked for 2.5 M). */
struct small_worker {
    pthread_t th;
    pthread_barrier_t *all_alive;
    uint64_t kept, dropped;
};

static void *small_work(void *arg)
{
    struct small_worker *w = arg;
    struct gt_thread *t = gt_thread_current();
    for (uint64_t i = 0; t && i < 100; i++)
        gt_stream__push_call(&t->calls, i + 1, 7, 1);
    pthread_barrier_wait(w->all_alive); /* every stream holds its grant at once */
    return NULL;
}

static void run_many_small_streams(void)
{
    enum { NT = 300 };
    static struct small_worker w[NT];
    pthread_barrier_t all_alive;
    pthread_barrier_init(&all_alive, NULL, NT);
    CHECK(gt_registry__begin(1000000, NULL, NULL) == 0, "begin");
    int started = 0;
    for (int i = 0; i < NT; i++) {
        w[i].all_alive = &all_alive;
        started += pthread_create(&w[i].th, NULL, small_work, &w[i]) == 0;
    }
    CHECK(started == NT, "%d of %d threads started", started, NT);
    for (int i = 0; i < started; i++)
        pthread_join(w[i].th, NULL);
    gt_registry__end();
    uint64_t kept = 0, dropped = 0, streams = 0;
    for (struct gt_thread *t = gt_registry__threads(); t; t = t->next) {
        kept += gt_stream__events(&t->calls);
        dropped += t->calls.dropped;
        streams += t->calls.head != NULL;
    }
    CHECK(streams == NT && kept == 100ull * NT && dropped == 0,
          "%llu streams kept %llu events, dropped %llu", (unsigned long long)streams,
          (unsigned long long)kept, (unsigned long long)dropped);
    gt_registry__release(NULL);
    pthread_barrier_destroy(&all_alive);
}

/* A push that finds the pool empty (here no refiller could start, as under a pids limit)
 * maps an arena without faulting it in: its pages fault one at a time as the pushes
 * write them (about a microsecond each), never 512 at once inside one push (that
 * stopped the traced thread for 0.3-10 ms). Runs last: it empties the pool. */
static void run_push_maps_lazily(void)
{
    atomic_store(&fail_thread_create, 1);
    CHECK(gt_registry__begin(0, NULL, NULL) == 0, "begin");
    CHECK(gt_registry__helper_tid() == 0, "no refiller");
    struct gt_thread *t = gt_thread_current();
    CHECK(t != NULL, "record");
    unsigned long long before = atomic_load(&maps_made_all);
    uint64_t i = 0;
    /* The pool (64 MiB) and the lazy memory (up to 256 MiB) first: ~40 M records. */
    while (t && atomic_load(&maps_made_all) == before && i < 100000000ull)
        gt_stream__push_call(&t->calls, ++i, 7, 1);
    unsigned char vec[512];
    long resident = -1;
    void *a = atomic_load(&last_arena);
    if (a && atomic_load(&maps_made_all) > before && mincore(a, (size_t)2 << 20, vec) == 0) {
        resident = 0;
        for (int k = 0; k < 512; k++)
            resident += vec[k] & 1;
    }
    /* the 32 block headers the pool links, and the page the push wrote into */
    CHECK(resident >= 1 && resident <= 33, "the pushing thread's new arena: %ld of 512 pages "
          "resident after %llu pushes", resident, (unsigned long long)i);
    gt_registry__end();
    CHECK(t && gt_stream__events(&t->calls) == i && !t->calls.dropped, "kept every event");
    gt_registry__release(NULL);
    atomic_store(&fail_thread_create, 0);
}

/* A tid the kernel reuses within a session (a thread ends, a new one gets its tid):
 * the new thread gets a record of its own, with its own on_new call (its OS-state
 * watch) and fresh GIL decode state; the old record is marked superseded; lookups by
 * tid give the latest. The second thread claims the tid through the test-only
 * gt_thread__bind_as (real reuse needs a wrap of pid_max). */
#define REUSED_TID 4242
static atomic_int on_new_calls;
static struct gt_thread *_Atomic on_new_last;

static void count_new(struct gt_thread *t, void *ctx)
{
    (void)ctx;
    atomic_fetch_add(&on_new_calls, 1);
    atomic_store(&on_new_last, t);
}

struct bound_as {
    struct gt_thread *t;
    int held_at_bind;
};

static void *bind_reused(void *arg)
{
    struct bound_as *out = arg;
    struct gt_thread *t = gt_thread__bind_as(REUSED_TID);
    if (t) {
        out->held_at_bind = t->gil_held;
        gt_stream__push(&t->gil, 1, 1, 0);
        t->gil_held = 1; /* this thread ends holding the GIL as far as its record knows */
    }
    out->t = t;
    return NULL;
}

static void run_tid_reuse(void)
{
    atomic_store(&on_new_calls, 0);
    CHECK(gt_registry__begin(0, count_new, NULL) == 0, "begin");
    struct gt_thread *at_start = gt_registry__register(REUSED_TID, 0); /* as the tracer's start */
    CHECK(at_start && atomic_load(&on_new_calls) == 1, "registered");
    struct bound_as ra = {0}, rb = {0};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, bind_reused, &ra) == 0, "thread a");
    pthread_join(th, NULL);
    CHECK(ra.t == at_start, "the first thread binds the record registered for its tid");
    CHECK(atomic_load(&on_new_calls) == 1, "no new record for it");
    CHECK(pthread_create(&th, NULL, bind_reused, &rb) == 0, "thread b");
    pthread_join(th, NULL);
    struct gt_thread *a = ra.t, *b = rb.t;
    CHECK(rb.held_at_bind == 0, "fresh GIL decode state");
    CHECK(b && b != a, "the second thread of the tid has its own record (%p, %p)", (void *)a, (void *)b);
    CHECK(atomic_load(&on_new_calls) == 2 && atomic_load(&on_new_last) == b,
          "on_new called for it (its own OS-state watch): %d calls", atomic_load(&on_new_calls));
    CHECK(a && a->superseded && b && !b->superseded, "the first is marked ended");
    CHECK(gt_registry__register(REUSED_TID, 0) == b, "a lookup by tid gives the latest");
    CHECK(atomic_load(&on_new_calls) == 2, "that lookup registers nothing");
    gt_registry__end();
    int n = 0;
    for (struct gt_thread *t = gt_registry__threads(); t; t = t->next)
        n += t->tid == REUSED_TID;
    CHECK(n == 2, "two records of tid %d: %d", REUSED_TID, n);
    CHECK(a && gt_stream__count(&a->gil) == 1 && b && gt_stream__count(&b->gil) == 1,
          "each thread's events in its own record");
    gt_registry__release(NULL);
}

/* Keep last: past the budget a call stream folds its oldest events, in order, to make
 * room; the stream keeps the last ones (about the budget, a block more at most) and
 * decodes on its own, every event either folded or kept, once. */
static uint64_t fold_next, fold_bad;

static int fold_count(struct gt_stream *s, uint64_t ts, uint32_t func, uint32_t kind)
{
    (void)s;
    if (ts != fold_next || func != (uint32_t)(ts % 1000) || kind != GT_CALL)
        fold_bad++;
    fold_next = ts + 1;
    return 0;
}

/* A thread that starts once the budget is spent: its own last events. */
static void *late_pusher(void *arg)
{
    struct gt_thread *t = gt_thread_current();
    for (uint64_t i = 1; i <= 10000; i++)
        gt_stream__push_call(&t->calls, i, 1, GT_CALL);
    *(struct gt_thread **)arg = t;
    return NULL;
}

static void run_keep_last(void)
{
    enum { CAP = 5000, N = 200000 };
    fold_next = 1;
    fold_bad = 0;
    gt_registry__set_recycle(GT_BUDGET_CALLS, fold_count);
    CHECK(gt_registry__begin(CAP, NULL, NULL) == 0, "begin");
    struct gt_thread *t = gt_thread_current();
    CHECK(t != NULL, "thread");
    /* Timestamps cross a 2^32 boundary: the kept part needs its own time base. */
    uint64_t base = ((uint64_t)1 << 32) - 100000;
    fold_next += base;
    for (uint64_t i = 1; i <= N; i++)
        gt_stream__push_call(&t->calls, base + i, (uint32_t)((base + i) % 1000), GT_CALL);
    uint64_t bad_before = fold_bad;
    struct gt_thread *late = NULL;
    pthread_t th;
    CHECK(pthread_create(&th, NULL, late_pusher, &late) == 0, "late thread");
    pthread_join(th, NULL);
    fold_bad = bad_before; /* (its events are not the main thread's sequence) */
    gt_registry__end();
    CHECK(late && late->calls.folded + gt_stream__events(&late->calls) == 10000 &&
              gt_stream__events(&late->calls) >= 512 && gt_stream__events(&late->calls) <= 1024,
          "a thread past the budget keeps its last ~1024: kept %llu, folded %llu",
          late ? (unsigned long long)gt_stream__events(&late->calls) : 0ull,
          late ? (unsigned long long)late->calls.folded : 0ull);
    uint64_t kept = gt_stream__events(&t->calls);
    CHECK(fold_bad == 0, "folded in order: %llu bad", (unsigned long long)fold_bad);
    CHECK(t->calls.folded + kept == N, "folded %llu + kept %llu = %d",
          (unsigned long long)t->calls.folded, (unsigned long long)kept, N);
    CHECK(t->calls.dropped == 0, "none dropped: %llu", (unsigned long long)t->calls.dropped);
    CHECK(kept >= CAP / 2 && kept <= CAP + GT_BLOCK_EVENTS, "kept %llu of a budget of %d",
          (unsigned long long)kept, CAP);
    /* The kept events are the last ones, contiguous, decoded chunk by chunk. */
    struct gt_chunk ch[64];
    size_t nch = gt_stream__chunks(&t->calls, ch, 64);
    uint64_t next = base + N - kept + 1, bad = 0, seen = 0;
    for (size_t k = 0; k < nch && k < 64; k++) {
        const struct gt_call_rec *r = ch[k].data;
        uint64_t hi = 0;
        CHECK(gt_call_rec__is_base(r[0]), "chunk %zu starts with a time base", k);
        for (size_t j = 0; j < ch[k].n; j++) {
            struct gt_call_event e;
            if (!gt_call_rec__decode(r[j], &hi, &e))
                continue;
            bad += e.ts != next++;
            seen++;
        }
    }
    CHECK(bad == 0 && seen == kept, "kept are the last %llu in order (%llu seen, %llu bad)",
          (unsigned long long)kept, (unsigned long long)seen, (unsigned long long)bad);
    printf("keep last: kept %llu, folded %llu, budget %d\n", (unsigned long long)kept,
           (unsigned long long)t->calls.folded, CAP);
    gt_registry__release(NULL);
    gt_registry__set_recycle(GT_BUDGET_CALLS, NULL);
}

/* A child's checkpoints read a live stream while its producer pushes: every event once,
 * in order, never one half written, the tail block's included (published with release,
 * read with acquire: what ThreadSanitizer builds check too), the call stream's time bases
 * carried from one read to the next. */
enum { LIVE_N = 300000 };
#define LIVE_BASE (((uint64_t)1 << 32) - LIVE_N / 2) /* (calls cross 2^32: a new time base) */
static struct gt_thread *_Atomic live_thread;
static atomic_int live_done;

static void *live_pusher(void *arg)
{
    (void)arg;
    struct gt_thread *t = gt_thread_current();
    atomic_store(&live_thread, t);
    for (uint64_t i = 1; i <= LIVE_N; i++) {
        gt_stream__push(&t->gil, i, (uint32_t)i, (uint32_t)~i);
        gt_stream__push_call(&t->calls, LIVE_BASE + i, (uint32_t)(i % 1000), GT_CALL);
        if (i % 512 == 0) /* (reads land anywhere in a block, many times) */
            nanosleep(&(struct timespec){0, 20000}, NULL);
    }
    atomic_store(&live_done, 1);
    return NULL;
}

struct live_read {
    struct gt_thread *t;
    struct gt_stream_pos pos[2];
    uint64_t gil_next, call_next, call_hi, bad, reads, bound_bad;
};

static void live_read_cb(struct gt_thread *t, void *ctx)
{
    struct live_read *r = ctx;
    if (t != r->t)
        return;
    struct gt_chunk ch[64];
    struct gt_stream_pos next;
    struct gt_stream *st[2] = {&t->gil, &t->calls};
    for (int k = 0; k < 2; k++) {
        size_t most = gt_stream__closed_chunks(st[k], r->pos[k].blocks, NULL, 0) + 1;
        size_t n = gt_stream__live_chunks(st[k], &r->pos[k], ch, 64, &next);
        r->bound_bad += n > most;
        for (size_t c = 0; c < n && c < 64; c++) {
            for (size_t j = 0; j < ch[c].n; j++) {
                if (k == 0) {
                    const uint32_t *e = (const uint32_t *)ch[c].data + 4 * j;
                    uint64_t ts = *(const uint64_t *)e;
                    r->bad += ts != r->gil_next || e[2] != (uint32_t)ts || e[3] != (uint32_t)~ts;
                    r->gil_next = ts + 1;
                } else {
                    struct gt_call_event e;
                    if (!gt_call_rec__decode(((const struct gt_call_rec *)ch[c].data)[j],
                                             &r->call_hi, &e))
                        continue;
                    r->bad += e.ts != r->call_next || e.func != (uint32_t)((e.ts - LIVE_BASE) % 1000);
                    r->call_next = e.ts + 1;
                }
            }
        }
        r->pos[k] = next;
    }
    r->reads++;
}

static void run_live_chunks(void)
{
    atomic_store(&live_thread, NULL);
    atomic_store(&live_done, 0);
    CHECK(gt_registry__begin(0, NULL, NULL) == 0, "begin");
    pthread_t th;
    CHECK(pthread_create(&th, NULL, live_pusher, NULL) == 0, "pusher");
    while (!atomic_load(&live_thread))
        sched_yield();
    struct live_read r = {.t = atomic_load(&live_thread), .gil_next = 1,
                          .call_next = LIVE_BASE + 1};
    while (!atomic_load(&live_done)) {
        r.bad += gt_registry__each_locked(live_read_cb, &r) != 0;
        sched_yield();
    }
    pthread_join(th, NULL);
    CHECK(gt_registry__each_locked(live_read_cb, &r) == 0, "last read"); /* (all published) */
    CHECK(r.bad == 0, "%llu events out of order or torn", (unsigned long long)r.bad);
    CHECK(r.bound_bad == 0, "more chunks than closed_chunks + 1");
    CHECK(r.gil_next == LIVE_N + 1, "every GIL event read once: up to %llu of %d",
          (unsigned long long)r.gil_next - 1, LIVE_N);
    CHECK(r.call_next == LIVE_BASE + LIVE_N + 1, "every call read once: %llu short",
          (unsigned long long)(LIVE_BASE + LIVE_N + 1 - r.call_next));
    printf("live chunks: %llu reads\n", (unsigned long long)r.reads);
    gt_registry__end();
    gt_registry__release(NULL);
}

int main(void)
{
    run_tid_reuse();
    run_reserve();
    run_lazy_keep();
    /* Caps well below NTHREADS * PUSHES, one not a multiple of the 256-event share. */
    for (int kind = GT_BUDGET_CALLS; kind < GT_BUDGET_END; kind++)
        run_kind(kind, kind == GT_BUDGET_GIL ? 1000 : 50001);
    run_unlimited();
    run_many_small_streams();
    run_push_maps_lazily();
    run_keep_last();
    run_live_chunks();
    printf("test_registry: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

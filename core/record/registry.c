/* SPDX-License-Identifier: MIT */
/* Thread registry and block pool (see registry.h). */
#define _GNU_SOURCE
#include "registry.h"

#include "fd_table.h"
#include "gt_assert.h"
#include "gt_clock.h"

#include <assert.h>
#include <errno.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "gt_trace.h"

atomic_int gt_recording;
_Atomic uint64_t gt_registry_gen;
__thread struct gt_tls gt_tls GT_TLS_HOT;

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t last_gen;
static struct gt_thread *threads;     /* records of the current/last generation */
/* Records by tid, newest first in each chain: a session of many short threads finds
 * a tid's record without walking them all (30 000 threads: 45 s of list walks). */
#define TID_BUCKETS 4096
static struct gt_thread *by_tid[TID_BUCKETS];
static struct gt_block *pool;         /* free blocks */
static size_t pool_size;
static gt_thread_cb on_new_thread;
static void *on_new_ctx;
static int account_on_bind; /* gt_registry__set_account */
int gt_account_ns;
/* Per-kind event budgets (enum gt_budget), guarded by reg_lock. `budget_spent` is set
 * once a budget is gone, so pushes past the cap are refused without the lock. */
static uint64_t budget_left[GT_BUDGET_END]; /* by enum gt_budget; [GT_BUDGET_NONE] unused */
/* gt_registry__share_budget: the counters are another process's too, so they change
 * under reg_lock as well (atomics); NULL: budget_left. */
static uint64_t *budget_shared;
static int budget_limited;
static atomic_int budget_spent[GT_BUDGET_END];
static _Atomic(gt_overflow_fn) overflow_fn[GT_BUDGET_END];
static void (*overflow_release[GT_BUDGET_END])(void *);
static _Atomic(gt_overflow_fn) recycle_fn[GT_BUDGET_END];
/* A budgeted stream's grants (records): at least MIN_SHARE, at most a GRANT_PART-th of
 * the budget left; a stream that keeps its last events folds a FOLD_PART-th of its
 * grants at a time. */
#define MIN_SHARE 256
#define GRANT_PART 16
#define FOLD_PART 8

/* Blocks are carved out of 2 MiB arenas of small pages. (Transparent huge pages: one
 * fault per arena, 0.1 ms where the kernel recycles a huge page, but 2.3-4.3 ms for
 * memory the hypervisor had not backed yet, against 0.7 ms for 512 small faults: on a
 * fresh VM the refiller fell behind a tight loop and the traced thread faulted arenas
 * itself, a 5 ms stall; bench/gap_bench.py.) Between sessions the pool keeps POOL_KEEP
 * blocks (64 MiB); up to LAZY_KEEP more arenas (256 MiB) are kept as MADV_FREE memory,
 * which the kernel takes back when it needs it and which the next session reuses
 * without a fault while it is still there (the refiller's CPU time on a big trace's
 * later sessions: 80-90 ms -> 0 on 6M events); the rest is unmapped. */
#define ARENA_BYTES (2u << 20)
#define BLOCKS_PER_ARENA (ARENA_BYTES / GT_BLOCK_BYTES)
#define POOL_KEEP 1024
#define LAZY_KEEP 128
/* One write per page of an arena (the smallest page size: a larger page is written more
 * than once, which is harmless). */
#define TOUCH_STRIDE 4096

struct arena {
    struct arena *next;
    void *base;
};
static struct arena *arenas;      /* their blocks are in the pool or in use */
static size_t narenas;
static struct arena *lazy_arenas; /* MADV_FREE'd, no block in the pool; reg_lock */
static size_t nlazy;

/* Touch every page of an arena: faults in what is not there (a new mapping, or lazy
 * memory the kernel took back); on lazy memory still there it only marks it in use. */
static void arena_touch(struct arena *a)
{
    for (size_t off = 0; off < ARENA_BYTES; off += TOUCH_STRIDE)
        ((volatile char *)a->base)[off] = 0;
}

/* A lazy arena to use again, or NULL. reg_lock held. */
static struct arena *lazy_pop(void)
{
    GT_ASSERT_HELD(&reg_lock);
    struct arena *a = lazy_arenas;
    if (a) {
        lazy_arenas = a->next;
        a->next = NULL;
        nlazy--;
    }
    return a;
}

/* Map a 2 MiB arena; with `populate`, fault it in (512 pages). Takes no lock: faulting
 * takes about a millisecond, so the refiller does it beside the traced threads. */
static struct arena *arena_map(int populate)
{
    char *base = mmap(NULL, ARENA_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED)
        return NULL;
    struct arena *a = malloc(sizeof(*a));
    if (!a) {
        munmap(base, ARENA_BYTES);
        return NULL;
    }
#ifdef MADV_NOHUGEPAGE
    madvise(base, ARENA_BYTES, MADV_NOHUGEPAGE);
#endif
    a->base = base;
    a->next = NULL;
    if (populate)
        arena_touch(a);
    return a;
}

/* Hand a mapped arena's blocks to the pool. reg_lock held. */
static void arena_link(struct arena *a)
{
    GT_ASSERT_HELD(&reg_lock);
    a->next = arenas;
    arenas = a;
    narenas++;
    for (size_t i = 0; i < BLOCKS_PER_ARENA; i++) {
        struct gt_block *b = (struct gt_block *)((char *)a->base + i * GT_BLOCK_BYTES);
        b->next = pool;
        pool = b;
        pool_size++;
    }
}

/* An arena ready for blocks: `lazy` (from lazy_pop(), or NULL), else a new one; NULL
 * when out of memory. With `populate` its pages are faulted in now (lazy memory the
 * kernel took back, or a new mapping); without, each page faults when a push first
 * writes it (about a microsecond each: no stall) and a lazy page still there is simply
 * written again. Takes no lock (see arena_map). */
static struct arena *arena_ready(struct arena *lazy, int populate)
{
    if (!lazy)
        return arena_map(populate);
    if (populate)
        arena_touch(lazy);
    return lazy;
}

/* reg_lock held. */
static int arena_add(int populate)
{
    GT_ASSERT_HELD(&reg_lock);
    struct arena *a = arena_ready(lazy_pop(), populate);
    if (!a)
        return -ENOMEM;
    arena_link(a);
    return 0;
}

/* The block reserve. Faulting a whole arena in on a traced thread, inside a push,
 * stopped it for 0.3-10 ms each time it crossed 2 MiB of events. While a
 * generation is active a helper thread keeps free blocks ahead: a push that takes the
 * pool below RESERVE_LOW wakes the refiller, which maps and faults in arenas outside
 * reg_lock, one at a time, until the pool is back at RESERVE_LOW. It makes one in
 * ~0.7 ms; half an arena is 1-2 ms of a tight loop of calls. Should a push still find
 * the pool empty (the refiller woke late on a busy machine, or could not start: e.g. a
 * pids limit), it maps an arena without faulting it in: its pages then fault one by
 * one as they are written, about a microsecond each, never a stall.
 * A bigger reserve only made a process's first session fault memory it did not use,
 * which later sessions find in the pool (first / later session, CPU time on fib: 1.26x
 * with 6-8 arenas ahead, 1.12x with 3-4). Begin faults RESERVE_START blocks in itself,
 * before anything records. */
#define RESERVE_START (2 * BLOCKS_PER_ARENA)
#define RESERVE_LOW (BLOCKS_PER_ARENA / 2)

static struct {
    pthread_t thread;
    pthread_cond_t wake; /* with reg_lock: the pool went low, the tid is known, or stop */
    int running;         /* reg_lock: the thread exists and must be joined */
    int stop;            /* reg_lock */
    int failed;          /* reg_lock: out of memory, stop trying this generation */
    _Atomic int32_t tid; /* the refiller's kernel tid, 0 when none */
    /* The previous generation's refiller: joined, but its last context switch can come
     * after the join (the kernel clears the tid before the thread's final schedule()). */
    _Atomic int32_t prev_tid;
} refill = {.wake = PTHREAD_COND_INITIALIZER};

/* 0: not tried; 1: the process is registered for membarrier(PRIVATE_EXPEDITED); -1: the
 * kernel refused. Registered once per process (gt_registry__membarrier_register): with
 * more than one thread the registration waits for an RCU grace period (10-20 ms here),
 * which no traced thread should wait for. */
static _Atomic int membarrier_state;

int gt_registry__membarrier_ready(void)
{
    return atomic_load(&membarrier_state) == 1;
}

void gt_registry__membarrier_register(void)
{
    if (atomic_load(&membarrier_state) != 0)
        return;
    int ok = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
    atomic_store(&membarrier_state, ok ? 1 : -1);
}

static void *refill_main(void *arg)
{
    (void)arg;
    /* It uses no fd: a table of its own keeps a single-threaded traced program on the
     * kernel's fdget() fast path (fd_table.h). Before the tid: begin returns with it done. */
    (void)gt_fd_table__leave();
    pthread_mutex_lock(&reg_lock);
    atomic_store(&refill.tid, (int32_t)syscall(SYS_gettid));
    pthread_cond_broadcast(&refill.wake); /* gt_registry__begin waits for the tid */
    /* After the tid: begin does not wait for it. The pool holds RESERVE_START meanwhile;
     * the loop below looks at it again before it sleeps. */
    pthread_mutex_unlock(&reg_lock);
    gt_registry__membarrier_register(); /* for a caller that did not register first */
    pthread_mutex_lock(&reg_lock);
    while (!refill.stop) {
        if (refill.failed || pool_size >= RESERVE_LOW) {
            pthread_cond_wait(&refill.wake, &reg_lock);
            continue;
        }
        while (!refill.stop && pool_size < RESERVE_LOW) {
            struct arena *a = lazy_pop();
            pthread_mutex_unlock(&reg_lock);
            a = arena_ready(a, 1);
            pthread_mutex_lock(&reg_lock);
            if (!a) {
                refill.failed = 1;
                break;
            }
            arena_link(a);
        }
    }
    pthread_mutex_unlock(&reg_lock);
    return NULL;
}

/* Fill the pool to RESERVE_START now (before the generation records) and start the
 * refiller. Without the thread, pushes map arenas themselves as before. reg_lock held. */
static void refill_start_locked(void)
{
    GT_ASSERT_HELD(&reg_lock);
    sigset_t all, old;
    while (pool_size < RESERVE_START && arena_add(1) == 0)
        ;
    refill.stop = refill.failed = 0;
    atomic_store(&refill.tid, 0);
    /* The refiller must never take the process's signals (e.g. SIGINT for Python). */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    refill.running = pthread_create(&refill.thread, NULL, refill_main, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!refill.running)
        return;
    pthread_setname_np(refill.thread, "gt-blocks");
    /* Its tid is known before anything records (the bpf probe skips its events). */
    while (atomic_load(&refill.tid) == 0)
        pthread_cond_wait(&refill.wake, &reg_lock);
}

static void refill_stop(void)
{
    pthread_mutex_lock(&reg_lock);
    int running = refill.running;
    refill.running = 0;
    refill.stop = 1;
    pthread_cond_broadcast(&refill.wake);
    pthread_mutex_unlock(&reg_lock);
    if (running)
        pthread_join(refill.thread, NULL);
    int32_t tid = atomic_exchange(&refill.tid, 0);
    if (tid)
        atomic_store(&refill.prev_tid, tid);
}

int32_t gt_registry__helper_tid(void)
{
    return atomic_load(&refill.tid);
}

int gt_registry__is_helper(int32_t tid)
{
    return tid != 0 && (tid == atomic_load(&refill.tid) || tid == atomic_load(&refill.prev_tid));
}

static struct gt_block *block_get(void)
{
    if (!pool && arena_add(0) < 0)
        return NULL;
    struct gt_block *b = pool;
    pool = b->next;
    pool_size--;
    if (pool_size < RESERVE_LOW && refill.running)
        pthread_cond_signal(&refill.wake); /* no syscall while it is busy filling */
    b->next = NULL;
    b->n = 0;
    return b;
}

static void block_put_list(struct gt_block *b)
{
    while (b) {
        struct gt_block *next = b->next;
        b->next = pool;
        pool = b;
        pool_size++;
        b = next;
    }
}

/* With no session active every block is in the pool: keep POOL_KEEP blocks' arenas,
 * make up to LAZY_KEEP more lazy, unmap the rest, and rebuild the pool. reg_lock held. */
static void pool_trim(void)
{
    GT_ASSERT_HELD(&reg_lock);
    size_t keep = POOL_KEEP / BLOCKS_PER_ARENA;
    if (narenas <= keep)
        return;
    struct arena **pp = &arenas;
    for (size_t i = 0; i < keep && *pp; i++)
        pp = &(*pp)->next;
    struct arena *drop = *pp;
    *pp = NULL;
    while (drop) {
        struct arena *next = drop->next;
        narenas--;
#ifdef MADV_FREE
        if (nlazy < LAZY_KEEP && madvise(drop->base, ARENA_BYTES, MADV_FREE) == 0) {
            drop->next = lazy_arenas;
            lazy_arenas = drop;
            nlazy++;
            drop = next;
            continue;
        }
#endif
        munmap(drop->base, ARENA_BYTES);
        free(drop);
        drop = next;
    }
    pool = NULL;
    pool_size = 0;
    for (struct arena *a = arenas; a; a = a->next)
        for (size_t i = 0; i < BLOCKS_PER_ARENA; i++) {
            struct gt_block *b = (struct gt_block *)((char *)a->base + i * GT_BLOCK_BYTES);
            b->next = pool;
            pool = b;
            pool_size++;
        }
}

static char *block_events(struct gt_block *b)
{
    return (char *)b + GT_BLOCK_HEADER;
}

void gt_registry__set_overflow(enum gt_budget budget, gt_overflow_fn fn, void (*release)(void *))
{
    if (budget > GT_BUDGET_NONE && budget < GT_BUDGET_END) {
        pthread_mutex_lock(&reg_lock);
        overflow_release[budget] = release;
        pthread_mutex_unlock(&reg_lock);
        atomic_store(&overflow_fn[budget], fn);
    }
}

void gt_registry__share_budget(uint64_t *left)
{
    pthread_mutex_lock(&reg_lock);
    budget_shared = left;
    pthread_mutex_unlock(&reg_lock);
}

void gt_registry__set_recycle(enum gt_budget budget, gt_overflow_fn fold)
{
    if (budget > GT_BUDGET_NONE && budget < GT_BUDGET_END)
        atomic_store(&recycle_fn[budget], fold);
}

/* What a fold did to the stream's oldest blocks: where its kept records now start, and
 * how many records (time bases among them) left it. */
struct fold_done {
    struct gt_block *head;
    size_t skip;
    uint64_t records, bases;
};

/* Folds up to `want` of the oldest records of the stream's closed blocks into `fold`.
 * Without reg_lock: they are the producer's own (the caller), which nothing else writes
 * or frees while the session records; fold_commit() then unlinks them under the lock. */
static void fold_run(struct gt_stream *s, size_t want, gt_overflow_fn fold, struct fold_done *d)
{
    struct gt_block *h = s->head;
    size_t i = s->head_skip;
    d->records = d->bases = 0;
    while (want && h && h != s->tail) {
        size_t from = i, bases = 0;
        if (s->rec_size == sizeof(struct gt_call_rec)) {
            struct gt_call_rec *r = (struct gt_call_rec *)block_events(h);
            uint64_t hi = 0;
            struct gt_call_event e;
            for (; i < h->n && want; i++, want--) {
                if (gt_call_rec__decode(r[i], &hi, &e))
                    fold(s, e.ts, e.func, e.kind);
                else
                    bases++;
            }
            if (i < h->n && i > from) {
                /* The kept part must decode on its own: the last record folded becomes
                 * a time base (records are never folded twice). */
                r[--i] = gt_call_rec__base((uint32_t)(hi >> 32));
                bases--;
            }
        } else {
            const uint32_t *r = (const uint32_t *)block_events(h);
            for (; i < h->n && want; i++, want--)
                fold(s, *(const uint64_t *)(r + 4 * i), r[4 * i + 2], r[4 * i + 3]);
        }
        d->records += i - from;
        d->bases += bases;
        if (i < h->n)
            break;
        h = h->next;
        i = 0;
    }
    d->head = h;
    d->skip = i;
}

/* The folded records leave the stream, emptied blocks go back to the pool; returns how
 * many records it holds less. reg_lock held (the live meter and a child's checkpoints
 * read the block list under it). */
static size_t fold_commit(struct gt_stream *s, const struct fold_done *d)
{
    GT_ASSERT_HELD(&reg_lock);
    while (s->head != d->head) {
        struct gt_block *b = s->head;
        s->head = b->next;
        b->next = NULL;
        block_put_list(b);
    }
    s->head_skip = d->skip;
    s->count -= d->records;
    s->bases -= d->bases;
    s->folded += d->records - d->bases;
    return (size_t)d->records;
}

/* Keep last, past the budget: room for records more in the tail (a fresh block when
 * the tail has no room or is the only block), as many of the oldest folded first; a
 * stream with no block yet gets one, for its last KEEP_MIN records. 0, -ENOSPC (no
 * recycling), -ESRCH (no session) or -ENOMEM. Called without reg_lock: the fold runs
 * outside it, so that other threads' grants do not wait for this one's folding. */
#define KEEP_MIN 1024
static int stream_recycle(struct gt_stream *s, size_t cap)
{
    gt_overflow_fn fold = s->budget > GT_BUDGET_NONE && s->budget < GT_BUDGET_END
                              ? atomic_load_explicit(&recycle_fn[s->budget], memory_order_relaxed)
                              : NULL;
    if (!fold || (s->tail && !s->lim))
        return -ENOSPC;
    /* Folding an eighth of what the stream was granted at a time (at least MIN_SHARE
     * records, at most a block) takes the lock twice per that many pushes. */
    size_t q = s->granted / FOLD_PART < MIN_SHARE   ? MIN_SHARE
               : s->granted / FOLD_PART > cap ? cap
                                              : (size_t)(s->granted / FOLD_PART);
    int err = 0;
    pthread_mutex_lock(&reg_lock);
    if (atomic_load(&gt_registry_gen) == 0) {
        err = -ESRCH;
    } else if (!s->tail) {
        /* A thread that had no share when the budget ran out keeps its last KEEP_MIN. */
        struct gt_block *b = block_get();
        if (b) {
            s->head = s->tail = b;
            s->cur = block_events(b);
            s->lim = block_events(b) + (KEEP_MIN < cap ? KEEP_MIN : cap) * s->rec_size;
            s->ts_hi = UINT32_MAX;
        }
        err = b ? 1 : -ENOMEM;
    } else if (s->head == s->tail ||
               (size_t)((char *)s->lim - block_events(s->tail)) / s->rec_size + q > cap) {
        struct gt_block *b = block_get();
        if (b) {
            s->tail->n = (size_t)((char *)s->cur - block_events(s->tail)) / s->rec_size;
            s->count += s->tail->n;
            s->tail->next = b;
            s->tail = b;
            s->cur = s->lim = block_events(b);
            s->ts_hi = UINT32_MAX; /* a call stream's block starts with a time base */
        }
        err = b ? 0 : -ENOMEM;
    }
    pthread_mutex_unlock(&reg_lock);
    if (err)
        return err < 0 ? err : 0;
    struct fold_done d;
    fold_run(s, q, fold, &d);
    pthread_mutex_lock(&reg_lock);
    size_t freed = fold_commit(s, &d);
    pthread_mutex_unlock(&reg_lock);
    /* As many records as were folded: the stream holds as many as before. */
    s->lim = (char *)s->lim + (freed ? freed : q) * s->rec_size;
    return 0;
}

static void stream_refused(struct gt_stream *s, int err, uint64_t ts, uint32_t a, uint32_t b)
{
    if (!s->refused_at)
        s->refused_at = ts;
    /* Past the budget (for good: budgets only shrink) the sink may take it; out of blocks
     * (a later push may succeed: its events would come out of order) or after the
     * session, nobody. */
    if (err == -ENOSPC && s->budget > GT_BUDGET_NONE && s->budget < GT_BUDGET_END) {
        gt_overflow_fn fn = atomic_load_explicit(&overflow_fn[s->budget], memory_order_relaxed);
        if (fn && fn(s, ts, a, b) == 0)
            return;
    }
    s->dropped++;
}

static int stream_grow(struct gt_stream *s)
{
    int err = 0;
    /* Refusals are decided without the lock: past the cap every push lands here. */
    if (atomic_load_explicit(&gt_registry_gen, memory_order_relaxed) == 0)
        return -ESRCH;
    const size_t cap = (GT_BLOCK_BYTES - GT_BLOCK_HEADER) / s->rec_size;
    if (s->budget != GT_BUDGET_NONE &&
        atomic_load_explicit(&budget_spent[s->budget], memory_order_relaxed)) {
        if (!atomic_load_explicit(&recycle_fn[s->budget], memory_order_relaxed))
            return -ENOSPC;
        return stream_recycle(s, cap);
    }
    pthread_mutex_lock(&reg_lock);
    if (atomic_load(&gt_registry_gen) == 0) { /* the session ended */
        err = -ESRCH;
        goto cleanup;
    }
    /* Records the tail block still has room for beyond what was granted: a grant goes
     * there first (no new block; a call stream needs no new time base). */
    size_t tail_free = s->tail && s->lim ? cap - (size_t)((char *)s->lim - block_events(s->tail)) / s->rec_size : 0;
    size_t room = tail_free ? tail_free : cap;
    uint64_t *left = s->budget != GT_BUDGET_NONE && budget_limited
                         ? &(budget_shared ? budget_shared : budget_left)[s->budget] : NULL;
    size_t want = room;
    uint64_t have = left ? __atomic_load_n(left, __ATOMIC_ACQUIRE) : 0;
    while (left) {
        if (have == 0) {
            atomic_store(&budget_spent[s->budget], 1);
            err = -EAGAIN; /* keep last: recycle, below, without the lock */
            goto cleanup;
        }
        /* Grant as much as the stream was granted so far (MIN_SHARE at first: a thread
         * that makes a few calls takes little), and at most a GRANT_PART-th of what is
         * left (at least MIN_SHARE), so that threads that stop early, or a thousand alive
         * at once, cannot strand much of the budget in their blocks. */
        uint64_t share = s->granted < MIN_SHARE ? MIN_SHARE : s->granted;
        if (share > have / GRANT_PART)
            share = have / GRANT_PART < MIN_SHARE ? MIN_SHARE : have / GRANT_PART;
        room = want;
        if (share < room)
            room = (size_t)share;
        if (have < room)
            room = (size_t)have;
        if (__atomic_compare_exchange_n(left, &have, have - room, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE))
            break;
    }
    if (tail_free) {
        s->lim = (char *)s->lim + room * s->rec_size;
    } else {
        struct gt_block *b = block_get();
        if (!b) {
            if (left) /* (the grant goes back) */
                __atomic_add_fetch(left, room, __ATOMIC_ACQ_REL);
            err = -ENOMEM;
            goto cleanup;
        }
        if (s->tail) {
            s->tail->n = (size_t)((char *)s->cur - block_events(s->tail)) / s->rec_size;
            s->count += s->tail->n;
            s->tail->next = b;
        } else {
            s->head = b;
        }
        s->tail = b;
        s->cur = block_events(b);
        s->lim = block_events(b) + room * s->rec_size; /* a grant may be less than a block */
        s->ts_hi = UINT32_MAX; /* a call stream's block starts with a time base */
    }
    if (left) {
        s->granted += room;
        if (have == room)
            atomic_store(&budget_spent[s->budget], 1);
    }
cleanup:
    pthread_mutex_unlock(&reg_lock);
    return err == -EAGAIN ? stream_recycle(s, cap) : err;
}

static void stream_close(struct gt_stream *s)
{
    if (s->tail && s->cur) {
        s->tail->n = (size_t)((char *)s->cur - block_events(s->tail)) / s->rec_size;
        s->count += s->tail->n;
    }
    /* Further pushes must grow (and will be refused once the generation ended). */
    s->cur = s->lim = NULL;
}

uint64_t gt_stream__count(const struct gt_stream *s)
{
    return s->count;
}

void gt_stream__push_call_slow(struct gt_stream *s, uint64_t ts, uint32_t word)
{
    const uint32_t hi = (uint32_t)(ts >> 32);
    for (;;) {
        int err;
        if (s->cur == s->lim && (err = stream_grow(s)) < 0) {
            gt_stream__refused(s, err, ts, word >> 4, (word & 7u) | ((word & 8u) ? GT_CALL_OPEN_AT_START : 0u));
            return;
        }
        struct gt_call_rec *p = s->cur;
        if (hi != s->ts_hi) { /* (UINT32_MAX, a fresh block's, is no timestamp's) */
            *p = gt_call_rec__base(hi);
            __atomic_store_n(&s->cur, (void *)(p + 1), __ATOMIC_RELEASE); /* (published) */
            s->ts_hi = hi;
            s->bases++;
            continue;
        }
        *p = (struct gt_call_rec){(uint32_t)ts, word};
        __atomic_store_n(&s->cur, (void *)(p + 1), __ATOMIC_RELEASE);
        return;
    }
}

/* The stream's non-empty blocks as chunks, the first `skip` of them left out; only the
 * closed ones (a next block linked) when `closed`. Returns how many there are. */
static size_t stream_chunks(const struct gt_stream *s, int closed, size_t skip,
                            struct gt_chunk *out, size_t max)
{
    size_t k = 0;
    for (struct gt_block *b = s->head; b && (!closed || b->next); b = b->next) {
        if (b->n == 0)
            continue;
        if (skip) {
            skip--;
            continue;
        }
        size_t from = b == s->head ? s->head_skip : 0; /* folded (keep last) */
        if (from >= b->n)
            continue;
        if (k < max) {
            out[k].data = block_events(b) + from * s->rec_size;
            out[k].n = b->n - from;
        }
        k++;
    }
    return k;
}

size_t gt_stream__chunks(const struct gt_stream *s, struct gt_chunk *out, size_t max)
{
    return stream_chunks(s, 0, 0, out, max);
}

size_t gt_stream__closed_chunks(const struct gt_stream *s, size_t skip, struct gt_chunk *out,
                                size_t max)
{
    GT_ASSERT_HELD(&reg_lock);
    /* A block is closed (its n final, its events no longer written) once the next one
     * is linked, which grow does under reg_lock, as the caller holds it. */
    return stream_chunks(s, 1, skip, out, max);
}

/* Records of the tail block `b` its producer has published (0 when `cur` is elsewhere,
 * e.g. NULL once closed). reg_lock held: the tail and its block do not change. */
static size_t tail_published(const struct gt_stream *s, struct gt_block *b)
{
    GT_ASSERT_HELD(&reg_lock);
    char *cur = __atomic_load_n((char *const *)&s->cur, __ATOMIC_ACQUIRE);
    char *first = block_events(b);
    if (b != s->tail || !cur || cur < first || cur > (char *)b + GT_BLOCK_BYTES)
        return 0;
    return (size_t)(cur - first) / s->rec_size;
}

size_t gt_stream__live_chunks(const struct gt_stream *s, const struct gt_stream_pos *at,
                              struct gt_chunk *out, size_t max, struct gt_stream_pos *next)
{
    GT_ASSERT_HELD(&reg_lock);
    size_t k = 0, skip = at->blocks;
    int first = 1;
    *next = *at;
    for (struct gt_block *b = s->head; b; b = b->next) {
        size_t n = b->next ? b->n : tail_published(s, b);
        if (b->next && n == 0)
            continue; /* (as stream_chunks: not counted) */
        if (skip) {
            skip--;
            continue;
        }
        size_t from = first ? at->recs : 0; /* (the tail read before, closed since or not) */
        first = 0;
        if (b->next) {
            next->blocks++;
            next->recs = 0;
        } else {
            next->recs = n > from ? n : from;
        }
        if (n > from && k < max)
            out[k++] = (struct gt_chunk){block_events(b) + from * s->rec_size, n - from};
    }
    return k;
}

int gt_registry__each_locked(gt_thread_cb fn, void *ctx)
{
    pthread_mutex_lock(&reg_lock);
    if (atomic_load(&gt_registry_gen) == 0) {
        pthread_mutex_unlock(&reg_lock);
        return -ESRCH;
    }
    for (struct gt_thread *t = threads; t; t = t->next)
        fn(t, ctx);
    pthread_mutex_unlock(&reg_lock);
    return 0;
}

void gt_stream__each(struct gt_stream *s, gt_block_fn fn, void *ctx)
{
    for (struct gt_block *b = s->head; b; b = b->next) {
        size_t from = b == s->head ? s->head_skip : 0; /* folded (keep last) */
        if (b->n > from)
            fn(block_events(b) + from * s->rec_size, b->n - from, ctx);
    }
}

/* A forked child (e.g. a multiprocessing worker) records nothing of the parent's
 * session: its copies of the parent's records are dropped (never freed: they are the
 * parent's memory image) and the lock, possibly held by a parent thread at fork(), is
 * made usable again, so the child can run a session of its own. */
/* The child's copy of the parent's records stays reachable from here (a leak checker
 * sees memory kept on purpose, not lost); at most one generation's worth. */
static struct gt_thread *volatile abandoned_in_child;

static void atfork_child(void)
{
    pthread_mutex_init(&reg_lock, NULL);
    /* The refiller was not copied into the child (nothing to join). */
    pthread_cond_init(&refill.wake, NULL);
    refill.running = 0;
    atomic_store(&refill.tid, 0);
    atomic_store(&refill.prev_tid, 0);
    atomic_store(&gt_recording, 0);
    atomic_store(&gt_registry_gen, 0);
    budget_shared = NULL; /* the child's own session shares it again, or not */
    /* Registration is the process's: the child's refiller renews it (a no-op where the
     * kernel copied it). */
    atomic_store(&membarrier_state, 0);
    if (threads)
        abandoned_in_child = threads;
    threads = NULL;
    memset(by_tid, 0, sizeof(by_tid));
    on_new_thread = NULL;
    on_new_ctx = NULL;
}

/* fork() waits until no thread is inside reg_lock (the refiller linking an arena, a
 * push growing a stream), so the child's copy of the pool and the lists is whole. No
 * holder of reg_lock waits for the GIL, which the forking thread may hold. */
static void atfork_prepare(void)
{
    pthread_mutex_lock(&reg_lock);
}

static void atfork_parent(void)
{
    pthread_mutex_unlock(&reg_lock);
}

static void register_atfork(void)
{
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

int gt_registry__begin(uint64_t max_events, gt_thread_cb on_new, void *ctx)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    int err = 0;
    pthread_once(&once, register_atfork);
    pthread_mutex_lock(&reg_lock);
    if (atomic_load(&gt_registry_gen) != 0) {
        err = -EBUSY;
        goto cleanup;
    }
    if (threads) { /* the previous generation was not released */
        err = -EBUSY;
        goto cleanup;
    }
    budget_limited = max_events != 0 || budget_shared;
    for (int k = GT_BUDGET_CALLS; k < GT_BUDGET_END; k++) {
        budget_left[k] = max_events;
        atomic_store(&budget_spent[k], 0);
    }
    on_new_thread = on_new;
    on_new_ctx = ctx;
    if (!refill.running)
        refill_start_locked();
    atomic_store(&gt_registry_gen, ++last_gen);
cleanup:
    pthread_mutex_unlock(&reg_lock);
    return err;
}

static struct gt_thread **tid_bucket(int32_t tid)
{
    return &by_tid[(uint32_t)tid % TID_BUCKETS];
}

static struct gt_thread *find_locked(int32_t tid)
{
    for (struct gt_thread *t = *tid_bucket(tid); t; t = t->hnext)
        if (t->tid == tid)
            return t;
    return NULL;
}

/* The tid's record, new or its latest (chains are newest first); `bind`: for the
 * calling thread, which never takes a record another thread bound (that thread ended
 * and the kernel reused its tid). Returns the record and whether it is new. reg_lock
 * held. */
static struct gt_thread *register_locked(int32_t tid, uint32_t flags, int bind, int *is_new)
{
    GT_ASSERT_HELD(&reg_lock);
    struct gt_thread *old = find_locked(tid), *t = old;
    *is_new = 0;
    if (t && !(bind && t->bound)) {
        t->flags |= flags;
        t->bound |= bind;
        return t;
    }
    t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    if (old)
        old->superseded = 1;
    t->bound = bind;
    t->tid = tid;
    t->pid = (int32_t)getpid();
    t->flags = flags;
    t->gen = atomic_load(&gt_registry_gen);
    t->calls.budget = GT_BUDGET_CALLS;
    t->calls.rec_size = sizeof(struct gt_call_rec);
    t->calls.ts_hi = UINT32_MAX;
    t->gil.rec_size = t->gil_check.rec_size = sizeof(struct gt_gil_event);
    t->sched.rec_size = sizeof(struct gt_sched_event);
    t->gil.budget = GT_BUDGET_GIL;
    t->sched.budget = GT_BUDGET_SCHED;
    t->gil_check.budget = GT_BUDGET_GIL_CHECK;
    t->next = threads;
    threads = t;
    t->hnext = *tid_bucket(tid);
    *tid_bucket(tid) = t;
    *is_new = 1;
    return t;
}

static struct gt_thread *register_as(int32_t tid, uint32_t flags, int holder, uint32_t interp)
{
    int is_new = 0;
    pthread_mutex_lock(&reg_lock);
    struct gt_thread *t = NULL;
    if (atomic_load(&gt_registry_gen) == 0)
        errno = ESRCH;
    else if (!(t = register_locked(tid, flags, 0, &is_new)))
        errno = ENOMEM;
    else if (holder) {
        t->gil_held = 1;
        t->interp = interp;
    }
    gt_thread_cb cb = on_new_thread;
    void *ctx = on_new_ctx;
    pthread_mutex_unlock(&reg_lock);
    if (t && is_new && cb)
        cb(t, ctx);
    return t;
}

struct gt_thread *gt_registry__register(int32_t tid, uint32_t flags)
{
    return register_as(tid, flags, 0, 0);
}

struct gt_thread *gt_registry__register_holder(int32_t tid, uint32_t interp)
{
    return register_as(tid, GT_THREAD_EXISTED_AT_START | GT_THREAD_HELD_GIL_AT_START, 1, interp);
}

/* The slow paths of the inline pushes and lookup keep errno: their callers include the
 * hooks around the interpreter's GIL calls, after which the interpreter reads errno. */
struct gt_thread *gt_thread__current_slow(void)
{
    int saved_errno = errno;
    struct gt_thread *t = gt_thread__bind_as((int32_t)syscall(SYS_gettid));
    errno = saved_errno;
    return t;
}

int gt_stream__grow(struct gt_stream *s)
{
    int saved_errno = errno;
    int err = stream_grow(s);
    errno = saved_errno;
    return err;
}

void gt_stream__refused(struct gt_stream *s, int err, uint64_t ts, uint32_t a, uint32_t b)
{
    int saved_errno = errno;
    stream_refused(s, err, ts, a, b);
    errno = saved_errno;
}

/* The calling thread reaches this once per generation (then its TLS holds the record):
 * a record already bound belongs to an earlier thread with the same tid. */
struct gt_thread *gt_thread__bind_as(int32_t tid)
{
    uint64_t gen = atomic_load(&gt_registry_gen);
    if (gen == 0)
        return NULL;
    int is_new = 0;
    pthread_mutex_lock(&reg_lock);
    struct gt_thread *t = NULL;
    if (atomic_load(&gt_registry_gen) == gen)
        t = register_locked(tid, 0, 1, &is_new);
    if (t)
        t->ident = (uint64_t)pthread_self();
    gt_thread_cb cb = on_new_thread;
    void *ctx = on_new_ctx;
    pthread_mutex_unlock(&reg_lock);
    if (!t)
        return NULL;
    if (is_new && cb)
        cb(t, ctx);
    int on_bind = __atomic_load_n(&account_on_bind, __ATOMIC_RELAXED);
    if (on_bind && t->gil_live == GT_GIL_LIVE_UNKNOWN)
        gt_thread__gil_live(t, gt_ticks(), on_bind); /* by the thread itself: one writer */
    gt_tls.thread = t;
    gt_tls.gen = gen;
    return t;
}

void gt_registry__set_account(int on_bind, int ns)
{
    __atomic_store_n(&account_on_bind, on_bind, __ATOMIC_RELAXED);
    __atomic_store_n(&gt_account_ns, ns, __ATOMIC_RELAXED);
}

void gt_registry__end(void)
{
    gt_registry__set_account(0, 0);
    atomic_store(&gt_recording, 0);
    pthread_mutex_lock(&reg_lock);
    atomic_store(&gt_registry_gen, 0);
    pthread_mutex_unlock(&reg_lock);
    refill_stop();
    /* A hook that read the generation just before may still be pushing; the GIL
     * (for calls) and the caller's ordering (stop after disabling hooks) make that
     * window empty for calls. GIL/sched producers are quiesced by their owners. */
    pthread_mutex_lock(&reg_lock);
    for (struct gt_thread *t = threads; t; t = t->next) {
        stream_close(&t->calls);
        stream_close(&t->gil);
        stream_close(&t->sched);
        stream_close(&t->gil_check);
    }
    pthread_mutex_unlock(&reg_lock);
}

struct gt_thread *gt_registry__threads(void)
{
    return threads;
}

void gt_registry__totals(uint64_t *recorded, uint64_t *dropped)
{
    uint64_t r = 0, d = 0;
    for (struct gt_thread *t = threads; t; t = t->next) {
        r += gt_stream__events(&t->calls);
        d += t->calls.dropped;
    }
    *recorded = r;
    *dropped = d;
}

/* Records a live stream holds: those of its closed blocks and the tail's so far. The
 * tail only changes under reg_lock (held), `cur` is the producer's: read once. */
static uint64_t live_count(const struct gt_stream *s)
{
    uint64_t n = s->count;
    char *cur = __atomic_load_n((char *const *)&s->cur, __ATOMIC_RELAXED);
    if (s->tail && cur) {
        char *first = block_events(s->tail);
        if (cur >= first && cur <= (char *)s->tail + GT_BLOCK_BYTES)
            n += (uint64_t)(cur - first) / s->rec_size;
    }
    uint64_t bases = __atomic_load_n(&s->bases, __ATOMIC_RELAXED);
    return n > bases ? n - bases : 0;
}

int gt_registry__live(struct gt_live *sum, struct gt_live_thread *out, size_t max)
{
    memset(sum, 0, sizeof(*sum));
    pthread_mutex_lock(&reg_lock);
    if (atomic_load(&gt_registry_gen) == 0) {
        pthread_mutex_unlock(&reg_lock);
        return -ESRCH;
    }
    for (struct gt_thread *t = threads; t; t = t->next) {
        sum->calls += live_count(&t->calls);
        sum->gil_events += live_count(&t->gil);
        sum->sched_events += live_count(&t->sched);
        sum->dropped += __atomic_load_n(&t->calls.dropped, __ATOMIC_RELAXED) +
                        __atomic_load_n(&t->gil.dropped, __ATOMIC_RELAXED) +
                        __atomic_load_n(&t->sched.dropped, __ATOMIC_RELAXED);
        if (sum->nthreads < max) {
            struct gt_live_thread *o = &out[sum->nthreads];
            o->tid = t->tid;
            o->flags = t->flags;
            o->ident = __atomic_load_n(&t->ident, __ATOMIC_RELAXED);
            o->gil_live = __atomic_load_n(&t->gil_live, __ATOMIC_RELAXED);
            o->gil_since = __atomic_load_n(&t->gil_since, __ATOMIC_RELAXED);
            for (int k = 0; k < GT_GIL_LIVE_NSTATES; k++)
                o->gil_ticks[k] = __atomic_load_n(&t->gil_ticks[k], __ATOMIC_RELAXED);
        }
        sum->nthreads++;
    }
    for (int k = GT_BUDGET_CALLS; k <= GT_BUDGET_SCHED; k++)
        if (atomic_load_explicit(&budget_spent[k], memory_order_relaxed))
            sum->budget_reached = 1;
    pthread_mutex_unlock(&reg_lock);
    return 0;
}

void gt_registry__memory(size_t *pooled, size_t *lazy)
{
    pthread_mutex_lock(&reg_lock);
    if (pooled)
        *pooled = narenas * (size_t)ARENA_BYTES;
    if (lazy)
        *lazy = nlazy * (size_t)ARENA_BYTES;
    pthread_mutex_unlock(&reg_lock);
}

void gt_registry__release(void (*free_state)(struct gt_thread *t))
{
    pthread_mutex_lock(&reg_lock);
    struct gt_thread *list = threads;
    threads = NULL;
    memset(by_tid, 0, sizeof(by_tid));
    for (struct gt_thread *t = list; t; t = t->next) {
        struct gt_stream *streams[] = {&t->calls, &t->gil, &t->sched, &t->gil_check};
        for (size_t i = 0; i < sizeof(streams) / sizeof(streams[0]); i++) {
            block_put_list(streams[i]->head);
            if (streams[i]->overflow) {
                enum gt_budget k = streams[i]->budget;
                void (*rel)(void *) = k < GT_BUDGET_END ? overflow_release[k] : NULL;
                (rel ? rel : free)(streams[i]->overflow);
            }
            memset(streams[i], 0, sizeof(*streams[i]));
        }
    }
    if (atomic_load(&gt_registry_gen) == 0)
        pool_trim();
    pthread_mutex_unlock(&reg_lock);
    /* Outside the lock: free_state drops Python references, and the finalizers that
     * run may take the lock again (e.g. start a session: gt_registry__begin). */
    while (list) {
        struct gt_thread *next = list->next;
        if (free_state)
            free_state(list);
        free(list);
        list = next;
    }
}

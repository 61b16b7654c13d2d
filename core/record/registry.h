/* SPDX-License-Identifier: MIT */
/* The thread registry: one record per kernel thread per session, each with its own
 * event streams in fixed-size blocks. Each stream has exactly one producer (the
 * owning thread for calls and GIL events, the scheduler poller for sched events),
 * so pushes take no lock; blocks come from a pool recycled across sessions, kept
 * ahead of the pushes by a helper thread while a generation is active (a push never
 * faults in memory while the reserve lasts). Plain C: no Python. One session at a time
 * per process. */
#ifndef GT_REGISTRY_H
#define GT_REGISTRY_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "gt_events.h"

#define GT_BLOCK_BYTES (64 * 1024)

struct gt_block {
    struct gt_block *next;
    size_t n; /* events used, set when the block is closed or at stop */
    /* events follow, aligned to 16 */
};

#define GT_BLOCK_HEADER 16
#define GT_BLOCK_EVENTS ((GT_BLOCK_BYTES - GT_BLOCK_HEADER) / 16) /* of 16 bytes */

/* Each kind of stream has its own budget of max_events (gt_registry__begin); a stream
 * of GT_BUDGET_NONE (a zeroed one) counts against none. */
enum gt_budget {
    GT_BUDGET_NONE,
    GT_BUDGET_CALLS,
    GT_BUDGET_GIL,
    GT_BUDGET_SCHED,
    GT_BUDGET_GIL_CHECK,
    GT_BUDGET_END, /* one past the last budget */
};

/* A stream of 16-byte events (GIL, sched), or of 8-byte call records (see
 * gt_stream__push_call). `cur`/`lim` point into the tail block. */
struct gt_stream {
    void *cur, *lim;
    struct gt_block *head, *tail;
    uint32_t rec_size; /* 16, or 8 for the call stream */
    uint32_t ts_hi;    /* call stream: the bits 32-63 its last time base gave */
    uint64_t bases;    /* call stream: time-base records in it (not events) */
    uint64_t count;   /* records in closed blocks (see gt_stream__count) */
    uint64_t dropped; /* events refused (cap reached or no memory) */
    uint64_t refused_at; /* raw timestamp of the first refusal; 0 = never */
    uint64_t granted;    /* records of the budget granted to it so far */
    enum gt_budget budget; /* the registry budget it counts against */
    void *overflow; /* the overflow sink's state for this stream (malloc'd; freed at release) */
    /* Keep last (gt_registry__set_recycle): records of the head block already folded (a
     * call stream's record there is a time base), and the events folded so far. */
    size_t head_skip;
    uint64_t folded;
};


/* A reader's place in a live stream (a child's checkpoints, gt_stream__live_chunks): the
 * non-empty closed blocks it has read whole, and the records it has read of the next one
 * (the tail's, read while it was the tail). */
struct gt_stream_pos {
    size_t blocks;
    size_t recs;
};

#define GT_GIL_LIVE_NSTATES 4

struct gt_thread {
    /* hot fields first */
    struct gt_stream calls;
    struct gt_stream gil;
    struct gt_stream sched; /* produced by the sched poller only */
    struct gt_stream gil_check; /* cross-check mode: a second GIL probe's view */
    int gil_held;           /* GIL decode state (hooks backend) */
    int depth;              /* call depth, for max_depth */
    uint32_t interp;        /* id of the last subinterpreter it ran in (0: main only) */
    int32_t tid;
    int32_t pid;
    uint64_t ident;    /* pthread_self() of the thread, 0 until it binds */
    uint64_t gen;      /* registry generation this record belongs to */
    int bound;         /* a thread has bound to it (gt_thread_current): no other thread will */
    int superseded;    /* its tid was reused by a later thread of the session: it ended */
    uint32_t flags;    /* enum gt_thread_input_flags (gt_trace.h) */
    void *tracer_state; /* owned by the tracer (freed through the registry hook) */
    void *sched_state;  /* owned by the sched probe */
    struct gt_thread *next;
    struct gt_thread *hnext; /* the registry's tid hash chain, newest first */
    /* The thread's state account (gt_thread__gil_live): the one place every probe
     * reports a change of state to, written by one producer (the thread itself with the
     * hooks and the park probe, the drain with bpf), read without a lock by
     * gt_registry__live() (the live meter) and by the thread's own call tree (ctree). */
    int gil_live;                          /* enum gt_gil_live */
    uint64_t gil_since;                    /* ticks of its last change of state */
    uint64_t gil_ticks[GT_GIL_LIVE_NSTATES]; /* ticks spent in each state so far */
    struct gt_stream_pos spooled[3]; /* a child's checkpoints: written so far (calls, gil,
                                        sched) */
};

/* Where a thread stands: with the GIL on a GIL build; on a free-threaded one (the park
 * probe) HELD = running (not parked), WAITING = parked, as merge's GIL intervals say. */
enum gt_gil_live {
    GT_GIL_LIVE_UNKNOWN, /* no event yet */
    GT_GIL_LIVE_HELD,    /* free-threaded: running */
    GT_GIL_LIVE_WAITING, /* free-threaded: parked */
    GT_GIL_LIVE_RELEASED,
};

/* The thread's state changes to `state` at `ts` (ticks; the bpf probe's ns): one add to
 * the state it leaves. Relaxed atomic stores of aligned 64-bit words (single writer: no lock
 * prefix), so a reader never sees a torn value; it may see the add without the new
 * `gil_since` or the reverse, which misplaces at most one interval for one reading of a
 * meter redrawn twice a second. */
static inline void gt_thread__gil_live(struct gt_thread *t, uint64_t ts, int state)
{
    int old = t->gil_live;
    if (old == state)
        return;
    if (old != GT_GIL_LIVE_UNKNOWN && ts > t->gil_since)
        __atomic_store_n(&t->gil_ticks[old], t->gil_ticks[old] + (ts - t->gil_since),
                         __ATOMIC_RELAXED);
    __atomic_store_n(&t->gil_since, ts, __ATOMIC_RELAXED);
    __atomic_store_n(&t->gil_live, state, __ATOMIC_RELAXED);
}

/* One thread, as gt_registry__live() reads it while the generation records. */
struct gt_live_thread {
    int32_t tid;
    uint32_t flags;
    uint64_t ident;
    int gil_live;                          /* enum gt_gil_live */
    uint64_t gil_since;
    uint64_t gil_ticks[GT_GIL_LIVE_NSTATES];
};

/* The generation's totals so far (approximate while threads push). */
struct gt_live {
    uint64_t calls, gil_events, sched_events; /* recorded */
    uint64_t dropped;                         /* refused, every kind */
    int budget_reached;                       /* a kind's budget is spent */
    size_t nthreads;                          /* records (may exceed what was filled) */
};

/**
 * gt_registry__live() - the active generation's threads (up to `max` into `out`) and
 * totals, for a live view. Takes the registry lock (never held by a push), reads the
 * producers' fields with relaxed loads. Returns 0 or -ESRCH (no active generation).
 */
int gt_registry__live(struct gt_live *sum, struct gt_live_thread *out, size_t max);


/* The state a GIL or park event (gt_gil_kind) puts a thread in, from the state `st` it
 * is in, as merge decodes the streams (analyze/merge.c build_gil, build_park): a want
 * while holding keeps it held; a forced switch's end leaves a waiter released; a
 * blocking wait on a Python-level primitive is released, as on a GIL build. */
static inline int gt_gil_live__after(int st, uint32_t kind)
{
    switch (kind) {
    case GT_GIL_WANT:
        return st == GT_GIL_LIVE_HELD ? st : GT_GIL_LIVE_WAITING;
    case GT_GIL_ACQUIRED:
    case GT_PARK_END:
    case GT_PARK_WAIT_END:
        return GT_GIL_LIVE_HELD;
    case GT_GIL_RELEASED:
    case GT_PARK_WAIT_BEGIN:
        return GT_GIL_LIVE_RELEASED;
    case GT_GIL_SWITCH_DONE:
        return st == GT_GIL_LIVE_WAITING ? GT_GIL_LIVE_RELEASED : st;
    case GT_PARK_BEGIN:
        return GT_GIL_LIVE_WAITING;
    default:
        return st;
    }
}

/* The thread's account, one GIL or park event on: what every probe calls per event. */
static inline void gt_thread__gil_event(struct gt_thread *t, uint64_t ts, uint32_t kind)
{
    gt_thread__gil_live(t, ts, gt_gil_live__after(t->gil_live, kind));
}

/* How the generation's accounts are kept (after gt_registry__begin, before any probe
 * runs; gt_registry__end resets both to 0). `on_bind`: the state a thread's account
 * starts in when it binds (a free-threaded build's threads run until they park; 0 =
 * unknown until its first event). `ns`: the accounts are in ns and kept by another
 * thread (the bpf drain), so a call tree, in ticks, does not split by them. */
void gt_registry__set_account(int on_bind, int ns);
extern int gt_account_ns;

/* Recording gate of the tracer's hooks: nonzero while a session records (the GIL
 * hooks have their own gate, gt_gilhook__set_recording). */
extern atomic_int gt_recording;

/* Called (with the registry lock NOT held) for every newly registered thread, e.g. to
 * open its scheduler event. May be NULL. `ctx` is used after the lock is dropped, so
 * whoever frees it must first make sure no thread can still be registering: every
 * caller of gt_thread_current() is a Python hook (the GIL keeps it out), a GIL hook
 * (gt_gilhook__set_recording(0) waits for those in flight) or the bpf drain (joined),
 * and all three are quiet before the session stops the sched state. A new caller
 * outside these windows needs its own. */
typedef void (*gt_thread_cb)(struct gt_thread *t, void *ctx);

/**
 * gt_registry__begin() - start a new generation: forget earlier threads' TLS bindings,
 * allow at most `max_events` events in total in each kind of stream (calls, GIL,
 * sched, GIL cross-check: enum gt_budget; 0 = unlimited). Past a budget, pushes to
 * that kind of stream are counted as dropped without taking any lock.
 * Returns 0 or -EBUSY when a generation is already active.
 */
int gt_registry__begin(uint64_t max_events, gt_thread_cb on_new, void *ctx);

/**
 * gt_registry__register() - add a record for kernel thread `tid` (any thread, e.g. one
 * that existed at start); it binds to that thread on its first gt_thread_current().
 * Returns the record or NULL (errno set). Idempotent per tid: returns the tid's latest
 * record. A record is bound by one thread only: a thread that binds when its tid's
 * latest record was bound by another (ended) thread, the kernel having reused the tid,
 * gets a record of its own (with its own on_new call); the old one is `superseded`.
 * Consumers keyed by tid see both; lookups by tid mean the latest.
 */
struct gt_thread *gt_registry__register(int32_t tid, uint32_t flags);

/**
 * gt_registry__register_holder() - gt_registry__register(tid, EXISTED_AT_START |
 * HELD_GIL_AT_START) that also marks the record as holding GIL `interp`, all under the
 * registry's lock: the thread may be running meanwhile (a GIL of its own), binding its
 * record. Before the hooks record (their mode's store orders this before their writes).
 */
struct gt_thread *gt_registry__register_holder(int32_t tid, uint32_t interp);

/**
 * gt_thread_current() - the calling thread's record in the active generation,
 * registered on first use. NULL when no generation is active or out of memory.
 * Async-signal-unsafe; safe to call from pthread interposers (uses no interpreter
 * locks).
 */
struct gt_thread *gt_thread__current_slow(void);

/* Test-only: the slow path of gt_thread_current() for a calling thread whose kernel tid
 * were `tid` (kernels reuse tids only after a wrap of pid_max). */
struct gt_thread *gt_thread__bind_as(int32_t tid);

struct gt_tls {
    struct gt_thread *thread;
    uint64_t gen;
};
/* The hot paths' thread-locals (this one, the hooks' and the tracer's) are initial-exec:
 * in the extension, a dlopen()ed module, the default model costs a __tls_get_addr call
 * per access, i.e. per GIL event of the hooks. Initial-exec needs room in the static TLS
 * block that glibc keeps for such modules (the extension's 56 bytes); where other
 * libraries used it up the module cannot load, and the fallback build of it (compiled
 * with GT_TLS_DYNAMIC, see magics/giltracer/__init__.py) uses the default model. */
#ifdef GT_TLS_DYNAMIC
#define GT_TLS_HOT __attribute__((tls_model("global-dynamic")))
#define GT_TLS_MODEL "global-dynamic"
#else
#define GT_TLS_HOT __attribute__((tls_model("initial-exec")))
#define GT_TLS_MODEL "initial-exec"
#endif
extern __thread struct gt_tls gt_tls GT_TLS_HOT;
extern _Atomic uint64_t gt_registry_gen; /* 0 = no active generation */

static inline struct gt_thread *gt_thread_current(void)
{
    uint64_t gen = atomic_load_explicit(&gt_registry_gen, memory_order_relaxed);
    if (__builtin_expect(gt_tls.gen == gen && gen != 0, 1))
        return gt_tls.thread;
    return gt_thread__current_slow();
}

/**
 * gt_registry__end() - stop the generation: gt_thread_current() returns NULL from now on.
 * The records stay readable until gt_registry__release(). Closes every stream.
 */
void gt_registry__end(void);

/**
 * gt_registry__helper_tid() - the kernel tid of the registry's own helper thread (it
 * maps event blocks ahead of the traced threads while a generation is active), or 0.
 * It runs no Python and is no thread of interest: probes that see every thread of the
 * process (bpf sched_switch) skip it.
 */
int32_t gt_registry__helper_tid(void);

/**
 * gt_registry__membarrier_register() - register the process for
 * membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), once per process (again in a forked
 * child): a multi-threaded process's registration waits for an RCU grace period (10-20
 * ms here), so call it where waiting is fine, before gt_registry__begin(); otherwise the
 * helper thread registers after the first begin, and the GIL hooks of every session
 * started before that pay a full fence per GIL event (gilhook.c, hot_fence).
 */
void gt_registry__membarrier_register(void);

/**
 * gt_registry__membarrier_ready() - is the process registered for
 * membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) (gt_registry__membarrier_register)? 0 until
 * then, or if the kernel refused.
 */
int gt_registry__membarrier_ready(void);

/**
 * gt_registry__is_helper() - is `tid` the registry's helper thread, this generation's or
 * the previous one's (whose exit can still be switching out when the next one starts)?
 */
int gt_registry__is_helper(int32_t tid);

/** gt_registry__threads() - the first record of the ended (or active) generation. */
struct gt_thread *gt_registry__threads(void);

/**
 * gt_registry__release() - return all blocks to the pool and free the records.
 * `free_state` is called for each record (may be NULL), without the registry lock:
 * it may run arbitrary code (Python finalizers), even start a new generation.
 */
void gt_registry__release(void (*free_state)(struct gt_thread *t));

/**
 * gt_registry__memory() - the event memory the process holds: `pooled`, bytes of block
 * arenas in use or in the pool; `lazy`, bytes kept between sessions as MADV_FREE memory
 * (the kernel may have taken some of it back already). Either pointer may be NULL.
 */
void gt_registry__memory(size_t *pooled, size_t *lazy);

/* Slow path of a push: close the tail block, append a fresh one. 0 or -ENOSPC (budget
 * spent), -ESRCH (no session) or -ENOMEM. The first two take no lock. */
int gt_stream__grow(struct gt_stream *s);

/* Records in a (closed) stream: its events, and for the call stream its time bases. */
uint64_t gt_stream__count(const struct gt_stream *s);

/* Events in a (closed) stream: records less time bases. */
static inline uint64_t gt_stream__events(const struct gt_stream *s)
{
    return s->count - s->bases;
}

/* The stream as chunks: fills up to `max` chunks, returns how many it needs. */
size_t gt_stream__chunks(const struct gt_stream *s, struct gt_chunk *out, size_t max);

/* While recording, with reg_lock held (gt_registry__each_locked): the blocks already
 * closed, whose events no longer change (the tail block's are still being written),
 * after the first `skip` of them (not empty ones). */
size_t gt_stream__closed_chunks(const struct gt_stream *s, size_t skip, struct gt_chunk *out,
                                size_t max);

/* While recording, with reg_lock held: the records after `*at`, those of the closed blocks
 * and those of the tail its producer has published (a push stores `cur` with release
 * once its record is written; read with acquire: never a record half written), as at
 * most gt_stream__closed_chunks(s, at->blocks, NULL, 0) + 1 chunks. Fills up to `max`,
 * returns how many it filled, sets *next to the place after them. Their records no
 * longer change while the generation records (not for a stream that keeps its last
 * events, whose oldest blocks are folded). */
size_t gt_stream__live_chunks(const struct gt_stream *s, const struct gt_stream_pos *at,
                              struct gt_chunk *out, size_t max, struct gt_stream_pos *next);

/* Calls fn for every thread of the session with reg_lock held (no stream grows
 * meanwhile; fn must not wait for anything, e.g. the GIL). 0, or -ESRCH: no session. */
int gt_registry__each_locked(gt_thread_cb fn, void *ctx);

/* Mutable access to each block's events, e.g. to convert ticks to ns in place. */
typedef void (*gt_block_fn)(void *events, size_t n, void *ctx);
void gt_stream__each(struct gt_stream *s, gt_block_fn fn, void *ctx);

/* Where a stream's events go once its budget is spent (the aggregate stage installs one
 * per budget): called by the stream's producer with the event (a call stream's as func,
 * kind), it returns 0 when it took the event, else the event counts as dropped. */
typedef int (*gt_overflow_fn)(struct gt_stream *s, uint64_t ts, uint32_t a, uint32_t b);

/* Installs `fn` (NULL: none) for the streams of `budget`, and what frees a stream's
 * `overflow` at release (NULL: free()); set between sessions. */
void gt_registry__set_overflow(enum gt_budget budget, gt_overflow_fn fn, void (*release)(void *));

/* The next generations draw every budget from `left` (GT_BUDGET_END counters by enum
 * gt_budget, e.g. a gt_budget_pool's, which other processes draw from too) instead of
 * their own max_events; NULL: their own again. Set between sessions; a forked
 * child starts with none. */
void gt_registry__share_budget(uint64_t *left);

/* Keeps the last events of the streams of `budget` (a flight recorder): past the budget,
 * each new grant of a stream first folds as many of its oldest records into `fold`, in
 * order (a call stream's as func, kind; time bases are not events), and frees its
 * oldest block once folded, so that a stream holds about the records it was granted, and
 * at most a block more (a stream that had no block when the budget ran out: its last
 * 1024 records, past the budget). NULL: keep the first events (past the budget, the overflow
 * sink). Set between sessions. */
void gt_registry__set_recycle(enum gt_budget budget, gt_overflow_fn fold);

/* Slow path of a refused push (`err` from gt_stream__grow): the overflow sink, or dropped. */
void gt_stream__refused(struct gt_stream *s, int err, uint64_t ts, uint32_t a, uint32_t b);

static inline void gt_stream__push(struct gt_stream *s, uint64_t ts, uint32_t a, uint32_t b)
{
    if (__builtin_expect(s->cur == s->lim, 0)) {
        int err = gt_stream__grow(s);
        if (err < 0) {
            gt_stream__refused(s, err, ts, a, b);
            return;
        }
    }
    uint32_t *p = (uint32_t *)s->cur;
    *(uint64_t *)p = ts;
    p[2] = a;
    p[3] = b;
    /* (published: a checkpoint reads the tail up to `cur`; a plain store on x86) */
    __atomic_store_n(&s->cur, (char *)p + 16, __ATOMIC_RELEASE);
}

/* Slow path of gt_stream__push_call: a new block or a new time base first. */
void gt_stream__push_call_slow(struct gt_stream *s, uint64_t ts, uint32_t word);

/* One call event (gt_events.h's gt_call_rec) on a call stream: 8 bytes. */
static inline void gt_stream__push_call(struct gt_stream *s, uint64_t ts, uint32_t func, uint32_t kind)
{
    uint32_t word = gt_call_rec__word(func, kind);
    if (__builtin_expect(s->cur == s->lim || (uint32_t)(ts >> 32) != s->ts_hi, 0)) {
        gt_stream__push_call_slow(s, ts, word);
        return;
    }
    uint32_t *p = (uint32_t *)s->cur;
    p[0] = (uint32_t)ts;
    p[1] = word;
    __atomic_store_n(&s->cur, (char *)p + 8, __ATOMIC_RELEASE); /* (published) */
}

/* Registry-wide totals of call events recorded / dropped (after end). */
void gt_registry__totals(uint64_t *recorded, uint64_t *dropped);

#endif /* GT_REGISTRY_H */

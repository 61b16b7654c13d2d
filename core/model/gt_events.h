/* SPDX-License-Identifier: MIT */
/* Event records shared by the tracer, the GIL probes, the scheduler probe and merge.
 * Plain C: no Python, no libbpf. Every stream is per thread and time-ordered. */
#ifndef GT_EVENTS_H
#define GT_EVENTS_H

#include <stddef.h>
#include <stdint.h>

/* Function-call events. Recorded as 8-byte `struct gt_call_rec`s (below); merge and the
 * tests speak of them as `struct gt_call_event`. `func` is a per-thread function id (see
 * gt_thread_input.func_map); `ts` is CLOCK_MONOTONIC ns once merge has converted it. */
enum gt_call_kind {
    GT_CALL = 1,    /* Python function entered (also a generator/coroutine resume) */
    GT_RETURN = 2,  /* Python function returned (also a yield) */
    GT_UNWIND = 3,  /* Python function left by an exception */
    GT_CCALL = 4,   /* C function entered */
    GT_CRETURN = 5, /* C function returned */
    GT_CRAISE = 6,  /* C function raised */
};

/* Flag or-ed into a GT_CALL/GT_CCALL kind: the frame was already open when recording
 * started (recorded at the session start), so its span is clipped at the start. */
#define GT_CALL_OPEN_AT_START 0x100u
#define GT_CALL_KIND_MASK 0xffu

struct gt_call_event {
    uint64_t ts;
    uint32_t func;
    uint32_t kind; /* enum gt_call_kind, possibly | GT_CALL_OPEN_AT_START */
};

/* The recorded form of a call event, 8 bytes: half the memory (and, in a process's first
 * session, half the page faults) of a gt_call_event, so a first session stalls less. `ts_lo` is the low 32
 * bits of the timestamp; `word` is func << 4 | kind (3 bits) | 8 if open at start. A
 * record whose kind is 0 is a time base: its `ts_lo` holds bits 32-63 of the timestamps
 * of the records after it. Every block of a call stream starts with one, and the
 * recorder writes another whenever those bits change, so a block decodes on its own. */
struct gt_call_rec {
    uint32_t ts_lo;
    uint32_t word;
};

#define GT_CALL_REC_FUNC_LIMIT (1u << 28) /* function ids must stay below */

/* A time base for the records after it: bits 32-63 of their timestamps. */
static inline struct gt_call_rec gt_call_rec__base(uint32_t ts_hi)
{
    return (struct gt_call_rec){ts_hi, 0};
}

static inline int gt_call_rec__is_base(struct gt_call_rec r)
{
    return (r.word & 7u) == 0;
}

static inline uint32_t gt_call_rec__word(uint32_t func, uint32_t kind)
{
    return func << 4 | (kind & 7u) | ((kind & GT_CALL_OPEN_AT_START) ? 8u : 0u);
}

/* Decodes `r` into `out` (ts in the recorder's ticks) and returns 1, or updates `*hi`
 * and returns 0 for a time base. Start with *hi = 0 (every stream starts with a base). */
static inline int gt_call_rec__decode(struct gt_call_rec r, uint64_t *hi, struct gt_call_event *out)
{
    if (gt_call_rec__is_base(r)) {
        *hi = (uint64_t)r.ts_lo << 32;
        return 0;
    }
    out->ts = *hi | r.ts_lo;
    out->func = r.word >> 4;
    out->kind = (r.word & 7u) | ((r.word & 8u) ? GT_CALL_OPEN_AT_START : 0u);
    return 1;
}

/* GIL stream, already decoded per thread; the hooks and the bpf backend both
 * produce exactly these. */
enum gt_gil_kind {
    GT_GIL_WANT = 1,         /* the thread starts to take the GIL */
    GT_GIL_ACQUIRED = 2,     /* the thread now holds the GIL */
    GT_GIL_RELEASED = 3,     /* the thread dropped the GIL */
    GT_GIL_DROP_REQUEST = 4, /* a waiter's wait slice (switch interval) timed out:
                                it asks the holder to drop (forced switch) */
    GT_GIL_SWITCH_DONE = 5,  /* a dropper's wait for another thread to take the GIL
                                (FORCE_SWITCHING) ended: released until it wants again */
    /* The park probe (free-threaded builds: no GIL) writes these into the same stream. */
    GT_PARK_BEGIN = 6, /* the thread parks: waits on its parking-lot semaphore */
    GT_PARK_END = 7,   /* the wait returned: aux = the tid that posted (woke) it, 0 if
                          unknown or timed out */
    GT_PARK_WAKE = 8,  /* recorder-internal (a post): never in a stream */
    /* A park in a blocking wait on a Python-level primitive (the acquire of a
     * _thread.lock or _thread.RLock, SimpleQueue.get): the thread waits for another one
     * to act (release, set, put), as a GIL build's thread waits with the GIL released,
     * so it reads released, not parked (gt_gilhook__set_park_waits). */
    GT_PARK_WAIT_BEGIN = 9,
    GT_PARK_WAIT_END = 10, /* its wait returned: aux as GT_PARK_END's */
};

struct gt_gil_event {
    uint64_t ts;
    uint32_t kind;
    uint32_t aux;
};

/* OS scheduler stream. */
enum gt_sched_kind {
    GT_SCHED_OUT_PREEMPTED = 1, /* switched out while still runnable */
    GT_SCHED_OUT_BLOCKED = 2,   /* switched out to sleep or wait */
    GT_SCHED_IN = 3,            /* switched in */
};

struct gt_sched_event {
    uint64_t ts;
    uint32_t kind;
    uint32_t aux; /* backend specific: cpu or raw prev_state */
};

/* A run of `n` consecutive events of one stream's type. */
struct gt_chunk {
    const void *data;
    size_t n;
};

_Static_assert(sizeof(struct gt_call_event) == 16, "call events are 16 bytes");
_Static_assert(sizeof(struct gt_call_rec) == 8, "call records are 8 bytes");
_Static_assert(sizeof(struct gt_gil_event) == 16, "gil events are 16 bytes");
_Static_assert(sizeof(struct gt_sched_event) == 16, "sched events are 16 bytes");

#endif /* GT_EVENTS_H */

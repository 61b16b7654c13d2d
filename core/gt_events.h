/* SPDX-License-Identifier: MIT */
/* Event records shared by the tracer, the GIL probes, the scheduler probe and merge.
 * Plain C: no Python, no libbpf. Every stream is per thread and time-ordered. */
#ifndef GT_EVENTS_H
#define GT_EVENTS_H

#include <stddef.h>
#include <stdint.h>

/* Function-call stream: 16 bytes per event. `func` is a per-thread function id
 * (see gt_thread_input.func_map); `ts` is CLOCK_MONOTONIC ns when merge sees it. */
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
_Static_assert(sizeof(struct gt_gil_event) == 16, "gil events are 16 bytes");
_Static_assert(sizeof(struct gt_sched_event) == 16, "sched events are 16 bytes");

#endif /* GT_EVENTS_H */

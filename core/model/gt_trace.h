/* SPDX-License-Identifier: MIT */
/* The trace as data: what the recorders hand to the merge (functions, per-thread
 * streams) and what the merge hands to the emitters (spans, GIL and OS intervals,
 * summaries, GIL blame). Types only; the merge itself is analyze/merge.h. */
#ifndef GT_TRACE_H
#define GT_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "gt_events.h"

struct gt_clock_fit; /* gt_clock.h */

#define GT_NO_FUNC UINT32_MAX
/* Blame only: the holder's function is unknown (its calls were no longer recorded:
 * max_events reached), as opposed to GT_NO_FUNC (it ran no Python function). */
#define GT_UNKNOWN_FUNC (UINT32_MAX - 1)

enum gt_func_flags {
    GT_FUNC_C = 1, /* a C function (builtin / method descriptor) */
};

/* One unique function. Strings are borrowed and must outlive the result. */
struct gt_func {
    const char *name; /* Python: co_qualname (co_name before 3.11); C: "owner.name" */
    const char *file; /* Python: co_filename; C: "" */
    uint32_t line;    /* Python: co_firstlineno; C: 0 */
    uint32_t flags;   /* enum gt_func_flags */
};

enum gt_thread_input_flags {
    GT_THREAD_EXISTED_AT_START = 1, /* life starts at t0 (else at its first event) */
    GT_THREAD_ENDED = 2,            /* ended before t1: life ends at its last event */
    GT_THREAD_HELD_GIL_AT_START = 4,/* the thread that started the session: holds at t0 */
    GT_THREAD_HAS_SCHED = 8,        /* OS states were recorded for this thread */
    GT_THREAD_ALIVE_AT_START = 16,  /* a threading thread alive when the session started
                                       (its life still starts at its first event) */
    GT_THREAD_SERVICE = 32,         /* the host's own machinery (a notebook kernel's IOPub,
                                       shell channel, heartbeat): background */
    GT_THREAD_TOOL = 64,            /* giltracer's own (the live meter, the sampler, a
                                       child's spooler): in no view, its cost in gt_result.tool */
};

/* A thread's GIL or OS states past its stream's budget, as the aggregate stage kept them
 * (aggregate/gt_agg.h), in ns. Exact: time per state, acquisitions, drop requests and the
 * longest wait; coalesced: where in time, as `ntiles` tiles of `width_ns` from `base`
 * (each tile's time per state), at most GT_COALESCED_TILES of them, so a tile is at
 * least 1/2048 of the coalesced period. `lead` are the events before the state was known (the
 * merge decodes them after the stream's own); from `base` the state is known. */
#define GT_COALESCED_TILES 2048 /* a coalesced stream's tiles, at most */

struct gt_coalesced {
    const struct gt_gil_event *lead; /* GIL only: WANT / SWITCH_DONE, ns */
    size_t nlead;
    uint64_t base;        /* ns; ntiles 0: no state-bearing event after the lead */
    double width_ns;
    const uint64_t (*tiles)[3]; /* ns in each state (gt_gil_state or gt_os_state) */
    size_t ntiles;
    uint64_t first, last; /* ns of the first and the last event it took */
    uint32_t first_kind;  /* the first state-bearing event's kind */
    uint32_t state, aux;  /* after the last event */
    uint64_t events;      /* events it took */
    uint64_t acquisitions, drop_requests, longest_wait_ns; /* GIL only */
    uint64_t wait_since;  /* GIL, state WAIT: ns when that wait began (it is still open) */
};

/* A thread's calls past its call budget as the aggregate stage kept them: a call tree
 * (one node per call path, like _lsprof) with exact counts and self time split by the
 * thread's GIL state (aggregate/gt_ctree.h). Paths start at anchors: the frames open when
 * the budget ran out (anchor `up` = j: the frame j levels above the innermost one). */
#define GT_CNODE_ANCHOR UINT32_MAX

enum gt_cnode_state { /* a node's self time: gt_gil_state, or not known */
    GT_CNODE_RELEASED = 0,
    GT_CNODE_WAIT = 1,
    GT_CNODE_HELD = 2,
    GT_CNODE_UNKNOWN = 3, /* no GIL counters in this thread (the bpf probe, or none) */
};

struct gt_cnode {
    uint32_t parent; /* anchors: how many levels above the innermost open frame */
    uint32_t func;   /* GT_CNODE_ANCHOR for an anchor; else as the call records' */
    uint64_t calls;
    uint64_t self[4]; /* enum gt_cnode_state; ns once exported */
};

struct gt_calltree {
    const struct gt_cnode *nodes; /* parents before children */
    size_t n;
    uint32_t cur;   /* the node open at its last event */
    uint64_t first; /* ns of the first event it took (the budget ran out) */
    uint64_t last;  /* ns of its last event: from there the thread's time is cur's */
    uint64_t events;
    /* For the GIL blame, where in time: `ntiles` tiles of `tile_width_ns` from `tile_base`,
     * each the node (a Python call's, or an anchor) whose function held the GIL most of
     * it (GT_NO_FUNC: none), and `cur_py`, the node of cur's innermost Python function. */
    const uint32_t *tile_node;
    size_t ntiles;
    uint64_t tile_base;
    double tile_width_ns;
    uint32_t cur_py;
};

struct gt_thread_input {
    int32_t tid;       /* kernel TID: the merge key */
    int32_t pid;       /* process id (for multi-process bpf traces); 0 = the traced process */
    uint64_t ident;    /* threading.get_ident() */
    const char *name;  /* borrowed; may be NULL */
    uint32_t flags;    /* enum gt_thread_input_flags */
    uint32_t interp;   /* id of the (sub)interpreter it last ran in; 0 = the main one */
    /* Call stream: chunks of struct gt_call_rec, each starting with a time base (see
     * gt_events.h); `func` of each event maps through func_map (NULL = identity). */
    const struct gt_chunk *calls;
    size_t ncalls;
    const uint32_t *func_map;
    size_t func_map_len;
    uint64_t calls_truncated_at; /* ns when max_events stopped call recording; 0 = never */
    const struct gt_chunk *gil;
    size_t ngil;
    const struct gt_chunk *sched;
    size_t nsched;
    /* The GIL and OS events past their streams' budget (NULL: none). */
    const struct gt_coalesced *gil_more;
    const struct gt_coalesced *sched_more;
    const struct gt_calltree *calls_more; /* the calls past the budget (NULL: none) */
    /* Keep last: ns of the first kept call event; calls_more then holds the events
     * before it (from the thread's first), and the stream starts with the frames open
     * there. 0: the first events were kept. */
    uint64_t calls_kept_from;
};

struct gt_trace_input {
    uint64_t t0, t1; /* session bounds, CLOCK_MONOTONIC ns */
    const struct gt_func *funcs;
    uint32_t nfuncs;
    const struct gt_thread_input *threads;
    size_t nthreads;
    int gil_known; /* a GIL probe ran; else GIL intervals/summaries are left empty */
    /* The call records' timestamps are ticks to convert with this fit; NULL: they are
     * ns already (every other stream is ns when merge sees it). */
    const struct gt_clock_fit *calls_fit;
    /* A free-threaded build (no GIL): the GIL streams carry the park probe's events
     * (GT_PARK_*), and the "GIL" intervals, summaries and blame mean lock contention:
     * HELD = running (not parked), WAIT = parked (aux = the waker's tid, 0 unknown),
     * blame = waiter <- waker in the waker's function. Needs gil_known. */
    int free_threaded;
};

enum gt_span_flags {
    GT_SPAN_CLIPPED_START = 1, /* was already open at t0 (or at the thread's first event) */
    GT_SPAN_CLIPPED_END = 2,   /* still open at t1 / thread end / truncation */
    GT_SPAN_UNWIND = 4,        /* left by an exception */
    GT_SPAN_C = 8,             /* a C function */
};

struct gt_span {
    uint64_t start, end;
    uint32_t func; /* global function id */
    uint16_t depth;
    uint16_t flags; /* enum gt_span_flags */
};

enum gt_gil_state {
    GT_GIL_STATE_RELEASED = 0,
    GT_GIL_STATE_WAIT = 1,
    GT_GIL_STATE_HELD = 2,
};
#define GT_GIL_NSTATES 3 /* (a state read from outside, e.g. a spool, is checked below it) */

enum gt_os_state {
    GT_OS_ON_CPU = 0,
    GT_OS_PREEMPTED = 1, /* runnable, waiting for a CPU */
    GT_OS_BLOCKED = 2,   /* sleeping / waiting */
};

struct gt_interval {
    uint64_t start, end;
    uint32_t state; /* gt_gil_state or gt_os_state */
    uint32_t aux;   /* GIL intervals: the id of the interpreter whose GIL it is */
};

struct gt_summary {
    uint64_t wall_ns; /* traced life of the thread */
    uint64_t held_ns, wait_ns, released_ns; /* add up to wall_ns when GIL is known */
    int64_t off_cpu_ns;   /* -1 = unknown */
    int64_t preempted_ns; /* -1 = unknown; part of off_cpu_ns */
    uint64_t acquisitions;
    uint64_t longest_wait_ns;
    uint64_t drop_requests;
    double held_pct, wait_pct, released_pct; /* of wall_ns, add up to 100 */
};

struct gt_thread_result {
    int32_t tid, pid;
    uint64_t ident;
    uint32_t interp;          /* the subinterpreter whose GIL it held or waited for during
                               * half its life or more (0: none); without a GIL probe, as
                               * in the input */
    const char *name;         /* borrowed from the input */
    uint64_t start_ns, end_ns;/* traced life */
    struct gt_span *spans;    /* sorted by start; a parent precedes its children */
    size_t nspans;
    struct gt_interval *gil;  /* contiguous, covering [start_ns, end_ns] */
    size_t ngil;
    struct gt_interval *os;   /* empty when unknown */
    size_t nos;
    int has_sched;
    struct gt_summary summary;
    /* The cell's scope, one rule for every view (set by the merge). A background thread
     * was not started during the trace (its first call was open when first seen; without
     * calls: it was alive at the start, or is no threading thread) and held the GIL under
     * 1 % of its life or under 1 ms (in a
     * kernel: the shell channel, IOPub, heartbeat, pollers). In the thread that started
     * the session, the first outer_depth depths are frames outside the traced code (open
     * at the start, runpy's, or C functions); the innermost spans [outer_start, outer_end]. */
    int background;
    uint16_t outer_depth;
    uint64_t outer_start, outer_end;
    /* From here on its GIL (OS) intervals are coalesced tiles, 0 = none: exact totals, the
     * order inside a tile drawn as held, waiting, released (on CPU, preempted, blocked). */
    uint64_t gil_coalesced_from, os_coalesced_from;
    /* The calls past the budget (calls_more), funcs global ids (a node whose function is
     * unknown is an anchor's child with GT_NO_FUNC): the profile grafts it at
     * calls_truncated_at. */
    struct gt_cnode *calls_more;
    size_t ncalls_more;
    uint32_t calls_more_cur;
    uint64_t calls_more_last, calls_truncated_at;
    /* Keep last: the calls before this (calls_more, grafted at the root) were folded;
     * the spans show the last events from here. 0: the first were kept. */
    uint64_t calls_kept_from;
};

/* Time thread `waiter_tid` waited for the GIL while `holder_tid` held it and
 * was in function `func` (innermost Python function; GT_NO_FUNC if none;
 * GT_UNKNOWN_FUNC after the holder's calls were truncated). */
struct gt_blame {
    int32_t waiter_tid, holder_tid;
    uint32_t func;
    uint32_t count; /* number of waits that overlapped this (holder, func) */
    uint64_t wait_ns;
};

/* What giltracer's own threads (GT_THREAD_TOOL) cost the traced code: they are in no
 * view (not in gt_result.threads, no blame row holds or waits on them), so their use
 * of the GIL is counted here, once. */
struct gt_tool_cost {
    struct gt_thread_result *threads; /* their results, in input order */
    size_t nthreads;
    uint64_t caused_ns; /* other threads' GIL wait (parks they woke) while one held it */
    uint64_t caused_waits; /* those waits, one per (wait, tool thread) that overlapped */
};

struct gt_result {
    uint64_t t0, t1;
    const struct gt_func *funcs; /* borrowed from the input */
    uint32_t nfuncs;
    struct gt_thread_result *threads; /* in input order, giltracer's own left out (tool) */
    size_t nthreads;
    struct gt_blame *blame; /* sorted by wait_ns, largest first */
    size_t nblame;
    struct gt_tool_cost tool; /* giltracer's own threads, out of `threads` and `blame` */
    int gil_known;
    int free_threaded; /* as in the input: the GIL intervals are park intervals */
};

#endif /* GT_TRACE_H */

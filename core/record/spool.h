/* SPDX-License-Identifier: MIT */
/* The child-process spool: a child process's recorded streams (its merge input) written
 * into its parent's session folder when the child's session ends, and read back by the
 * parent, which merges every process on one clock. The file is the child's
 * gt_trace_input as it was handed to the merge: call records still in ticks (the tick
 * source is system-wide: TSC or CLOCK_MONOTONIC; the parent's fit converts them), GIL and
 * scheduler events in CLOCK_MONOTONIC ns. Native byte order: parent and child share the
 * machine. Plain C, no Python. */
#ifndef GT_SPOOL_H
#define GT_SPOOL_H

#include <stdint.h>
#include <stdio.h>

#include "gt_trace.h"

struct gt_spool_meta {
    int32_t pid, ppid;
    uint64_t t0, t1;          /* the child's session bounds, ns */
    uint64_t event_count;     /* call events recorded */
    uint64_t dropped_events;  /* call events not recorded (max_events) */
    uint64_t gil_dropped, sched_lost;
    char cmd[200];            /* the command line, NUL-separated arguments joined by ' ' */
    uint32_t partial;         /* a checkpoint written while the child recorded (its end
                                 was never written if it is still the spool) */
    uint32_t interval_ms;     /* a checkpoint's: the child wrote one every ~interval_ms */
    /* Events past the budget the child kept in its aggregates (the final spool carries
     * them: each thread's gil_more, sched_more, calls_more; a checkpoint none). */
    uint64_t calls_aggregated, gil_aggregated, sched_aggregated;
};

/* A thread's aggregates read back (its gil_more, sched_more, calls_more point here). */
struct gt_spool_more {
    struct gt_coalesced gil, sched;
    struct gt_calltree calls;
};

/* A spool read back: a merge input the parent appends to its own. */
struct gt_spool {
    struct gt_spool_meta meta;
    struct gt_func *funcs;
    uint32_t nfuncs;
    struct gt_thread_input *threads; /* one chunk per stream; func_map maps into funcs */
    size_t nthreads;
    struct gt_chunk *chunks; /* three per thread: calls, gil, sched */
    struct gt_spool_more *more; /* one per thread */
    void *arena; /* the file: every string and record */
    struct gt_spool **parts; /* a joined one's checkpoints (gt_spool__join), owned */
    size_t nparts;
};

/**
 * gt_spool__write() - writes `ti` (its funcs, threads, streams and aggregates: in ns) and
 * `m` to `f`.
 * A thread flagged GT_THREAD_HELD_GIL_AT_START gets a GT_GIL_ACQUIRED at ti->t0 first
 * (in the parent's merge its life starts at its first event, not at the parent's t0).
 * Returns 0 or -errno (-EIO on a write error).
 */
int gt_spool__write(FILE *f, const struct gt_trace_input *ti, const struct gt_spool_meta *m);

/**
 * gt_spool__read() - reads a spool written by gt_spool__write(); `size` is the file's
 * size (no count may claim more than it holds). Returns 0 and sets *out (free with
 * gt_spool__free), or -errno (-EINVAL: not a spool or truncated, -ENOMEM).
 */
int gt_spool__read(FILE *f, uint64_t size, struct gt_spool **out);

/**
 * gt_spool__join() - one spool of a child's checkpoints parts[0..n-1] (in order: each
 * holds what its threads recorded since the one before, its threads a prefix of the
 * next's in registration order, its function maps covering the earlier ones'). On
 * success *out owns the parts; on error they stay the caller's. Returns 0 or -errno
 * (-EINVAL: the parts do not follow one another).
 */
int gt_spool__join(struct gt_spool **parts, size_t n, struct gt_spool **out);

/** gt_spool__free() - accepts NULL. */
void gt_spool__free(struct gt_spool *sp);

#endif /* GT_SPOOL_H */

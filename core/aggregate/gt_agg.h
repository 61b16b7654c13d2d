/* SPDX-License-Identifier: MIT */
/* The aggregate stage: what a stream's producer does with its events once the stream's
 * budget is spent. GIL and OS-state events go on into a per-stream aggregate of fixed
 * size: exact time per state and counts, and where in time as tiles that coarsen (by
 * doubling their width) to stay at most GT_AGG_TILES. It runs in the producer (a GIL
 * hook, the bpf drain, the sched poller): no lock, no Python, one allocation per stream.
 * The session turns an aggregate into the merge's gt_coalesced (gt_trace.h). */
#ifndef GT_AGG_H
#define GT_AGG_H

#include <stdint.h>

#include "gt_trace.h"
#include "registry.h"

#define GT_AGG_TILES GT_COALESCED_TILES
#define GT_AGG_LEAD 8
#define GT_AGG_WIDTH0 1024 /* first tile width, in the stream's time unit */

enum gt_agg_kind {
    GT_AGG_GIL = 1, /* gt_gil_kind events, gt_gil_state states */
    GT_AGG_OS = 2,  /* gt_sched_kind events, gt_os_state states */
};

struct gt_agg {
    uint32_t kind;  /* enum gt_agg_kind */
    int known;      /* the state is known (from `base` on) */
    uint32_t state, aux;
    uint32_t first_kind;
    uint64_t first, last; /* the first and the last event's time */
    uint64_t base, width;
    size_t ntiles;
    uint64_t wait_since;
    uint64_t events, acquisitions, drop_requests, longest_wait;
    struct gt_gil_event lead[GT_AGG_LEAD];
    size_t nlead;
    uint64_t tiles[GT_AGG_TILES][3];
};

/* A fresh aggregate of `kind`. */
void gt_agg__init(struct gt_agg *a, uint32_t kind);

/* Takes one event (times non-decreasing; an earlier one counts at the last one's). */
void gt_agg__add(struct gt_agg *a, uint64_t ts, uint32_t kind, uint32_t aux);

/* The overflow sinks to install with gt_registry__set_overflow: the stream's aggregate
 * (its `overflow`) is allocated at its first refused event. -ENOMEM: dropped. */
int gt_agg__gil_sink(struct gt_stream *s, uint64_t ts, uint32_t kind, uint32_t aux);
int gt_agg__os_sink(struct gt_stream *s, uint64_t ts, uint32_t kind, uint32_t aux);

/* `a` as the merge's input, its times mapped through `to_ns` (NULL: they are ns) and
 * its durations scaled by `ns_per_unit`. `lead` and `tiles` are filled into the
 * caller's storage (GT_AGG_LEAD events, GT_AGG_TILES tiles). */
void gt_agg__export(const struct gt_agg *a, uint64_t (*to_ns)(uint64_t t, const void *ctx),
                    const void *ctx, double ns_per_unit, struct gt_coalesced *out,
                    struct gt_gil_event *lead, uint64_t (*tiles)[3]);

#endif /* GT_AGG_H */

/* SPDX-License-Identifier: MIT */
/* Packing at save: runs of spans shorter than a pixel at full zoom-out become one record. */
#ifndef GT_PACK_H
#define GT_PACK_H

#include "gt_trace.h"

#include <stddef.h>
#include <stdint.h>

/* A packed record's flag (beside enum gt_span_flags): it stands for several calls. */
#define GT_SPAN_PACKED 16
/* The page's resolution: a pixel at full zoom-out is the trace's length / GT_PACK_PIXELS. */
#define GT_PACK_PIXELS 4096
/* Threads with more spans than this are packed in the page; smaller ones go as recorded. */
#define GT_PACK_MIN_SPANS 200000

/* Walks a thread's spans (pre-order, as the merge gives them) and hands out records: a
 * span at least px_ns long as it is; a run of sibling spans each shorter than px_ns whose
 * starts fall into the same pixel (origin + k * px_ns), with all their descendants, as one
 * record with GT_SPAN_PACKED: from the first start to the latest end, at the run's depth,
 * the function of its longest span. px_ns 0: nothing is packed. */
struct gt_pack {
    const struct gt_span *s;
    size_t n, i;
    uint64_t origin, px;
};

void gt_pack__init(struct gt_pack *p, const struct gt_span *s, size_t n, uint64_t origin, uint64_t px_ns);
/* The next record into *out and the calls it stands for (1: a span as recorded) into
 * *calls: 1, or 0 past the last one. */
int gt_pack__next(struct gt_pack *p, struct gt_span *out, uint64_t *calls);

/* Per-function figures of the spans as recorded, the viewer's Top functions of a packed
 * thread: calls, total (inclusive, recursion counted once), self. */
struct gt_fstat {
    uint64_t calls;
    int64_t total, self;
    uint32_t active;
};
/* out: nfuncs + 1 entries, zeroed by the caller; a func past nfuncs counts at nfuncs
 * (the viewer's "unknown function"). 0 or -ENOMEM. */
int gt_pack__stats(const struct gt_span *s, size_t n, uint32_t nfuncs, struct gt_fstat *out);

#endif

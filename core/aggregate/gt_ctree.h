/* SPDX-License-Identifier: MIT */
/* The aggregate stage's call tree: a thread's calls past its call budget, one node per
 * call path (parent path, function) with exact counts and self time split by the
 * thread's GIL state, like _lsprof (bounded by distinct call paths, not by time). Fed
 * by the call stream's overflow sink in the traced thread itself: no lock. */
#ifndef GT_CTREE_H
#define GT_CTREE_H

#include <stddef.h>
#include <stdint.h>

#include "gt_trace.h"
#include "threads.h"

struct gt_ctree {
    struct gt_cnode *nodes;
    size_t n, cap;
    /* Per node, the child looked up last and its function: a loop calls the same child
     * again and again (no hash lookup then). */
    uint32_t *hint, *hint_func;
    uint64_t *keys; /* open addressing (parent << 32 | func) + 1 -> node; 0 = free */
    uint32_t *vals;
    size_t hcap;
    uint32_t cur;
    uint64_t first, last, events;
    uint64_t cum_at_last[3]; /* the thread's GIL counters at `last` */
    int failed;              /* out of memory once: later time goes to `cur` */
};

/* 0 or -ENOMEM. */
int gt_ctree__init(struct gt_ctree *c);
void gt_ctree__free(struct gt_ctree *c);

/* One call event (gt_call_kind, maybe | GT_CALL_OPEN_AT_START) at `ts` (the thread's
 * ticks); `cum` are the thread's GIL counters now (NULL: unknown). */
void gt_ctree__add(struct gt_ctree *c, uint64_t ts, uint32_t func, uint32_t kind, const uint64_t cum[3]);

/* The call stream's overflow sink (the stream's `overflow` is its tree) and what frees
 * it: install both with gt_registry__set_overflow(GT_BUDGET_CALLS, ...). */
int gt_ctree__sink(struct gt_stream *s, uint64_t ts, uint32_t func, uint32_t kind);
void gt_ctree__release(void *tree);

#endif /* GT_CTREE_H */

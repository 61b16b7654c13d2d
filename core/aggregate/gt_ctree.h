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
#include "registry.h"

/* Where in time past the budget, for the GIL blame: at most GT_CTREE_TILES tiles of
 * 2^shift ticks from `tbase` (doubling their width to stay in that many), each naming
 * the node of the Python function (a Python call's node, or an anchor) that held the
 * GIL most of the tile: a weighted majority vote, O(1) per event, exact when one
 * function held it more than half the tile's held time. */
#define GT_CTREE_TILES 2048
#define GT_CTREE_SHIFT0 16

struct gt_ctile {
    uint32_t node;   /* UINT32_MAX: no vote yet */
    uint32_t pad;
    uint64_t weight; /* the vote's margin, ticks */
};

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
    uint32_t *pynode;        /* per node: the node of its innermost Python function */
    uint64_t tbase;
    uint32_t tshift;
    size_t ntiles;
    struct gt_ctile *tiles;  /* GT_CTREE_TILES */
    size_t tile_i;           /* the tile voted in last, which ends at `tile_end` */
    uint64_t tile_end;
};

/* 0 or -ENOMEM. */
int gt_ctree__init(struct gt_ctree *c);
void gt_ctree__free(struct gt_ctree *c);

/* The node of `node`'s innermost Python function (itself for a Python call or an anchor). */
static inline uint32_t gt_ctree__pynode(const struct gt_ctree *c, uint32_t node)
{
    return node < c->n ? c->pynode[node] : UINT32_MAX;
}

/* One call event (gt_call_kind, maybe | GT_CALL_OPEN_AT_START) at `ts` (the thread's
 * ticks); `cum` are the thread's GIL counters now (NULL: unknown). */
void gt_ctree__add(struct gt_ctree *c, uint64_t ts, uint32_t func, uint32_t kind, const uint64_t cum[3]);

/* The call stream's overflow sink (the stream's `overflow` is its tree) and what frees
 * it: install both with gt_registry__set_overflow(GT_BUDGET_CALLS, ...). */
int gt_ctree__sink(struct gt_stream *s, uint64_t ts, uint32_t func, uint32_t kind);
void gt_ctree__release(void *tree);

/* The call stream's fold for keep last (gt_registry__set_recycle): its oldest events,
 * recorded earlier, into the same tree. Their time's GIL split is not known then (the
 * thread's counters are at now): it is GT_CNODE_UNKNOWN, which the profile splits in the
 * thread's own GIL proportions over that stretch. */
int gt_ctree__fold(struct gt_stream *s, uint64_t ts, uint32_t func, uint32_t kind);

#endif /* GT_CTREE_H */

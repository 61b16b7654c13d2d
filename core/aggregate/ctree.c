/* SPDX-License-Identifier: MIT */
#include "gt_ctree.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define ANCHOR_KEY(up) ((uint64_t)UINT32_MAX << 32 | (up))

int gt_ctree__init(struct gt_ctree *c)
{
    memset(c, 0, sizeof(*c));
    c->cap = 64;
    c->hcap = 128;
    c->nodes = calloc(c->cap, sizeof(*c->nodes));
    c->hint = calloc(c->cap, sizeof(*c->hint));
    c->hint_func = calloc(c->cap, sizeof(*c->hint_func));
    c->keys = calloc(c->hcap, sizeof(*c->keys));
    c->vals = calloc(c->hcap, sizeof(*c->vals));
    c->pynode = calloc(c->cap, sizeof(*c->pynode));
    c->tiles = malloc(GT_CTREE_TILES * sizeof(*c->tiles));
    c->tshift = GT_CTREE_SHIFT0;
    if (c->tiles)
        for (size_t i = 0; i < GT_CTREE_TILES; i++)
            c->tiles[i] = (struct gt_ctile){.node = UINT32_MAX};
    if (!c->nodes || !c->hint || !c->hint_func || !c->keys || !c->vals || !c->pynode || !c->tiles) {
        gt_ctree__free(c);
        return -ENOMEM;
    }
    return 0;
}

void gt_ctree__free(struct gt_ctree *c)
{
    free(c->nodes);
    free(c->hint);
    free(c->hint_func);
    free(c->keys);
    free(c->vals);
    free(c->pynode);
    free(c->tiles);
    memset(c, 0, sizeof(*c));
}

static size_t slot(uint64_t key, size_t hcap)
{
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    return (size_t)(h ^ (h >> 29)) & (hcap - 1);
}

static int rehash(struct gt_ctree *c)
{
    size_t hcap = 2 * c->hcap;
    uint64_t *keys = calloc(hcap, sizeof(*keys));
    uint32_t *vals = calloc(hcap, sizeof(*vals));
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return -ENOMEM;
    }
    for (size_t i = 0; i < c->hcap; i++) {
        if (!c->keys[i])
            continue;
        size_t s = slot(c->keys[i] - 1, hcap);
        while (keys[s])
            s = (s + 1) & (hcap - 1);
        keys[s] = c->keys[i];
        vals[s] = c->vals[i];
    }
    free(c->keys);
    free(c->vals);
    c->keys = keys;
    c->vals = vals;
    c->hcap = hcap;
    return 0;
}

/* The node for `key`, made (parent, func) if new; UINT32_MAX when out of memory. `c_call`:
 * a C function's node, whose Python function is its caller's. */
static uint32_t node_for(struct gt_ctree *c, uint64_t key, uint32_t parent, uint32_t func, int c_call)
{
    size_t s = slot(key, c->hcap);
    for (; c->keys[s]; s = (s + 1) & (c->hcap - 1))
        if (c->keys[s] == key + 1)
            return c->vals[s];
    if (c->n == c->cap) {
        struct gt_cnode *q = c->n < UINT32_MAX / 4 ? realloc(c->nodes, 2 * c->cap * sizeof(*q)) : NULL;
        if (!q)
            return UINT32_MAX;
        c->nodes = q;
        uint32_t *h = realloc(c->hint, 2 * c->cap * sizeof(*h));
        if (!h)
            return UINT32_MAX;
        c->hint = h;
        uint32_t *hf = realloc(c->hint_func, 2 * c->cap * sizeof(*hf));
        if (!hf)
            return UINT32_MAX;
        c->hint_func = hf;
        uint32_t *pn = realloc(c->pynode, 2 * c->cap * sizeof(*pn));
        if (!pn)
            return UINT32_MAX;
        c->pynode = pn;
        c->cap *= 2;
    }
    uint32_t id = (uint32_t)c->n++;
    c->nodes[id] = (struct gt_cnode){.parent = parent, .func = func};
    c->hint[id] = UINT32_MAX;
    c->hint_func[id] = UINT32_MAX;
    c->pynode[id] = c_call && parent < id ? c->pynode[parent] : id;
    c->keys[s] = key + 1;
    c->vals[s] = id;
    if (2 * c->n > c->hcap && rehash(c) < 0)
        c->failed = 1; /* the table is full enough still: lookups work, no new nodes */
    return id;
}

static void vote(struct gt_ctile *t, uint32_t node, uint64_t w)
{
    if (t->node == node || t->weight == 0) {
        t->node = node;
        t->weight += w;
    } else if (t->weight >= w) {
        t->weight -= w;
    } else {
        t->node = node;
        t->weight = w - t->weight;
    }
}

/* Halves the tiles in use by doubling their width; a pair's votes merge as votes. */
static void coarsen(struct gt_ctree *c)
{
    size_t n = (c->ntiles + 1) / 2;
    for (size_t i = 0; i < n; i++) {
        struct gt_ctile t = c->tiles[2 * i];
        if (2 * i + 1 < c->ntiles && c->tiles[2 * i + 1].node != UINT32_MAX)
            vote(&t, c->tiles[2 * i + 1].node, c->tiles[2 * i + 1].weight);
        c->tiles[i] = t;
    }
    for (size_t i = n; i < c->ntiles; i++)
        c->tiles[i] = (struct gt_ctile){.node = UINT32_MAX};
    c->ntiles = n;
    c->tshift++;
    c->tile_end = 0; /* (recomputed by the caller) */
}

/* tiles_vote across a tile's end (or the first time): coarsens as needed, spreads the
 * votes over the tiles [from, to) covers by their share of it. */
static __attribute__((noinline)) void tiles_vote_slow(struct gt_ctree *c, uint64_t from, uint64_t to,
                                                      uint64_t held)
{
    uint32_t node = c->pynode[c->cur];
    while (((to - 1 - c->tbase) >> c->tshift) >= GT_CTREE_TILES)
        coarsen(c);
    size_t i = (size_t)((from - c->tbase) >> c->tshift), j = (size_t)((to - 1 - c->tbase) >> c->tshift);
    double per = (double)held / (double)(to - from);
    for (size_t k = i; k <= j; k++) {
        uint64_t a = c->tbase + ((uint64_t)k << c->tshift), b = a + ((uint64_t)1 << c->tshift);
        a = a > from ? a : from;
        b = b < to ? b : to;
        vote(&c->tiles[k], node, i == j ? held : (uint64_t)((double)(b - a) * per + 0.5));
    }
    if (j + 1 > c->ntiles)
        c->ntiles = j + 1;
    c->tile_i = j;
    c->tile_end = c->tbase + ((uint64_t)(j + 1) << c->tshift);
}

/* `held` of the ticks [from, to) were the open node's with the GIL held: its votes. */
static inline void tiles_vote(struct gt_ctree *c, uint64_t from, uint64_t to, uint64_t held)
{
    if (!held || to <= from)
        return;
    if (__builtin_expect(to <= c->tile_end, 1)) /* (times only grow: `from` is in it too) */
        vote(&c->tiles[c->tile_i], c->pynode[c->cur], held);
    else
        tiles_vote_slow(c, from, to, held);
}

/* [last, ts) to the open node, split by the GIL time the counters saw meanwhile. */
static void account(struct gt_ctree *c, uint64_t ts, const uint64_t cum[3])
{
    uint64_t d = ts > c->last ? ts - c->last : 0, known = 0, held = d;
    struct gt_cnode *nd = &c->nodes[c->cur];
    uint64_t held_before = nd->self[GT_CNODE_HELD];
    if (cum) {
        for (int k = 0; k < 3; k++) {
            uint64_t dk = cum[k] >= c->cum_at_last[k] ? cum[k] - c->cum_at_last[k] : 0;
            if (dk > d - known)
                dk = d - known;
            nd->self[k] += dk;
            known += dk;
            c->cum_at_last[k] = cum[k];
        }
        held = nd->self[GT_CNODE_HELD] - held_before;
    }
    nd->self[GT_CNODE_UNKNOWN] += d - known;
    tiles_vote(c, c->last, c->last + d, held);
    if (ts > c->last)
        c->last = ts;
}

void gt_ctree__add(struct gt_ctree *c, uint64_t ts, uint32_t func, uint32_t kind, const uint64_t cum[3])
{
    if (c->events++ == 0) {
        c->first = c->last = c->tbase = ts;
        if (cum)
            memcpy(c->cum_at_last, cum, sizeof(c->cum_at_last));
        c->cur = node_for(c, ANCHOR_KEY(0), 0, GT_CNODE_ANCHOR, 0); /* (the table has room) */
    }
    account(c, ts, cum);
    uint32_t next = UINT32_MAX;
    switch (kind & GT_CALL_KIND_MASK) {
    case GT_CALL:
    case GT_CCALL:
        if (c->hint_func[c->cur] == func)
            next = c->hint[c->cur];
        else if (func < GT_CALL_REC_FUNC_LIMIT && !c->failed &&
                 (next = node_for(c, (uint64_t)c->cur << 32 | func, c->cur, func,
                                  (kind & GT_CALL_KIND_MASK) == GT_CCALL)) != UINT32_MAX) {
            c->hint[c->cur] = next;
            c->hint_func[c->cur] = func;
        }
        if (next != UINT32_MAX && !(kind & GT_CALL_OPEN_AT_START)) /* (no call: open at the start) */
            c->nodes[next].calls++;
        break;
    case GT_RETURN:
    case GT_UNWIND:
    case GT_CRETURN:
    case GT_CRAISE:
        if (c->nodes[c->cur].func == GT_CNODE_ANCHOR) {
            /* A frame open when the budget ran out returned: its caller's anchor. */
            uint32_t up = c->nodes[c->cur].parent + 1;
            if (!c->failed)
                next = node_for(c, ANCHOR_KEY(up), up, GT_CNODE_ANCHOR, 0);
        } else {
            next = c->nodes[c->cur].parent;
        }
        break;
    default:
        break;
    }
    if (next != UINT32_MAX)
        c->cur = next;
    else if ((kind & GT_CALL_KIND_MASK) != 0 && (kind & GT_CALL_KIND_MASK) <= GT_CRAISE)
        c->failed = 1; /* no memory for a new path: later time stays with the open node */
}

static struct gt_ctree *stream_tree(struct gt_stream *s)
{
    struct gt_ctree *c = s->overflow;
    if (!c) {
        c = malloc(sizeof(*c));
        if (!c || gt_ctree__init(c) < 0) {
            free(c);
            return NULL;
        }
        s->overflow = c;
    }
    return c;
}

int gt_ctree__fold(struct gt_stream *s, uint64_t ts, uint32_t func, uint32_t kind)
{
    struct gt_ctree *c = stream_tree(s);
    if (!c)
        return -ENOMEM;
    gt_ctree__add(c, ts, func, kind, NULL);
    return 0;
}

int gt_ctree__sink(struct gt_stream *s, uint64_t ts, uint32_t func, uint32_t kind)
{
    struct gt_ctree *c = stream_tree(s);
    if (!c)
        return -ENOMEM;
    /* The stream is its thread's `calls`: the thread's GIL counters are beside it. */
    struct gt_thread *t = (struct gt_thread *)((char *)s - offsetof(struct gt_thread, calls));
    uint64_t cum[3];
    const uint64_t *pc = NULL;
    /* Its own account (the thread is its one writer unless gt_account_ns), by
     * gt_gil_state. */
    int st = t->gil_live;
    if (st != GT_GIL_LIVE_UNKNOWN && !__atomic_load_n(&gt_account_ns, __ATOMIC_RELAXED)) {
        cum[GT_GIL_STATE_RELEASED] = t->gil_ticks[GT_GIL_LIVE_RELEASED];
        cum[GT_GIL_STATE_WAIT] = t->gil_ticks[GT_GIL_LIVE_WAITING];
        cum[GT_GIL_STATE_HELD] = t->gil_ticks[GT_GIL_LIVE_HELD];
        if (ts > t->gil_since)
            cum[st == GT_GIL_LIVE_HELD ? GT_GIL_STATE_HELD
                : st == GT_GIL_LIVE_WAITING ? GT_GIL_STATE_WAIT : GT_GIL_STATE_RELEASED] +=
                ts - t->gil_since;
        pc = cum;
    }
    gt_ctree__add(c, ts, func, kind, pc);
    return 0;
}

void gt_ctree__release(void *tree)
{
    if (tree)
        gt_ctree__free(tree);
    free(tree);
}

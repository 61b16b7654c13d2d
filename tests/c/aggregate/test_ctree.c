/* SPDX-License-Identifier: MIT */
/* Unit tests for core/aggregate/ctree.c and its graft into the profile: calls past the
 * budget become call paths with exact counts and self time split by the GIL counters;
 * returns below the tree's start climb the anchors (the frames open when it began). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gt_ctree.h"
#include "profile.h"

static size_t find(const struct gt_ctree *c, uint32_t parent, uint32_t func)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->nodes[i].parent == parent && c->nodes[i].func == func)
            return i;
    return SIZE_MAX;
}

static void test_paths_and_anchors(void)
{
    struct gt_ctree c;
    CHECK(gt_ctree__init(&c) == 0, "init");
    uint64_t cum[3] = {0, 0, 0}; /* released, wait, held */
    /* open frames A > B at the start; B calls f twice (f calls g), returns; A calls f. */
    gt_ctree__add(&c, 100, 7, GT_CALL, cum);       /* f under anchor 0 (B) */
    cum[2] += 10;
    gt_ctree__add(&c, 110, 8, GT_CALL, cum);       /* g under f */
    cum[0] += 30;                                   /* g released the GIL for 30 */
    gt_ctree__add(&c, 140, 8, GT_RETURN, cum);
    cum[2] += 5;
    gt_ctree__add(&c, 145, 7, GT_RETURN, cum);
    gt_ctree__add(&c, 150, 7, GT_CALL, cum);
    cum[2] += 10;
    gt_ctree__add(&c, 160, 7, GT_RETURN, cum);
    cum[1] += 20;                                   /* B waited 20, then returned */
    gt_ctree__add(&c, 180, 0, GT_RETURN, cum);      /* B returns: anchor 1 (A) */
    gt_ctree__add(&c, 190, 7, GT_CALL, NULL);       /* no counters: unknown */
    gt_ctree__add(&c, 200, 7, GT_RETURN, NULL);
    size_t a0 = find(&c, 0, GT_CNODE_ANCHOR), a1 = find(&c, 1, GT_CNODE_ANCHOR);
    CHECK(a0 == 0 && a1 != SIZE_MAX, "anchors %zu %zu", a0, a1);
    size_t f = find(&c, (uint32_t)a0, 7), g = find(&c, (uint32_t)f, 8), f1 = find(&c, (uint32_t)a1, 7);
    CHECK(f != SIZE_MAX && g != SIZE_MAX && f1 != SIZE_MAX, "nodes %zu %zu %zu", f, g, f1);
    if (f == SIZE_MAX || g == SIZE_MAX || f1 == SIZE_MAX || a1 == SIZE_MAX)
        return;
    CHECK(c.nodes[f].calls == 2 && c.nodes[g].calls == 1 && c.nodes[f1].calls == 1, "calls");
    CHECK(c.nodes[f].self[2] == 25 && c.nodes[f].self[0] == 0, "f self held %llu",
          (unsigned long long)c.nodes[f].self[2]);
    CHECK(c.nodes[g].self[0] == 30 && c.nodes[g].self[2] == 0, "g released");
    CHECK(c.nodes[a0].self[1] == 20, "anchor 0 waited %llu", (unsigned long long)c.nodes[a0].self[1]);
    CHECK(c.nodes[f1].self[GT_CNODE_UNKNOWN] == 10, "no counters: unknown");
    CHECK(c.cur == a1 && c.first == 100 && c.last == 200 && c.events == 9, "cur/first/last");

    /* Grafted into a thread whose spans A [0, 100] > B [50, 100] are clipped at 100. */
    struct gt_func funcs[9];
    for (int i = 0; i < 9; i++)
        funcs[i] = (struct gt_func){"fn", "x.py", (uint32_t)i, 0};
    struct gt_span spans[] = {{0, 100, 1, 0, GT_SPAN_CLIPPED_END}, {50, 100, 2, 1, GT_SPAN_CLIPPED_END}};
    struct gt_thread_result tr = {.tid = 1, .start_ns = 0, .end_ns = 250, .spans = spans, .nspans = 2,
                                  .calls_more = c.nodes, .ncalls_more = c.n, .calls_more_cur = c.cur,
                                  .calls_more_last = 200, .calls_truncated_at = 100};
    tr.summary.wall_ns = 250;
    struct gt_result r = {.t0 = 0, .t1 = 250, .funcs = funcs, .nfuncs = 9, .threads = &tr, .nthreads = 1};
    struct gt_ptree t = {0};
    CHECK(gt_profile__thread(&r, 0, 0, &t) == 0, "profile");
    uint64_t tot[9] = {0}, self[9] = {0}, calls[9] = {0}, waiting_b = 0;
    for (size_t i = 1; i < t.nnodes; i++) {
        const struct gt_pnode *nd = &t.nodes[i];
        tot[nd->func] += nd->total_ns;
        self[nd->func] += nd->self_ns;
        calls[nd->func] += nd->calls;
        if (nd->func == 2)
            waiting_b = nd->self[GT_PSTATE_WAITING];
    }
    CHECK(t.nnodes && t.nodes[0].total_ns == 250, "root %llu", t.nnodes ? (unsigned long long)t.nodes[0].total_ns : 0ull);
    CHECK(tot[1] == 250 && self[1] == 110, "A total %llu self %llu", (unsigned long long)tot[1],
          (unsigned long long)self[1]);
    CHECK(tot[2] == 130 && waiting_b == 20, "B total %llu waiting %llu", (unsigned long long)tot[2],
          (unsigned long long)waiting_b);
    CHECK(calls[7] == 3 && calls[8] == 1 && self[8] == 30, "f calls %llu g calls %llu",
          (unsigned long long)calls[7], (unsigned long long)calls[8]);
    gt_ptree__free(&t);
    gt_ctree__free(&c);
}

/* The tiles name, per stretch of time, the Python function that held the GIL most of it:
 * a C call's time votes for its caller; waiting time does not vote; tiles coarsen to
 * stay at most GT_CTREE_TILES and keep the majority. */
static void test_tiles_name_the_holder(void)
{
    struct gt_ctree c;
    CHECK(gt_ctree__init(&c) == 0, "init");
    const uint64_t W = (uint64_t)1 << GT_CTREE_SHIFT0; /* first tile width, ticks */
    uint64_t cum[3] = {0, 0, 0}, ts = 1000;
    gt_ctree__add(&c, ts, 5, GT_CALL, cum);         /* f (Python) under anchor 0 */
    uint32_t f = c.cur;
    gt_ctree__add(&c, ts += 10, 9, GT_CCALL, cum);  /* f calls a C function */
    uint32_t cf = c.cur;
    cum[2] += W / 2;                                /* held W/2 in the C call */
    gt_ctree__add(&c, ts += W / 2, 9, GT_CRETURN, cum);
    cum[1] += W / 4;                                /* f waited W/4: no votes */
    gt_ctree__add(&c, ts += W / 4, 6, GT_CALL, cum); /* g */
    uint32_t g = c.cur;
    cum[2] += W / 8;                                /* g held W/8: less than f's W/2 */
    gt_ctree__add(&c, ts += W / 8, 6, GT_RETURN, cum);
    CHECK(gt_ctree__pynode(&c, cf) == f && gt_ctree__pynode(&c, g) == g &&
              gt_ctree__pynode(&c, 0) == 0, "pynodes %u %u", gt_ctree__pynode(&c, cf), f);
    CHECK(c.ntiles == 1 && c.tiles[0].node == f, "tile 0: %u (f %u g %u)", c.tiles[0].node, f, g);
    /* Then g holds for 3000 first-width tiles: the tiles coarsen to fit, g wins them. */
    gt_ctree__add(&c, ts += 10, 6, GT_CALL, cum);
    cum[2] += 3000 * W;
    gt_ctree__add(&c, ts += 3000 * W, 6, GT_RETURN, cum);
    CHECK(c.ntiles <= GT_CTREE_TILES && c.tshift == GT_CTREE_SHIFT0 + 1, "coarsened: %zu tiles, shift %u",
          c.ntiles, c.tshift);
    size_t gs = 0;
    for (size_t i = 0; i < c.ntiles; i++)
        gs += c.tiles[i].node == g;
    CHECK(gs + 1 >= c.ntiles && c.tiles[c.ntiles - 1].node == g, "g holds the later tiles: %zu of %zu", gs,
          c.ntiles);
    gt_ctree__free(&c);
}

int main(void)
{
    test_paths_and_anchors();
    test_tiles_name_the_holder();
    printf("test_ctree: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}

/* SPDX-License-Identifier: MIT */
/* Unit tests for core/analyze/profile.c on hand-built results with exact expected numbers. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile.h"

static int fails;

#define CHECK(e)                                                                   \
    do {                                                                           \
        if (!(e)) {                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #e);  \
            fails++;                                                               \
        }                                                                          \
    } while (0)

#define N(a) (sizeof(a) / sizeof((a)[0]))
#define RUN GT_PSTATE_RUNNING
#define HOFF GT_PSTATE_HELD_OFF_CPU
#define WAIT GT_PSTATE_WAITING
#define REL GT_PSTATE_RELEASED
#define UNK GT_PSTATE_UNKNOWN

enum { F_A, F_B, F_C, F_F, F_G, NFUNCS };
static const struct gt_func funcs[NFUNCS] = {
    [F_A] = {"a", "x.py", 1, 0}, [F_B] = {"b", "x.py", 5, 0}, [F_C] = {"c", "", 0, GT_FUNC_C},
    [F_F] = {"f", "x.py", 9, 0}, [F_G] = {"g", "x.py", 20, 0},
};

static struct gt_thread_result mk_thread(int32_t tid, uint64_t start, uint64_t end,
                                         struct gt_span *sp, size_t nsp)
{
    struct gt_thread_result t = {0};
    t.tid = tid;
    t.start_ns = start;
    t.end_ns = end;
    t.spans = sp;
    t.nspans = nsp;
    t.summary.wall_ns = end - start;
    return t;
}

static struct gt_result mk_result(uint64_t t0, uint64_t t1, struct gt_thread_result *th,
                                  size_t n, int gil_known)
{
    struct gt_result r = {0};
    r.t0 = t0;
    r.t1 = t1;
    r.funcs = funcs;
    r.nfuncs = NFUNCS;
    r.threads = th;
    r.nthreads = n;
    r.gil_known = gil_known;
    return r;
}

/* The node of `func` under `parent` (GT_PNODE_NONE if none). */
static uint32_t child(const struct gt_ptree *t, uint32_t parent, uint32_t func)
{
    for (uint32_t c = t->nodes[parent].first_child; c != GT_PNODE_NONE; c = t->nodes[c].next_sibling)
        if (t->nodes[c].func == func)
            return c;
    return GT_PNODE_NONE;
}

static size_t nchildren(const struct gt_ptree *t, uint32_t n)
{
    size_t k = 0;
    for (uint32_t c = t->nodes[n].first_child; c != GT_PNODE_NONE; c = t->nodes[c].next_sibling)
        k++;
    return k;
}

/* Every node: states add up; total = self + children; parents precede children. */
static void check_tree(const struct gt_ptree *t)
{
    CHECK(t->nnodes >= 1);
    CHECK(t->nodes[0].parent == GT_PNODE_NONE && t->nodes[0].func == GT_NO_FUNC);
    for (size_t i = 0; i < t->nnodes; i++) {
        const struct gt_pnode *n = &t->nodes[i];
        uint64_t ts = 0, ss = 0, kids[GT_NPSTATES] = {0};
        for (int s = 0; s < GT_NPSTATES; s++) {
            ts += n->total[s];
            ss += n->self[s];
        }
        CHECK(ts == n->total_ns && ss == n->self_ns);
        if (i)
            CHECK(n->parent < i && n->depth == t->nodes[n->parent].depth + 1);
        for (uint32_t c = n->first_child; c != GT_PNODE_NONE; c = t->nodes[c].next_sibling)
            for (int s = 0; s < GT_NPSTATES; s++)
                kids[s] += t->nodes[c].total[s];
        for (int s = 0; s < GT_NPSTATES; s++)
            CHECK(n->total[s] == n->self[s] + kids[s]);
    }
}

static void check_states(const uint64_t *v, uint64_t run, uint64_t hoff, uint64_t wait,
                         uint64_t rel, uint64_t unk)
{
    CHECK(v[RUN] == run);
    CHECK(v[HOFF] == hoff);
    CHECK(v[WAIT] == wait);
    CHECK(v[REL] == rel);
    CHECK(v[UNK] == unk);
}

static const struct gt_pfunc *row_of(const struct gt_pfunc *rows, size_t n, uint32_t f)
{
    for (size_t i = 0; i < n; i++)
        if (rows[i].func == f)
            return &rows[i];
    return NULL;
}

/* a [0,100] > b [10,40] > c [20,30]; GIL held [0,20], wait [20,50], released [50,100];
 * OS on-cpu [0,15], preempted [15,20], on-cpu [20,100]. */
static void test_split_four_states(void)
{
    struct gt_span sp[] = {{0, 100, F_A, 0, 0}, {10, 40, F_B, 1, 0}, {20, 30, F_C, 2, GT_SPAN_C}};
    struct gt_interval gil[] = {{0, 20, GT_GIL_STATE_HELD, 0}, {20, 50, GT_GIL_STATE_WAIT, 0},
                                {50, 100, GT_GIL_STATE_RELEASED, 0}};
    struct gt_interval os[] = {{0, 15, GT_OS_ON_CPU, 0}, {15, 20, GT_OS_PREEMPTED, 0},
                               {20, 100, GT_OS_ON_CPU, 0}};
    struct gt_thread_result th = mk_thread(7, 0, 100, sp, N(sp));
    th.gil = gil;
    th.ngil = N(gil);
    th.os = os;
    th.nos = N(os);
    th.has_sched = 1;
    struct gt_result r = mk_result(0, 100, &th, 1, 1);
    struct gt_profile *p = NULL;
    CHECK(gt_profile__build(&r, 0, &p) == 0);
    if (!p)
        return;
    const struct gt_ptree *t = &p->threads[0];
    CHECK(t->tid == 7 && t->nnodes == 4);
    check_tree(t);
    uint32_t a = child(t, 0, F_A), b = child(t, a, F_B), c = child(t, b, F_C);
    CHECK(a != GT_PNODE_NONE && b != GT_PNODE_NONE && c != GT_PNODE_NONE);
    if (c == GT_PNODE_NONE)
        goto out;
    check_states(t->nodes[0].total, 15, 5, 30, 50, 0);
    CHECK(t->nodes[0].self_ns == 0);
    check_states(t->nodes[a].self, 10, 0, 10, 50, 0);
    check_states(t->nodes[b].self, 5, 5, 10, 0, 0);
    check_states(t->nodes[b].total, 5, 5, 20, 0, 0);
    check_states(t->nodes[c].self, 0, 0, 10, 0, 0);
    CHECK(t->nodes[a].total_ns == 100 && t->nodes[b].total_ns == 30 && t->nodes[c].total_ns == 10);
    CHECK(t->nodes[a].calls == 1 && t->nodes[b].calls == 1 && t->nodes[c].calls == 1);
    /* One thread: the merged tree is the same. */
    check_tree(&p->merged);
    CHECK(p->merged.nnodes == 4);
    uint32_t mb = child(&p->merged, child(&p->merged, 0, F_A), F_B);
    CHECK(mb != GT_PNODE_NONE && p->merged.nodes[mb].total[HOFF] == 5);
out:
    gt_profile__free(p);
}

/* f > f > f recursion plus f > g; no GIL probe ran: everything is "unknown", and the
 * per-function total counts the outermost f once. */
static void test_recursion_counted_once_no_gil(void)
{
    struct gt_span sp[] = {{0, 100, F_F, 0, 0}, {10, 60, F_F, 1, 0}, {20, 30, F_F, 2, 0},
                           {70, 80, F_G, 1, 0}};
    struct gt_thread_result th = mk_thread(1, 0, 120, sp, N(sp));
    struct gt_result r = mk_result(0, 120, &th, 1, 0);
    struct gt_profile *p = NULL;
    struct gt_pfunc *rows = NULL;
    size_t nrows = 0;
    CHECK(gt_profile__build(&r, 0, &p) == 0);
    if (!p)
        return;
    const struct gt_ptree *t = &p->threads[0];
    check_tree(t);
    CHECK(t->nnodes == 5);
    uint32_t f1 = child(t, 0, F_F), f2 = child(t, f1, F_F), f3 = child(t, f2, F_F);
    uint32_t g = child(t, f1, F_G);
    CHECK(f3 != GT_PNODE_NONE && g != GT_PNODE_NONE);
    if (f3 == GT_PNODE_NONE || g == GT_PNODE_NONE)
        goto out;
    CHECK(!t->nodes[f1].recursive && t->nodes[f2].recursive && t->nodes[f3].recursive);
    CHECK(!t->nodes[g].recursive);
    check_states(t->nodes[0].total, 0, 0, 0, 0, 120);
    check_states(t->nodes[0].self, 0, 0, 0, 0, 20);
    CHECK(t->nodes[f1].total_ns == 100 && t->nodes[f1].self_ns == 40);
    CHECK(t->nodes[f2].total_ns == 50 && t->nodes[f2].self_ns == 40);
    CHECK(t->nodes[f3].total_ns == 10 && t->nodes[f3].self_ns == 10);
    CHECK(gt_profile__functions(&r, t, t->tid, &rows, &nrows) == 0);
    CHECK(nrows == 2);
    const struct gt_pfunc *rf = row_of(rows, nrows, F_F), *rg = row_of(rows, nrows, F_G);
    CHECK(rf && rg);
    if (rf && rg) {
        CHECK(rf->calls == 3 && rf->total_ns == 100 && rf->self_ns == 90);
        check_states(rf->total, 0, 0, 0, 0, 100);
        CHECK(rg->calls == 1 && rg->total_ns == 10 && rg->self_ns == 10);
        CHECK(rf->wait_caused_ns == 0);
    }
out:
    free(rows);
    gt_profile__free(p);
}

/* Thread 1: a opened before tracing (clipped at the start: no call counted) with b
 * inside, left open at the end (clipped). Thread 2: a > b again, GIL known for the
 * trace but this thread has no GIL intervals: its time is "unknown". The merged tree
 * adds both; "wait caused" comes from the blame rows. */
static void test_clipped_merged_and_blame(void)
{
    struct gt_span s1[] = {{0, 50, F_A, 0, GT_SPAN_CLIPPED_START}, {40, 50, F_B, 1, GT_SPAN_CLIPPED_END}};
    struct gt_span s2[] = {{10, 30, F_A, 0, 0}, {20, 30, F_B, 1, 0}, {35, 35, F_G, 0, 0}};
    struct gt_interval g1[] = {{0, 45, GT_GIL_STATE_HELD, 0}, {45, 50, GT_GIL_STATE_WAIT, 0}};
    struct gt_thread_result th[2] = {mk_thread(1, 0, 50, s1, N(s1)), mk_thread(2, 10, 40, s2, N(s2))};
    th[0].gil = g1;
    th[0].ngil = N(g1);
    struct gt_blame bl[] = {{2, 1, F_A, 2, 7}, {1, 2, F_A, 1, 3}, {1, 2, GT_NO_FUNC, 1, 4}};
    struct gt_result r = mk_result(0, 50, th, 2, 1);
    r.blame = bl;
    r.nblame = N(bl);
    struct gt_profile *p = NULL;
    struct gt_pfunc *rows = NULL;
    size_t nrows = 0;
    CHECK(gt_profile__build(&r, 0, &p) == 0);
    if (!p)
        return;
    const struct gt_ptree *t1 = &p->threads[0], *t2 = &p->threads[1], *m = &p->merged;
    check_tree(t1);
    check_tree(t2);
    check_tree(m);
    uint32_t a1 = child(t1, 0, F_A), b1 = child(t1, a1, F_B);
    uint32_t a2 = child(t2, 0, F_A), b2 = child(t2, a2, F_B), g2 = child(t2, 0, F_G);
    uint32_t ma = child(m, 0, F_A), mb = child(m, ma, F_B), mg = child(m, 0, F_G);
    CHECK(b1 != GT_PNODE_NONE && b2 != GT_PNODE_NONE && mb != GT_PNODE_NONE && mg != GT_PNODE_NONE);
    if (b1 == GT_PNODE_NONE || b2 == GT_PNODE_NONE || mb == GT_PNODE_NONE || mg == GT_PNODE_NONE)
        goto out;
    CHECK(t1->nodes[a1].calls == 0 && t1->nodes[b1].calls == 1);
    check_states(t1->nodes[a1].total, 45, 0, 5, 0, 0);
    check_states(t1->nodes[b1].self, 5, 0, 5, 0, 0);
    check_states(t2->nodes[0].total, 0, 0, 0, 0, 30);
    CHECK(t2->nodes[0].self_ns == 10 && t2->nodes[a2].self_ns == 10 && t2->nodes[b2].total_ns == 10);
    CHECK(t2->nodes[g2].calls == 1 && t2->nodes[g2].total_ns == 0);
    CHECK(m->nnodes == 4 && nchildren(m, 0) == 2);
    CHECK(m->nodes[0].total_ns == 80);
    CHECK(m->nodes[ma].calls == 1 && m->nodes[mb].calls == 2 && m->nodes[mg].calls == 1);
    check_states(m->nodes[ma].total, 45, 0, 5, 0, 20);
    check_states(m->nodes[mb].total, 5, 0, 5, 0, 10);
    CHECK(gt_profile__functions(&r, m, 0, &rows, &nrows) == 0);
    const struct gt_pfunc *ra = row_of(rows, nrows, F_A), *rg = row_of(rows, nrows, F_G);
    CHECK(nrows == 3 && ra && rg);
    if (ra && rg) {
        CHECK(ra->calls == 1 && ra->total_ns == 70 && ra->wait_caused_ns == 10);
        CHECK(rg->calls == 1 && rg->total_ns == 0);
    }
    free(rows);
    rows = NULL;
    CHECK(gt_profile__functions(&r, t1, t1->tid, &rows, &nrows) == 0);
    ra = row_of(rows, nrows, F_A);
    CHECK(ra && ra->wait_caused_ns == 7 && ra->total_ns == 50);
out:
    free(rows);
    gt_profile__free(p);
}

/* Equal timestamps: b [100,100] starts as a ends but is a's child (its depth says so);
 * the OS state of a thread that recorded none makes "held" plain running. */
static void test_ties_use_depth(void)
{
    struct gt_span sp[] = {{0, 100, F_A, 0, 0}, {100, 100, F_B, 1, 0}, {110, 150, F_C, 0, 0},
                           {110, 120, F_B, 1, 0}};
    struct gt_interval gil[] = {{0, 150, GT_GIL_STATE_HELD, 0}};
    struct gt_thread_result th = mk_thread(3, 0, 150, sp, N(sp));
    th.gil = gil;
    th.ngil = 1;
    struct gt_result r = mk_result(0, 150, &th, 1, 1);
    struct gt_profile *p = NULL;
    CHECK(gt_profile__build(&r, 0, &p) == 0);
    if (!p)
        return;
    const struct gt_ptree *t = &p->threads[0];
    check_tree(t);
    uint32_t a = child(t, 0, F_A), ab = child(t, a, F_B), c = child(t, 0, F_C);
    uint32_t cb = c == GT_PNODE_NONE ? GT_PNODE_NONE : child(t, c, F_B);
    CHECK(a != GT_PNODE_NONE && ab != GT_PNODE_NONE && cb != GT_PNODE_NONE);
    if (cb != GT_PNODE_NONE) {
        CHECK(t->nodes[ab].calls == 1 && t->nodes[ab].total_ns == 0);
        CHECK(t->nodes[c].total_ns == 40 && t->nodes[cb].total_ns == 10);
        CHECK(t->nodes[0].self_ns == 10 && t->nodes[a].total_ns == 100);
        check_states(t->nodes[0].total, 150, 0, 0, 0, 0);
    }
    gt_profile__free(p);
}

static void test_empty_and_einval(void)
{
    struct gt_result r = mk_result(0, 0, NULL, 0, 1);
    struct gt_profile *p = (struct gt_profile *)&r;
    CHECK(gt_profile__build(NULL, 0, &p) == -EINVAL && p == NULL);
    CHECK(gt_profile__build(&r, 0, NULL) == -EINVAL);
    CHECK(gt_profile__build(&r, 0, &p) == 0);
    if (p) {
        CHECK(p->nthreads == 0 && p->merged.nnodes == 1 && p->merged.nodes[0].total_ns == 0);
        struct gt_pfunc *rows = (struct gt_pfunc *)&r;
        size_t n = 1;
        CHECK(gt_profile__functions(&r, &p->merged, 0, &rows, &n) == 0 && rows == NULL && n == 0);
    }
    gt_profile__free(p);
    gt_profile__free(NULL);
}

/* One thread's tree alone (what the page writer builds while the previous columns
 * compress) is the tree gt_profile__build makes for it, node for node. */
static void test_thread_alone(void)
{
    struct gt_span s1[] = {{0, 50, F_A, 0, GT_SPAN_CLIPPED_START}, {40, 50, F_B, 1, GT_SPAN_CLIPPED_END}};
    struct gt_span s2[] = {{10, 30, F_A, 0, 0}, {20, 30, F_B, 1, 0}, {22, 28, F_A, 2, 0},
                           {35, 35, F_G, 0, 0}};
    struct gt_interval g1[] = {{0, 45, GT_GIL_STATE_HELD, 0}, {45, 50, GT_GIL_STATE_WAIT, 0}};
    struct gt_thread_result th[2] = {mk_thread(1, 0, 50, s1, N(s1)), mk_thread(2, 10, 40, s2, N(s2))};
    th[0].gil = g1;
    th[0].ngil = N(g1);
    struct gt_result r = mk_result(0, 50, th, 2, 1);
    struct gt_profile *p = NULL;
    CHECK(gt_profile__build(&r, GT_PROFILE_THREADS_ONLY, &p) == 0);
    for (size_t i = 0; p && i < 2; i++) {
        struct gt_ptree t = {.nnodes = 7};
        CHECK(gt_profile__thread(&r, i, 0, &t) == 0);
        CHECK(t.tid == th[i].tid && t.nnodes == p->threads[i].nnodes && t.nnodes > 2);
        CHECK(t.nodes && !memcmp(t.nodes, p->threads[i].nodes, t.nnodes * sizeof(*t.nodes)));
        gt_ptree__free(&t);
        CHECK(t.nodes == NULL && t.nnodes == 0);
    }
    gt_profile__free(p);
    struct gt_ptree t = {.nnodes = 7};
    CHECK(gt_profile__thread(&r, 2, 0, &t) == -EINVAL && t.nodes == NULL && t.nnodes == 0);
    CHECK(gt_profile__thread(NULL, 0, 0, &t) == -EINVAL);
    CHECK(gt_profile__thread(&r, 0, 0, NULL) == -EINVAL);
    gt_ptree__free(NULL);
}


/* The frames above the traced code fold out (the root's children are what began inside
 * the innermost outer frame) unless GT_PROFILE_OUTER_FRAMES; a background thread stays out
 * of the merged tree unless GT_PROFILE_ALL_THREADS. */
static void test_outer_frames_and_background(void)
{
    struct gt_span sp[] = {{0, 100, F_F, 0, GT_SPAN_CLIPPED_START}, {0, 90, F_G, 1, GT_SPAN_CLIPPED_START},
                           {10, 30, F_A, 2, 0}, {30, 60, F_B, 2, 0}, {40, 50, F_C, 3, GT_SPAN_C}};
    struct gt_span bg[] = {{0, 100, F_G, 0, GT_SPAN_CLIPPED_START}};
    struct gt_thread_result th[2] = {mk_thread(1, 0, 100, sp, N(sp)), mk_thread(2, 0, 100, bg, N(bg))};
    th[0].outer_depth = 2;
    th[0].outer_start = 0;
    th[0].outer_end = 90;
    th[1].background = 1;
    struct gt_result r = mk_result(0, 100, th, 2, 0);
    struct gt_profile *p = NULL, *q = NULL;
    CHECK(gt_profile__build(&r, 0, &p) == 0);
    CHECK(gt_profile__build(&r, GT_PROFILE_OUTER_FRAMES | GT_PROFILE_ALL_THREADS, &q) == 0);
    if (!p || !q)
        goto out;
    const struct gt_ptree *t = &p->threads[0], *m = &p->merged;
    check_tree(t);
    check_tree(m);
    uint32_t a = child(t, 0, F_A), b = child(t, 0, F_B);
    CHECK(nchildren(t, 0) == 2 && a != GT_PNODE_NONE && b != GT_PNODE_NONE);
    if (b != GT_PNODE_NONE)
        CHECK(child(t, b, F_C) != GT_PNODE_NONE && t->nodes[b].total_ns == 30);
    CHECK(t->nodes[0].total_ns == 100 && t->nodes[0].self_ns == 50); /* the outer frames' own time */
    CHECK(m->nodes[0].total_ns == 100 && nchildren(m, 0) == 2); /* thread 2 left out */
    const struct gt_ptree *u = &q->threads[0], *all = &q->merged;
    uint32_t f = child(u, 0, F_F);
    CHECK(nchildren(u, 0) == 1 && f != GT_PNODE_NONE);
    if (f != GT_PNODE_NONE)
        CHECK(child(u, f, F_G) != GT_PNODE_NONE);
    CHECK(all->nodes[0].total_ns == 200 && child(all, 0, F_G) != GT_PNODE_NONE);
    struct gt_ptree one;
    CHECK(gt_profile__thread(&r, 0, GT_PROFILE_OUTER_FRAMES, &one) == 0);
    CHECK(one.nnodes == u->nnodes);
    gt_ptree__free(&one);
out:
    gt_profile__free(p);
    gt_profile__free(q);
}

/* keep last: the calls before the kept window (a call tree of [20, 100)) grafted at the
 * root, the window's spans (from 100, their open frames starting there) after it; the frames
 * open at the window's start are counted once (in the tree). GIL held [20, 60), released
 * [60, 200): the tree's unsplit time goes by the thread's proportions over [20, 100). */
static void test_keep_last_graft(void)
{
    /* Window: a [100, 200] (open at its start) > b [120, 150] (a call in the window). */
    struct gt_span sp[] = {{100, 200, F_A, 0, 0}, {120, 150, F_B, 1, 0}};
    struct gt_cnode nodes[] = {
        {.parent = 0, .func = GT_CNODE_ANCHOR},                       /* 0: the root anchor */
        {.parent = 0, .func = F_A, .calls = 1, .self = {0, 0, 0, 40}}, /* 1: a */
        {.parent = 1, .func = F_B, .calls = 3, .self = {0, 0, 0, 40}}, /* 2: a > b */
    };
    struct gt_interval g[] = {{20, 60, GT_GIL_STATE_HELD, 0}, {60, 200, GT_GIL_STATE_RELEASED, 0}};
    struct gt_thread_result th = mk_thread(1, 20, 200, sp, N(sp));
    th.gil = g;
    th.ngil = N(g);
    th.calls_more = nodes;
    th.ncalls_more = N(nodes);
    th.calls_more_cur = 1;
    th.calls_more_last = 100;
    th.calls_kept_from = 100;
    struct gt_result r = mk_result(20, 200, &th, 1, 1);
    struct gt_ptree t = {0};
    CHECK(gt_profile__thread(&r, 0, 0, &t) == 0);
    check_tree(&t);
    CHECK(t.nodes[0].total_ns == 180); /* the thread's whole life */
    uint32_t a = child(&t, 0, F_A), b = a == GT_PNODE_NONE ? GT_PNODE_NONE : child(&t, a, F_B);
    CHECK(a != GT_PNODE_NONE && b != GT_PNODE_NONE && nchildren(&t, 0) == 1 && nchildren(&t, a) == 1);
    if (b != GT_PNODE_NONE) {
        CHECK(t.nodes[a].calls == 1);     /* once: the window's open a is the tree's */
        CHECK(t.nodes[b].calls == 4);     /* 3 before the window, 1 in it */
        CHECK(t.nodes[a].self_ns == 40 + 70 && t.nodes[b].self_ns == 40 + 30);
        /* [20, 100): held 40, released 40, the tree's 80 unknown ns split half and half. */
        CHECK(t.nodes[0].total[RUN] == 40 && t.nodes[0].total[REL] == 140);
    }
    gt_ptree__free(&t);
}

int main(void)
{
    static const struct {
        const char *name;
        void (*fn)(void);
    } tests[] = {
#define T(x) {#x, x}
        T(test_split_four_states),
        T(test_recursion_counted_once_no_gil),
        T(test_clipped_merged_and_blame),
        T(test_ties_use_depth),
        T(test_empty_and_einval),
        T(test_thread_alone),
        T(test_outer_frames_and_background),
        T(test_keep_last_graft),
#undef T
    };
    int failed = 0;
    for (size_t i = 0; i < N(tests); i++) {
        fails = 0;
        tests[i].fn();
        printf("%s %s\n", fails ? "FAIL" : "ok  ", tests[i].name);
        failed += fails != 0;
    }
    printf("%d of %zu failed\n", failed, N(tests));
    return failed != 0;
}

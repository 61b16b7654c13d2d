/* SPDX-License-Identifier: MIT */
/* Unit tests for core/aggregate/agg.c: a stream cut anywhere into recorded events and an
 * aggregate of the rest merges to the same summary as the whole stream recorded
 * (time per state, acquisitions, drop requests, longest wait, off CPU), with at most
 * GT_AGG_TILES tiles whatever the length. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gt_agg.h"
#include "merge.h"

#define T0 1000000ull

static uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Random GIL events: mostly the usual cycle, sometimes any kind (the decoders must agree
 * on nonsense too). */
static void gil_events(struct gt_gil_event *ev, size_t n, uint64_t *t)
{
    static const uint32_t cycle[] = {GT_GIL_WANT, GT_GIL_DROP_REQUEST, GT_GIL_ACQUIRED,
                                     GT_GIL_RELEASED, GT_GIL_SWITCH_DONE};
    for (size_t i = 0; i < n; i++) {
        /* One call per statement: the order of two calls in one expression is unspecified
         * (GCC and clang differ), and the events must not depend on the compiler. */
        uint64_t r = next_rand(), big = next_rand() % 16 == 0;
        *t += 1 + r % (big ? 5000000 : 20000);
        uint32_t kind = next_rand() % 8 == 0 ? 1 + (uint32_t)(next_rand() % 5) : cycle[i % 5];
        ev[i] = (struct gt_gil_event){*t, kind, next_rand() % 32 == 0 ? 1 : 0};
    }
}

static void sched_events(struct gt_sched_event *ev, size_t n, uint64_t *t)
{
    for (size_t i = 0; i < n; i++) {
        *t += 1 + next_rand() % 30000;
        ev[i] = (struct gt_sched_event){*t, 1 + (uint32_t)(next_rand() % 3), 0};
    }
}

static struct gt_result *merge(struct gt_thread_input *th, uint64_t t1)
{
    struct gt_trace_input in = {.t0 = T0, .t1 = t1, .threads = th, .nthreads = 1, .gil_known = 1};
    struct gt_result *r = NULL;
    int err = gt_merge__run(&in, &r);
    CHECK(err == 0, "merge: %d", err);
    return err ? NULL : r;
}

static void cut_and_compare(size_t n, size_t cut, uint32_t flags, int ended)
{
    struct gt_gil_event *ev = malloc(n * sizeof(*ev));
    struct gt_sched_event *sv = malloc(n * sizeof(*sv));
    uint64_t t = T0, ts = T0;
    gil_events(ev, n, &t);
    sched_events(sv, n, &ts);
    uint64_t t1 = (t > ts ? t : ts) + (ended ? 0 : 12345);
    uint32_t fl = flags | GT_THREAD_HAS_SCHED | (ended ? GT_THREAD_ENDED : 0);

    struct gt_chunk whole = {ev, n}, swhole = {sv, n};
    struct gt_thread_input a = {.tid = 7, .flags = fl, .gil = &whole, .ngil = 1,
                                .sched = &swhole, .nsched = 1};
    struct gt_result *ra = merge(&a, t1);

    struct gt_agg *g = malloc(sizeof(*g)), *o = malloc(sizeof(*o));
    gt_agg__init(g, GT_AGG_GIL);
    gt_agg__init(o, GT_AGG_OS);
    for (size_t i = cut; i < n; i++) {
        gt_agg__add(g, ev[i].ts, ev[i].kind, ev[i].aux);
        gt_agg__add(o, sv[i].ts, sv[i].kind, sv[i].aux);
    }
    CHECK(g->ntiles <= GT_AGG_TILES && o->ntiles <= GT_AGG_TILES, "tiles %zu %zu", g->ntiles,
          o->ntiles);
    static struct gt_gil_event lead[GT_AGG_LEAD], slead[GT_AGG_LEAD];
    static uint64_t tiles[GT_AGG_TILES][3], stiles[GT_AGG_TILES][3];
    struct gt_coalesced gm, sm;
    gt_agg__export(g, NULL, NULL, 1.0, &gm, lead, tiles);
    gt_agg__export(o, NULL, NULL, 1.0, &sm, slead, stiles);
    struct gt_chunk part = {ev, cut}, spart = {sv, cut};
    struct gt_thread_input b = a;
    b.gil = &part;
    b.sched = &spart;
    b.gil_more = cut < n ? &gm : NULL;
    b.sched_more = cut < n ? &sm : NULL;
    struct gt_result *rb = merge(&b, t1);

    if (ra && rb) {
        const struct gt_thread_result *x = &ra->threads[0], *y = &rb->threads[0];
        const struct gt_summary *p = &x->summary, *q = &y->summary;
        CHECK(x->start_ns == y->start_ns && x->end_ns == y->end_ns,
              "n=%zu cut=%zu life %llu..%llu vs %llu..%llu", n, cut,
              (unsigned long long)x->start_ns, (unsigned long long)x->end_ns,
              (unsigned long long)y->start_ns, (unsigned long long)y->end_ns);
        CHECK(p->held_ns == q->held_ns && p->wait_ns == q->wait_ns &&
                  p->released_ns == q->released_ns,
              "n=%zu cut=%zu held %llu/%llu wait %llu/%llu released %llu/%llu", n, cut,
              (unsigned long long)p->held_ns, (unsigned long long)q->held_ns,
              (unsigned long long)p->wait_ns, (unsigned long long)q->wait_ns,
              (unsigned long long)p->released_ns, (unsigned long long)q->released_ns);
        CHECK(p->acquisitions == q->acquisitions && p->drop_requests == q->drop_requests,
              "n=%zu cut=%zu acquisitions %llu/%llu drops %llu/%llu", n, cut,
              (unsigned long long)p->acquisitions, (unsigned long long)q->acquisitions,
              (unsigned long long)p->drop_requests, (unsigned long long)q->drop_requests);
        CHECK(p->longest_wait_ns == q->longest_wait_ns, "n=%zu cut=%zu longest %llu/%llu", n,
              cut, (unsigned long long)p->longest_wait_ns, (unsigned long long)q->longest_wait_ns);
        CHECK(p->off_cpu_ns == q->off_cpu_ns && p->preempted_ns == q->preempted_ns,
              "n=%zu cut=%zu off %lld/%lld preempted %lld/%lld", n, cut,
              (long long)p->off_cpu_ns, (long long)q->off_cpu_ns, (long long)p->preempted_ns,
              (long long)q->preempted_ns);
        /* The intervals still cover the life, in order. */
        uint64_t at = y->start_ns;
        int ok = 1;
        for (size_t i = 0; i < y->ngil; i++) {
            ok &= y->gil[i].start == at && y->gil[i].end > y->gil[i].start;
            at = y->gil[i].end;
        }
        CHECK(ok && at == y->end_ns, "n=%zu cut=%zu: GIL intervals do not tile the life", n, cut);
        CHECK(y->ngil <= cut + 3 * GT_AGG_TILES + GT_AGG_LEAD + 4, "n=%zu cut=%zu: %zu intervals",
              n, cut, y->ngil);
        CHECK(cut == n ? y->gil_coalesced_from == 0 : 1, "coalesced without an aggregate");
    }
    gt_result__free(ra);
    gt_result__free(rb);
    free(g);
    free(o);
    free(ev);
    free(sv);
}

int main(void)
{
    static const size_t lens[] = {1, 2, 5, 17, 100, 5000, 200000};
    for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
        size_t n = lens[k];
        size_t cuts[] = {0, 1, n / 3, n / 2, n - 1, n};
        for (size_t c = 0; c < sizeof(cuts) / sizeof(cuts[0]); c++) {
            if (cuts[c] > n)
                continue;
            cut_and_compare(n, cuts[c], 0, 0);
            cut_and_compare(n, cuts[c], GT_THREAD_EXISTED_AT_START | GT_THREAD_HELD_GIL_AT_START, 0);
            cut_and_compare(n, cuts[c], 0, 1);
        }
    }
    /* A long wait split by the cut, and a long aggregate: millions of events, 2048 tiles. */
    for (int rep = 0; rep < 20; rep++)
        cut_and_compare(3000 + (size_t)(next_rand() % 3000), 1000 + (size_t)(next_rand() % 2000), 0,
                        rep & 1);
    printf("test_agg: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}

/* SPDX-License-Identifier: MIT */
/* Unit tests for the save-time span packer (core/emit/pack.c). */
#include "check.h"
#include "pack.h"

#include <stdlib.h>
#include <string.h>

#define SP(s, e, f, d) {.start = (s), .end = (e), .func = (f), .depth = (d), .flags = 0}

struct rec {
    struct gt_span s;
    uint64_t calls;
};

static size_t run(const struct gt_span *in, size_t n, uint64_t px, struct rec *out)
{
    struct gt_pack p;
    size_t k = 0;
    gt_pack__init(&p, in, n, 0, px);
    while (gt_pack__next(&p, &out[k].s, &out[k].calls))
        k++;
    return k;
}

static void test_runs(void)
{
    /* a long root; under it, in pixel 0 (px 100): three short f/g calls, the second with a
     * child; then a long call; then two short ones in pixel 3 and one in pixel 4 */
    const struct gt_span in[] = {
        SP(0, 1000, 0, 0),
        SP(10, 20, 1, 1),  SP(20, 60, 2, 1), SP(25, 30, 3, 2), SP(60, 70, 1, 1),
        SP(100, 250, 4, 1), SP(110, 120, 1, 2),
        SP(300, 310, 1, 1), SP(320, 330, 1, 1),
        SP(400, 410, 2, 1),
    };
    struct rec out[16];
    size_t k = run(in, sizeof(in) / sizeof(in[0]), 100, out);
    CHECK(k == 6, "%zu records", k);
    CHECK(out[0].calls == 1 && out[0].s.end == 1000 && !(out[0].s.flags & GT_SPAN_PACKED), "root as is");
    CHECK(out[1].calls == 4 && out[1].s.start == 10 && out[1].s.end == 70 && out[1].s.depth == 1 &&
              out[1].s.func == 2 && (out[1].s.flags & GT_SPAN_PACKED),
          "pixel 0: %llu calls [%llu, %llu] func %u", (unsigned long long)out[1].calls,
          (unsigned long long)out[1].s.start, (unsigned long long)out[1].s.end, out[1].s.func);
    CHECK(out[2].calls == 1 && out[2].s.func == 4 && out[2].s.end == 250, "the long call as is");
    /* its only child is alone in its run: as recorded, not flagged */
    CHECK(out[3].calls == 1 && out[3].s.func == 1 && out[3].s.depth == 2 && !(out[3].s.flags & GT_SPAN_PACKED),
          "a lone short span stays");
    CHECK(out[4].calls == 2 && out[4].s.start == 300 && out[4].s.end == 330 && (out[4].s.flags & GT_SPAN_PACKED),
          "pixel 3");
    CHECK(out[5].calls == 1 && out[5].s.start == 400, "pixel 4 starts a new record");
    uint64_t total = 0;
    for (size_t i = 0; i < k; i++)
        total += out[i].calls;
    CHECK(total == sizeof(in) / sizeof(in[0]), "every call counted once: %llu", (unsigned long long)total);
}

static void test_off_and_c(void)
{
    const struct gt_span in[] = {SP(0, 5, 0, 0), SP(5, 9, 1, 0)};
    struct rec out[4];
    CHECK(run(in, 2, 0, out) == 2, "px 0 packs nothing");
    struct gt_span c[] = {SP(0, 5, 0, 0), SP(5, 12, 1, 0)};
    c[1].flags = GT_SPAN_C | GT_SPAN_UNWIND;
    size_t k = run(c, 2, 100, out);
    CHECK(k == 1 && out[0].calls == 2 && out[0].s.flags == (GT_SPAN_C | GT_SPAN_PACKED) && out[0].s.func == 1,
          "the longest span's function and C flag, no other flag: %u", out[0].s.flags);
    CHECK(run(in, 0, 100, out) == 0, "empty");
}

/* 1M calls in 1,000 runs of a loop body (two nested calls each): a pixel of a 1 s trace
 * at 4096 pixels is 244 us, so the records are about one per pixel per depth. */
static void test_million(void)
{
    size_t n = 1000000, k = 0;
    struct gt_span *in = malloc(n * sizeof(*in));
    in[0] = (struct gt_span)SP(0, 1000000000, 0, 0);
    for (size_t i = 1; i < n; i += 2) {
        uint64_t t = (uint64_t)i * 999;
        in[i] = (struct gt_span)SP(t, t + 900, 1, 1);
        if (i + 1 < n)
            in[i + 1] = (struct gt_span)SP(t + 100, t + 800, 2, 2);
    }
    struct gt_pack p;
    struct gt_span o;
    uint64_t calls, total = 0;
    gt_pack__init(&p, in, n, 0, 1000000000 / GT_PACK_PIXELS);
    while (gt_pack__next(&p, &o, &calls)) {
        k++;
        total += calls;
    }
    CHECK(total == n, "%llu calls", (unsigned long long)total);
    CHECK(k > 4000 && k < 4200, "%zu records for 1M spans", k);
    free(in);
}

static void test_stats(void)
{
    /* f(0..100) calls f(10..40) which calls g(15..25); then g(50..60) */
    const struct gt_span in[] = {SP(0, 100, 0, 0), SP(10, 40, 0, 1), SP(15, 25, 1, 2), SP(50, 60, 1, 1),
                                 SP(200, 210, 9, 0)};
    struct gt_fstat st[3];
    memset(st, 0, sizeof(st));
    CHECK(gt_pack__stats(in, 5, 2, st) == 0, "stats");
    CHECK(st[0].calls == 2 && st[0].total == 100 && st[0].self == 100 - 30 - 10 + 30 - 10,
          "f: %llu calls total %lld self %lld", (unsigned long long)st[0].calls, (long long)st[0].total,
          (long long)st[0].self);
    CHECK(st[1].calls == 2 && st[1].total == 20 && st[1].self == 20, "g");
    CHECK(st[2].calls == 1 && st[2].total == 10, "an unknown function counts at nfuncs");
}

int main(void)
{
    test_runs();
    test_off_and_c();
    test_million();
    test_stats();
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}

/* SPDX-License-Identifier: MIT */
/* Aggregation speed of gt_profile__build(): ns per span on a synthetic result.
 *   profile_bench NSPANS [REPS] [MAX_DEPTH]
 * Two threads share the spans: a random walk of calls (16 functions, each calling one
 * of three others, depth <= MAX_DEPTH (default 8), so recursion occurs;
 * 3^MAX_DEPTH bounds the distinct call paths), GIL intervals every ~1 us and OS
 * intervals every ~8 us. Prints one JSON line. PB_THREADS_ONLY=1 in the environment builds
 * the per-thread trees only (GT_PROFILE_THREADS_ONLY: what the page writer builds). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "profile.h"

#define NFUNCS 16
#define NTHREADS 2

static uint64_t rng = 88172645463325252ull;
static uint32_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)rng;
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* CPU time: robust on a shared machine */
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Spans of one thread over [0, *end): returns 0 or -1 (out of memory). */
static int make_thread(struct gt_thread_result *t, size_t nspans, size_t max_depth)
{
    struct gt_span *sp = malloc(nspans * sizeof(*sp));
    size_t stack[16], d = 0, n = 0;
    uint64_t ts = 0;
    if (!sp)
        return -1;
    while (n < nspans || d) {
        ts += 1 + next_rand() % 60;
        int call = n < nspans && d < max_depth && (d == 0 || next_rand() % 100 < 48);
        if (call) {
            uint32_t parent = d ? sp[stack[d - 1]].func : 0;
            uint32_t f = (parent * 3 + 1 + next_rand() % 3) % NFUNCS;
            sp[n] = (struct gt_span){ts, ts, f, (uint16_t)d, 0};
            stack[d++] = n++;
        } else {
            sp[stack[--d]].end = ts;
        }
    }
    uint64_t end = ts + 10;
    size_t ngil = end / 1000 + 1, nos = end / 8000 + 1;
    struct gt_interval *gil = malloc(ngil * sizeof(*gil)), *os = malloc(nos * sizeof(*os));
    if (!gil || !os)
        return -1;
    for (size_t i = 0; i < ngil; i++)
        gil[i] = (struct gt_interval){i * 1000, i + 1 == ngil ? end : (i + 1) * 1000,
                                      next_rand() % 3, 0};
    for (size_t i = 0; i < nos; i++)
        os[i] = (struct gt_interval){i * 8000, i + 1 == nos ? end : (i + 1) * 8000,
                                     next_rand() % 3, 0};
    *t = (struct gt_thread_result){.tid = 0, .start_ns = 0, .end_ns = end, .spans = sp,
                                   .nspans = n, .gil = gil, .ngil = ngil, .os = os, .nos = nos,
                                   .has_sched = 1};
    return 0;
}

int main(int argc, char **argv)
{
    size_t nspans = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    size_t max_depth = argc > 3 ? strtoull(argv[3], NULL, 10) : 8;
    if (max_depth < 1 || max_depth > 16)
        max_depth = 8;
    static struct gt_func funcs[NFUNCS];
    struct gt_thread_result th[NTHREADS];
    for (int f = 0; f < NFUNCS; f++)
        funcs[f] = (struct gt_func){"f", "bench.py", (uint32_t)f, 0};
    for (int i = 0; i < NTHREADS; i++) {
        if (make_thread(&th[i], nspans / NTHREADS, max_depth)) {
            fprintf(stderr, "profile_bench: out of memory\n");
            return 1;
        }
        th[i].tid = i + 1;
    }
    struct gt_result r = {.t0 = 0, .t1 = th[0].end_ns, .funcs = funcs, .nfuncs = NFUNCS,
                          .threads = th, .nthreads = NTHREADS, .gil_known = 1};
    double best = 0;
    size_t nodes = 0;
    for (int k = 0; k < reps; k++) {
        struct gt_profile *p = NULL;
        double t0 = now_ns();
        int err = gt_profile__build(&r, getenv("PB_THREADS_ONLY") ? GT_PROFILE_THREADS_ONLY : 0, &p);
        double dt = now_ns() - t0;
        if (err) {
            fprintf(stderr, "profile_bench: gt_profile__build: %d\n", err);
            return 1;
        }
        nodes = p->threads[0].nnodes + p->threads[1].nnodes;
        gt_profile__free(p);
        if (k == 0 || dt < best)
            best = dt;
    }
    size_t total = th[0].nspans + th[1].nspans;
    printf("{\"max_depth\": %zu, \"spans\": %zu, \"nodes\": %zu, \"best_ms\": %.2f, \"ns_per_span\": %.1f}\n",
           max_depth, total, nodes, best / 1e6, best / (double)total);
    return 0;
}

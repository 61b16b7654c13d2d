/* SPDX-License-Identifier: MIT */
/* The hooks GIL probe's cost per GIL event, without Python and without
 * hardware counters: the fake interpreter object of the C tests (tests/c/probes/hooks/
 * fake_interp.c) drops and retakes its GIL through its own GOT, as CPython's drop_gil and
 * take_gil do (lock, signal; lock, lock, signal), and the TSC times a batch of such
 * cycles, best of the rounds:
 *   bare       a second copy of the fake object, loaded RTLD_LOCAL, whose GOT the
 *              hooks never patch: the pthread calls alone
 *   off        hooks installed, not recording (every session's idle state)
 *   recording  hooks recording into a registry generation (3 GIL events per cycle)
 * Rounds interleave the three. The cost per event is (recording - bare) / events per
 * cycle: what a traced churn workload pays per GIL event, its own thread's CPU,
 * uncontended; (recording - off) / events leaves out the forwarding of every hooked
 * call, which installed hooks cost whether they record or not.
 * The probe and the registry are linked into a shared object (gil_event_bench_lib), as
 * in the extension: their thread-locals then take a shared object's TLS access.
 *
 *   gil_event_bench [cycles_per_batch] [rounds]
 *
 * Prints one JSON object (bench/gil_event_bench.py builds, runs and reports it). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#ifdef GIL_EVENT_BENCH_MAIN
int gil_event_bench(int argc, char **argv);

int main(int argc, char **argv)
{
    return gil_event_bench(argc, argv);
}
#else
#include "fake_interp.h"
#include "gilhook.h"
#include "gt_clock.h"
#include "registry.h"

static void calib_cb(void *ctx)
{
    fake_drop_and_retake(ctx);
}

static char me; /* the fake tstate */

/* TSC ticks per drop+retake over one batch. */
static double batch(void (*cycle)(void *), long n)
{
    for (long i = 0; i < n / 16; i++) /* warm the caches and the stream's block */
        cycle(&me);
    uint64_t t0 = __rdtsc();
    for (long i = 0; i < n; i++)
        cycle(&me);
    return (double)(__rdtsc() - t0) / (double)n;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double tsc_per_ns(void)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    uint64_t t0 = __rdtsc();
    do
        clock_gettime(CLOCK_MONOTONIC, &b);
    while ((b.tv_sec - a.tv_sec) * 1000000000l + (b.tv_nsec - a.tv_nsec) < 50000000l);
    uint64_t t1 = __rdtsc();
    return (double)(t1 - t0) / (double)((b.tv_sec - a.tv_sec) * 1000000000l + (b.tv_nsec - a.tv_nsec));
}

__attribute__((visibility("default"))) int gil_event_bench(int argc, char **argv);

int gil_event_bench(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 20000;
    int rounds = argc > 2 ? atoi(argv[2]) : 41;
    if (n < 16 || rounds < 1 || rounds > 1000) {
        fprintf(stderr, "usage: gil_event_bench [cycles_per_batch>=16] [rounds 1..1000]\n");
        return 2;
    }
    double *bare = calloc((size_t)rounds, sizeof(double));
    double *off = calloc((size_t)rounds, sizeof(double));
    double *rec = calloc((size_t)rounds, sizeof(double));
    if (!bare || !off || !rec)
        return 1;
    gt_clock__init();
    void *lib = dlopen(GIL_EVENT_BENCH_BARE, RTLD_NOW | RTLD_LOCAL);
    void (*bare_cycle)(void *) = lib ? (void (*)(void *))dlsym(lib, "fake_drop_and_retake") : NULL;
    if (!bare_cycle) {
        fprintf(stderr, "gil_event_bench: %s\n", dlerror());
        return 1;
    }

    const char *why = NULL;
    struct gt_gil_addrs a;
    int err = gt_gilhook__install((const void *)&fake_interp_symbol, &why);
    if (!err)
        err = gt_gilhook__calibrate(calib_cb, &me, &a, &why);
    if (err) {
        fprintf(stderr, "gil_event_bench: hooks: %d %s\n", err, why ? why : "");
        return 1;
    }
    gt_gilhook__set_addrs(&a);

    uint64_t events = 0, cycles = 0;
    for (int r = 0; r < rounds; r++) {
        bare[r] = batch(bare_cycle, n);
        off[r] = batch(fake_drop_and_retake, n);
        if (gt_registry__begin(0, NULL, NULL) < 0)
            return 1;
        gt_gilhook__set_recording(1);
        rec[r] = batch(fake_drop_and_retake, n);
        gt_gilhook__set_recording(0);
        gt_registry__end();
        for (struct gt_thread *t = gt_registry__threads(); t; t = t->next)
            events += gt_stream__count(&t->gil);
        cycles += (uint64_t)(n + n / 16);
        gt_registry__release(NULL);
    }
    double per_cycle_events = (double)events / (double)cycles;
    qsort(bare, (size_t)rounds, sizeof(double), cmp);
    qsort(off, (size_t)rounds, sizeof(double), cmp);
    qsort(rec, (size_t)rounds, sizeof(double), cmp);
    double f = tsc_per_ns();
    double best = (rec[0] - bare[0]) / per_cycle_events;
    double med = (rec[rounds / 2] - bare[rounds / 2]) / per_cycle_events;
    double rec_off = (rec[0] - off[0]) / per_cycle_events;
    printf("{\"cycles_per_batch\": %ld, \"rounds\": %d, \"events_per_cycle\": %.3f, "
           "\"tsc_per_ns\": %.4f, "
           "\"bare_ticks\": [%.1f, %.1f], \"off_ticks\": [%.1f, %.1f], \"rec_ticks\": [%.1f, %.1f], "
           "\"ticks_per_event\": [%.1f, %.1f], \"ns_per_event\": [%.2f, %.2f], "
           "\"recording_less_off_ticks_per_event\": %.1f}\n",
           n, rounds, per_cycle_events, f, bare[0], bare[rounds / 2], off[0], off[rounds / 2],
           rec[0], rec[rounds / 2], best, med, best / f, med / f, rec_off);
    free(bare);
    free(off);
    free(rec);
    return 0;
}
#endif

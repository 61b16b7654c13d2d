/* SPDX-License-Identifier: MIT */
/* What one read of the recorders' clock (gt_ticks: the TSC where invariant, else
 * clock_gettime) costs on this machine, for bench/churn_cost.py: ns per read,
 * the best of many batches (a loaded host spoils the others), and the source.
 *
 *   clock_read_cost [reads-per-batch] [batches]
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "gt_clock.h"

int main(int argc, char **argv)
{
    long reads = argc > 1 ? atol(argv[1]) : 100000;
    long batches = argc > 2 ? atol(argv[2]) : 200;
    if (reads < 1 || batches < 1) {
        fprintf(stderr, "usage: clock_read_cost [reads-per-batch] [batches]\n");
        return 2;
    }
    gt_clock__init();
    double best = 1e30;
    volatile uint64_t sink = 0;
    for (long b = 0; b < batches; b++) {
        uint64_t t0 = gt_now_ns(), acc = 0;
        for (long i = 0; i < reads; i++)
            acc += gt_ticks(); /* each read's value is used, as a record uses it */
        uint64_t t1 = gt_now_ns();
        sink += acc;
        double per = (double)(t1 - t0) / (double)reads;
        if (per < best)
            best = per;
    }
    printf("%.2f %s\n", best, gt_clock__source());
    return sink == 1; /* never: keeps the reads */
}

/* SPDX-License-Identifier: MIT */
/* Unit test of the tick -> CLOCK_MONOTONIC fit (core/support/gt_clock.c): a session's fit is
 * anchored at its own start and stop, so a clock slewed before the session (NTP, up
 * to 500 ppm) does not skew the session's events. Plain C, no timing. */
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>

#include "gt_clock.h"

#include "check.h"

static int64_t off_by(const struct gt_clock_fit *fit, uint64_t ticks, uint64_t ns)
{
    return (int64_t)(gt_clock__to_ns(fit, ticks) - ns);
}

/* A kernel up for an hour at 1 ns per tick (3 GHz TSC would be 1/3: any rate does),
 * then slewed by +500 ppm for a 10 s session. */
static void test_slewed_session(void)
{
    const double before = 1.0 / 3.0, during = before * 1.0005;
    struct gt_clock_pair import = {1000, 5000};
    uint64_t hour = 3600ull * 3000000000ull; /* ticks */
    struct gt_clock_pair start = {import.ticks + hour,
                                  import.ns + (uint64_t)((double)hour * before)};
    uint64_t session = 10ull * 3000000000ull;
    struct gt_clock_pair stop = {start.ticks + session,
                                 start.ns + (uint64_t)((double)session * during)};
    struct gt_clock_fit fit;
    gt_clock__fit_between(&fit, &start, &stop);
    CHECK(llabs(off_by(&fit, start.ticks, start.ns)) <= 1, "start: %lld ns",
          (long long)off_by(&fit, start.ticks, start.ns));
    CHECK(llabs(off_by(&fit, stop.ticks, stop.ns)) <= 1, "stop: %lld ns",
          (long long)off_by(&fit, stop.ticks, stop.ns));
    uint64_t mid = start.ticks + session / 2;
    uint64_t mid_ns = start.ns + (uint64_t)((double)(session / 2) * during);
    CHECK(llabs(off_by(&fit, mid, mid_ns)) <= 1, "middle: %lld ns",
          (long long)off_by(&fit, mid, mid_ns));

    /* What an import-anchored fit (import -> stop) makes of the same session: the
     * start is off by ~5 ms (500 ppm of 10 s). The session fit must not be that. */
    struct gt_clock_fit aged;
    gt_clock__fit_between(&aged, &import, &stop);
    int64_t skew = off_by(&aged, start.ticks, start.ns);
    CHECK(llabs(skew) > 1000000, "an import-anchored fit is skewed: %lld ns", (long long)skew);
}

static void test_degenerate_pairs(void)
{
    struct gt_clock_pair a = {100, 200};
    struct gt_clock_fit fit;
    gt_clock__fit_between(&fit, &a, &a); /* no baseline: 1 ns per tick from the anchor */
    CHECK(gt_clock__to_ns(&fit, 100) == 200, "anchor kept");
    CHECK(gt_clock__to_ns(&fit, 110) == 210, "unit rate");
}

int main(void)
{
    test_slewed_session();
    test_degenerate_pairs();
    printf("test_clock: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

/* SPDX-License-Identifier: MIT */
/* The one clock: CLOCK_MONOTONIC nanoseconds. On x86 with an invariant TSC the hot
 * paths read the TSC (about half the cost of the vDSO clock_gettime) and stop()
 * converts ticks to CLOCK_MONOTONIC ns with a fit against clock_gettime. */
#ifndef GT_CLOCK_H
#define GT_CLOCK_H

#include <stdint.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define GT_HAVE_TSC 1
#else
#define GT_HAVE_TSC 0
#endif

/* Nonzero when gt_ticks() reads the TSC. Set once by gt_clock__init(). */
extern int gt_clock_use_tsc;

static inline uint64_t gt_timespec_ns(const struct timespec *t)
{
    return (uint64_t)t->tv_sec * 1000000000ull + (uint64_t)t->tv_nsec;
}

/* Nanoseconds of `clock` (CLOCK_MONOTONIC, CLOCK_THREAD_CPUTIME_ID, ...). */
static inline uint64_t gt_clock_ns(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return gt_timespec_ns(&t);
}

static inline uint64_t gt_now_ns(void)
{
    return gt_clock_ns(CLOCK_MONOTONIC);
}

/* A raw timestamp: TSC ticks or CLOCK_MONOTONIC ns (see gt_clock_use_tsc). */
static inline uint64_t gt_ticks(void)
{
#if GT_HAVE_TSC
    if (__builtin_expect(gt_clock_use_tsc, 1))
        return (uint64_t)__rdtsc();
#endif
    return gt_now_ns();
}

/* A conversion from gt_ticks() values to CLOCK_MONOTONIC ns. */
struct gt_clock_fit {
    uint64_t ticks0; /* a tick value ...             */
    uint64_t ns0;    /* ... and the ns it stands for */
    double ns_per_tick; /* 1.0 and ticks0 == ns0 == 0 when ticks are ns */
};

/**
 * gt_clock__init() - choose the tick source (TSC when invariant and the kernel's
 * clocksource is tsc; GILTRACER_CLOCK=monotonic forces clock_gettime) and take the
 * first calibration anchor. Idempotent. Returns 0.
 */
int gt_clock__init(void);

/* A (ticks, ns) pair read as close together as possible. */
struct gt_clock_pair {
    uint64_t ticks, ns;
};

/** gt_clock__pair() - read one pair now (a few tries, the tightest wins). */
void gt_clock__pair(struct gt_clock_pair *p);

/**
 * gt_clock__fit_between() - the fit through two pairs (b after a): exact at both, so
 * events between them are off by at most the pairs' read jitter (~20 ns) whatever
 * the rate did before (NTP slews CLOCK_MONOTONIC against the TSC by up to 500 ppm).
 * Pure arithmetic (for TSC ticks; ns ticks need no fit).
 */
void gt_clock__fit_between(struct gt_clock_fit *fit, const struct gt_clock_pair *a,
                           const struct gt_clock_pair *b);

/**
 * gt_clock__fit() - a fit valid around now, anchored at the init anchor (for use
 * outside a session; a session fits between its start and stop pairs); waits at
 * most 20 ms for a usable baseline.
 */
void gt_clock__fit(struct gt_clock_fit *fit);

/* Convert one tick value to ns with a fit. */
static inline uint64_t gt_clock__to_ns(const struct gt_clock_fit *fit, uint64_t ticks)
{
    if (fit->ns_per_tick == 1.0 && fit->ticks0 == fit->ns0)
        return ticks;
    int64_t d = (int64_t)(ticks - fit->ticks0);
    return (uint64_t)((int64_t)fit->ns0 + (int64_t)((double)d * fit->ns_per_tick));
}

/* Name of the tick source, for outputs: "tsc" or "clock_gettime". */
const char *gt_clock__source(void);

#endif /* GT_CLOCK_H */

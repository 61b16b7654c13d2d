/* SPDX-License-Identifier: MIT */
/* Tick source selection and TSC -> CLOCK_MONOTONIC calibration. */
#define _GNU_SOURCE
#include "gt_clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int gt_clock_use_tsc = 0;

static int inited;
static uint64_t anchor_ticks, anchor_ns;

static int file_has_word(const char *path, const char *word)
{
    char line[4096];
    int found = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    while (!found && fgets(line, sizeof(line), f)) {
        for (char *p = strstr(line, word); p; p = strstr(p + 1, word)) {
            size_t n = strlen(word);
            int left = p == line || p[-1] == ' ' || p[-1] == '\t';
            int right = p[n] == ' ' || p[n] == '\n' || p[n] == '\0';
            if (left && right) {
                found = 1;
                break;
            }
        }
    }
    fclose(f);
    return found;
}

/* A (ticks, ns) pair read as close together as possible: the ns read is bracketed
 * by two tick reads and the tightest of a few tries wins. */
static void read_pair(uint64_t *ticks, uint64_t *ns)
{
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 5; i++) {
        uint64_t a = gt_ticks();
        uint64_t n = gt_now_ns();
        uint64_t b = gt_ticks();
        if (b - a < best) {
            best = b - a;
            *ticks = a + (b - a) / 2;
            *ns = n;
        }
    }
}

int gt_clock__init(void)
{
    if (inited)
        return 0;
    inited = 1;
#if GT_HAVE_TSC
    const char *env = getenv("GILTRACER_CLOCK");
    int forced_off = env && strcmp(env, "monotonic") == 0;
    if (!forced_off && file_has_word("/proc/cpuinfo", "constant_tsc") &&
        file_has_word("/proc/cpuinfo", "nonstop_tsc") &&
        file_has_word("/sys/devices/system/clocksource/clocksource0/current_clocksource",
                      "tsc"))
        gt_clock_use_tsc = 1;
#endif
    read_pair(&anchor_ticks, &anchor_ns);
    return 0;
}

void gt_clock__fit(struct gt_clock_fit *fit)
{
    gt_clock__init();
    if (!gt_clock_use_tsc) {
        fit->ticks0 = fit->ns0 = 0;
        fit->ns_per_tick = 1.0;
        return;
    }
    uint64_t t, n;
    read_pair(&t, &n);
    /* A 20 ms baseline bounds the rate error to ~1e-6 given ~20 ns read jitter. */
    while (n - anchor_ns < 20000000ull) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
        read_pair(&t, &n);
    }
    fit->ticks0 = t;
    fit->ns0 = n;
    fit->ns_per_tick = (double)(n - anchor_ns) / (double)(t - anchor_ticks);
}

void gt_clock__pair(struct gt_clock_pair *p)
{
    gt_clock__init();
    read_pair(&p->ticks, &p->ns);
}

void gt_clock__fit_between(struct gt_clock_fit *fit, const struct gt_clock_pair *a,
                           const struct gt_clock_pair *b)
{
    fit->ticks0 = b->ticks;
    fit->ns0 = b->ns;
    if (b->ticks > a->ticks && b->ns > a->ns)
        fit->ns_per_tick = (double)(b->ns - a->ns) / (double)(b->ticks - a->ticks);
    else /* cannot happen with pairs read in order from an invariant TSC */
        fit->ns_per_tick = 1.0;
}

const char *gt_clock__source(void)
{
    return gt_clock_use_tsc ? "tsc" : "clock_gettime";
}

/* SPDX-License-Identifier: MIT */
/* The sampler's clock: ticks on schedule, begin/end once each, a slow take skips ticks
 * instead of bunching them, stop interrupts the sleep, hold times are summed. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "sampler.h"

#include "check.h"

#define MS 1000000ull

struct ctx {
    atomic_int begun, takes, ended;
    uint64_t take_sleep_ns; /* how long each take "holds" */
    int fail_every;         /* every n-th take fails (0: none) */
};

static int begin(void *p)
{
    atomic_fetch_add(&((struct ctx *)p)->begun, 1);
    return 0;
}

static int take(void *p, uint64_t *held, uint64_t *waited)
{
    struct ctx *c = p;
    int n = atomic_fetch_add(&c->takes, 1) + 1;
    if (c->take_sleep_ns) {
        struct timespec ts = {0, (long)c->take_sleep_ns};
        nanosleep(&ts, NULL);
    }
    *held = c->take_sleep_ns ? c->take_sleep_ns : 1000;
    *waited = 10;
    return c->fail_every && n % c->fail_every == 0 ? -EIO : 0;
}

static void end(void *p)
{
    atomic_fetch_add(&((struct ctx *)p)->ended, 1);
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void test_ticks(void)
{
    struct ctx c = {.fail_every = 5};
    struct gt_sampler_ops ops = {begin, take, end, &c};
    struct gt_sampler *s = NULL;
    CHECK(gt_sampler__start(&s, 2 * MS, &ops) == 0, "start");
    sleep_ms(200);
    CHECK(gt_sampler__tid(s) > 0, "tid %d", gt_sampler__tid(s));
    struct gt_sampler_stats st;
    gt_sampler__stop(s, &st);
    int takes = atomic_load(&c.takes);
    /* 100 ticks in 200 ms; a loaded machine may skip some (counted). */
    CHECK(takes >= 20 && takes <= 101, "takes %d", takes);
    CHECK(st.samples + st.failed == (uint64_t)takes, "samples %llu failed %llu takes %d",
          (unsigned long long)st.samples, (unsigned long long)st.failed, takes);
    CHECK(st.failed == (uint64_t)takes / 5, "failed %llu", (unsigned long long)st.failed);
    CHECK(st.held_ns == st.samples * 1000, "held %llu", (unsigned long long)st.held_ns);
    CHECK(st.interval_ns == 2 * MS, "interval");
    CHECK(st.tid > 0, "tid");
    CHECK(atomic_load(&c.begun) == 1 && atomic_load(&c.ended) == 1, "begin/end once");
}

static void test_slow_take_skips(void)
{
    struct ctx c = {.take_sleep_ns = 5 * MS};
    struct gt_sampler_ops ops = {NULL, take, NULL, &c};
    struct gt_sampler *s = NULL;
    CHECK(gt_sampler__start(&s, 1 * MS, &ops) == 0, "start");
    sleep_ms(100);
    struct gt_sampler_stats st;
    gt_sampler__stop(s, &st);
    /* Each take lasts 5 ticks: about 4 of every 5 ticks are skipped, none bunched. */
    CHECK(st.samples <= 21, "samples %llu", (unsigned long long)st.samples);
    CHECK(st.skipped >= 3 * st.samples - 3, "skipped %llu of samples %llu",
          (unsigned long long)st.skipped, (unsigned long long)st.samples);
    CHECK(st.max_held_ns == 5 * MS, "max held");
}

static void test_stop_interrupts_sleep(void)
{
    struct ctx c = {0};
    struct gt_sampler_ops ops = {NULL, take, NULL, &c};
    struct gt_sampler *s = NULL;
    CHECK(gt_sampler__start(&s, 10ull * 1000 * MS, &ops) == 0, "start"); /* 10 s */
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    sleep_ms(10);
    gt_sampler__stop(s, NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double took = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
    CHECK(took < 2.0, "stop took %.3f s", took);
    CHECK(atomic_load(&c.takes) == 0, "no take");
}

int main(void)
{
    struct gt_sampler *s = NULL;
    struct gt_sampler_ops none = {0};
    CHECK(gt_sampler__start(&s, 0, &none) == -EINVAL, "interval 0");
    CHECK(gt_sampler__start(&s, MS, &none) == -EINVAL, "no take");
    gt_sampler__stop(NULL, NULL);
    test_ticks();
    test_slow_take_skips();
    test_stop_interrupts_sleep();
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}

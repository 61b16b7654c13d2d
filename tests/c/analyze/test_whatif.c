/* SPDX-License-Identifier: MIT */
/* Unit tests for core/analyze/whatif.c on hand-built results with known answers. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "whatif.h"

#define MS 1000000ull
#define NEAR(x, want, tol) (fabs((double)(x) - (double)(want)) <= (double)(tol))

enum { F_WORK, F_ACQ, F_SLEEP, F_GET, F_PUT, F_GET310, F_PUT310, F_MYGET, NFUNCS };
static const struct gt_func funcs[NFUNCS] = {
    [F_WORK] = {"work", "x.py", 1, 0},
    [F_ACQ] = {"_thread.lock.acquire", "", 0, GT_FUNC_C},
    [F_SLEEP] = {"time.sleep", "", 0, GT_FUNC_C},
    [F_GET] = {"Queue.get", "/usr/lib/python3.14/queue.py", 154, 0},
    [F_PUT] = {"Queue.put", "/usr/lib/python3.14/queue.py", 122, 0},
    [F_GET310] = {"get", "/usr/lib/python3.10/queue.py", 154, 0}, /* no class before 3.11 */
    [F_PUT310] = {"put", "/usr/lib/python3.10/queue.py", 122, 0},
    [F_MYGET] = {"Queue.get", "/home/u/myqueue.py", 1, 0}, /* not the standard library's */
};

#define H GT_GIL_STATE_HELD
#define W GT_GIL_STATE_WAIT
#define R GT_GIL_STATE_RELEASED

static struct gt_thread_result mk_thread(int32_t tid, struct gt_interval *iv, size_t n,
                                         struct gt_span *sp, size_t nsp)
{
    struct gt_thread_result t = {0};
    t.tid = tid;
    t.name = "t";
    t.gil = iv;
    t.ngil = n;
    t.spans = sp;
    t.nspans = nsp;
    t.start_ns = iv[0].start;
    t.end_ns = iv[n - 1].end;
    for (size_t i = 0; i < n; i++)
        if (iv[i].state == W)
            t.summary.wait_ns += iv[i].end - iv[i].start;
    return t;
}

static struct gt_result mk_result(struct gt_thread_result *th, size_t n)
{
    struct gt_result r = {0};
    r.funcs = funcs;
    r.nfuncs = NFUNCS;
    r.threads = th;
    r.nthreads = n;
    r.gil_known = 1;
    r.t0 = th[0].start_ns;
    r.t1 = th[0].end_ns;
    return r;
}

static struct gt_whatif *predict_wake(const struct gt_result *r, unsigned cpus, double factor,
                                      double handoff_ns)
{
    struct gt_whatif_opts o = {.cpus = cpus, .ft_factor = factor, .top_functions = 5,
                               .handoff_ns = handoff_ns};
    struct gt_whatif *w = NULL;
    int err = gt_whatif__predict(r, &o, &w);
    CHECK(err == 0, "predict: %d", err);
    return w;
}

static struct gt_whatif *predict(const struct gt_result *r, unsigned cpus, double factor)
{
    struct gt_whatif_opts o = {.cpus = cpus, .ft_factor = factor, .top_functions = 5};
    struct gt_whatif *w = NULL;
    int err = gt_whatif__predict(r, &o, &w);
    CHECK(err == 0, "predict: %d", err);
    return w;
}

/* Two CPU-bound threads taking turns with the GIL every 5 ms: 100 ms of work each. */
static void test_two_cpu_bound(void)
{
    struct gt_interval a[40], b[40];
    for (int i = 0; i < 40; i++) {
        uint64_t s = (uint64_t)i * 5 * MS, e = s + 5 * MS;
        a[i] = (struct gt_interval){s, e, i % 2 ? W : H, 0};
        b[i] = (struct gt_interval){s, e, i % 2 ? H : W, 0};
    }
    struct gt_span sa = {0, 200 * MS, F_WORK, 0, 0}, sb = sa;
    struct gt_thread_result th[2] = {mk_thread(1, a, 40, &sa, 1), mk_thread(2, b, 40, &sb, 1)};
    struct gt_blame bl[2] = {{1, 2, F_WORK, 20, 100 * MS}, {2, 1, F_WORK, 20, 100 * MS}};
    struct gt_result r = mk_result(th, 2);
    r.blame = bl;
    r.nblame = 2;

    struct gt_whatif *w = predict(&r, 2, 1.0);
    if (w) {
        CHECK(NEAR(w->measured_wall_ns, 200 * MS, 1), "measured %f", w->measured_wall_ns);
        CHECK(NEAR(w->predicted_wall_ns, 100 * MS, MS), "2 cpus: %f", w->predicted_wall_ns);
        CHECK(NEAR(w->gil_wall_ns, 200 * MS, MS), "gil replay: %f", w->gil_wall_ns);
        CHECK(w->nthreads == 2 && NEAR(w->threads[0].predicted_ns, 100 * MS, MS), "thread");
        CHECK(NEAR(w->threads[1].gil_wait_ns, 100 * MS, 1), "wait %f", w->threads[1].gil_wait_ns);
        /* F_WORK caused all the wait; releasing it (the only function) = no GIL. */
        CHECK(w->nfuncs == 1 && w->funcs[0].func == F_WORK, "funcs %zu", w->nfuncs);
        if (w->nfuncs == 1) {
            CHECK(NEAR(w->funcs[0].wait_caused_ns, 200 * MS, 1), "caused");
            CHECK(NEAR(w->funcs[0].release_wall_ns, 100 * MS, MS), "release %f",
                  w->funcs[0].release_wall_ns);
            CHECK(NEAR(w->funcs[0].saving_ns, 100 * MS, MS), "saving %f", w->funcs[0].saving_ns);
        }
    }
    gt_whatif__free(w);
    w = predict(&r, 1, 1.0);
    if (w)
        CHECK(NEAR(w->predicted_wall_ns, 200 * MS, MS), "1 cpu: %f", w->predicted_wall_ns);
    gt_whatif__free(w);
    w = predict(&r, 4, 1.3); /* more CPUs than threads: each runs alone, 1.3x slower */
    if (w)
        CHECK(NEAR(w->predicted_wall_ns, 130 * MS, MS), "4 cpus x1.3: %f", w->predicted_wall_ns);
    gt_whatif__free(w);

    /* CPUs that share a core: two busy CPUs each run at 0.6 of one alone (2 -> 1.2 CPUs'
     * worth): 100 ms of work each takes 166.7 ms side by side. */
    struct gt_whatif_opts o = {.cpus = 2, .ft_factor = 1.0, .parallel_speed = 0.6};
    w = NULL;
    CHECK(gt_whatif__predict(&r, &o, &w) == 0, "predict at speed 0.6");
    if (w) {
        CHECK(NEAR(w->predicted_wall_ns, 100 * MS / 0.6, MS), "2 cpus at 0.6: %f",
              w->predicted_wall_ns);
        CHECK(w->parallel_speed == 0.6, "speed kept: %f", w->parallel_speed);
        CHECK(NEAR(w->gil_wall_ns, 200 * MS, MS), "gil replay (one busy): %f", w->gil_wall_ns);
        char buf[GT_WHATIF_ASSUMPTION_LEN];
        CHECK(strstr(gt_whatif__assumption(w, 1, buf), "0.60 of its speed alone") != NULL,
              "assumption: %s", buf);
    }
    gt_whatif__free(w);
    /* On 4 CPUs with all 4 busy at 0.6, two busy run at 1 - 0.4 / 3 = 0.867 each. */
    o.cpus = 4;
    w = NULL;
    CHECK(gt_whatif__predict(&r, &o, &w) == 0, "predict 4 cpus at speed 0.6");
    if (w)
        CHECK(NEAR(w->predicted_wall_ns, 100 * MS / (1 - 0.4 / 3), MS), "4 cpus, 2 busy: %f",
              w->predicted_wall_ns);
    gt_whatif__free(w);
    /* One CPU: nothing runs side by side, the speed does not apply. */
    o.cpus = 1;
    w = NULL;
    CHECK(gt_whatif__predict(&r, &o, &w) == 0, "predict 1 cpu at speed 0.6");
    if (w)
        CHECK(NEAR(w->predicted_wall_ns, 200 * MS, MS), "1 cpu at 0.6: %f", w->predicted_wall_ns);
    gt_whatif__free(w);
}

/* A strictly serial hand-off chain: A works, wakes B and waits in lock.acquire; B works,
 * wakes A; A works. Nothing overlaps, so no speed-up. */
static void test_serial_chain(void)
{
    struct gt_interval a[] = {{0, 10 * MS, H, 0}, {10 * MS, 20 * MS, R, 0}, {20 * MS, 30 * MS, H, 0}};
    struct gt_span sa[] = {{10 * MS, 20 * MS, F_ACQ, 0, GT_SPAN_C}};
    struct gt_interval b[] = {{0, 10 * MS, R, 0}, {10 * MS, 20 * MS, H, 0}, {20 * MS, 30 * MS, R, 0}};
    struct gt_span sb[] = {{0, 10 * MS, F_ACQ, 0, GT_SPAN_C}};
    struct gt_thread_result th[2] = {mk_thread(1, a, 3, sa, 1), mk_thread(2, b, 3, sb, 1)};
    struct gt_result r = mk_result(th, 2);
    struct gt_whatif *w = predict(&r, 2, 1.0);
    if (w) {
        CHECK(w->handoffs == 2, "handoffs %zu", w->handoffs);
        CHECK(NEAR(w->predicted_wall_ns, 30 * MS, MS), "chain: %f", w->predicted_wall_ns);
    }
    gt_whatif__free(w);
    /* Both hand-offs are waited on (each thread waits for the other's work): a wake-up
     * each in the new schedule, none in the GIL replay. */
    w = predict_wake(&r, 2, 1.0, 1 * MS);
    if (w) {
        CHECK(w->waited == 2, "waited %zu", w->waited);
        CHECK(NEAR(w->predicted_wall_ns, 32 * MS, 1000), "chain + 2 wake-ups: %f",
              w->predicted_wall_ns);
        CHECK(NEAR(w->gil_wall_ns, 30 * MS, 1000), "gil replay: no wake-up %f", w->gil_wall_ns);
    }
    gt_whatif__free(w);
    /* Twice slower work: each waits for the other's slower work (blocking kept as is
     * would give 20 + 10 + 20). */
    w = predict(&r, 2, 2.0);
    if (w)
        CHECK(NEAR(w->predicted_wall_ns, 60 * MS, MS), "chain x2: %f", w->predicted_wall_ns);
    gt_whatif__free(w);
    /* Without the sync call the release is plain blocking: B's work overlaps A's. */
    th[0].nspans = 0;
    th[1].nspans = 0;
    w = predict(&r, 2, 1.0);
    if (w)
        CHECK(NEAR(w->predicted_wall_ns, 30 * MS, MS) && w->handoffs == 0, "no sync: %f %zu",
              w->predicted_wall_ns, w->handoffs);
    gt_whatif__free(w);
}

/* A hand-off mid-work: B waits in lock.acquire until A released the lock 40 ms into A's
 * 100 ms of work (A held the GIL then); B then works 50 ms. Without the GIL: B resumes when
 * A has done 40 ms of work, so 40 + 50 = 90 < 100: the wall is A's 100 ms. On one CPU: 150. */
static void test_handoff_mid_work(void)
{
    struct gt_interval a[] = {{0, 40 * MS, H, 0}, {40 * MS, 90 * MS, W, 0}, {90 * MS, 150 * MS, H, 0}};
    struct gt_span sa[] = {{0, 150 * MS, F_WORK, 0, 0}};
    struct gt_interval b[] = {{0, 40 * MS, R, 0}, {40 * MS, 90 * MS, H, 0}, {90 * MS, 150 * MS, W, 0}};
    struct gt_span sb[] = {{0, 40 * MS, F_ACQ, 0, GT_SPAN_C}};
    struct gt_thread_result th[2] = {mk_thread(1, a, 3, sa, 1), mk_thread(2, b, 3, sb, 1)};
    th[1].end_ns = 90 * MS;
    th[1].ngil = 2;
    struct gt_result r = mk_result(th, 2);
    struct gt_whatif *w = predict(&r, 2, 1.0);
    if (w) {
        CHECK(w->handoffs == 1, "handoffs %zu", w->handoffs);
        CHECK(NEAR(w->predicted_wall_ns, 100 * MS, MS), "2 cpus: %f", w->predicted_wall_ns);
        CHECK(NEAR(w->threads[1].predicted_ns, 90 * MS, MS), "B: %f", w->threads[1].predicted_ns);
    }
    gt_whatif__free(w);
    w = predict(&r, 1, 1.0);
    if (w)
        CHECK(NEAR(w->predicted_wall_ns, 150 * MS, MS), "1 cpu: %f", w->predicted_wall_ns);
    gt_whatif__free(w);
    /* x2: B resumes when A's first 40 ms of work (now 80) are done, ends at 180. */
    w = predict(&r, 2, 2.0);
    if (w) {
        CHECK(NEAR(w->threads[1].predicted_ns, 180 * MS, MS), "B x2: %f", w->threads[1].predicted_ns);
        CHECK(NEAR(w->predicted_wall_ns, 200 * MS, MS), "x2: %f", w->predicted_wall_ns);
    }
    gt_whatif__free(w);
}

/* A sleeping thread keeps its sleep; ft_factor slows its work only. */
static void test_sleep_and_factor(void)
{
    struct gt_interval a[] = {{0, 10 * MS, H, 0}, {10 * MS, 110 * MS, R, 0}, {110 * MS, 120 * MS, H, 0}};
    struct gt_span sa[] = {{10 * MS, 110 * MS, F_SLEEP, 0, GT_SPAN_C}};
    struct gt_thread_result th[1] = {mk_thread(1, a, 3, sa, 1)};
    struct gt_result r = mk_result(th, 1);
    struct gt_whatif *w = predict(&r, 8, 1.0);
    if (w)
        CHECK(NEAR(w->predicted_wall_ns, 120 * MS, 1000), "sleep: %f", w->predicted_wall_ns);
    gt_whatif__free(w);
    w = predict(&r, 8, 1.3);
    if (w)
        CHECK(NEAR(w->predicted_wall_ns, 126 * MS, 1000), "sleep x1.3: %f", w->predicted_wall_ns);
    gt_whatif__free(w);

    struct gt_interval c[] = {{0, 100 * MS, H, 0}};
    struct gt_thread_result tc[1] = {mk_thread(1, c, 1, NULL, 0)};
    struct gt_result rc = mk_result(tc, 1);
    w = predict(&rc, 1, 1.3);
    if (w)
        CHECK(NEAR(w->predicted_wall_ns, 130 * MS, 1000), "x1.3: %f", w->predicted_wall_ns);
    gt_whatif__free(w);
}

/* A release while a Python function is innermost is the interpreter's switch: it goes with
 * the wait; the same release in a C call (or on CPU, when OS states say so) is kept. */
static void test_switch(void)
{
    struct gt_interval a[] = {{0, 10 * MS, H, 0}, {10 * MS, 15 * MS, R, 0}, {15 * MS, 25 * MS, H, 0}};
    struct gt_span sa[] = {{0, 25 * MS, F_WORK, 0, 0}, {10 * MS, 15 * MS, F_SLEEP, 1, GT_SPAN_C}};
    struct gt_thread_result th[1] = {mk_thread(1, a, 3, sa, 1)};
    struct gt_result r = mk_result(th, 1);
    struct gt_whatif *w = predict(&r, 2, 1.0);
    if (w)
        CHECK(NEAR(w->predicted_wall_ns, 20 * MS, 1000), "switch: %f", w->predicted_wall_ns);
    gt_whatif__free(w);
    th[0].nspans = 2; /* inside time.sleep: kept */
    w = predict(&r, 2, 1.0);
    if (w)
        CHECK(NEAR(w->predicted_wall_ns, 25 * MS, 1000), "in C: %f", w->predicted_wall_ns);
    gt_whatif__free(w);
    th[0].nspans = 1;
    struct gt_interval os_on[] = {{0, 25 * MS, GT_OS_ON_CPU, 0}};
    th[0].os = os_on;
    th[0].nos = 1;
    th[0].has_sched = 1;
    w = predict(&r, 2, 1.0);
    if (w)
        CHECK(NEAR(w->predicted_wall_ns, 25 * MS, 1000), "on CPU: %f", w->predicted_wall_ns);
    gt_whatif__free(w);
    struct gt_interval os_pre[] = {{0, 10 * MS, GT_OS_ON_CPU, 0}, {10 * MS, 15 * MS, GT_OS_PREEMPTED, 0},
                                   {15 * MS, 25 * MS, GT_OS_ON_CPU, 0}};
    th[0].os = os_pre;
    th[0].nos = 3;
    w = predict(&r, 2, 1.0);
    if (w)
        CHECK(NEAR(w->predicted_wall_ns, 20 * MS, 1000), "preempted: %f", w->predicted_wall_ns);
    gt_whatif__free(w);
}

/* A thread started mid-trace starts after its starter's work up to then. */
static void test_thread_start(void)
{
    struct gt_interval a[] = {{0, 50 * MS, H, 0}, {50 * MS, 60 * MS, R, 0}};
    struct gt_interval b[] = {{50 * MS, 60 * MS, H, 0}};
    struct gt_thread_result th[2] = {mk_thread(1, a, 2, NULL, 0), mk_thread(2, b, 1, NULL, 0)};
    struct gt_result r = mk_result(th, 2);
    struct gt_whatif *w = predict(&r, 2, 1.0);
    if (w) {
        CHECK(w->handoffs == 1, "handoffs %zu", w->handoffs);
        CHECK(NEAR(w->predicted_wall_ns, 60 * MS, 1000), "start: %f", w->predicted_wall_ns);
    }
    gt_whatif__free(w);
}

/* A join: the joined thread wakes the joiner and then drops the GIL at its end; the joiner
 * resumes after the joined thread's whole life (x2: 100 ms, then 5 x2), not at the point
 * of the wake-up (98 ms). */
static void test_join(void)
{
    struct gt_interval a[] = {{0, 49 * MS, R, 0}, {49 * MS, 50 * MS, W, 0}, {50 * MS, 55 * MS, H, 0}};
    struct gt_span sa[] = {{0, 49 * MS, F_ACQ, 0, GT_SPAN_C}};
    struct gt_interval b[] = {{0, 50 * MS, H, 0}};
    struct gt_thread_result th[2] = {mk_thread(1, a, 3, sa, 1), mk_thread(2, b, 1, NULL, 0)};
    struct gt_result r = mk_result(th, 2);
    struct gt_whatif *w = predict(&r, 2, 2.0);
    if (w)
        CHECK(NEAR(w->predicted_wall_ns, 110 * MS, 1000), "join: %f", w->predicted_wall_ns);
    gt_whatif__free(w);
}

/* Not a join: A leaves a barrier B let it through at 1 ms, then waits for the GIL while B
 * works until its end at 50 ms. A resumes at B's 1 ms and works its 50 ms beside B's rest
 * (51 ms on 2 CPUs), not after B's whole life (100 ms: the join rule read B's end as the
 * wake-up, serialising the pair; seen in CI on 3.14 as a 1.00x prediction). */
static void test_barrier_then_gil_wait_is_no_join(void)
{
    struct gt_interval a[] = {{0, 1 * MS, R, 0}, {1 * MS, 50 * MS, W, 0}, {50 * MS, 100 * MS, H, 0}};
    struct gt_span sa[] = {{0, 1 * MS, F_ACQ, 0, GT_SPAN_C}};
    struct gt_interval b[] = {{0, 50 * MS, H, 0}};
    struct gt_thread_result th[2] = {mk_thread(1, a, 3, sa, 1), mk_thread(2, b, 1, NULL, 0)};
    struct gt_result r = mk_result(th, 2);
    struct gt_whatif *w = predict(&r, 2, 1.0);
    if (w)
        CHECK(NEAR(w->predicted_wall_ns, 51 * MS, 1000), "barrier: %f", w->predicted_wall_ns);
    gt_whatif__free(w);
}

/* A hand-off waited on in the new schedule costs the wake-up (the serial chain's: in
 * test_serial_chain); a thread's start waits on nothing (test_thread_start's: 60 ms, no
 * wake-up). */
static void test_wake_cost(void)
{
    struct gt_whatif *w;

    /* B waits on A 40 ms into A's work, but only from 10 ms on: it resumes at 40 + 1. */
    struct gt_interval c[] = {{0, 40 * MS, H, 0}, {40 * MS, 90 * MS, W, 0}, {90 * MS, 150 * MS, H, 0}};
    struct gt_span sc[] = {{0, 150 * MS, F_WORK, 0, 0}};
    struct gt_interval d[] = {{0, 10 * MS, H, 0}, {10 * MS, 40 * MS, R, 0}, {40 * MS, 90 * MS, H, 0}};
    struct gt_span sd[] = {{10 * MS, 40 * MS, F_ACQ, 0, GT_SPAN_C}};
    struct gt_thread_result t2[2] = {mk_thread(1, c, 3, sc, 1), mk_thread(2, d, 3, sd, 1)};
    struct gt_result r2 = mk_result(t2, 2);
    w = predict_wake(&r2, 2, 1.0, 1 * MS);
    if (w) {
        CHECK(w->waited == 1, "waited %zu", w->waited);
        CHECK(NEAR(w->threads[1].predicted_ns, 91 * MS, 1000), "B: %f", w->threads[1].predicted_ns);
    }
    gt_whatif__free(w);
    /* A hand-off whose waker is there first: B's acquire ends (20) when A has done 7 ms
     * of work (5 + 2), which A does by 7; B reaches it after its 13 ms: no wake-up. */
    struct gt_interval e[] = {{0, 5 * MS, H, 0}, {5 * MS, 18 * MS, W, 0}, {18 * MS, 25 * MS, H, 0}};
    struct gt_interval f[] = {{0, 5 * MS, W, 0}, {5 * MS, 18 * MS, H, 0}, {18 * MS, 20 * MS, R, 0}};
    struct gt_span sf[] = {{18 * MS, 20 * MS, F_ACQ, 0, GT_SPAN_C}};
    struct gt_thread_result t3[2] = {mk_thread(1, e, 3, NULL, 0), mk_thread(2, f, 3, sf, 1)};
    struct gt_result r3 = mk_result(t3, 2);
    w = predict_wake(&r3, 2, 1.0, 1 * MS);
    if (w) {
        CHECK(w->handoffs == 1 && w->waited == 0, "there first: %zu %zu", w->handoffs, w->waited);
        CHECK(NEAR(w->threads[1].predicted_ns, 13 * MS, 1000), "B: %f", w->threads[1].predicted_ns);
    }
    gt_whatif__free(w);
}

/* A producer/consumer queue the GIL serialised in turns: P puts item k at (k + 1) x 10 ms
 * of its work (k = 0..3) in its 40 ms turn; in its turn (40..60) C gets the four, each found
 * queued, and works 5 ms after each. Side by side, C's k-th get takes P's k-th put: C waits
 * for each item and works 5 ms on it: 0.1 (the first get), then 10 + 5, 20 + 5, 30 + 5,
 * 40 + 4.9 = 44.9 ms. Without the queue's dependencies (the model before) C ran from 0
 * and the wall was P's 40 ms. With a 1 ms wake-up each of the 4 waits costs 1: 45.9. */
static void test_queue_handoffs(void)
{
    struct gt_interval p[] = {{0, 40 * MS, H, 0}};
    struct gt_span sp[5] = {{0, 40 * MS, F_WORK, 0, 0}};
    for (int k = 0; k < 4; k++)
        sp[k + 1] = (struct gt_span){(uint64_t)(k + 1) * 10 * MS - MS / 10,
                                     (uint64_t)(k + 1) * 10 * MS, F_PUT, 1, 0};
    struct gt_interval c[] = {{0, 40 * MS, W, 0}, {40 * MS, 60 * MS, H, 0}};
    struct gt_span sc[5] = {{0, 60 * MS, F_WORK, 0, 0}};
    for (int k = 0; k < 4; k++)
        sc[k + 1] = (struct gt_span){40 * MS + (uint64_t)k * 5 * MS,
                                     40 * MS + (uint64_t)k * 5 * MS + MS / 10, F_GET, 1, 0};
    struct gt_thread_result th[2] = {mk_thread(1, p, 1, sp, 5), mk_thread(2, c, 2, sc, 5)};
    struct gt_result r = mk_result(th, 2);
    struct gt_whatif *w = predict(&r, 2, 1.0);
    if (w) {
        CHECK(w->queue_handoffs == 4, "queue hand-offs %zu", w->queue_handoffs);
        CHECK(NEAR(w->predicted_wall_ns, 44.9 * MS, 10000), "pipeline: %f", w->predicted_wall_ns);
        CHECK(NEAR(w->gil_wall_ns, 60 * MS, 10000), "gil replay %f", w->gil_wall_ns);
    }
    gt_whatif__free(w);
    w = predict_wake(&r, 2, 1.0, 1 * MS);
    if (w) {
        CHECK(w->waited == 4, "waited %zu", w->waited);
        CHECK(NEAR(w->predicted_wall_ns, 45.9 * MS, 10000), "pipeline + wake: %f",
              w->predicted_wall_ns);
    }
    gt_whatif__free(w);
    w = predict(&r, 1, 1.0); /* one CPU: P and C share it, never idle: 60 ms as traced */
    if (w)
        CHECK(NEAR(w->predicted_wall_ns, 60 * MS, 10000), "1 cpu: %f", w->predicted_wall_ns);
    gt_whatif__free(w);
    /* Python 3.10's names: the same. */
    for (int k = 0; k < 4; k++) {
        sp[k + 1].func = F_PUT310;
        sc[k + 1].func = F_GET310;
    }
    w = predict(&r, 2, 1.0);
    if (w)
        CHECK(w->queue_handoffs == 4 && NEAR(w->predicted_wall_ns, 44.9 * MS, 10000),
              "3.10 names: %zu %f", w->queue_handoffs, w->predicted_wall_ns);
    gt_whatif__free(w);
    /* Another module's Queue.get: not a queue the model knows. */
    for (int k = 0; k < 4; k++)
        sc[k + 1].func = F_MYGET;
    w = predict(&r, 2, 1.0);
    if (w)
        CHECK(w->queue_handoffs == 0, "myqueue.py: %zu", w->queue_handoffs);
    gt_whatif__free(w);
    for (int k = 0; k < 4; k++)
        sc[k + 1].func = F_GET;
    /* No puts in the trace (P fed C some other way): no queue hand-off, the wall P's. */
    for (int k = 0; k < 4; k++)
        sp[k + 1].func = F_WORK;
    w = predict(&r, 2, 1.0);
    if (w)
        CHECK(w->queue_handoffs == 0 && NEAR(w->predicted_wall_ns, 40 * MS, 10000),
              "no puts: %zu %f", w->queue_handoffs, w->predicted_wall_ns);
    gt_whatif__free(w);
}

static struct gt_whatif *predict_events(const struct gt_result *r, unsigned cpus, double factor,
                                        double event_ns)
{
    struct gt_whatif_opts o = {.cpus = cpus, .ft_factor = factor, .top_functions = 5,
                               .event_ns = event_ns};
    struct gt_whatif *w = NULL;
    int err = gt_whatif__predict(r, &o, &w);
    CHECK(err == 0, "predict: %d", err);
    return w;
}

/* The tracer's own cost: event_ns per call event (a span's start or end) in held time is
 * not work without the GIL (nor the tracer); events in released time cost nothing there. */
static void test_tracer_cost(void)
{
    /* Held 50 ms with 1000 calls (2000 events), a 10 ms sleep (its start released, its end
     * held: 1 event), held 40 ms with 500 calls (1000 events): 3001 events in held time. */
    struct gt_interval a[] = {{0, 50 * MS, H, 0}, {50 * MS, 60 * MS, R, 0}, {60 * MS, 100 * MS, H, 0}};
    static struct gt_span sa[1501];
    size_t ns = 0;
    for (uint64_t i = 0; i < 1000; i++)
        sa[ns++] = (struct gt_span){i * 40000 + 1000, i * 40000 + 11000, F_WORK, 0, 0};
    sa[ns++] = (struct gt_span){50 * MS, 60 * MS, F_SLEEP, 0, GT_SPAN_C};
    for (uint64_t i = 0; i < 500; i++)
        sa[ns++] = (struct gt_span){60 * MS + i * 40000 + 1000, 60 * MS + i * 40000 + 11000,
                                    F_WORK, 0, 0};
    struct gt_thread_result th[1] = {mk_thread(1, a, 3, sa, ns)};
    struct gt_result r = mk_result(th, 1);
    struct gt_whatif *w = predict_events(&r, 1, 1.0, 0);
    if (w) { /* zero cost: unchanged */
        CHECK(NEAR(w->predicted_wall_ns, 100 * MS, 1000), "no cost: %f", w->predicted_wall_ns);
        CHECK(w->events == 3001 && w->tracer_ns == 0, "events %f, %f", w->events, w->tracer_ns);
    }
    gt_whatif__free(w);
    w = predict_events(&r, 1, 1.0, 1000);
    if (w) {
        CHECK(w->events == 3001 && NEAR(w->tracer_ns, 3.001 * MS, 1), "events %f, tracer %f",
              w->events, w->tracer_ns);
        CHECK(NEAR(w->predicted_wall_ns, 100 * MS - 3001000, 1000), "1 us an event: %f",
              w->predicted_wall_ns);
        CHECK(NEAR(w->gil_wall_ns, 100 * MS, 1000), "gil replay keeps it: %f", w->gil_wall_ns);
    }
    gt_whatif__free(w);
    w = predict_events(&r, 1, 1.25, 1000); /* the factor applies to what is left */
    if (w)
        CHECK(NEAR(w->predicted_wall_ns, (90 * MS - 3001000) * 1.25 + 10 * MS, 1000),
              "x1.25: %f", w->predicted_wall_ns);
    gt_whatif__free(w);
    w = predict_events(&r, 1, 1.0, 1e9); /* more than the work: none left, the sleep stays */
    if (w)
        CHECK(NEAR(w->predicted_wall_ns, 10 * MS, 1000) && NEAR(w->tracer_ns, 90 * MS, 1),
              "clamped: %f %f", w->predicted_wall_ns, w->tracer_ns);
    gt_whatif__free(w);

    /* Two threads taking turns every 5 ms (100 ms of work each), A with 100 calls in each
     * of its 20 turns (4000 events), blamed (so the per-function walk runs too). */
    struct gt_interval ta[40], tb[40];
    static struct gt_span sp[2000];
    size_t n = 0;
    for (int i = 0; i < 40; i++) {
        uint64_t s = (uint64_t)i * 5 * MS, e = s + 5 * MS;
        ta[i] = (struct gt_interval){s, e, i % 2 ? W : H, 0};
        tb[i] = (struct gt_interval){s, e, i % 2 ? H : W, 0};
        for (uint64_t k = 0; i % 2 == 0 && k < 100; k++)
            sp[n++] = (struct gt_span){s + k * 40000 + 1000, s + k * 40000 + 11000, F_WORK, 0, 0};
    }
    struct gt_thread_result t2[2] = {mk_thread(1, ta, 40, sp, n), mk_thread(2, tb, 40, NULL, 0)};
    struct gt_blame bl[2] = {{1, 2, F_WORK, 20, 100 * MS}, {2, 1, F_WORK, 20, 100 * MS}};
    struct gt_result r2 = mk_result(t2, 2);
    r2.blame = bl;
    r2.nblame = 2;
    struct gt_whatif *w0 = predict_events(&r2, 2, 1.0, 0);
    w = predict_events(&r2, 2, 1.0, 1000);
    if (w && w0) {
        CHECK(w->events == 4000, "events %f", w->events);
        CHECK(w->nthreads == 2 && NEAR(w->threads[0].predicted_ns, 96 * MS, 1000) &&
                  NEAR(w->threads[1].predicted_ns, 100 * MS, 1000),
              "A 96, B 100: %f %f", w->threads[0].predicted_ns, w->threads[1].predicted_ns);
        CHECK(NEAR(w->predicted_wall_ns, 100 * MS, 1000), "wall: %f", w->predicted_wall_ns);
        CHECK(w->nfuncs == 1 && w0->nfuncs == 1 &&
                  w->funcs[0].release_wall_ns == w0->funcs[0].release_wall_ns,
              "F releases it: the tracer's cost kept");
    }
    gt_whatif__free(w);
    gt_whatif__free(w0);
}

static void test_errors(void)
{
    struct gt_interval c[] = {{0, 100 * MS, H, 0}};
    struct gt_thread_result tc[1] = {mk_thread(1, c, 1, NULL, 0)};
    struct gt_result r = mk_result(tc, 1);
    struct gt_whatif *w = (struct gt_whatif *)1;
    struct gt_whatif_opts o = {.cpus = 0, .ft_factor = 1.0};
    CHECK(gt_whatif__predict(&r, &o, &w) == -EINVAL && !w, "cpus 0");
    CHECK(strncmp(gt_whatif__opts_problem(&o), "cpus must be", 12) == 0, "cpus 0");
    o.cpus = 2;
    o.ft_factor = 0;
    CHECK(gt_whatif__predict(&r, &o, &w) == -EINVAL, "factor 0");
    CHECK(strncmp(gt_whatif__opts_problem(&o), "ft_factor must be", 17) == 0, "factor 0");
    o.ft_factor = NAN;
    CHECK(gt_whatif__predict(&r, &o, &w) == -EINVAL, "factor nan");
    CHECK(strncmp(gt_whatif__opts_problem(&o), "ft_factor must be", 17) == 0, "factor nan");
    o.ft_factor = 1;
    o.handoff_ns = -1;
    CHECK(gt_whatif__predict(&r, &o, &w) == -EINVAL, "handoff_ns < 0");
    CHECK(strncmp(gt_whatif__opts_problem(&o), "handoff_ns must be", 18) == 0, "handoff_ns < 0");
    o.handoff_ns = 0;
    o.event_ns = -1;
    CHECK(gt_whatif__predict(&r, &o, &w) == -EINVAL, "event_ns < 0");
    CHECK(strncmp(gt_whatif__opts_problem(&o), "event_ns must be", 16) == 0, "event_ns < 0");
    o.event_ns = INFINITY;
    CHECK(gt_whatif__predict(&r, &o, &w) == -EINVAL, "event_ns inf");
    CHECK(strncmp(gt_whatif__opts_problem(&o), "event_ns must be", 16) == 0, "event_ns inf");
    o.event_ns = 0;
    o.parallel_speed = 1.5;
    CHECK(gt_whatif__predict(&r, &o, &w) == -EINVAL, "parallel_speed > 1");
    CHECK(strncmp(gt_whatif__opts_problem(&o), "parallel_speed must be", 22) == 0, "parallel_speed > 1");
    o.parallel_speed = -0.5;
    CHECK(gt_whatif__predict(&r, &o, &w) == -EINVAL, "parallel_speed < 0");
    CHECK(strncmp(gt_whatif__opts_problem(&o), "parallel_speed must be", 22) == 0, "parallel_speed < 0");
    o.parallel_speed = NAN;
    CHECK(gt_whatif__predict(&r, &o, &w) == -EINVAL, "parallel_speed nan");
    CHECK(strncmp(gt_whatif__opts_problem(&o), "parallel_speed must be", 22) == 0, "parallel_speed nan");
    o.parallel_speed = 0;
    CHECK(gt_whatif__opts_problem(&o) == NULL, "valid options: no problem");
    r.gil_known = 0;
    CHECK(gt_whatif__predict(&r, &o, &w) == -ENODATA, "no gil");
    r.gil_known = 1;
    r.free_threaded = 1;
    CHECK(gt_whatif__predict(&r, &o, &w) == -EOPNOTSUPP, "free-threaded");
    r.free_threaded = 0;
    tc[0].background = 1;
    CHECK(gt_whatif__predict(&r, &o, &w) == -ENODATA, "no foreground thread");
    gt_whatif__free(NULL);
}

int main(void)
{
    test_two_cpu_bound();
    test_serial_chain();
    test_handoff_mid_work();
    test_sleep_and_factor();
    test_switch();
    test_thread_start();
    test_join();
    test_barrier_then_gil_wait_is_no_join();
    test_wake_cost();
    test_queue_handoffs();
    test_tracer_cost();
    test_errors();
    printf("test_whatif: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}

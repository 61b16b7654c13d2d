/* SPDX-License-Identifier: MIT */
/* Unit test of a thread's one state account (registry.h gt_thread__gil_event): GIL events
 * and a free-threaded build's park events feed the same account, decoded as merge
 * decodes the streams; the live view (gt_registry__live) and the thread's call tree
 * (ctree, past the call budget) both read it; a free-threaded build's threads run from
 * when they bind; an account in ns kept by another thread (bpf) splits no call tree. */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "gt_ctree.h"
#include "registry.h"

static size_t find(const struct gt_ctree *c, uint32_t parent, uint32_t func)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->nodes[i].parent == parent && c->nodes[i].func == func)
            return i;
    return SIZE_MAX;
}

static int live_of(struct gt_thread *t, struct gt_live_thread *out)
{
    struct gt_live sum;
    struct gt_live_thread th[8];
    if (gt_registry__live(&sum, th, 8) < 0)
        return -1;
    for (size_t i = 0; i < sum.nthreads && i < 8; i++)
        if (th[i].tid == t->tid) {
            *out = th[i];
            return 0;
        }
    return -1;
}

/* A free-threaded build: running from the bind, parked between a park's begin and end;
 * the live view and the call tree see the same split. */
static void test_parks_feed_the_account(void)
{
    CHECK(gt_registry__begin(0, NULL, NULL) == 0, "begin");
    gt_registry__set_overflow(GT_BUDGET_CALLS, gt_ctree__sink, gt_ctree__release);
    gt_registry__set_account(GT_GIL_LIVE_HELD, 0);
    struct gt_thread *t = gt_thread_current();
    CHECK(t && t->gil_live == GT_GIL_LIVE_HELD && t->gil_since, "running from its bind");
    if (!t)
        return;
    uint64_t b = t->gil_since;
    CHECK(gt_ctree__sink(&t->calls, b + 50, 7, GT_CALL) == 0, "call f");
    gt_thread__gil_event(t, b + 100, GT_PARK_BEGIN);
    gt_thread__gil_event(t, b + 250, GT_PARK_END);
    gt_thread__gil_event(t, b + 300, GT_PARK_BEGIN);
    struct gt_live_thread lt = {0};
    CHECK(live_of(t, &lt) == 0, "live");
    CHECK(lt.gil_live == GT_GIL_LIVE_WAITING && lt.gil_since == b + 300, "parked now");
    CHECK(lt.gil_ticks[GT_GIL_LIVE_HELD] == 150 && lt.gil_ticks[GT_GIL_LIVE_WAITING] == 150 &&
              lt.gil_ticks[GT_GIL_LIVE_RELEASED] == 0,
          "running %llu parked %llu", (unsigned long long)lt.gil_ticks[GT_GIL_LIVE_HELD],
          (unsigned long long)lt.gil_ticks[GT_GIL_LIVE_WAITING]);
    CHECK(gt_ctree__sink(&t->calls, b + 400, 7, GT_RETURN) == 0, "return f");
    const struct gt_ctree *c = t->calls.overflow;
    size_t f = c ? find(c, 0, 7) : SIZE_MAX;
    CHECK(f != SIZE_MAX, "f's node");
    if (f != SIZE_MAX)
        CHECK(c->nodes[f].self[GT_GIL_STATE_HELD] == 100 &&
                  c->nodes[f].self[GT_GIL_STATE_WAIT] == 250 &&
                  c->nodes[f].self[GT_CNODE_UNKNOWN] == 0,
              "f ran %llu, parked %llu", (unsigned long long)c->nodes[f].self[GT_GIL_STATE_HELD],
              (unsigned long long)c->nodes[f].self[GT_GIL_STATE_WAIT]);
    gt_registry__end();
    gt_registry__release(NULL);
}

/* A GIL build: unknown until the first event; a want while holding keeps it held; a
 * forced switch's end leaves a waiter released (as merge's build_gil). */
static void test_gil_events_decode_as_merge(void)
{
    CHECK(gt_registry__begin(0, NULL, NULL) == 0, "begin");
    struct gt_thread *t = gt_thread_current();
    CHECK(t && t->gil_live == GT_GIL_LIVE_UNKNOWN, "unknown until an event (reset at end)");
    if (!t)
        return;
    static const struct {
        uint64_t ts;
        uint32_t kind;
        int after;
    } ev[] = {
        {10, GT_GIL_WANT, GT_GIL_LIVE_WAITING},      {30, GT_GIL_ACQUIRED, GT_GIL_LIVE_HELD},
        {40, GT_GIL_WANT, GT_GIL_LIVE_HELD},         {45, GT_GIL_DROP_REQUEST, GT_GIL_LIVE_HELD},
        {60, GT_GIL_RELEASED, GT_GIL_LIVE_RELEASED}, {70, GT_GIL_WANT, GT_GIL_LIVE_WAITING},
        {75, GT_GIL_SWITCH_DONE, GT_GIL_LIVE_RELEASED}, {90, GT_GIL_ACQUIRED, GT_GIL_LIVE_HELD},
    };
    for (size_t i = 0; i < sizeof(ev) / sizeof(ev[0]); i++) {
        gt_thread__gil_event(t, ev[i].ts, ev[i].kind);
        CHECK(t->gil_live == ev[i].after, "event %zu: state %d, not %d", i, t->gil_live,
              ev[i].after);
    }
    CHECK(t->gil_ticks[GT_GIL_LIVE_WAITING] == 25 && t->gil_ticks[GT_GIL_LIVE_HELD] == 30 &&
              t->gil_ticks[GT_GIL_LIVE_RELEASED] == 25 && t->gil_since == 90,
          "waiting %llu held %llu released %llu",
          (unsigned long long)t->gil_ticks[GT_GIL_LIVE_WAITING],
          (unsigned long long)t->gil_ticks[GT_GIL_LIVE_HELD],
          (unsigned long long)t->gil_ticks[GT_GIL_LIVE_RELEASED]);
    gt_registry__end();
    gt_registry__release(NULL);
}

/* The bpf drain keeps the account in ns from another thread: the call tree, in the
 * thread's ticks, leaves its time unknown rather than split by another clock. */
static void test_ns_account_splits_no_call_tree(void)
{
    CHECK(gt_registry__begin(0, NULL, NULL) == 0, "begin");
    gt_registry__set_overflow(GT_BUDGET_CALLS, gt_ctree__sink, gt_ctree__release);
    gt_registry__set_account(GT_GIL_LIVE_UNKNOWN, 1);
    struct gt_thread *t = gt_thread_current();
    if (!t) {
        CHECK(t, "thread");
        return;
    }
    gt_thread__gil_event(t, 5, GT_GIL_ACQUIRED);
    gt_ctree__sink(&t->calls, 10, 7, GT_CALL);
    gt_ctree__sink(&t->calls, 20, 7, GT_RETURN);
    const struct gt_ctree *c = t->calls.overflow;
    size_t f = c ? find(c, 0, 7) : SIZE_MAX;
    CHECK(f != SIZE_MAX && c->nodes[f].self[GT_CNODE_UNKNOWN] == 10 &&
              c->nodes[f].self[GT_GIL_STATE_HELD] == 0,
          "unknown, not held");
    gt_registry__end();
    CHECK(gt_account_ns == 0, "reset at end");
    gt_registry__release(NULL);
}

int main(void)
{
    test_parks_feed_the_account();
    test_gil_events_decode_as_merge();
    test_ns_account_splits_no_call_tree();
    printf("test_account: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

/* SPDX-License-Identifier: MIT */
/* Unit tests for core/analyze/merge.c: spans, GIL/OS intervals, summaries, blame, errors, speed. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gt_clock.h"
#include "merge.h"

static int fails; /* failed CHECKs in the current test */

/* Own fabs so the test links without -lm. */
static double abs_d(double x)
{
    return x < 0 ? -x : x;
}

#define CHECK(e)                                                                   \
    do {                                                                           \
        if (!(e)) {                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #e);  \
            fails++;                                                               \
        }                                                                          \
    } while (0)

#define CHECK_SPAN(s, st, en, fn, dp, fl)                                          \
    do {                                                                           \
        const struct gt_span *s_ = (s);                                            \
        CHECK(s_->start == (st));                                                  \
        CHECK(s_->end == (en));                                                    \
        CHECK(s_->func == (fn));                                                   \
        CHECK(s_->depth == (dp));                                                  \
        CHECK(s_->flags == (fl));                                                  \
    } while (0)

#define CHECK_IV(iv, st, en, state_)                                               \
    do {                                                                           \
        const struct gt_interval *i_ = (iv);                                       \
        CHECK(i_->start == (st));                                                  \
        CHECK(i_->end == (en));                                                    \
        CHECK(i_->state == (state_));                                              \
    } while (0)

#define CHECK_BLAME(b, w, h, fn, cnt, ns)                                          \
    do {                                                                           \
        const struct gt_blame *b_ = (b);                                           \
        CHECK(b_->waiter_tid == (w));                                              \
        CHECK(b_->holder_tid == (h));                                              \
        CHECK(b_->func == (fn));                                                   \
        CHECK(b_->count == (cnt));                                                 \
        CHECK(b_->wait_ns == (ns));                                                \
    } while (0)

#define N(a) (sizeof(a) / sizeof((a)[0]))

enum { F_F, F_G, F_H, F_LEN, F_K, F_CPY, NFUNCS };

static const struct gt_func funcs[NFUNCS] = {
    [F_F] = {"f", "a.py", 1, 0},
    [F_G] = {"g", "a.py", 5, 0},
    [F_H] = {"h", "a.py", 9, 0},
    [F_LEN] = {"len", "", 0, GT_FUNC_C},
    [F_K] = {"k", "b.py", 3, 0},
    [F_CPY] = {"cpy", "", 0, GT_FUNC_C}, /* C function reported with Python kinds */
};

static struct gt_trace_input mk_input(uint64_t t0, uint64_t t1, struct gt_thread_input *th,
                                      size_t n, int gil_known)
{
    struct gt_trace_input in = {0};
    in.t0 = t0;
    in.t1 = t1;
    in.funcs = funcs;
    in.nfuncs = NFUNCS;
    in.threads = th;
    in.nthreads = n;
    in.gil_known = gil_known;
    return in;
}

/* Sorted by (start, depth), well formed, and each span lies inside its parent (the
 * nearest earlier span one level up). */
static void check_span_invariants(const struct gt_thread_result *t)
{
    for (size_t i = 0; i < t->nspans; i++) {
        const struct gt_span *s = &t->spans[i];
        CHECK(s->start <= s->end);
        CHECK(s->start >= t->start_ns && s->end <= t->end_ns);
        CHECK(s->func < NFUNCS);
        if (i) {
            const struct gt_span *p = &t->spans[i - 1];
            CHECK(p->start < s->start || (p->start == s->start && p->depth <= s->depth));
        }
        if (s->depth == 0)
            continue;
        size_t j = i;
        while (j > 0 && t->spans[j - 1].depth != s->depth - 1)
            j--;
        CHECK(j > 0);
        if (j > 0) {
            CHECK(t->spans[j - 1].start <= s->start);
            CHECK(t->spans[j - 1].end >= s->end);
        }
    }
}

static void check_contiguous(const struct gt_interval *v, size_t n, uint64_t start,
                             uint64_t end)
{
    if (start == end) {
        CHECK(n == 0);
        return;
    }
    CHECK(n > 0);
    if (n == 0)
        return;
    CHECK(v[0].start == start);
    CHECK(v[n - 1].end == end);
    for (size_t i = 0; i < n; i++) {
        CHECK(v[i].start < v[i].end);
        if (i) {
            CHECK(v[i].start == v[i - 1].end);
            CHECK(v[i].state != v[i - 1].state);
        }
    }
}

static void check_gil_summary(const struct gt_thread_result *t)
{
    const struct gt_summary *s = &t->summary;
    CHECK(s->wall_ns == t->end_ns - t->start_ns);
    CHECK(s->held_ns + s->wait_ns + s->released_ns == s->wall_ns);
    if (s->wall_ns)
        CHECK(abs_d(s->held_pct + s->wait_pct + s->released_pct - 100.0) <= 1e-9);
    check_contiguous(t->gil, t->ngil, t->start_ns, t->end_ns);
}

/* ---- spans ---- */

/* The recorded form of `n` call events (as the recorder writes them, see gt_events.h):
 * 8-byte records, a time base first and wherever bits 32-63 of the timestamp change.
 * Freed at the end of the program (free_packed). */
static void *packed[4096];
static size_t npacked;

static struct gt_chunk calls_chunk(const struct gt_call_event *ev, size_t n)
{
    struct gt_call_rec *rec = malloc((2 * n + 1) * sizeof(*rec));
    size_t k = 0;
    if (!rec || npacked == N(packed)) {
        free(rec);
        fprintf(stderr, "calls_chunk: out of memory\n");
        exit(2);
    }
    packed[npacked++] = rec;
    if (n == 0)
        return (struct gt_chunk){rec, 0};
    uint32_t hi = (uint32_t)(ev[0].ts >> 32);
    rec[k++] = gt_call_rec__base(hi);
    for (size_t i = 0; i < n; i++) {
        if ((uint32_t)(ev[i].ts >> 32) != hi) {
            hi = (uint32_t)(ev[i].ts >> 32);
            rec[k++] = gt_call_rec__base(hi);
        }
        rec[k++] = (struct gt_call_rec){(uint32_t)ev[i].ts, gt_call_rec__word(ev[i].func, ev[i].kind)};
    }
    return (struct gt_chunk){rec, k};
}

static void free_packed(void)
{
    while (npacked)
        free(packed[--npacked]);
}

static const struct gt_call_event nest_ev[] = {
    {10, F_F, GT_CALL},   {20, F_G, GT_CALL},   {25, F_H, GT_CALL}, {30, F_H, GT_RETURN},
    {40, F_G, GT_RETURN}, {50, F_G, GT_CALL},   {60, F_G, GT_RETURN}, {70, F_F, GT_RETURN},
};

static void check_nest_spans(const struct gt_thread_result *t)
{
    CHECK(t->nspans == 4);
    if (t->nspans != 4)
        return;
    CHECK_SPAN(&t->spans[0], 10, 70, F_F, 0, 0);
    CHECK_SPAN(&t->spans[1], 20, 40, F_G, 1, 0);
    CHECK_SPAN(&t->spans[2], 25, 30, F_H, 2, 0);
    CHECK_SPAN(&t->spans[3], 50, 60, F_G, 1, 0);
    check_span_invariants(t);
}

static void test_nesting(void)
{
    struct gt_chunk ch = calls_chunk(nest_ev, N(nest_ev));
    struct gt_thread_input th = {.tid = 7, .pid = 0, .ident = 99, .name = "Main",
                                 .flags = GT_THREAD_EXISTED_AT_START,
                                 .calls = &ch, .ncalls = 1};
    struct gt_trace_input in = mk_input(0, 100, &th, 1, 0);
    struct gt_result *r = NULL;
    CHECK(gt_merge__run(&in, &r) == 0);
    if (!r)
        return;
    CHECK(r->t0 == 0 && r->t1 == 100 && r->funcs == funcs && r->nfuncs == NFUNCS);
    CHECK(r->nthreads == 1);
    const struct gt_thread_result *t = &r->threads[0];
    CHECK(t->tid == 7 && t->ident == 99 && t->name == th.name);
    CHECK(t->start_ns == 0 && t->end_ns == 100);
    CHECK(t->summary.wall_ns == 100);
    check_nest_spans(t);
    gt_result__free(r);
}

static void test_open_at_start_flag(void)
{
    /* Frames already open at the start are recorded as calls at t0 with the
     * GT_CALL_OPEN_AT_START flag: their spans say so. */
    static const struct gt_call_event ev[] = {
        {0, F_F, GT_CALL | GT_CALL_OPEN_AT_START}, {0, F_G, GT_CALL | GT_CALL_OPEN_AT_START},
        {20, F_H, GT_CALL}, {30, F_H, GT_RETURN}, {40, F_G, GT_RETURN},
    };
    struct gt_chunk ch = calls_chunk(ev, N(ev));
    struct gt_thread_input th = {.tid = 1, .flags = GT_THREAD_EXISTED_AT_START,
                                 .calls = &ch, .ncalls = 1};
    struct gt_trace_input in = mk_input(0, 100, &th, 1, 0);
    struct gt_result *r = NULL;
    CHECK(gt_merge__run(&in, &r) == 0);
    if (!r)
        return;
    const struct gt_thread_result *t = &r->threads[0];
    CHECK(t->nspans == 3);
    if (t->nspans == 3) {
        CHECK_SPAN(&t->spans[0], 0, 100, F_F, 0, GT_SPAN_CLIPPED_START | GT_SPAN_CLIPPED_END);
        CHECK_SPAN(&t->spans[1], 0, 40, F_G, 1, GT_SPAN_CLIPPED_START);
        CHECK_SPAN(&t->spans[2], 20, 30, F_H, 2, 0);
    }
    gt_result__free(r);
}

/* Call records as recorded: 32-bit timestamps under time bases. A thread whose calls
 * cross a 2^32 boundary (a new base mid-chunk, and a second chunk starting with its own)
 * keeps its spans, and its life ends at its last event, whose base lies back in the
 * chunk; with a tick fit, merge converts every timestamp. */
static void test_call_time_bases(void)
{
    const uint64_t B = (uint64_t)1 << 32;
    static struct gt_call_event ev[6];
    ev[0] = (struct gt_call_event){B - 20, F_F, GT_CALL};
    ev[1] = (struct gt_call_event){B - 10, F_G, GT_CALL};
    ev[2] = (struct gt_call_event){B + 5, F_G, GT_RETURN};
    ev[3] = (struct gt_call_event){B + 6, F_H, GT_CCALL};
    ev[4] = (struct gt_call_event){B + 7, F_H, GT_CRETURN};
    ev[5] = (struct gt_call_event){B + 30, F_F, GT_RETURN};
    struct gt_chunk ch[2] = {calls_chunk(ev, 3), calls_chunk(ev + 3, 3)};
    CHECK(ch[0].n == 5 && ch[1].n == 4); /* 2 bases + 3 events; 1 base + 3 events */
    struct gt_thread_input th = {.tid = 1, .flags = GT_THREAD_ENDED, .calls = ch, .ncalls = 2};
    struct gt_trace_input in = mk_input(B - 100, B + 100, &th, 1, 0);
    struct gt_result *r = NULL;
    CHECK(gt_merge__run(&in, &r) == 0);
    if (r) {
        const struct gt_thread_result *t = &r->threads[0];
        CHECK(t->start_ns == B - 20 && t->end_ns == B + 30);
        CHECK(t->nspans == 3);
        if (t->nspans == 3) {
            CHECK_SPAN(&t->spans[0], B - 20, B + 30, F_F, 0, 0);
            CHECK_SPAN(&t->spans[1], B - 10, B + 5, F_G, 1, 0);
            CHECK_SPAN(&t->spans[2], B + 6, B + 7, F_H, 1, GT_SPAN_C);
        }
        gt_result__free(r);
    }

    /* Ticks at half a ns each from tick 1000 = 5000 ns. */
    struct gt_clock_fit fit = {.ticks0 = 1000, .ns0 = 5000, .ns_per_tick = 0.5};
    static const struct gt_call_event tk[] = {
        {1100, F_F, GT_CALL}, {1200, F_G, GT_CALL}, {1300, F_G, GT_RETURN}, {1400, F_F, GT_RETURN}};
    struct gt_chunk tc = calls_chunk(tk, N(tk));
    th = (struct gt_thread_input){.tid = 1, .flags = GT_THREAD_ENDED, .calls = &tc, .ncalls = 1};
    in = mk_input(5000, 6000, &th, 1, 0);
    in.calls_fit = &fit;
    r = NULL;
    CHECK(gt_merge__run(&in, &r) == 0);
    if (r) {
        const struct gt_thread_result *t = &r->threads[0];
        CHECK(t->start_ns == 5050 && t->end_ns == 5200);
        CHECK(t->nspans == 2);
        if (t->nspans == 2) {
            CHECK_SPAN(&t->spans[0], 5050, 5200, F_F, 0, 0);
            CHECK_SPAN(&t->spans[1], 5100, 5150, F_G, 1, 0);
        }
        gt_result__free(r);
    }
}

static void test_chunks_split(void)
{
    /* Same stream across four chunks, one of them empty. */
    struct gt_chunk ch[] = {calls_chunk(nest_ev, 3), calls_chunk(nest_ev + 3, 0), calls_chunk(nest_ev + 3, 1),
                            calls_chunk(nest_ev + 4, 4)};
    struct gt_thread_input th = {.tid = 1, .flags = GT_THREAD_EXISTED_AT_START,
                                 .calls = ch, .ncalls = N(ch)};
    struct gt_trace_input in = mk_input(0, 100, &th, 1, 0);
    struct gt_result *r = NULL;
    CHECK(gt_merge__run(&in, &r) == 0);
    if (!r)
        return;
    check_nest_spans(&r->threads[0]);
    gt_result__free(r);
}

static void test_empty_stack_return(void)
{
    /* Tracing started inside d -> b: their returns arrive with an empty stack. */
    static const struct gt_call_event ev[] = {
        {10, F_F, GT_CALL}, {20, F_F, GT_RETURN}, {30, F_G, GT_RETURN},
        {40, F_H, GT_CALL}, {50, F_H, GT_RETURN}, {60, F_K, GT_RETURN},
        {70, F_F, GT_CALL}, {80, F_F, GT_RETURN},
    };
    struct gt_chunk ch = calls_chunk(ev, N(ev));
    struct gt_thread_input th = {.tid = 1, .flags = GT_THREAD_EXISTED_AT_START,
                                 .calls = &ch, .ncalls = 1};
    struct gt_trace_input in = mk_input(5, 100, &th, 1, 0);
    struct gt_result *r = NULL;
    CHECK(gt_merge__run(&in, &r) == 0);
    if (!r)
        return;
    const struct gt_thread_result *t = &r->threads[0];
    CHECK(t->nspans == 5);
    if (t->nspans == 5) {
        CHECK_SPAN(&t->spans[0], 5, 60, F_K, 0, GT_SPAN_CLIPPED_START);
        CHECK_SPAN(&t->spans[1], 5, 30, F_G, 1, GT_SPAN_CLIPPED_START);
        CHECK_SPAN(&t->spans[2], 10, 20, F_F, 2, 0);
        CHECK_SPAN(&t->spans[3], 40, 50, F_H, 1, 0);
        CHECK_SPAN(&t->spans[4], 70, 80, F_F, 0, 0);
    }
    check_span_invariants(t);
    gt_result__free(r);
}

static void test_empty_stack_return_new_thread(void)
{
    /* Not existing at start: life starts at its first event; a C return at an empty
     * stack keeps its C and unwind flags. */
    static const struct gt_call_event ev[] = {
        {30, F_G, GT_CALL}, {35, F_G, GT_UNWIND}, {40, F_LEN, GT_CRAISE},
    };
    struct gt_chunk ch = calls_chunk(ev, N(ev));
    struct gt_thread_input th = {.tid = 1, .calls = &ch, .ncalls = 1};
    struct gt_trace_input in = mk_input(0, 100, &th, 1, 0);
    struct gt_result *r = NULL;
    CHECK(gt_merge__run(&in, &r) == 0);
    if (!r)
        return;
    const struct gt_thread_result *t = &r->threads[0];
    CHECK(t->start_ns == 30 && t->end_ns == 100);
    CHECK(t->nspans == 2);
    if (t->nspans == 2) {
        CHECK_SPAN(&t->spans[0], 30, 40, F_LEN, 0,
                   GT_SPAN_CLIPPED_START | GT_SPAN_UNWIND | GT_SPAN_C);
        CHECK_SPAN(&t->spans[1], 30, 35, F_G, 1, GT_SPAN_UNWIND);
    }
    check_span_invariants(t);
    gt_result__free(r);
}

static void test_deficit_ties_sorted(void)
{
    /* Two zero-length pre-tracing frames then a call, all at the life start: the
     * (start, depth) order must still hold. */
    static const struct gt_call_event ev[] = {
        {10, F_G, GT_RETURN}, {10, F_H, GT_RETURN}, {10, F_F, GT_CALL}, {20, F_F, GT_RETURN},
    };
    struct gt_chunk ch = calls_chunk(ev, N(ev));
    struct gt_thread_input th = {.tid = 1, .calls = &ch, .ncalls = 1};
    struct gt_trace_input in = mk_input(0, 100, &th, 1, 0);
    struct gt_result *r = NULL;
    CHECK(gt_merge__run(&in, &r) == 0);
    if (!r)
        return;
    const struct gt_thread_result *t = &r->threads[0];
    CHECK(t->nspans == 3);
    if (t->nspans == 3) {
        CHECK_SPAN(&t->spans[0], 10, 10, F_H, 0, GT_SPAN_CLIPPED_START);
        CHECK_SPAN(&t->spans[1], 10, 20, F_F, 0, 0);
        CHECK_SPAN(&t->spans[2], 10, 10, F_G, 1, GT_SPAN_CLIPPED_START);
    }
    check_span_invariants(t);
    gt_result__free(r);
}

static void test_open_at_end(void)
{
    static const struct gt_call_event ev[] = {
        {10, F_F, GT_CALL}, {20, F_G, GT_CALL}, {30, F_H, GT_CALL}, {40, F_H, GT_RETURN},
    };
    static const struct gt_gil_event gev[] = {{80, GT_GIL_RELEASED, 0}};
    struct gt_chunk ch = calls_chunk(ev, N(ev)), gch = {gev, N(gev)};
    struct gt_thread_input th[2] = {
        {.tid = 1, .flags = GT_THREAD_EXISTED_AT_START, .calls = &ch, .ncalls = 1},
        /* Ended: life ends at its last event of any stream (the GIL one at 80). */
        {.tid = 2, .flags = GT_THREAD_EXISTED_AT_START | GT_THREAD_ENDED,
         .calls = &ch, .ncalls = 1, .gil = &gch, .ngil = 1},
    };
    struct gt_trace_input in = mk_input(0, 100, th, 2, 0);
    struct gt_result *r = NULL;
    CHECK(gt_merge__run(&in, &r) == 0);
    if (!r)
        return;
    const struct gt_thread_result *t = &r->threads[0];
    CHECK(t->nspans == 3);
    if (t->nspans == 3) {
        CHECK_SPAN(&t->spans[0], 10, 100, F_F, 0, GT_SPAN_CLIPPED_END);
        CHECK_SPAN(&t->spans[1], 20, 100, F_G, 1, GT_SPAN_CLIPPED_END);
        CHECK_SPAN(&t->spans[2], 30, 40, F_H, 2, 0);
    }
    check_span_invariants(t);
    t = &r->threads[1];
    CHECK(t->start_ns == 0 && t->end_ns == 80);
    CHECK(t->nspans == 3);
    if (t->nspans == 3) {
        CHECK_SPAN(&t->spans[0], 10, 80, F_F, 0, GT_SPAN_CLIPPED_END);
        CHECK_SPAN(&t->spans[1], 20, 80, F_G, 1, GT_SPAN_CLIPPED_END);
    }
    check_span_invariants(t);
    gt_result__free(r);
}

static void test_truncation(void)
{
    static const struct gt_call_event ev[] = {
        {10, F_F, GT_CALL}, {20, F_G, GT_CALL},   {30, F_G, GT_RETURN},
        {40, F_H, GT_CALL}, {50, F_K, GT_CALL},   /* at the cap: still kept */
        {60, F_K, GT_RETURN}, {70, F_K, GT_CALL}, /* after the cap: dropped */
    };
    struct gt_chunk ch = calls_chunk(ev, N(ev));
    struct gt_thread_input th = {.tid = 1, .flags = GT_THREAD_EXISTED_AT_START,
                                 .calls = &ch, .ncalls = 1, .calls_truncated_at = 50};
    struct gt_trace_input in = mk_input(0, 100, &th, 1, 0);
    struct gt_result *r = NULL;
    CHECK(gt_merge__run(&in, &r) == 0);
    if (!r)
        return;
    const struct gt_thread_result *t = &r->threads[0];
    CHECK(t->end_ns == 100); /* truncation does not shorten the life */
    CHECK(t->nspans == 4);
    if (t->nspans == 4) {
        CHECK_SPAN(&t->spans[0], 10, 50, F_F, 0, GT_SPAN_CLIPPED_END);
        CHECK_SPAN(&t->spans[1], 20, 30, F_G, 1, 0);
        CHECK_SPAN(&t->spans[2], 40, 50, F_H, 1, GT_SPAN_CLIPPED_END);
        CHECK_SPAN(&t->spans[3], 50, 50, F_K, 2, GT_SPAN_CLIPPED_END);
    }
    check_span_invariants(t);
    gt_result__free(r);

    /* A truncation point after the life end changes nothing. */
    th.calls_truncated_at = 500;
    th.ncalls = 1;
    ch.n = 5; /* the time base and the first 4 events */
    CHECK(gt_merge__run(&in, &r) == 0);
    if (!r)
        return;
    t = &r->threads[0];
    CHECK(t->nspans == 3);
    if (t->nspans == 3)
        CHECK_SPAN(&t->spans[2], 40, 100, F_H, 1, GT_SPAN_CLIPPED_END);
    gt_result__free(r);
}

static void test_mismatched_return(void)
{
    static const struct gt_call_event ev[] = {
        {10, F_F, GT_CALL},   {20, F_G, GT_CALL},   {25, F_K, GT_RETURN}, /* unknown: ignored */
        {30, F_H, GT_CALL},   {40, F_F, GT_RETURN}, /* closes h and g (lost returns) and f */
        {50, F_G, GT_CALL},   {55, F_G, GT_UNWIND}, {58, F_G, GT_CALL},
        {60, F_K, GT_RETURN}, /* nothing matches g's k: ignored */
        {65, F_G, GT_RETURN},
    };
    struct gt_chunk ch = calls_chunk(ev, N(ev));
    struct gt_thread_input th = {.tid = 1, .flags = GT_THREAD_EXISTED_AT_START,
                                 .calls = &ch, .ncalls = 1};
    struct gt_trace_input in = mk_input(0, 100, &th, 1, 0);
    struct gt_result *r = NULL;
    CHECK(gt_merge__run(&in, &r) == 0);
    if (!r)
        return;
    const struct gt_thread_result *t = &r->threads[0];
    CHECK(t->nspans == 5);
    if (t->nspans == 5) {
        CHECK_SPAN(&t->spans[0], 10, 40, F_F, 0, 0);
        CHECK_SPAN(&t->spans[1], 20, 40, F_G, 1, GT_SPAN_CLIPPED_END);
        CHECK_SPAN(&t->spans[2], 30, 40, F_H, 2, GT_SPAN_CLIPPED_END);
        CHECK_SPAN(&t->spans[3], 50, 55, F_G, 0, GT_SPAN_UNWIND);
        CHECK_SPAN(&t->spans[4], 58, 65, F_G, 0, 0);
    }
    check_span_invariants(t);
    gt_result__free(r);
}

static void test_unwind_and_c_spans(void)
{
    static const struct gt_call_event ev[] = {
        {10, F_F, GT_CALL},     {12, F_LEN, GT_CCALL}, {14, F_LEN, GT_CRETURN},
        {15, F_LEN, GT_CCALL},  {16, F_LEN, GT_CRAISE}, {20, F_G, GT_CALL},
        {22, F_CPY, GT_CALL},   {24, F_CPY, GT_RETURN}, /* C by its func flags */
        {30, F_G, GT_UNWIND},   {40, F_F, GT_UNWIND},
    };
    struct gt_chunk ch = calls_chunk(ev, N(ev));
    struct gt_thread_input th = {.tid = 1, .flags = GT_THREAD_EXISTED_AT_START,
                                 .calls = &ch, .ncalls = 1};
    struct gt_trace_input in = mk_input(0, 100, &th, 1, 0);
    struct gt_result *r = NULL;
    CHECK(gt_merge__run(&in, &r) == 0);
    if (!r)
        return;
    const struct gt_thread_result *t = &r->threads[0];
    CHECK(t->nspans == 5);
    if (t->nspans == 5) {
        CHECK_SPAN(&t->spans[0], 10, 40, F_F, 0, GT_SPAN_UNWIND);
        CHECK_SPAN(&t->spans[1], 12, 14, F_LEN, 1, GT_SPAN_C);
        CHECK_SPAN(&t->spans[2], 15, 16, F_LEN, 1, GT_SPAN_C | GT_SPAN_UNWIND);
        CHECK_SPAN(&t->spans[3], 20, 30, F_G, 1, GT_SPAN_UNWIND);
        CHECK_SPAN(&t->spans[4], 22, 24, F_CPY, 2, GT_SPAN_C);
    }
    check_span_invariants(t);
    gt_result__free(r);
}

static void test_func_map(void)
{
    /* Local ids 0..3 -> global; local 3 maps to GT_NO_FUNC, local 9 is out of the map,
     * global 77 is out of funcs[]: all three are skipped. */
    static const uint32_t map[] = {F_K, F_H, F_F, GT_NO_FUNC, 77};
    static const struct gt_call_event ev[] = {
        {10, 2, GT_CALL},  {15, 3, GT_CALL},  {20, 0, GT_CALL},   {25, 9, GT_CALL},
        {30, 4, GT_CALL},  {40, 0, GT_RETURN}, {45, 1, GT_CALL},  {50, 1, GT_RETURN},
        {55, 3, GT_RETURN}, {60, 2, GT_RETURN},
    };
    struct gt_chunk ch = calls_chunk(ev, N(ev));
    struct gt_thread_input th = {.tid = 1, .flags = GT_THREAD_EXISTED_AT_START,
                                 .calls = &ch, .ncalls = 1, .func_map = map,
                                 .func_map_len = N(map)};
    struct gt_trace_input in = mk_input(0, 100, &th, 1, 0);
    struct gt_result *r = NULL;
    CHECK(gt_merge__run(&in, &r) == 0);
    if (!r)
        return;
    const struct gt_thread_result *t = &r->threads[0];
    CHECK(t->nspans == 3);
    if (t->nspans == 3) {
        CHECK_SPAN(&t->spans[0], 10, 60, F_F, 0, 0);
        CHECK_SPAN(&t->spans[1], 20, 40, F_K, 1, 0);
        CHECK_SPAN(&t->spans[2], 45, 50, F_H, 1, 0);
    }
    check_span_invariants(t);
    gt_result__free(r);
}

static void test_clamp_into_life(void)
{
    /* Events before t0 / after t1 are clamped into the life. */
    static const struct gt_call_event ev[] = {
        {5, F_F, GT_CALL}, {8, F_G, GT_CALL}, {20, F_G, GT_RETURN}, {150, F_F, GT_RETURN},
    };
    struct gt_chunk ch = calls_chunk(ev, N(ev));
    struct gt_thread_input th = {.tid = 1, .calls = &ch, .ncalls = 1};
    struct gt_trace_input in = mk_input(10, 100, &th, 1, 0);
    struct gt_result *r = NULL;
    CHECK(gt_merge__run(&in, &r) == 0);
    if (!r)
        return;
    const struct gt_thread_result *t = &r->threads[0];
    CHECK(t->start_ns == 10 && t->end_ns == 100);
    CHECK(t->nspans == 2);
    if (t->nspans == 2) {
        CHECK_SPAN(&t->spans[0], 10, 100, F_F, 0, 0);
        CHECK_SPAN(&t->spans[1], 10, 20, F_G, 1, 0);
    }
    check_span_invariants(t);
    gt_result__free(r);
}

/* ---- thread life ---- */

static void test_life(void)
{
    static const struct gt_call_event ev[] = {{40, F_F, GT_CALL}, {60, F_F, GT_RETURN}};
    static const struct gt_gil_event gev[] = {{30, GT_GIL_WANT, 0}, {35, GT_GIL_ACQUIRED, 0}};
    static const struct gt_sched_event sev[] = {{50, GT_SCHED_OUT_BLOCKED, 0},
                                                {70, GT_SCHED_IN, 0}};
    struct gt_chunk ch = calls_chunk(ev, N(ev)), gch = {gev, N(gev)}, sch = {sev, N(sev)};
    struct gt_thread_input th[5] = {
        /* first event of any stream (GIL at 30), runs to t1 */
        {.tid = 1, .calls = &ch, .ncalls = 1, .gil = &gch, .ngil = 1},
        /* existed: t0; ended: last event of any stream (sched at 70) */
        {.tid = 2, .flags = GT_THREAD_EXISTED_AT_START | GT_THREAD_ENDED,
         .calls = &ch, .ncalls = 1, .gil = &gch, .ngil = 1, .sched = &sch, .nsched = 1},
        /* no events, not existing at start: empty life at t0 */
        {.tid = 3},
        /* no events, existed, not ended: whole session */
        {.tid = 4, .flags = GT_THREAD_EXISTED_AT_START},
        /* first + ended, calls only */
        {.tid = 5, .flags = GT_THREAD_ENDED, .calls = &ch, .ncalls = 1},
    };
    struct gt_trace_input in = mk_input(10, 100, th, 5, 1);
    struct gt_result *r = NULL;
    CHECK(gt_merge__run(&in, &r) == 0);
    if (!r)
        return;
    CHECK(r->threads[0].start_ns == 30 && r->threads[0].end_ns == 100);
    CHECK(r->threads[1].start_ns == 10 && r->threads[1].end_ns == 70);
    CHECK(r->threads[2].start_ns == 10 && r->threads[2].end_ns == 10);
    CHECK(r->threads[2].summary.wall_ns == 0);
    CHECK(r->threads[2].ngil == 0 && r->threads[2].nspans == 0);
    CHECK(r->threads[2].summary.held_pct == 0 && r->threads[2].summary.wait_pct == 0 &&
          r->threads[2].summary.released_pct == 0);
    CHECK(r->threads[3].start_ns == 10 && r->threads[3].end_ns == 100);
    CHECK(r->threads[3].ngil == 1);
    if (r->threads[3].ngil == 1)
        CHECK_IV(&r->threads[3].gil[0], 10, 100, GT_GIL_STATE_RELEASED);
    CHECK(r->threads[4].start_ns == 40 && r->threads[4].end_ns == 60);
    CHECK(r->threads[4].summary.wall_ns == 20);
    for (size_t i = 0; i < r->nthreads; i++) {
        check_gil_summary(&r->threads[i]);
        check_span_invariants(&r->threads[i]);
    }
    gt_result__free(r);
}

/* A tid the kernel reused within the session: two records of tid 7, the first ended
 * (session.c marks a superseded record ended). Merge keys threads by input index, the
 * tid is a label: each keeps its own life, GIL intervals and summary. */
static void test_reused_tid(void)
{
    static const struct gt_gil_event ga[] = {{10, GT_GIL_ACQUIRED, 0}, {40, GT_GIL_RELEASED, 0}};
    static const struct gt_gil_event gb[] = {{50, GT_GIL_WANT, 0}, {55, GT_GIL_ACQUIRED, 0}};
    struct gt_chunk cha = {ga, N(ga)}, chb = {gb, N(gb)};
    struct gt_thread_input th[2] = {
        {.tid = 7, .flags = GT_THREAD_ENDED, .gil = &cha, .ngil = 1},
        {.tid = 7, .gil = &chb, .ngil = 1},
    };
    struct gt_trace_input in = mk_input(0, 100, th, 2, 1);
    struct gt_result *r = NULL;
    CHECK(gt_merge__run(&in, &r) == 0);
    if (!r)
        return;
    CHECK(r->nthreads == 2);
    if (r->nthreads == 2) {
        const struct gt_thread_result *a = &r->threads[0], *b = &r->threads[1];
        CHECK(a->tid == 7 && b->tid == 7);
        CHECK(a->start_ns == 10 && a->end_ns == 40);
        CHECK(b->start_ns == 50 && b->end_ns == 100);
        CHECK(a->summary.held_ns == 30 && a->summary.wait_ns == 0);
        CHECK(b->summary.wait_ns == 5 && b->summary.held_ns == 45);
        for (size_t i = 0; i < 2; i++) {
            const struct gt_thread_result *t = &r->threads[i];
            for (size_t k = 0; k < t->ngil; k++)
                CHECK(t->gil[k].start >= t->start_ns && t->gil[k].end <= t->end_ns);
            check_gil_summary(t);
        }
    }
    gt_result__free(r);
}

/* ---- GIL ---- */

/* Two threads handing the GIL back and forth (t0 = 0, t1 = 100):
 *   A: held [0,20] wait [20,50] held [50,70] released [70,100]
 *   B: rel [0,10] wait [10,20] held [20,50] rel [50,60] wait [60,70] held [70,90] rel [90,100] */
static const struct gt_gil_event gil_a[] = {
    {20, GT_GIL_RELEASED, 0}, {20, GT_GIL_WANT, 0}, {45, GT_GIL_DROP_REQUEST, 0},
    {50, GT_GIL_ACQUIRED, 0}, {70, GT_GIL_RELEASED, 0},
};
static const struct gt_gil_event gil_b[] = {
    {10, GT_GIL_WANT, 0},     {15, GT_GIL_DROP_REQUEST, 0}, {20, GT_GIL_ACQUIRED, 0},
    {50, GT_GIL_RELEASED, 0}, {60, GT_GIL_WANT, 0},         {70, GT_GIL_ACQUIRED, 0},
    {90, GT_GIL_RELEASED, 0},
};

static void test_gil_two_threads(void)
{
    struct gt_chunk ga = {gil_a, N(gil_a)}, gb[2] = {{gil_b, 2}, {gil_b + 2, N(gil_b) - 2}};
    struct gt_thread_input th[2] = {
        {.tid = 1, .flags = GT_THREAD_EXISTED_AT_START | GT_THREAD_HELD_GIL_AT_START,
         .gil = &ga, .ngil = 1},
        {.tid = 2, .flags = GT_THREAD_EXISTED_AT_START, .gil = gb, .ngil = 2},
    };
    struct gt_trace_input in = mk_input(0, 100, th, 2, 1);
    struct gt_result *r = NULL;
    CHECK(gt_merge__run(&in, &r) == 0);
    if (!r)
        return;
    CHECK(r->gil_known == 1);
    const struct gt_thread_result *a = &r->threads[0], *b = &r->threads[1];
    CHECK(a->ngil == 4);
    if (a->ngil == 4) {
        CHECK_IV(&a->gil[0], 0, 20, GT_GIL_STATE_HELD);
        CHECK_IV(&a->gil[1], 20, 50, GT_GIL_STATE_WAIT);
        CHECK_IV(&a->gil[2], 50, 70, GT_GIL_STATE_HELD);
        CHECK_IV(&a->gil[3], 70, 100, GT_GIL_STATE_RELEASED);
    }
    CHECK(a->summary.held_ns == 40 && a->summary.wait_ns == 30 && a->summary.released_ns == 30);
    CHECK(a->summary.acquisitions == 1);
    CHECK(a->summary.longest_wait_ns == 30);
    CHECK(a->summary.drop_requests == 1);
    CHECK(a->summary.held_pct == 40.0 && a->summary.wait_pct == 30.0 &&
          a->summary.released_pct == 30.0);
    CHECK(b->ngil == 7);
    if (b->ngil == 7) {
        CHECK_IV(&b->gil[0], 0, 10, GT_GIL_STATE_RELEASED);
        CHECK_IV(&b->gil[1], 10, 20, GT_GIL_STATE_WAIT);
        CHECK_IV(&b->gil[2], 20, 50, GT_GIL_STATE_HELD);
        CHECK_IV(&b->gil[3], 50, 60, GT_GIL_STATE_RELEASED);
        CHECK_IV(&b->gil[4], 60, 70, GT_GIL_STATE_WAIT);
        CHECK_IV(&b->gil[5], 70, 90, GT_GIL_STATE_HELD);
        CHECK_IV(&b->gil[6], 90, 100, GT_GIL_STATE_RELEASED);
    }
    CHECK(b->summary.held_ns == 50 && b->summary.wait_ns == 20 && b->summary.released_ns == 30);
    CHECK(b->summary.acquisitions == 2);
    CHECK(b->summary.longest_wait_ns == 10);
    CHECK(b->summary.drop_requests == 1);
    CHECK(b->summary.held_pct == 50.0 && b->summary.wait_pct == 20.0 &&
          b->summary.released_pct == 30.0);
    check_gil_summary(a);
    check_gil_summary(b);
    /* No sched data: OS states unknown. */
    CHECK(a->nos == 0 && a->os == NULL && a->has_sched == 0);
    CHECK(a->summary.off_cpu_ns == -1 && a->summary.preempted_ns == -1);
    gt_result__free(r);
}

static void test_gil_switch_wait(void)
{
    /* A forced drop: released at 10, waits on switch_cond 10..30 (FORCE_SWITCHING),
     * runnable 30..35, waits in take_gil 35..50, holds again from 50. */
    static const struct gt_gil_event ev[] = {
        {10, GT_GIL_RELEASED, 0}, {10, GT_GIL_WANT, 0}, {30, GT_GIL_SWITCH_DONE, 0},
        {35, GT_GIL_WANT, 0},     {50, GT_GIL_ACQUIRED, 0},
    };
    struct gt_chunk ch = {ev, N(ev)};
    struct gt_thread_input th = {.tid = 1,
                                 .flags = GT_THREAD_EXISTED_AT_START | GT_THREAD_HELD_GIL_AT_START,
                                 .gil = &ch, .ngil = 1};
    struct gt_trace_input in = mk_input(0, 100, &th, 1, 1);
    struct gt_result *r = NULL;
    CHECK(gt_merge__run(&in, &r) == 0);
    if (!r)
        return;
    const struct gt_thread_result *t = &r->threads[0];
    CHECK(t->ngil == 5);
    if (t->ngil == 5) {
        CHECK_IV(&t->gil[0], 0, 10, GT_GIL_STATE_HELD);
        CHECK_IV(&t->gil[1], 10, 30, GT_GIL_STATE_WAIT);
        CHECK_IV(&t->gil[2], 30, 35, GT_GIL_STATE_RELEASED);
        CHECK_IV(&t->gil[3], 35, 50, GT_GIL_STATE_WAIT);
        CHECK_IV(&t->gil[4], 50, 100, GT_GIL_STATE_HELD);
    }
    CHECK(t->summary.wait_ns == 35 && t->summary.released_ns == 5);
    CHECK(t->summary.acquisitions == 1 && t->summary.longest_wait_ns == 20);
    check_gil_summary(t);
    gt_result__free(r);
}

static void test_gil_pct_thirds(void)
{
    /* wall 3: 1/3 each; the percentages must still add to 100. */
    static const struct gt_gil_event ev[] = {{1, GT_GIL_WANT, 0}, {2, GT_GIL_ACQUIRED, 0}};
    struct gt_chunk ch = {ev, N(ev)};
    struct gt_thread_input th = {.tid = 1, .flags = GT_THREAD_EXISTED_AT_START,
                                 .gil = &ch, .ngil = 1};
    struct gt_trace_input in = mk_input(0, 3, &th, 1, 1);
    struct gt_result *r = NULL;
    CHECK(gt_merge__run(&in, &r) == 0);
    if (!r)
        return;
    const struct gt_thread_result *t = &r->threads[0];
    CHECK(t->summary.held_ns == 1 && t->summary.wait_ns == 1 && t->summary.released_ns == 1);
    CHECK(abs_d(t->summary.held_pct - 100.0 / 3) < 1e-12);
    check_gil_summary(t);
    gt_result__free(r);
}

static void test_gil_inference(void)
{
    /* 1: first event ACQUIRED -> waiting from the start.
     * 2: first event RELEASED -> holding from the start.
     * 3: first state event WANT -> released; a WANT while held is ignored.
     * 4: drop requests are skipped when inferring; ACQUIRED before t0 is clamped and
     *    not counted; zero-length states vanish and equal neighbours merge. */
    static const struct gt_gil_event e1[] = {{30, GT_GIL_ACQUIRED, 0}, {60, GT_GIL_RELEASED, 0}};
    static const struct gt_gil_event e2[] = {{30, GT_GIL_RELEASED, 0}, {40, GT_GIL_WANT, 0},
                                             {50, GT_GIL_ACQUIRED, 0}};
    static const struct gt_gil_event e3[] = {{20, GT_GIL_WANT, 0},     {25, GT_GIL_ACQUIRED, 0},
                                             {30, GT_GIL_WANT, 0},     {40, GT_GIL_RELEASED, 0},
                                             {40, GT_GIL_ACQUIRED, 0}, {80, GT_GIL_RELEASED, 0}};
    static const struct gt_gil_event e4[] = {{5, GT_GIL_DROP_REQUEST, 0},
                                             {8, GT_GIL_ACQUIRED, 0},
                                             {30, GT_GIL_DROP_REQUEST, 0},
                                             {40, GT_GIL_DROP_REQUEST, 0},
                                             {50, GT_GIL_RELEASED, 0},
                                             {200, GT_GIL_ACQUIRED, 0}};
    struct gt_chunk c1 = {e1, N(e1)}, c2 = {e2, N(e2)}, c3 = {e3, N(e3)}, c4 = {e4, N(e4)};
    const uint32_t ex = GT_THREAD_EXISTED_AT_START;
    struct gt_thread_input th[4] = {
        {.tid = 1, .flags = ex, .gil = &c1, .ngil = 1},
        {.tid = 2, .flags = ex, .gil = &c2, .ngil = 1},
        {.tid = 3, .flags = ex, .gil = &c3, .ngil = 1},
        {.tid = 4, .flags = ex, .gil = &c4, .ngil = 1},
    };
    struct gt_trace_input in = mk_input(10, 100, th, 4, 1);
    struct gt_result *r = NULL;
    CHECK(gt_merge__run(&in, &r) == 0);
    if (!r)
        return;
    const struct gt_thread_result *t = &r->threads[0];
    CHECK(t->ngil == 3);
    if (t->ngil == 3) {
        CHECK_IV(&t->gil[0], 10, 30, GT_GIL_STATE_WAIT);
        CHECK_IV(&t->gil[1], 30, 60, GT_GIL_STATE_HELD);
        CHECK_IV(&t->gil[2], 60, 100, GT_GIL_STATE_RELEASED);
    }
    CHECK(t->summary.acquisitions == 1 && t->summary.longest_wait_ns == 20);
    t = &r->threads[1];
    CHECK(t->ngil == 4);
    if (t->ngil == 4) {
        CHECK_IV(&t->gil[0], 10, 30, GT_GIL_STATE_HELD);
        CHECK_IV(&t->gil[1], 30, 40, GT_GIL_STATE_RELEASED);
        CHECK_IV(&t->gil[2], 40, 50, GT_GIL_STATE_WAIT);
        CHECK_IV(&t->gil[3], 50, 100, GT_GIL_STATE_HELD);
    }
    CHECK(t->summary.held_ns == 70 && t->summary.wait_ns == 10 && t->summary.released_ns == 10);
    t = &r->threads[2];
    CHECK(t->ngil == 4);
    if (t->ngil == 4) {
        CHECK_IV(&t->gil[0], 10, 20, GT_GIL_STATE_RELEASED);
        CHECK_IV(&t->gil[1], 20, 25, GT_GIL_STATE_WAIT);
        CHECK_IV(&t->gil[2], 25, 80, GT_GIL_STATE_HELD); /* release+acquire at 40 merged */
        CHECK_IV(&t->gil[3], 80, 100, GT_GIL_STATE_RELEASED);
    }
    CHECK(t->summary.acquisitions == 2 && t->summary.longest_wait_ns == 5);
    t = &r->threads[3];
    CHECK(t->ngil == 2);
    if (t->ngil == 2) {
        CHECK_IV(&t->gil[0], 10, 50, GT_GIL_STATE_HELD);
        CHECK_IV(&t->gil[1], 50, 100, GT_GIL_STATE_RELEASED);
    }
    CHECK(t->summary.acquisitions == 0); /* at 8 and 200: outside the life */
    CHECK(t->summary.drop_requests == 2);
    CHECK(t->summary.wait_ns == 0 && t->summary.longest_wait_ns == 0);
    for (size_t i = 0; i < r->nthreads; i++)
        check_gil_summary(&r->threads[i]);
    gt_result__free(r);
}

static void test_gil_held_at_start(void)
{
    /* Held at start overrides inference from a first ACQUIRED. */
    static const struct gt_gil_event ev[] = {{30, GT_GIL_WANT, 0}, {40, GT_GIL_ACQUIRED, 0},
                                             {60, GT_GIL_RELEASED, 0}};
    struct gt_chunk ch = {ev + 1, 2};
    struct gt_thread_input th = {
        .tid = 1, .flags = GT_THREAD_EXISTED_AT_START | GT_THREAD_HELD_GIL_AT_START,
        .gil = &ch, .ngil = 1};
    struct gt_trace_input in = mk_input(0, 100, &th, 1, 1);
    struct gt_result *r = NULL;
    CHECK(gt_merge__run(&in, &r) == 0);
    if (!r)
        return;
    const struct gt_thread_result *t = &r->threads[0];
    CHECK(t->ngil == 2);
    if (t->ngil == 2) {
        CHECK_IV(&t->gil[0], 0, 60, GT_GIL_STATE_HELD);
        CHECK_IV(&t->gil[1], 60, 100, GT_GIL_STATE_RELEASED);
    }
    CHECK(t->summary.held_ns == 60 && t->summary.acquisitions == 1);
    check_gil_summary(t);
    gt_result__free(r);

    /* No events at all but held at start: held the whole life. */
    th.ngil = 0;
    CHECK(gt_merge__run(&in, &r) == 0);
    if (!r)
        return;
    t = &r->threads[0];
    CHECK(t->ngil == 1 && t->summary.held_ns == 100 && t->summary.held_pct == 100.0);
    gt_result__free(r);
}

static void test_gil_unknown(void)
{
    struct gt_chunk ga = {gil_a, N(gil_a)}, gb = {gil_b, N(gil_b)};
    struct gt_thread_input th[2] = {
        {.tid = 1, .flags = GT_THREAD_EXISTED_AT_START | GT_THREAD_HELD_GIL_AT_START,
         .gil = &ga, .ngil = 1},
        {.tid = 2, .flags = GT_THREAD_EXISTED_AT_START, .gil = &gb, .ngil = 1},
    };
    struct gt_trace_input in = mk_input(0, 100, th, 2, 0);
    struct gt_result *r = NULL;
    CHECK(gt_merge__run(&in, &r) == 0);
    if (!r)
        return;
    CHECK(r->gil_known == 0 && r->nblame == 0 && r->blame == NULL);
    for (size_t i = 0; i < 2; i++) {
        const struct gt_thread_result *t = &r->threads[i];
        const struct gt_summary *s = &t->summary;
        CHECK(t->ngil == 0 && t->gil == NULL);
        CHECK(s->wall_ns == 100);
        CHECK(s->held_ns == 0 && s->wait_ns == 0 && s->released_ns == 0);
        CHECK(s->acquisitions == 0 && s->longest_wait_ns == 0 && s->drop_requests == 0);
        CHECK(s->held_pct == 0 && s->wait_pct == 0 && s->released_pct == 0);
    }
    gt_result__free(r);
}

/* ---- OS states ---- */

static void test_os_states(void)
{
    static const struct gt_sched_event e1[] = {
        {10, GT_SCHED_OUT_PREEMPTED, 0}, {20, GT_SCHED_IN, 1}, {30, GT_SCHED_OUT_BLOCKED, 0},
        {60, GT_SCHED_IN, 0},            {60, GT_SCHED_OUT_BLOCKED, 0}, /* zero-length on */
        {70, GT_SCHED_IN, 0},
    };
    static const struct gt_sched_event e2[] = {{20, GT_SCHED_IN, 0}, {50, GT_SCHED_OUT_PREEMPTED, 0}};
    struct gt_chunk c1[2] = {{e1, 3}, {e1 + 3, 3}}, c2 = {e2, N(e2)};
    const uint32_t fl = GT_THREAD_EXISTED_AT_START | GT_THREAD_HAS_SCHED;
    struct gt_thread_input th[3] = {
        {.tid = 1, .flags = fl, .sched = c1, .nsched = 2},
        {.tid = 2, .flags = fl, .sched = &c2, .nsched = 1},
        /* Events but no HAS_SCHED: unknown. */
        {.tid = 3, .flags = GT_THREAD_EXISTED_AT_START, .sched = &c2, .nsched = 1},
    };
    struct gt_trace_input in = mk_input(0, 100, th, 3, 0);
    struct gt_result *r = NULL;
    CHECK(gt_merge__run(&in, &r) == 0);
    if (!r)
        return;
    const struct gt_thread_result *t = &r->threads[0];
    CHECK(t->has_sched == 1);
    CHECK(t->nos == 5);
    if (t->nos == 5) {
        CHECK_IV(&t->os[0], 0, 10, GT_OS_ON_CPU);
        CHECK_IV(&t->os[1], 10, 20, GT_OS_PREEMPTED);
        CHECK_IV(&t->os[2], 20, 30, GT_OS_ON_CPU);
        CHECK_IV(&t->os[3], 30, 70, GT_OS_BLOCKED);
        CHECK_IV(&t->os[4], 70, 100, GT_OS_ON_CPU);
    }
    CHECK(t->summary.off_cpu_ns == 50 && t->summary.preempted_ns == 10);
    check_contiguous(t->os, t->nos, 0, 100);
    t = &r->threads[1];
    CHECK(t->nos == 3);
    if (t->nos == 3) {
        CHECK_IV(&t->os[0], 0, 20, GT_OS_BLOCKED);
        CHECK_IV(&t->os[1], 20, 50, GT_OS_ON_CPU);
        CHECK_IV(&t->os[2], 50, 100, GT_OS_PREEMPTED);
    }
    CHECK(t->summary.off_cpu_ns == 70 && t->summary.preempted_ns == 50);
    t = &r->threads[2];
    CHECK(t->has_sched == 0 && t->nos == 0 && t->os == NULL);
    CHECK(t->summary.off_cpu_ns == -1 && t->summary.preempted_ns == -1);
    gt_result__free(r);
}

/* ---- GIL blame ---- */

/* Per-interpreter GILs: T2 holds its subinterpreter's GIL (id 5) all along while T3
 * waits [10,50) for the main GIL that T1 holds until 50. The wait is T1's doing only;
 * T2 is labelled with its interpreter, the others are not. */
static void test_blame_per_interpreter(void)
{
    static const struct gt_gil_event g1[] = {{50, GT_GIL_RELEASED, 0}};
    static const struct gt_gil_event g2[] = {{0, GT_GIL_WANT, 5}, {0, GT_GIL_ACQUIRED, 5}};
    static const struct gt_gil_event g3[] = {{10, GT_GIL_WANT, 0}, {50, GT_GIL_ACQUIRED, 0},
                                             {60, GT_GIL_RELEASED, 0}};
    struct gt_chunk c1 = {g1, N(g1)}, c2 = {g2, N(g2)}, c3 = {g3, N(g3)};
    struct gt_thread_input th[3] = {
        {.tid = 1, .flags = GT_THREAD_EXISTED_AT_START | GT_THREAD_HELD_GIL_AT_START,
         .gil = &c1, .ngil = 1},
        {.tid = 2, .flags = GT_THREAD_EXISTED_AT_START, .gil = &c2, .ngil = 1},
        {.tid = 3, .flags = GT_THREAD_EXISTED_AT_START, .gil = &c3, .ngil = 1},
    };
    struct gt_trace_input in = mk_input(0, 100, th, 3, 1);
    struct gt_result *r = NULL;
    CHECK(gt_merge__run(&in, &r) == 0);
    if (!r)
        return;
    CHECK(r->threads[1].summary.held_ns == 100);
    CHECK(r->threads[1].ngil == 1 && r->threads[1].gil[0].aux == 5);
    CHECK(r->threads[0].interp == 0 && r->threads[1].interp == 5 && r->threads[2].interp == 0);
    CHECK(r->nblame == 1);
    if (r->nblame == 1)
        CHECK_BLAME(&r->blame[0], 3, 1, GT_NO_FUNC, 1, 40);
    gt_result__free(r);
}

static void test_blame(void)
{
    /* A (tid 1) holds [0,20] and [50,70]; B (tid 2) waits [10,20] and [60,70].
     * A's innermost Python function: none [0,5) f [5,15) (len is C) g [15,18) f [18,19)
     * none [19,55) h [55,65) none after. So B's first wait splits into f 6, g 3, none 1
     * and its second into h 5, none 5. B holds [20,50] while A waits [20,50]; B runs
     * k over [25,45): k 20, none 10. A third thread in another process waits the
     * whole time and must get no rows (its GIL is another one). */
    static const struct gt_call_event ca[] = {
        {5, F_F, GT_CALL},    {12, F_LEN, GT_CCALL}, {14, F_LEN, GT_CRETURN},
        {15, F_G, GT_CALL},   {18, F_G, GT_RETURN},  {19, F_F, GT_RETURN},
        {55, F_H, GT_CALL},   {65, F_H, GT_RETURN},
    };
    static const struct gt_call_event cb[] = {{25, F_K, GT_CALL}, {45, F_K, GT_RETURN}};
    static const struct gt_gil_event gc[] = {{0, GT_GIL_WANT, 0}};
    struct gt_chunk cha = calls_chunk(ca, N(ca)), chb = calls_chunk(cb, N(cb));
    struct gt_chunk ga = {gil_a, N(gil_a)}, gb = {gil_b, N(gil_b)}, gcc = {gc, N(gc)};
    struct gt_thread_input th[3] = {
        {.tid = 1, .flags = GT_THREAD_EXISTED_AT_START | GT_THREAD_HELD_GIL_AT_START,
         .calls = &cha, .ncalls = 1, .gil = &ga, .ngil = 1},
        {.tid = 2, .flags = GT_THREAD_EXISTED_AT_START, .calls = &chb, .ncalls = 1,
         .gil = &gb, .ngil = 1},
        {.tid = 3, .pid = 42, .flags = GT_THREAD_EXISTED_AT_START, .gil = &gcc, .ngil = 1},
    };
    struct gt_trace_input in = mk_input(0, 100, th, 3, 1);
    struct gt_result *r = NULL;
    CHECK(gt_merge__run(&in, &r) == 0);
    if (!r)
        return;
    CHECK(r->threads[2].summary.wait_ns == 100);
    CHECK(r->nblame == 6);
    if (r->nblame == 6) {
        CHECK_BLAME(&r->blame[0], 1, 2, F_K, 1, 20);
        CHECK_BLAME(&r->blame[1], 1, 2, GT_NO_FUNC, 1, 10);
        CHECK_BLAME(&r->blame[2], 2, 1, F_F, 1, 6);
        CHECK_BLAME(&r->blame[3], 2, 1, GT_NO_FUNC, 2, 6);
        CHECK_BLAME(&r->blame[4], 2, 1, F_H, 1, 5);
        CHECK_BLAME(&r->blame[5], 2, 1, F_G, 1, 3);
    }
    /* Blame never exceeds the waiter's wait time. */
    uint64_t by_w[3] = {0};
    for (size_t i = 0; i < r->nblame; i++)
        by_w[r->blame[i].waiter_tid - 1] += r->blame[i].wait_ns;
    CHECK(by_w[0] == 30 && by_w[1] == 20 && by_w[2] == 0);
    gt_result__free(r);
}

static void test_tool_threads(void)
{
    /* test_blame's run with B (tid 2) giltracer's own (a live meter): out of the threads
     * and the blame, A's 30 ns of wait for it (one wait) its cost, its own waits for A
     * nobody's row. A's figures are unchanged: it did wait. */
    static const struct gt_call_event ca[] = {{5, F_F, GT_CALL}, {19, F_F, GT_RETURN}};
    static const struct gt_call_event cb[] = {{25, F_K, GT_CALL}, {45, F_K, GT_RETURN}};
    static const struct gt_gil_event gc[] = {{0, GT_GIL_WANT, 0}};
    struct gt_chunk cha = calls_chunk(ca, N(ca)), chb = calls_chunk(cb, N(cb));
    struct gt_chunk ga = {gil_a, N(gil_a)}, gb = {gil_b, N(gil_b)}, gcc = {gc, N(gc)};
    struct gt_thread_input th[3] = {
        {.tid = 1, .flags = GT_THREAD_EXISTED_AT_START | GT_THREAD_HELD_GIL_AT_START,
         .calls = &cha, .ncalls = 1, .gil = &ga, .ngil = 1},
        {.tid = 2, .flags = GT_THREAD_EXISTED_AT_START | GT_THREAD_TOOL, .calls = &chb,
         .ncalls = 1, .gil = &gb, .ngil = 1},
        {.tid = 3, .pid = 42, .flags = GT_THREAD_EXISTED_AT_START, .gil = &gcc, .ngil = 1},
    };
    struct gt_trace_input in = mk_input(0, 100, th, 3, 1);
    struct gt_result *r = NULL;
    CHECK(gt_merge__run(&in, &r) == 0);
    if (!r)
        return;
    CHECK(r->nthreads == 2 && r->threads[0].tid == 1 && r->threads[1].tid == 3);
    CHECK(r->threads[0].summary.wait_ns == 30 && !r->threads[0].background);
    CHECK(r->nblame == 0);
    CHECK(r->tool.nthreads == 1 && r->tool.threads && r->tool.threads[0].tid == 2);
    if (r->tool.nthreads == 1)
        CHECK(r->tool.threads[0].summary.held_ns == 50 && r->tool.threads[0].nspans == 1);
    CHECK(r->tool.caused_ns == 30 && r->tool.caused_waits == 1);
    gt_result__free(r);

    /* Free-threaded (test_park_blame's parks, B giltracer's own): the parks B woke, C's
     * 10 ns and A's 2 ns, are its cost; B's park that A woke is nobody's row. */
    static const struct gt_gil_event pa[] = {{2, GT_PARK_END, 2}};
    static const struct gt_gil_event pb[] = {{10, GT_PARK_BEGIN, 0}, {20, GT_PARK_END, 1}};
    static const struct gt_gil_event pc[] = {{40, GT_PARK_BEGIN, 0}, {50, GT_PARK_END, 0},
                                             {60, GT_PARK_BEGIN, 0}, {70, GT_PARK_END, 2}};
    struct gt_chunk fa = {pa, N(pa)}, fb = {pb, N(pb)}, fc = {pc, N(pc)};
    struct gt_thread_input ft[3] = {
        {.tid = 1, .flags = GT_THREAD_EXISTED_AT_START, .calls = &cha, .ncalls = 1,
         .gil = &fa, .ngil = 1},
        {.tid = 2, .flags = GT_THREAD_EXISTED_AT_START | GT_THREAD_TOOL, .gil = &fb, .ngil = 1},
        {.tid = 3, .flags = GT_THREAD_EXISTED_AT_START, .gil = &fc, .ngil = 1},
    };
    in = mk_input(0, 100, ft, 3, 1);
    in.free_threaded = 1;
    CHECK(gt_merge__run(&in, &r) == 0);
    if (!r)
        return;
    CHECK(r->nthreads == 2 && r->threads[0].tid == 1 && r->threads[1].tid == 3);
    CHECK(r->nblame == 0);
    CHECK(r->tool.nthreads == 1 && r->tool.caused_ns == 12 && r->tool.caused_waits == 2);
    gt_result__free(r);

    /* Only giltracer's own thread: an empty result, nothing lost. */
    in = mk_input(0, 100, th + 1, 1, 1);
    CHECK(gt_merge__run(&in, &r) == 0);
    if (!r)
        return;
    CHECK(r->nthreads == 0 && r->tool.nthreads == 1 && r->nblame == 0);
    gt_result__free(r);
}

static void test_park_blame(void)
{
    /* Free-threaded: A (tid 1) runs f [5,15) g [15,30) and was parked at its start until
     * B woke it at 2. B parks [10,20), woken by A: blame B <- A f 5, g 5. C parks
     * [40,50) (timed out: no waker) and [60,70) woken by B, who runs no function. */
    static const struct gt_call_event ca[] = {
        {5, F_F, GT_CALL}, {15, F_F, GT_RETURN}, {15, F_G, GT_CALL}, {30, F_G, GT_RETURN}};
    static const struct gt_gil_event pa[] = {{2, GT_PARK_END, 2}};
    static const struct gt_gil_event pb[] = {{10, GT_PARK_BEGIN, 0}, {20, GT_PARK_END, 1}};
    static const struct gt_gil_event pc[] = {{40, GT_PARK_BEGIN, 0}, {50, GT_PARK_END, 0},
                                             {60, GT_PARK_BEGIN, 0}, {70, GT_PARK_END, 2}};
    struct gt_chunk cha = calls_chunk(ca, N(ca));
    struct gt_chunk ga = {pa, N(pa)}, gb = {pb, N(pb)}, gc = {pc, N(pc)};
    struct gt_thread_input th[3] = {
        {.tid = 1, .flags = GT_THREAD_EXISTED_AT_START, .calls = &cha, .ncalls = 1,
         .gil = &ga, .ngil = 1},
        {.tid = 2, .flags = GT_THREAD_EXISTED_AT_START, .gil = &gb, .ngil = 1},
        {.tid = 3, .flags = GT_THREAD_EXISTED_AT_START, .gil = &gc, .ngil = 1},
    };
    struct gt_trace_input in = mk_input(0, 100, th, 3, 1);
    in.free_threaded = 1;
    struct gt_result *r = NULL;
    CHECK(gt_merge__run(&in, &r) == 0);
    if (!r)
        return;
    CHECK(r->free_threaded == 1);
    const struct gt_thread_result *a = &r->threads[0], *b = &r->threads[1], *c = &r->threads[2];
    CHECK(a->ngil == 2 && b->ngil == 3 && c->ngil == 5);
    if (b->ngil == 3) {
        CHECK_IV(&b->gil[0], 0, 10, GT_GIL_STATE_HELD);
        CHECK_IV(&b->gil[1], 10, 20, GT_GIL_STATE_WAIT);
        CHECK(b->gil[1].aux == 1);
        CHECK_IV(&b->gil[2], 20, 100, GT_GIL_STATE_HELD);
    }
    if (a->ngil == 2)
        CHECK_IV(&a->gil[0], 0, 2, GT_GIL_STATE_WAIT);
    CHECK(a->summary.wait_ns == 2 && a->summary.held_ns == 98 && a->summary.acquisitions == 0);
    CHECK(b->summary.wait_ns == 10 && b->summary.acquisitions == 1);
    CHECK(c->summary.wait_ns == 20 && c->summary.acquisitions == 2 &&
          c->summary.longest_wait_ns == 10);
    CHECK(r->nblame == 4);
    if (r->nblame == 4) {
        CHECK_BLAME(&r->blame[0], 3, 2, GT_NO_FUNC, 1, 10);
        CHECK_BLAME(&r->blame[1], 2, 1, F_F, 1, 5);
        CHECK_BLAME(&r->blame[2], 2, 1, F_G, 1, 5);
        CHECK_BLAME(&r->blame[3], 1, 2, GT_NO_FUNC, 1, 2);
    }
    gt_result__free(r);
}

static void test_park_waits_for_another_thread(void)
{
    /* Free-threaded: A (tid 1) waits on a Python-level primitive [10,40) woken by B
     * (released: no park, no blame), then parks on a contended lock [50,60) woken by B
     * (parked, blamed). C (tid 3) was in such a wait at its start until 5. */
    static const struct gt_gil_event pa[] = {{10, GT_PARK_WAIT_BEGIN, 0}, {40, GT_PARK_WAIT_END, 2},
                                             {50, GT_PARK_BEGIN, 0}, {60, GT_PARK_END, 2}};
    static const struct gt_gil_event pc[] = {{5, GT_PARK_WAIT_END, 2}};
    struct gt_chunk ga = {pa, N(pa)}, gc = {pc, N(pc)};
    struct gt_thread_input th[3] = {
        {.tid = 1, .flags = GT_THREAD_EXISTED_AT_START, .gil = &ga, .ngil = 1},
        {.tid = 2, .flags = GT_THREAD_EXISTED_AT_START},
        {.tid = 3, .flags = GT_THREAD_EXISTED_AT_START, .gil = &gc, .ngil = 1},
    };
    struct gt_trace_input in = mk_input(0, 100, th, 3, 1);
    in.free_threaded = 1;
    struct gt_result *r = NULL;
    CHECK(gt_merge__run(&in, &r) == 0);
    if (!r)
        return;
    const struct gt_thread_result *a = &r->threads[0], *c = &r->threads[2];
    CHECK(a->ngil == 5);
    if (a->ngil == 5) {
        CHECK_IV(&a->gil[0], 0, 10, GT_GIL_STATE_HELD);
        CHECK_IV(&a->gil[1], 10, 40, GT_GIL_STATE_RELEASED);
        CHECK_IV(&a->gil[2], 40, 50, GT_GIL_STATE_HELD);
        CHECK_IV(&a->gil[3], 50, 60, GT_GIL_STATE_WAIT);
        CHECK_IV(&a->gil[4], 60, 100, GT_GIL_STATE_HELD);
    }
    CHECK(a->summary.released_ns == 30 && a->summary.wait_ns == 10 &&
          a->summary.held_ns == 60 && a->summary.acquisitions == 1 &&
          a->summary.longest_wait_ns == 10);
    CHECK(c->ngil == 2 && c->summary.released_ns == 5 && c->summary.wait_ns == 0);
    CHECK(r->nblame == 1);
    if (r->nblame == 1)
        CHECK_BLAME(&r->blame[0], 1, 2, GT_NO_FUNC, 1, 10);
    gt_result__free(r);
}

static void test_blame_same_pid_third_waiter(void)
{
    /* Holder H (tid 10) runs f [0,100] holding throughout; W1 and W2 each wait twice
     * ([10,20],[30,40] and [15,25],[50,60]): one row each, count 2, 20 ns. */
    static const struct gt_call_event ch_ev[] = {{0, F_F, GT_CALL}};
    static const struct gt_gil_event w1[] = {{10, GT_GIL_WANT, 0}, {20, GT_GIL_RELEASED, 0},
                                             {30, GT_GIL_WANT, 0}, {40, GT_GIL_RELEASED, 0}};
    static const struct gt_gil_event w2[] = {{15, GT_GIL_WANT, 0}, {25, GT_GIL_RELEASED, 0},
                                             {50, GT_GIL_WANT, 0}, {60, GT_GIL_RELEASED, 0}};
    struct gt_chunk chc = calls_chunk(ch_ev, N(ch_ev)), c1 = {w1, N(w1)}, c2 = {w2, N(w2)};
    const uint32_t ex = GT_THREAD_EXISTED_AT_START;
    struct gt_thread_input th[3] = {
        {.tid = 30, .flags = ex, .gil = &c2, .ngil = 1},
        {.tid = 10, .flags = ex | GT_THREAD_HELD_GIL_AT_START, .calls = &chc, .ncalls = 1},
        {.tid = 20, .flags = ex, .gil = &c1, .ngil = 1},
    };
    struct gt_trace_input in = mk_input(0, 100, th, 3, 1);
    struct gt_result *r = NULL;
    CHECK(gt_merge__run(&in, &r) == 0);
    if (!r)
        return;
    CHECK(r->threads[0].tid == 30 && r->threads[1].tid == 10 && r->threads[2].tid == 20);
    CHECK(r->nblame == 2);
    if (r->nblame == 2) {
        /* Equal wait_ns: ordered by waiter tid. */
        CHECK_BLAME(&r->blame[0], 20, 10, F_F, 2, 20);
        CHECK_BLAME(&r->blame[1], 30, 10, F_F, 2, 20);
    }
    gt_result__free(r);
}

static void test_blame_after_truncation(void)
{
    /* Holder H (tid 10) holds [0,100] and is in f, then g (from 10); its calls were
     * truncated at 30 (max_events). W (tid 20) waits [20,60]: 10 ns in g, then 30 ns
     * in a function nobody knows: not "no Python function". */
    static const struct gt_call_event ch_ev[] = {{0, F_F, GT_CALL}, {10, F_G, GT_CALL}};
    static const struct gt_gil_event w[] = {{20, GT_GIL_WANT, 0}, {60, GT_GIL_RELEASED, 0}};
    struct gt_chunk chc = calls_chunk(ch_ev, N(ch_ev)), cw = {w, N(w)};
    const uint32_t ex = GT_THREAD_EXISTED_AT_START;
    struct gt_thread_input th[2] = {
        {.tid = 10, .flags = ex | GT_THREAD_HELD_GIL_AT_START, .calls = &chc, .ncalls = 1,
         .calls_truncated_at = 30},
        {.tid = 20, .flags = ex, .gil = &cw, .ngil = 1},
    };
    struct gt_trace_input in = mk_input(0, 100, th, 2, 1);
    struct gt_result *r = NULL;
    CHECK(gt_merge__run(&in, &r) == 0);
    if (!r)
        return;
    CHECK(r->nblame == 2);
    if (r->nblame == 2) {
        CHECK_BLAME(&r->blame[0], 20, 10, GT_UNKNOWN_FUNC, 1, 30);
        CHECK_BLAME(&r->blame[1], 20, 10, F_G, 1, 10);
    }
    gt_result__free(r);
    /* Truncated before the holder's life: everything it held is unknown. */
    th[0].ncalls = 0;
    th[0].calls_truncated_at = 1;
    r = NULL;
    CHECK(gt_merge__run(&in, &r) == 0);
    if (!r)
        return;
    CHECK(r->nblame == 1);
    if (r->nblame == 1)
        CHECK_BLAME(&r->blame[0], 20, 10, GT_UNKNOWN_FUNC, 1, 40);
    gt_result__free(r);
}

/* ---- errors ---- */

/* Found by fuzz_merge: a session ending past INT64_MAX ns made off_cpu_ns (signed)
 * negative. CLOCK_MONOTONIC never gets there, so such input is refused. */
static void test_einval_beyond_int64(void)
{
    static const struct gt_sched_event sev[] = {{8, GT_SCHED_OUT_BLOCKED, 0}};
    struct gt_chunk sch = {sev, N(sev)};
    struct gt_thread_input th = {.tid = 1, .flags = GT_THREAD_EXISTED_AT_START | GT_THREAD_HAS_SCHED,
                                 .sched = &sch, .nsched = 1};
    struct gt_trace_input in = mk_input(0, UINT64_MAX - 1, &th, 1, 1);
    struct gt_result *r = NULL;
    CHECK(gt_merge__run(&in, &r) == -EINVAL);
    CHECK(r == NULL);
    gt_result__free(r);
    in.t1 = INT64_MAX; /* the largest accepted */
    CHECK(gt_merge__run(&in, &r) == 0);
    CHECK(r && r->threads[0].summary.off_cpu_ns == INT64_MAX - 8);
    gt_result__free(r);
}

static void test_einval(void)
{
    struct gt_thread_input th = {.tid = 1};
    struct gt_trace_input in = mk_input(0, 100, &th, 1, 1);
    struct gt_result *r = (struct gt_result *)&th; /* must be reset to NULL */
    CHECK(gt_merge__run(NULL, &r) == -EINVAL);
    CHECK(r == NULL);
    CHECK(gt_merge__run(&in, NULL) == -EINVAL);
    in.t0 = 101;
    r = (struct gt_result *)&th;
    CHECK(gt_merge__run(&in, &r) == -EINVAL);
    CHECK(r == NULL);
    in = mk_input(0, 100, NULL, 1, 1);
    CHECK(gt_merge__run(&in, &r) == -EINVAL);
    in = mk_input(0, 100, &th, 1, 1);
    th.ncalls = 1; /* chunks missing */
    CHECK(gt_merge__run(&in, &r) == -EINVAL);
    th.ncalls = 0;
    /* t0 == t1 and no threads is fine. */
    in = mk_input(50, 50, NULL, 0, 1);
    CHECK(gt_merge__run(&in, &r) == 0);
    CHECK(r && r->nthreads == 0 && r->nblame == 0);
    gt_result__free(r);
    gt_result__free(NULL);
}

/* ---- speed ---- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A sawtooth of nested calls, depth 1..16, with a C call at every other level. */
static struct gt_call_event *make_calls(size_t n, uint64_t t_start)
{
    struct gt_call_event *ev = malloc(n * sizeof(*ev));
    uint32_t stack[64];
    size_t d = 0;
    if (!ev)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        uint64_t ts = t_start + i * 10;
        size_t left = n - i;
        int push = d == 0 || (d < 16 && left > d + 1 && ((i / 16) % 2 == 0));
        if (push) {
            uint32_t f = (uint32_t)(d % NFUNCS);
            stack[d++] = f;
            ev[i] = (struct gt_call_event){ts, f, funcs[f].flags & GT_FUNC_C ? GT_CCALL : GT_CALL};
        } else {
            uint32_t f = stack[--d];
            ev[i] = (struct gt_call_event){ts, f, funcs[f].flags & GT_FUNC_C ? GT_CRETURN
                                                                           : GT_RETURN};
        }
    }
    return ev;
}

static void test_timing(void)
{
    const size_t n = 1000000, nchunks = 250;
    const uint64_t t1 = 20 + n * 10;
    struct gt_call_event *ev = make_calls(n, 10);
    struct gt_gil_event *ga = malloc(2 * 10000 * sizeof(*ga));
    struct gt_gil_event *gb = malloc(2 * 10000 * sizeof(*gb));
    struct gt_chunk *ch = malloc(nchunks * sizeof(*ch));
    CHECK(ev && ga && gb && ch);
    if (!ev || !ga || !gb || !ch)
        goto cleanup;
    for (size_t c = 0; c < nchunks; c++)
        ch[c] = calls_chunk(ev + c * (n / nchunks), n / nchunks);
    /* 10000 hand-offs: A releases / B acquires, then back. */
    const uint64_t slice = t1 / 10000;
    for (size_t i = 0; i < 10000; i++) {
        uint64_t t = i * slice;
        int a_holds = i % 2 == 0;
        ga[2 * i] = (struct gt_gil_event){t, a_holds ? GT_GIL_ACQUIRED : GT_GIL_RELEASED, 0};
        ga[2 * i + 1] = (struct gt_gil_event){t, a_holds ? GT_GIL_DROP_REQUEST : GT_GIL_WANT, 0};
        gb[2 * i] = (struct gt_gil_event){t, a_holds ? GT_GIL_RELEASED : GT_GIL_ACQUIRED, 0};
        gb[2 * i + 1] = (struct gt_gil_event){t, a_holds ? GT_GIL_WANT : GT_GIL_DROP_REQUEST, 0};
    }
    struct gt_chunk gca = {ga, 20000}, gcb = {gb, 20000};
    struct gt_thread_input th[2] = {
        {.tid = 1, .flags = GT_THREAD_EXISTED_AT_START, .calls = ch, .ncalls = nchunks,
         .gil = &gca, .ngil = 1},
        {.tid = 2, .flags = GT_THREAD_EXISTED_AT_START, .calls = ch, .ncalls = nchunks,
         .gil = &gcb, .ngil = 1},
    };

    /* Calls only (one thread). */
    struct gt_trace_input in = mk_input(0, t1, th, 1, 0);
    struct gt_result *r = NULL;
    double best = 1e9;
    for (int rep = 0; rep < 3; rep++) {
        double t = now_s();
        int err = gt_merge__run(&in, &r);
        t = now_s() - t;
        CHECK(err == 0);
        if (err)
            goto cleanup;
        if (t < best)
            best = t;
        CHECK(r->threads[0].nspans == n / 2);
        if (rep == 0)
            check_span_invariants(&r->threads[0]);
        gt_result__free(r);
        r = NULL;
    }
    printf("timing: calls only: %zu events in %.1f ms = %.1f ns/event\n", n, best * 1e3,
           best * 1e9 / (double)n);

    /* Two threads with GIL and blame: 2e6 call events, 1e6 spans. */
    in = mk_input(0, t1, th, 2, 1);
    double t = now_s();
    int err = gt_merge__run(&in, &r);
    t = now_s() - t;
    CHECK(err == 0);
    if (err)
        goto cleanup;
    size_t nev = 2 * n + 4 * 20000;
    printf("timing: 2 threads + GIL + blame: %zu events, %zu spans, %zu blame rows in "
           "%.1f ms = %.1f ns/event\n",
           nev, r->threads[0].nspans + r->threads[1].nspans, r->nblame, t * 1e3,
           t * 1e9 / (double)nev);
    CHECK(r->nblame > 0);
    uint64_t total = 0;
    for (size_t i = 0; i < r->nblame; i++)
        total += r->blame[i].wait_ns;
    CHECK(total == r->threads[0].summary.wait_ns + r->threads[1].summary.wait_ns);
    check_gil_summary(&r->threads[0]);
    check_gil_summary(&r->threads[1]);
    gt_result__free(r);
cleanup:
    free(ev);
    free(ga);
    free(gb);
    free(ch);
}


/* The cell's scope: the starting thread's frames open at the start are outer (the
 * innermost one's span is the window); a thread first seen in a call that holds no GIL
 * (or holds it under 1 % of its life or 1 ms) is background; one started during the
 * trace is not. */
static void test_scope(void)
{
    static const struct gt_call_event main_ev[] = {
        {0, F_F, GT_CALL | GT_CALL_OPEN_AT_START}, {0, F_G, GT_CALL | GT_CALL_OPEN_AT_START},
        {20, F_H, GT_CALL}, {30, F_H, GT_RETURN}, {40, F_G, GT_RETURN},
    };
    static const struct gt_call_event idle_ev[] = {{0, F_K, GT_CALL | GT_CALL_OPEN_AT_START}};
    static const struct gt_call_event poll_ev[] = {
        {0, F_K, GT_CALL | GT_CALL_OPEN_AT_START}, {500, F_LEN, GT_CCALL}, {500, F_LEN, GT_CRETURN},
    };
    static const struct gt_call_event new_ev[] = {{100, F_K, GT_CALL}, {900, F_K, GT_RETURN}};
    static const struct gt_gil_event poll_gil[] = {
        {500, GT_GIL_WANT, 0}, {500, GT_GIL_ACQUIRED, 0}, {505, GT_GIL_RELEASED, 0},
    };
    static const struct gt_gil_event new_gil[] = {
        {100, GT_GIL_WANT, 0}, {100, GT_GIL_ACQUIRED, 0}, {105, GT_GIL_RELEASED, 0},
    };
    struct gt_chunk cm = calls_chunk(main_ev, N(main_ev)), ci = calls_chunk(idle_ev, N(idle_ev)),
                    cp = calls_chunk(poll_ev, N(poll_ev)), cn = calls_chunk(new_ev, N(new_ev));
    struct gt_chunk gp = {poll_gil, N(poll_gil)}, gn = {new_gil, N(new_gil)};
    struct gt_thread_input th[4] = {
        {.tid = 1, .flags = GT_THREAD_EXISTED_AT_START | GT_THREAD_HELD_GIL_AT_START,
         .calls = &cm, .ncalls = 1},
        {.tid = 2, .flags = GT_THREAD_EXISTED_AT_START, .calls = &ci, .ncalls = 1},
        {.tid = 3, .flags = GT_THREAD_EXISTED_AT_START, .calls = &cp, .ncalls = 1,
         .gil = &gp, .ngil = 1},
        {.tid = 4, .calls = &cn, .ncalls = 1, .gil = &gn, .ngil = 1},
    };
    struct gt_trace_input in = mk_input(0, 1000, th, 4, 1);
    struct gt_result *r = NULL;
    CHECK(gt_merge__run(&in, &r) == 0);
    if (!r)
        return;
    const struct gt_thread_result *t = r->threads;
    CHECK(t[0].outer_depth == 2 && t[0].outer_start == 0 && t[0].outer_end == 40);
    CHECK(!t[0].background);
    CHECK(t[1].background && t[1].outer_depth == 0);
    CHECK(t[2].background); /* held 5 ns: a poller's look */
    CHECK(!t[3].background); /* started during the trace */
    gt_result__free(r);

    /* Without a GIL probe, a new C call is sitting; a new Python call is running code. */
    in = mk_input(0, 1000, th, 4, 0);
    CHECK(gt_merge__run(&in, &r) == 0);
    if (!r)
        return;
    CHECK(r->threads[1].background && r->threads[2].background && !r->threads[3].background);
    gt_result__free(r);

    /* Over a second: 2 ms held is under 1 % (background), 20 ms is not. */
    static const struct gt_gil_event little[] = {
        {100000000, GT_GIL_WANT, 0}, {100000000, GT_GIL_ACQUIRED, 0}, {102000000, GT_GIL_RELEASED, 0},
    };
    static const struct gt_gil_event much[] = {
        {100000000, GT_GIL_WANT, 0}, {100000000, GT_GIL_ACQUIRED, 0}, {120000000, GT_GIL_RELEASED, 0},
    };
    struct gt_chunk gl = {little, N(little)}, gm = {much, N(much)};
    struct gt_thread_input two[2] = {
        {.tid = 5, .flags = GT_THREAD_EXISTED_AT_START, .calls = &ci, .ncalls = 1, .gil = &gl, .ngil = 1},
        {.tid = 6, .flags = GT_THREAD_EXISTED_AT_START, .calls = &ci, .ncalls = 1, .gil = &gm, .ngil = 1},
    };
    in = mk_input(0, 1000000000, two, 2, 1);
    CHECK(gt_merge__run(&in, &r) == 0);
    if (!r)
        return;
    CHECK(r->threads[0].background && !r->threads[1].background);
    gt_result__free(r);

    /* The host's own thread (a kernel's IOPub sending the cell's output) holds 20 ms of
     * the second, which would keep it; the host's word folds it. */
    two[0].flags |= GT_THREAD_HELD_GIL_AT_START; /* the cell's thread */
    two[1].flags |= GT_THREAD_SERVICE;
    in = mk_input(0, 1000000000, two, 2, 1);
    CHECK(gt_merge__run(&in, &r) == 0);
    if (!r)
        return;
    CHECK(!r->threads[0].background && r->threads[1].background);
    gt_result__free(r);

    /* Every thread background: none is. */
    in = mk_input(0, 1000, th + 1, 2, 1);
    CHECK(gt_merge__run(&in, &r) == 0);
    if (!r)
        return;
    CHECK(!r->threads[0].background && !r->threads[1].background);
    gt_result__free(r);
    free_packed();
}

int main(void)
{
    static const struct {
        const char *name;
        void (*fn)(void);
    } tests[] = {
#define T(x) {#x, x}
        T(test_nesting),
        T(test_chunks_split),
        T(test_open_at_start_flag),
        T(test_empty_stack_return),
        T(test_empty_stack_return_new_thread),
        T(test_deficit_ties_sorted),
        T(test_open_at_end),
        T(test_truncation),
        T(test_mismatched_return),
        T(test_unwind_and_c_spans),
        T(test_func_map),
        T(test_clamp_into_life),
        T(test_life),
        T(test_reused_tid),
        T(test_gil_two_threads),
        T(test_gil_pct_thirds),
        T(test_gil_switch_wait),
        T(test_gil_inference),
        T(test_gil_held_at_start),
        T(test_gil_unknown),
        T(test_os_states),
        T(test_blame),
        T(test_blame_per_interpreter),
        T(test_blame_same_pid_third_waiter),
        T(test_blame_after_truncation),
        T(test_park_blame),
        T(test_park_waits_for_another_thread),
        T(test_tool_threads),
        T(test_einval),
        T(test_einval_beyond_int64),
        T(test_timing),
        T(test_call_time_bases),
        T(test_scope),
#undef T
    };
    int passed = 0, failed = 0;
    for (size_t i = 0; i < N(tests); i++) {
        fails = 0;
        tests[i].fn();
        if (fails) {
            fprintf(stderr, "FAIL %s (%d checks)\n", tests[i].name, fails);
            failed++;
        } else {
            passed++;
        }
    }
    free_packed();
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}

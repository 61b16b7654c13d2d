/* SPDX-License-Identifier: MIT */
/* Unit test of the child-process spool (core/record/spool.c): a merge input written and
 * read back is the same input (functions, threads, every stream, the map), a thread that
 * held the GIL at its start gets an ACQUIRED at t0, a thread's aggregates past the budget
 * come back whole, and a spool cut short, or with a count larger than the file, is
 * refused. Plain C. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spool.h"

#include "check.h"

static struct gt_func funcs[] = {{"main", "a.py", 1, 0}, {"len", "", 0, GT_FUNC_C}};
static struct gt_call_rec calls1[] = {{0, 0}, {10, 1 << 4 | GT_CALL}, {20, 1 << 4 | GT_RETURN}};
static struct gt_call_rec calls2[] = {{0, 0}, {30, 0 << 4 | GT_CCALL}};
static struct gt_gil_event gil[] = {{100, GT_GIL_RELEASED, 0}, {150, GT_GIL_WANT, 0}};
static struct gt_sched_event sched[] = {{120, GT_SCHED_OUT_BLOCKED, 1}};
static const uint32_t map[] = {1, 0};

static char *written(size_t *len, int held)
{
    struct gt_chunk cc[] = {{calls1, 3}, {calls2, 2}}, gc[] = {{gil, 2}}, sc[] = {{sched, 1}};
    struct gt_thread_input th[] = {
        {.tid = 7, .pid = 7, .ident = 99, .name = "MainThread",
         .flags = held ? GT_THREAD_HELD_GIL_AT_START : 0, .calls = cc, .ncalls = 2,
         .func_map = map, .func_map_len = 2, .gil = gc, .ngil = 1, .sched = sc, .nsched = 1},
        {.tid = 8, .pid = 7, .name = NULL},
    };
    struct gt_trace_input ti = {.t0 = 50, .t1 = 500, .funcs = funcs, .nfuncs = 2,
                                .threads = th, .nthreads = 2};
    struct gt_spool_meta m = {.pid = 7, .ppid = 1, .t0 = 50, .t1 = 500, .event_count = 3};
    snprintf(m.cmd, sizeof(m.cmd), "python child.py");
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    CHECK(gt_spool__write(f, &ti, &m) == 0, "write");
    fclose(f);
    return buf;
}

static int read_back(const char *buf, size_t len, struct gt_spool **sp)
{
    FILE *f = fmemopen((void *)buf, len ? len : 1, "rb");
    int err = gt_spool__read(f, len, sp);
    fclose(f);
    return err;
}

static void run_round_trip(void)
{
    size_t len;
    char *buf = written(&len, 1);
    struct gt_spool *sp = NULL;
    CHECK(read_back(buf, len, &sp) == 0, "read");
    if (!sp)
        return;
    CHECK(sp->meta.pid == 7 && strcmp(sp->meta.cmd, "python child.py") == 0, "meta");
    CHECK(sp->nfuncs == 2 && strcmp(sp->funcs[1].name, "len") == 0 &&
              sp->funcs[1].flags == GT_FUNC_C && strcmp(sp->funcs[0].file, "a.py") == 0,
          "funcs");
    CHECK(sp->nthreads == 2, "threads %zu", sp->nthreads);
    const struct gt_thread_input *t = &sp->threads[0];
    CHECK(t->tid == 7 && t->ident == 99 && strcmp(t->name, "MainThread") == 0, "thread");
    CHECK(t->ncalls == 1 && t->calls[0].n == 5, "calls %zu", t->calls[0].n);
    const struct gt_call_rec *r = t->calls[0].data;
    CHECK(r[4].ts_lo == 30 && r[3].ts_lo == 0 && r[3].word == 0, "the second chunk's base kept");
    CHECK(t->func_map_len == 2 && t->func_map[0] == 1, "map");
    const struct gt_gil_event *g = t->gil[0].data;
    CHECK(t->gil[0].n == 3 && g[0].ts == 50 && g[0].kind == GT_GIL_ACQUIRED && g[1].ts == 100,
          "held at start: ACQUIRED at t0 first");
    CHECK(t->sched[0].n == 1, "sched");
    CHECK(sp->threads[1].name == NULL && sp->threads[1].ncalls == 0 &&
              sp->threads[1].func_map == NULL, "an empty thread, identity map");
    gt_spool__free(sp);
    free(buf);
}

static void run_refusals(void)
{
    size_t len;
    char *buf = written(&len, 0);
    struct gt_spool *sp = NULL;
    for (size_t cut = 0; cut < len; cut += 7) {
        int err = read_back(buf, cut, &sp);
        CHECK(err == -EINVAL && sp == NULL, "cut at %zu of %zu: %d", cut, len, err);
    }
    /* the first thread's call count, made huge: refused, not allocated */
    char *bad = malloc(len);
    memcpy(bad, buf, len);
    size_t at = 8 + 8 + sizeof(struct gt_spool_meta) + 16; /* after the counts */
    at += (4 + 5 + 4 + 5 + 8) + (4 + 4 + 4 + 1 + 8); /* the functions: main a.py, len "" */
    at = (at + 7) & ~(size_t)7;
    at += 4 + 4 + 8 + 4 + 4 + 8 + 4 + 11; /* the thread's fields and name */
    at = (at + 7) & ~(size_t)7;
    at += 8 + 8; /* the map */
    uint64_t huge = UINT64_MAX / 4;
    uint64_t was;
    memcpy(&was, bad + at, 8);
    CHECK(was == 5, "found the call count: %llu", (unsigned long long)was);
    memcpy(bad + at, &huge, 8);
    CHECK(read_back(bad, len, &sp) == -EINVAL && !sp, "a count beyond the file");
    memcpy(bad, "NOTSPOOL", 8);
    CHECK(read_back(bad, len, &sp) == -EINVAL && !sp, "not a spool");
    free(bad);
    free(buf);
}

/* A child's checkpoints joined: each thread's streams in order across the parts, the
 * last part's map and functions, a name known from an earlier part, the calls summed. */
static void run_join(void)
{
    static struct gt_call_rec a[] = {{0, 0}, {10, 0 << 4 | GT_CALL}};
    static struct gt_call_rec b[] = {{0, 0}, {20, 1 << 4 | GT_CALL}, {30, 1 << 4 | GT_RETURN}};
    static const uint32_t map1[] = {0}, map2[] = {0, 1};
    struct gt_spool *parts[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        struct gt_chunk cc[] = {{k ? b : a, k ? 3 : 2}};
        struct gt_thread_input th[] = {
            {.tid = 7, .pid = 7, .name = k ? NULL : "MainThread", .calls = cc, .ncalls = 1,
             .func_map = k ? map2 : map1, .func_map_len = k ? 2 : 1},
            {.tid = 9, .pid = 7, .name = "worker"},
        };
        struct gt_trace_input ti = {.t0 = 50, .t1 = k ? 900 : 500, .funcs = funcs,
                                    .nfuncs = k ? 2 : 1, .threads = th, .nthreads = k ? 2 : 1};
        struct gt_spool_meta m = {.pid = 7, .t0 = 50, .t1 = ti.t1, .event_count = k ? 2 : 1,
                                  .partial = 1, .interval_ms = 250};
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        CHECK(gt_spool__write(f, &ti, &m) == 0, "write part %d", k);
        fclose(f);
        CHECK(read_back(buf, len, &parts[k]) == 0, "read part %d", k);
        free(buf); /* (a spool read holds its own copy) */
    }
    if (!parts[0] || !parts[1])
        return;
    struct gt_spool *reversed[2] = {parts[1], parts[0]}, *sp = NULL;
    CHECK(gt_spool__join(reversed, 2, &sp) == -EINVAL && !sp,
          "a later part's threads must extend an earlier one's");
    CHECK(gt_spool__join(parts, 2, &sp) == 0 && sp, "join");
    if (!sp)
        return;
    CHECK(sp->meta.t0 == 50 && sp->meta.t1 == 900 && sp->meta.event_count == 3 &&
          sp->meta.partial, "meta");
    CHECK(sp->nfuncs == 2 && sp->nthreads == 2, "funcs %u threads %zu", sp->nfuncs,
          sp->nthreads);
    const struct gt_thread_input *t = &sp->threads[0];
    CHECK(t->ncalls == 2 && t->calls[0].n == 2 && t->calls[1].n == 3 &&
          ((const struct gt_call_rec *)t->calls[1].data)[1].ts_lo == 20, "calls in order");
    CHECK(t->func_map_len == 2 && t->func_map[1] == 1, "the last part's map");
    CHECK(t->name && strcmp(t->name, "MainThread") == 0, "the name an earlier part knew");
    CHECK(sp->threads[1].tid == 9 && sp->threads[1].ncalls == 0 &&
          strcmp(sp->threads[1].name, "worker") == 0, "a thread of the last part only");
    gt_spool__free(sp); /* and the parts */
}

/* A thread's aggregates past the budget (GIL tiles, a call tree) come back whole, and a
 * spool cut anywhere in them is refused. */
static void run_aggregates(void)
{
    static const struct gt_gil_event lead[] = {{60, GT_GIL_WANT, 0}};
    static const uint64_t tiles[2][3] = {{1, 2, 3}, {4, 5, 6}};
    static const struct gt_cnode nodes[] = {{1, GT_CNODE_ANCHOR, 0, {0, 0, 0, 0}},
                                            {0, 1, 3000, {10, 20, 30, 0}}};
    static const uint32_t tile_node[] = {1, GT_NO_FUNC, 1};
    struct gt_coalesced gm = {.lead = lead, .nlead = 1, .base = 70, .width_ns = 1.5,
                              .tiles = tiles, .ntiles = 2, .first = 60, .last = 400,
                              .first_kind = GT_GIL_ACQUIRED, .state = 2, .events = 9000,
                              .acquisitions = 4000, .drop_requests = 3,
                              .longest_wait_ns = 77};
    struct gt_calltree ct = {nodes, 2, 1, 65, 450, 6000, tile_node, 3, 64, 2.5, 1};
    struct gt_thread_input th[] = {{.tid = 7, .pid = 7, .calls_truncated_at = 65,
                                    .gil_more = &gm, .calls_more = &ct}};
    struct gt_trace_input ti = {.t0 = 50, .t1 = 500, .funcs = funcs, .nfuncs = 2,
                                .threads = th, .nthreads = 1};
    struct gt_spool_meta m = {.pid = 7, .t0 = 50, .t1 = 500, .calls_aggregated = 6000,
                              .gil_aggregated = 9000};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(gt_spool__write(f, &ti, &m) == 0, "write");
    fclose(f);
    struct gt_spool *sp = NULL;
    CHECK(read_back(buf, len, &sp) == 0 && sp, "read");
    if (sp) {
        const struct gt_thread_input *t = &sp->threads[0];
        const struct gt_coalesced *g = t->gil_more;
        const struct gt_calltree *c = t->calls_more;
        CHECK(sp->meta.calls_aggregated == 6000 && sp->meta.gil_aggregated == 9000, "meta");
        CHECK(!t->sched_more && g && c, "which aggregates");
        CHECK(g && g->nlead == 1 && g->lead[0].ts == 60 && g->ntiles == 2 &&
                  g->tiles[1][2] == 6 && g->width_ns == 1.5 && g->events == 9000 &&
                  g->acquisitions == 4000 && g->longest_wait_ns == 77 && g->state == 2,
              "the GIL aggregate");
        CHECK(c && c->n == 2 && c->nodes[1].calls == 3000 && c->nodes[1].self[2] == 30 &&
                  c->cur == 1 && c->events == 6000 && c->ntiles == 3 &&
                  c->tile_node[1] == GT_NO_FUNC && c->tile_base == 64 &&
                  c->tile_width_ns == 2.5 && c->cur_py == 1,
              "the call tree");
        gt_spool__free(sp);
    }
    size_t refused = 0;
    for (size_t cut = 0; cut < len; cut++) {
        sp = NULL;
        refused += read_back(buf, cut, &sp) == -EINVAL && !sp;
        gt_spool__free(sp);
    }
    CHECK(refused == len, "cut short: %zu of %zu refused", refused, len);
    free(buf);
}

int main(void)
{
    run_round_trip();
    run_aggregates();
    run_refusals();
    run_join();
    printf("test_spool: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

/* SPDX-License-Identifier: MIT */
#include "gt_agg.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

void gt_agg__init(struct gt_agg *a, uint32_t kind)
{
    memset(a, 0, sizeof(*a));
    a->kind = kind;
    a->width = GT_AGG_WIDTH0;
}

/* Halves the number of tiles in use by doubling their width. */
static void coarsen(struct gt_agg *a)
{
    size_t n = (a->ntiles + 1) / 2;
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 3; k++)
            a->tiles[i][k] = a->tiles[2 * i][k] + (2 * i + 1 < a->ntiles ? a->tiles[2 * i + 1][k] : 0);
    memset(a->tiles[n], 0, (GT_AGG_TILES - n) * sizeof(a->tiles[0]));
    a->ntiles = n;
    a->width *= 2;
}

/* Counts [last, ts) in the current state. */
static void advance(struct gt_agg *a, uint64_t ts)
{
    if (ts <= a->last)
        return;
    while (ts - a->base > (uint64_t)GT_AGG_TILES * a->width)
        coarsen(a);
    uint64_t t = a->last;
    while (t < ts) {
        size_t i = (size_t)((t - a->base) / a->width);
        if (i >= GT_AGG_TILES) /* ts on the coverage's very end */
            i = GT_AGG_TILES - 1;
        assert(a->state < GT_GIL_NSTATES && t >= a->base);
        uint64_t tile_end = a->base + (uint64_t)(i + 1) * a->width;
        uint64_t u = ts < tile_end || i == GT_AGG_TILES - 1 ? ts : tile_end;
        a->tiles[i][a->state] += u - t;
        if (i + 1 > a->ntiles)
            a->ntiles = i + 1;
        t = u;
    }
    a->last = ts;
}

static void wait_ends(struct gt_agg *a, uint64_t ts)
{
    if (a->state == GT_GIL_STATE_WAIT && ts - a->wait_since > a->longest_wait)
        a->longest_wait = ts - a->wait_since;
}

/* The merge's decoding (analyze/merge.c build_gil, build_os), one event on. */
static void step(struct gt_agg *a, uint64_t ts, uint32_t kind, uint32_t aux)
{
    if (a->kind == GT_AGG_OS) {
        a->state = kind == GT_SCHED_OUT_PREEMPTED ? GT_OS_PREEMPTED
                   : kind == GT_SCHED_OUT_BLOCKED ? GT_OS_BLOCKED
                                                  : GT_OS_ON_CPU;
        return;
    }
    switch (kind) {
    case GT_GIL_WANT:
        if (a->state != GT_GIL_STATE_HELD) {
            if (a->state != GT_GIL_STATE_WAIT || a->aux != aux) {
                wait_ends(a, ts); /* a wait for another GIL ends the one before, as in merge */
                a->wait_since = ts;
            }
            a->state = GT_GIL_STATE_WAIT;
            a->aux = aux;
        }
        break;
    case GT_GIL_ACQUIRED:
        wait_ends(a, ts);
        a->state = GT_GIL_STATE_HELD;
        a->aux = aux;
        break;
    case GT_GIL_RELEASED:
        wait_ends(a, ts);
        a->state = GT_GIL_STATE_RELEASED;
        break;
    case GT_GIL_SWITCH_DONE:
        if (a->state == GT_GIL_STATE_WAIT) {
            wait_ends(a, ts);
            a->state = GT_GIL_STATE_RELEASED;
        }
        break;
    default:
        break;
    }
}

static int state_bearing(const struct gt_agg *a, uint32_t kind)
{
    if (a->kind == GT_AGG_OS)
        return kind == GT_SCHED_OUT_PREEMPTED || kind == GT_SCHED_OUT_BLOCKED || kind == GT_SCHED_IN;
    return kind == GT_GIL_WANT || kind == GT_GIL_ACQUIRED || kind == GT_GIL_RELEASED ||
           kind == GT_GIL_SWITCH_DONE;
}

void gt_agg__add(struct gt_agg *a, uint64_t ts, uint32_t kind, uint32_t aux)
{
    if (a->events == 0)
        a->first = ts;
    if (ts < a->last)
        ts = a->last;
    a->events++;
    if (a->kind == GT_AGG_GIL && kind == GT_GIL_DROP_REQUEST) {
        a->drop_requests++;
        if (a->known)
            advance(a, ts);
        a->last = ts;
        return;
    }
    if (!state_bearing(a, kind)) {
        if (a->known)
            advance(a, ts);
        a->last = ts;
        return;
    }
    if (!a->first_kind)
        a->first_kind = kind;
    if (a->kind == GT_AGG_GIL && kind == GT_GIL_ACQUIRED)
        a->acquisitions++;
    if (!a->known) {
        /* What a WANT or SWITCH_DONE does depends on the state before it, which only
         * the merge knows: kept as they are, until an event that sets the state alone
         * (any for OS states; ACQUIRED or RELEASED; or the lead is full). */
        int sets = a->kind == GT_AGG_OS || kind == GT_GIL_ACQUIRED || kind == GT_GIL_RELEASED;
        if (!sets && a->nlead < GT_AGG_LEAD) {
            a->lead[a->nlead++] = (struct gt_gil_event){ts, kind, aux};
            a->last = ts;
            return;
        }
        a->known = 1;
        a->base = a->last = ts;
        a->state = GT_GIL_STATE_RELEASED; /* (only a full lead leaves this a guess) */
        step(a, ts, kind, aux);
        return;
    }
    advance(a, ts);
    step(a, ts, kind, aux);
}

static int sink(struct gt_stream *s, uint32_t agg_kind, uint64_t ts, uint32_t kind, uint32_t aux)
{
    struct gt_agg *a = s->overflow;
    if (!a) {
        a = malloc(sizeof(*a));
        if (!a)
            return -ENOMEM;
        gt_agg__init(a, agg_kind);
        s->overflow = a;
    }
    gt_agg__add(a, ts, kind, aux);
    return 0;
}

int gt_agg__gil_sink(struct gt_stream *s, uint64_t ts, uint32_t kind, uint32_t aux)
{
    return sink(s, GT_AGG_GIL, ts, kind, aux);
}

int gt_agg__os_sink(struct gt_stream *s, uint64_t ts, uint32_t kind, uint32_t aux)
{
    return sink(s, GT_AGG_OS, ts, kind, aux);
}

void gt_agg__export(const struct gt_agg *a, uint64_t (*to_ns)(uint64_t t, const void *ctx),
                    const void *ctx, double ns_per_unit, struct gt_coalesced *out,
                    struct gt_gil_event *lead, uint64_t (*tiles)[3])
{
#define NS(t) (to_ns ? to_ns((t), ctx) : (t))
    memset(out, 0, sizeof(*out));
    for (size_t i = 0; i < a->nlead; i++)
        lead[i] = (struct gt_gil_event){NS(a->lead[i].ts), a->lead[i].kind, a->lead[i].aux};
    out->lead = lead;
    out->nlead = a->nlead;
    if (a->known) {
        out->base = NS(a->base);
        out->width_ns = (double)a->width * ns_per_unit;
        for (size_t i = 0; i < a->ntiles; i++)
            for (int k = 0; k < 3; k++)
                tiles[i][k] = (uint64_t)((double)a->tiles[i][k] * ns_per_unit + 0.5);
        out->tiles = (const uint64_t(*)[3])tiles;
        /* At least one (empty) tile: the state is known from `base` on. */
        out->ntiles = a->ntiles ? a->ntiles : 1;
        if (!a->ntiles)
            memset(tiles[0], 0, sizeof(tiles[0]));
    }
    out->first = NS(a->first);
    out->last = NS(a->last);
    out->first_kind = a->first_kind;
    out->state = a->state;
    out->aux = a->aux;
    out->events = a->events;
    out->acquisitions = a->acquisitions;
    out->drop_requests = a->drop_requests;
    out->longest_wait_ns = (uint64_t)((double)a->longest_wait * ns_per_unit + 0.5);
    if (a->known && a->kind == GT_AGG_GIL && a->state == GT_GIL_STATE_WAIT)
        out->wait_since = NS(a->wait_since);
#undef NS
}

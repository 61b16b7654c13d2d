/* SPDX-License-Identifier: MIT */
/* Decoder from fuzz bytes to a merge input, and the merge result's invariants. */
#define _GNU_SOURCE
#include "fuzz_input.h"

#include <string.h>

#define MAX_THREADS 6
#define MAX_FUNCS 12
#define MAX_EVENTS 512 /* per stream */
#define MAX_CHUNKS 4
#define BIG_NAME (100 * 1024)

struct rd {
    const uint8_t *p;
    size_t n;
};

static uint8_t u8(struct rd *r)
{
    if (!r->n)
        return 0;
    r->n--;
    return *r->p++;
}

static uint16_t u16(struct rd *r)
{
    uint16_t v = u8(r);
    return (uint16_t)(v | (uint16_t)u8(r) << 8);
}

static uint64_t u64(struct rd *r)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)u8(r) << (8 * i);
    return v;
}

static void *own(struct fz_trace *t, size_t size)
{
    void *p = calloc(1, size ? size : 1);
    FZ_ASSERT(p);
    if (t->nallocs == t->allocs_cap) {
        t->allocs_cap = t->allocs_cap ? 2 * t->allocs_cap : 64;
        t->allocs = realloc(t->allocs, t->allocs_cap * sizeof(*t->allocs));
        FZ_ASSERT(t->allocs);
    }
    t->allocs[t->nallocs++] = p;
    return p;
}

/* Strings that have broken viewers and JSON writers before. */
static const char *const nasty[] = {
    "</script>",      "</SCRIPT >",   "<!--<script>", "]]>",          "\xe2\x80\xa8",
    "\xe2\x80\xa9",   "&amp;<>\"'",  "\\u003c",      "\xed\xa0\x80", /* UTF-8 surrogate */
    "\xc0\xaf",       "\xff\xfe",     "\xf4\x90\x80\x80", "\x01\x1f\x7f", "%s%n%%",
    "\xe2\x80",       "\xf0\x9f\x98\x80",
};
#define NNASTY (sizeof(nasty) / sizeof(nasty[0]))

/* A NUL-terminated name: NULL, raw bytes (a NUL ends it early), nasty pieces, or up
 * to 100 KB of a repeated piece. */
static const char *name(struct rd *r, struct fz_trace *t, int with_names, int allow_null,
                        const char *plain)
{
    if (!with_names)
        return plain;
    uint8_t sel = u8(r);
    switch (sel % 6) {
    case 0:
        return allow_null ? NULL : "";
    case 1:
    case 2: { /* raw */
        size_t n = u8(r) % 48;
        char *s = own(t, n + 1);
        for (size_t i = 0; i < n; i++)
            s[i] = (char)u8(r);
        return s;
    }
    case 3: { /* a few nasty pieces */
        size_t k = 1 + u8(r) % 4;
        char *s = own(t, k * 16 + 1);
        for (size_t i = 0; i < k; i++)
            strcat(s, nasty[u8(r) % NNASTY]);
        return s;
    }
    case 4: { /* big */
        const char *piece = nasty[u8(r) % NNASTY];
        /* 100 KB only for sel >= 0xf0, so most inputs stay fast. */
        size_t pl = strlen(piece), total = sel >= 0xf0 ? BIG_NAME : (size_t)(sel >> 4) * 256 + 1;
        char *s = own(t, total + 1);
        for (size_t i = 0; i < total; i++)
            s[i] = (i % 64 == 0) ? 'x' : piece[i % pl];
        return s;
    }
    default:
        return plain;
    }
}

/* One stream of n events of 16 bytes: {ts, kind, aux}. Timestamps mostly step
 * forward, sometimes back, repeat, or jump anywhere. */
static void *events(struct rd *r, size_t n, uint64_t base, uint64_t unit, int calls,
                    uint32_t nfuncs, struct fz_trace *t)
{
    uint64_t *ev = own(t, n * 16);
    struct gt_call_rec *rec = (struct gt_call_rec *)ev; /* calls: 8-byte records */
    uint64_t ts = base;
    for (size_t i = 0; i < n; i++) {
        uint8_t op = u8(r), kb = u8(r), fb = calls ? u8(r) : 0;
        switch (op >> 6) {
        case 0:
        case 1:
            ts += (uint64_t)(op & 0x7f) * unit; /* forward (0 = duplicate) */
            break;
        case 2:
            ts -= (uint64_t)(op & 0x3f) * unit; /* backward (may wrap) */
            break;
        default:
            ts = (op & 1) ? u64(r) : base + (uint64_t)u16(r) * unit; /* anywhere */
            break;
        }
        uint32_t kind = kb & 7;
        if (kb & 0x80)
            kind |= GT_CALL_OPEN_AT_START;
        if (kb & 0x40)
            kind |= 0x10000; /* stray high bits */
        uint32_t aux;
        if (!calls)
            aux = kb >> 3;
        else if (fb >= 0xf0)
            aux = (fb & 1) ? GT_NO_FUNC : UINT32_MAX - 1;
        else
            aux = fb % (nfuncs + 2); /* sometimes out of range */
        if (calls) {
            /* Any record: kind 0 is a time base (bits 32-63 of what follows), which the
             * input places anywhere, or never. */
            uint32_t word = aux << 4 | (kb & 15u);
            rec[i] = (struct gt_call_rec){(kb & 7u) ? (uint32_t)ts : (uint32_t)(ts >> 32), word};
            continue;
        }
        ev[2 * i] = ts;
        /* {kind, aux} for GIL and scheduler events. */
        uint32_t lo = kind & 0xff, hi = aux;
        memcpy(&ev[2 * i + 1], &lo, 4);
        memcpy((char *)&ev[2 * i + 1] + 4, &hi, 4);
    }
    return ev;
}

/* Split n events into up to MAX_CHUNKS chunks, empty ones included. */
static const struct gt_chunk *chunks(struct rd *r, const void *ev, size_t n, size_t size,
                                     size_t *nch, struct fz_trace *t)
{
    size_t k = u8(r) % (MAX_CHUNKS + 1);
    if (n && !k)
        k = 1;
    struct gt_chunk *c = own(t, (k ? k : 1) * sizeof(*c));
    size_t at = 0;
    for (size_t i = 0; i < k; i++) {
        size_t take = i + 1 == k ? n - at : (n - at) * (u8(r) % 5) / 4;
        c[i].data = take ? (const char *)ev + at * size : (u8(r) & 1 ? NULL : ev);
        c[i].n = take;
        at += take;
    }
    *nch = k;
    return k ? c : (u8(r) & 1 ? NULL : c);
}

void fz_trace__decode(const uint8_t *data, size_t size, int with_names, struct fz_trace *t)
{
    struct rd r = {data, size};
    memset(t, 0, sizeof(*t));

    uint8_t hdr = u8(&r);
    uint64_t unit = (hdr & 3) == 0 ? 1 : (hdr & 3) == 1 ? 1000 : (hdr & 3) == 2 ? 7 : 1000003;
    t->in.t0 = (hdr & 4) ? u64(&r) : (uint64_t)u16(&r) * unit;
    t->in.t1 = t->in.t0 + (uint64_t)u16(&r) * unit;
    if (hdr & 8)
        t->in.t1 = t->in.t0 - (u8(&r) & 3); /* t1 < t0 must be refused */
    t->in.gil_known = (hdr & 16) != 0;
    uint32_t nfuncs = u8(&r) % (MAX_FUNCS + 1);
    t->in.nfuncs = nfuncs;
    t->funcs = own(t, (nfuncs ? nfuncs : 1) * sizeof(*t->funcs));
    t->in.funcs = nfuncs ? t->funcs : NULL;
    for (uint32_t i = 0; i < nfuncs; i++) {
        uint8_t fl = u8(&r);
        t->funcs[i].name = name(&r, t, with_names, 1, "f");
        t->funcs[i].file = name(&r, t, with_names, 1, (fl & 1) ? "" : "/x/a.py");
        t->funcs[i].line = (fl & 2) ? u16(&r) : 0;
        t->funcs[i].flags = (fl & 4) ? GT_FUNC_C : 0;
    }

    size_t nthreads = u8(&r) % (MAX_THREADS + 1);
    t->threads = own(t, (nthreads ? nthreads : 1) * sizeof(*t->threads));
    t->in.threads = nthreads ? t->threads : NULL;
    t->in.nthreads = nthreads;
    for (size_t i = 0; i < nthreads; i++) {
        struct gt_thread_input *th = &t->threads[i];
        uint8_t fl = u8(&r);
        th->tid = (int32_t)(u8(&r) % 8) - 1; /* duplicates and odd values */
        th->pid = (fl & 0x80) ? (int32_t)(u8(&r) % 3) : 0;
        th->ident = u64(&r);
        th->name = name(&r, t, with_names, 1, "T");
        th->flags = (fl & 15) | ((fl & 0x10) ? GT_THREAD_TOOL : 0);
        if (fl & 0x40)
            th->calls_truncated_at = t->in.t0 + (uint64_t)u16(&r) * unit;
        uint64_t base = t->in.t0 + (uint64_t)(u8(&r) % 4) * unit;
        size_t nc = u16(&r) % (MAX_EVENTS + 1);
        size_t ng = u8(&r) % 128, ns = u8(&r) % 64;
        const void *ce = events(&r, nc, base, unit, 1, nfuncs, t);
        th->calls = chunks(&r, ce, nc, 8, &th->ncalls, t);
        if (fl & 0x20) {
            size_t len = u8(&r) % 16;
            uint32_t *map = own(t, (len ? len : 1) * sizeof(*map));
            for (size_t k = 0; k < len; k++) {
                uint8_t b = u8(&r);
                map[k] = b == 0xff ? GT_NO_FUNC : b % (nfuncs + 2);
            }
            th->func_map = map;
            th->func_map_len = len;
        }
        const void *ge = events(&r, ng, base, unit, 0, 0, t);
        th->gil = chunks(&r, ge, ng, 16, &th->ngil, t);
        const void *se = events(&r, ns, base, unit, 0, 0, t);
        th->sched = chunks(&r, se, ns, 16, &th->nsched, t);
    }

    struct gt_emit_meta *m = &t->meta;
    m->title = name(&r, t, with_names, 1, "fuzz");
    m->backend = name(&r, t, with_names, 1, "hooks");
    m->backend_reason = name(&r, t, with_names, 1, "");
    m->sched_status = name(&r, t, with_names, 1, "perf");
    m->python = name(&r, t, with_names, 1, "3.x");
    m->pid = (int32_t)u16(&r) - 1;
    m->event_count = u64(&r);
    m->dropped_events = u8(&r) & 1 ? u64(&r) : 0;
    m->gil_dropped = u8(&r) & 1 ? u64(&r) : 0;
    m->sched_lost = u8(&r) & 1 ? u64(&r) : 0;
}

void fz_trace__free(struct fz_trace *t)
{
    for (size_t i = 0; i < t->nallocs; i++)
        free(t->allocs[i]);
    free(t->allocs);
    memset(t, 0, sizeof(*t));
}

static void check_contiguous(const struct gt_interval *v, size_t n, uint64_t start,
                             uint64_t end, uint32_t max_state)
{
    if (start == end) {
        FZ_ASSERT(n == 0);
        return;
    }
    FZ_ASSERT(n > 0);
    FZ_ASSERT(v[0].start == start);
    FZ_ASSERT(v[n - 1].end == end);
    for (size_t i = 0; i < n; i++) {
        FZ_ASSERT(v[i].start < v[i].end);
        FZ_ASSERT(v[i].state <= max_state);
        if (i) {
            FZ_ASSERT(v[i].start == v[i - 1].end);
            /* one interval per state, unless the GIL changes (a thread that leaves one
             * interpreter's GIL for another's) */
            FZ_ASSERT(v[i].state != v[i - 1].state || v[i].aux != v[i - 1].aux);
        }
    }
}

static void check_spans(const struct gt_result *r, const struct gt_thread_result *t)
{
    for (size_t i = 0; i < t->nspans; i++) {
        const struct gt_span *s = &t->spans[i];
        FZ_ASSERT(s->start <= s->end);
        FZ_ASSERT(s->start >= t->start_ns && s->end <= t->end_ns);
        FZ_ASSERT(s->func < r->nfuncs);
        if (i) {
            const struct gt_span *p = &t->spans[i - 1];
            FZ_ASSERT(p->start < s->start || (p->start == s->start && p->depth <= s->depth));
        }
        if (s->depth == 0)
            continue;
        /* Inside its parent: the nearest earlier span one level up. */
        size_t j = i;
        while (j > 0 && t->spans[j - 1].depth != s->depth - 1)
            j--;
        FZ_ASSERT(j > 0);
        FZ_ASSERT(t->spans[j - 1].start <= s->start);
        FZ_ASSERT(t->spans[j - 1].end >= s->end);
    }
}

/* giltracer's own threads (GT_THREAD_TOOL) left the threads for r->tool, both in input
 * order: input i's result. */
static const struct gt_thread_result *result_of(const struct gt_trace_input *in,
                                                const struct gt_result *r, size_t i)
{
    size_t kept = 0, tool = 0;
    for (size_t k = 0; k < i; k++) {
        tool += (in->threads[k].flags & GT_THREAD_TOOL) != 0;
        kept += !(in->threads[k].flags & GT_THREAD_TOOL);
    }
    return (in->threads[i].flags & GT_THREAD_TOOL) ? &r->tool.threads[tool] : &r->threads[kept];
}

static void check_thread(const struct gt_trace_input *in, const struct gt_result *r,
                         const struct gt_thread_result *t)
{
    const struct gt_summary *s = &t->summary;
    FZ_ASSERT(in->t0 <= t->start_ns && t->start_ns <= t->end_ns && t->end_ns <= in->t1);
    FZ_ASSERT(s->wall_ns == t->end_ns - t->start_ns);
    check_spans(r, t);
    if (r->gil_known) {
        FZ_ASSERT(s->held_ns + s->wait_ns + s->released_ns == s->wall_ns);
        FZ_ASSERT(s->longest_wait_ns <= s->wait_ns);
        check_contiguous(t->gil, t->ngil, t->start_ns, t->end_ns, GT_GIL_STATE_HELD);
    } else {
        FZ_ASSERT(t->ngil == 0 && r->nblame == 0);
    }
    if (t->has_sched) {
        check_contiguous(t->os, t->nos, t->start_ns, t->end_ns, GT_OS_BLOCKED);
        FZ_ASSERT(s->off_cpu_ns >= 0 && (uint64_t)s->off_cpu_ns <= s->wall_ns);
        FZ_ASSERT(s->preempted_ns >= 0 && s->preempted_ns <= s->off_cpu_ns);
    } else {
        FZ_ASSERT(t->nos == 0 && s->off_cpu_ns == -1);
    }
}

void fz_check_result(const struct gt_trace_input *in, const struct gt_result *r)
{
    FZ_ASSERT(r->nthreads + r->tool.nthreads == in->nthreads);
    int unique_tids = 1;
    uint64_t waited = 0;
    for (size_t i = 0; i < in->nthreads; i++) {
        const struct gt_thread_result *t = result_of(in, r, i);
        for (size_t j = 0; j < i; j++)
            unique_tids &= in->threads[j].tid != t->tid;
        FZ_ASSERT(t->tid == in->threads[i].tid);
        check_thread(in, r, t);
        if (!(in->threads[i].flags & GT_THREAD_TOOL))
            waited += t->summary.wait_ns;
    }
    /* What one tool thread caused is other threads' wait, overlapping its holds. */
    FZ_ASSERT(r->gil_known || (r->tool.caused_ns == 0 && r->tool.caused_waits == 0));
    if (r->tool.nthreads <= 1)
        FZ_ASSERT(r->tool.caused_ns <= waited);
    for (size_t i = 0; i < r->nblame; i++) {
        const struct gt_blame *b = &r->blame[i];
        FZ_ASSERT(b->func < r->nfuncs || b->func == GT_NO_FUNC || b->func == GT_UNKNOWN_FUNC);
        FZ_ASSERT(b->wait_ns > 0 && b->count > 0);
        FZ_ASSERT(b->waiter_tid != b->holder_tid || !unique_tids);
        if (i)
            FZ_ASSERT(r->blame[i - 1].wait_ns >= b->wait_ns);
        for (size_t k = 0; unique_tids && k < r->tool.nthreads; k++)
            FZ_ASSERT(b->waiter_tid != r->tool.threads[k].tid &&
                      b->holder_tid != r->tool.threads[k].tid);
    }
    if (!unique_tids)
        return;
    /* One pair's rows cannot add up to more than the waiter waited or the holder held. */
    for (size_t i = 0; i < r->nblame; i++) {
        uint64_t sum = 0, wait = 0, held = 0;
        for (size_t j = 0; j < r->nblame; j++)
            if (r->blame[j].waiter_tid == r->blame[i].waiter_tid &&
                r->blame[j].holder_tid == r->blame[i].holder_tid)
                sum += r->blame[j].wait_ns;
        for (size_t k = 0; k < r->nthreads; k++) {
            if (r->threads[k].tid == r->blame[i].waiter_tid)
                wait = r->threads[k].summary.wait_ns;
            if (r->threads[k].tid == r->blame[i].holder_tid)
                held = r->threads[k].summary.held_ns;
        }
        FZ_ASSERT(sum <= wait && sum <= held);
    }
}

/* SPDX-License-Identifier: MIT */
/* Merge (see merge.h): per-thread streams -> spans, GIL/OS intervals, summaries, GIL blame. */
#include "merge.h"
#include "gt_clock.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define INITIAL_CAP 64

/* Reusable scratch shared by all threads of one merge (no per-thread malloc churn). */
struct scratch {
    size_t *stack; /* span slots of the open traced frames */
    size_t stack_cap;
    uint32_t *in_stack; /* per global func: how many open frames have it (O(1) "is it open?") */
    size_t *deficit_at; /* traced-span count at each return seen with an empty stack */
    size_t deficit_cap;
    struct gt_span *pre; /* frames opened before tracing, innermost first */
    size_t pre_cap;
    struct gt_span *tmp; /* merge-sort buffer */
    size_t tmp_cap;
};

/* Innermost Python function of a holder from `start` until the next segment. */
struct seg {
    uint64_t start;
    uint32_t func;
};

struct open_py {
    uint64_t end;
    uint32_t func;
};

/* A blame row plus the thread indices, for a total (deterministic) sort order. */
struct brow {
    struct gt_blame b;
    size_t w, h;
};

/* Grow the array whose pointer is at `pp` (any T **) to hold `need` elements,
 * doubling. The pointer is moved with memcpy so no T ** is accessed as void **. */
static int grow(void *pp, size_t *cap, size_t need, size_t elem)
{
    void *p;
    if (need <= *cap)
        return 0;
    memcpy(&p, pp, sizeof(p));
    size_t c = *cap ? *cap : INITIAL_CAP;
    while (c < need) {
        if (c > SIZE_MAX / 2)
            return -ENOMEM;
        c *= 2;
    }
    if (c > SIZE_MAX / elem)
        return -ENOMEM;
    void *q = realloc(p, c * elem);
    if (!q)
        return -ENOMEM;
    memcpy(pp, &q, sizeof(q));
    *cap = c;
    return 0;
}

static uint64_t clamp_u64(uint64_t v, uint64_t lo, uint64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* All event types start with a u64 ts; memcpy keeps this aliasing-clean. */
static uint64_t ev_ts(const struct gt_chunk *c, size_t i)
{
    uint64_t ts;
    memcpy(&ts, (const char *)c->data + i * 16, sizeof(ts));
    return ts;
}

/* First and last timestamp of a time-ordered stream; returns 0 if it is empty. */
static int stream_bounds(const struct gt_chunk *c, size_t n, uint64_t *first, uint64_t *last)
{
    size_t i, j;
    for (i = 0; i < n && c[i].n == 0; i++)
        ;
    if (i == n)
        return 0;
    for (j = n; c[j - 1].n == 0; j--)
        ;
    *first = ev_ts(&c[i], 0);
    *last = ev_ts(&c[j - 1], c[j - 1].n - 1);
    return 1;
}

/* Reads a thread's call records in order: events with ns timestamps. */
struct call_reader {
    const struct gt_chunk *c;
    size_t nc, ci, i;
    uint64_t hi; /* the last time base */
    const struct gt_clock_fit *fit;
};

static struct call_reader call_reader(const struct gt_trace_input *in, const struct gt_thread_input *ti)
{
    return (struct call_reader){ti->calls, ti->ncalls, 0, 0, 0, in->calls_fit};
}

static uint64_t call_ns(const struct call_reader *r, uint64_t ticks)
{
    return r->fit ? gt_clock__to_ns(r->fit, ticks) : ticks;
}

static int call_next(struct call_reader *r, struct gt_call_event *ev)
{
    while (r->ci < r->nc) {
        if (r->i == r->c[r->ci].n) {
            r->ci++;
            r->i = 0;
            continue;
        }
        const struct gt_call_rec *rec = (const struct gt_call_rec *)r->c[r->ci].data + r->i++;
        if (gt_call_rec__decode(*rec, &r->hi, ev)) {
            ev->ts = call_ns(r, ev->ts);
            return 1;
        }
    }
    return 0;
}

/* First and last timestamp of a call stream; returns 0 if it has no event. The last
 * event's time base is found walking back from it (each block starts with one). */
static int calls_bounds(const struct gt_trace_input *in, const struct gt_thread_input *ti,
                        uint64_t *first, uint64_t *last)
{
    struct call_reader r = call_reader(in, ti);
    struct gt_call_event ev;
    if (!call_next(&r, &ev))
        return 0;
    *first = ev.ts;
    int found = 0;
    uint32_t lo = 0;
    for (size_t c = ti->ncalls; c-- > 0;) {
        const struct gt_call_rec *rec = ti->calls[c].data;
        for (size_t i = ti->calls[c].n; i-- > 0;) {
            if (gt_call_rec__is_base(rec[i])) {
                if (found) {
                    *last = call_ns(&r, (uint64_t)rec[i].ts_lo << 32 | lo);
                    return 1;
                }
            } else if (!found) {
                found = 1;
                lo = rec[i].ts_lo;
            }
        }
    }
    *last = call_ns(&r, lo); /* no time base before it: bits 32-63 are 0 */
    return 1;
}

static void thread_life(const struct gt_trace_input *in, const struct gt_thread_input *ti,
                        uint64_t *start, uint64_t *end)
{
    const struct gt_chunk *cs[3] = {ti->calls, ti->gil, ti->sched};
    const size_t ns[3] = {ti->ncalls, ti->ngil, ti->nsched};
    uint64_t lo = UINT64_MAX, hi = 0;
    int any = 0;
    for (int k = 0; k < 3; k++) {
        uint64_t f, l;
        if (k == 0 ? !calls_bounds(in, ti, &f, &l) : !stream_bounds(cs[k], ns[k], &f, &l))
            continue;
        any = 1;
        if (f < lo)
            lo = f;
        if (l > hi)
            hi = l;
    }
    const struct gt_coalesced *more[2] = {ti->gil_more, ti->sched_more};
    for (int k = 0; k < 2; k++) {
        if (!more[k] || !more[k]->events)
            continue;
        any = 1;
        if (more[k]->first < lo)
            lo = more[k]->first;
        if (more[k]->last > hi)
            hi = more[k]->last;
    }
    if (ti->calls_more && ti->calls_more->events) {
        any = 1;
        lo = ti->calls_more->first < lo ? ti->calls_more->first : lo;
        hi = ti->calls_more->last > hi ? ti->calls_more->last : hi;
    }
    if (!any && !(ti->flags & GT_THREAD_EXISTED_AT_START)) {
        *start = *end = in->t0; /* registered but never seen: an empty life */
        return;
    }
    if (ti->flags & GT_THREAD_EXISTED_AT_START)
        *start = in->t0;
    else
        *start = clamp_u64(lo, in->t0, in->t1);
    if (ti->flags & GT_THREAD_ENDED)
        *end = any ? clamp_u64(hi, *start, in->t1) : *start;
    else
        *end = in->t1;
}

static int span_before(const struct gt_span *a, const struct gt_span *b)
{
    return a->start < b->start || (a->start == b->start && a->depth < b->depth);
}

/* Stable bottom-up merge sort by (start, depth); only for rare tie/edge cases. */
static int sort_spans(struct scratch *x, struct gt_span *sp, size_t n)
{
    int err = grow(&x->tmp, &x->tmp_cap, n, sizeof(*sp));
    if (err)
        return err;
    struct gt_span *src = sp, *dst = x->tmp;
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n;
            size_t hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                dst[k++] = span_before(&src[j], &src[i]) ? src[j++] : src[i++];
            while (i < mid)
                dst[k++] = src[i++];
            while (j < hi)
                dst[k++] = src[j++];
        }
        struct gt_span *t = src;
        src = dst;
        dst = t;
    }
    if (src != sp)
        memcpy(sp, src, n * sizeof(*sp));
    return 0;
}

static uint16_t depth16(size_t d)
{
    return d > UINT16_MAX ? UINT16_MAX : (uint16_t)d;
}

static uint16_t span_c_flag(const struct gt_trace_input *in, uint32_t f, uint32_t kind)
{
    int c = kind == GT_CCALL || kind == GT_CRETURN || kind == GT_CRAISE ||
            (in->funcs[f].flags & GT_FUNC_C);
    return c ? GT_SPAN_C : 0;
}

/* A frame entered before tracing, the ndef-th, whose return came when n spans were open
 * or done: x->pre and x->deficit_at. */
static int add_pre(struct scratch *x, size_t ndef, struct gt_span pre, size_t n)
{
    int err;
    if ((err = grow(&x->pre, &x->pre_cap, ndef + 1, sizeof(*x->pre))) ||
        (err = grow(&x->deficit_at, &x->deficit_cap, ndef + 1, sizeof(*x->deficit_at))))
        return err;
    x->pre[ndef] = pre;
    x->deficit_at[ndef] = n;
    return 0;
}

/* A return of f at ts: closes the open frames down to f's (those above it lost their
 * own return). f has an open frame (x->in_stack[f]). */
static void close_frames(struct scratch *x, struct gt_span *sp, size_t *depth, uint32_t f,
                         uint64_t ts, uint16_t uw)
{
    for (;;) {
        struct gt_span *s = &sp[x->stack[--*depth]];
        s->end = ts;
        x->in_stack[s->func]--;
        if (s->func == f) {
            s->flags |= uw;
            break;
        }
        s->flags |= GT_SPAN_CLIPPED_END; /* its own return was lost */
    }
}

/* Prepends the ndef pre-tracing frames (outermost first) to the n spans (sp has room)
 * and pushes everything opened before the j-th of them down by ndef - j levels. */
static void prepend_pre(const struct scratch *x, struct gt_span *sp, size_t n,
                        size_t ndef)
{
    memmove(sp + ndef, sp, n * sizeof(*sp));
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        while (j < ndef && x->deficit_at[j] <= i)
            j++;
        struct gt_span *s = &sp[ndef + i];
        s->depth = depth16((size_t)s->depth + (ndef - j));
    }
    for (size_t q = 0; q < ndef; q++) {
        sp[q] = x->pre[ndef - 1 - q];
        sp[q].depth = depth16(q);
    }
}

/* Spans being built: v[0..n) (room for cap), the open ones on x->stack[0..depth), and
 * ndef frames entered before tracing (x->pre). */
struct span_list {
    struct gt_span *v;
    size_t n, cap, depth, ndef;
};

/* The thread's call events -> b's spans: each call opens one, each return closes its
 * frame's. Stops (returning 0) where recording was truncated. */
static int read_calls(struct scratch *x, const struct gt_trace_input *in,
                      const struct gt_thread_input *ti, const struct gt_thread_result *tr,
                      struct span_list *b)
{
    uint64_t start = tr->start_ns, end = tr->end_ns, last = start;
    const int truncated = ti->calls_truncated_at != 0;
    int err = 0;
    struct call_reader rd = call_reader(in, ti);
    struct gt_call_event ev;
    while (call_next(&rd, &ev)) {
        uint64_t ts = ev.ts;
        uint32_t f = ev.func, kind = ev.kind & GT_CALL_KIND_MASK;
        uint16_t open_at_start = (ev.kind & GT_CALL_OPEN_AT_START) ? GT_SPAN_CLIPPED_START : 0;
        if (truncated && ts > ti->calls_truncated_at)
            return 0; /* recording stopped here; later events cannot nest */
        if (ti->func_map) {
            if (f >= ti->func_map_len)
                continue;
            f = ti->func_map[f];
        }
        if (f >= in->nfuncs) /* also GT_NO_FUNC: every output func indexes funcs[] */
            continue;
        /* Clamp into the life and keep time monotonic so end >= start always. */
        ts = ts < last ? last : ts > end ? end : ts;
        last = ts;
        switch (kind) {
        case GT_CALL:
        case GT_CCALL:
            if (b->n == b->cap && (err = grow(&b->v, &b->cap, b->n + 1, sizeof(*b->v))))
                return err;
            if (b->depth == x->stack_cap &&
                (err = grow(&x->stack, &x->stack_cap, b->depth + 1, sizeof(*x->stack))))
                return err;
            uint16_t flags = (uint16_t)(span_c_flag(in, f, kind) | open_at_start);
            b->v[b->n] = (struct gt_span){ts, ts, f, depth16(b->depth), flags};
            x->stack[b->depth++] = b->n++;
            x->in_stack[f]++;
            break;
        case GT_RETURN:
        case GT_UNWIND:
        case GT_CRETURN:
        case GT_CRAISE: {
            uint16_t uw = (kind == GT_UNWIND || kind == GT_CRAISE) ? GT_SPAN_UNWIND : 0;
            if (b->depth == 0) {
                /* Entered before tracing: it encloses everything so far. */
                struct gt_span pre = {
                    start, ts, f, 0,
                    (uint16_t)(GT_SPAN_CLIPPED_START | uw | span_c_flag(in, f, kind))};
                if ((err = add_pre(x, b->ndef, pre, b->n)))
                    return err;
                b->ndef++;
                break;
            }
            if (!x->in_stack[f])
                break; /* matches no open frame: a lost event, ignore it */
            close_frames(x, b->v, &b->depth, f, ts, uw);
            break;
        }
        default:
            break;
        }
    }
    return 0;
}

/* Closes the frames still open at call_end, prepends those entered before tracing and
 * sorts, if out of order. */
static int finish_spans(struct scratch *x, struct span_list *b, uint64_t call_end)
{
    int err;
    while (b->depth) {
        struct gt_span *s = &b->v[x->stack[--b->depth]];
        s->end = call_end;
        s->flags |= GT_SPAN_CLIPPED_END;
        x->in_stack[s->func]--;
    }
    if (b->ndef) {
        if ((err = grow(&b->v, &b->cap, b->n + b->ndef, sizeof(*b->v))))
            return err;
        prepend_pre(x, b->v, b->n, b->ndef);
        b->n += b->ndef;
    }
    for (size_t i = 1; i < b->n; i++)
        if (span_before(&b->v[i], &b->v[i - 1]))
            return sort_spans(x, b->v, b->n);
    return 0;
}

/* Call stream -> spans. Returns with x->in_stack all zero again. */
static int build_spans(struct scratch *x, const struct gt_trace_input *in,
                       const struct gt_thread_input *ti, struct gt_thread_result *tr)
{
    struct span_list b = {0};
    uint64_t call_end = tr->end_ns;
    if (ti->calls_truncated_at != 0)
        call_end = clamp_u64(ti->calls_truncated_at, tr->start_ns, tr->end_ns);
    int err = read_calls(x, in, ti, tr, &b);
    if (!err)
        err = finish_spans(x, &b, call_end);
    if (err) {
        /* Leave the scratch clean even on failure. */
        while (b.depth)
            x->in_stack[b.v[x->stack[--b.depth]].func]--;
        free(b.v);
        return err;
    }
    if (b.n == 0) {
        free(b.v);
        b.v = NULL;
    }
    tr->spans = b.v;
    tr->nspans = b.n;
    return 0;
}

/* Builds contiguous intervals with zero-length ones dropped and equal neighbours merged. */
struct ivb {
    struct gt_interval *v;
    size_t n, cap;
    uint64_t since;
    uint32_t state;
    uint32_t aux; /* of the current state: which GIL (0 for OS states) */
    size_t sealed; /* intervals before this one never grow (a coalesced part follows) */
};

static int ivb_flush(struct ivb *b, uint64_t t)
{
    if (t <= b->since)
        return 0;
    if (b->n > b->sealed && b->v[b->n - 1].state == b->state && b->v[b->n - 1].aux == b->aux &&
        b->v[b->n - 1].end == b->since) {
        b->v[b->n - 1].end = t;
    } else {
        int err = grow(&b->v, &b->cap, b->n + 1, sizeof(*b->v));
        if (err)
            return err;
        b->v[b->n++] = (struct gt_interval){b->since, t, b->state, b->aux};
    }
    b->since = t;
    return 0;
}

static int ivb_set_aux(struct ivb *b, uint64_t t, uint32_t state, uint32_t aux)
{
    if (state == b->state && aux == b->aux)
        return 0;
    int err = ivb_flush(b, t);
    if (err)
        return err;
    b->since = t; /* also when the interval had zero length */
    b->state = state;
    b->aux = aux;
    return 0;
}

static int ivb_set(struct ivb *b, uint64_t t, uint32_t state)
{
    return ivb_set_aux(b, t, state, b->aux);
}

static uint32_t gil_initial_state(const struct gt_thread_input *ti)
{
    if (ti->flags & GT_THREAD_HELD_GIL_AT_START)
        return GT_GIL_STATE_HELD;
    /* Infer from the first state-bearing event (a drop request says nothing about us). */
    for (size_t c = 0; c < ti->ngil; c++) {
        const struct gt_gil_event *ev = ti->gil[c].data;
        for (size_t i = 0; i < ti->gil[c].n; i++) {
            switch (ev[i].kind) {
            case GT_GIL_ACQUIRED:
                return GT_GIL_STATE_WAIT;
            case GT_GIL_RELEASED:
                return GT_GIL_STATE_HELD;
            case GT_GIL_WANT:
                return GT_GIL_STATE_RELEASED;
            default:
                break;
            }
        }
    }
    /* No event of its own in the window: the first one past it. */
    if (ti->gil_more)
        switch (ti->gil_more->first_kind) {
        case GT_GIL_ACQUIRED:
            return GT_GIL_STATE_WAIT;
        case GT_GIL_RELEASED:
            return GT_GIL_STATE_HELD;
        default:
            break;
        }
    return GT_GIL_STATE_RELEASED;
}

/* Lays a coalesced stream's tiles end to end from its base (each tile's states in state
 * order: exact totals, made-up order inside a tile), then goes on in its last state from
 * its last event. */
static int ivb_tiles(struct ivb *b, const struct gt_coalesced *m, uint64_t end, const uint32_t aux[3])
{
    if (!m->ntiles)
        return 0;
    uint64_t t = m->base < b->since ? b->since : m->base;
    int err = ivb_flush(b, t > end ? end : t);
    b->sealed = b->n;
    for (size_t i = 0; i < m->ntiles && !err; i++) {
        for (uint32_t k = 0; k < 3 && !err; k++) {
            if (!m->tiles[i][k])
                continue;
            uint64_t at = t > end ? end : t;
            err = ivb_set_aux(b, at, k, aux[k]);
            t += m->tiles[i][k];
        }
    }
    if (!err) {
        uint64_t at = t > m->last ? t : m->last;
        err = ivb_set_aux(b, at > end ? end : at, m->state, aux[m->state]);
    }
    return err;
}

/* Adds the GIL intervals in `b` to tr's summary (time per state, its share of the wall
 * time, the longest wait) and moves them to tr->gil; `b` keeps none. A wait that ends after
 * `coalesced_from` (0: none) is part of a coalesced stretch, whose aggregate already gave
 * the longest wait: its length is not a wait's. */
static void hand_out_gil(struct gt_thread_result *tr, struct ivb *b, uint64_t coalesced_from)
{
    struct gt_summary *s = &tr->summary;
    for (size_t i = 0; i < b->n; i++) {
        uint64_t d = b->v[i].end - b->v[i].start;
        if (b->v[i].state == GT_GIL_STATE_HELD) {
            s->held_ns += d;
        } else if (b->v[i].state == GT_GIL_STATE_WAIT) {
            s->wait_ns += d;
            if (d > s->longest_wait_ns && (!coalesced_from || b->v[i].end <= coalesced_from))
                s->longest_wait_ns = d;
        } else {
            s->released_ns += d;
        }
    }
    if (s->wall_ns) {
        double w = (double)s->wall_ns;
        s->held_pct = 100.0 * (double)s->held_ns / w;
        s->wait_pct = 100.0 * (double)s->wait_ns / w;
        s->released_pct = 100.0 * (double)s->released_ns / w;
    }
    tr->gil = b->v;
    tr->ngil = b->n;
    b->v = NULL;
}

/* The recorded GIL events -> b's intervals, counting acquisitions and drop requests in
 * [start, end]; *last: the time of the last one, clamped to it and after the one before. */
static int gil_events(const struct gt_thread_input *ti, struct ivb *b, struct gt_summary *s,
                      uint64_t start, uint64_t end, uint64_t *last)
{
    int err = 0;
    for (size_t c = 0; c < ti->ngil; c++) {
        const struct gt_gil_event *ev = ti->gil[c].data;
        for (size_t i = 0, m = ti->gil[c].n; i < m && !err; i++) {
            uint64_t raw = ev[i].ts, ts = raw < *last ? *last : raw > end ? end : raw;
            *last = ts;
            switch (ev[i].kind) {
            case GT_GIL_WANT:
                if (b->state != GT_GIL_STATE_HELD)
                    err = ivb_set_aux(b, ts, GT_GIL_STATE_WAIT, ev[i].aux);
                break;
            case GT_GIL_ACQUIRED:
                if (raw >= start && raw <= end)
                    s->acquisitions++;
                err = ivb_set_aux(b, ts, GT_GIL_STATE_HELD, ev[i].aux);
                break;
            case GT_GIL_RELEASED:
                err = ivb_set(b, ts, GT_GIL_STATE_RELEASED);
                break;
            case GT_GIL_SWITCH_DONE:
                if (b->state == GT_GIL_STATE_WAIT)
                    err = ivb_set(b, ts, GT_GIL_STATE_RELEASED);
                break;
            case GT_GIL_DROP_REQUEST:
                if (raw >= start && raw <= end)
                    s->drop_requests++;
                break;
            default:
                break;
            }
        }
    }
    return err;
}

/* Past the stream's budget: its lead events, then its tiles (exact totals) and counts.
 * *coalesced_from: where the coalesced tiles begin (0: none). */
static int gil_past_budget(const struct gt_coalesced *m, struct ivb *b, struct gt_summary *s,
                           uint64_t start, uint64_t end, uint64_t last, uint64_t *coalesced_from)
{
    int err = 0;
    for (size_t i = 0; i < m->nlead && !err; i++) {
        uint64_t ts = m->lead[i].ts < last ? last : m->lead[i].ts > end ? end : m->lead[i].ts;
        last = ts;
        if (m->lead[i].kind == GT_GIL_WANT && b->state != GT_GIL_STATE_HELD)
            err = ivb_set_aux(b, ts, GT_GIL_STATE_WAIT, m->lead[i].aux);
        else if (m->lead[i].kind == GT_GIL_SWITCH_DONE && b->state == GT_GIL_STATE_WAIT)
            err = ivb_set(b, ts, GT_GIL_STATE_RELEASED);
    }
    if (!err && m->ntiles) {
        *coalesced_from = m->base < start ? start : m->base > end ? end : m->base;
        const uint32_t aux[3] = {m->aux, m->aux, m->aux};
        err = ivb_tiles(b, m, end, aux);
    }
    if (err)
        return err;
    s->acquisitions += m->acquisitions;
    s->drop_requests += m->drop_requests;
    if (m->longest_wait_ns > s->longest_wait_ns)
        s->longest_wait_ns = m->longest_wait_ns;
    /* A wait still open at the end lasts to the end. */
    if (m->ntiles && m->state == GT_GIL_STATE_WAIT && m->wait_since < end &&
        end - m->wait_since > s->longest_wait_ns)
        s->longest_wait_ns = end - m->wait_since;
    return 0;
}

/* The thread's interpreter: a subinterpreter whose GIL it held or waited for during at
 * least half its traced life (a thread that only made one, briefly holding its GIL while
 * it started, stays the main interpreter's: 0). */
static uint32_t thread_interp(const struct ivb *b, uint64_t wall_ns)
{
    uint32_t ids[8], interp = 0;
    uint64_t ns[8];
    size_t nids = 0;
    for (size_t i = 0; i < b->n; i++) {
        if (b->v[i].state == GT_GIL_STATE_RELEASED)
            continue;
        size_t k = 0;
        while (k < nids && ids[k] != b->v[i].aux)
            k++;
        if (k == nids && nids < 8) {
            ids[nids] = b->v[i].aux;
            ns[nids++] = 0;
        }
        if (k < nids)
            ns[k] += b->v[i].end - b->v[i].start;
    }
    for (size_t k = 0; k < nids; k++)
        if (ids[k] && ns[k] * 2 >= wall_ns && wall_ns)
            interp = ids[k];
    return interp;
}

static int build_gil(const struct gt_thread_input *ti, struct gt_thread_result *tr)
{
    uint64_t start = tr->start_ns, end = tr->end_ns, last = start, coalesced_from = 0;
    struct gt_summary *s = &tr->summary;
    /* Held at start: the start thread (main GIL), or a subinterpreter's holder. */
    struct ivb b = {NULL, 0, 0, start, gil_initial_state(ti),
                    (ti->flags & GT_THREAD_HELD_GIL_AT_START) ? ti->interp : 0, 0};
    int err = gil_events(ti, &b, s, start, end, &last);
    if (!err && ti->gil_more)
        err = gil_past_budget(ti->gil_more, &b, s, start, end, last, &coalesced_from);
    tr->gil_coalesced_from = coalesced_from;
    if (!err)
        err = ivb_flush(&b, end);
    if (!err) {
        tr->interp = thread_interp(&b, s->wall_ns);
        hand_out_gil(tr, &b, coalesced_from);
    }
    free(b.v);
    return err;
}

/* A free-threaded build's park events -> running (HELD) / parked (WAIT) / released
 * intervals, the parked ones' aux the waker's tid (known at the END, set before the
 * interval is flushed). Released: a blocking wait on a Python-level primitive (the
 * GT_PARK_WAIT_* pair), which waits for another thread as a GIL build's thread does with
 * the GIL released: no contention, no park, no blame. A thread whose first park event
 * is an END was in that wait at its start. */
static int build_park(const struct gt_thread_input *ti, struct gt_thread_result *tr)
{
    uint64_t start = tr->start_ns, end = tr->end_ns, last = start;
    struct gt_summary *s = &tr->summary;
    uint32_t init = GT_GIL_STATE_HELD;
    int err = 0;

    for (size_t c = 0, found = 0; c < ti->ngil && !found; c++) {
        const struct gt_gil_event *ev = ti->gil[c].data;
        for (size_t i = 0; i < ti->gil[c].n && !found; i++) {
            uint32_t k = ev[i].kind;
            found = k == GT_PARK_BEGIN || k == GT_PARK_END || k == GT_PARK_WAIT_BEGIN ||
                    k == GT_PARK_WAIT_END;
            if (k == GT_PARK_END)
                init = GT_GIL_STATE_WAIT;
            else if (k == GT_PARK_WAIT_END)
                init = GT_GIL_STATE_RELEASED;
        }
    }
    struct ivb b = {.since = start, .state = init};
    for (size_t c = 0; c < ti->ngil; c++) {
        const struct gt_gil_event *ev = ti->gil[c].data;
        for (size_t i = 0, m = ti->gil[c].n; i < m; i++) {
            uint64_t raw = ev[i].ts, ts = raw < last ? last : raw > end ? end : raw;
            last = ts;
            if (ev[i].kind == GT_PARK_BEGIN) {
                if (raw >= start && raw <= end)
                    s->acquisitions++; /* parks */
                err = ivb_set_aux(&b, ts, GT_GIL_STATE_WAIT, 0);
            } else if (ev[i].kind == GT_PARK_WAIT_BEGIN) {
                err = ivb_set_aux(&b, ts, GT_GIL_STATE_RELEASED, 0);
            } else if (ev[i].kind == GT_PARK_END && b.state == GT_GIL_STATE_WAIT) {
                b.aux = ev[i].aux;
                err = ivb_set_aux(&b, ts, GT_GIL_STATE_HELD, 0);
            } else if (ev[i].kind == GT_PARK_WAIT_END && b.state == GT_GIL_STATE_RELEASED) {
                err = ivb_set_aux(&b, ts, GT_GIL_STATE_HELD, 0);
            }
            if (err)
                goto cleanup;
        }
    }
    if ((err = ivb_flush(&b, end)))
        goto cleanup;
    hand_out_gil(tr, &b, 0);
cleanup:
    free(b.v);
    return err;
}

static int build_os(const struct gt_thread_input *ti, struct gt_thread_result *tr)
{
    uint64_t start = tr->start_ns, end = tr->end_ns, last = start;
    uint32_t init = GT_OS_ON_CPU;
    int err = 0;

    /* Switched in first: it was off CPU before; the reason is unknown, call it blocked. */
    int seen = 0;
    for (size_t c = 0; c < ti->nsched; c++) {
        if (ti->sched[c].n) {
            const struct gt_sched_event *ev = ti->sched[c].data;
            if (ev[0].kind == GT_SCHED_IN)
                init = GT_OS_BLOCKED;
            seen = 1;
            break;
        }
    }
    if (!seen && ti->sched_more && ti->sched_more->first_kind == GT_SCHED_IN)
        init = GT_OS_BLOCKED;
    struct ivb b = {NULL, 0, 0, start, init, 0, 0};
    for (size_t c = 0; c < ti->nsched; c++) {
        const struct gt_sched_event *ev = ti->sched[c].data;
        for (size_t i = 0, m = ti->sched[c].n; i < m; i++) {
            uint64_t ts = ev[i].ts;
            ts = ts < last ? last : ts > end ? end : ts;
            last = ts;
            switch (ev[i].kind) {
            case GT_SCHED_OUT_PREEMPTED:
                err = ivb_set(&b, ts, GT_OS_PREEMPTED);
                break;
            case GT_SCHED_OUT_BLOCKED:
                err = ivb_set(&b, ts, GT_OS_BLOCKED);
                break;
            case GT_SCHED_IN:
                err = ivb_set(&b, ts, GT_OS_ON_CPU);
                break;
            default:
                break;
            }
            if (err)
                goto cleanup;
        }
    }
    const struct gt_coalesced *m = ti->sched_more;
    if (m && m->ntiles) {
        const uint32_t aux[3] = {0, 0, 0};
        tr->os_coalesced_from = m->base < start ? start : m->base > end ? end : m->base;
        if ((err = ivb_tiles(&b, m, end, aux)))
            goto cleanup;
    }
    if ((err = ivb_flush(&b, end)))
        goto cleanup;
    int64_t off = 0, pre = 0;
    for (size_t i = 0; i < b.n; i++) {
        int64_t d = (int64_t)(b.v[i].end - b.v[i].start);
        if (b.v[i].state != GT_OS_ON_CPU)
            off += d;
        if (b.v[i].state == GT_OS_PREEMPTED)
            pre += d;
    }
    tr->summary.off_cpu_ns = off;
    tr->summary.preempted_ns = pre;
    tr->has_sched = 1;
    tr->os = b.v;
    tr->nos = b.n;
    b.v = NULL;
cleanup:
    free(b.v);
    return err;
}

static void seg_emit(struct seg *sg, size_t *n, uint64_t *cur, uint64_t t, uint32_t f)
{
    if (t <= *cur)
        return;
    if (*n == 0 || sg[*n - 1].func != f)
        sg[(*n)++] = (struct seg){*cur, f};
    *cur = t;
}

/* The function of call-tree node `node` past the budget: a Python call's, or for an
 * anchor (`up` levels above the innermost frame open at the cut) the innermost Python
 * frame open at the cut at or above that level (none: GT_NO_FUNC); `open` are the frames
 * open at the cut, outermost first. GT_UNKNOWN_FUNC when not known. */
static uint32_t past_func(const struct gt_thread_result *h, const struct gt_span *const *open,
                          size_t nopen, uint32_t node)
{
    if (node >= h->ncalls_more)
        return GT_UNKNOWN_FUNC;
    const struct gt_cnode *nd = &h->calls_more[node];
    if (nd->func != GT_CNODE_ANCHOR)
        return nd->func < GT_UNKNOWN_FUNC ? nd->func : GT_UNKNOWN_FUNC;
    if (!nopen)
        return GT_UNKNOWN_FUNC;
    if (nd->parent > open[nopen - 1]->depth)
        return GT_NO_FUNC; /* it returned from every frame open at the cut */
    size_t level = open[nopen - 1]->depth - nd->parent;
    for (size_t i = nopen; i-- > 0;)
        if (open[i]->depth <= level && !(open[i]->flags & GT_SPAN_C))
            return open[i]->func;
    return GT_NO_FUNC;
}

/* Past the cut (segments sg[0, n) end there): the call tree's tiles, each its GIL
 * holder's function (a tile without votes continues the one before), then cur's. */
static int past_segs(const struct gt_thread_result *h, const struct gt_calltree *c, uint64_t cut,
                     struct seg *sg, size_t *np)
{
    size_t n = *np, nopen = 0;
    const struct gt_span **open = NULL;
    for (size_t i = 0; i < h->nspans; i++)
        nopen += (h->spans[i].flags & GT_SPAN_CLIPPED_END) && h->spans[i].end == cut;
    if (nopen && !(open = malloc(nopen * sizeof(*open))))
        return -ENOMEM;
    nopen = 0;
    /* (start, depth) order: the open frames are nested, outermost first) */
    for (size_t i = 0; i < h->nspans; i++)
        if ((h->spans[i].flags & GT_SPAN_CLIPPED_END) && h->spans[i].end == cut)
            open[nopen++] = &h->spans[i];
    uint32_t memo_node = UINT32_MAX, f = GT_UNKNOWN_FUNC;
    sg[n++] = (struct seg){cut, GT_UNKNOWN_FUNC};
    for (size_t i = 0; i <= c->ntiles; i++) {
        uint32_t node = i < c->ntiles ? c->tile_node[i] : c->cur_py;
        if (node == GT_NO_FUNC)
            continue;
        uint64_t t = i < c->ntiles ? c->tile_base + (uint64_t)((double)i * c->tile_width_ns)
                                   : h->calls_more_last;
        if (t >= h->end_ns)
            break;
        if (t < sg[n - 1].start)
            t = sg[n - 1].start;
        if (node != memo_node) {
            memo_node = node;
            f = past_func(h, open, nopen, node);
        }
        if (t == sg[n - 1].start)
            sg[n - 1].func = f;
        else if (sg[n - 1].func != f)
            sg[n++] = (struct seg){t, f};
        if (n >= 2 && sg[n - 1].func == sg[n - 2].func)
            n--;
    }
    free(open);
    *np = n;
    return 0;
}

/* Holder's innermost-Python-function segments over its life: one sweep over the
 * (start, depth)-sorted, properly nested spans. From `truncated_at` on (0 = never)
 * calls were no longer recorded: the function is the call tree's (`more`, the tiles'
 * GIL holders), else unknown. */
static int build_segs(const struct gt_thread_result *h, uint64_t truncated_at,
                      const struct gt_calltree *more, struct seg **sg, size_t *cap,
                      size_t *nseg, struct open_py **st, size_t *st_cap)
{
    size_t n = 0, d = 0;
    uint64_t cur = h->start_ns;
    size_t ntiles = more && h->calls_more ? more->ntiles : 0;
    /* Each span yields at most two segment starts, plus the tail and the truncation, and
     * past it a segment per tile and cur's. */
    int err = grow(sg, cap, 2 * h->nspans + 4 + ntiles, sizeof(**sg));
    if (err)
        return err;
    for (size_t i = 0; i < h->nspans; i++) {
        const struct gt_span *s = &h->spans[i];
        if (s->flags & GT_SPAN_C)
            continue;
        while (d && (*st)[d - 1].end <= s->start) {
            seg_emit(*sg, &n, &cur, (*st)[d - 1].end, (*st)[d - 1].func);
            d--;
        }
        seg_emit(*sg, &n, &cur, s->start, d ? (*st)[d - 1].func : GT_NO_FUNC);
        if (d == *st_cap && (err = grow(st, st_cap, d + 1, sizeof(**st))))
            return err;
        (*st)[d++] = (struct open_py){s->end, s->func};
    }
    while (d) {
        seg_emit(*sg, &n, &cur, (*st)[d - 1].end, (*st)[d - 1].func);
        d--;
    }
    seg_emit(*sg, &n, &cur, h->end_ns, GT_NO_FUNC);
    /* Keep last: before the kept window the holder's functions are not known (its tree
     * of those calls has no GIL split to vote with). */
    for (size_t k = 0; k < n && (*sg)[k].start < h->calls_kept_from; k++)
        (*sg)[k].func = GT_UNKNOWN_FUNC;
    if (truncated_at && truncated_at < h->end_ns) {
        /* Spans were clipped there: cut at it, everything after is unknown. */
        size_t k = 0;
        while (k < n && (*sg)[k].start < truncated_at)
            k++;
        uint64_t cut = truncated_at > h->start_ns ? truncated_at : h->start_ns;
        if (more && h->calls_more && (more->ntiles || more->cur_py != GT_NO_FUNC)) {
            n = k;
            if ((err = past_segs(h, more, cut, *sg, &n)))
                return err;
        } else {
            (*sg)[k] = (struct seg){cut, GT_UNKNOWN_FUNC};
            n = k + 1;
        }
    }
    *nseg = n;
    return 0;
}

static int brow_cmp(const void *pa, const void *pb)
{
    const struct brow *a = pa, *b = pb;
    if (a->b.wait_ns != b->b.wait_ns)
        return a->b.wait_ns > b->b.wait_ns ? -1 : 1;
    if (a->b.waiter_tid != b->b.waiter_tid)
        return a->b.waiter_tid < b->b.waiter_tid ? -1 : 1;
    if (a->b.holder_tid != b->b.holder_tid)
        return a->b.holder_tid < b->b.holder_tid ? -1 : 1;
    if (a->b.func != b->b.func)
        return a->b.func < b->b.func ? -1 : 1;
    if (a->w != b->w)
        return a->w < b->w ? -1 : 1;
    return a->h < b->h ? -1 : a->h > b->h;
}

/* First interval in v[lo, n) whose end is after t (v is sorted and contiguous);
 * gallops from lo like seg_find. */
static size_t iv_lower(const struct gt_interval *v, size_t lo, size_t n, uint64_t t)
{
    size_t step = 1, hi;
    while (lo + step < n && v[lo + step - 1].end <= t) {
        lo += step;
        step *= 2;
    }
    hi = lo + step < n ? lo + step : n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid].end <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Last segment in sg[lo, n) starting at or before t (sg[lo].start <= t). Gallops
 * from lo first: the next overlap is usually close, and a plain binary search over
 * a large segment list costs a cache miss per step. */
static size_t seg_find(const struct seg *sg, size_t lo, size_t n, uint64_t t)
{
    size_t step = 1, hi;
    while (lo + step < n && sg[lo + step].start <= t) {
        lo += step;
        step *= 2;
    }
    hi = lo + step < n ? lo + step : n;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (sg[mid].start <= t)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* Accumulators for one (waiter, holder) pair, indexed by func (GT_NO_FUNC -> nfuncs,
 * GT_UNKNOWN_FUNC -> nfuncs + 1: see acc_index). */
struct acc {
    uint64_t *ns;
    uint32_t *count;
    uint64_t *pair_stamp, *wait_stamp;
    uint32_t *touched;
    size_t ntouched;
};

static void acc_add(struct acc *a, uint32_t f, size_t fi, uint64_t d, uint64_t pair,
                    uint64_t wait)
{
    if (a->pair_stamp[fi] != pair) {
        a->pair_stamp[fi] = pair;
        a->ns[fi] = 0;
        a->count[fi] = 0;
        a->touched[a->ntouched++] = f;
    }
    a->ns[fi] += d;
    if (a->wait_stamp[fi] != wait) {
        a->wait_stamp[fi] = wait;
        if (a->count[fi] < UINT32_MAX)
            a->count[fi]++;
    }
}

static size_t acc_index(const struct gt_trace_input *in, uint32_t f)
{
    return f == GT_NO_FUNC ? in->nfuncs : f == GT_UNKNOWN_FUNC ? (size_t)in->nfuncs + 1 : f;
}

/* Adds to `a` the holder's functions over [lo, hi): its segments sg[0..nseg) (the last one
 * ends at h_end). *s0 trails the walk: the next call's overlap starts at or after it. */
static void acc_overlap(struct acc *a, const struct gt_trace_input *in, const struct seg *sg,
                        size_t nseg, size_t *s0, uint64_t h_end, uint64_t lo, uint64_t hi,
                        uint64_t pair, uint64_t wait)
{
    for (size_t q = seg_find(sg, *s0, nseg, lo); q < nseg && sg[q].start < hi; q++) {
        *s0 = q;
        uint64_t se = q + 1 < nseg ? sg[q + 1].start : h_end;
        uint64_t a0 = sg[q].start > lo ? sg[q].start : lo;
        uint64_t a1 = se < hi ? se : hi;
        if (a1 > a0)
            acc_add(a, sg[q].func, acc_index(in, sg[q].func), a1 - a0, pair, wait);
    }
}

/* What waiter w's waits owe holder h, by h's function (h's segments sg), into `a`. */
static void blame_pair(struct acc *a, const struct gt_trace_input *in,
                       const struct gt_thread_result *w, const struct gt_thread_result *h,
                       const struct seg *sg, size_t nseg, uint64_t pair, uint64_t *wait)
{
    size_t k0 = 0, s0 = 0;
    for (size_t wv = 0; wv < w->ngil; wv++) {
        const struct gt_interval *wt = &w->gil[wv];
        /* Coalesced intervals' order is made up: no blame from them. */
        if (wt->state != GT_GIL_STATE_WAIT ||
            (w->gil_coalesced_from && wt->end > w->gil_coalesced_from))
            continue;
        if (in->free_threaded) {
            /* Parked: the waker is to blame for all of it, in whatever it ran (a waiter's
             * waits are in time order). */
            if (wt->aux != (uint32_t)h->tid)
                continue;
            ++*wait;
            acc_overlap(a, in, sg, nseg, &s0, h->end_ns, wt->start, wt->end, pair, *wait);
            continue;
        }
        ++*wait;
        k0 = iv_lower(h->gil, k0, h->ngil, wt->start);
        for (size_t k = k0; k < h->ngil && h->gil[k].start < wt->end; k++) {
            const struct gt_interval *hv = &h->gil[k];
            uint64_t lo = hv->start > wt->start ? hv->start : wt->start;
            uint64_t hi = hv->end < wt->end ? hv->end : wt->end;
            /* A wait is for one interpreter's GIL: only its holder is to blame. */
            if (hv->state != GT_GIL_STATE_HELD || hv->aux != wt->aux || lo >= hi ||
                (h->gil_coalesced_from && hv->end > h->gil_coalesced_from))
                continue;
            acc_overlap(a, in, sg, nseg, &s0, h->end_ns, lo, hi, pair, *wait);
        }
    }
}

static void acc_free(struct acc *a)
{
    free(a->ns);
    free(a->count);
    free(a->pair_stamp);
    free(a->wait_stamp);
    free(a->touched);
}

static int acc_alloc(struct acc *a, size_t nf)
{
    a->ns = calloc(nf, sizeof(*a->ns));
    a->count = calloc(nf, sizeof(*a->count));
    a->pair_stamp = calloc(nf, sizeof(*a->pair_stamp));
    a->wait_stamp = calloc(nf, sizeof(*a->wait_stamp));
    a->touched = calloc(nf, sizeof(*a->touched));
    return a->ns && a->count && a->pair_stamp && a->wait_stamp && a->touched ? 0 : -ENOMEM;
}

/* The rows, largest first, become r->blame. */
static int blame_rows(struct gt_result *r, struct brow *rows, size_t nrows)
{
    if (!nrows)
        return 0;
    qsort(rows, nrows, sizeof(*rows), brow_cmp);
    r->blame = malloc(nrows * sizeof(*r->blame));
    if (!r->blame)
        return -ENOMEM;
    for (size_t i = 0; i < nrows; i++)
        r->blame[i] = rows[i].b;
    r->nblame = nrows;
    return 0;
}

static int build_blame(const struct gt_trace_input *in, struct gt_result *r)
{
    struct seg *sg = NULL;
    struct open_py *st = NULL;
    struct brow *rows = NULL;
    struct acc a = {0};
    size_t sg_cap = 0, st_cap = 0, nrows = 0, rows_cap = 0;
    uint64_t pair = 0, wait = 0;
    int any_wait = 0, err = 0;

    for (size_t i = 0; i < r->nthreads; i++)
        any_wait |= r->threads[i].summary.wait_ns != 0;
    if (!any_wait)
        return 0;
    if ((err = acc_alloc(&a, (size_t)in->nfuncs + 2)))
        goto cleanup;
    /* Holder-major so only one holder's segment list exists at a time. */
    for (size_t hi = 0; hi < r->nthreads; hi++) {
        const struct gt_thread_result *h = &r->threads[hi];
        int tool = (in->threads[hi].flags & GT_THREAD_TOOL) != 0;
        size_t nseg = 0;
        if (h->summary.held_ns == 0)
            continue;
        if (tool) { /* no rows: one segment, its sum the tool's cost */
            if ((err = grow(&sg, &sg_cap, 1, sizeof(*sg))))
                goto cleanup;
            sg[0] = (struct seg){h->start_ns, GT_NO_FUNC};
            nseg = 1;
        } else if ((err = build_segs(h, in->threads[hi].calls_truncated_at,
                                     in->threads[hi].calls_more, &sg, &sg_cap, &nseg, &st,
                                     &st_cap)))
            goto cleanup;
        for (size_t wi = 0; wi < r->nthreads; wi++) {
            const struct gt_thread_result *w = &r->threads[wi];
            /* Each process has its own GIL; giltracer's own waits are its own cost. */
            if (wi == hi || w->pid != h->pid || w->summary.wait_ns == 0 ||
                (in->threads[wi].flags & GT_THREAD_TOOL))
                continue;
            a.ntouched = 0;
            blame_pair(&a, in, w, h, sg, nseg, ++pair, &wait);
            if (tool) {
                for (size_t t = 0; t < a.ntouched; t++) {
                    size_t fi = acc_index(in, a.touched[t]);
                    r->tool.caused_ns += a.ns[fi];
                    r->tool.caused_waits += a.count[fi];
                }
                continue;
            }
            if ((err = grow(&rows, &rows_cap, nrows + a.ntouched, sizeof(*rows))))
                goto cleanup;
            for (size_t t = 0; t < a.ntouched; t++) {
                uint32_t f = a.touched[t];
                size_t fi = acc_index(in, f);
                rows[nrows++] = (struct brow){{w->tid, h->tid, f, a.count[fi], a.ns[fi]}, wi, hi};
            }
        }
    }
    err = blame_rows(r, rows, nrows);
cleanup:
    free(sg);
    free(st);
    free(rows);
    acc_free(&a);
    return err;
}

/* The calls past the budget, their functions made global ids (the profile grafts them). */
static int build_calls_more(const struct gt_trace_input *in, const struct gt_thread_input *ti,
                            struct gt_thread_result *tr)
{
    const struct gt_calltree *c = ti->calls_more;
    if (!c || !c->n || (!ti->calls_truncated_at && !ti->calls_kept_from))
        return 0;
    tr->calls_more = malloc(c->n * sizeof(*tr->calls_more));
    if (!tr->calls_more)
        return -ENOMEM;
    for (size_t i = 0; i < c->n; i++) {
        struct gt_cnode nd = c->nodes[i];
        if (nd.func != GT_CNODE_ANCHOR) {
            uint32_t f = nd.func;
            if (ti->func_map)
                f = f < ti->func_map_len ? ti->func_map[f] : GT_NO_FUNC;
            nd.func = f < in->nfuncs ? f : GT_NO_FUNC;
            if (nd.parent >= i) /* parents come first */
                nd.parent = 0;
        }
        tr->calls_more[i] = nd;
    }
    tr->ncalls_more = c->n;
    tr->calls_more_cur = c->cur < c->n ? c->cur : 0;
    tr->calls_more_last = clamp_u64(c->last, tr->start_ns, tr->end_ns);
    if (ti->calls_truncated_at)
        tr->calls_truncated_at = clamp_u64(ti->calls_truncated_at, tr->start_ns, tr->end_ns);
    else
        tr->calls_kept_from = clamp_u64(ti->calls_kept_from, tr->start_ns, tr->end_ns);
    return 0;
}

static int chunks_ok(const struct gt_chunk *c, size_t n)
{
    if (n && !c)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (c[i].n && !c[i].data)
            return 0;
    return 1;
}

static int coalesced_ok(const struct gt_coalesced *m)
{
    return !m || (m->state < GT_GIL_NSTATES && (!m->nlead || m->lead) && (!m->ntiles || m->tiles) &&
                  m->width_ns >= 0);
}

static int input_ok(const struct gt_trace_input *in)
{
    /* CLOCK_MONOTONIC ns fit in int64 (292 years); durations are signed downstream. */
    if (in->t1 < in->t0 || in->t1 > INT64_MAX || (in->nthreads && !in->threads) ||
        (in->nfuncs && !in->funcs))
        return 0;
    for (size_t i = 0; i < in->nthreads; i++) {
        const struct gt_thread_input *t = &in->threads[i];
        if (!chunks_ok(t->calls, t->ncalls) || !chunks_ok(t->gil, t->ngil) ||
            !chunks_ok(t->sched, t->nsched) || !coalesced_ok(t->gil_more) ||
            !coalesced_ok(t->sched_more) || (t->calls_more && t->calls_more->n && !t->calls_more->nodes))
            return 0;
    }
    return 1;
}

/* runpy's frames (the CLI's harness), and C functions, never begin the traced code. */
static int harness_func(const struct gt_result *r, uint32_t f)
{
    if (f >= r->nfuncs)
        return 0;
    const char *file = r->funcs[f].file ? r->funcs[f].file : "";
    size_t n = strlen(file);
    if (r->funcs[f].flags & GT_FUNC_C)
        return 1;
    if (strcmp(file, "<frozen runpy>") == 0)
        return 1;
    return n >= 8 && strcmp(file + n - 8, "runpy.py") == 0 &&
           (n == 8 || file[n - 9] == '/' || file[n - 9] == '\\');
}

#define OUTER_MAX 512

/* The frames above the traced code in the thread that started the session: follow the
 * longest span of each depth while it was open at the start or is harness. */
static void outer_frames(const struct gt_result *r, struct gt_thread_result *t)
{
    size_t best[OUTER_MAX];
    uint16_t maxd = 0;
    for (size_t i = 0; i < t->nspans; i++) {
        const struct gt_span *s = &t->spans[i];
        if (s->depth >= OUTER_MAX)
            continue;
        if (s->depth >= maxd) {
            for (uint16_t d = maxd; d <= s->depth; d++)
                best[d] = i;
            maxd = (uint16_t)(s->depth + 1);
        } else if (s->end - s->start > t->spans[best[s->depth]].end - t->spans[best[s->depth]].start) {
            best[s->depth] = i;
        }
    }
    uint16_t d = 0;
    while (d < maxd && t->spans[best[d]].depth == d &&
           ((t->spans[best[d]].flags & GT_SPAN_CLIPPED_START) || harness_func(r, t->spans[best[d]].func)))
        d++;
    if (d == maxd) /* nothing of the traced code's own: show everything */
        d = 0;
    t->outer_depth = d;
    if (d) {
        t->outer_start = t->spans[best[d - 1]].start;
        t->outer_end = t->spans[best[d - 1]].end;
    }
}

/* Background: it was already in a call when first seen (not started during the trace;
 * with no calls recorded: alive at the start, or no threading thread, unnamed) and held the GIL under 1 % of its traced life or under 1 ms (with no GIL probe, or on
 * a free-threaded build: no Python call began in it). Sitting in a poll or a sleep releases the GIL; a kernel's
 * IOPub thread sending the cell's busy status and input (0.2-0.6 ms at the start of a
 * cell) or a poller that wakes now and then to look (and may wait a switch interval for
 * the GIL) holds it briefly. A thread that runs the traced code
 * holds it; one started during the trace is the traced code's. The cost: a thread made
 * before the trace that only waits on I/O for it is folded too (named in the line). */
#define BACKGROUND_HELD_NS 1000000u

static int is_background(const struct gt_result *r, const struct gt_thread_input *ti,
                         const struct gt_thread_result *t)
{
    if (ti->flags & (GT_THREAD_SERVICE | GT_THREAD_TOOL))
        return 1; /* the host's own machinery, by the host's word (IOPub sends the cell's
                     output and may hold the GIL for milliseconds doing it) */
    if (t->nspans && !(t->spans[0].flags & GT_SPAN_CLIPPED_START))
        return 0; /* its first call began during the trace: started by it */
    if (!t->nspans && t->name &&
        !(ti->flags & (GT_THREAD_ALIVE_AT_START | GT_THREAD_EXISTED_AT_START)))
        return 0; /* no calls recorded (functions off): a named thread new since the start */
    if (!r->gil_known || r->free_threaded) {
        /* Free-threaded: a thread parked since before the start (an Event.wait) shows
         * as running, its park unseen, so running time says nothing here either. */
        for (size_t i = 0; i < t->nspans; i++)
            if (!(t->spans[i].flags & (GT_SPAN_CLIPPED_START | GT_SPAN_C)))
                return 0;
        return 1;
    }
    const struct gt_summary *s = &t->summary;
    return s->held_ns < s->wall_ns / 100 || s->held_ns < BACKGROUND_HELD_NS;
}

/* Which threads are the cell's, and the frames above it; when no thread would be left,
 * none is background. */
static void scope_threads(const struct gt_trace_input *in, struct gt_result *r)
{
    size_t kept = 0;
    for (size_t i = 0; i < r->nthreads; i++) {
        struct gt_thread_result *t = &r->threads[i];
        int scope = (in->threads[i].flags & GT_THREAD_HELD_GIL_AT_START) != 0;
        if (scope)
            outer_frames(r, t);
        t->background = !scope && is_background(r, &in->threads[i], t);
        kept += !t->background;
    }
    for (size_t i = 0; !kept && i < r->nthreads; i++)
        r->threads[i].background = 0;
}

/* giltracer's own threads (GT_THREAD_TOOL) leave r->threads for r->tool (after the
 * blame and the scope, which read the input beside r->threads by index). */
static int split_tool(const struct gt_trace_input *in, struct gt_result *r)
{
    size_t ntool = 0, kept = 0;
    for (size_t i = 0; i < r->nthreads; i++)
        ntool += (in->threads[i].flags & GT_THREAD_TOOL) != 0;
    if (!ntool)
        return 0;
    r->tool.threads = malloc(ntool * sizeof(*r->tool.threads));
    if (!r->tool.threads)
        return -ENOMEM;
    for (size_t i = 0; i < r->nthreads; i++) {
        if (in->threads[i].flags & GT_THREAD_TOOL)
            r->tool.threads[r->tool.nthreads++] = r->threads[i];
        else
            r->threads[kept++] = r->threads[i];
    }
    r->nthreads = kept;
    return 0;
}

int gt_merge__run(const struct gt_trace_input *in, struct gt_result **out)
{
    struct scratch x = {0};
    struct gt_result *r = NULL;
    int err = 0;

    if (out)
        *out = NULL;
    if (!in || !out || !input_ok(in))
        return -EINVAL;
    r = calloc(1, sizeof(*r));
    if (!r) {
        err = -ENOMEM;
        goto cleanup;
    }
    r->t0 = in->t0;
    r->t1 = in->t1;
    r->funcs = in->funcs;
    r->nfuncs = in->nfuncs;
    r->gil_known = in->gil_known;
    r->free_threaded = in->free_threaded && in->gil_known;
    if (in->nthreads) {
        r->threads = calloc(in->nthreads, sizeof(*r->threads));
        if (!r->threads) {
            err = -ENOMEM;
            goto cleanup;
        }
    }
    r->nthreads = in->nthreads;
    x.in_stack = calloc((size_t)in->nfuncs + 1, sizeof(*x.in_stack));
    if (!x.in_stack) {
        err = -ENOMEM;
        goto cleanup;
    }
    for (size_t i = 0; i < in->nthreads; i++) {
        const struct gt_thread_input *ti = &in->threads[i];
        struct gt_thread_result *tr = &r->threads[i];
        tr->tid = ti->tid;
        tr->pid = ti->pid;
        tr->ident = ti->ident;
        tr->interp = ti->interp;
        tr->name = ti->name;
        thread_life(in, ti, &tr->start_ns, &tr->end_ns);
        tr->summary.wall_ns = tr->end_ns - tr->start_ns;
        tr->summary.off_cpu_ns = -1;
        tr->summary.preempted_ns = -1;
        if ((err = build_spans(&x, in, ti, tr)) || (err = build_calls_more(in, ti, tr)))
            goto cleanup;
        if (in->gil_known && (err = in->free_threaded ? build_park(ti, tr) : build_gil(ti, tr)))
            goto cleanup;
        if ((ti->flags & GT_THREAD_HAS_SCHED) && (err = build_os(ti, tr)))
            goto cleanup;
    }
    if (in->gil_known && (err = build_blame(in, r)))
        goto cleanup;
    scope_threads(in, r);
    if ((err = split_tool(in, r)))
        goto cleanup;
    *out = r;
    r = NULL;
cleanup:
    gt_result__free(r);
    free(x.stack);
    free(x.in_stack);
    free(x.deficit_at);
    free(x.pre);
    free(x.tmp);
    return err;
}

static void free_threads(struct gt_thread_result *t, size_t n)
{
    for (size_t i = 0; t && i < n; i++) {
        free(t[i].spans);
        free(t[i].gil);
        free(t[i].os);
        free(t[i].calls_more);
    }
    free(t);
}

void gt_result__free(struct gt_result *r)
{
    if (!r)
        return;
    free_threads(r->threads, r->nthreads);
    free_threads(r->tool.threads, r->tool.nthreads);
    free(r->blame);
    free(r);
}

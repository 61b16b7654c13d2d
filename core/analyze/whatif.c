/* SPDX-License-Identifier: MIT */
/* What if (see whatif.h): pieces of each thread's time, then one event-driven
 * processor-sharing simulation per scenario. */
#include "whatif.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum piece_kind {
    P_WORK = 0,    /* held the GIL */
    P_BLOCK = 1,   /* released, ends on its own */
    P_HANDOFF = 2, /* zero length: resumes when (dep_thread, dep_piece) is done */
};

struct piece {
    uint64_t a, b; /* original time */
    uint32_t kind;
    int32_t dep_thread; /* index in the foreground list; -1 none */
    int64_t dep_piece;  /* -1: satisfied from the start */
    uint64_t dep_time;  /* hand-off: the waker's original time */
    int cut;        /* a dependency's target: its end is a point to reach */
    int start;      /* the hand-off that starts a thread started during the trace */
    uint64_t pre;   /* work: the part of it preempted (OS states; 0 unknown) */
    uint64_t ev;    /* work: call events (span starts and ends) inside it */
};

/* A piece of time in one thread's call stack: its innermost Python function and whether
 * a synchronisation call is open. Cover [start, end) of the thread. */
struct fpiece {
    uint64_t a, b;
    uint32_t pyfunc;
    int sync;
    int in_c; /* the innermost open span is a C function */
    uint32_t ev; /* call events (span starts and ends) at its start a */
};

struct frame {
    uint64_t end;
    uint32_t pyfunc;
    int sync, in_c;
};

struct fthread {
    const struct gt_result *r;
    const struct gt_thread_result *t;
    const uint32_t *top; /* the functions "F releases the GIL" is asked of (shared) */
    const unsigned char *sync; /* per function of r: is_sync() (shared), read per span */
    size_t ntop;
    uint64_t *topns; /* per piece, ntop values: held time in each top function */
    size_t captopns;
    /* The stack pieces, made as the queries (in time order) reach them: a window fp[0, nfp)
     * of pieces off + 0, 1, ... (each query needs the piece covering its time and the ones
     * after it), so they cost a few pages instead of two pieces per span. */
    struct fpiece *fp;
    size_t nfp, capfp, off;
    struct frame *st; /* the sweep's state: stack, its depth, next span, time reached */
    size_t nst, si;
    uint64_t cur;
    uint32_t pend; /* the sweep's call events not yet on a piece (all at time cur) */
    int swept, err;
    struct piece *p;
    size_t np, capp;
    uint64_t *cuts;
    size_t ncuts, capcuts;
    uint64_t *ih; /* the queue hand-offs' times (gets that did not block), sorted */
    size_t nih, capih, ii;
};

static int grow(void **v, size_t *cap, size_t need, size_t sz)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap * 2 : 16;
    while (c < need)
        c *= 2;
    void *n = realloc(*v, c * sz);
    if (!n)
        return -ENOMEM;
    *v = n;
    *cap = c;
    return 0;
}

static int ends_with(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && strcmp(s + n - m, suf) == 0;
}

/* Calls that block until another thread acts. */
static int is_sync(const struct gt_func *f)
{
    static const char *const c_names[] = {
        "lock.acquire", "Lock.acquire", "RLock.acquire", "lock.acquire_lock",
        "SimpleQueue.get", "_ThreadHandle.join", "lock.__enter__", "RLock.__enter__",
    };
    static const char *const py_names[] = {
        "Thread.join", "Thread._wait_for_tstate_lock", "Condition.wait", "Condition.wait_for",
        "Event.wait", "Semaphore.acquire", "BoundedSemaphore.acquire", "Barrier.wait",
        "Queue.get", "Queue.put", "Queue.join", "Future.result", "Future.exception",
    };
    if (!f->name)
        return 0;
    if (f->flags & GT_FUNC_C) {
        for (size_t i = 0; i < sizeof(c_names) / sizeof(c_names[0]); i++)
            if (ends_with(f->name, c_names[i]))
                return 1;
        return 0;
    }
    if (!f->file || !(ends_with(f->file, "threading.py") || ends_with(f->file, "queue.py") ||
                      ends_with(f->file, "_base.py")))
        return 0;
    for (size_t i = 0; i < sizeof(py_names) / sizeof(py_names[0]); i++)
        if (strcmp(f->name, py_names[i]) == 0)
            return 1;
    return 0;
}

enum qkind { Q_NONE = 0, Q_GET = 1, Q_PUT = 2, Q_SIMPLE = 4 };

/* A queue's get or put: queue.Queue's (Python; LifoQueue and PriorityQueue share them) or
 * SimpleQueue's (C), as Q_GET or Q_PUT, | Q_SIMPLE for the latter. */
static int queue_kind(const struct gt_func *f)
{
    if (!f->name)
        return Q_NONE;
    if (f->flags & GT_FUNC_C) {
        if (ends_with(f->name, "SimpleQueue.get") || ends_with(f->name, "SimpleQueue.get_nowait"))
            return Q_GET | Q_SIMPLE;
        if (ends_with(f->name, "SimpleQueue.put") || ends_with(f->name, "SimpleQueue.put_nowait"))
            return Q_PUT | Q_SIMPLE;
        return Q_NONE;
    }
    if (!f->file || !(ends_with(f->file, "/queue.py") || strcmp(f->file, "queue.py") == 0))
        return Q_NONE;
    /* Before 3.11 a Python function's name is its code's, without the class. */
    const char *m = strncmp(f->name, "Queue.", 6) == 0 ? f->name + 6
                    : strchr(f->name, '.')                ? ""
                                                          : f->name;
    if (strcmp(m, "get") == 0 || strcmp(m, "get_nowait") == 0)
        return Q_GET;
    if (strcmp(m, "put") == 0 || strcmp(m, "put_nowait") == 0)
        return Q_PUT;
    return Q_NONE;
}

static int fp_emit(struct fthread *ft, uint64_t a, uint64_t b, const struct frame *top)
{
    if (b <= a)
        return 0;
    if (grow((void **)&ft->fp, &ft->capfp, ft->nfp + 1, sizeof(*ft->fp)))
        return -ENOMEM;
    ft->fp[ft->nfp++] = (struct fpiece){a, b, top ? top->pyfunc : GT_NO_FUNC, top ? top->sync : 0,
                                        top ? top->in_c : 0, ft->pend};
    ft->pend = 0;
    return 0;
}

#define FP_BATCH 4096 /* pieces made at a time */

/* Starts the sweep over the spans again (from the thread's start). */
static void fp_rewind(struct fthread *ft)
{
    ft->nfp = ft->off = ft->nst = ft->si = 0;
    ft->pend = 0;
    ft->cur = ft->t->start_ns;
    ft->swept = 0;
}

/* More of the sweep over the spans (sorted by start, parents first): the innermost Python
 * function and open synchronisation calls over the thread's life, FP_BATCH pieces or
 * more, after dropping the window's pieces before `keep` (a window index). 0 at the end
 * of the sweep or on an error (ft->err). */
static int fp_more(struct fthread *ft, size_t keep)
{
    const struct gt_result *r = ft->r;
    const struct gt_thread_result *t = ft->t;
    if (ft->swept || ft->err)
        return 0;
    if (!ft->st && !(ft->st = malloc((t->nspans + 1) * sizeof(*ft->st)))) {
        ft->err = -ENOMEM;
        return 0;
    }
    if (keep > ft->nfp)
        keep = ft->nfp;
    if (keep) { /* (memmove of a NULL window: undefined) */
        memmove(ft->fp, ft->fp + keep, (ft->nfp - keep) * sizeof(*ft->fp));
        ft->nfp -= keep;
        ft->off += keep;
    }
    struct frame *st = ft->st;
    size_t n = ft->nst, goal = ft->nfp + FP_BATCH, i = ft->si;
    uint64_t cur = ft->cur;
    int err = 0, at_end = 0;
    for (; i <= t->nspans && !err && ft->nfp < goal; i++) {
        uint64_t at = i < t->nspans ? t->spans[i].start : UINT64_MAX;
        while (n && st[n - 1].end <= at && !err) {
            uint64_t e = st[n - 1].end > cur ? st[n - 1].end : cur;
            err = fp_emit(ft, cur, e, &st[n - 1]);
            cur = e;
            ft->pend++; /* the span's end */
            n--;
        }
        if (i == t->nspans) {
            at_end = 1;
            break;
        }
        if (err)
            break;
        const struct gt_span *s = &t->spans[i];
        uint64_t a = s->start > cur ? s->start : cur;
        err = fp_emit(ft, cur, a, n ? &st[n - 1] : NULL);
        cur = a;
        ft->pend++; /* the span's start */
        const struct gt_func *f = s->func < r->nfuncs ? &r->funcs[s->func] : NULL;
        struct frame fr = {s->end, n ? st[n - 1].pyfunc : GT_NO_FUNC, n ? st[n - 1].sync : 0, 1};
        if (f && !(f->flags & GT_FUNC_C) && !(s->flags & GT_SPAN_C)) {
            fr.pyfunc = s->func;
            fr.in_c = 0;
        }
        if (f && ft->sync[s->func])
            fr.sync = 1;
        st[n++] = fr;
    }
    if (at_end && !err) {
        err = fp_emit(ft, cur, t->end_ns, NULL);
        ft->swept = 1;
        free(ft->st);
        ft->st = NULL;
    }
    ft->nst = n;
    ft->si = i;
    ft->cur = cur;
    if (err)
        ft->err = err;
    return !err;
}

/* The window index of the piece covering time x (the last one starting at or before it),
 * the window reaching past it; SIZE_MAX if none. Queries go forward in time; one before
 * the window sweeps again from the start. */
static size_t fp_at(struct fthread *ft, uint64_t x)
{
    if (ft->off && (!ft->nfp || ft->fp[0].a > x))
        fp_rewind(ft);
    while ((!ft->nfp || ft->fp[ft->nfp - 1].a <= x) && fp_more(ft, ft->nfp ? ft->nfp - 1 : 0))
        ;
    size_t lo = 0, hi = ft->nfp;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ft->fp[mid].a <= x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo ? lo - 1 : SIZE_MAX;
}

/* The time thread t held the GIL in [a, b]. */
static uint64_t held_in(const struct gt_thread_result *t, uint64_t a, uint64_t b)
{
    uint64_t sum = 0;
    for (size_t k = 0; k < t->ngil && t->gil[k].start < b; k++) {
        const struct gt_interval *iv = &t->gil[k];
        uint64_t s = iv->start > a ? iv->start : a, e = iv->end < b ? iv->end : b;
        if (iv->state == GT_GIL_STATE_HELD && e > s)
            sum += e - s;
    }
    return sum;
}

/* A joined thread holds the GIL after it wakes its joiner only to tear itself down. More
 * than this is work of its own: the joiner waited for the GIL through it, after another
 * wake-up (a barrier or event that let both run), and was no joiner. */
#define JOIN_TAIL_NS 2000000ull

/* Who woke thread `self` at x after a release since `since`: another foreground thread
 * whose life ended in (since, until] (a join: the ended thread drops the GIL after waking
 * the joiner, so `until` is when the joiner got the GIL back) holding the GIL at most
 * JOIN_TAIL_NS from x to its end, the latest; *point is then its end. Else the other
 * foreground thread that held the GIL last at or before x, and *point is x. -1 if none. */
static int32_t waker(const struct fthread *fts, size_t n, size_t self, uint64_t since, uint64_t x,
                     uint64_t until, uint64_t *point)
{
    *point = x;
    int32_t best = -1;
    uint64_t best_at = 0;
    for (size_t j = 0; j < n; j++) {
        uint64_t end = fts[j].t->end_ns;
        if (fts[j].t->pid != fts[self].t->pid)
            continue; /* another process (follow_children): its own GIL, no hand-offs */
        if (j != self && end > since && end <= until && (best < 0 || end > best_at) &&
            (end <= x || held_in(fts[j].t, x, end) <= JOIN_TAIL_NS)) {
            best = (int32_t)j;
            best_at = end;
        }
    }
    if (best >= 0) {
        *point = best_at;
        return best;
    }
    for (size_t j = 0; j < n; j++) {
        if (j == self || fts[j].t->pid != fts[self].t->pid ||
            fts[j].t->interp != fts[self].t->interp)
            continue;
        const struct gt_thread_result *t = fts[j].t;
        size_t lo = 0, hi = t->ngil; /* last interval starting at or before x */
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (t->gil[mid].start <= x)
                lo = mid + 1;
            else
                hi = mid;
        }
        for (size_t k = lo; k-- > 0;) {
            if (t->gil[k].state != GT_GIL_STATE_HELD)
                continue;
            uint64_t at = t->gil[k].end < x ? t->gil[k].end : x;
            if (best < 0 || at > best_at) {
                best = (int32_t)j;
                best_at = at;
            }
            break;
        }
    }
    return best;
}

/* Time of OS state `state` in [a, b) (the OS intervals are sorted and contiguous). */
static uint64_t os_time(const struct gt_thread_result *t, uint64_t a, uint64_t b, uint32_t state)
{
    size_t lo = 0, hi = t->nos;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (t->os[mid].end <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    uint64_t sum = 0;
    for (size_t k = lo; k < t->nos && t->os[k].start < b; k++) {
        uint64_t s = t->os[k].start > a ? t->os[k].start : a, e = t->os[k].end < b ? t->os[k].end : b;
        if (t->os[k].state == state && e > s)
            sum += e - s;
    }
    return sum;
}

static int add_cut(struct fthread *ft, uint64_t x)
{
    if (grow((void **)&ft->cuts, &ft->capcuts, ft->ncuts + 1, sizeof(*ft->cuts)))
        return -ENOMEM;
    ft->cuts[ft->ncuts++] = x;
    return 0;
}

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

static int add_piece(struct fthread *ft, struct piece p)
{
    if (grow((void **)&ft->p, &ft->capp, ft->np + 1, sizeof(*ft->p)))
        return -ENOMEM;
    ft->p[ft->np++] = p;
    return 0;
}

/* The queue hand-offs at or before `upto` not yet made: zero-length pieces. */
static int flush_ih(struct fthread *ft, uint64_t upto)
{
    for (; ft->ii < ft->nih && ft->ih[ft->ii] <= upto; ft->ii++) {
        uint64_t x = ft->ih[ft->ii];
        if (add_piece(ft, (struct piece){x, x, P_HANDOFF, -1, -1, x, 0, 0, 0, 0}))
            return -ENOMEM;
    }
    return 0;
}

/* [a, b) of one state, split at the thread's cuts; work pieces get their call events and
 * their time in each top function (innermost Python function), from one forward walk over
 * the stack pieces. */
static int add_span_pieces(struct fthread *ft, uint64_t a, uint64_t b, uint32_t kind, size_t *ci)
{
    while (a < b) {
        while (*ci < ft->ncuts && ft->cuts[*ci] <= a)
            (*ci)++;
        uint64_t e = *ci < ft->ncuts && ft->cuts[*ci] < b ? ft->cuts[*ci] : b;
        struct piece p = {a, e, kind, -1, -1, 0, 0, 0, 0, 0};
        if (kind == P_WORK && ft->t->has_sched && ft->t->nos)
            p.pre = os_time(ft->t, a, e, GT_OS_PREEMPTED);
        if (add_piece(ft, p))
            return -ENOMEM;
        uint64_t *ns = NULL;
        if (ft->ntop) {
            if (grow((void **)&ft->topns, &ft->captopns, ft->np * ft->ntop, sizeof(*ft->topns)))
                return -ENOMEM;
            ns = &ft->topns[(ft->np - 1) * ft->ntop];
            memset(ns, 0, ft->ntop * sizeof(*ns));
        }
        uint64_t ev = 0;
        for (size_t k = kind == P_WORK ? fp_at(ft, a) : SIZE_MAX; k != SIZE_MAX; k++) {
            if (k >= ft->nfp) { /* more of the sweep, keeping the last piece */
                if (!fp_more(ft, k ? k - 1 : 0))
                    break;
                k = k ? 1 : 0;
                if (k >= ft->nfp)
                    break;
            }
            const struct fpiece *f = &ft->fp[k];
            if (f->a >= e)
                break;
            if (f->a >= a) /* its events are at f->a */
                ev += f->ev;
            uint64_t s = f->a > a ? f->a : a, t = f->b < e ? f->b : e;
            for (size_t i = 0; ns && t > s && i < ft->ntop; i++)
                if (ft->top[i] == f->pyfunc)
                    ns[i] += t - s;
        }
        ft->p[ft->np - 1].ev = ev;
        if (flush_ih(ft, e))
            return -ENOMEM;
        a = e;
    }
    return 0;
}

/* A released interval that ends a hand-off: a synchronisation call is open at its end. */
static int is_handoff(struct fthread *ft, const struct gt_interval *iv)
{
    if (iv->end <= iv->start)
        return 0;
    size_t k = fp_at(ft, iv->end - 1);
    const struct fpiece *f = k == SIZE_MAX ? NULL : &ft->fp[k];
    return f && f->sync && f->b >= iv->end - 1;
}

/* A release the interpreter made to switch threads: Python code cannot run without the GIL,
 * so a release while a Python function is innermost (no C call open) is the eval loop's
 * drop on another thread's request, and the time until it asks again is part of the wait
 * (when OS states are known: unless the thread was mostly on CPU or blocked then, as in a
 * C call the tracer does not see). */
static int is_switch(struct fthread *ft, const struct gt_interval *iv)
{
    const struct gt_thread_result *t = ft->t;
    if (iv->end <= iv->start || (t->calls_truncated_at && iv->start >= t->calls_truncated_at))
        return 0;
    size_t k = fp_at(ft, iv->start);
    const struct fpiece *f = k == SIZE_MAX ? NULL : &ft->fp[k];
    if (!f || f->pyfunc == GT_NO_FUNC || f->in_c || f->b < iv->end)
        return 0;
    if (!t->has_sched || !t->nos || iv->end - iv->start < 100000)
        return 1;
    uint64_t d = iv->end - iv->start;
    return os_time(t, iv->start, iv->end, GT_OS_PREEMPTED) * 2 >= d;
}

enum seg_class { S_WORK_FREE, S_WORK_GIL, S_BLOCK, S_HANDOFF };

struct seg {
    uint32_t cls;
    double dur;
    int32_t dep_thread;
    int64_t dep_seg; /* -1: none */
    int start;       /* a thread's start: its life begins after it */
};

struct sthread {
    struct seg *s;
    size_t n;
    int64_t *map; /* piece -> segment */
    size_t cur;
    double rem, begin, end;
    double arrived; /* when the current segment began */
    int begun;
    int waking; /* at a hand-off waited on: its wake-up (rem) runs */
};

/* The tracer's own cost in a work piece: event_ns per call event, at most its time on CPU. */
static double own_cost(const struct piece *p, double event_ns)
{
    double on = (double)(p->b - p->a - p->pre), c = (double)p->ev * event_ns;
    return c < on ? c : on;
}

/* The scenario: release = GT_NO_FUNC and gil = 0: no GIL at all (and no tracer: event_ns
 * per call event goes); gil = 1: the GIL kept, work in `release` runs without it. */
static int build_segs(const struct fthread *fts, size_t n, struct sthread *sts, int gil,
                      uint32_t release, double factor, double share, double event_ns)
{
    for (size_t i = 0; i < n; i++) {
        const struct fthread *ft = &fts[i];
        struct sthread *st = &sts[i];
        memset(st, 0, sizeof(*st));
        st->s = malloc((2 * ft->np + 1) * sizeof(*st->s));
        st->map = malloc((ft->np + 1) * sizeof(*st->map));
        if (!st->s || !st->map)
            return -ENOMEM;
        /* A run of work (contiguous held time, up to a dependency's target) becomes at most
         * two segments: the part without the GIL, then the part with it. So a function
         * called a million times costs two segments per held interval, not a million; the
         * order inside one held interval is the only thing lost. */
        double run_free = 0, run_gil = 0;
        size_t run_from = 0, rel = SIZE_MAX; /* the released function's index in top */
        for (size_t j = 0; release != GT_NO_FUNC && j < ft->ntop; j++)
            if (ft->top[j] == release)
                rel = j;
        int in_run = 0;
        for (size_t k = 0; k < ft->np; k++) {
            const struct piece *p = &ft->p[k];
            if (p->kind == P_WORK) {
                if (!in_run) {
                    in_run = 1;
                    run_from = k;
                    run_free = run_gil = 0;
                }
                double len = (double)(p->b - p->a);
                double d = (len - (double)p->pre - (gil ? 0 : own_cost(p, event_ns))) / share;
                double in_f = rel < ft->ntop && len > 0
                                  ? d * (double)ft->topns[k * ft->ntop + rel] / len : 0;
                if (!gil)
                    run_free += d * factor;
                else {
                    run_free += in_f;
                    run_gil += d - in_f;
                }
                const struct piece *nx = k + 1 < ft->np ? &ft->p[k + 1] : NULL;
                if (p->cut || !nx || nx->kind != P_WORK || nx->a != p->b) {
                    if (run_free > 0 || run_gil <= 0)
                        st->s[st->n++] = (struct seg){S_WORK_FREE, run_free, -1, -1, 0};
                    if (run_gil > 0)
                        st->s[st->n++] = (struct seg){S_WORK_GIL, run_gil, -1, -1, 0};
                    for (size_t j = run_from; j <= k; j++)
                        st->map[j] = (int64_t)st->n - 1;
                    in_run = 0;
                }
                continue;
            }
            uint32_t cls = p->kind == P_BLOCK ? S_BLOCK : S_HANDOFF;
            double d = cls == S_BLOCK ? (double)(p->b - p->a) : 0;
            struct seg *last = st->n ? &st->s[st->n - 1] : NULL;
            if (last && cls == S_BLOCK && last->cls == S_BLOCK && !(k && ft->p[k - 1].cut)) {
                last->dur += d;
            } else {
                st->s[st->n++] = (struct seg){cls, d, -1, -1, p->start};
                if (cls == S_HANDOFF && p->dep_thread >= 0 && p->dep_piece >= 0)
                    st->s[st->n - 1].dep_thread = p->dep_thread;
            }
            st->map[k] = (int64_t)st->n - 1;
        }
    }
    /* Dependencies to segment indices once every map is built. */
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < fts[i].np; k++) {
            const struct piece *p = &fts[i].p[k];
            struct seg *s = &sts[i].s[sts[i].map[k]];
            if (p->kind == P_HANDOFF && s->dep_thread >= 0)
                s->dep_seg = sts[p->dep_thread].map[p->dep_piece];
        }
    return 0;
}

static void free_segs(struct sthread *sts, size_t n)
{
    for (size_t i = 0; sts && i < n; i++) {
        free(sts[i].s);
        free(sts[i].map);
    }
}

#define DONE_EPS 1e-3 /* ns */

static int dep_done(const struct sthread *sts, const struct seg *s)
{
    return s->dep_thread < 0 || (int64_t)sts[s->dep_thread].cur > s->dep_seg;
}

static void start_seg(struct sthread *st, double now)
{
    st->arrived = now;
    st->waking = 0;
    if (st->cur < st->n) {
        st->rem = st->s[st->cur].dur;
        if (!st->begun && !st->s[st->cur].start) {
            st->begun = 1;
            st->begin = now;
        }
    } else {
        st->end = now;
        if (!st->begun) {
            st->begun = 1;
            st->begin = now;
        }
    }
}

/* A hand-off segment done now? One whose dependency came after the thread reached it (it
 * waited) first runs its wake-up of `wake` ns (not a thread's start: no sleeper to wake). */
static int handoff_done(const struct sthread *sts, struct sthread *st, const struct seg *s,
                        double now, double wake, size_t *waited)
{
    if (st->waking)
        return st->rem <= DONE_EPS;
    if (!dep_done(sts, s))
        return 0;
    if (s->start || now <= st->arrived + DONE_EPS)
        return 1;
    if (waited)
        (*waited)++;
    if (!(wake > 0))
        return 1;
    st->waking = 1;
    st->rem = wake;
    return 0;
}

/* Zero-length work and satisfied hand-offs complete now. */
static void settle(struct sthread *sts, size_t n, double now, double wake, size_t *waited)
{
    int changed = 1;
    while (changed) {
        changed = 0;
        for (size_t i = 0; i < n; i++) {
            struct sthread *st = &sts[i];
            while (st->cur < st->n) {
                const struct seg *s = &st->s[st->cur];
                int done = s->cls == S_HANDOFF ? handoff_done(sts, st, s, now, wake, waited)
                                               : st->rem <= DONE_EPS;
                if (!done)
                    break;
                st->cur++;
                start_seg(st, now);
                changed = 1;
            }
        }
    }
}

/* Processor sharing on `cpus` CPUs (with the GIL: the GIL's work shares one CPU's worth),
 * each at `pspeed` of its speed alone when all are busy (linear in between).
 * A hand-off waited on costs `wake` ns (counted in *waited). Returns the makespan; each
 * thread's begin and end are set. */
static double simulate(struct sthread *sts, size_t n, unsigned cpus, double pspeed, double wake,
                       size_t *waited)
{
    double now = 0;
    for (size_t i = 0; i < n; i++) {
        sts[i].cur = 0;
        sts[i].begun = 0;
        start_seg(&sts[i], 0);
    }
    double *rate = malloc((n ? n : 1) * sizeof(*rate));
    if (!rate)
        return NAN;
    for (;;) {
        settle(sts, n, now, wake, waited);
        size_t nfree = 0, ngil = 0, nblock = 0, nstall = 0;
        for (size_t i = 0; i < n; i++) {
            if (sts[i].cur >= sts[i].n)
                continue;
            uint32_t c = sts[i].s[sts[i].cur].cls;
            nfree += c == S_WORK_FREE;
            ngil += c == S_WORK_GIL;
            nblock += c == S_BLOCK || (c == S_HANDOFF && sts[i].waking);
            nstall += c == S_HANDOFF && !sts[i].waking;
        }
        if (!nfree && !ngil && !nblock) {
            if (!nstall)
                break;
            /* A cycle of hand-offs (not from a consistent trace): release the first. */
            for (size_t i = 0; i < n; i++)
                if (sts[i].cur < sts[i].n && sts[i].s[sts[i].cur].cls == S_HANDOFF &&
                    !sts[i].waking) {
                    sts[i].cur++;
                    start_seg(&sts[i], now);
                    break;
                }
            continue;
        }
        double consumers = (double)nfree + (ngil ? 1.0 : 0.0);
        double busy = consumers > cpus ? cpus : consumers;
        double speed =
            cpus > 1 && busy > 1 ? 1.0 - (1.0 - pspeed) * (busy - 1) / (cpus - 1) : 1.0;
        double c = busy * speed / consumers;
        double dt = INFINITY;
        for (size_t i = 0; i < n; i++) {
            rate[i] = 0;
            if (sts[i].cur >= sts[i].n)
                continue;
            uint32_t cls = sts[i].s[sts[i].cur].cls;
            if (cls == S_HANDOFF && sts[i].waking)
                cls = S_BLOCK;
            rate[i] = cls == S_BLOCK ? 1.0 : cls == S_WORK_FREE ? c : cls == S_WORK_GIL ? c / ngil : 0;
            if (rate[i] > 0 && sts[i].rem / rate[i] < dt)
                dt = sts[i].rem / rate[i];
        }
        now += dt;
        for (size_t i = 0; i < n; i++)
            if (rate[i] > 0) {
                sts[i].rem -= rate[i] * dt;
                if (sts[i].rem < DONE_EPS)
                    sts[i].rem = 0;
            }
    }
    free(rate);
    double span = 0;
    for (size_t i = 0; i < n; i++)
        if (sts[i].end > span)
            span = sts[i].end;
    return span;
}

static double run_scenario(const struct fthread *fts, size_t n, unsigned cpus, double pspeed,
                           int gil,
                           uint32_t release, double factor, double share, double event_ns,
                           double wake,
                           size_t *waited, struct sthread *keep, int *err)
{
    struct sthread *sts = calloc(n ? n : 1, sizeof(*sts));
    if (!sts) {
        *err = -ENOMEM;
        return 0;
    }
    double w = 0;
    if ((*err = build_segs(fts, n, sts, gil, release, factor, share, event_ns)) == 0) {
        w = simulate(sts, n, cpus, pspeed, wake, waited);
        if (isnan(w))
            *err = -ENOMEM;
        if (keep)
            for (size_t i = 0; i < n; i++) {
                keep[i].begin = sts[i].begin;
                keep[i].end = sts[i].end;
            }
    }
    free_segs(sts, n);
    free(sts);
    return w;
}

struct caused {
    uint32_t func;
    uint64_t ns;
};

static int cmp_caused(const void *x, const void *y)
{
    const struct caused *a = x, *b = y;
    if (a->ns != b->ns)
        return a->ns > b->ns ? -1 : 1;
    return a->func < b->func ? -1 : a->func > b->func;
}

/* A hand-off: thread `thread`'s run resumes at `at` once waker `w` reaches `point`. */
struct handoff {
    size_t thread;
    uint64_t at; /* the hand-off's end in its thread */
    int32_t w;
    uint64_t point; /* the waker's point to reach */
};

/* A queue call: its process, kind (enum qkind), time and thread. */
struct qcall {
    int32_t pid;
    int kind;
    uint64_t a, b;
    size_t thread;
};

static int cmp_qcall(const void *x, const void *y)
{
    const struct qcall *a = x, *b = y;
    if (a->pid != b->pid)
        return a->pid < b->pid ? -1 : 1;
    if (a->kind != b->kind)
        return a->kind < b->kind ? -1 : 1;
    if (a->b != b->b)
        return a->b < b->b ? -1 : 1;
    return a->a < b->a ? -1 : a->a > b->a;
}

/* Thread i's hand-offs in hos[0, nho) (each thread's are together, in time order): one
 * ending in (a, b]? */
static int has_handoff_in(const struct handoff *hos, size_t nho, size_t i, uint64_t a, uint64_t b)
{
    size_t lo = 0, hi = nho; /* first of thread i, or of a later thread, or later time */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (hos[mid].thread < i || (hos[mid].thread == i && hos[mid].at <= a))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < nho && hos[lo].thread == i && hos[lo].at <= b;
}

/* The queue hand-offs the GIL hid: per process and kind of queue, the k-th get to return
 * took the k-th put's item; a get that did not block (no hand-off inside it) of another
 * thread's put then depends on that put's return. Appended to *hos; the gets' ends into
 * each thread's ih. Not made when calls were truncated (the ranks would not match). */
static int find_queue_handoffs(struct fthread *fts, size_t n, struct handoff **hos, size_t *nho,
                               size_t *capho, size_t *found)
{
    const struct gt_result *r = fts[0].r;
    for (size_t i = 0; i < n; i++)
        if (fts[i].t->calls_truncated_at)
            return 0;
    unsigned char *qk = calloc(r->nfuncs + 1, 1);
    if (!qk)
        return -ENOMEM;
    int any = 0;
    for (size_t f = 0; f < r->nfuncs; f++)
        any |= qk[f] = (unsigned char)queue_kind(&r->funcs[f]);
    struct qcall *qc = NULL;
    size_t nqc = 0, capqc = 0;
    int err = 0;
    for (size_t i = 0; any && i < n && !err; i++) {
        const struct gt_thread_result *t = fts[i].t;
        uint64_t inside = 0; /* the end of the last queue call counted: nested ones are not */
        for (size_t k = 0; k < t->nspans && !err; k++) {
            const struct gt_span *sp = &t->spans[k];
            if (sp->func >= r->nfuncs || !qk[sp->func] || sp->start < inside)
                continue;
            inside = sp->end;
            if (!(err = grow((void **)&qc, &capqc, nqc + 1, sizeof(*qc))))
                qc[nqc++] = (struct qcall){t->pid, qk[sp->func], sp->start, sp->end, i};
        }
    }
    if (nqc) /* (qsort of NULL, 0: undefined) */
        qsort(qc, nqc, sizeof(*qc), cmp_qcall);
    size_t nexp = *nho; /* the explicit hand-offs, sorted by thread and time */
    for (size_t g = 0; g < nqc && !err;) {
        /* A group: one process, one kind of queue: its gets [g, p), its puts [p, e). */
        size_t p = g, e;
        int32_t pid = qc[g].pid;
        int simple = qc[g].kind & Q_SIMPLE;
        while (p < nqc && qc[p].pid == pid && (qc[p].kind & Q_SIMPLE) == simple &&
               (qc[p].kind & Q_GET))
            p++;
        e = p;
        while (e < nqc && qc[e].pid == pid && (qc[e].kind & Q_SIMPLE) == simple)
            e++;
        for (size_t k = 0; g + k < p && p + k < e && !err; k++) {
            const struct qcall *get = &qc[g + k], *put = &qc[p + k];
            if (put->thread == get->thread || put->b > get->b ||
                has_handoff_in(*hos, nexp, get->thread, get->a, get->b))
                continue;
            struct fthread *ft = &fts[get->thread];
            if (!(err = grow((void **)hos, capho, *nho + 1, sizeof(**hos))) &&
                !(err = grow((void **)&ft->ih, &ft->capih, ft->nih + 1, sizeof(*ft->ih))) &&
                !(err = add_cut(ft, get->b))) {
                (*hos)[(*nho)++] =
                    (struct handoff){get->thread, get->b, (int32_t)put->thread, put->b};
                ft->ih[ft->nih++] = get->b;
                (*found)++;
            }
        }
        g = e > g ? e : g + 1;
    }
    for (size_t i = 0; i < n; i++)
        if (fts[i].nih)
            qsort(fts[i].ih, fts[i].nih, sizeof(*fts[i].ih), cmp_u64);
    free(qc);
    free(qk);
    return err;
}

/* The hand-off points of every foreground thread, with their wakers (*hos, *nho). */
static int find_handoffs(struct fthread *fts, size_t n, uint64_t origin,
                         struct handoff **hos, size_t *nho, size_t *capho_)
{
    int err = 0;
    size_t capho = *capho_;
    for (size_t i = 0; i < n && !err; i++) {
        const struct gt_thread_result *t = fts[i].t;
        if (t->start_ns > origin) {
            uint64_t at;
            int32_t w = waker(fts, n, i, t->start_ns, t->start_ns, t->start_ns, &at);
            if (w >= 0 && !(err = grow((void **)hos, &capho, *nho + 1, sizeof(**hos))))
                (*hos)[(*nho)++] = (struct handoff){i, t->start_ns, w, at};
        }
        for (size_t k = 0; k < t->ngil && !err; k++) {
            const struct gt_interval *iv = &t->gil[k];
            if (iv->state != GT_GIL_STATE_RELEASED || is_switch(&fts[i], iv) ||
                !is_handoff(&fts[i], iv))
                continue;
            uint64_t at, until = iv->end;
            if (k + 1 < t->ngil && t->gil[k + 1].state == GT_GIL_STATE_WAIT)
                until = t->gil[k + 1].end;
            int32_t w = waker(fts, n, i, iv->start, iv->end, until, &at);
            if (w >= 0 && !(err = grow((void **)hos, &capho, *nho + 1, sizeof(**hos))))
                (*hos)[(*nho)++] = (struct handoff){i, iv->end, w, at};
        }
    }
    *capho_ = capho;
    return err;
}

/* One foreground thread's pieces: its work and blocks (cut at ft->cuts) and hand-offs. */
static int thread_pieces(struct fthread *ft, uint64_t origin)
{
    int err = 0;
    const struct gt_thread_result *t = ft->t;
    if (ft->ncuts) /* (qsort of NULL, 0: undefined) */
        qsort(ft->cuts, ft->ncuts, sizeof(*ft->cuts), cmp_u64);
    size_t ci = 0;
    ft->ii = 0;
    fp_rewind(ft);
    if (t->start_ns > origin)
        err = add_piece(ft, (struct piece){t->start_ns, t->start_ns, P_HANDOFF,
                                           -1, -1, t->start_ns, 0, 1, 0, 0});
    for (size_t k = 0; k < t->ngil && !err; k++) {
        const struct gt_interval *iv = &t->gil[k];
        if ((err = flush_ih(ft, iv->start)))
            break;
        if (iv->state == GT_GIL_STATE_HELD) {
            err = add_span_pieces(ft, iv->start, iv->end, P_WORK, &ci);
        } else if (iv->state == GT_GIL_STATE_RELEASED && !is_switch(ft, iv)) {
            if (is_handoff(ft, iv))
                err = add_piece(ft, (struct piece){iv->end, iv->end, P_HANDOFF,
                                                   -1, -1, iv->end, 0, 0, 0, 0});
            else
                err = add_span_pieces(ft, iv->start, iv->end, P_BLOCK, &ci);
        }
    }
    return err ? err : flush_ih(ft, UINT64_MAX);
}

/* A hand-off piece -> its waker's last piece ending at or before the point. */
static void link_handoff(struct fthread *fts, const struct handoff *ho, size_t *handoffs)
{
    struct fthread *ft = &fts[ho->thread];
    struct piece *p = NULL;
    size_t lo = 0, hi = ft->np; /* pieces are in time order: the first starting at `at` */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ft->p[mid].a < ho->at)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t k = lo; k < ft->np && ft->p[k].a <= ho->at; k++)
        if (ft->p[k].kind == P_HANDOFF && ft->p[k].dep_time == ho->at &&
            ft->p[k].dep_thread < 0) {
            p = &ft->p[k];
            break;
        }
    if (!p)
        return;
    const struct fthread *w = &fts[ho->w];
    uint64_t pt = ho->point;
    lo = 0;
    hi = w->np; /* pieces are in time order: first ending after `pt` */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (w->p[mid].b <= pt)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* A zero-length piece at `pt` of the waker (its own hand-off) is not yet done. */
    while (lo > 0 && w->p[lo - 1].a == pt && w->p[lo - 1].b == pt &&
           w->p[lo - 1].kind == P_HANDOFF)
        lo--;
    p->dep_thread = ho->w;
    p->dep_piece = (int64_t)lo - 1;
    if (lo > 0)
        fts[ho->w].p[lo - 1].cut = 1;
    (*handoffs)++;
}

/* Pieces of every foreground thread, with the hand-offs resolved to (thread, piece). */
static int build_pieces(const struct gt_result *r, struct fthread *fts, size_t n, uint64_t origin,
                        size_t *handoffs, size_t *queue_handoffs)
{
    (void)r;
    for (size_t i = 0; i < n; i++)
        fp_rewind(&fts[i]);
    /* Hand-off points first: they cut the wakers' pieces. */
    struct handoff *hos = NULL;
    size_t nho = 0, capho = 0;
    int err = find_handoffs(fts, n, origin, &hos, &nho, &capho);
    if (!err)
        err = find_queue_handoffs(fts, n, &hos, &nho, &capho, queue_handoffs);
    for (size_t i = 0; i < n && !err; i++)
        err = fts[i].err; /* of the sweeps over the spans */
    for (size_t h = 0; h < nho && !err; h++)
        err = add_cut(&fts[hos[h].w], hos[h].point);
    for (size_t i = 0; i < n && !err; i++)
        err = thread_pieces(&fts[i], origin);
    for (size_t h = 0; h < nho && !err; h++)
        link_handoff(fts, &hos[h], handoffs);
    for (size_t i = 0; i < n && !err; i++)
        err = fts[i].err;
    free(hos);
    return err;
}

/* The foreground threads (not background, with GIL intervals) into fts; the earliest
 * start (*origin) and the latest end (*last). */
static void pick_threads(const struct gt_result *r, struct fthread *fts, uint64_t *origin,
                         uint64_t *last)
{
    *origin = UINT64_MAX;
    *last = 0;
    for (size_t i = 0, j = 0; i < r->nthreads; i++) {
        const struct gt_thread_result *t = &r->threads[i];
        if (t->background || !t->ngil)
            continue;
        fts[j].r = r;
        fts[j++].t = t;
        if (t->start_ns < *origin)
            *origin = t->start_ns;
        if (t->end_ns > *last)
            *last = t->end_ns;
    }
}

/* Wait caused, per function, in the foreground threads' waits: cs (room for r->nblame),
 * most first; their count. *total_wait: all the foreground threads' blamed wait. */
static size_t wait_caused(const struct gt_result *r, const struct fthread *fts, size_t n,
                          struct caused *cs, double *total_wait)
{
    size_t ncs = 0;
    *total_wait = 0;
    for (size_t b = 0; b < r->nblame; b++) {
        const struct gt_blame *bl = &r->blame[b];
        int fg = 0;
        for (size_t j = 0; j < n && !fg; j++)
            fg = fts[j].t->tid == bl->waiter_tid;
        if (!fg)
            continue;
        *total_wait += (double)bl->wait_ns;
        if (bl->func >= r->nfuncs)
            continue;
        size_t k = 0;
        while (k < ncs && cs[k].func != bl->func)
            k++;
        if (k == ncs)
            cs[ncs++] = (struct caused){bl->func, 0};
        cs[k].ns += bl->wait_ns;
    }
    qsort(cs, ncs, sizeof(*cs), cmp_caused);
    return ncs;
}

/* Work is its time on CPU: the part preempted goes, and the CPU share other processes
 * left the traced threads while they held the GIL (on CPU / held) stays as measured,
 * spread evenly instead of wherever the preemptions fell. */
static double cpu_share(const struct fthread *fts, size_t n)
{
    double held = 0, pre = 0, share = 1.0;
    for (size_t j = 0; j < n; j++)
        for (size_t k = 0; k < fts[j].np; k++)
            if (fts[j].p[k].kind == P_WORK) {
                held += (double)(fts[j].p[k].b - fts[j].p[k].a);
                pre += (double)fts[j].p[k].pre;
            }
    if (held > 0 && held > pre)
        share = (held - pre) / held;
    return share;
}

/* The call events in held time and the on-CPU time the no-GIL work leaves out for them. */
static void tracer_cost(const struct fthread *fts, size_t n, struct gt_whatif *w)
{
    for (size_t j = 0; j < n; j++)
        for (size_t k = 0; k < fts[j].np; k++)
            if (fts[j].p[k].kind == P_WORK) {
                w->events += (double)fts[j].p[k].ev;
                w->tracer_ns += own_cost(&fts[j].p[k], w->event_ns);
            }
}

/* w->threads: each foreground thread's measured and predicted time. */
static int fill_threads(struct gt_whatif *w, const struct gt_result *r,
                        const struct fthread *fts, size_t n, const struct sthread *times)
{
    w->threads = calloc(n, sizeof(*w->threads));
    if (!w->threads)
        return -ENOMEM;
    w->nthreads = n;
    for (size_t j = 0; j < n; j++) {
        const struct gt_thread_result *t = fts[j].t;
        w->threads[j] = (struct gt_whatif_thread){
            (size_t)(t - r->threads), t->tid, t->name, (double)(t->end_ns - t->start_ns),
            times[j].end - times[j].begin, (double)t->summary.wait_ns};
    }
    return 0;
}

/* The functions whose release each scenario tries: top[0..nf), the most wait caused. */
static void set_top(struct fthread *fts, size_t n, uint32_t *top, const struct caused *cs,
                    size_t nf)
{
    for (size_t k = 0; k < nf; k++)
        top[k] = cs[k].func;
    for (size_t j = 0; j < n; j++) {
        fts[j].top = top;
        fts[j].ntop = nf;
    }
}

/* w->funcs: per top function, the wait it caused, its share of the saving and the wall
 * time were it to release the GIL. */
static int fill_funcs(struct gt_whatif *w, struct fthread *fts, size_t n,
                      const struct caused *cs, size_t nf, double total_wait, double share)
{
    int err = 0;
    w->funcs = calloc(nf + 1, sizeof(*w->funcs));
    if (!w->funcs)
        return -ENOMEM;
    double saving = w->measured_wall_ns - w->predicted_wall_ns;
    for (size_t k = 0; k < nf && !err; k++) {
        struct gt_whatif_func *f = &w->funcs[k];
        f->func = cs[k].func;
        f->wait_caused_ns = (double)cs[k].ns;
        f->saving_ns = saving > 0 && total_wait > 0 ? saving * f->wait_caused_ns / total_wait : 0;
        f->release_wall_ns =
            run_scenario(fts, n, w->cpus, w->parallel_speed, 1, f->func, 1.0, share, 0, 0, NULL,
                         NULL, &err);
        w->nfuncs = k + 1;
    }
    return err;
}

/* Which functions are synchronisation calls, by function id (the caller frees it), shared
 * by fts: their names are compared once here, not at each of their spans. NULL: no memory. */
static unsigned char *sync_table(const struct gt_result *r, struct fthread *fts, size_t n)
{
    unsigned char *sync = calloc(r->nfuncs + 1, 1);
    if (!sync)
        return NULL;
    for (size_t f = 0; f < r->nfuncs; f++)
        sync[f] = (unsigned char)is_sync(&r->funcs[f]);
    for (size_t j = 0; j < n; j++)
        fts[j].sync = sync;
    return sync;
}

static void free_fthreads(struct fthread *fts, size_t n)
{
    for (size_t j = 0; fts && j < n; j++) {
        free(fts[j].fp);
        free(fts[j].st);
        free(fts[j].p);
        free(fts[j].cuts);
        free(fts[j].topns);
        free(fts[j].ih);
    }
    free(fts);
}

const char *gt_whatif__opts_problem(const struct gt_whatif_opts *o)
{
    if (!o)
        return "no options";
    if (o->cpus < 1)
        return "cpus must be an integer >= 1";
    if (!(o->ft_factor > 0) || !isfinite(o->ft_factor))
        return "ft_factor must be a finite number > 0";
    if (!(o->handoff_ns >= 0) || !isfinite(o->handoff_ns))
        return "handoff_ns must be a finite number >= 0";
    if (!(o->event_ns >= 0) || !isfinite(o->event_ns))
        return "event_ns must be a finite number >= 0";
    if (!(o->parallel_speed == 0 || (o->parallel_speed > 0 && o->parallel_speed <= 1)))
        return "parallel_speed must be a number in (0, 1] (or 0: the default, 1)";
    return NULL;
}

int gt_whatif__predict(const struct gt_result *r, const struct gt_whatif_opts *o,
                       struct gt_whatif **out)
{
    *out = NULL;
    if (gt_whatif__opts_problem(o))
        return -EINVAL;
    if (r->free_threaded)
        return -EOPNOTSUPP;
    if (!r->gil_known)
        return -ENODATA;
    size_t n = 0;
    for (size_t i = 0; i < r->nthreads; i++)
        n += !r->threads[i].background && r->threads[i].ngil > 0;
    if (!n)
        return -ENODATA;
    struct gt_whatif *w = calloc(1, sizeof(*w));
    struct fthread *fts = calloc(n, sizeof(*fts));
    struct sthread *times = calloc(n, sizeof(*times));
    struct caused *cs = NULL;
    uint32_t *top = NULL;
    unsigned char *sync = NULL;
    int err = 0;
    if (!w || !fts || !times) {
        err = -ENOMEM;
        goto out;
    }
    w->cpus = o->cpus;
    w->ft_factor = o->ft_factor;
    w->handoff_ns = o->handoff_ns;
    w->event_ns = o->event_ns;
    w->parallel_speed = o->parallel_speed > 0 ? o->parallel_speed : 1.0;
    uint64_t origin, last;
    pick_threads(r, fts, &origin, &last);
    w->measured_wall_ns = (double)(last - origin);
    cs = calloc(r->nblame + 1, sizeof(*cs));
    double total_wait = 0;
    if (!cs) {
        err = -ENOMEM;
        goto out;
    }
    size_t ncs = wait_caused(r, fts, n, cs, &total_wait);
    size_t nf = ncs < o->top_functions ? ncs : o->top_functions;
    while (nf > 1 && cs[nf - 1].ns * 100 < cs[0].ns) /* under 1 % of the first: noise */
        nf--;
    top = calloc(nf + 1, sizeof(*top));
    if (!top || !(sync = sync_table(r, fts, n))) {
        err = -ENOMEM;
        goto out;
    }
    set_top(fts, n, top, cs, nf);
    if ((err = build_pieces(r, fts, n, origin, &w->handoffs, &w->queue_handoffs)))
        goto out;
    double share = cpu_share(fts, n);
    tracer_cost(fts, n, w);
    w->predicted_wall_ns =
        run_scenario(fts, n, o->cpus, w->parallel_speed, 0, GT_NO_FUNC, o->ft_factor, share,
                     o->event_ns, o->handoff_ns, &w->waited, times, &err);
    if (err)
        goto out;
    /* The replay with the GIL: its hand-offs' costs are in the trace already. */
    w->gil_wall_ns =
        run_scenario(fts, n, o->cpus, w->parallel_speed, 1, GT_NO_FUNC, 1.0, share, 0, 0, NULL,
                     NULL, &err);
    if (err || (err = fill_threads(w, r, fts, n, times)))
        goto out;
    err = fill_funcs(w, fts, n, cs, nf, total_wait, share);
out:
    free(cs);
    free(top);
    free(sync);
    free_fthreads(fts, n);
    free(times);
    if (err) {
        gt_whatif__free(w);
        return err;
    }
    *out = w;
    return 0;
}

const char *gt_whatif__assumption(const struct gt_whatif *w, size_t i, char *buf)
{
    switch (i) {
    case 0:
        snprintf(buf, GT_WHATIF_ASSUMPTION_LEN,
                 "No GIL: its waits vanish (and the interpreter's forced switches); held time, "
                 "less the tracer's %.0f ns a call event (%.1f ms), is work taking %.2fx as "
                 "long (free-threading's single-thread cost).",
                 w->event_ns, w->tracer_ns / 1e6, w->ft_factor);
        break;
    case 1:
        if (w->parallel_speed < 1 && w->cpus > 1)
            snprintf(buf, GT_WHATIF_ASSUMPTION_LEN,
                     "%u CPUs, shared equally by the threads with work; with all busy, each runs "
                     "at %.2f of its speed alone (%.2f CPUs' worth: cores shared, SMT).",
                     w->cpus, w->parallel_speed, w->cpus * w->parallel_speed);
        else
            snprintf(buf, GT_WHATIF_ASSUMPTION_LEN,
                     "%u CPUs, shared equally by the threads with work, each as fast as one alone.",
                     w->cpus);
        break;
    case 2:
        snprintf(buf, GT_WHATIF_ASSUMPTION_LEN,
                 "Released time (sleep, I/O, C code) keeps its length, except hand-offs.");
        break;
    case 3:
        snprintf(buf, GT_WHATIF_ASSUMPTION_LEN,
                 "A hand-off (%zu found: a lock, queue, join, event or condition wait, a "
                 "thread's start, or %zu queue gets that found their item queued: the k-th get "
                 "takes the k-th put's) ends when its waker has done the work it had done by "
                 "then; %zu waited on, each %.0f us more (a wake-up, measured).",
                 w->handoffs, w->queue_handoffs, w->waited, w->handoff_ns / 1e3);
        break;
    case 4:
        snprintf(buf, GT_WHATIF_ASSUMPTION_LEN,
                 "\"If F released the GIL\": F's held time (F innermost) runs beside the GIL, "
                 "which all else shares on one CPU.");
        break;
    default:
        snprintf(buf, GT_WHATIF_ASSUMPTION_LEN,
                 "Work is CPU time while holding the GIL, at the CPU share other processes "
                 "left. Not modelled: contention on shared objects beyond the hand-offs, "
                 "caches, memory bandwidth; the host's own threads (IOPub, heartbeat).");
        break;
    }
    return buf;
}

void gt_whatif__free(struct gt_whatif *w)
{
    if (!w)
        return;
    free(w->threads);
    free(w->funcs);
    free(w);
}

/* SPDX-License-Identifier: MIT */
/* A recording session's facts so far, for a live view (gt_session__progress, session.h):
 * the registry's live account, on the session's clock. */
#include "session_impl.h"

#include <stdlib.h>
#include <string.h>

#include "registry.h"

/* Threads gt_session__progress() reports at most (a meter shows a few). */
#define GT_PROGRESS_THREADS 256

/* A free-threaded build's progress thread also names its figures as its summary does:
 * running_ns = held_ns (not parked), parked_ns = wait_ns. 0 or -1 (exception set). */
static int progress_ft_names(PyObject *d)
{
    static const char *const pairs[][2] = {{"running_ns", "held_ns"}, {"parked_ns", "wait_ns"}};
    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
        PyObject *v = PyDict_GetItemString(d, pairs[i][1]); /* borrowed */
        if (!v || PyDict_SetItemString(d, pairs[i][0], v) < 0)
            return -1;
    }
    return 0;
}

/* Whether a live thread is the host's or giltracer's own, not the user's (a live meter
 * leaves it out, as every view does). */
static int not_users(const struct gt_session *s, const struct gt_live_thread *t)
{
    return (t->flags & (GT_THREAD_SERVICE | GT_THREAD_TOOL)) ||
           (session_alive_flags(s, t->tid) & (GT_THREAD_SERVICE | GT_THREAD_TOOL)) ||
           (s->sampler && t->tid == gt_sampler__tid(s->sampler));
}

PyObject *gt_session__progress(struct gt_session *s)
{
    if (session_forked_copy(s) || s->released || s->state != GT_SESSION_RECORDING)
        Py_RETURN_NONE;
    struct gt_live_thread *th = calloc(GT_PROGRESS_THREADS, sizeof(*th));
    if (!th)
        return PyErr_NoMemory();
    struct gt_live sum;
    struct gt_clock_pair now;
    int err = gt_registry__live(&sum, th, GT_PROGRESS_THREADS);
    gt_clock__pair(&now);
    if (err < 0) {
        free(th);
        Py_RETURN_NONE;
    }
    struct gt_clock_fit fit;
    gt_clock__fit_between(&fit, &s->start_pair, &now);
    /* The GIL account's unit: ticks with the hooks, CLOCK_MONOTONIC ns with bpf. */
    int ns_unit = s->used == USED_BPF || !gt_clock_use_tsc;
    uint64_t now_unit = ns_unit ? now.ns : now.ticks;
    double rate = ns_unit ? 1.0 : fit.ns_per_tick;
    size_t n = sum.nthreads < GT_PROGRESS_THREADS ? sum.nthreads : GT_PROGRESS_THREADS;
    PyObject *list = PyList_New(0);
    for (size_t i = 0; list && i < n; i++) {
        const struct gt_live_thread *t = &th[i];
        uint64_t ticks[GT_GIL_LIVE_NSTATES];
        memcpy(ticks, t->gil_ticks, sizeof(ticks));
        if (t->gil_live != GT_GIL_LIVE_UNKNOWN && now_unit > t->gil_since)
            ticks[t->gil_live] += now_unit - t->gil_since; /* the state it is in */
        static const char *const states[GT_GIL_LIVE_NSTATES] = {
            [GT_GIL_LIVE_UNKNOWN] = "unknown", [GT_GIL_LIVE_HELD] = "held",
            [GT_GIL_LIVE_WAITING] = "waiting", [GT_GIL_LIVE_RELEASED] = "released",
        };
        /* A free-threaded build's words (the park probe's account: running / parked). */
        static const char *const ft_states[GT_GIL_LIVE_NSTATES] = {
            [GT_GIL_LIVE_UNKNOWN] = "unknown", [GT_GIL_LIVE_HELD] = "running",
            [GT_GIL_LIVE_WAITING] = "parked", [GT_GIL_LIVE_RELEASED] = "released",
        };
        int st = t->gil_live >= 0 && t->gil_live < GT_GIL_LIVE_NSTATES ? t->gil_live : 0;
        PyObject *d = Py_BuildValue(
            "{s:i,s:K,s:O,s:K,s:K,s:K,s:s}", "native_id", (int)t->tid, "ident",
            (unsigned long long)t->ident, "service", not_users(s, t) ? Py_True : Py_False,
            "held_ns",
            (unsigned long long)((double)ticks[GT_GIL_LIVE_HELD] * rate), "wait_ns",
            (unsigned long long)((double)ticks[GT_GIL_LIVE_WAITING] * rate), "released_ns",
            (unsigned long long)((double)ticks[GT_GIL_LIVE_RELEASED] * rate), "state",
            (s->used == USED_PARK ? ft_states : states)[st]);
        if (d && s->used == USED_PARK && progress_ft_names(d) < 0)
            Py_CLEAR(d);
        if (!d || PyList_Append(list, d) < 0)
            Py_CLEAR(list);
        Py_XDECREF(d);
    }
    free(th);
    if (!list)
        return NULL;
    uint64_t t0 = gt_clock__to_ns(&fit, s->t0_ticks);
    PyObject *r = Py_BuildValue(
        "{s:K,s:K,s:K,s:K,s:K,s:O,s:N,s:O}", "elapsed_ns",
        (unsigned long long)(now.ns > t0 ? now.ns - t0 : 0), "calls",
        (unsigned long long)sum.calls, "gil_events", (unsigned long long)sum.gil_events,
        "sched_events", (unsigned long long)sum.sched_events, "dropped",
        (unsigned long long)sum.dropped, "budget_reached",
        sum.budget_reached ? Py_True : Py_False, "threads", list, "free_threaded",
        s->used == USED_PARK ? Py_True : Py_False);
    return r;
}

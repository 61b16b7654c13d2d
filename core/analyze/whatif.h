/* SPDX-License-Identifier: MIT */
/* What if: the merged result re-scheduled without the GIL on N CPUs (and, per function F,
 * with the GIL kept but F releasing it), to predict the cell's wall time.
 *
 * The model (stated to users by the Python API's text):
 * - Each (foreground) thread is its ordered segments: held the GIL = work (its measured
 *   duration x ft_factor without the GIL); waiting for the GIL = nothing, and so is a
 *   release with a Python function innermost (the eval loop's switch: Python code cannot
 *   run without the GIL; with OS states, only if the thread was mostly preempted then);
 *   released = blocking that keeps its duration, unless it is a hand-off.
 * - A hand-off is a released interval inside a synchronisation call (a lock's acquire,
 *   SimpleQueue.get, Thread.join, Condition/Event.wait, Queue.get/put, Future.result, ...):
 *   the waker is the other thread that held the GIL last at the interval's end, and the
 *   thread resumes when the waker has done, in the new schedule, the work it had done at
 *   that moment (work = its held and released time, waits excluded). A thread started
 *   during the trace starts the same way after the thread that held the GIL last.
 * - Queue hand-offs the GIL hid: a queue's get (Queue.get, SimpleQueue.get) returns the item
 *   of the put with the same rank in the process (the k-th get to return, the k-th put to
 *   return: one FIFO queue per kind), so a get that did not block in the trace still
 *   resumes only when its put's thread has done, in the new schedule, the work it had done
 *   at the put's return. (Under the GIL the consumer finds items queued by the producer's
 *   5 ms turns; run side by side, it catches up and waits on them.)
 * - A hand-off at which the thread really waits in the new schedule (its waker is not there
 *   yet) costs handoff_ns more: the wake-up of a sleeping thread (bench/handoff_cost.py).
 * - Work is on-CPU held time (OS states known: the preempted part goes) less the tracer's
 *   own cost (event_ns per call event, a span's start or end, inside it), divided by the CPU
 *   share the traced threads got while holding the GIL (on CPU / held, over all of them).
 *   The GIL replay and "F releases it" keep the tracer's cost (they compare with the trace).
 * - N CPUs shared equally among the threads that have work (processor sharing). With the
 *   GIL (the "F releases it" scenario), the threads needing the GIL share one CPU's worth.
 *   With b of the N CPUs busy, each runs at 1 - (1 - parallel_speed) (b - 1) / (N - 1) of
 *   its speed alone: the trace measured work one thread at a time, and CPUs that share a
 *   core (SMT) or a host give less together than N times one.
 * Plain C (no Python), unit-tested by tests/c/analyze/test_whatif.c. */
#ifndef GT_WHATIF_H
#define GT_WHATIF_H

#include <stddef.h>
#include <stdint.h>

#include "gt_trace.h"

struct gt_whatif_opts {
    unsigned cpus;        /* >= 1 */
    double ft_factor;     /* > 0: work's slowdown without the GIL (1 = none) */
    size_t top_functions; /* "F releases the GIL" for this many functions, by wait caused */
    double handoff_ns;    /* >= 0: a wake-up's cost, per hand-off waited on without the GIL */
    double event_ns;      /* >= 0: the tracer's own cost per call event in held time */
    double parallel_speed; /* (0, 1]: each CPU's speed with all `cpus` busy, against one
                            * alone (SMT siblings, a shared host); 0 = 1 (independent) */
};

struct gt_whatif_thread {
    size_t index; /* in r->threads */
    int32_t tid;
    const char *name; /* borrowed from the result; may be NULL */
    double measured_ns, predicted_ns, gil_wait_ns;
};

struct gt_whatif_func {
    uint32_t func;           /* global function id */
    double wait_caused_ns;   /* other threads' GIL wait while it held the GIL (blame) */
    double saving_ns;        /* its share of the predicted saving (by wait caused) */
    double release_wall_ns;  /* predicted wall with the GIL kept but F releasing it */
};

struct gt_whatif {
    unsigned cpus;
    double ft_factor;
    double handoff_ns;
    double event_ns;
    double parallel_speed; /* each CPU's speed with all busy (1 = independent CPUs) */
    double events;    /* call events (span starts and ends) in held time */
    double tracer_ns; /* held time removed from the no-GIL work as the tracer's (on CPU) */
    double measured_wall_ns, predicted_wall_ns;
    double gil_wall_ns; /* the same scheduler replaying the trace with the GIL: a check */
    size_t handoffs;    /* hand-offs found (thread starts and queue_handoffs included) */
    size_t queue_handoffs; /* of them: gets that did not block, tied to their puts */
    size_t waited;      /* hand-offs waited on in the no-GIL schedule (each costs handoff_ns) */
    struct gt_whatif_thread *threads; /* the foreground threads, in result order */
    size_t nthreads;
    struct gt_whatif_func *funcs; /* largest wait caused first */
    size_t nfuncs;
};

/**
 * gt_whatif__opts_problem() - what is wrong with options `o`, as a message naming the
 * option and what it takes (a static string), or NULL when they are valid.
 */
const char *gt_whatif__opts_problem(const struct gt_whatif_opts *o);

/**
 * gt_whatif__predict() - the prediction for result `r` with options `o`.
 * Returns 0 and sets *out (free with gt_whatif__free), or -errno: -EINVAL (options that
 * gt_whatif__opts_problem() finds wrong), -ENODATA (no GIL probe ran, or no foreground
 * thread), -EOPNOTSUPP (a free-threaded trace: there is no GIL to remove), -ENOMEM.
 */
int gt_whatif__predict(const struct gt_result *r, const struct gt_whatif_opts *o,
                       struct gt_whatif **out);

#define GT_WHATIF_ASSUMPTIONS 6 /* sentences gt_whatif__assumption() writes */
#define GT_WHATIF_ASSUMPTION_LEN 400

/**
 * gt_whatif__assumption() - the model's assumption `i` (< GT_WHATIF_ASSUMPTIONS) in plain
 * words, with w's numbers, into `buf` (GT_WHATIF_ASSUMPTION_LEN bytes). Returns buf.
 */
const char *gt_whatif__assumption(const struct gt_whatif *w, size_t i, char *buf);

/** gt_whatif__free() - free a prediction; accepts NULL. */
void gt_whatif__free(struct gt_whatif *w);

#endif /* GT_WHATIF_H */

/* SPDX-License-Identifier: MIT */
/* The function tracer: records call / return / C call / C return / unwind events
 * of every thread into the thread registry's call streams. 3.9-3.11: a C profile
 * function (PyEval_SetProfile) on every thread state; 3.12+: sys.monitoring with
 * C fastcall callbacks. Events carry a per-thread function id from a per-thread
 * intern table that holds one strong reference per unique code object (none for
 * functions first seen after the thread's call budget is spent: their events are
 * only counted as dropped). Hooks and callbacks find the thread's record through the
 * registry generation they were made in: one left behind by a session that could not
 * remove it records nothing. */
#ifndef GT_TRACER_H
#define GT_TRACER_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "compat.h"
#include "gt_trace.h"

struct gt_thread;

struct gt_tracer_opts {
    int functions;          /* 0: only register the threads that exist at start */
    int c_calls;            /* record C function calls */
    int max_depth;          /* 0 = unlimited */
    /* Globs on a Python function's file path or qualified name, or a C function's name
     * ("time.sleep", "list.append"). Under include, a C function no glob names is
     * recorded when its direct caller is. Exclude wins. */
    PyObject *include;      /* borrowed: sequence of globs, or NULL */
    PyObject *exclude;      /* borrowed: sequence of globs, or NULL */
    PyObject *own_dir;      /* borrowed str: giltracer's package directory (never traced) */
    PyTypeObject *own_type; /* methods of this type are never traced */
    int sample;             /* without functions: stacks are recorded by gt_tracer__sample */
};

/**
 * gt_tracer__start() - install the tracer in every thread (and threads started later)
 * and record the Python frames already open in each thread as calls at `start_ticks`.
 * `threads` is a sequence of (ident, native_id) of the threading module's threads
 * (native ids are needed before 3.11 to attribute open frames). Call with the GIL,
 * after gt_registry__begin(). Returns 0, or -1 with a Python exception set.
 */
int gt_tracer__start(const struct gt_tracer_opts *o, uint64_t start_ticks, PyObject *threads);

/**
 * gt_tracer__stop() - uninstall and restore the profile functions that were there
 * before (3.9-3.11: a thread on which another profiler replaced the tracer keeps that
 * profiler if it still runs). Returns 0, or -1 with a Python exception set, e.g. when
 * an audit hook refused (tracing is off either way: hooks left behind record nothing).
 */
int gt_tracer__stop(void);

/**
 * gt_tracer__sample() - sampling mode (started with .sample and without functions): record
 * every thread's Python stack at `ticks` as the calls and returns that turn its last
 * sampled stack into this one (see sample_frames in tracer.c). Call with the GIL, from a
 * thread that is not sampled itself (the sampler: its own thread state is skipped),
 * between start and stop. Returns 0, or -ESRCH when not sampling.
 */
int gt_tracer__sample(uint64_t ticks);

/** gt_tracer__thread_names() - borrowed dict native id -> name of threads started
 * while recording (kept until the next start). May be NULL. */
PyObject *gt_tracer__thread_names(void);

/** gt_tracer__after_fork_child() - in a forked child: uninstall what the parent's
 * session installed, so the child runs untraced and may start its own session. */
void gt_tracer__after_fork_child(void);

/** gt_tracer__untraced_note() - after stop: 1 and sentences in `buf` ("; " between)
 * when calls were not traced: 3.9-3.11, threads started by C code, another profiler
 * paused at start or displacing the tracer on some threads; include globs that
 * matched nothing. Else 0. */
int gt_tracer__untraced_note(char *buf, size_t len);

/**
 * gt_tracer__attach_interp() - in a subinterpreter (3.12+, with its GIL) while a
 * session traces functions: register the tracer's callbacks in its sys.monitoring.
 * Returns 1 when registered, 0 when not now (no session, the main interpreter, or
 * sys.monitoring not there yet), -1 when refused (counted; no exception left).
 */
int gt_tracer__attach_interp(void);

/** gt_tracer__subinterp_counts() - subinterpreters attached / refused this session. */
void gt_tracer__subinterp_counts(unsigned long *attached, unsigned long *failed);

/** gt_tracer__active() - nonzero between start and stop. */
int gt_tracer__active(void);

/* The functions seen by every thread, with names resolved and copied (owns its strings). */
struct gt_functable {
    struct gt_func *funcs;
    uint32_t n;
    char *arena; /* all strings */
};

/**
 * gt_tracer__collect() - after stop: build the global function table from every
 * thread's intern table, give each thread its local->global map (see
 * gt_tracer__func_map), and release every Python reference the tracer held.
 * `file_labels` (a dict, or NULL): file name -> the name shown instead (a notebook
 * cell's file -> "In [5]"). Returns 0, or -1 with a Python exception set.
 */
int gt_tracer__collect(struct gt_thread *threads, PyObject *file_labels, struct gt_functable *out);

/**
 * gt_tracer__collect_live() - the same while recording (a child's spool checkpoint),
 * with the GIL held so that no thread adds an entry meanwhile: keeps the tracer's
 * references. Not for free-threaded builds (entries are added without the GIL).
 */
int gt_tracer__collect_live(struct gt_thread *threads, struct gt_functable *out);

/* Whether the thread has functions the last collect did not map (read without the GIL:
 * a glance, which a function added meanwhile may miss). */
int gt_tracer__unmapped(const struct gt_thread *t);

/** gt_tracer__func_map() - a thread's local->global function id map (after collect). */
const uint32_t *gt_tracer__func_map(const struct gt_thread *t, size_t *len);

/** gt_tracer__free_state() - free a thread's tracer state (any Python refs included). */
void gt_tracer__free_state(struct gt_thread *t);

/** gt_functable__free() - accepts NULL and a zeroed table. */
void gt_functable__free(struct gt_functable *ft);

/* A name for the tracer path in use: "sys.monitoring" or "PyEval_SetProfile". */
const char *gt_tracer__mechanism(void);

#endif /* GT_TRACER_H */

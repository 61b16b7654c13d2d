/* SPDX-License-Identifier: MIT */
/* One tracing session: owns everything between start and stop (tracer, GIL probe,
 * scheduler probe, thread registry generation) and produces a gt_run at finish. */
#ifndef GT_SESSION_H
#define GT_SESSION_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "emit.h"
#include "merge.h"
#include "sampler.h"
#include "session_keywords.h" /* generated from magics/giltracer/options.py */
#include "tracer.h"

/* A session's options: one field for each keyword of _core.Session (named, typed and
 * defaulted by the options table; module.c converts them), then the boundary's own. */
#define GT_SESSION_OPTS_FIELD(keyword, type, kind, dflt) type keyword;
struct gt_session_opts {
    /* e.g. int functions; uint64_t max_events (0 = unlimited); int backend (enum
     * gt_backend_choice); PyObject *include, *exclude, *own_dir (borrowed, or NULL);
     * const char *spool, *children (borrowed, or NULL; the session keeps copies). */
    GT_SESSION_KEYWORDS(GT_SESSION_OPTS_FIELD)
    PyTypeObject *own_type; /* borrowed */
};

/* The finished product of a session: plain C data plus the strings it points to. */
struct gt_run {
    struct gt_result *result;
    struct gt_functable funcs;
    char *names_arena;
    struct gt_emit_meta meta;
    char backend[16];
    char backend_reason[512];
    char sched_status[256];
    char python[128];
    char title[256];
    char tracer_note[512]; /* threads the function tracer missed, or "" */
    uint64_t gil_events;
    struct gt_result *check; /* crosscheck: the bpf probe's view of the same run */
    int sampled;             /* sampling mode ran: `sampler` holds its stats */
    struct gt_sampler_stats sampler;
    char sampling[384];      /* sampling mode: the interval, samples, the sampler's GIL use */
    char tool_note[384];     /* what giltracer's own threads cost, or "" */
    /* Child processes merged in: their spools (the strings their functions point to) and
     * the function table of all processes the result uses. */
    struct gt_spool **spools;
    size_t nspools;
    struct gt_func *all_funcs;
    struct gt_emit_process *procs; /* meta.processes */
};

void gt_run__free(struct gt_run *run);

struct gt_session;

struct gt_session *gt_session__new(const struct gt_session_opts *o);
/* Returns 0, or -1 with a Python exception set (nothing is left running). */
int gt_session__start(struct gt_session *s, PyObject *threads);
/* Stops every probe and decides which threads have ended (a thread alive now runs to
 * t1 in the result); returns 0, or -1 with a Python exception set (all stopped anyway;
 * or the session was released by gt_session__stop_active: nothing to stop). */
int gt_session__stop(struct gt_session *s);
/* Merges (after stop). `names`: dict native_id -> name, or NULL; `file_labels`: dict
 * file name -> name shown instead, or NULL. Returns a run or NULL
 * with a Python exception set (e.g. released by gt_session__stop_active). */
struct gt_run *gt_session__finish(struct gt_session *s, PyObject *names, const char *title,
                                  PyObject *file_labels);
/* A followed child's spooler, on a thread of its own, called before start (it waits
 * for it without the GIL, so that its thread's GIL costs the trace nothing): until stop,
 * every ~every_ms writes what the threads recorded since (their blocks, the open ones'
 * records so far included) to a checkpoint (children.h), so that a child killed loses
 * only what it did after the last one (not on a free-threaded build, whose tracer's
 * entries grow without a GIL to keep them still). Runs without the GIL but to look at new
 * threads and functions (then `names_fn()`, a dict native id -> name, names the threads
 * at its start), which 3.13+ asks the main thread to do (a pending call), and before 3.13
 * it does when the GIL is free, else after ~1 s, or before a checkpoint that would write
 * calls of functions never looked at (so that they have a name). It also watches for a
 * SIGTERM the main thread does not answer (termwatch.h). Returns 0 once stopped, or
 * -errno: -ENOENT (the parent's folder is gone: its trace stopped), -EINTR (a SIGTERM
 * unanswered: the caller ends the session and dies of it), -EINVAL (not a recording child
 * session of the hooks). No exception set. */
int gt_session__spool(struct gt_session *s, PyObject *names_fn, uint32_t every_ms);
/* Stops the session if it records and releases everything it holds. Returns 0, or -1
 * with a Python exception set when stopping failed (all is released anyway). Runs
 * Python only to stop a recording session (the tracer's uninstall) and in the
 * finalizers of the references its records drop; the caller keeps any exception it
 * had pending. */
int gt_session__free(struct gt_session *s);
/* A session's life, as gt_session__state() reports it. */
enum gt_session_state {
    GT_SESSION_NEW,
    GT_SESSION_RECORDING,
    GT_SESSION_STOPPED,
    GT_SESSION_FINISHED,
    GT_SESSION_RELEASED, /* by gt_session__stop_active(), not by its owner */
    GT_SESSION_NSTATES,
};
enum gt_session_state gt_session__state(const struct gt_session *s);

/* Stops and releases the process's active session, whoever holds it (e.g. a recording
 * Trace that only sys.last_traceback keeps alive), without merging its records. Its
 * owner's stop() and finish() then raise gt_session__released_message; freeing it does
 * nothing more. Returns 1 if there was one, 0 if not, or -1 with a Python exception set
 * (stopping failed, it is released anyway; or it is starting, stopping or finishing on
 * another thread right now). */
int gt_session__stop_active(void);
extern const char *const gt_session__released_message;

/* A recording session's facts so far, for a live view: a dict (elapsed_ns, calls,
 * gil_events, sched_events, dropped, budget_reached, threads: [{native_id, ident,
 * service, held_ns, wait_ns, released_ns, state}]), None when it does not record, or
 * NULL with an exception set. Takes no lock a push takes; runs with the GIL held. */
PyObject *gt_session__progress(struct gt_session *s);

/* Process-wide facts for diagnostics and tests: the GIL addresses the hooks found. */
PyObject *gt_session__probe_info(void);

#endif /* GT_SESSION_H */

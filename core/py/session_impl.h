/* SPDX-License-Identifier: MIT */
/* A session's insides, shared by the files that make it up (module.c sees only
 * session.h): session.c (its life: new, start, stop, free), backend.c (the probes: which
 * GIL backend, the bpf object's linger, the recorders started and stopped in order),
 * finish.c (the streams converted to the merge's input, the run), progress.c (the live
 * view), checkpoint.c (a followed child's checkpoints and its spooler). */
#ifndef GT_SESSION_IMPL_H
#define GT_SESSION_IMPL_H

#include "session.h" /* first: Python.h */

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "gt_clock.h"

struct gt_bpf;
struct gt_budget_pool;
struct gt_sched;
struct ck_table;
struct ck_name;

/* USED_PARK: a free-threaded build's park probe (lock contention) in the GIL streams. */
enum { USED_NONE = 0, USED_HOOKS = 1, USED_BPF = 2, USED_PARK = 3 };

struct gt_session {
    struct gt_session_opts o; /* Python objects in it are strong references */
    enum gt_session_state state; /* never GT_SESSION_RELEASED: that is `released` */
    int used;
    int registry_begun;
    int hooks_started, bpf_started, check_started; /* what this session must stop */
    char backend_reason[512];
    char sched_status[256];
    struct gt_sched *sched;
    uint64_t t0_ticks, t1_ticks;
    struct gt_clock_pair start_pair, stop_pair; /* the tick fit's anchors */
    int check_bpf; /* bpf runs beside the hooks into gil_check */
    int bpf_held;  /* prepare_bpf() cancelled the linger for it: its release re-arms */
    int released;  /* released by gt_session__stop_active(), not by its owner */
    int busy;      /* in stop or finish, which can let other threads run Python */
    pid_t pid;     /* the process that started it */
    int32_t start_tid; /* the thread that started the trace (the viewer's cell scope) */
    int32_t *alive_tids; /* the threads start() was told of (alive then), for the merge */
    unsigned char *service; /* per alive_tids entry: the host's own machinery (below) */
    size_t nalive;
    int park_started; /* the park probe records for this session */
    int tracer_started; /* a failed start stops the tracer it started (its hooks) */
    struct gt_sampler *sampler; /* sampling mode, while recording */
    PyInterpreterState *interp; /* ... the interpreter it samples */
    PyThreadState *sampler_ts;  /* ... its own thread state (made on its thread) */
    int sampled;
    struct gt_sampler_stats sampler_stats; /* after stop */
    char *spool, *children; /* copies of the options' (session.h) */
    /* A followed child's spooler (gt_session__spool): */
    int spooling;         /* it runs, the GIL let go, reading the session's blocks */
    int spool_stop;       /* stop asks it to end */
    uint32_t checkpoints; /* written so far (the next one's number) */
    struct ck_table *ck_table; /* the functions the last look with the GIL saw */
    struct ck_name *ck_names;  /* ... and the threads' names (the spooler's own) */
    size_t nck_names;
    /* ck_lock guards ck_table and the threads' function maps, which a look rewrites
     * (ck_refresh) and a checkpoint copies (ck_write). Lock order: the GIL, then ck_lock,
     * then the registry's lock. Its holder never takes the GIL nor runs Python (which may
     * let the GIL go): a thread holding the GIL and waiting for ck_lock (the main thread's
     * pending look) would wait for a holder that waits for the GIL. It is held for a
     * collect (C, the GC paused) or a copy, never for naming threads or writing a file
     * (ck_lock_take: asserted where assert() is checked, e.g. -DGT_ASSERTS=ON). */
    pthread_mutex_t ck_lock;
    int ck_lock_ok;
    int ck_pending;  /* 3.13+: a look waits for the main thread */
    uint64_t ck_gen; /* ... for this loop (its number) */
    struct gt_budget_pool *pool; /* the budget shared with the children (budget.h) */
};

/* session.c */

/* In a forked child, the parent's session is a copy (see its definition). */
int session_forked_copy(const struct gt_session *s);
/* A thread's GT_THREAD_ALIVE_AT_START, _SERVICE and _TOOL, as start() was told. */
unsigned session_alive_flags(const struct gt_session *s, int32_t tid);
/* The process's active session (started, not finished yet), or NULL. */
struct gt_session *session_active(void);
/* -1 with an exception set when gt_session__stop_active() released s, else 0. */
int session_refuse_released(const struct gt_session *s);
/* s lets go of the process: no longer active, its records released. Twice is harmless. */
void session_release_records(struct gt_session *s);

/* backend.c */

/* A session starts: prepare_hooks() calibrates at most once per start. */
void session_count_start(void);
/* Decides the GIL backend (s->used, s->backend_reason). Returns 0, or -1 with a Python
 * exception when an explicitly requested backend cannot run. */
int session_choose_backend(struct gt_session *s);
/* The OS-state probe, or why there is none (s->sched_status). Never fails the start. */
void session_start_sched(struct gt_session *s);
/* The recorders, in order. Returns 0, or -1 with a Python exception set (what started is
 * stopped by the caller). */
int session_start_recorders(struct gt_session *s, PyObject *threads);
/* Joins the sampler thread, if any (s->sampler_stats). */
void session_stop_sampler(struct gt_session *s);
/* Stops what this session started, nothing else. */
void session_stop_probes(struct gt_session *s);
/* The end of a session that held the bpf object: its linger armed (or detached). */
void session_release_probes(struct gt_session *s);
/* The process's bpf object (its session's between prepare and release), or NULL. */
struct gt_bpf *session_bpf(void);

/* checkpoint.c */

/* What the spooler leaves in its session: the last look's table, the names, ck_lock. */
void ck_release(struct gt_session *s);

#endif /* GT_SESSION_IMPL_H */

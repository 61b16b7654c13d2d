/* SPDX-License-Identifier: MIT */
/* A SIGTERM seen by the process, for a thread that takes no signals and must act on one
 * the main thread may never answer: a followed child's spooler (core/py/checkpoint.c).
 * The child's Python-level SIGTERM handler (_giltracer_boot) writes its trace, then dies of
 * the signal; CPython runs it only when the main thread next checks for signals, and one
 * that arrived between that check and a wait the signal does not interrupt (a pool
 * worker's get(), terminate()d) is never answered: the child hung, and the pool with it. */
#ifndef GT_TERMWATCH_H
#define GT_TERMWATCH_H

/* Chains a handler that notes the signal before the current one (CPython's, which flags
 * the Python handler); 0, -EINVAL if SIGTERM's disposition is the default or ignored (no
 * handler to keep: nothing to watch), or -errno. Again: no change. */
int gt_termwatch__install(void);

/* SIGTERM's disposition back to the default if it is this watcher's (none changed it
 * since): the session it watched for is over, the signal kills as it would untraced. */
int gt_termwatch__default(void);

/* Whether a SIGTERM came since install (async-signal-safe to read anywhere). */
int gt_termwatch__seen(void);

/* Dies of SIGTERM now, from any thread: its default disposition, unblocked on this thread,
 * raised. Returns only on failure (-errno). */
int gt_termwatch__die(void);

#endif

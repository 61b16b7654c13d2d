/* SPDX-License-Identifier: MIT */
/* Subinterpreters (3.12+, PEP 684): each may have its own GIL and has its own
 * sys.monitoring. A runtime-wide audit hook (the one piece of our code every
 * interpreter runs) notices a subinterpreter on its first audited action while a
 * session records, then gives its GIL to the hooks probe and the function tracer's
 * callbacks to its sys.monitoring. */
#ifndef GT_INTERPS_H
#define GT_INTERPS_H

#include <stddef.h>

#include "gilhook.h"

struct gt_interps_opts {
    int functions;                     /* attach the function tracer */
    const struct gt_gil_addrs *hooks;  /* the main GIL the hooks decode, or NULL */
    int bpf;                           /* the bpf probe records the GIL */
};

/**
 * gt_interps__start() - with the main interpreter's GIL, after the tracer started:
 * forget the last session's subinterpreters, give the hooks the GILs of those that
 * exist now, and watch for the others. Returns 0 (a refused audit hook only makes
 * the note say so).
 */
int gt_interps__start(const struct gt_interps_opts *o);

/** gt_interps__stop() - stop watching (before the tracer and the probes stop). */
void gt_interps__stop(void);

/** gt_interps__after_fork_child() - in a forked child: the lock may have been held by a
 * thread that is not there; watch nothing. */
void gt_interps__after_fork_child(void);

/** gt_interps__note() - after stop: appends sentences ("; " between) about what could
 * not be seen in subinterpreters to `buf` (a NUL-terminated string); 1 if any. */
int gt_interps__note(char *buf, size_t len);

#endif /* GT_INTERPS_H */

/* SPDX-License-Identifier: MIT */
/* Child processes followed (follow_children): the session's side (children.c). */
#ifndef GT_CHILDREN_H
#define GT_CHILDREN_H

#include <stddef.h>
#include <stdint.h>

#include "session.h"

/* A child: writes its merge input to `spool` (created private, never through a link,
 * complete or not at all: written beside it and renamed). Returns 0 or -errno. */
int gt_children__write_spool(const char *spool, const struct gt_trace_input *ti,
                             const struct gt_emit_meta *m);

/* A child, while it records: checkpoint number `seq` ("<spool>.<seq>"), flagged partial:
 * what its threads recorded since checkpoint seq - 1 (every thread, in registration
 * order, each with its function map so far). The parent joins the checkpoints of a
 * child that wrote no spool, and says it was cut short. */
int gt_children__write_checkpoint(const char *spool, uint32_t seq,
                                  const struct gt_trace_input *ti,
                                  const struct gt_emit_meta *m, uint32_t interval_ms);

/* The parent: reads the spools "<children><pid>.spool" ("folder/token-") into run->spools
 * (in start order; only regular files of this user, never through a link) and says in
 * `note` which children started but left none (killed, e.g. SIGKILL, or still running)
 * and, for those shown up to their last checkpoint, when that was (from t0, the trace's
 * start, ns) and how long before t1 (its stop). */
void gt_children__read_spools(const char *children, struct gt_run *run, uint64_t t0,
                              uint64_t t1, char *note, size_t nlen);

/* The parent: `ti` plus every spool's threads, their functions after the parent's. Sets
 * *all and *maps (free both after the merge); returns 0 or -errno. */
int gt_children__add(struct gt_run *run, struct gt_trace_input *ti, struct gt_emit_meta *m,
                     struct gt_thread_input **all, uint32_t **maps);

struct gt_budget_pool;

/* The session's budget pool "<prefix>budget" (record/budget.h): the parent (`children`,
 * the prefix "folder/token-") creates it, a child (`spool`, "<prefix><pid>.spool") maps
 * its parent's. Returns 0 and sets *out, or -errno (then each process keeps its own
 * budget). */
int gt_children__budget_pool(const char *children, const char *spool, uint64_t max_events,
                             struct gt_budget_pool **out);

#endif /* GT_CHILDREN_H */

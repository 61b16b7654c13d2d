/* SPDX-License-Identifier: MIT */
/* One event budget across processes (follow_children): the parent's session creates a
 * pool file in its private session folder holding what is left of each kind's budget
 * (enum gt_budget), and every followed child maps the same file, so the registry of each
 * process draws its grants from one set of counters (atomic, lock-free across
 * processes). A shared counter rather than a share handed to each child: the number of
 * children is not known when the first one starts, and a pool's workers do unequal work.
 * Plain C, no Python. */
#ifndef GT_BUDGET_H
#define GT_BUDGET_H

#include <stdint.h>

#include "registry.h"

/* What is left of each kind's budget, by enum gt_budget ([GT_BUDGET_NONE] unused). */
struct gt_budget_pool {
    uint64_t left[GT_BUDGET_END];
};

/* The parent: creates `path` (private, never through a link, not there before) holding
 * `max_events` of each kind, and maps it. Returns 0 and sets *out, or -errno. */
int gt_budget_pool__create(const char *path, uint64_t max_events, struct gt_budget_pool **out);

/* A child: maps the pool at `path` (only a regular file of this user, never through a
 * link). Returns 0 and sets *out, or -errno (-ENOENT: the parent made none). */
int gt_budget_pool__open(const char *path, struct gt_budget_pool **out);

/* Unmaps it (NULL accepted); the file stays, the session folder's owner removes it. */
void gt_budget_pool__close(struct gt_budget_pool *pool);

#endif /* GT_BUDGET_H */

/* SPDX-License-Identifier: MIT */
/* Merge: per-thread event streams -> spans, GIL intervals, OS states, summaries,
 * GIL blame (the types in model/gt_trace.h). Plain C (no Python, no libbpf),
 * unit-tested by tests/c/analyze/test_merge.c. */
#ifndef GT_MERGE_H
#define GT_MERGE_H

#include "gt_trace.h"

/**
 * gt_merge__run() - build the result of a session from its streams.
 * Returns 0 and sets *out (free with gt_result__free), or -errno (-ENOMEM, -EINVAL).
 */
int gt_merge__run(const struct gt_trace_input *in, struct gt_result **out);

/** gt_result__free() - free a result; accepts NULL. */
void gt_result__free(struct gt_result *r);

#endif /* GT_MERGE_H */

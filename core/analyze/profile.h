/* SPDX-License-Identifier: MIT */
/* Profile: a merged result -> call trees (per thread and merged over threads) whose
 * every node splits its time by GIL state, and per-function rows with the GIL wait each
 * function caused. Plain C (no Python), unit-tested by tests/c/analyze/test_profile.c. */
#ifndef GT_PROFILE_H
#define GT_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "merge.h"

#define GT_PNODE_NONE UINT32_MAX

/* Where one slice of a thread's time went. Every slice is in exactly one state, so the
 * states of a node add up to its time. */
enum gt_pstate {
    GT_PSTATE_RUNNING = 0,      /* GIL held and on CPU (or held, OS state not recorded) */
    GT_PSTATE_HELD_OFF_CPU = 1, /* GIL held while preempted or blocked: everyone is stuck */
    GT_PSTATE_WAITING = 2,      /* waiting for the GIL */
    GT_PSTATE_RELEASED = 3,     /* GIL released: sleep, I/O, C code that dropped it */
    GT_PSTATE_UNKNOWN = 4,      /* no GIL data for this slice (no GIL probe ran) */
    GT_NPSTATES = 5,
};

/* One node: a function within its parent's path. Node 0 of a tree is the root (the
 * thread's whole traced life, or all threads' for the merged tree); a parent's index is
 * always smaller than its children's. */
struct gt_pnode {
    /* The sweep's hot fields first: one cache line. */
    uint64_t self[GT_NPSTATES]; /* add up to self_ns */
    uint64_t calls;        /* calls that began while tracing (frames open at the start: 0) */
    uint32_t func;         /* global function id; GT_NO_FUNC for the root */
    uint32_t parent;       /* GT_PNODE_NONE for the root */
    uint32_t hint, hint_func; /* (building) the child looked up last, and its func */
    uint64_t total[GT_NPSTATES]; /* add up to total_ns */
    uint64_t total_ns, self_ns;
    uint32_t first_child;  /* children, GT_PNODE_NONE-terminated, newest first */
    uint32_t next_sibling;
    uint32_t depth;        /* 0 for the root */
    uint32_t recursive;    /* func is already on the path above this node */
};

struct gt_ptree {
    int32_t tid; /* 0 for the merged tree */
    struct gt_pnode *nodes;
    size_t nnodes; /* >= 1: the root always exists */
};

struct gt_profile {
    struct gt_ptree *threads; /* in the result's thread order */
    size_t nthreads;
    struct gt_ptree merged;
};

/* One function, merged over the call paths of a tree. A recursive function's total
 * counts each outermost call once. */
struct gt_pfunc {
    uint32_t func;
    uint64_t calls;
    uint64_t total_ns, self_ns;
    uint64_t total[GT_NPSTATES], self[GT_NPSTATES];
    uint64_t wait_caused_ns; /* other threads' GIL wait while this was the holder's
                                innermost Python function (from the blame rows) */
};

/**
 * gt_profile__build() - the call trees of a result: one sweep per thread over its spans
 * and its GIL and OS intervals; `flags`: enum gt_profile_flags. Returns 0 and sets *out (free with gt_profile__free),
 * or -errno (-EINVAL, -ENOMEM).
 */
int gt_profile__build(const struct gt_result *r, int flags, struct gt_profile **out);

enum gt_profile_flags {
    GT_PROFILE_THREADS_ONLY = 1, /* leave the merged tree empty (nnodes 0) */
    GT_PROFILE_OUTER_FRAMES = 2, /* keep the frames above the traced code (outer_depth) */
    GT_PROFILE_ALL_THREADS = 4,  /* merge background threads too */
};

/** gt_profile__free() - free a profile; accepts NULL. */
void gt_profile__free(struct gt_profile *p);

/**
 * gt_profile__thread() - the call tree of r->threads[i] alone, the same as
 * gt_profile__build's threads[i] with the same `flags` (for a caller that handles one
 * thread at a time).
 * Returns 0 and fills *out (free with gt_ptree__free), or -errno (-EINVAL, -ENOMEM).
 */
int gt_profile__thread(const struct gt_result *r, size_t i, int flags, struct gt_ptree *out);

/** gt_ptree__free() - free a tree's nodes and empty it; accepts NULL. */
void gt_ptree__free(struct gt_ptree *t);

/**
 * gt_profile__functions() - per-function rows of tree `t` (a thread's or the merged
 * one), ordered by function id; only functions with time, calls or caused wait appear.
 * `holder_tid` restricts "wait caused" to waits on that holder (0 = any holder; pass the
 * tree's tid for a thread tree). Returns 0 and sets *rows (free()) and *nrows, or -errno.
 */
int gt_profile__functions(const struct gt_result *r, const struct gt_ptree *t, int32_t holder_tid,
                          struct gt_pfunc **rows, size_t *nrows);

#endif /* GT_PROFILE_H */

/* SPDX-License-Identifier: MIT */
/* The stack sampler's clock: one thread that calls a `take` function every `interval_ns`
 * on an absolute schedule (a late tick is skipped, not made up), and measures how long
 * each take held what it holds (for the Python sampler: the GIL). What a take reads and
 * where it records it is the caller's (probes/calls/ walks the thread states). Plain C:
 * no Python. One sampler per session. */
#ifndef GT_SAMPLER_H
#define GT_SAMPLER_H

#include <stdint.h>

/* The caller's side, run on the sampler thread. `begin` once before the first tick and
 * `end` once after the last (either may be NULL); `take` per tick, returning 0 or -errno
 * (a failed take is counted, the sampler goes on) and setting *held_ns to how long it
 * held the lock it took (0 when it took none) and *waited_ns to how long it waited for it. */
struct gt_sampler_ops {
    int (*begin)(void *ctx);
    int (*take)(void *ctx, uint64_t *held_ns, uint64_t *waited_ns);
    void (*end)(void *ctx);
    void *ctx;
};

struct gt_sampler_stats {
    uint64_t interval_ns;
    uint64_t samples;   /* takes that succeeded */
    uint64_t failed;    /* takes that returned an error */
    uint64_t skipped;   /* ticks missed because a take ran past them */
    uint64_t held_ns;   /* sum of the takes' hold times */
    uint64_t max_held_ns;
    uint64_t waited_ns; /* sum of the takes' waits for the lock */
    int32_t tid;        /* the sampler thread's kernel tid (0 before it runs) */
};

struct gt_sampler;

/* Starts the sampler thread. Returns 0 or -errno (-EINVAL: interval 0; -EAGAIN: no
 * thread); on success *out owns the thread until gt_sampler__stop(). */
int gt_sampler__start(struct gt_sampler **out, uint64_t interval_ns,
                      const struct gt_sampler_ops *ops);

/* Asks the thread to stop and joins it (the caller must not hold what a take waits for).
 * Returns its stats in *st (may be NULL) and frees the sampler. Accepts NULL. */
void gt_sampler__stop(struct gt_sampler *s, struct gt_sampler_stats *st);

/* The sampler thread's kernel tid, once it runs (0 before). */
int32_t gt_sampler__tid(const struct gt_sampler *s);

#endif /* GT_SAMPLER_H */

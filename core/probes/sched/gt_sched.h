/* SPDX-License-Identifier: MIT */
/* Unprivileged OS scheduler states: one perf_event_open per thread (dummy software
 * event with context_switch records, CLOCK_MONOTONIC timestamps), drained by a
 * poller thread every few ms into each thread's sched stream. Plain C. */
#ifndef GT_SCHED_H
#define GT_SCHED_H

#include <stdint.h>

struct gt_thread;
struct gt_sched;

/**
 * gt_sched__new() - probe whether per-thread context-switch records are allowed
 * here (opens and closes one for the calling thread).
 * Returns 0 and sets *out, or -errno (-EACCES/-EPERM: perf_event_paranoid or
 * seccomp; -ENOSYS/-ENOENT: no perf events; -ENOMEM); *why explains (static text).
 */
int gt_sched__new(struct gt_sched **out, const char **why);

/**
 * gt_sched__watch() - have the context-switch event of t->tid opened and drained into
 * t->sched. Thread-safe; call once per thread (e.g. as the registry's new-thread
 * callback). The poller thread opens the event, in its own fd table: once the poller
 * runs, this waits for it (one round trip) and returns 0 or -errno (the thread then
 * simply has no OS states; the failure is counted, see gt_sched__stats). Before
 * gt_sched__start() it queues the thread and returns 0; the poller opens it first thing.
 */
int gt_sched__watch(struct gt_sched *s, struct gt_thread *t);

/** gt_sched__start() - start the poller thread; returns once it runs. 0 or -errno. */
int gt_sched__start(struct gt_sched *s);

/**
 * gt_sched__stop() - drain everything once more, stop the poller, close the events.
 * After it returns nothing writes to any sched stream. Returns 0 or -errno.
 *
 * In a process forked after gt_sched__new() the object is the parent's: watch and
 * start return -ECHILD, and stop/free only forget it: they free the copied memory but
 * never touch the rings, which are not mapped in the child, nor the events, which are
 * the parent's (in the poller's own fd table the child has none of their fds; where
 * the poller shares the process's table, the child's copies are closed).
 */
int gt_sched__stop(struct gt_sched *s);

struct gt_sched_stats {
    uint64_t threads_watched;
    uint64_t watch_failures;
    uint64_t records;
    uint64_t lost; /* PERF_RECORD_LOST totals + events refused by full streams */
    long long shortest_period_ns; /* the poller's shortest drain period (it shortens it
                                   * while rings fill up) */
    unsigned fullest;             /* the fullest ring a drain found, in 1/1024ths */
    uint64_t rings_grown;         /* rings replaced by a larger one (a thread switched
                                   * faster than its ring held between drains) */
    uint64_t largest_ring_kb;     /* data KiB of the largest ring mapped */
    uint64_t latest_drain_ns;     /* the poller's latest drain past its due time (busy
                                   * CPUs delay its wakeups; rings must hold that too) */
};
void gt_sched__stats(const struct gt_sched *s, struct gt_sched_stats *out);

/** gt_sched__free() - stop if needed and free; accepts NULL. */
void gt_sched__free(struct gt_sched *s);

#endif /* GT_SCHED_H */

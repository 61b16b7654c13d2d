/* SPDX-License-Identifier: MIT */
/* The lock-kind probe (free-threaded builds, root): uprobes on the interpreter's
 * _PyParkingLot_Park (the address a thread parks on and, for an object's per-object
 * mutex, its type name), stop_the_world / start_the_world (the stop-the-world window)
 * and gc_collect_main (which of those windows are the GC's). It adds to the park
 * probe (hooks: semaphore intervals and wakers) what the semaphores cannot say.
 * Attached once per process, gated per session; the ring buffer is read at stop.
 * Compiled as a stub reporting "unavailable" without GT_HAVE_BPF. */
#ifndef GT_LOCKPROBE_H
#define GT_LOCKPROBE_H

#include <stdint.h>

struct gt_lockprobe;

struct gt_lockprobe_opts {
    int32_t pid;           /* the traced process (getpid()) */
    const void *park_fn;   /* runtime address of _PyParkingLot_Park */
    const void *type_type; /* &PyType_Type: a named object's type's type */
};

/* One record, as read at stop (kinds and flags: lockprobe_abi.h's GTL_*). */
struct gt_lock_event {
    uint64_t ts; /* CLOCK_MONOTONIC ns */
    uint64_t addr;
    uint32_t tid;
    uint16_t kind;
    uint16_t flags;
    const char *tname; /* "" unless flags has GTL_F_OBJECT; valid during the callback */
};

/**
 * gt_lockprobe__open() - find the functions in the object holding park_fn, load and
 * attach. Returns 0 and sets *out, or -errno with *why (static text or a buffer valid
 * until the next call). The stop-the-world and GC probes are optional (static
 * functions: need .symtab): gt_lockprobe__where() says what is probed.
 */
int gt_lockprobe__open(struct gt_lockprobe **out, const struct gt_lockprobe_opts *o,
                       const char **why);

/** gt_lockprobe__where() - what is probed, in which file (static per handle). */
const char *gt_lockprobe__where(const struct gt_lockprobe *p);

/** gt_lockprobe__start() - drop stale records, open the gate. 0 or -errno. */
int gt_lockprobe__start(struct gt_lockprobe *p);

/**
 * gt_lockprobe__stop() - close the gate and hand every record since the start to
 * cb (which returns 0, or nonzero to stop reading). *lost (if not NULL): records that
 * did not fit into the ring buffer. Returns 0, the callback's nonzero, or -errno.
 */
int gt_lockprobe__stop(struct gt_lockprobe *p,
                       int (*cb)(void *ctx, const struct gt_lock_event *e), void *ctx,
                       uint64_t *lost);

/** gt_lockprobe__free() - detach and free; accepts NULL. */
void gt_lockprobe__free(struct gt_lockprobe *p);

#endif /* GT_LOCKPROBE_H */

/* SPDX-License-Identifier: MIT */
/* The "hooks" GIL probe: in-process interposition of the pthread calls that the
 * interpreter object (libpython.so, or the executable when libpython is static)
 * makes on the GIL's mutex and condition variables, by rewriting that object's GOT
 * entries. Needs no privileges. The same GOT slots carry the park probe: the
 * semaphore calls of the parking lot (free-threaded builds' lock contention), which
 * shares this patcher and the recording section, hence lives here, not in its own
 * probe folder. Plain C: the interpreter-specific parts (which
 * symbol to locate the object by, how to make the thread drop and retake the GIL
 * for calibration) are passed in by the caller.
 *
 * Decoding (per thread, into the calling thread's gt_thread GIL stream):
 *   pthread_mutex_lock(gil mutex) while not holding  -> GT_GIL_WANT
 *   pthread_cond_signal(gil switch_cond)             -> GT_GIL_ACQUIRED (take_gil, FORCE_SWITCHING;
 *        recorded at its unlock of the gil mutex, where pthread_mutex_unlock is hooked)
 *   pthread_cond_signal(gil cond)                    -> GT_GIL_RELEASED (drop_gil)
 *   pthread_cond_timedwait(gil cond) == ETIMEDOUT, the GIL still locked and no
 *        switch to another holder during the wait (take_gil's own rule, read from
 *        _gil_runtime_state when the calibrated layout is the known one)
 *                                                    -> GT_GIL_DROP_REQUEST
 *   pthread_cond_wait(gil switch_cond)               -> GT_GIL_WANT (after a forced drop,
 *        drop_gil waits for another thread to take the GIL, then retakes it at once)
 */
#ifndef GT_GILHOOK_H
#define GT_GILHOOK_H

#include <stdint.h>
#include <stddef.h>

struct gt_gil_addrs {
    const void *mutex;       /* gil->mutex */
    const void *cond;        /* gil->cond: signalled once per drop */
    const void *switch_cond; /* gil->switch_cond: signalled once per take */
    /* Where take_gil made its calls (return addresses seen by calibration): its lock
     * of the mutex and its signal of switch_cond. With no symbols these locate the
     * function (the bpf probe's uprobes); NULL when not calibrated. */
    const void *take_lock_site;
    const void *take_signal_site;
};

/**
 * gt_gilhook__install() - find the loaded object that defines `interp_symbol` (e.g.
 * &PyEval_SaveThread) and point its GOT entries for pthread_mutex_lock,
 * pthread_cond_signal and pthread_cond_timedwait at the hooks. Idempotent; the hooks
 * stay installed for the life of the process and forward every call (to the real
 * libc function, or to an interposer that was there before) at the cost of one
 * compare while not recording.
 * Returns 0, or -errno: -ENOENT (no such relocations: e.g. a static libc),
 * -EPERM/-EACCES (mprotect refused).
 * On failure *why (if not NULL) points to a static explanation.
 */
int gt_gilhook__install(const void *interp_symbol, const char **why);

/**
 * gt_gilhook__calibrate() - learn the GIL's addresses: with the hooks installed, call
 * `drop_and_retake(ctx)` (which must release and re-acquire the GIL on this thread,
 * e.g. Py_BEGIN_ALLOW_THREADS/Py_END_ALLOW_THREADS) and read off which mutex and
 * condition variables this thread passed. Repeats to confirm.
 * Returns 0 and fills *out, or -EPROTO when the calls do not match the expected
 * take/drop pattern (then *why explains), -ENOENT when not installed.
 */
int gt_gilhook__calibrate(void (*drop_and_retake)(void *ctx), void *ctx,
                          struct gt_gil_addrs *out, const char **why);

/** gt_gilhook__set_addrs() - the addresses of the main interpreter's GIL (id 0); forgets
 * every GIL added by gt_gilhook__add_gil(). */
void gt_gilhook__set_addrs(const struct gt_gil_addrs *a);

/**
 * gt_gilhook__add_gil() - also decode the GIL at `a` (a subinterpreter's own GIL,
 * 3.12+), its events tagged with `id` (the interpreter's id) in gt_gil_event.aux. A
 * GIL at an address already known is relabelled. Returns 0, or -ENOSPC when the
 * table is full (that GIL's events are then not seen).
 */
int gt_gilhook__add_gil(const struct gt_gil_addrs *a, uint32_t id);

/** gt_gilhook__ngils() - how many GILs the hooks decode (main's included). */
unsigned gt_gilhook__ngils(void);

/**
 * gt_gilhook__set_recording() - start/stop recording into the thread registry's GIL
 * streams. Stopping waits until no hook is inside its recording section (which
 * covers the registry lookup, i.e. new-thread registration with its callback), so
 * after it returns no GIL hook touches a registry record or anything the registry's
 * new-thread callback uses. The GIL hooks follow this flag only (not
 * gt_recording): call set_recording(0) before gt_registry__end().
 */
void gt_gilhook__set_recording(int on);

/**
 * gt_gilhook__set_park() - start/stop the park probe: the parking lot's semaphore
 * waits (sem_clockwait/sem_timedwait/sem_wait) of the hooked object become
 * GT_PARK_BEGIN/GT_PARK_END events (GT_PARK_WAIT_* for a wait for another thread, see
 * set_park_waits) in the calling thread's GIL stream, the END's aux
 * the tid whose sem_post on that semaphore woke it. Meant for free-threaded builds
 * (no GIL events then share the stream); independent of set_recording. Stopping
 * waits for hooks in flight, as set_recording(0) does.
 */
void gt_gilhook__set_park(int on);

/**
 * gt_gilhook__set_park_waits() - the types (up to 4, addresses only) of the objects
 * whose park is a wait for another thread (a free-threaded build's _thread.lock,
 * _thread.RLock, _queue.SimpleQueue: each parks on the word after its header): their
 * parks become GT_PARK_WAIT_BEGIN/GT_PARK_WAIT_END, released rather than parked.
 * n = 0: every park is contention. Call before set_park(1).
 */
void gt_gilhook__set_park_waits(const void *const *types, size_t n);

/** gt_gilhook__can_park() - installed, with sem_post and a semaphore wait hooked. */
int gt_gilhook__can_park(void);

/** gt_gilhook__object_path() - path of the patched object (the executable's resolved
 * path when libpython is linked in statically; "" before install). */
const char *gt_gilhook__object_path(void);

/** gt_gilhook__object_bias() - load bias of the patched object (0 before install). */
uintptr_t gt_gilhook__object_bias(void);

/* Diagnostics. (Event counts come from the streams: no shared counter is written on
 * the hot path.) */
struct gt_gilhook_stats {
    uint64_t slots_patched;
    int membarrier; /* the switch-off pays the stop protocol's barrier (membarrier), the
                       hooks a compiler barrier only; 0: both a fence */
    int take_at_unlock; /* a recording started now records takes at the GIL mutex's
                           unlock, not at the signal of switch_cond under it
                           (pthread_mutex_unlock hooked, GILTRACER_TAKE_RECORD not "signal") */
    int floor; /* a recording started now decodes but records nothing: the bench's floor
                  (GILTRACER_HOOKS_FLOOR=1) */
};
void gt_gilhook__stats(struct gt_gilhook_stats *out);

#endif /* GT_GILHOOK_H */

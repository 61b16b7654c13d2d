/* SPDX-License-Identifier: MIT */
/* The records the GIL probe's BPF half (gilprobe.bpf.c) hands to its loader
 * (bpfprobe.c) through the ring buffer. Shared by both halves, so: no includes,
 * kernel-style fixed-width types only (the includer provides __u32/__u64). */
#ifndef GT_GILPROBE_ABI_H
#define GT_GILPROBE_ABI_H

enum gtb_kind {
    GTB_GIL_WANT = 1,            /* take_gil entry */
    GTB_GIL_ACQUIRED = 2,        /* take_gil return */
    GTB_GIL_RELEASED = 3,        /* pthread_cond_signal(&gil->cond), i.e. drop_gil */
    GTB_SCHED_OUT_PREEMPTED = 4, /* switched out while runnable */
    GTB_SCHED_OUT_BLOCKED = 5,   /* switched out to sleep/wait */
    GTB_SCHED_IN = 6,            /* switched in */
    GTB_GIL_SWITCH_WAIT = 7,     /* pthread_cond_wait(&gil->switch_cond) entry: after a
                                    forced drop, drop_gil waits for another thread to
                                    take the GIL (decoded as a want, like the hooks) */
    GTB_GIL_SWITCH_DONE = 8,     /* that wait returned (same thread) */
};

/* One event: 24 bytes (32 in the ring with its 8-byte record header). */
struct gtb_event {
    __u64 ts;   /* bpf_ktime_get_ns(): CLOCK_MONOTONIC ns */
    __u32 tid;  /* kernel thread id (init pid namespace) */
    __u32 tgid; /* process id */
    __u16 kind; /* enum gtb_kind */
    __u16 cpu;  /* CPU the event was taken on */
    __u32 aux;  /* SCHED_OUT_*: raw prev_state; otherwise 0 */
};

/* Ring buffer size (bytes; a power of two multiple of the page size) and the fill
 * level past which a submit wakes the consumer early instead of waiting for its
 * timed poll. */
#define GTB_RINGBUF_BYTES (8u << 20)
#define GTB_WAKEUP_BYTES (GTB_RINGBUF_BYTES / 4)

/* Processes followed at most at once (follow_children). */
#define GTB_MAX_TGIDS 4096

/* Threads inside pthread_cond_wait(&gil->switch_cond) at most at once (one per
 * GIL can be there: the dropper of a forced switch; more with follow_children). */
#define GTB_MAX_SWITCH_WAITS 4096

#endif /* GT_GILPROBE_ABI_H */

/* SPDX-License-Identifier: MIT */
/* The "bpf" GIL probe: libbpf skeleton with uprobes on take_gil (entry = want,
 * return = acquired) and on libc pthread_cond_signal filtered to the GIL's cond
 * (= released), plus tp_btf/sched_switch for OS states with reasons. Loaded and
 * attached once per process, gated per session. Events land in the thread
 * registry's GIL and sched streams (drained by one thread: the single producer).
 * Plain C; compiled as a stub reporting "unavailable" without GT_HAVE_BPF. */
/* Like the hooks, it also decodes drop_gil's FORCE_SWITCHING wait: uprobe and
 * uretprobe on libc pthread_cond_wait filtered to the GIL's switch_cond (entry =
 * GT_GIL_WANT, return of that same call = GT_GIL_SWITCH_DONE). */
#ifndef GT_BPFPROBE_H
#define GT_BPFPROBE_H

#include <stdint.h>

struct gt_bpf;

struct gt_bpf_opts {
    int32_t pid;              /* the traced process (getpid()) */
    const char *interp_path;  /* object that contains take_gil (libpython.so or the executable) */
    uint64_t interp_bias;     /* load bias of that object in this process */
    const void *gil_cond;     /* &gil->cond, from gt_gilhook__calibrate() */
    const void *take_gil_hint;/* runtime address of take_gil if already known, else NULL */
    int follow_forks;         /* also trace descendant processes (forks; the session's
                               * follow_children with this probe) */
    int sched;                /* attach sched_switch */
    const void *gil_switch_cond; /* &gil->switch_cond, from gt_gilhook__calibrate();
                                    NULL: past gil_cond and the GIL's mutex (the
                                    layout of _gil_runtime_state, 3.9-3.13) */
    /* Return addresses of take_gil's mutex lock and switch_cond signal, seen by the
     * hooks' calibration (gt_gil_addrs): with no symbols and no debug file, the
     * function holding both (by the unwind table) is take_gil. NULL: unknown. */
    const void *take_lock_site;
    const void *take_signal_site;
};

/* The ways take_gil is found, in the order gt_bpf__open() tries them. */
enum gt_bpf_take_gil_how {
    GT_BPF_TG_SYMBOL,      /* .symtab of the object (take_gil, take_gil.lto_priv.N, ...) */
    GT_BPF_TG_DEBUG_FILE,  /* /usr/lib/debug/.build-id/xx/yyyy.debug (Debian's -dbg) */
    GT_BPF_TG_HINT,        /* opts.take_gil_hint */
    GT_BPF_TG_HEURISTIC,   /* the first call in PyEval_RestoreThread (3.9-3.12) */
    GT_BPF_TG_CALIBRATION, /* the function around the calibrated call sites */
    GT_BPF_TG_N
};
extern const char *const gt_bpf__take_gil_how_names[GT_BPF_TG_N];

/**
 * gt_bpf__find_take_gil() - try every way of finding take_gil in o->interp_path
 * (needs no privileges: ELF files only). addr[how] is the runtime address each way
 * finds, 0 where it does not apply; why[how] then says why (static text, or a
 * buffer valid until the next call). Returns 0, or -errno when the object cannot be
 * read.
 */
int gt_bpf__find_take_gil(const struct gt_bpf_opts *o, uint64_t addr[GT_BPF_TG_N],
                          const char *why[GT_BPF_TG_N]);

/**
 * gt_bpf__available() - can this process load BPF programs at all (built with bpf,
 * root or CAP_BPF+CAP_PERFMON)? Returns 0, or -errno with *why set (static text),
 * e.g. -EPERM "needs CAP_BPF and CAP_PERFMON", -ENOTSUP "built without libbpf".
 */
int gt_bpf__available(const char **why);

/**
 * gt_bpf__open() - load and attach (tens of ms). Returns 0 and sets *out, or -errno
 * with *why explaining (e.g. "take_gil not found in /usr/bin/python3.11").
 */
int gt_bpf__open(struct gt_bpf **out, const struct gt_bpf_opts *o, const char **why);

/** gt_bpf__start() - open the recording gate and start draining. 0 or -errno. */
int gt_bpf__start(struct gt_bpf *b);

/** gt_bpf__stop() - close the gate, drain what is left, stop draining. 0 or -errno. */
int gt_bpf__stop(struct gt_bpf *b);

/* In a process forked after gt_bpf__open() the handle is the parent's: start
 * returns -ECHILD, stop and free do nothing (they would close the parent's gate
 * and disable its probes). */

struct gt_bpf_stats {
    uint64_t events;
    uint64_t lost;        /* ring buffer full in the kernel */
    uint64_t take_gil_addr; /* where the take_gil uprobe sits (runtime address) */
    const char *take_gil_how; /* gt_bpf__take_gil_how_names[] */
    uint64_t switch_cond_addr;   /* the switch_cond the pthread_cond_wait probes filter on */
    int switch_wait_probed;      /* 1: pthread_cond_wait(switch_cond) is probed */
    const char *switch_wait_why; /* when not probed: why (static text), else NULL */
    int acquired_by_signal; /* 1: take_gil is probed at its first call (its entry would
                               be single-stepped) and "acquired" is its switch_cond
                               signal; 0: take_gil's return */
};
void gt_bpf__stats(const struct gt_bpf *b, struct gt_bpf_stats *out);

/**
 * gt_bpf__set_crosscheck() - while on (set before start), GIL events go to each
 * thread's gil_check stream and sched events are not kept, so the bpf probe can run
 * beside the hooks as an independent view of the same execution.
 */
void gt_bpf__set_crosscheck(struct gt_bpf *b, int on);
/* (The mode lasts one session: gt_bpf__stop() turns it off again.) */

/**
 * gt_bpf__ignore_tid() - drop the events of `tid` (0: none), a thread of the loader's
 * own machinery that can still be switching out as a session starts (the session's
 * linger thread, joined just before).
 */
void gt_bpf__ignore_tid(struct gt_bpf *b, int32_t tid);

/** gt_bpf__free() - detach and free; accepts NULL. */
void gt_bpf__free(struct gt_bpf *b);

#endif /* GT_BPFPROBE_H */

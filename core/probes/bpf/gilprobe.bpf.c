/* SPDX-License-Identifier: MIT OR GPL-2.0-only */
/* The GIL probe's BPF half: take_gil entry/return, pthread_cond_signal(&gil->cond)
 * and pthread_cond_wait(&gil->switch_cond) entry/return uprobes, tp_btf/sched_switch,
 * and the fork/exit/exec bookkeeping for follow_children, all feeding one ring
 * buffer of struct gtb_event. Loaded by bpfprobe.c; see gilprobe_abi.h for the
 * record format. */
#include "vmlinux_min.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "gilprobe_abi.h"

/* Set before load. */
const volatile __u32 targ_tgid = 0;     /* the traced process */
const volatile __u64 targ_gil_cond = 0; /* &gil->cond in the traced process */
const volatile __u64 targ_switch_cond = 0; /* &gil->switch_cond */
const volatile bool targ_follow_forks = false;
/* take_gil's entry is single-stepped (no push to emulate): it is probed at its first
 * call instead, without a return probe, and "acquired" is take_gil's signal of
 * switch_cond, as the hooks decode it. */
const volatile bool targ_acquired_by_signal = false;

/* Written by user space through the mmapped .bss, read on every hit. The programs
 * stay attached for the life of the process (detaching uprobes costs ~0.5 s) and
 * return at once while `recording` is off. */
bool recording = false;
__u32 ignore_tid = 0; /* the loader's drain thread: not a thread of interest */

#define GT_RINGBUF_BYTES GTB_RINGBUF_BYTES
#include "ringbuf.bpf.h"

/* Descendant processes of targ_tgid that are traced too (follow_children): added
 * on fork, removed on exec (a new image: its GIL lives elsewhere) and on exit. */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, GTB_MAX_TGIDS);
    __type(key, u32);
    __type(value, u8);
} tgids SEC(".maps");

/* Threads inside pthread_cond_wait(&gil->switch_cond): tid -> stack pointer at the
 * entry, so that the return probe (which no longer sees the arguments) reports the
 * end of exactly that wait. */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, GTB_MAX_SWITCH_WAITS);
    __type(key, u32);
    __type(value, u64);
} switch_waits SEC(".maps");

static __always_inline bool tgid_allowed(u32 tgid)
{
    if (tgid == targ_tgid)
        return true;
    if (!targ_follow_forks || tgid == 0)
        return false;
    return bpf_map_lookup_elem(&tgids, &tgid) != NULL;
}

static __always_inline void emit(u32 tid, u32 tgid, u32 kind, u32 aux)
{
    u64 ts = bpf_ktime_get_ns();
    struct gtb_event *e = gt_reserve_event(sizeof(*e));
    if (!e)
        return;
    e->ts = ts;
    e->tid = tid;
    e->tgid = tgid;
    e->kind = (u16)kind;
    e->cpu = (u16)bpf_get_smp_processor_id();
    e->aux = aux;
    /* Never wake the consumer per event: the wakeup is itself a context switch
     * of a thread in this process (the drain thread), and each one shows up in
     * sched_switch and perturbs the GIL hand-offs being measured. The consumer
     * polls on a timer; it is woken early only when the ring fills up. */
    u64 flags = BPF_RB_NO_WAKEUP;
    if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > GTB_WAKEUP_BYTES)
        flags = BPF_RB_FORCE_WAKEUP;
    bpf_ringbuf_submit(e, flags);
}

static __always_inline int gil_event(u32 kind)
{
    u64 id = bpf_get_current_pid_tgid();
    u32 tgid = id >> 32;

    if (!tgid_allowed(tgid))
        return 0;
    emit((u32)id, tgid, kind, 0);
    return 0;
}

SEC("uprobe")
int BPF_KPROBE(take_gil_enter)
{
    if (!recording)
        return 0;
    return gil_event(GTB_GIL_WANT);
}

/* take_gil may never return (thread exit during finalization): an unmatched
 * WANT is normal. */
SEC("uretprobe")
int BPF_KRETPROBE(take_gil_exit)
{
    if (!recording)
        return 0;
    return gil_event(GTB_GIL_ACQUIRED);
}

/* drop_gil is inlined into several callers in LTO builds, but each copy signals
 * gil->cond exactly once: the one reliable "released" mark. */
SEC("uprobe")
int BPF_KPROBE(cond_signal_enter, void *cond)
{
    if (!recording)
        return 0;
    if ((u64)cond == targ_gil_cond)
        return gil_event(GTB_GIL_RELEASED);
    if (targ_acquired_by_signal && (u64)cond == targ_switch_cond)
        return gil_event(GTB_GIL_ACQUIRED);
    return 0;
}

/* drop_gil after a forced switch (FORCE_SWITCHING, 3.9-3.13): with a drop request
 * pending and no other thread having taken the GIL yet, the dropper waits on
 * switch_cond until one has, then goes on to take_gil. The hooks decode this wait
 * as a want (the thread is stalled by the GIL protocol, not idle) and its end as
 * GT_GIL_SWITCH_DONE; so does this probe. Rare: only forced switches get here, so
 * the cost of both probes is the trap of every other pthread_cond_wait of the
 * traced process(es). */
SEC("uprobe")
int BPF_KPROBE(cond_wait_enter, void *cond)
{
    if (!recording || (u64)cond != targ_switch_cond)
        return 0;
    u64 id = bpf_get_current_pid_tgid();
    u32 tid = (u32)id, tgid = id >> 32;
    if (!tgid_allowed(tgid))
        return 0;
    u64 sp = PT_REGS_SP(ctx);
    bpf_map_update_elem(&switch_waits, &tid, &sp, BPF_ANY);
    emit(tid, tgid, GTB_GIL_SWITCH_WAIT, 0);
    return 0;
}

/* Every pthread_cond_wait of the process returns through here: one hash lookup
 * (a miss, except for the switch_cond wait). The entry is removed even when the
 * gate closed meanwhile, so no stale entry outlives a session. The return address
 * was on top of the stack at the entry, so the stack pointer is 8 above the
 * entry's now; anything else is another call (an entry whose return was never
 * seen). */
SEC("uretprobe")
int BPF_KRETPROBE(cond_wait_exit)
{
    u64 id = bpf_get_current_pid_tgid();
    u32 tid = (u32)id, tgid = id >> 32;
    u64 *entry_sp = bpf_map_lookup_elem(&switch_waits, &tid);
    if (!entry_sp)
        return 0;
    bool same_call = *entry_sp + 8 == PT_REGS_SP(ctx);
    bpf_map_delete_elem(&switch_waits, &tid);
    if (recording && same_call)
        emit(tid, tgid, GTB_GIL_SWITCH_DONE, 0);
    return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(sched_switch, bool preempt, struct task_struct *prev,
             struct task_struct *next, unsigned int prev_state)
{
    if (!recording)
        return 0;
    u32 tgid = prev->tgid;
    u32 tid = prev->pid;
    if (tid != ignore_tid && tgid_allowed(tgid)) {
        /* Only the low byte is the run state: 6.1+ adds TASK_FREEZABLE (0x2000)
         * to sleeping tasks. A preempted task may already have set a sleeping
         * state but is still runnable. */
        u32 kind = GTB_SCHED_OUT_BLOCKED;
        if (preempt || (prev_state & 0xff) == 0)
            kind = GTB_SCHED_OUT_PREEMPTED;
        emit(tid, tgid, kind, prev_state);
    }
    tgid = next->tgid;
    tid = next->pid;
    if (tid != ignore_tid && tgid_allowed(tgid))
        emit(tid, tgid, GTB_SCHED_IN, 0);
    return 0;
}

/* Also fires for new threads (same tgid): only new processes are of interest. */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(sched_process_fork, struct task_struct *parent, struct task_struct *child)
{
    u32 ptgid = parent->tgid;
    u32 ctgid = child->tgid;
    u8 one = 1;

    if (ptgid == ctgid || !tgid_allowed(ptgid))
        return 0;
    bpf_map_update_elem(&tgids, &ctgid, &one, BPF_ANY);
    return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(sched_process_exec, struct task_struct *p)
{
    u32 tgid = p->tgid;

    if (tgid != targ_tgid)
        bpf_map_delete_elem(&tgids, &tgid);
    return 0;
}

/* Fires per exiting thread, after signal->live was decremented: 0 means the
 * whole process is gone. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(sched_process_exit, struct task_struct *p)
{
    u32 tgid = p->tgid;

    if (tgid == targ_tgid || p->signal->live.counter != 0)
        return 0;
    bpf_map_delete_elem(&tgids, &tgid);
    return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* SPDX-License-Identifier: MIT OR GPL-2.0-only */
/* The lock-kind probe's BPF half (free-threaded builds): uprobes on
 * _PyParkingLot_Park (entry: the address parked on, and when it is an object's
 * ob_mutex, the object's type name, or whether it is a thread stopped by a
 * stop-the-world; return), stop_the_world entry and
 * start_the_world return (the stop-the-world window) and gc_collect_main entry and
 * return, feeding one ring buffer of struct gtl_event. Loaded by lockprobe.c. */
#include "vmlinux_min.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "lockprobe_abi.h"

/* Set before load: &PyType_Type in the traced process (a type's type must be it for
 * a type name to be read, so a PyMutex that is no object's is never named). */
const volatile __u64 targ_type_type = 0;

/* Written by user space through the mmapped .bss: programs return at once while off. */
bool recording = false;

#define GT_RINGBUF_BYTES GTL_RINGBUF_BYTES
#include "ringbuf.bpf.h"

static __always_inline struct gtl_event *reserve(u32 kind, u64 addr)
{
    struct gtl_event *e = gt_reserve_event(sizeof(*e));
    if (!e)
        return NULL;
    e->ts = bpf_ktime_get_ns();
    e->addr = addr;
    e->tid = (u32)bpf_get_current_pid_tgid();
    e->kind = (u16)kind;
    e->flags = 0;
    e->tname[0] = '\0';
    return e;
}

/* No wakeups: the loader reads the ring at stop (a wakeup is a context switch of a
 * traced thread's neighbour, and these events come in bursts). */
static __always_inline int simple(u32 kind, u64 addr)
{
    if (!recording)
        return 0;
    struct gtl_event *e = reserve(kind, addr);
    if (e)
        bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
    return 0;
}

SEC("uprobe")
int BPF_KPROBE(park_enter, const void *address, const void *expected, unsigned long size)
{
    if (!recording)
        return 0;
    u64 addr = (u64)address;
    struct gtl_event *e = reserve(GTL_PARK, addr);
    if (!e)
        return 0;
    /* A critical section locks &op->ob_mutex: op is addr - 10, its type at +24, and
     * that type's type must be `type` itself (metaclasses are not named). */
    if ((addr & 7) == (GTL_OB_MUTEX_OFF & 7) && targ_type_type) {
        u64 obj = addr - GTL_OB_MUTEX_OFF, tp = 0, meta = 0, name = 0;
        if (bpf_probe_read_user(&tp, sizeof(tp), (void *)(obj + GTL_OB_TYPE_OFF)) == 0 && tp &&
            bpf_probe_read_user(&meta, sizeof(meta), (void *)(tp + GTL_OB_TYPE_OFF)) == 0 &&
            meta == targ_type_type &&
            bpf_probe_read_user(&name, sizeof(name), (void *)(tp + GTL_TP_NAME_OFF)) == 0 &&
            name && bpf_probe_read_user_str(e->tname, sizeof(e->tname), (void *)name) > 1)
            e->flags = GTL_F_OBJECT;
        else
            e->tname[0] = '\0';
    }
    /* A stopped thread waits in tstate_wait_attach: _PyParkingLot_Park(&tstate->state,
     * &state, sizeof(int), ...) with state == _Py_THREAD_SUSPENDED. */
    int state = -1;
    if (size == sizeof(int) &&
        bpf_probe_read_user(&state, sizeof(state), expected) == 0 &&
        state == GTL_THREAD_SUSPENDED)
        e->flags |= GTL_F_SUSPENDED;
    bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
    return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(park_exit, long ret)
{
    return simple(GTL_PARK_RET, (u64)ret);
}

SEC("uprobe")
int BPF_KPROBE(stw_begin, const void *stw)
{
    return simple(GTL_STW_BEGIN, (u64)stw);
}

SEC("uretprobe")
int BPF_KRETPROBE(stw_end)
{
    return simple(GTL_STW_END, 0);
}

SEC("uprobe")
int BPF_KPROBE(gc_begin)
{
    return simple(GTL_GC_BEGIN, 0);
}

SEC("uretprobe")
int BPF_KRETPROBE(gc_end)
{
    return simple(GTL_GC_END, 0);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";

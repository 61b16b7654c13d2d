/* SPDX-License-Identifier: MIT OR GPL-2.0-only */
/* Shared by the probes' BPF halves (gilprobe.bpf.c, lockprobe.bpf.c): the ring buffer
 * `events` of GT_RINGBUF_BYTES (defined by the includer, from its ABI header) and `lost`,
 * the per-CPU count of events that did not fit, which the loader reads. */
#ifndef GT_RINGBUF_BPF_H
#define GT_RINGBUF_BPF_H

struct {
    __uint(type, BPF_MAP_TYPE_RINGBUF);
    __uint(max_entries, GT_RINGBUF_BYTES);
} events SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, u32);
    __type(value, u64);
} lost SEC(".maps");

/* Room for one event of `size` bytes in `events`, or NULL with the loss counted. */
static __always_inline void *gt_reserve_event(u64 size)
{
    void *e = bpf_ringbuf_reserve(&events, size, 0);
    if (!e) {
        u32 zero = 0;
        u64 *n = bpf_map_lookup_elem(&lost, &zero);
        if (n)
            __sync_fetch_and_add(n, 1);
    }
    return e;
}

#endif

/* SPDX-License-Identifier: MIT */
/* The bpf probe when built without libbpf/clang/bpftool: always unavailable. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "bpfprobe.h"

static const char *const not_built = "bpf: this build has no eBPF probe (built without libbpf, clang or bpftool)";

int gt_bpf__available(const char **why)
{
    if (why)
        *why = not_built;
    return -ENOTSUP;
}

int gt_bpf__open(struct gt_bpf **out, const struct gt_bpf_opts *o, const char **why)
{
    (void)o;
    *out = NULL;
    return gt_bpf__available(why);
}

const char *const gt_bpf__take_gil_how_names[GT_BPF_TG_N] = {
    "symbol", "debug file", "hint", "PyEval_RestoreThread heuristic", "calibration"};

int gt_bpf__find_take_gil(const struct gt_bpf_opts *o, uint64_t addr[GT_BPF_TG_N],
                          const char *why[GT_BPF_TG_N])
{
    (void)o;
    for (int h = 0; h < GT_BPF_TG_N; h++) {
        addr[h] = 0;
        why[h] = not_built;
    }
    return -ENOTSUP;
}

int gt_bpf__start(struct gt_bpf *b)
{
    (void)b;
    return -ENOTSUP;
}

int gt_bpf__stop(struct gt_bpf *b)
{
    (void)b;
    return -ENOTSUP;
}

void gt_bpf__stats(const struct gt_bpf *b, struct gt_bpf_stats *out)
{
    (void)b;
    *out = (struct gt_bpf_stats){0};
}

void gt_bpf__free(struct gt_bpf *b)
{
    (void)b;
}

void gt_bpf__ignore_tid(struct gt_bpf *b, int32_t tid)
{
    (void)b;
    (void)tid;
}

void gt_bpf__set_crosscheck(struct gt_bpf *b, int on)
{
    (void)b;
    (void)on;
}

/* The lock-kind probe (lockprobe.h): unavailable too. */
#include "lockprobe.h"

int gt_lockprobe__open(struct gt_lockprobe **out, const struct gt_lockprobe_opts *o,
                       const char **why)
{
    (void)o;
    *out = NULL;
    return gt_bpf__available(why);
}

const char *gt_lockprobe__where(const struct gt_lockprobe *p)
{
    (void)p;
    return "";
}

int gt_lockprobe__start(struct gt_lockprobe *p)
{
    (void)p;
    return -ENOTSUP;
}

int gt_lockprobe__stop(struct gt_lockprobe *p,
                       int (*cb)(void *ctx, const struct gt_lock_event *e), void *ctx,
                       uint64_t *lost)
{
    (void)p;
    (void)cb;
    (void)ctx;
    if (lost)
        *lost = 0;
    return -ENOTSUP;
}

void gt_lockprobe__free(struct gt_lockprobe *p)
{
    (void)p;
}

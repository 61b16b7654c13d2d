/* SPDX-License-Identifier: MIT */
/* The lock-kind probe's loader (see lockprobe.h): finds _PyParkingLot_Park,
 * stop_the_world, start_the_world and gc_collect_main in the object that holds the
 * first, loads lockprobe.bpf.c's skeleton and attaches to this process only. No drain
 * thread: the records (64 bytes) wait in a 16 MiB ring buffer until the stop, so no
 * wakeup perturbs the traced threads; past ~260k records they are counted as lost. */
#define _GNU_SOURCE
#include <errno.h>
#include <link.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bpfprobe.h"
#include "elfsym.h"
#include "inherit.h"
#include "lockprobe.h"
#include "why.h"
#include "lockprobe_abi.h"

#include "lockprobe.skel.h"

#define GT_LOCK_GC_SITES 6

/* gc_collect_main's names: the function and the clones GCC makes of it. */
static const char *const gc_names[GT_LOCK_GC_SITES] = {
    "gc_collect_main", "gc_collect_main.constprop.0", "gc_collect_main.constprop.1",
    "gc_collect_main.isra.0", "gc_collect_main.lto_priv.0", "gc_collect_main.part.0"};

struct gt_lockprobe {
    pid_t owner;
    struct gt_probe_fds *inherited; /* the probe's fds, closed in a forked child */
    struct lockprobe_bpf *skel;
    struct ring_buffer *rb;
    int ncpus;
    int discard; /* drop what is consumed (records of an earlier session) */
    uint64_t lost_base;
    int (*cb)(void *ctx, const struct gt_lock_event *e);
    void *ctx;
    int cb_rc;
    char where[PATH_MAX + 160];
    /* gc_collect_main and its compiler clones (e.g. .constprop.0, the automatic
     * collection's): entry and return links of each. */
    struct bpf_link *gc_links[2 * GT_LOCK_GC_SITES];
};

static char why_buf[PATH_MAX + 200];


static int quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
    (void)level;
    (void)fmt;
    (void)ap;
    return 0;
}

struct find_obj {
    uintptr_t addr;
    char path[PATH_MAX];
    uint64_t bias;
    int found;
};

static int find_obj_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    struct find_obj *f = data;
    (void)size;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type != PT_LOAD || f->addr < lo || f->addr >= lo + ph->p_memsz)
            continue;
        f->bias = info->dlpi_addr;
        if (info->dlpi_name && info->dlpi_name[0]) {
            snprintf(f->path, sizeof(f->path), "%s", info->dlpi_name);
        } else {
            ssize_t n = readlink("/proc/self/exe", f->path, sizeof(f->path) - 1);
            if (n <= 0)
                return 0;
            f->path[n] = '\0';
        }
        f->found = 1;
        return 1;
    }
    return 0;
}

/* The file offset of function `name` (in .symtab, else .dynsym; with `clones`, a
 * compiler clone when there is no exact name), or -ENOENT. */
static int func_off(const struct gtp_elf *e, const char *name, int clones, uint64_t *vaddr,
                    uint64_t *off)
{
    int exec = 0;
    if (gtp_elf__find_func(e, GTP_ELF_SYMTAB, name, clones, vaddr) != 0 &&
        gtp_elf__find_func(e, GTP_ELF_DYNSYM, name, 0, vaddr) != 0)
        return -ENOENT;
    if (gtp_elf__offset(e, *vaddr, off, &exec) != 0 || !exec)
        return -ENOENT;
    return 0;
}

static int attach(struct bpf_link **link, struct bpf_program *prog, int ret, int pid,
                  const char *path, uint64_t off, const char *what, const char **why)
{
    struct bpf_link *l = bpf_program__attach_uprobe(prog, ret, pid, path, (size_t)off);
    long err = libbpf_get_error(l);
    if (!l || err) {
        err = err ? err : -errno;
        *why = why_fmt("lock kinds: attaching the %s uprobe at %s+%#llx failed: %s", what,
                       path, (unsigned long long)off, strerror((int)-err));
        return (int)err;
    }
    *link = l;
    return 0;
}

static int on_record(void *ctx, void *data, size_t size)
{
    struct gt_lockprobe *p = ctx;
    struct gtl_event e;
    if (p->discard || size < sizeof(e) || p->cb_rc)
        return 0;
    memcpy(&e, data, sizeof(e));
    e.tname[sizeof(e.tname) - 1] = '\0';
    struct gt_lock_event out = {.ts = e.ts, .addr = e.addr, .tid = e.tid, .kind = e.kind,
                                .flags = e.flags, .tname = e.tname};
    p->cb_rc = p->cb(p->ctx, &out);
    return 0;
}

static uint64_t read_lost(const struct gt_lockprobe *p)
{
    uint64_t sum = 0, *vals;
    uint32_t key = 0;
    if (p->ncpus <= 0 || !(vals = calloc((size_t)p->ncpus, sizeof(*vals))))
        return 0;
    if (bpf_map_lookup_elem(bpf_map__fd(p->skel->maps.lost), &key, vals) == 0)
        for (int i = 0; i < p->ncpus; i++)
            sum += vals[i];
    free(vals);
    return sum;
}

/* Where the probes go in the object that holds _PyParkingLot_Park (file offsets). */
struct lock_sites {
    struct find_obj obj;
    uint64_t park_off, stw_off, sta_off, gc_off[GT_LOCK_GC_SITES];
    int stw; /* stop_the_world and start_the_world found (static: .symtab only) */
    int gc;  /* gc_collect_main sites found */
};

/* Finds the sites in the object holding o->park_fn; -ENOENT (with *why) if there is
 * no _PyParkingLot_Park to probe. The static functions are optional. */
static int find_sites(const struct gt_lockprobe_opts *o, struct lock_sites *ls,
                      const char **why)
{
    struct gtp_elf *e = NULL;
    uint64_t park_v = 0, stw_v = 0, sta_v = 0, gc_v = 0;
    int err;
    ls->obj.addr = (uintptr_t)o->park_fn;
    dl_iterate_phdr(find_obj_cb, &ls->obj);
    if (!ls->obj.found) {
        *why = "lock kinds: no loaded object holds _PyParkingLot_Park";
        return -ENOENT;
    }
    const char *path = ls->obj.path;
    if ((err = gtp_elf__open(&e, path))) {
        *why = why_fmt("lock kinds: cannot read %s: %s", path, strerror(-err));
        return err;
    }
    if (func_off(e, "_PyParkingLot_Park", 1, &park_v, &ls->park_off) != 0 ||
        park_v + ls->obj.bias != (uint64_t)(uintptr_t)o->park_fn) {
        *why = why_fmt("lock kinds: _PyParkingLot_Park not found in %s's symbols", path);
        gtp_elf__free(e);
        return -ENOENT;
    }
    /* Static functions (.symtab only): optional; both ends or neither. */
    ls->stw = func_off(e, "stop_the_world", 1, &stw_v, &ls->stw_off) == 0 &&
              func_off(e, "start_the_world", 1, &sta_v, &ls->sta_off) == 0;
    for (int i = 0; ls->stw && i < GT_LOCK_GC_SITES; i++)
        if (func_off(e, gc_names[i], 0, &gc_v, &ls->gc_off[i]) == 0)
            ls->gc++;
    gtp_elf__free(e);
    return 0;
}

/* The uprobes on every site found: park entry and return, stop/start the world, each
 * gc_collect_main's entry and return. */
static int attach_sites(struct gt_lockprobe *p, int pid, const struct lock_sites *ls,
                        const char **why)
{
    struct lockprobe_bpf *sk = p->skel;
    const char *path = ls->obj.path;
    int err;
    if ((err = attach(&sk->links.park_enter, sk->progs.park_enter, 0, pid, path,
                      ls->park_off, "_PyParkingLot_Park", why)) ||
        (err = attach(&sk->links.park_exit, sk->progs.park_exit, 1, pid, path,
                      ls->park_off, "_PyParkingLot_Park return", why)))
        return err;
    if (ls->stw && ((err = attach(&sk->links.stw_begin, sk->progs.stw_begin, 0, pid, path,
                                  ls->stw_off, "stop_the_world", why)) ||
                    (err = attach(&sk->links.stw_end, sk->progs.stw_end, 1, pid, path,
                                  ls->sta_off, "start_the_world return", why))))
        return err;
    for (int i = 0; i < GT_LOCK_GC_SITES; i++)
        if (ls->gc_off[i] &&
            ((err = attach(&p->gc_links[2 * i], sk->progs.gc_begin, 0, pid, path,
                           ls->gc_off[i], gc_names[i], why)) ||
             (err = attach(&p->gc_links[2 * i + 1], sk->progs.gc_end, 1, pid, path,
                           ls->gc_off[i], "gc_collect_main return", why))))
            return err;
    return 0;
}

int gt_lockprobe__open(struct gt_lockprobe **out, const struct gt_lockprobe_opts *o,
                       const char **why)
{
    struct lock_sites ls = {0};
    struct gt_lockprobe *p = NULL;
    const char *dummy;
    int err;

    if (!why)
        why = &dummy;
    *out = NULL;
    *why = NULL;
    if ((err = gt_bpf__available(why)))
        return err;
    if (!o || o->pid <= 0 || !o->park_fn) {
        *why = "lock kinds: _PyParkingLot_Park not found in this process";
        return -ENOENT;
    }
    if ((err = find_sites(o, &ls, why)))
        return err;

    libbpf_set_print(quiet);
    p = calloc(1, sizeof(*p));
    if (!p) {
        err = -ENOMEM;
        *why = "lock kinds: out of memory";
        goto cleanup;
    }
    p->owner = getpid();
    (void)gt_probe_fds__before(&p->inherited); /* best effort, as the GIL probe's */
    p->skel = lockprobe_bpf__open();
    if (!p->skel) {
        err = errno ? -errno : -ENOMEM;
        *why = "lock kinds: opening the BPF object failed";
        goto cleanup;
    }
    struct lockprobe_bpf *sk = p->skel;
    sk->rodata->targ_type_type = (uint64_t)(uintptr_t)o->type_type;
    if (!ls.stw) {
        bpf_program__set_autoload(sk->progs.stw_begin, false);
        bpf_program__set_autoload(sk->progs.stw_end, false);
    }
    if (!ls.gc) {
        bpf_program__set_autoload(sk->progs.gc_begin, false);
        bpf_program__set_autoload(sk->progs.gc_end, false);
    }
    if ((err = lockprobe_bpf__load(sk))) {
        *why = why_fmt("lock kinds: loading the BPF programs failed: %s", strerror(-err));
        goto cleanup;
    }
    if ((err = attach_sites(p, o->pid, &ls, why)))
        goto cleanup;
    p->rb = ring_buffer__new(bpf_map__fd(sk->maps.events), on_record, p, NULL);
    p->ncpus = libbpf_num_possible_cpus();
    if (!p->rb || p->ncpus <= 0) {
        err = -ENOMEM;
        *why = "lock kinds: creating the ring buffer reader failed";
        goto cleanup;
    }
    int own[] = {ring_buffer__epoll_fd(p->rb)};
    (void)gt_probe_fds__after(p->inherited, own, 1);
    const char *on = !ls.stw ? "_PyParkingLot_Park"
                     : ls.gc ? "_PyParkingLot_Park, stop_the_world, start_the_world, "
                               "gc_collect_main"
                             : "_PyParkingLot_Park, stop_the_world, start_the_world";
    snprintf(p->where, sizeof(p->where), "eBPF uprobes on %s in %s%s", on, ls.obj.path,
             ls.stw ? "" : " (no stop_the_world symbol: stop-the-world not told apart)");
    *out = p;
    p = NULL;
    err = 0;
cleanup:
    gt_lockprobe__free(p);
    return err;
}

const char *gt_lockprobe__where(const struct gt_lockprobe *p)
{
    return p ? p->where : "";
}

int gt_lockprobe__start(struct gt_lockprobe *p)
{
    if (!p || p->owner != getpid())
        return -ECHILD;
    p->discard = 1;
    ring_buffer__consume(p->rb);
    p->discard = 0;
    p->lost_base = read_lost(p);
    __atomic_store_n(&p->skel->bss->recording, true, __ATOMIC_SEQ_CST);
    return 0;
}

int gt_lockprobe__stop(struct gt_lockprobe *p,
                       int (*cb)(void *ctx, const struct gt_lock_event *e), void *ctx,
                       uint64_t *lost)
{
    if (!p || p->owner != getpid())
        return -ECHILD;
    __atomic_store_n(&p->skel->bss->recording, false, __ATOMIC_SEQ_CST);
    p->cb = cb;
    p->ctx = ctx;
    p->cb_rc = 0;
    int n = ring_buffer__consume(p->rb);
    if (lost)
        *lost = read_lost(p) - p->lost_base;
    if (n < 0)
        return n;
    return p->cb_rc;
}

void gt_lockprobe__free(struct gt_lockprobe *p)
{
    if (!p)
        return;
    if (p->owner == getpid()) {
        gt_probe_fds__free(p->inherited);
        for (int i = 0; i < 2 * GT_LOCK_GC_SITES; i++)
            bpf_link__destroy(p->gc_links[i]);
        ring_buffer__free(p->rb);
        lockprobe_bpf__destroy(p->skel);
    }
    free(p);
}

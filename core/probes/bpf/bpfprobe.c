/* SPDX-License-Identifier: MIT */
/* The "bpf" GIL probe's loader (see bpfprobe.h): places the uprobes (resolving
 * take_gil and libc's pthread_cond_signal and pthread_cond_wait itself), loads and
 * attaches the gilprobe.bpf.c skeleton once, and per session opens the recording
 * gate and drains the ring buffer into the thread registry from one thread.
 *
 * Decoding is the hooks' (gilhook.h), event for event where both see the same call:
 *   take_gil entry                              -> GT_GIL_WANT
 *   take_gil return                             -> GT_GIL_ACQUIRED
 *   pthread_cond_signal(gil cond)               -> GT_GIL_RELEASED (drop_gil)
 * Where take_gil's entry would be single-stepped (no push to emulate: 3.14), the
 * want probe sits at its first call and, with no return probe,
 *   pthread_cond_signal(gil switch_cond)        -> GT_GIL_ACQUIRED (as the hooks).
 *   pthread_cond_wait(gil switch_cond) entry    -> GT_GIL_WANT (FORCE_SWITCHING: after
 *        a forced drop, drop_gil waits until another thread has taken the GIL)
 *   return of that same pthread_cond_wait call  -> GT_GIL_SWITCH_DONE
 * (the hooks' GT_GIL_DROP_REQUEST, a timed-out pthread_cond_timedwait, is not
 * probed). The pthread_cond_wait pair is optional: when its first instruction is
 * not one the kernel emulates (a push, possibly after endbr64) it is not probed,
 * rather than single-stepping every pthread_cond_wait of the process out of line
 * (~10x the cost per hit); a uretprobe must sit at the entry, so a later push
 * is no option. gt_bpf__stats() says which.
 *
 * follow_children covers processes forked by the traced process (and their
 * forks): they share its address space layout, so the same GIL cond address and
 * uprobe offsets apply (e.g. multiprocessing's default "fork" context on Linux).
 * Children that exec (subprocess, the "spawn" and "forkserver" contexts) are
 * dropped at exec: their GIL lives at a different address. Processes forked
 * before gt_bpf__open() are not followed. With follow_children the uprobes are
 * attached system-wide (pid -1) and filtered in BPF, so every process that runs
 * this interpreter or libc's pthread_cond_signal pays the uprobe trap (~1 us),
 * and every pthread_cond_wait call two (entry and return), while the probe is
 * open.
 *
 * Stream timestamps are bpf_ktime_get_ns(): CLOCK_MONOTONIC ns already (not
 * gt_ticks() values). Thread records of other processes get t->pid = their pid. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <linux/capability.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bpfprobe.h"
#include "why.h"
#include "gt_clock.h"
#include "elfsym.h"
#include "gilprobe_abi.h"
#include "inherit.h"
#include "registry.h"
#include "x86_insn.h"

#include "gilprobe.skel.h"

#define CAP_BIT_SYS_ADMIN 21
#define CAP_BIT_PERFMON 38
#define CAP_BIT_BPF 39
#define PROC_PID_INIT_INO 0xEFFFFFFCu
#define POLL_MS 10

struct tid_slot {
    int32_t tid; /* 0 = empty */
    struct gt_thread *t;
};

struct gt_bpf {
    pid_t owner; /* the process that opened it (see forked() below) */
    struct gilprobe_bpf *skel;
    struct ring_buffer *rb;
    int epfd, evfd;
    int ncpus;
    int detach_fd; /* write end of the detach helper's pipe, or -1 */
    struct gt_probe_fds *inherited; /* all of the above, closed in a forked child */
    /* session */
    pthread_t drain;
    int running;
    atomic_int stop_req;
    sem_t ready;
    int discard;            /* drop what is consumed (stale records before a start) */
    uint64_t t_start;       /* records older than this belong to an earlier session */
    struct tid_slot *slots; /* tid -> record of the current generation */
    size_t nslots, nused;
    uint64_t events, unregistered, lost_base;
    /* where the probes sit */
    uint64_t take_gil_addr;
    const char *take_gil_how;
    uint64_t switch_cond_addr;
    int switch_wait_probed;
    const char *switch_wait_why;
    int acquired_by_signal; /* take_gil probed past its entry: see gilprobe.bpf.c */
    int crosscheck; /* GIL events go to t->gil_check, sched events are not kept */
    /* The drain thread is no thread of interest (the BPF side skips ignore_tid).
     * The previous session's one is joined, but its last switch-out (in its exit)
     * can come after the next start: skipped here. */
    uint32_t drain_tid, prev_drain_tid;
    uint32_t own_tid; /* gt_bpf__ignore_tid()'s */
};

/* The last joined drain thread, whichever object ran it: each session loads its own. */
static _Atomic uint32_t last_drain_tid;

/* ---- diagnostics ------------------------------------------------------------- */

/* Opens are one at a time (the session lock): a static buffer for composed messages is enough. */
static char why_buf[512];
static char libbpf_last[256]; /* first libbpf warning, appended to load errors */


/* libbpf must never print: keep its first warning since gt_bpf__open() started
 * (the cause; later ones only report the failure upwards) for error messages. */
static int libbpf_sink(enum libbpf_print_level level, const char *fmt, va_list ap)
{
    if (level == LIBBPF_WARN && libbpf_last[0] == '\0') {
        vsnprintf(libbpf_last, sizeof(libbpf_last), fmt, ap);
        size_t n = strlen(libbpf_last);
        while (n && (libbpf_last[n - 1] == '\n' || libbpf_last[n - 1] == ' '))
            libbpf_last[--n] = '\0';
    }
    return 0;
}

/* ---- privileges ------------------------------------------------------------------ */

static int cap_effective(int bit, const uint32_t eff[2])
{
    return (eff[bit / 32] >> (bit % 32)) & 1;
}

int gt_bpf__available(const char **why)
{
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3,
                                           .pid = 0};
    struct __user_cap_data_struct data[2];
    struct stat st;
    const char *msg = NULL;
    int err = 0;

    memset(data, 0, sizeof(data));
    if (syscall(SYS_capget, &hdr, data) != 0) {
        err = -errno;
        msg = "bpf: cannot read this process's capabilities (capget)";
        goto cleanup;
    }
    uint32_t eff[2] = {data[0].effective, data[1].effective};
    if (!cap_effective(CAP_BIT_SYS_ADMIN, eff) &&
        !(cap_effective(CAP_BIT_BPF, eff) && cap_effective(CAP_BIT_PERFMON, eff))) {
        err = -EPERM;
        msg = "bpf: permission denied (needs root; or CAP_BPF and CAP_PERFMON, plus "
              "CAP_SYS_ADMIN on kernels that require it for uprobes)";
        goto cleanup;
    }
    if (access("/sys/kernel/btf/vmlinux", R_OK) != 0) {
        err = -ENOTSUP;
        msg = "bpf: the kernel has no BTF (/sys/kernel/btf/vmlinux; needs "
              "CONFIG_DEBUG_INFO_BTF)";
        goto cleanup;
    }
    /* BPF sees thread ids of the initial pid namespace; in a container they would
     * not match the ids the rest of the tracer uses. */
    if (stat("/proc/self/ns/pid", &st) == 0 && (uint64_t)st.st_ino != PROC_PID_INIT_INO) {
        err = -ENOTSUP;
        msg = "bpf: the process runs in a PID namespace (container): thread ids would "
              "not match";
        goto cleanup;
    }
cleanup:
    if (why)
        *why = err ? msg : NULL;
    return err;
}

/* ---- placing the uprobes ------------------------------------------------------- */

struct site {
    char path[PATH_MAX];
    uint64_t vaddr; /* link-time address of the probed instruction */
    uint64_t off;   /* its file offset (what the kernel wants) */
};

/* Whether the running code at `addr` matches the file's bytes: proves the
 * path/bias pairing. Bytes that read as int3 in memory are skipped (another
 * tool's uprobes). Reads through process_vm_readv so that a bad address fails
 * instead of faulting. */
static int code_matches(uint64_t addr, const uint8_t *file, size_t n)
{
    uint8_t mem[32];
    struct iovec local = {mem, n}, remote = {(void *)(uintptr_t)addr, n};
    size_t same = 0;

    if (n > sizeof(mem))
        return 0;
    if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != (ssize_t)n)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (mem[i] == file[i])
            same++;
        else if (mem[i] != 0xcc)
            return 0;
    }
    return same >= n - 2;
}

/* take_gil in the debug file that /usr/lib/debug/.build-id/ has for `e`. */
static int find_in_debug_file(const struct gtp_elf *e, uint64_t *vaddr)
{
    uint8_t id[64];
    char path[sizeof("/usr/lib/debug/.build-id/") + 2 * sizeof(id) + 8];
    struct gtp_elf *d = NULL;
    int n = gtp_elf__build_id(e, id, sizeof(id));
    int err;

    if (n < 2 || n > (int)sizeof(id))
        return -ENOENT;
    char *p = path + sprintf(path, "/usr/lib/debug/.build-id/%02x/", id[0]);
    for (int i = 1; i < n; i++)
        p += sprintf(p, "%02x", id[i]);
    strcpy(p, ".debug");
    err = gtp_elf__open(&d, path);
    if (err)
        return err;
    err = gtp_elf__find_func(d, GTP_ELF_SYMTAB, "take_gil", 1, vaddr);
    gtp_elf__free(d);
    return err;
}

/* 3.9-3.12: PyEval_RestoreThread(tstate) { if (!tstate) fatal; take_gil(tstate);
 * ... }: its first call is take_gil, a static function that LTO keeps out of line
 * (Debian's stripped python3.11). A PLT stub or an exported function there means
 * another layout (3.13+: _PyThreadState_Attach): refuse. */
static int take_gil_heuristic(const struct gtp_elf *e, uint64_t *vaddr)
{
    uint8_t code[64], head[16];
    uint64_t rt, va;

    if (gtp_elf__find_func(e, GTP_ELF_DYNSYM, "PyEval_RestoreThread", 0, &rt) != 0 ||
        gtp_elf__read(e, rt, code, sizeof(code)) != 0 ||
        gtp_x86__first_call(code, sizeof(code), rt, &va) != 0 ||
        gtp_elf__read(e, va, head, sizeof(head)) != 0 ||
        gtp_x86__probe_skip(head, sizeof(head)) < 0 || gtp_elf__exports_at(e, va))
        return -ENOENT;
    *vaddr = va;
    return 0;
}

/* Stripped LTO builds of 3.13+ (Debian's python3.14 without -dbg): calibration saw
 * where the GIL was taken, i.e. the return addresses of take_gil's
 * pthread_mutex_lock(gil mutex) and pthread_cond_signal(gil switch_cond). The
 * unwind table names the function around each (return address - 1: the call
 * itself); both must be the same function (an unwind entry starts at an
 * instruction boundary), not exported (else take_gil was inlined into a caller
 * whose entry and return would not be the take's). */
static char calib_why[256];
static int take_gil_by_calibration(const struct gtp_elf *e, const struct gt_bpf_opts *o,
                                   uint64_t *vaddr, const char **why)
{
    uint64_t s1, s2, a0, a1, b0, b1;
    int err;

    if (!o->take_lock_site || !o->take_signal_site) {
        *why = "no calibrated call sites";
        return -ENOENT;
    }
    s1 = (uint64_t)(uintptr_t)o->take_lock_site - o->interp_bias - 1;
    s2 = (uint64_t)(uintptr_t)o->take_signal_site - o->interp_bias - 1;
    if ((err = gtp_elf__func_bounds(e, s1, &a0, &a1)) != 0 ||
        (err = gtp_elf__func_bounds(e, s2, &b0, &b1)) != 0) {
        snprintf(calib_why, sizeof(calib_why),
                 "the unwind table does not cover the calibrated call sites %#llx, %#llx (%s)",
                 (unsigned long long)s1 + 1, (unsigned long long)s2 + 1, strerror(-err));
        *why = calib_why;
        return -ENOENT;
    }
    if (a0 != b0) {
        snprintf(calib_why, sizeof(calib_why),
                 "the take's mutex lock (in the function at %#llx) and its switch_cond "
                 "signal (at %#llx) are in different functions",
                 (unsigned long long)a0, (unsigned long long)b0);
        *why = calib_why;
        return -ENOENT;
    }
    if (gtp_elf__exports_at(e, a0)) {
        snprintf(calib_why, sizeof(calib_why),
                 "the GIL is taken in an exported function (at %#llx): take_gil is "
                 "inlined there", (unsigned long long)a0);
        *why = calib_why;
        return -ENOENT;
    }
    *vaddr = a0;
    return 0;
}

const char *const gt_bpf__take_gil_how_names[GT_BPF_TG_N] = {
    [GT_BPF_TG_SYMBOL] = "symbol",
    [GT_BPF_TG_DEBUG_FILE] = "debug file",
    [GT_BPF_TG_HINT] = "hint",
    [GT_BPF_TG_HEURISTIC] = "PyEval_RestoreThread heuristic",
    [GT_BPF_TG_CALIBRATION] = "calibration",
};

/* take_gil's link-time address by one way. */
static int take_gil_by(const struct gtp_elf *e, const struct gt_bpf_opts *o,
                       enum gt_bpf_take_gil_how how, uint64_t *va, const char **why)
{
    switch (how) {
    case GT_BPF_TG_SYMBOL:
        *why = "no take_gil in the object's .symtab (stripped)";
        return gtp_elf__find_func(e, GTP_ELF_SYMTAB, "take_gil", 1, va);
    case GT_BPF_TG_DEBUG_FILE:
        *why = "no debug file with take_gil under /usr/lib/debug/.build-id/ (e.g. "
               "Debian's python3.X-dbg)";
        return find_in_debug_file(e, va);
    case GT_BPF_TG_HINT:
        *why = "no hint";
        if (!o->take_gil_hint)
            return -ENOENT;
        *va = (uint64_t)(uintptr_t)o->take_gil_hint - o->interp_bias;
        return 0;
    case GT_BPF_TG_HEURISTIC:
        *why = "PyEval_RestoreThread's first call is no private function (3.13+)";
        return take_gil_heuristic(e, va);
    case GT_BPF_TG_CALIBRATION:
        return take_gil_by_calibration(e, o, va, why);
    default:
        return -EINVAL;
    }
}

static int object_path(const struct gt_bpf_opts *o, char *path, size_t size,
                       const char **why)
{
    if (o->interp_path && o->interp_path[0]) {
        if (strlen(o->interp_path) >= size) {
            *why = "bpf: interpreter path too long";
            return -ENAMETOOLONG;
        }
        strcpy(path, o->interp_path);
        return 0;
    }
    ssize_t n = readlink("/proc/self/exe", path, size - 1);
    if (n <= 0) {
        *why = "bpf: cannot read /proc/self/exe";
        return -errno;
    }
    path[n] = '\0';
    return 0;
}

int gt_bpf__find_take_gil(const struct gt_bpf_opts *o, uint64_t addr[GT_BPF_TG_N],
                          const char *why[GT_BPF_TG_N])
{
    char path[PATH_MAX];
    const char *err_why = NULL;
    struct gtp_elf *e = NULL;
    int err = object_path(o, path, sizeof(path), &err_why);

    for (int h = 0; h < GT_BPF_TG_N; h++) {
        addr[h] = 0;
        why[h] = err_why;
    }
    if (err)
        return err;
    err = gtp_elf__open(&e, path);
    if (err)
        return err;
    for (int h = 0; h < GT_BPF_TG_N; h++) {
        uint64_t va;
        if (take_gil_by(e, o, (enum gt_bpf_take_gil_how)h, &va, &why[h]) == 0) {
            addr[h] = va + o->interp_bias;
            why[h] = NULL;
        }
    }
    gtp_elf__free(e);
    return 0;
}

/* Where in take_gil (at va, its first bytes code) the uprobe goes: s->vaddr and s->off.
 * Probes the push after an endbr64: emulated, not single-stepped. With no push
 * (3.14's take_gil: endbr64; sub $0x88,%rsp), probes the first call instead, which the
 * kernel emulates too, and takes "acquired" from switch_cond's signal (a return probe
 * must sit at the entry). */
static void probe_point(struct gtp_elf *e, uint64_t va, const uint8_t *code, size_t n,
                        struct site *s, int *acquired_by_signal)
{
    int skip = gtp_x86__probe_skip(code, n);
    if (skip > 0) {
        va += (uint64_t)skip;
        s->off += (uint64_t)skip;
    } else if (skip < 0) {
        uint8_t head[64];
        size_t at;
        if (gtp_elf__read(e, va, head, sizeof(head)) == 0 &&
            gtp_x86__first_call_offset(head, sizeof(head), &at) == 0) {
            va += at;
            s->off += at;
            *acquired_by_signal = 1;
        }
    }
    s->vaddr = va;
}

static int find_take_gil(const struct gt_bpf_opts *o, struct site *s, const char **how,
                         int *acquired_by_signal, const char **why)
{
    struct gtp_elf *e = NULL;
    uint8_t code[16];
    uint64_t va = 0;
    const char *calib = NULL;
    int exec = 0, err, h;

    err = object_path(o, s->path, sizeof(s->path), why);
    if (err)
        return err;
    err = gtp_elf__open(&e, s->path);
    if (err) {
        *why = why_fmt("bpf: cannot read %s: %s", s->path, strerror(-err));
        goto cleanup;
    }
    for (h = 0; h < GT_BPF_TG_N; h++) {
        const char *no = NULL;
        if (take_gil_by(e, o, (enum gt_bpf_take_gil_how)h, &va, &no) == 0)
            break;
        if (h == GT_BPF_TG_CALIBRATION)
            calib = no;
    }
    if (h == GT_BPF_TG_N) {
        err = -ENOENT;
        *why = why_fmt("bpf: take_gil not found in %s (no symbol, no debug file (install "
                       "the interpreter's -dbg package), the PyEval_RestoreThread heuristic "
                       "does not apply, and calibration: %s)",
                       s->path, calib ? calib : "not run");
        goto cleanup;
    }
    *how = gt_bpf__take_gil_how_names[h];
    if (gtp_elf__read(e, va, code, sizeof(code)) != 0 ||
        gtp_elf__offset(e, va, &s->off, &exec) != 0 || !exec) {
        err = -ENOENT;
        *why = why_fmt("bpf: take_gil (%s) at %#llx is not code in %s", *how,
                       (unsigned long long)va, s->path);
        goto cleanup;
    }
    /* A uprobe off an instruction boundary would corrupt the traced code: trust a
     * hint only where a directly called function starts with a prologue. */
    if (h == GT_BPF_TG_HINT && (gtp_x86__probe_skip(code, sizeof(code)) < 0 ||
                                !gtp_elf__is_call_target(e, va))) {
        err = -EINVAL;
        *why =
            why_fmt("bpf: take_gil hint %#llx does not start a function prologue in %s",
                    (unsigned long long)(va + o->interp_bias), s->path);
        goto cleanup;
    }
    if (!code_matches(va + o->interp_bias, code, sizeof(code))) {
        err = -ENOENT;
        *why =
            why_fmt("bpf: %s is not mapped at bias %#llx in this process (take_gil bytes "
                    "differ)",
                    s->path, (unsigned long long)o->interp_bias);
        goto cleanup;
    }
    probe_point(e, va, code, sizeof(code), s, acquired_by_signal);
cleanup:
    gtp_elf__free(e);
    return err;
}

/* The libc condition variable function `name` (pthread_cond_signal,
 * pthread_cond_wait) that the interpreter calls: the default version (GLIBC_2.3.2,
 * not the 2.2.5 compat one) of the libc (or libpthread before glibc 2.34) loaded
 * here. *emulated (if not NULL) says whether the probed instruction is a push the
 * kernel emulates (else the uprobe single-steps it out of line). */
static int find_libc_func(const char *name, struct site *s, int *emulated,
                          const char **why)
{
    struct gtp_elf *e = NULL;
    struct link_map *lm = NULL;
    Dl_info info;
    uint8_t code[16];
    uint64_t va = 0;
    int exec = 0, skip, err = 0;

    void *addr = dlvsym(RTLD_DEFAULT, name, "GLIBC_2.3.2");
    if (!addr)
        addr = dlsym(RTLD_DEFAULT, name);
    if (!addr || !dladdr1(addr, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm ||
        !info.dli_fname || !info.dli_fname[0]) {
        *why = why_fmt("bpf: cannot find the shared libc that defines %s", name);
        return -ENOENT;
    }
    if (strlen(info.dli_fname) >= sizeof(s->path)) {
        *why = "bpf: libc path too long";
        return -ENAMETOOLONG;
    }
    strcpy(s->path, info.dli_fname);
    err = gtp_elf__open(&e, s->path);
    if (err) {
        *why = why_fmt("bpf: cannot read %s: %s", s->path, strerror(-err));
        goto cleanup;
    }
    err = gtp_elf__find_func(e, GTP_ELF_DYNSYM, name, 0, &va);
    if (err || va + lm->l_addr != (uint64_t)(uintptr_t)addr) {
        err = -ENOENT;
        *why = why_fmt("bpf: %s in %s does not match the one in use", name, s->path);
        goto cleanup;
    }
    if (gtp_elf__read(e, va, code, sizeof(code)) != 0 ||
        gtp_elf__offset(e, va, &s->off, &exec) != 0 || !exec) {
        err = -ENOENT;
        *why = why_fmt("bpf: %s is not code in %s", name, s->path);
        goto cleanup;
    }
    skip = gtp_x86__probe_skip(code, sizeof(code));
    if (skip > 0) {
        va += (uint64_t)skip;
        s->off += (uint64_t)skip;
    }
    if (emulated)
        *emulated = skip >= 0;
    s->vaddr = va;
cleanup:
    gtp_elf__free(e);
    return err;
}

/* ---- draining ------------------------------------------------------------------- */

static uint64_t read_lost(const struct gt_bpf *b)
{
    uint64_t sum = 0, *vals;
    uint32_t key = 0;

    if (b->ncpus <= 0)
        return 0;
    vals = calloc((size_t)b->ncpus, sizeof(*vals));
    if (!vals)
        return 0;
    if (bpf_map_lookup_elem(bpf_map__fd(b->skel->maps.lost), &key, vals) == 0) {
        for (int i = 0; i < b->ncpus; i++)
            sum += vals[i];
    }
    free(vals);
    return sum;
}

static size_t tid_hash(int32_t tid, size_t nslots)
{
    return ((uint32_t)tid * 2654435761u) & (nslots - 1);
}

static int slots_grow(struct gt_bpf *b)
{
    size_t n = b->nslots ? b->nslots * 2 : 256;
    struct tid_slot *s = calloc(n, sizeof(*s));
    if (!s)
        return -ENOMEM;
    for (size_t i = 0; i < b->nslots; i++) {
        if (!b->slots[i].tid)
            continue;
        size_t h = tid_hash(b->slots[i].tid, n);
        while (s[h].tid)
            h = (h + 1) & (n - 1);
        s[h] = b->slots[i];
    }
    free(b->slots);
    b->slots = s;
    b->nslots = n;
    return 0;
}

/* The record of `tid` in the current generation, registered on first sight. */
static struct gt_thread *thread_for(struct gt_bpf *b, int32_t tid, int32_t tgid)
{
    size_t h;

    if (tid <= 0)
        return NULL;
    if (b->nslots) {
        for (h = tid_hash(tid, b->nslots); b->slots[h].tid;
             h = (h + 1) & (b->nslots - 1)) {
            if (b->slots[h].tid == tid)
                return b->slots[h].t;
        }
    }
    struct gt_thread *t = gt_registry__register(tid, 0);
    if (!t)
        return NULL;
    t->pid = tgid; /* children (follow_children) keep their own pid */
    if ((b->nused + 1) * 2 > b->nslots && slots_grow(b) != 0)
        return t;
    for (h = tid_hash(tid, b->nslots); b->slots[h].tid; h = (h + 1) & (b->nslots - 1))
        ;
    b->slots[h].tid = tid;
    b->slots[h].t = t;
    b->nused++;
    return t;
}

/* `t`'s account, one event on (in ns: bpf timestamps); in crosscheck mode the hooks
 * keep it and this probe only fills gil_check. The drain is the one writer. */
static void live(const struct gt_bpf *b, struct gt_thread *t, uint64_t ts, uint32_t kind)
{
    if (!b->crosscheck)
        gt_thread__gil_event(t, ts, kind);
}

static int on_event(void *ctx, void *data, size_t size)
{
    struct gt_bpf *b = ctx;
    struct gtb_event e;

    if (b->discard || size < sizeof(e))
        return 0;
    memcpy(&e, data, sizeof(e)); /* ring records are only 8-byte aligned */
    if (e.ts < b->t_start || (b->prev_drain_tid && e.tid == b->prev_drain_tid) ||
        (b->own_tid && e.tid == b->own_tid))
        return 0;
    /* In crosscheck mode the perf poller owns the sched streams: drop sched events
     * before they can register threads that never touch the GIL. */
    if (b->crosscheck && e.kind != GTB_GIL_WANT && e.kind != GTB_GIL_ACQUIRED &&
        e.kind != GTB_GIL_RELEASED && e.kind != GTB_GIL_SWITCH_WAIT &&
        e.kind != GTB_GIL_SWITCH_DONE)
        return 0;
    if (gt_registry__is_helper((int32_t)e.tid)) /* the block refiller, or the last one */
        return 0;
    struct gt_thread *t = thread_for(b, (int32_t)e.tid, (int32_t)e.tgid);
    if (!t) {
        b->unregistered++;
        return 0;
    }
    struct gt_stream *gil = b->crosscheck ? &t->gil_check : &t->gil;
    switch (e.kind) {
    case GTB_GIL_WANT:
    case GTB_GIL_ACQUIRED:
    case GTB_GIL_RELEASED:
    case GTB_GIL_SWITCH_WAIT:
    case GTB_GIL_SWITCH_DONE: {
        /* A thread that waits in the forced switch wants the GIL back. */
        uint32_t kind = e.kind == GTB_GIL_WANT || e.kind == GTB_GIL_SWITCH_WAIT ? GT_GIL_WANT
                        : e.kind == GTB_GIL_ACQUIRED                         ? GT_GIL_ACQUIRED
                        : e.kind == GTB_GIL_RELEASED                         ? GT_GIL_RELEASED
                                                                             : GT_GIL_SWITCH_DONE;
        gt_stream__push(gil, e.ts, kind, 0);
        live(b, t, e.ts, kind);
        break;
    }
    case GTB_SCHED_OUT_PREEMPTED:
        gt_stream__push(&t->sched, e.ts, GT_SCHED_OUT_PREEMPTED, e.aux);
        break;
    case GTB_SCHED_OUT_BLOCKED:
        gt_stream__push(&t->sched, e.ts, GT_SCHED_OUT_BLOCKED, e.aux);
        break;
    case GTB_SCHED_IN:
        gt_stream__push(&t->sched, e.ts, GT_SCHED_IN, e.cpu);
        break;
    default:
        return 0;
    }
    b->events++;
    return 0;
}

static void sleep_us(long us)
{
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
}

/* The one producer of the GIL and sched streams while a session records: wakes
 * every POLL_MS (or early when the ring passes its high-water mark, or at stop)
 * and consumes everything available. */
static void *drain_main(void *arg)
{
    struct gt_bpf *b = arg;
    struct epoll_event ev[2];

    b->drain_tid = (uint32_t)syscall(SYS_gettid);
    b->skel->bss->ignore_tid = b->drain_tid;
    sem_post(&b->ready);
    while (!atomic_load(&b->stop_req)) {
        epoll_wait(b->epfd, ev, 2, POLL_MS);
        ring_buffer__consume(b->rb);
    }
    /* The gate is closed. A program that passed it just before may still be
     * between reserve and submit (the consumer stops at its busy record). */
    ring_buffer__consume(b->rb);
    sleep_us(1000);
    ring_buffer__consume(b->rb);
    return NULL;
}

/* ---- detaching off the exit path ------------------------------------------------- */

/* Detaching a uprobe costs the kernel ~0.1 s: several RCU grace periods, under a
 * global mutex, so they do not overlap. A process with the probe attached would
 * take ~0.3 s longer to exit (and gt_bpf__free() as long). Instead a helper
 * process holds duplicates of the link fds, so that this process never drops the
 * last reference: the helper (`cat` reading a pipe whose write end only this
 * process holds) exits when that end is closed, at gt_bpf__free() or at exit,
 * and the kernel detaches the probes in its exit instead. Best effort: without a
 * helper the detach happens here, as usual. Returns the write end, or -errno. */
static int spawn_detach_helper(struct gilprobe_bpf *sk)
{
    struct bpf_link *links[] = {
        sk->links.take_gil_enter,     sk->links.take_gil_exit,
        sk->links.cond_signal_enter,  sk->links.cond_wait_enter,
        sk->links.cond_wait_exit,     sk->links.sched_switch,
        sk->links.sched_process_fork, sk->links.sched_process_exec,
        sk->links.sched_process_exit};
    enum { NLINKS = sizeof(links) / sizeof(links[0]), HIGH_FD = 100 };
    int tmp[NLINKS + 1], ntmp = 0, pipefd[2] = {-1, -1}, err = 0, target = 3;
    char *argv[] = {"sh", "-c", "cat <&3 >/dev/null 3<&- &", NULL};
    char *envp[] = {"PATH=/usr/bin:/bin", NULL};
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    sigset_t none;
    pid_t pid;

    if (pipe2(pipefd, O_CLOEXEC) != 0)
        return -errno;
    /* Park every source fd above the 3.. targets so that no dup2 clobbers one. */
    tmp[ntmp++] = fcntl(pipefd[0], F_DUPFD_CLOEXEC, HIGH_FD);
    for (int i = 0; i < NLINKS; i++) {
        if (links[i])
            tmp[ntmp++] = fcntl(bpf_link__fd(links[i]), F_DUPFD_CLOEXEC, HIGH_FD);
    }
    for (int i = 0; i < ntmp; i++) {
        if (tmp[i] < 0)
            err = -EBADF;
    }
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    sigemptyset(&none);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    for (int i = 0; i < ntmp; i++) /* 3: the pipe, 4...: the links */
        posix_spawn_file_actions_adddup2(&fa, tmp[i], target++);
    /* Own session: no terminal signals (^C) for the helper. */
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK);
    posix_spawnattr_setsigmask(&attr, &none);
    if (!err) {
        err = -posix_spawn(&pid, "/bin/sh", &fa, &attr, argv, envp);
        /* sh starts cat in the background and exits at once. */
        while (!err && waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&fa);
    for (int i = 0; i < ntmp; i++) {
        if (tmp[i] >= 0)
            close(tmp[i]);
    }
    close(pipefd[0]);
    if (err) {
        close(pipefd[1]);
        return err;
    }
    return pipefd[1];
}

/* ---- API ------------------------------------------------------------------------ */

/* A forked child (multiprocessing) inherits a copy of the handle, but the kernel
 * objects behind it are the parent's: the mmapped gate is shared memory, the ring
 * buffer is the parent's, and libbpf's link teardown disables the (shared) perf
 * events. The child must leave all of them alone: it can neither start nor stop a
 * session on this handle, and freeing it only forgets it. */
static int forked(const struct gt_bpf *b)
{
    return b->owner != getpid();
}

static int attach_uprobe(struct bpf_link **link, struct bpf_program *prog, int ret,
                         int pid, const struct site *s, const char *what,
                         const char **why)
{
    struct bpf_link *l =
        bpf_program__attach_uprobe(prog, ret, pid, s->path, (size_t)s->off);
    long err = libbpf_get_error(l);
    if (!l || err) {
        err = err ? err : -errno;
        if (err == -EACCES || err == -EPERM) {
            /* Since the 2025 fix "perf: Require CAP_SYS_ADMIN for uprobes" (also in
             * stable kernels), CAP_PERFMON no longer allows creating uprobes. */
            *why = "bpf: permission denied attaching uprobes (this kernel requires "
                   "CAP_SYS_ADMIN for uprobes; CAP_BPF and CAP_PERFMON are not enough)";
            return -EPERM;
        }
        *why = why_fmt("bpf: attaching the %s uprobe at %s+%#llx failed: %s", what,
                       s->path, (unsigned long long)s->off, strerror((int)-err));
        return (int)err;
    }
    *link = l;
    return 0;
}

static int attach_tp(struct bpf_link **link, struct bpf_program *prog, const char **why)
{
    struct bpf_link *l = bpf_program__attach(prog);
    long err = libbpf_get_error(l);
    if (!l || err) {
        err = err ? err : -errno;
        *why = why_fmt("bpf: attaching %s failed: %s", bpf_program__section_name(prog),
                       strerror((int)-err));
        return (int)err;
    }
    *link = l;
    return 0;
}

/* In struct _gil_runtime_state, FORCE_SWITCHING's switch_cond follows cond and mutex. */
#define GT_SWITCH_COND_AFTER_COND (sizeof(pthread_cond_t) + sizeof(pthread_mutex_t))

/* Where the probes go: take_gil (how it was found), pthread_cond_signal and, when it can be
 * probed cheaply, pthread_cond_wait (b->switch_wait_probed, or why not). */
static int find_sites(struct gt_bpf *b, const struct gt_bpf_opts *o, struct site *gil,
                      struct site *sig, struct site *wait, const char **why)
{
    const char *how = NULL, *wait_why = NULL;
    int wait_emulated = 0;
    int err = find_take_gil(o, gil, &how, &b->acquired_by_signal, why);
    if (!err)
        err = find_libc_func("pthread_cond_signal", sig, NULL, why);
    if (err)
        return err;
    b->take_gil_addr = gil->vaddr + o->interp_bias;
    b->take_gil_how = how;
    /* Optional (see the top): not probing it only loses the FORCE_SWITCHING wait. */
    b->switch_cond_addr = o->gil_switch_cond
                              ? (uint64_t)(uintptr_t)o->gil_switch_cond
                              : (uint64_t)(uintptr_t)o->gil_cond + GT_SWITCH_COND_AFTER_COND;
    if (find_libc_func("pthread_cond_wait", wait, &wait_emulated, &wait_why) != 0) {
        b->switch_wait_why = "pthread_cond_wait not found in libc";
    } else if (!wait_emulated) {
        b->switch_wait_why = "pthread_cond_wait does not start with a push (the kernel "
                             "would single-step every call): not probed";
    } else {
        b->switch_wait_probed = 1;
    }
    return 0;
}

/* Opens the skeleton, sets its constants, leaves out the programs not needed, loads it. */
static int load_programs(struct gt_bpf *b, const struct gt_bpf_opts *o, const char **why)
{
    b->skel = gilprobe_bpf__open();
    if (!b->skel) {
        int err = errno ? -errno : -ENOMEM;
        *why = why_fmt("bpf: opening the BPF object failed: %s", libbpf_last);
        return err;
    }
    struct gilprobe_bpf *sk = b->skel;
    sk->rodata->targ_tgid = (uint32_t)o->pid;
    sk->rodata->targ_gil_cond = (uint64_t)(uintptr_t)o->gil_cond;
    sk->rodata->targ_switch_cond = b->switch_cond_addr;
    sk->rodata->targ_follow_forks = o->follow_forks != 0;
    sk->rodata->targ_acquired_by_signal = b->acquired_by_signal != 0;
    if (b->acquired_by_signal)
        bpf_program__set_autoload(sk->progs.take_gil_exit, false);
    if (!o->sched)
        bpf_program__set_autoload(sk->progs.sched_switch, false);
    if (!b->switch_wait_probed) {
        bpf_program__set_autoload(sk->progs.cond_wait_enter, false);
        bpf_program__set_autoload(sk->progs.cond_wait_exit, false);
    }
    if (!o->follow_forks) {
        bpf_program__set_autoload(sk->progs.sched_process_fork, false);
        bpf_program__set_autoload(sk->progs.sched_process_exec, false);
        bpf_program__set_autoload(sk->progs.sched_process_exit, false);
    }
    int err = gilprobe_bpf__load(sk);
    if (err)
        *why = why_fmt("bpf: loading the BPF programs failed (%s): %s", strerror(-err),
                       libbpf_last);
    return err;
}

static int attach_programs(struct gt_bpf *b, const struct gt_bpf_opts *o,
                           const struct site *gil, const struct site *sig,
                           const struct site *wait, const char **why)
{
    /* Children have their own mm, so a pid-filtered uprobe would not fire there:
     * with follow_children attach everywhere and let tgid_allowed() filter. */
    int upid = o->follow_forks ? -1 : o->pid, err;
    struct gilprobe_bpf *sk = b->skel;
    if ((err = attach_uprobe(&sk->links.take_gil_enter, sk->progs.take_gil_enter, 0, upid,
                             gil, "take_gil", why)) ||
        (!b->acquired_by_signal &&
         (err = attach_uprobe(&sk->links.take_gil_exit, sk->progs.take_gil_exit, 1, upid,
                              gil, "take_gil return", why))) ||
        (err = attach_uprobe(&sk->links.cond_signal_enter, sk->progs.cond_signal_enter, 0,
                             upid, sig, "pthread_cond_signal", why)))
        return err;
    if (b->switch_wait_probed &&
        ((err = attach_uprobe(&sk->links.cond_wait_enter, sk->progs.cond_wait_enter, 0,
                              upid, wait, "pthread_cond_wait", why)) ||
         (err = attach_uprobe(&sk->links.cond_wait_exit, sk->progs.cond_wait_exit, 1,
                              upid, wait, "pthread_cond_wait return", why))))
        return err;
    if (o->sched &&
        (err = attach_tp(&sk->links.sched_switch, sk->progs.sched_switch, why)))
        return err;
    if (o->follow_forks && ((err = attach_tp(&sk->links.sched_process_fork,
                                                sk->progs.sched_process_fork, why)) ||
                               (err = attach_tp(&sk->links.sched_process_exec,
                                                sk->progs.sched_process_exec, why)) ||
                               (err = attach_tp(&sk->links.sched_process_exit,
                                                sk->progs.sched_process_exit, why))))
        return err;
    return 0;
}

/* The ring buffer's reader and the epoll set the drain thread waits on (ring buffer and
 * its wake-up eventfd). */
static int open_reader(struct gt_bpf *b, const char **why)
{
    b->rb = ring_buffer__new(bpf_map__fd(b->skel->maps.events), on_event, b, NULL);
    if (!b->rb) {
        *why = "bpf: creating the ring buffer reader failed";
        return errno ? -errno : -ENOMEM;
    }
    b->ncpus = libbpf_num_possible_cpus();
    b->epfd = epoll_create1(EPOLL_CLOEXEC);
    b->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (b->epfd < 0 || b->evfd < 0 || b->ncpus <= 0) {
        *why = "bpf: epoll/eventfd setup failed";
        return b->ncpus < 0 ? b->ncpus : -errno;
    }
    int fds[2] = {ring_buffer__epoll_fd(b->rb), b->evfd};
    for (int i = 0; i < 2; i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fds[i]};
        if (epoll_ctl(b->epfd, EPOLL_CTL_ADD, fds[i], &ev) != 0) {
            *why = "bpf: epoll setup failed";
            return -errno;
        }
    }
    return 0;
}

int gt_bpf__open(struct gt_bpf **out, const struct gt_bpf_opts *o, const char **why)
{
    struct gt_bpf *b = NULL;
    struct site *gil = NULL, *sig = NULL, *wait = NULL;
    const char *dummy;
    int err;

    if (!why)
        why = &dummy;
    *out = NULL;
    *why = NULL;
    err = gt_bpf__available(why);
    if (err)
        return err;
    if (!o || o->pid <= 0 || !o->gil_cond) {
        *why = "bpf: invalid options (pid and gil_cond are required)";
        return -EINVAL;
    }
    libbpf_set_print(libbpf_sink);
    libbpf_last[0] = '\0';

    b = calloc(1, sizeof(*b));
    gil = calloc(1, sizeof(*gil));
    sig = calloc(1, sizeof(*sig));
    wait = calloc(1, sizeof(*wait));
    if (!b || !gil || !sig || !wait) {
        free(b);
        b = NULL;
        err = -ENOMEM;
        *why = "bpf: out of memory";
        goto cleanup;
    }
    b->epfd = b->evfd = b->detach_fd = -1;
    b->owner = getpid();
    err = sem_init(&b->ready, 0, 0) ? -errno : 0;
    if (err) {
        *why = "bpf: sem_init failed";
        goto cleanup;
    }
    /* Best effort (no /proc): a forked child then keeps the probe attached while it lives. */
    (void)gt_probe_fds__before(&b->inherited);
    if ((err = find_sites(b, o, gil, sig, wait, why)) || (err = load_programs(b, o, why)) ||
        (err = attach_programs(b, o, gil, sig, wait, why)) || (err = open_reader(b, why)))
        goto cleanup;
    b->detach_fd = spawn_detach_helper(b->skel);
    int own[] = {b->epfd, b->evfd, ring_buffer__epoll_fd(b->rb), b->detach_fd};
    (void)gt_probe_fds__after(b->inherited, own, (int)(sizeof(own) / sizeof(own[0])));
    *out = b;
    b = NULL;
    err = 0;
cleanup:
    gt_bpf__free(b);
    free(gil);
    free(sig);
    free(wait);
    return err;
}

int gt_bpf__start(struct gt_bpf *b)
{
    int err;

    if (!b)
        return -EINVAL;
    if (forked(b))
        return -ECHILD;
    if (b->running)
        return -EBUSY;
    if (atomic_load(&gt_registry_gen) == 0)
        return -ESRCH; /* gt_registry__begin() first */
    /* Records left by an earlier session's stragglers. */
    b->discard = 1;
    ring_buffer__consume(b->rb);
    b->discard = 0;
    free(b->slots);
    b->slots = NULL;
    b->nslots = b->nused = 0;
    b->events = b->unregistered = 0;
    b->lost_base = read_lost(b);
    b->t_start = gt_now_ns();
    b->prev_drain_tid = atomic_load(&last_drain_tid);
    atomic_store(&b->stop_req, 0);
    /* Signals are for the interpreter's threads, not for the drain thread. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    err = pthread_create(&b->drain, NULL, drain_main, b);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err)
        return -err;
    pthread_setname_np(b->drain, "gt-bpf-drain");
    while (sem_wait(&b->ready) != 0 && errno == EINTR)
        ;
    b->running = 1;
    __atomic_store_n(&b->skel->bss->recording, true, __ATOMIC_SEQ_CST);
    return 0;
}

int gt_bpf__stop(struct gt_bpf *b)
{
    uint64_t one = 1;

    if (!b)
        return -EINVAL;
    if (!b->running || forked(b))
        return 0;
    __atomic_store_n(&b->skel->bss->recording, false, __ATOMIC_SEQ_CST);
    atomic_store(&b->stop_req, 1);
    if (write(b->evfd, &one, sizeof(one)) < 0) {
        /* The drain thread still notices stop_req within POLL_MS. */
    }
    pthread_join(b->drain, NULL);
    atomic_store(&last_drain_tid, b->drain_tid);
    if (read(b->evfd, &one, sizeof(one)) < 0) {
        /* Nothing was pending. */
    }
    b->running = 0;
    b->crosscheck = 0; /* for this session only: the next one decides again */
    return 0;
}

void gt_bpf__stats(const struct gt_bpf *b, struct gt_bpf_stats *out)
{
    *out = (struct gt_bpf_stats){0};
    if (!b)
        return;
    out->events = b->events;
    out->lost = read_lost(b) - b->lost_base + b->unregistered;
    out->take_gil_addr = b->take_gil_addr;
    out->take_gil_how = b->take_gil_how;
    out->switch_cond_addr = b->switch_cond_addr;
    out->switch_wait_probed = b->switch_wait_probed;
    out->switch_wait_why = b->switch_wait_why;
    out->acquired_by_signal = b->acquired_by_signal;
}

void gt_bpf__free(struct gt_bpf *b)
{
    if (!b || forked(b))
        return;
    gt_probe_fds__free(b->inherited);
    if (b->running)
        gt_bpf__stop(b);
    ring_buffer__free(b->rb);
    gilprobe_bpf__destroy(b->skel);
    if (b->detach_fd >= 0)
        close(b->detach_fd); /* the helper exits and the kernel detaches there */
    if (b->epfd >= 0)
        close(b->epfd);
    if (b->evfd >= 0)
        close(b->evfd);
    sem_destroy(&b->ready);
    free(b->slots);
    free(b);
}

void gt_bpf__ignore_tid(struct gt_bpf *b, int32_t tid)
{
    if (b)
        b->own_tid = tid > 0 ? (uint32_t)tid : 0;
}

void gt_bpf__set_crosscheck(struct gt_bpf *b, int on)
{
    if (b)
        b->crosscheck = on;
}

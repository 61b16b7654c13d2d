/* SPDX-License-Identifier: MIT */
/* Unprivileged OS scheduler states (see gt_sched.h).
 *
 * One perf event per watched thread: a dummy software event with context_switch=1,
 * so the kernel writes a PERF_RECORD_SWITCH into the event's ring every time the
 * thread goes off or on a CPU. Timestamps come from the sample_id trailer
 * (sample_id_all, PERF_SAMPLE_TID | PERF_SAMPLE_TIME) on CLOCK_MONOTONIC
 * (use_clockid), so they merge with every other stream without conversion.
 * exclude_kernel/exclude_hv make the event acceptable at perf_event_paranoid=2.
 *
 * Nothing ever waits on the events: the wakeup watermark is the ring size, and one
 * poller thread wakes every GT_SCHED_PERIOD_NS to drain every ring into its thread's
 * sched stream (more often, down to a quarter of it, while a ring fills up:
 * next_period). The poller is the only producer of sched streams; at stop it drains
 * every ring a last time and closes the events before it exits.
 *
 * The poller owns the events: it opens them, in an fd table of its own
 * (gt_fd_table__leave), so that the traced program keeps its table to itself (a
 * single-threaded program's fd syscalls stay on the kernel's fast path) and none of
 * its fd numbers. gt_sched__watch() queues a request under `lock`, wakes the poller
 * and waits for the answer (one round trip per thread, ~50 us); the poller opens and
 * maps the event without the lock and links it into its private `active` list. Every
 * GT_SCHED_REAP_EVERY periods the poller poll()s the events: an event whose thread
 * exited reports POLLHUP; its ring is drained one last time and closed, which gives
 * back the fd and the locked ring pages early.
 *
 * Ring size: GT_SCHED_RING_KB of data (rounded to a power of two pages), overridable
 * with GILTRACER_SCHED_RING_KB. When the mmap is refused for lack of locked memory
 * (kernel.perf_event_mlock_kb per user, then RLIMIT_MEMLOCK), smaller rings are
 * tried down to one data page. A thread that switches faster than its ring holds
 * between drains (or while the poller is kept from running) gets a ring 4x as large, up
 * to GT_SCHED_RING_MAX_KB (GILTRACER_SCHED_RING_MAX_KB), where locked memory allows:
 * watch_grow. Only such threads pay for large rings. Where the poller could not leave
 * the process's fd table (Linux < 5.9), events are also refused (-EMFILE) once their fd
 * would fall in the last quarter of RLIMIT_NOFILE, so the traced program keeps its fds.
 *
 * Costs (2 vCPU VM, kernel 6.18): ~0.7 us of the traced threads' CPU per context
 * switch (mostly the kernel's perf context switch for a task with an event, not the
 * records), ~11 us per poller wakeup (the same as a bare clock_nanosleep wakeup on
 * this VM, i.e. ~0.2 % of one CPU) plus ~20-70 ns per record drained. */
#define _GNU_SOURCE
#include "gt_sched.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "fd_table.h"
#include "gt_clock.h"
#include "registry.h"

#ifndef GT_SCHED_RING_KB
/* Data KiB per thread: 682 records of 24 bytes, i.e. 136k switches/s per thread at a
 * 5 ms period. Rings are locked memory: an unprivileged user gets
 * kernel.perf_event_mlock_kb (516) x CPUs, shared by all of its processes, plus each
 * process's RLIMIT_MEMLOCK; at 16+4 KiB per thread that is ~50 threads with
 * RLIMIT_MEMLOCK=0 on 2 CPUs and ~460 with 8 MiB (64 KiB rings: ~15 and ~135). */
#define GT_SCHED_RING_KB 16
#endif
#ifndef GT_SCHED_RING_MAX_KB
/* The largest ring a fast-switching thread is grown to: 10.9k records, 2.2M switches/s
 * at the shortest period (two GIL-churning threads switch ~0.2M/s each here). */
#define GT_SCHED_RING_MAX_KB 256
#endif
#ifndef GT_SCHED_GROWN_KB
/* All open rings' growth together at most (GILTRACER_SCHED_GROWN_KB): locked memory,
 * which an unprivileged user shares among all its rings, so that threads watched later
 * still get theirs. Four threads at 256 KiB. */
#define GT_SCHED_GROWN_KB 1024
#endif
#ifndef GT_SCHED_PERIOD_NS
#define GT_SCHED_PERIOD_NS 5000000ll /* poller period: 5 ms */
#endif
#ifndef GT_SCHED_YOUNG_DRAINS
/* A new ring's first drains come at the shortest period: how fast its thread switches
 * is not known yet (two GIL-churning threads filled 16 KiB in under 5 ms). */
#define GT_SCHED_YOUNG_DRAINS 4
#endif
#ifndef GT_SCHED_REAP_EVERY
#define GT_SCHED_REAP_EVERY 20 /* look for exited threads every 20 periods (100 ms) */
#endif

/* sample_id trailer with PERF_SAMPLE_TID | PERF_SAMPLE_TIME: at the end of every
 * non-sample record. */
struct sample_id {
    uint32_t pid, tid;
    uint64_t time;
};

#define SAMPLE_TYPE (PERF_SAMPLE_TID | PERF_SAMPLE_TIME)
#define REC_BUF 256 /* records we decode are far smaller; bigger ones are skipped */

/* One watched thread. Created by gt_sched__watch() as a request; the poller's from
 * then on (it opens the event, or frees the request when that fails). */
#ifndef PERF_FORMAT_LOST /* linux/perf_event.h before 6.0 */
#define PERF_FORMAT_LOST (1u << 4)
#endif

/* A request's answer, on the stack of the gt_sched__watch() that waits for it. */
struct watch_answer {
    int done; /* lock */
    int err;  /* lock */
};

struct watch {
    struct watch *next;
    struct gt_thread *t;
    struct watch_answer *answer; /* lock: the waiting caller's, NULL when none waits */
    int err;                     /* the poller's: the open's result */
    struct perf_event_mmap_page *page;
    const unsigned char *data;
    uint64_t size; /* data bytes, a power of two */
    size_t map_len;
    int fd;
    int read_lost;         /* the fd reads back the kernel's lost count (PERF_FORMAT_LOST) */
    uint64_t dropped_seen; /* t->sched.dropped already counted in `lost` */
    uint64_t lost_seen;    /* PERF_RECORD_LOST counts already counted in `lost` */
    uint64_t last_time;    /* the newest record's time drained (0: none yet) */
    uint64_t skip_until;   /* a grown ring's records up to this time are the old ring's */
    int grow_failed;       /* no larger ring could be had: not tried again */
    uint64_t grown;        /* data bytes beyond its first ring (in s->grown_bytes) */
    uint64_t drained_ns;   /* the poller's last drain of it (CLOCK_MONOTONIC) */
    unsigned young;        /* drains left at the shortest period after its open */
};

struct gt_sched {
    pthread_mutex_t lock;
    pthread_cond_t wake;     /* lock: a request came, or stop began (the poller waits) */
    pthread_cond_t answered; /* lock: requests answered, or the poller runs (callers wait) */
    struct watch *requests;  /* lock: watches the poller has not opened yet */
    int closed;              /* lock: stop began: watch refuses, the poller ends */
    int running;             /* lock: the poller answers requests */

    /* The poller's. */
    struct watch *active;
    struct pollfd *pfd;
    size_t pfd_cap;
    int own_table; /* the events are in the poller's own fd table (written before running) */

    /* Caller-side control (start/stop/free are not called concurrently). */
    pthread_t poller;
    int started, stopped;

    pid_t owner; /* the process that made it: a forked child must not touch it */
    long long period_ns; /* the poller's period (GT_SCHED_PERIOD_NS) */
    size_t data_pages; /* preferred data pages per ring, a power of two */
    size_t max_pages;  /* the most data pages watch_grow gives a ring (>= data_pages) */
    uint64_t grow_budget; /* the most all open rings may grow, bytes (GT_SCHED_GROWN_KB) */
    uint64_t grown_bytes; /* the poller's: the open rings' growth */
    uint64_t fd_limit;  /* refuse events whose fd would be >= this (shared fd table only) */
    size_t page_size;

    _Atomic uint64_t watched, failures, records, lost, grown;
    _Atomic uint64_t largest_ring; /* data bytes of the largest ring mapped */
    _Atomic uint64_t latest_ns;    /* the poller's latest drain, past its due time */
    _Atomic long long shortest_period_ns; /* the poller's (next_period) */
    atomic_uint fullest;                  /* the fullest ring it found, 1/1024ths */
};

/* t->sched_state of a watched thread: a marker, not an allocation (the watch itself
 * may be gone long before the record), so nothing ever needs to free it. */
static const char watched_marker;
#define WATCHED_MARKER ((void *)&watched_marker)

/* ---- explanations (static text) ---------------------------------------------- */

#define GT_PARANOID_LEVELS(X) X(-1) X(0) X(1) X(2) X(3) X(4)
#define GT_MSG_EACCES(n) \
    "perf_event_open refused (kernel.perf_event_paranoid=" #n "): OS states unavailable",
#define GT_MSG_EPERM(n)                                                   \
    "perf_event_open refused (kernel.perf_event_paranoid=" #n             \
    ", or a seccomp filter): OS states unavailable",
static const char *const msg_eacces[] = {GT_PARANOID_LEVELS(GT_MSG_EACCES)};
static const char *const msg_eperm[] = {GT_PARANOID_LEVELS(GT_MSG_EPERM)};

static int read_paranoid(int *level)
{
    int err = 0;
    FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "re");
    if (!f)
        return -errno;
    if (fscanf(f, "%d", level) != 1)
        err = -EINVAL;
    fclose(f);
    return err;
}

/* stage: 0 = perf_event_open, 1 = mmap. */
static const char *explain(int err, int stage)
{
    if (stage == 1)
        return "perf ring buffer refused (kernel.perf_event_mlock_kb / RLIMIT_MEMLOCK): "
               "OS states unavailable";
    switch (-err) {
    case EACCES:
    case EPERM: {
        int level = 0;
        if (read_paranoid(&level) == 0 && level >= -1 && level <= 4)
            return err == -EACCES ? msg_eacces[level + 1] : msg_eperm[level + 1];
        return "perf_event_open refused (kernel.perf_event_paranoid, or a seccomp "
               "filter): OS states unavailable";
    }
    case ENOSYS:
    case ENOENT:
    case ENODEV:
    case EOPNOTSUPP:
        return "perf events not supported here: OS states unavailable";
    case EINVAL:
    case E2BIG:
        return "perf_event_open rejected the context-switch event (kernel older than "
               "4.3?): OS states unavailable";
    case EMFILE:
    case ENFILE:
        return "no file descriptor left for perf_event_open: OS states unavailable";
    case ENOMEM:
        return "out of memory: OS states unavailable";
    default:
        return "perf_event_open failed: OS states unavailable";
    }
}

/* ---- one event --------------------------------------------------------------- */

/* Unmap and close w's event, if open. */
static void watch_close(struct watch *w)
{
    if (w->page)
        munmap(w->page, w->map_len);
    if (w->fd >= 0)
        close(w->fd);
    w->page = NULL;
    w->fd = -1;
}

static void watch_free(struct watch *w)
{
    if (!w)
        return;
    watch_close(w);
    free(w);
}

/* In a forked child: the ring mappings were not inherited (perf maps them
 * VM_DONTCOPY: the addresses may be reused by anything). The fds were not either
 * when they were in the poller's own table (the numbers may be the child's own
 * files); in a shared table the child has copies of the parent's events (an ioctl
 * would switch off the parent's recording): close them. Free the copy of the record;
 * no munmap. */
static void watch_abandon(const struct gt_sched *s, struct watch *w)
{
    if (!w)
        return;
    if (w->fd >= 0 && !s->own_table)
        close(w->fd);
    free(w);
}

static int forked(const struct gt_sched *s)
{
    return s->owner != getpid();
}

/* Open and map the context-switch event of `tid` (0 = the caller) into w (zeroed,
 * fd -1) with a ring of `pages` data pages, or fewer down to `min_pages` where locked
 * memory runs short. On failure w holds nothing open. *stage tells which step failed. */
static int watch_open(const struct gt_sched *s, int32_t tid, size_t pages, size_t min_pages,
                      struct watch *w, int *stage)
{
    int err = 0;
    *stage = 0;

    struct perf_event_attr attr;
    memset(&attr, 0, sizeof(attr));
    attr.size = sizeof(attr);
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_DUMMY;
    attr.sample_type = SAMPLE_TYPE;
    attr.sample_id_all = 1;
    attr.context_switch = 1;
    attr.use_clockid = 1;
    attr.clockid = CLOCK_MONOTONIC;
    attr.exclude_kernel = 1; /* required at perf_event_paranoid >= 2 */
    attr.exclude_hv = 1;
    attr.disabled = 0;
    /* Never wake anyone: the watermark is the whole ring (the kernel clamps it). */
    attr.watermark = 1;
    attr.wakeup_watermark = (uint32_t)(pages * s->page_size);
    /* The lost count, readable at the last drain (Linux 6.0+): the kernel writes a
     * PERF_RECORD_LOST only once the ring has room again, which a thread that ends
     * right after an overflow never gives it. */
    attr.read_format = PERF_FORMAT_LOST;

    int fd = (int)syscall(SYS_perf_event_open, &attr, (pid_t)tid, -1, -1,
                          PERF_FLAG_FD_CLOEXEC);
    if (fd < 0 && errno == EINVAL) { /* an older kernel */
        attr.read_format = 0;
        fd = (int)syscall(SYS_perf_event_open, &attr, (pid_t)tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
    }
    w->read_lost = attr.read_format != 0;
    if (fd < 0) {
        err = -errno;
        goto cleanup;
    }
    w->fd = fd;
    /* One fd per thread: in the process's table, never take its last quarter. */
    if ((uint64_t)fd >= s->fd_limit) {
        err = -EMFILE;
        goto cleanup;
    }

    /* Smaller rings when locked memory runs short (many threads, unprivileged). */
    *stage = 1;
    for (;; pages /= 2) {
        size_t len = (pages + 1) * s->page_size;
        void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p != MAP_FAILED) {
            w->page = p;
            w->map_len = len;
            w->size = (uint64_t)pages * s->page_size;
            break;
        }
        err = -errno;
        if ((err != -EPERM && err != -ENOMEM) || pages / 2 < min_pages || pages == 1)
            goto cleanup;
    }
    /* The kernel fills data_offset/data_size since 4.1; trust them when present. */
    if (w->page->data_size) {
        w->size = w->page->data_size;
        w->data = (const unsigned char *)w->page + w->page->data_offset;
    } else {
        w->data = (const unsigned char *)w->page + s->page_size;
    }
    return 0;
cleanup:
    watch_close(w);
    return err;
}

/* Move every complete record out of the ring into w->t->sched. Only the current
 * producer (poller, or the stopper after the join) calls this. Returns how full the
 * ring was, in 1/1024ths. */
static unsigned watch_drain(struct gt_sched *s, struct watch *w)
{
    struct perf_event_mmap_page *pg = w->page;
    /* Pairs with the kernel's smp_wmb() before it publishes data_head. */
    uint64_t head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE);
    uint64_t tail = pg->data_tail; /* only we write it */
    uint64_t mask = w->size - 1;
    uint64_t records = 0, lost = 0;
    uint64_t used = head - tail;
    unsigned fill = used >= w->size ? 1024u : (unsigned)(used * 1024 / w->size);
    struct gt_stream *st = &w->t->sched;
    _Alignas(8) unsigned char buf[REC_BUF];

    while (tail != head) {
        uint64_t off = tail & mask;
        struct perf_event_header hdr;
        /* Records are 8-byte aligned and the ring is a multiple of 8: the header never
         * straddles the end. */
        memcpy(&hdr, w->data + off, sizeof(hdr));
        if (hdr.size < sizeof(hdr) || (hdr.size & 7) || hdr.size > head - tail) {
            /* Torn or corrupt: resynchronise at head. Cannot happen with a sane
             * kernel; counted as lost so it is never silent. */
            lost++;
            tail = head;
            break;
        }
        const unsigned char *rec = NULL;
        if (hdr.type == PERF_RECORD_SWITCH || hdr.type == PERF_RECORD_LOST) {
            if (off + hdr.size <= w->size) {
                rec = w->data + off;
            } else if (hdr.size <= sizeof(buf)) { /* wraps around the ring end */
                size_t first = (size_t)(w->size - off);
                memcpy(buf, w->data + off, first);
                memcpy(buf + first, w->data, hdr.size - first);
                rec = buf;
            }
        }
        if (rec && hdr.type == PERF_RECORD_SWITCH &&
            hdr.size >= sizeof(hdr) + sizeof(struct sample_id)) {
            struct sample_id id;
            memcpy(&id, rec + hdr.size - sizeof(id), sizeof(id));
            if (id.time <= w->skip_until) { /* the old ring had it (watch_grow) */
                tail += hdr.size;
                continue;
            }
            w->last_time = id.time;
            /* OUT_PREEMPT: still TASK_RUNNING when switched out (kernel 4.17+). */
            uint32_t kind = GT_SCHED_IN;
            if (hdr.misc & PERF_RECORD_MISC_SWITCH_OUT) {
                kind = GT_SCHED_OUT_BLOCKED;
                if (hdr.misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT)
                    kind = GT_SCHED_OUT_PREEMPTED;
            }
            gt_stream__push(st, id.time, kind, 0);
            records++;
        } else if (rec && hdr.type == PERF_RECORD_LOST && hdr.size >= sizeof(hdr) + 16) {
            uint64_t n;
            memcpy(&n, rec + sizeof(hdr) + 8, sizeof(n)); /* after u64 id */
            lost += n;
            w->lost_seen += n;
        }
        tail += hdr.size;
    }
    /* Our reads of the records happen before the kernel may reuse their space. */
    __atomic_store_n(&pg->data_tail, tail, __ATOMIC_RELEASE);

    uint64_t dropped = st->dropped;
    lost += dropped - w->dropped_seen;
    w->dropped_seen = dropped;
    if (records)
        atomic_fetch_add_explicit(&s->records, records, memory_order_relaxed);
    if (lost)
        atomic_fetch_add_explicit(&s->lost, lost, memory_order_relaxed);
    return fill;
}

/* The last drain of a watch: its records, then the losses no PERF_RECORD_LOST told. */
static void watch_drain_last(struct gt_sched *s, struct watch *w)
{
    (void)watch_drain(s, w);
    uint64_t v[2];
    if (w->read_lost && read(w->fd, v, sizeof(v)) == (ssize_t)sizeof(v) && v[1] > w->lost_seen) {
        atomic_fetch_add_explicit(&s->lost, v[1] - w->lost_seen, memory_order_relaxed);
        w->lost_seen = v[1];
    }
}

/* The largest ring so far, for the stats. */
static void note_ring(struct gt_sched *s, const struct watch *w)
{
    uint64_t seen = atomic_load_explicit(&s->largest_ring, memory_order_relaxed);
    while (w->size > seen && !atomic_compare_exchange_weak_explicit(
                                 &s->largest_ring, &seen, w->size, memory_order_relaxed,
                                 memory_order_relaxed))
        ;
}

/* Give w's thread a ring 4x as large (up to max_pages and to what is left of the
 * growth budget; at least 2x, else none): a new event is opened beside the old one,
 * then the old one is switched off, drained and closed. Both recorded between the open
 * and the switch-off: the new ring's records up to the old one's last are skipped by
 * time. The old ring stays when no larger one can be had (the thread exited, no locked
 * memory). 0 or -errno. */
static int watch_grow(struct gt_sched *s, struct watch *w)
{
    size_t pages = (size_t)(w->size / s->page_size);
    size_t want = pages * 4 < s->max_pages ? pages * 4 : s->max_pages;
    uint64_t budget = s->grow_budget;
    while (want >= pages * 2 && s->grown_bytes + (want - pages) * s->page_size > budget)
        want /= 2;
    if (w->grow_failed || want < pages * 2)
        return -E2BIG;
    struct watch bigger = {.fd = -1};
    int stage = 0;
    int err = watch_open(s, w->t->tid, want, pages * 2, &bigger, &stage);
    if (err) {
        w->grow_failed = 1; /* (each try costs an open and a map, every drain) */
        return err;
    }
    ioctl(w->fd, PERF_EVENT_IOC_DISABLE, 0);
    watch_drain_last(s, w);
    watch_close(w);
    w->fd = bigger.fd;
    w->page = bigger.page;
    w->data = bigger.data;
    w->size = bigger.size;
    w->map_len = bigger.map_len;
    w->read_lost = bigger.read_lost;
    uint64_t added = bigger.size - (uint64_t)pages * s->page_size;
    s->grown_bytes += added;
    w->grown += added;
    w->lost_seen = 0;
    w->skip_until = w->last_time;
    atomic_fetch_add_explicit(&s->grown, 1, memory_order_relaxed);
    note_ring(s, w);
    return 0;
}

/* Whether a drain that found a ring `fill`/1024 full `since_ns` after the one before,
 * having lost records (`lost`) or not, asks for a larger ring: one that would be over 3/4
 * full after a base period (`base_ns`) at this pace, or is now. A ring should hold a base
 * period's records: a shorter period (next_period) is for bursts, and the poller's
 * wakeups are late on busy CPUs. (Paces over drains closer than base / 16 are noise.) */
static int wants_larger_ring(unsigned fill, int lost, uint64_t since_ns, long long base_ns)
{
    if (lost || fill > 768)
        return 1;
    return since_ns >= (uint64_t)base_ns / 16 &&
           (uint64_t)fill * (uint64_t)base_ns > 768 * since_ns;
}

/* ---- poller ------------------------------------------------------------------ */

/* Open the requested events and answer their callers. Called and returns with `lock`
 * held; opens without it. After stop began, requests are refused instead. */
static void answer_requests_locked(struct gt_sched *s)
{
    struct watch *list = s->requests;
    int refuse = s->closed;
    s->requests = NULL;
    pthread_mutex_unlock(&s->lock);
    for (struct watch *w = list; w; w = w->next) {
        int stage = 0;
        w->err = refuse ? -ESRCH : watch_open(s, w->t->tid, s->data_pages, 1, w, &stage);
        if (!w->err) {
            w->dropped_seen = w->t->sched.dropped;
            w->drained_ns = gt_now_ns();
            w->young = GT_SCHED_YOUNG_DRAINS;
            note_ring(s, w);
        }
    }
    pthread_mutex_lock(&s->lock);
    while (list) {
        struct watch *w = list;
        list = w->next;
        if (w->answer) {
            w->answer->err = w->err;
            w->answer->done = 1;
            w->answer = NULL;
        }
        atomic_fetch_add_explicit(w->err ? &s->failures : &s->watched, 1, memory_order_relaxed);
        if (w->err) {
            w->t->sched_state = NULL; /* the thread may be watched again */
            watch_free(w);
        } else {
            w->next = s->active;
            s->active = w;
        }
    }
    pthread_cond_broadcast(&s->answered);
}

/* Drain and close the events whose thread exited (they report POLLHUP). */
static void reap_exited(struct gt_sched *s)
{
    size_t n = 0;
    for (struct watch *w = s->active; w; w = w->next)
        n++;
    if (n == 0)
        return;
    if (n > s->pfd_cap) {
        struct pollfd *p = realloc(s->pfd, n * sizeof(*p));
        if (!p)
            return; /* try again next time; stop closes everything anyway */
        s->pfd = p;
        s->pfd_cap = n;
    }
    size_t i = 0;
    for (struct watch *w = s->active; w; w = w->next, i++) {
        s->pfd[i].fd = w->fd;
        s->pfd[i].events = POLLIN;
        s->pfd[i].revents = 0;
    }
    if (poll(s->pfd, (nfds_t)n, 0) <= 0)
        return;
    i = 0;
    for (struct watch **pw = &s->active; *pw; i++) {
        struct watch *w = *pw;
        if (s->pfd[i].revents & (POLLHUP | POLLERR | POLLNVAL)) {
            watch_drain_last(s, w); /* the thread's last records */
            *pw = w->next;
            s->grown_bytes -= w->grown;
            watch_free(w);
        } else {
            pw = &w->next;
        }
    }
}

static void ts_add_ns(struct timespec *t, long long ns)
{
    long long v = (long long)t->tv_nsec + ns;
    t->tv_sec += (time_t)(v / 1000000000ll);
    t->tv_nsec = (long)(v % 1000000000ll);
}

static int ts_before(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* The next period's end after `due`; after a long stall, now plus a period rather
 * than a burst of catch-up periods. */
static void next_due(struct timespec *due, long long period_ns)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    ts_add_ns(due, period_ns);
    if (ts_before(due, &now)) {
        *due = now;
        ts_add_ns(due, period_ns);
    }
}

/* Moves `due` to `ns` from now if that is sooner. */
static void due_within(struct timespec *due, long long ns)
{
    struct timespec soon;
    clock_gettime(CLOCK_MONOTONIC, &soon);
    ts_add_ns(&soon, ns);
    if (ts_before(&soon, due))
        *due = soon;
}

/* The last drain: every event off, every ring drained, every event closed. */
static void drain_all_last(struct gt_sched *s)
{
    for (struct watch *w = s->active; w; w = w->next)
        ioctl(w->fd, PERF_EVENT_IOC_DISABLE, 0);
    while (s->active) {
        struct watch *w = s->active;
        s->active = w->next;
        watch_drain_last(s, w);
        s->grown_bytes -= w->grown;
        watch_free(w);
    }
}

/* The poller's next period: halved (down to a quarter of the base) while a ring was
 * found more than half full, so that a thread switching faster than its ring holds per
 * period (136k switches/s at 16 KiB and 5 ms: GIL-churning threads) loses no records;
 * doubled back (up to the base) once every ring stays under an eighth. */
static long long next_period(long long period, long long base, unsigned fullest)
{
    if (fullest > 512 && period > base / 4)
        return period / 2 > base / 4 ? period / 2 : base / 4;
    if (fullest < 128 && period < base)
        return period * 2 < base ? period * 2 : base;
    return period;
}

static void *poller_main(void *arg)
{
    struct gt_sched *s = arg;
    struct timespec due;
    unsigned tick = 0;
    long long period = s->period_ns;
    /* Let the kernel batch our wakeups with other timers (default slack: 50 us). */
    prctl(PR_SET_TIMERSLACK, 500000ul, 0, 0, 0);
    if (gt_fd_table__leave() == 0) {
        s->own_table = 1;
        s->fd_limit = UINT64_MAX; /* our table's fds take none of the program's */
    }
    clock_gettime(CLOCK_MONOTONIC, &due);
    ts_add_ns(&due, s->period_ns);
    pthread_mutex_lock(&s->lock);
    s->running = 1;
    pthread_cond_broadcast(&s->answered); /* gt_sched__start waits for it */
    for (;;) {
        if (s->requests) {
            answer_requests_locked(s);
            due_within(&due, s->period_ns / 4); /* (GT_SCHED_YOUNG_DRAINS) */
            continue;
        }
        if (s->closed)
            break;
        if (pthread_cond_timedwait(&s->wake, &s->lock, &due) != ETIMEDOUT)
            continue; /* a request, stop, or a spurious wakeup */
        pthread_mutex_unlock(&s->lock);
        unsigned fullest = 0;
        int young = 0;
        uint64_t now = gt_now_ns();
        uint64_t due_ns = gt_timespec_ns(&due);
        if (now > due_ns + atomic_load_explicit(&s->latest_ns, memory_order_relaxed))
            atomic_store_explicit(&s->latest_ns, now - due_ns, memory_order_relaxed);
        for (struct watch *w = s->active; w; w = w->next) {
            uint64_t lost_before = w->lost_seen;
            unsigned fill = watch_drain(s, w);
            fullest = fill > fullest ? fill : fullest;
            if (wants_larger_ring(fill, w->lost_seen != lost_before, now - w->drained_ns,
                                  s->period_ns))
                (void)watch_grow(s, w);
            w->drained_ns = now;
            if (w->young) {
                w->young--;
                young = 1;
            }
        }
        if (++tick % GT_SCHED_REAP_EVERY == 0)
            reap_exited(s);
        period = next_period(period, s->period_ns, fullest);
        if (young && period > s->period_ns / 4)
            period = s->period_ns / 4;
        if (period < atomic_load_explicit(&s->shortest_period_ns, memory_order_relaxed))
            atomic_store_explicit(&s->shortest_period_ns, period, memory_order_relaxed);
        if (fullest > atomic_load_explicit(&s->fullest, memory_order_relaxed))
            atomic_store_explicit(&s->fullest, fullest, memory_order_relaxed);
        next_due(&due, period);
        pthread_mutex_lock(&s->lock);
    }
    s->running = 0;
    pthread_mutex_unlock(&s->lock);
    drain_all_last(s);
    free(s->pfd);
    s->pfd = NULL;
    s->pfd_cap = 0;
    return NULL;
}

/* ---- API --------------------------------------------------------------------- */

static size_t ring_pages_from(size_t kb, size_t page_size)
{
    size_t want = kb * 1024 / page_size, pages = 1;
    while (pages * 2 <= want && pages < (1u << 20))
        pages *= 2;
    return pages;
}

/* The number in environment variable `name` if it is a whole number in 1..max, else
 * `fallback`. */
static unsigned long env_count(const char *name, unsigned long fallback, unsigned long max)
{
    const char *env = getenv(name);
    if (!env || !*env)
        return fallback;
    char *end = NULL;
    unsigned long v = strtoul(env, &end, 10);
    return end && *end == '\0' && v > 0 && v <= max ? v : fallback;
}

/* The lock and the two condition variables (timed waits on CLOCK_MONOTONIC). */
static int init_sync(struct gt_sched *s)
{
    pthread_condattr_t attr;
    int err = pthread_condattr_init(&attr);
    if (err)
        return -err;
    err = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (!err && !(err = pthread_cond_init(&s->wake, &attr))) {
        if (!(err = pthread_cond_init(&s->answered, NULL))) {
            if (!(err = pthread_mutex_init(&s->lock, NULL))) {
                pthread_condattr_destroy(&attr);
                return 0;
            }
            pthread_cond_destroy(&s->answered);
        }
        pthread_cond_destroy(&s->wake);
    }
    pthread_condattr_destroy(&attr);
    return -err;
}

int gt_sched__new(struct gt_sched **out, const char **why)
{
    int err = 0, stage = 0;
    const char *text = NULL;
    struct watch probe = {.fd = -1}; /* in the caller's fd table, closed before return */
    struct gt_sched *s = calloc(1, sizeof(*s));
    *out = NULL;
    if (!s) {
        err = -ENOMEM;
        text = explain(err, 0);
        goto cleanup;
    }
    s->owner = getpid();
    long ps = sysconf(_SC_PAGESIZE);
    s->page_size = ps > 0 ? (size_t)ps : 4096;
    s->data_pages = ring_pages_from(env_count("GILTRACER_SCHED_RING_KB", GT_SCHED_RING_KB, 1ul << 20),
                                    s->page_size);
    s->max_pages = ring_pages_from(
        env_count("GILTRACER_SCHED_RING_MAX_KB", GT_SCHED_RING_MAX_KB, 1ul << 20), s->page_size);
    if (s->max_pages < s->data_pages)
        s->max_pages = s->data_pages;
    s->grow_budget = (uint64_t)env_count("GILTRACER_SCHED_GROWN_KB", GT_SCHED_GROWN_KB,
                                         1ul << 20) * 1024;
    /* Test-only: a longer period, so that a test can overflow a ring on purpose. */
    s->period_ns = GT_SCHED_PERIOD_NS;
    unsigned long period_ms = env_count("GILTRACER_SCHED_PERIOD_MS", 0, 10000);
    if (period_ms)
        s->period_ns = (long long)period_ms * 1000000ll;
    atomic_init(&s->shortest_period_ns, s->period_ns);
    struct rlimit nofile;
    s->fd_limit = UINT64_MAX;
    if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY)
        s->fd_limit = (uint64_t)nofile.rlim_cur / 4 * 3;
    err = init_sync(s);
    if (err) {
        free(s);
        s = NULL;
        text = explain(err, 0);
        goto cleanup;
    }

    err = watch_open(s, 0, s->data_pages, 1, &probe, &stage);
    if (err) {
        text = explain(err, stage);
        goto cleanup;
    }
    text = "perf_event_open context-switch records (CLOCK_MONOTONIC)";
    *out = s;
    s = NULL;
cleanup:
    watch_close(&probe);
    gt_sched__free(s);
    if (why)
        *why = text;
    return err;
}

int gt_sched__watch(struct gt_sched *s, struct gt_thread *t)
{
    int err = 0;
    if (!s || !t)
        return -EINVAL;
    if (forked(s)) /* the parent's poller, lock and rings are not ours */
        return -ECHILD;
    struct watch *w = calloc(1, sizeof(*w));
    struct watch_answer answer = {0};
    if (!w) {
        atomic_fetch_add_explicit(&s->failures, 1, memory_order_relaxed);
        return -ENOMEM;
    }
    w->fd = -1;
    w->t = t;

    pthread_mutex_lock(&s->lock);
    if (s->closed) {
        err = -ESRCH;
    } else if (t->sched_state) { /* call once per thread; a second call is refused */
        err = -EALREADY;
    } else {
        t->sched_state = WATCHED_MARKER;
        w->next = s->requests;
        s->requests = w;
        if (s->running) { /* else the poller opens it when it starts */
            w->answer = &answer;
            pthread_cond_signal(&s->wake);
            while (!answer.done)
                pthread_cond_wait(&s->answered, &s->lock);
            err = answer.err;
        }
        w = NULL; /* the poller's */
    }
    pthread_mutex_unlock(&s->lock);
    free(w);
    return err;
}

int gt_sched__start(struct gt_sched *s)
{
    int err = 0;
    sigset_t all, old;
    if (!s)
        return -EINVAL;
    if (s->stopped)
        return -ESRCH;
    if (s->started)
        return -EALREADY;
    if (forked(s))
        return -ECHILD;
    /* The poller must never take the process's signals (e.g. SIGINT for Python). */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    err = -pthread_create(&s->poller, NULL, poller_main, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err)
        return err;
    pthread_setname_np(s->poller, "gt-sched");
    s->started = 1;
    /* Once it runs, every watch waits for its event to be open: no thread's first
     * switches are missed. */
    pthread_mutex_lock(&s->lock);
    while (!s->running)
        pthread_cond_wait(&s->answered, &s->lock);
    pthread_mutex_unlock(&s->lock);
    return 0;
}

/* Stop in a forked child: the poller thread does not exist here (joining its stale
 * handle is undefined), the lock may have been held by it at fork(), the rings are
 * not mapped and the events are the parent's. Forget all of it without touching any. */
static void abandon(struct gt_sched *s)
{
    struct watch *lists[2] = {s->requests, s->active};
    s->requests = s->active = NULL;
    for (int i = 0; i < 2; i++)
        while (lists[i]) {
            struct watch *w = lists[i];
            lists[i] = w->next;
            watch_abandon(s, w);
        }
    free(s->pfd);
    s->pfd = NULL;
    s->pfd_cap = 0;
    s->started = 0;
    s->closed = 1;
    s->stopped = 1;
}

int gt_sched__stop(struct gt_sched *s)
{
    if (!s)
        return -EINVAL;
    if (s->stopped)
        return 0;
    if (forked(s)) {
        abandon(s);
        return 0;
    }

    /* From here on gt_sched__watch() refuses; the poller refuses what is queued, drains
     * every ring a last time, closes the events and ends. */
    pthread_mutex_lock(&s->lock);
    s->closed = 1;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
    if (s->started) {
        pthread_join(s->poller, NULL);
        s->started = 0;
    }
    /* Requests of a poller that never started: refused. */
    pthread_mutex_lock(&s->lock);
    answer_requests_locked(s);
    pthread_mutex_unlock(&s->lock);
    s->stopped = 1;
    return 0;
}

void gt_sched__stats(const struct gt_sched *s, struct gt_sched_stats *out)
{
    memset(out, 0, sizeof(*out));
    if (!s)
        return;
    /* The API takes const; relaxed atomic loads do not modify the object. */
    struct gt_sched *m = (struct gt_sched *)s;
    out->threads_watched = atomic_load_explicit(&m->watched, memory_order_relaxed);
    out->watch_failures = atomic_load_explicit(&m->failures, memory_order_relaxed);
    out->records = atomic_load_explicit(&m->records, memory_order_relaxed);
    out->lost = atomic_load_explicit(&m->lost, memory_order_relaxed);
    out->shortest_period_ns = atomic_load_explicit(&m->shortest_period_ns, memory_order_relaxed);
    out->fullest = atomic_load_explicit(&m->fullest, memory_order_relaxed);
    out->rings_grown = atomic_load_explicit(&m->grown, memory_order_relaxed);
    out->largest_ring_kb = atomic_load_explicit(&m->largest_ring, memory_order_relaxed) / 1024;
    out->latest_drain_ns = atomic_load_explicit(&m->latest_ns, memory_order_relaxed);
}

void gt_sched__free(struct gt_sched *s)
{
    if (!s)
        return;
    gt_sched__stop(s);
    if (!forked(s)) { /* copies of what the parent's poller may have held */
        pthread_mutex_destroy(&s->lock);
        pthread_cond_destroy(&s->wake);
        pthread_cond_destroy(&s->answered);
    }
    free(s);
}

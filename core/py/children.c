/* SPDX-License-Identifier: MIT */
/* Child processes followed (follow_children): a child's session writes its merge input to
 * its spool (record/spool.h); the parent's reads every child's and adds them to its merge. */
#include "children.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "budget.h"
#include "gt_clock.h"
#include "note.h"
#include "spool.h"

/* A path in the session folder: the folder's (at most PATH_MAX) and a file's suffix. */
#define PATH_LEN (PATH_MAX + 104)
/* A file's name in the session folder ("<prefix><pid>.spool", NAME_MAX at most), and
 * with a checkpoint's number after it. */
#define NAME_LEN 300
#define CHECKPOINT_NAME_LEN (NAME_LEN + 20)
/* The pids a note lists (then "..."), and the children that failed to start it lists
 * with their reasons (each cut to FAILED_WHY_SHOWN characters). */
#define LIST_MOST 6
#define FAILED_MOST 4
#define FAILED_WHY_SHOWN "80"
#define NS_PER_MS 1000000
static const char BORN[] = ".born"; /* a child that started: "<prefix><pid>.born" */

/* The command line of this process, arguments joined by spaces. */
static void own_cmd(char *out, size_t len)
{
    out[0] = '\0';
    FILE *f = fopen("/proc/self/cmdline", "re");
    if (!f)
        return;
    size_t n = fread(out, 1, len - 1, f);
    fclose(f);
    out[n] = '\0';
    for (size_t i = 0; i + 1 < n; i++)
        if (out[i] == '\0')
            out[i] = ' ';
}

static int write_spool(const char *spool, const struct gt_trace_input *ti,
                       const struct gt_emit_meta *m, uint32_t interval_ms);

/* A child: writes its merge input to `spool` (created private, never through a link,
 * complete or not at all: written beside it and renamed). Returns 0 or -errno. */
int gt_children__write_spool(const char *spool, const struct gt_trace_input *ti,
                             const struct gt_emit_meta *m)
{
    return write_spool(spool, ti, m, 0);
}

int gt_children__write_checkpoint(const char *spool, uint32_t seq,
                                  const struct gt_trace_input *ti,
                                  const struct gt_emit_meta *m, uint32_t interval_ms)
{
    char path[PATH_LEN];
    if (snprintf(path, sizeof(path), "%s.%u", spool, seq) >= (int)sizeof(path))
        return -ENAMETOOLONG;
    return write_spool(path, ti, m, interval_ms ? interval_ms : 1);
}

static int write_spool(const char *spool, const struct gt_trace_input *ti,
                       const struct gt_emit_meta *m, uint32_t interval_ms)
{
    char tmp[PATH_LEN];
    if (snprintf(tmp, sizeof(tmp), "%s.part", spool) >= (int)sizeof(tmp))
        return -ENAMETOOLONG;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        int err = -errno;
        close(fd);
        unlink(tmp);
        return err;
    }
    struct gt_spool_meta sm = {
        .pid = (int32_t)getpid(),
        .ppid = (int32_t)getppid(),
        .t0 = ti->t0,
        .t1 = ti->t1,
        .event_count = m->event_count,
        .dropped_events = m->dropped_events,
        .gil_dropped = m->gil_dropped,
        .sched_lost = m->sched_lost,
        .partial = interval_ms != 0,
        .interval_ms = interval_ms,
        .calls_aggregated = m->calls_aggregated,
        .gil_aggregated = m->gil_aggregated,
        .sched_aggregated = m->sched_aggregated,
    };
    own_cmd(sm.cmd, sizeof(sm.cmd));
    int err = gt_spool__write(f, ti, &sm);
    if (fclose(f) != 0 && !err)
        err = -EIO;
    if (!err && rename(tmp, spool) < 0)
        err = -errno;
    if (err)
        unlink(tmp);
    return err;
}

/* 1 if `pid` runs (a zombie has ended), 0 if not. */
static int running(long pid)
{
    char path[64], buf[256];
    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command may hold spaces and parentheses */
    return p && p[1] == ' ' && p[2] && p[2] != 'Z' && p[2] != 'X';
}

/* Appends `item` to a list of at most LIST_MOST (then "..."): count is how many it holds. */
static void item_add(char *list, size_t len, int count, const char *item)
{
    if (count > LIST_MOST)
        return;
    size_t l = strlen(list);
    snprintf(list + l, len - l, "%s%s", l ? ", " : "", count == LIST_MOST ? "..." : item);
}

/* Adds "pid (~ms)" to a list of at most LIST_MOST. */
static void list_add(char *list, size_t len, int count, long pid, uint64_t ms)
{
    char item[64];
    snprintf(item, sizeof(item), "%ld (~%llu ms)", pid, (unsigned long long)ms);
    item_add(list, len, count, item);
}

/* Adds "pid (+at ms; up to lost ms lost)" to a list of at most LIST_MOST: a killed child's last
 * checkpoint, from the trace's start, and the time from it to the trace's stop, in which
 * the child died (its loss: what it recorded after that checkpoint). */
static void cut_add(char *list, size_t len, int count, long pid, uint64_t at_ns,
                    uint64_t lost_ns)
{
    char item[96];
    snprintf(item, sizeof(item), "%ld (+%.1f ms; up to %.1f ms lost)", pid, (double)at_ns / 1e6,
             (double)lost_ns / 1e6);
    item_add(list, len, count, item);
}

static int by_start(const void *a, const void *b)
{
    uint64_t x = (*(struct gt_spool *const *)a)->meta.t0, y = (*(struct gt_spool *const *)b)->meta.t0;
    return x < y ? -1 : x > y;
}

/* One spool file of the session folder: only a regular file of this user, never through
 * a link. Returns 0 and sets *out, or -errno (-ENOENT: none). */
static int read_one(int dfd, const char *name, struct gt_spool **out)
{
    *out = NULL;
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    FILE *f = NULL;
    int err = -EINVAL;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
        (f = fdopen(fd, "rb")))
        err = gt_spool__read(f, (uint64_t)st.st_size, out);
    if (f)
        fclose(f);
    else
        close(fd);
    return err;
}

/* A child's checkpoints "<spool>.0", "<spool>.1", ... joined. -ENOENT: none. */
static int read_checkpoints(int dfd, const char *spool, struct gt_spool **out)
{
    struct gt_spool **parts = NULL;
    size_t n = 0;
    int err = 0;
    for (;;) {
        char name[CHECKPOINT_NAME_LEN];
        struct gt_spool *sp;
        snprintf(name, sizeof(name), "%s.%zu", spool, n);
        int e = read_one(dfd, name, &sp);
        if (e == -ENOENT)
            break;
        struct gt_spool **more = e ? NULL : realloc(parts, (n + 1) * sizeof(*more));
        if (!more) {
            gt_spool__free(sp);
            err = e ? e : -ENOMEM;
            break;
        }
        parts = more;
        parts[n++] = sp;
    }
    if (!err)
        err = n ? gt_spool__join(parts, n, out) : -ENOENT;
    if (err || !n)
        for (size_t k = 0; k < n; k++)
            gt_spool__free(parts[k]);
    free(parts);
    return err;
}

/* What the parent learnt of its children, for the notes. */
struct child_tally {
    int killed, unreadable, cut, alive, failed;
    char lost[160], cut_list[360], alive_list[200], failed_list[400];
    uint64_t stop_ns;
    uint64_t t0, t1; /* the trace's bounds */
    uint32_t every_ms; /* the longest interval between a killed child's checkpoints */
};

/* Why child pid's session did not start ("<prefix><pid>.failed", written by the child:
 * magics/_giltracer_boot.py) into why[len]; 0, or -errno (-ENOENT: it did start). */
static int read_failure(int dfd, const char *prefix, long pid, char *why, size_t len)
{
    char name[NAME_LEN];
    snprintf(name, sizeof(name), "%s%ld.failed", prefix, pid);
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    ssize_t n = -1;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid())
        n = read(fd, why, len - 1);
    close(fd);
    if (n < 0)
        return -EINVAL;
    why[n] = '\0';
    for (char *c = why; *c; c++) /* one line in the note */
        if (*c == '\n' || *c == '\r')
            *c = ' ';
    return 0;
}

/* Adds "pid (why)" to the failed list (at most FAILED_MOST, then "..."). */
static void failed_add(struct child_tally *t, long pid, const char *why)
{
    size_t l = strlen(t->failed_list), len = sizeof(t->failed_list);
    if (t->failed > FAILED_MOST)
        return;
    if (t->failed == FAILED_MOST)
        snprintf(t->failed_list + l, len - l, "; ...");
    else
        snprintf(t->failed_list + l, len - l, "%s%ld (%." FAILED_WHY_SHOWN "s)", l ? "; " : "",
                 pid, why);
}

/* Adds child pid's spool (or its checkpoints joined) to run->spools, or counts the child
 * as failed to start (it said why), killed (no spool) or unreadable. */
static void read_child(int dfd, const char *prefix, long pid, struct gt_run *run,
                       struct child_tally *t)
{
    char spool[NAME_LEN];
    snprintf(spool, sizeof(spool), "%s%ld.spool", prefix, pid);
    struct gt_spool *sp = NULL;
    int err = read_one(dfd, spool, &sp);
    if (err == -ENOENT) /* no spool: the checkpoints it wrote, if any */
        err = read_checkpoints(dfd, spool, &sp);
    if (err == 0 && sp->meta.pid == pid) {
        struct gt_spool **more = realloc(run->spools, (run->nspools + 1) * sizeof(*more));
        if (more) {
            run->spools = more;
            run->spools[run->nspools++] = sp;
            /* Checkpoints only: the child still runs (it stops tracing once the
             * folder is gone) or was killed after its last one (each holds all that
             * its threads had recorded then), when is not known: before the stop. */
            uint64_t t1 = sp->meta.t1;
            if (sp->meta.partial && running(pid)) {
                list_add(t->alive_list, sizeof(t->alive_list), t->alive++, pid,
                         t->stop_ns > t1 ? (t->stop_ns - t1) / NS_PER_MS : 0);
            } else if (sp->meta.partial) {
                cut_add(t->cut_list, sizeof(t->cut_list), t->cut++, pid,
                        t1 > t->t0 ? t1 - t->t0 : 0, t->t1 > t1 ? t->t1 - t1 : 0);
                if (sp->meta.interval_ms > t->every_ms)
                    t->every_ms = sp->meta.interval_ms;
            }
            return;
        }
    }
    gt_spool__free(sp);
    char why[200];
    if (err == -ENOENT && read_failure(dfd, prefix, pid, why, sizeof(why)) == 0) {
        failed_add(t, pid, why);
        t->failed++;
    } else if (err == -ENOENT) {
        if (t->killed++ < LIST_MOST) {
            size_t l = strlen(t->lost);
            snprintf(t->lost + l, sizeof(t->lost) - l, "%s%ld", l ? ", " : "", pid);
        }
    } else {
        t->unreadable++;
    }
}

static void note_children(const struct child_tally *t, char *note, size_t nlen)
{
    int killed = t->killed, cut = t->cut, alive = t->alive, unreadable = t->unreadable;
    if (t->failed)
        gt_note__add(note, nlen,
                    "%d child process%s could not be traced (%s session did not start; %s "
                    "ran untraced): %s", t->failed, t->failed > 1 ? "es" : "",
                    t->failed > 1 ? "their" : "its", t->failed > 1 ? "they" : "it",
                    t->failed_list);
    if (killed)
        gt_note__add(note, nlen,
                    "%d child process%s (pid %s%s) ended without writing its trace (killed, "
                    "e.g. by SIGKILL, or still running): only this process's view of %s "
                    "is shown", killed, killed > 1 ? "es" : "", t->lost,
                    killed > LIST_MOST ? ", ..." : "", killed > 1 ? "them" : "it");
    if (cut)
        gt_note__add(note, nlen,
                    "%d child process%s killed (e.g. by SIGKILL): %s trace%s shown up to "
                    "%s last checkpoint (one every ~%u ms while %s ran), what %s did after "
                    "it is lost (pid (its last checkpoint, from this trace's start; at "
                    "most the time from it to this trace's stop lost)): %s",
                    cut, cut > 1 ? "es" : "", cut > 1 ? "their" : "its",
                    cut > 1 ? "s are" : " is", cut > 1 ? "their" : "its", t->every_ms,
                    cut > 1 ? "they" : "it", cut > 1 ? "they" : "it", t->cut_list);
    if (alive)
        gt_note__add(note, nlen,
                    "%d child process%s still running when the trace stopped: %s trace%s "
                    "shown up to %s last spool, the last ~N ms missing (pid ~N), and %s "
                    "stop%s tracing: %s", alive, alive > 1 ? "es" : "",
                    alive > 1 ? "their" : "its", alive > 1 ? "s are" : " is",
                    alive > 1 ? "their" : "its", alive > 1 ? "they" : "it",
                    alive > 1 ? "" : "s", t->alive_list);
    if (unreadable)
        gt_note__add(note, nlen,
                    "%d child process trace%s could not be read", unreadable,
                    unreadable > 1 ? "s" : "");
}

/* The parent: reads every child's spool in the session folder (only regular files of
 * this user, never through a link) into run->spools, and notes each child that started
 * (its "token-<pid>.born") but left no spool: killed (e.g. SIGKILL) or still running. */
void gt_children__read_spools(const char *children, struct gt_run *run, uint64_t t0,
                              uint64_t t1, char *note, size_t nlen)
{
    char dir[PATH_LEN];
    snprintf(dir, sizeof(dir), "%s", children);
    char *slash = strrchr(dir, '/');
    if (!slash)
        return;
    *slash = '\0';
    const char *prefix = slash + 1;
    size_t plen = strlen(prefix);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        gt_note__add(note, nlen,
                    "child processes: the session folder could not be read (%s)",
                    strerror(errno));
        return;
    }
    struct child_tally tally = {.stop_ns = gt_now_ns(), .t0 = t0, .t1 = t1};
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *name = e->d_name;
        size_t n = strlen(name);
        size_t blen = sizeof(BORN) - 1;
        if (n <= plen + blen || strncmp(name, prefix, plen) != 0 || strcmp(name + n - blen, BORN))
            continue;
        read_child(dfd, prefix, strtol(name + plen, NULL, 10), run, &tally);
    }
    closedir(d);
    if (run->nspools) /* qsort's base must not be NULL, even for no elements */
        qsort(run->spools, run->nspools, sizeof(*run->spools), by_start);
    note_children(&tally, note, nlen);
}

/* The parent: `ti` plus every spool's threads, their functions after the parent's (each
 * thread's map composed with its spool's offset). Sets *all and *maps (free both after
 * the merge); returns 0 or -ENOMEM. */
int gt_children__add(struct gt_run *run, struct gt_trace_input *ti, struct gt_emit_meta *m,
                     struct gt_thread_input **all, uint32_t **maps)
{
    size_t nthreads = ti->nthreads, nmap = 0;
    uint64_t nfuncs = ti->nfuncs;
    *all = NULL;
    *maps = NULL;
    for (size_t k = 0; k < run->nspools; k++) {
        const struct gt_spool *sp = run->spools[k];
        nthreads += sp->nthreads;
        nfuncs += sp->nfuncs;
        for (size_t i = 0; i < sp->nthreads; i++)
            nmap += sp->threads[i].func_map ? sp->threads[i].func_map_len : sp->nfuncs;
    }
    if (nfuncs >= GT_CALL_REC_FUNC_LIMIT)
        return -E2BIG;
    run->all_funcs = calloc(nfuncs ? nfuncs : 1, sizeof(*run->all_funcs));
    *all = calloc(nthreads ? nthreads : 1, sizeof(**all));
    *maps = calloc(nmap ? nmap : 1, sizeof(**maps));
    if (!run->all_funcs || !*all || !*maps)
        return -ENOMEM;
    /* (memcpy's pointers must not be NULL, even for no bytes: no functions traced) */
    if (ti->nfuncs)
        memcpy(run->all_funcs, ti->funcs, ti->nfuncs * sizeof(*ti->funcs));
    if (ti->nthreads)
        memcpy(*all, ti->threads, ti->nthreads * sizeof(*ti->threads));
    uint32_t base = ti->nfuncs;
    size_t at = ti->nthreads;
    uint32_t *map = *maps;
    for (size_t k = 0; k < run->nspools; k++) {
        const struct gt_spool *sp = run->spools[k];
        if (sp->nfuncs)
            memcpy(run->all_funcs + base, sp->funcs, sp->nfuncs * sizeof(*sp->funcs));
        for (size_t i = 0; i < sp->nthreads; i++) {
            struct gt_thread_input *in = &(*all)[at++];
            *in = sp->threads[i];
            size_t len = in->func_map ? in->func_map_len : sp->nfuncs;
            for (size_t j = 0; j < len; j++) {
                uint32_t g = in->func_map ? in->func_map[j] : (uint32_t)j;
                map[j] = g == GT_NO_FUNC ? g : g + base;
            }
            in->func_map = map;
            in->func_map_len = len;
            map += len;
            /* Born during the parent's session; ended by the time it wrote its spool (its
             * first thread's GIL at its start is in the stream: spool.h). */
            in->flags &= ~(uint32_t)(GT_THREAD_EXISTED_AT_START | GT_THREAD_HELD_GIL_AT_START |
                                     GT_THREAD_ALIVE_AT_START);
            in->flags |= GT_THREAD_ENDED;
        }
        base += sp->nfuncs;
        m->event_count += sp->meta.event_count;
        m->dropped_events += sp->meta.dropped_events;
        m->gil_dropped += sp->meta.gil_dropped;
        m->sched_lost += sp->meta.sched_lost;
        m->calls_aggregated += sp->meta.calls_aggregated;
        m->gil_aggregated += sp->meta.gil_aggregated;
        m->sched_aggregated += sp->meta.sched_aggregated;
    }
    ti->funcs = run->all_funcs;
    ti->nfuncs = (uint32_t)nfuncs;
    ti->threads = *all;
    ti->nthreads = nthreads;
    return 0;
}

int gt_children__budget_pool(const char *children, const char *spool, uint64_t max_events,
                             struct gt_budget_pool **out)
{
    *out = NULL;
    const char *from = children ? children : spool;
    const char *dash = spool && !children ? strrchr(spool, '-') : NULL;
    if (!from || (!children && !dash))
        return -EINVAL;
    size_t len = children ? strlen(children) : (size_t)(dash + 1 - spool);
    char path[PATH_LEN];
    if (snprintf(path, sizeof(path), "%.*sbudget", (int)len, from) >= (int)sizeof(path))
        return -ENAMETOOLONG;
    return children ? gt_budget_pool__create(path, max_events, out)
                    : gt_budget_pool__open(path, out);
}

/* The fds of a loaded probe, closed in a forked child (inherit.h). */
#define _GNU_SOURCE
#include "inherit.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Enough for every probe a process holds at once: the GIL probe and the lock-kind probe
 * (a third is the next session's, loaded while the last lingers). */
#define GT_PROBE_SLOTS 8

struct gt_probe_fds {
    pid_t owner;  /* the process whose fds these are */
    int *before;  /* sorted fds open before the load */
    int nbefore;
    int *fds;     /* the probe's: closed in a forked child */
    int nfds;
    int slot;     /* its place in registered[], or -1 */
};

/* Read by the atfork child handler, where only the forking thread runs: slots are set
 * and cleared atomically, and an object stays whole while it is registered. */
static _Atomic(struct gt_probe_fds *) registered[GT_PROBE_SLOTS];
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

/* In the child: close every registered probe's fds (close is async-signal-safe) and
 * forget them. The objects are the parent's copies: left to leak, as the probes' own
 * handles are (their free in the child only forgets them). */
static void close_in_child(void)
{
    for (int i = 0; i < GT_PROBE_SLOTS; i++) {
        struct gt_probe_fds *f = atomic_exchange(&registered[i], NULL);
        if (!f || f->owner == getpid())
            continue;
        for (int k = 0; k < f->nfds; k++)
            close(f->fds[k]);
        f->nfds = 0;
        f->slot = -1;
    }
}

static void register_atfork(void)
{
    pthread_atfork(NULL, NULL, close_in_child);
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* The fds open now, sorted (malloc'd into *out; *n). 0 or -errno. */
static int list_fds(int **out, int *n)
{
    DIR *d = opendir("/proc/self/fd");
    int *fds = NULL, cap = 0, len = 0, err = 0;
    struct dirent *e;

    *out = NULL;
    *n = 0;
    if (!d)
        return -errno;
    while ((e = readdir(d)) != NULL) {
        char *end;
        long fd = strtol(e->d_name, &end, 10);
        if (*end || end == e->d_name || fd == dirfd(d))
            continue;
        if (len == cap) {
            int *grown = realloc(fds, (size_t)(cap ? 2 * cap : 64) * sizeof(*fds));
            if (!grown) {
                err = -ENOMEM;
                goto cleanup;
            }
            fds = grown;
            cap = cap ? 2 * cap : 64;
        }
        fds[len++] = (int)fd;
    }
    qsort(fds, (size_t)len, sizeof(*fds), cmp_int);
    *out = fds;
    *n = len;
    fds = NULL;
cleanup:
    free(fds);
    closedir(d);
    return err;
}

/* A bpf map, program or link, or a perf event (a uprobe's, under a bpf link). */
static int kernel_probe_object(int fd)
{
    char path[32], target[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    ssize_t len = readlink(path, target, sizeof(target) - 1);
    if (len < 0)
        return 0;
    target[len] = '\0';
    return strncmp(target, "anon_inode:bpf", 14) == 0 ||
           strcmp(target, "anon_inode:[perf_event]") == 0;
}

int gt_probe_fds__before(struct gt_probe_fds **out)
{
    struct gt_probe_fds *f = calloc(1, sizeof(*f));
    int err;

    *out = NULL;
    if (!f)
        return -ENOMEM;
    f->slot = -1;
    f->owner = getpid();
    err = list_fds(&f->before, &f->nbefore);
    if (err) {
        free(f);
        return err;
    }
    *out = f;
    return 0;
}

int gt_probe_fds__after(struct gt_probe_fds *f, const int *extra, int nextra)
{
    int *now = NULL, nnow = 0, err;

    if (!f)
        return -EINVAL;
    err = list_fds(&now, &nnow);
    if (err)
        return err;
    f->fds = calloc((size_t)nnow + (size_t)(nextra > 0 ? nextra : 0) + 1, sizeof(*f->fds));
    if (!f->fds) {
        err = -ENOMEM;
        goto cleanup;
    }
    for (int i = 0; i < nnow; i++) {
        if (!bsearch(&now[i], f->before, (size_t)f->nbefore, sizeof(int), cmp_int) &&
            kernel_probe_object(now[i]))
            f->fds[f->nfds++] = now[i];
    }
    for (int i = 0; i < nextra; i++) {
        int dup = 0;
        for (int k = 0; k < f->nfds; k++)
            dup |= f->fds[k] == extra[i];
        if (extra[i] >= 0 && !dup)
            f->fds[f->nfds++] = extra[i];
    }
    pthread_once(&atfork_once, register_atfork);
    err = -ENOSPC;
    for (int i = 0; i < GT_PROBE_SLOTS && err; i++) {
        struct gt_probe_fds *empty = NULL;
        if (atomic_compare_exchange_strong(&registered[i], &empty, f)) {
            f->slot = i;
            err = 0;
        }
    }
cleanup:
    free(now);
    return err;
}

int gt_probe_fds__count(const struct gt_probe_fds *f)
{
    return f ? f->nfds : 0;
}

void gt_probe_fds__free(struct gt_probe_fds *f)
{
    if (!f)
        return;
    if (f->slot >= 0) {
        struct gt_probe_fds *self = f;
        atomic_compare_exchange_strong(&registered[f->slot], &self, NULL);
    }
    free(f->before);
    free(f->fds);
    free(f);
}

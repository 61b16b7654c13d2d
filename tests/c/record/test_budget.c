/* SPDX-License-Identifier: MIT */
/* Unit test of the budget shared across processes (core/record/budget.c and the
 * registry's gt_registry__share_budget): a parent and a forked child, each pushing until
 * refused from one pool, keep exactly the pool's events between them; a second
 * generation on the spent pool keeps none; a pool file is created only where none was,
 * and opened only as a regular file of the right size, never through a link. Plain C. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "budget.h"
#include "registry.h"

#include "check.h"

enum { CAP = 50001 };

/* One generation on this thread, drawing from `pool`: GIL events pushed until refused;
 * returns how many were kept. With fds: after its first push it says so on ready[1] and
 * waits for the other process's on go[0] (both then draw from the pool at once). */
static uint64_t push_until_refused(struct gt_budget_pool *pool, const int *ready, const int *go)
{
    gt_registry__share_budget(pool->left);
    if (gt_registry__begin(0, NULL, NULL) != 0)
        return UINT64_MAX;
    struct gt_thread *t = gt_thread_current();
    char c = 1;
    for (uint64_t i = 1; t && !t->gil.dropped; i++) {
        gt_stream__push(&t->gil, i, 1, 0);
        if (i == 1 && ready && (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) != 1))
            break;
    }
    gt_registry__end();
    uint64_t kept = t ? gt_stream__count(&t->gil) : 0;
    gt_registry__release(NULL);
    gt_registry__share_budget(NULL);
    return kept;
}

static void run_two_processes(const char *path)
{
    struct gt_budget_pool *pool = NULL;
    CHECK(gt_budget_pool__create(path, CAP, &pool) == 0 && pool, "create");
    if (!pool)
        return;
    int fds[2], up[2], down[2];
    CHECK(pipe(fds) == 0 && pipe(up) == 0 && pipe(down) == 0, "pipes");
    pid_t pid = fork();
    if (pid == 0) {
        struct gt_budget_pool *mine = NULL;
        uint64_t kept = gt_budget_pool__open(path, &mine) == 0 ? push_until_refused(mine, up, down)
                                                               : 0;
        ssize_t n = write(fds[1], &kept, sizeof(kept));
        _exit(n == (ssize_t)sizeof(kept) ? 0 : 1);
    }
    uint64_t parent = push_until_refused(pool, down, up), child = 0;
    CHECK(read(fds[0], &child, sizeof(child)) == (ssize_t)sizeof(child), "the child's count");
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    CHECK(parent + child == CAP && parent > 0 && child > 0,
          "parent %llu + child %llu kept, the pool held %d", (unsigned long long)parent,
          (unsigned long long)child, CAP);
    CHECK(pool->left[GT_BUDGET_GIL] == 0 && pool->left[GT_BUDGET_CALLS] == CAP, "left");
    CHECK(push_until_refused(pool, NULL, NULL) == 0, "a spent pool grants nothing");
    for (int i = 0; i < 2; i++) {
        close(fds[i]);
        close(up[i]);
        close(down[i]);
    }
    gt_budget_pool__close(pool);
}

static void run_refusals(const char *dir, const char *path)
{
    struct gt_budget_pool *pool = NULL;
    CHECK(gt_budget_pool__create(path, CAP, &pool) == -EEXIST && !pool, "created twice");
    char link[4200], other[4200];
    snprintf(link, sizeof(link), "%s/link", dir);
    snprintf(other, sizeof(other), "%s/other", dir);
    CHECK(symlink(path, link) == 0, "symlink");
    CHECK(gt_budget_pool__open(link, &pool) == -ELOOP && !pool, "opened through a link");
    FILE *f = fopen(other, "w");
    if (f) {
        fputs("not a pool", f);
        fclose(f);
    }
    CHECK(gt_budget_pool__open(other, &pool) == -EINVAL && !pool, "a file of another size");
    CHECK(gt_budget_pool__open(dir, &pool) < 0 && !pool, "a folder");
    unlink(link);
    unlink(other);
}

int main(void)
{
    char dir[] = "/tmp/gt-test-budget-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    char path[4200];
    snprintf(path, sizeof(path), "%s/pool", dir);
    run_two_processes(path);
    run_refusals(dir, path);
    unlink(path);
    rmdir(dir);
    printf("test_budget: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

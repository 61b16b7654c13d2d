/* SPDX-License-Identifier: MIT */
/* One event budget across processes (budget.h). */
#include "budget.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static int map(int fd, struct gt_budget_pool **out)
{
    void *p = mmap(NULL, sizeof(**out), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int err = p == MAP_FAILED ? -errno : 0;
    close(fd);
    if (!err)
        *out = p;
    return err;
}

int gt_budget_pool__create(const char *path, uint64_t max_events, struct gt_budget_pool **out)
{
    *out = NULL;
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    struct gt_budget_pool init = {{0}};
    for (int k = GT_BUDGET_NONE + 1; k < GT_BUDGET_END; k++)
        init.left[k] = max_events;
    if (write(fd, &init, sizeof(init)) != (ssize_t)sizeof(init)) {
        int err = errno ? -errno : -EIO;
        close(fd);
        unlink(path);
        return err;
    }
    return map(fd, out);
}

int gt_budget_pool__open(const char *path, struct gt_budget_pool **out)
{
    *out = NULL;
    int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
        st.st_size != (off_t)sizeof(**out)) {
        close(fd);
        return -EINVAL;
    }
    return map(fd, out);
}

void gt_budget_pool__close(struct gt_budget_pool *pool)
{
    if (pool)
        munmap(pool, sizeof(*pool));
}

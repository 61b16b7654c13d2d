/* SPDX-License-Identifier: MIT */
/* A helper thread's own file descriptor table. Plain C. */
#ifndef GT_FD_TABLE_H
#define GT_FD_TABLE_H

/**
 * gt_fd_table__leave() - give the calling thread a private, empty fd table.
 *
 * While a second thread shares the process's table, every fd syscall of every thread
 * (os.fstat, read, ...) takes and drops a reference on its file: the kernel's fdget()
 * fast path is for a table that one thread uses. A helper thread of ours that leaves
 * the table keeps a single-threaded traced program on that fast path. The thread then
 * sees none of the process's fds (new ones it opens are its own and close when it
 * exits); the process's fds stay as they were.
 *
 * Returns 0, or -errno (-ENOSYS/-EINVAL: close_range(CLOSE_RANGE_UNSHARE) needs Linux
 * 5.9): the thread then still shares the process's table, which stays correct.
 */
int gt_fd_table__leave(void);

#endif /* GT_FD_TABLE_H */

/* SPDX-License-Identifier: MIT */
/* Unit test of the SIGTERM watcher (core/support/termwatch.c): it notes the signal and
 * chains to the handler it found (once, however often installed), leaves a default or
 * ignored disposition alone, gives the default back, and dies of the signal from a thread
 * that blocks every signal (a followed child's spooler). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "termwatch.h"

#include "check.h"

static volatile sig_atomic_t chained_calls;

static void chained(int sig)
{
    (void)sig;
    chained_calls++;
}

static void set_handler(void (*h)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = h;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
}

static void *die_blocked(void *arg)
{
    (void)arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    gt_termwatch__die();
    return NULL;
}

static void test_watch(void)
{
    set_handler(SIG_DFL);
    CHECK(gt_termwatch__install() == -EINVAL, "the default disposition is left alone");
    set_handler(SIG_IGN);
    CHECK(gt_termwatch__install() == -EINVAL, "an ignored SIGTERM stays ignored");
    set_handler(chained);
    CHECK(gt_termwatch__install() == 0, "over a handler");
    CHECK(gt_termwatch__install() == 0, "again: no change");
    CHECK(!gt_termwatch__seen(), "nothing seen yet");
    raise(SIGTERM);
    CHECK(gt_termwatch__seen(), "seen");
    CHECK(chained_calls == 1, "the handler found ran once: %d", (int)chained_calls);
    CHECK(gt_termwatch__default() == 0, "back to the default");
    struct sigaction now;
    sigaction(SIGTERM, NULL, &now);
    CHECK(!(now.sa_flags & SA_SIGINFO) && now.sa_handler == SIG_DFL, "the default");
    set_handler(chained); /* not the watcher's: default() leaves it */
    CHECK(gt_termwatch__default() == 0, "another's handler");
    sigaction(SIGTERM, NULL, &now);
    CHECK(now.sa_handler == chained, "kept");
}

static void test_die_from_a_thread_blocking_every_signal(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        set_handler(chained);
        gt_termwatch__install();
        pthread_t th;
        pthread_create(&th, NULL, die_blocked, NULL);
        pthread_join(th, NULL);
        _exit(3); /* (not reached) */
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork, wait");
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM, "died of SIGTERM: status %#x",
          status);
}

int main(void)
{
    test_watch();
    test_die_from_a_thread_blocking_every_signal();
    printf("test_termwatch: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

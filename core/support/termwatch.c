/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include "termwatch.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>

static struct sigaction chained; /* the handler found at install, called after the note */
static volatile sig_atomic_t seen;

static void on_term(int sig, siginfo_t *info, void *ctx)
{
    int saved = errno;
    seen = 1;
    if (chained.sa_flags & SA_SIGINFO)
        chained.sa_sigaction(sig, info, ctx);
    else if (chained.sa_handler != SIG_DFL && chained.sa_handler != SIG_IGN)
        chained.sa_handler(sig);
    errno = saved;
}

int gt_termwatch__install(void)
{
    struct sigaction now;
    if (sigaction(SIGTERM, NULL, &now) != 0)
        return -errno;
    if (!(now.sa_flags & SA_SIGINFO) && (now.sa_handler == SIG_DFL || now.sa_handler == SIG_IGN))
        return -EINVAL;
    if ((now.sa_flags & SA_SIGINFO) && now.sa_sigaction == on_term)
        return 0; /* (again, or a fork of a watching process: inherited) */
    chained = now;
    struct sigaction mine;
    memset(&mine, 0, sizeof(mine));
    mine.sa_sigaction = on_term;
    mine.sa_mask = now.sa_mask;
    mine.sa_flags = (now.sa_flags & ~SA_RESETHAND) | SA_SIGINFO;
    if (sigaction(SIGTERM, &mine, NULL) != 0)
        return -errno;
    return 0;
}

int gt_termwatch__default(void)
{
    struct sigaction now, dfl;
    if (sigaction(SIGTERM, NULL, &now) != 0)
        return -errno;
    if (!(now.sa_flags & SA_SIGINFO) || now.sa_sigaction != on_term)
        return 0;
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    return sigaction(SIGTERM, &dfl, NULL) != 0 ? -errno : 0;
}

int gt_termwatch__seen(void)
{
    return seen != 0;
}

int gt_termwatch__die(void)
{
    struct sigaction dfl;
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    if (sigaction(SIGTERM, &dfl, NULL) != 0)
        return -errno;
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    int err = pthread_sigmask(SIG_UNBLOCK, &term, NULL);
    if (err)
        return -err;
    if (raise(SIGTERM) != 0) /* (unblocked here: delivered before raise returns) */
        return -errno;
    return -EINTR; /* (not reached) */
}

/* SPDX-License-Identifier: MIT */
/* The stack sampler's clock (see sampler.h). */
#include "sampler.h"

#include "gt_clock.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct gt_sampler {
    pthread_t thread;
    struct gt_sampler_ops ops;
    atomic_int stopping;
    _Atomic int32_t tid;
    struct gt_sampler_stats st; /* written by the sampler thread, read after the join */
    pthread_mutex_t lock;       /* with `wake`: stop interrupts the sleep */
    pthread_cond_t wake;
};

/* Sleeps until `deadline` (CLOCK_MONOTONIC ns) or stop. Returns nonzero when stopping. */
static int sleep_until(struct gt_sampler *s, uint64_t deadline)
{
    struct timespec ts = {(time_t)(deadline / 1000000000ull), (long)(deadline % 1000000000ull)};
    pthread_mutex_lock(&s->lock);
    while (!atomic_load(&s->stopping)) {
        int rc = pthread_cond_timedwait(&s->wake, &s->lock, &ts);
        if (rc == ETIMEDOUT)
            break;
    }
    pthread_mutex_unlock(&s->lock);
    return atomic_load(&s->stopping);
}

static void *run(void *arg)
{
    struct gt_sampler *s = arg;
    atomic_store(&s->tid, (int32_t)syscall(SYS_gettid));
    if (s->ops.begin && s->ops.begin(s->ops.ctx) < 0)
        return NULL;
    uint64_t next = gt_now_ns() + s->st.interval_ns;
    while (!sleep_until(s, next)) {
        uint64_t held = 0, waited = 0;
        if (s->ops.take(s->ops.ctx, &held, &waited) < 0) {
            s->st.failed++;
        } else {
            s->st.samples++;
            s->st.held_ns += held;
            s->st.waited_ns += waited;
            if (held > s->st.max_held_ns)
                s->st.max_held_ns = held;
        }
        /* A take that ran past the next tick (a long wait for the GIL) skips it: the
         * samples stay on the schedule, each standing for one interval. */
        next += s->st.interval_ns;
        uint64_t now = gt_now_ns();
        if (now >= next) {
            uint64_t behind = (now - next) / s->st.interval_ns + 1;
            s->st.skipped += behind;
            next += behind * s->st.interval_ns;
        }
    }
    if (s->ops.end)
        s->ops.end(s->ops.ctx);
    return NULL;
}

int gt_sampler__start(struct gt_sampler **out, uint64_t interval_ns,
                      const struct gt_sampler_ops *ops)
{
    if (!interval_ns || !ops || !ops->take)
        return -EINVAL;
    struct gt_sampler *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->ops = *ops;
    s->st.interval_ns = interval_ns;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->wake, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&s->lock, NULL);
    /* Signals are for the interpreter's threads (a process-directed one taken here would
     * not interrupt the main thread's wait), not for the sampler. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&s->thread, NULL, run, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        pthread_cond_destroy(&s->wake);
        pthread_mutex_destroy(&s->lock);
        free(s);
        return -rc;
    }
    *out = s;
    return 0;
}

void gt_sampler__stop(struct gt_sampler *s, struct gt_sampler_stats *st)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    atomic_store(&s->stopping, 1);
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
    s->st.tid = atomic_load(&s->tid);
    if (st)
        *st = s->st;
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

int32_t gt_sampler__tid(const struct gt_sampler *s)
{
    return s ? atomic_load(&((struct gt_sampler *)s)->tid) : 0;
}

/* SPDX-License-Identifier: MIT */
/* A stand-in for the interpreter object, for test_gilhook: a shared library that
 * makes take_gil/drop_gil's pthread calls through its own GOT on a struct laid out
 * like CPython 3.9-3.13's _gil_runtime_state, so the hooks can be installed,
 * calibrated and driven without Python. */
#include "fake_interp.h"

#include <errno.h>

struct fake_gil fake_gil = {
    .interval = 5000,
    .cond = PTHREAD_COND_INITIALIZER,
    .mutex = PTHREAD_MUTEX_INITIALIZER,
    .switch_cond = PTHREAD_COND_INITIALIZER,
    .switch_mutex = PTHREAD_MUTEX_INITIALIZER,
};

void fake_interp_symbol(void)
{
}

/* drop_gil: lock(mutex) signal(cond); nobody was asked to switch. */
void fake_drop(void)
{
    pthread_mutex_lock(&fake_gil.mutex);
    __atomic_store_n(&fake_gil.locked, 0, __ATOMIC_RELAXED);
    pthread_cond_signal(&fake_gil.cond);
    pthread_mutex_unlock(&fake_gil.mutex);
}

/* take_gil for an uncontended GIL: lock(mutex) lock(switch_mutex) signal(switch_cond). */
void fake_take(void *tstate)
{
    pthread_mutex_lock(&fake_gil.mutex);
    pthread_mutex_lock(&fake_gil.switch_mutex);
    __atomic_store_n(&fake_gil.locked, 1, __ATOMIC_RELAXED);
    if (fake_gil.last_holder != tstate) {
        fake_gil.last_holder = tstate;
        fake_gil.switch_number++;
    }
    pthread_cond_signal(&fake_gil.switch_cond);
    pthread_mutex_unlock(&fake_gil.switch_mutex);
    pthread_mutex_unlock(&fake_gil.mutex);
}

void fake_drop_and_retake(void *tstate)
{
    fake_drop();
    fake_take(tstate);
}

/* One timed wait of take_gil's loop while another thread holds the GIL. Under the
 * mutex, just before the wait (which releases it), the deadline is set `timeout_ns`
 * from now and stored in `*deadline`, then `waiting` is set: whoever takes the mutex
 * after seeing `waiting` and before the deadline knows the wait has not ended. */
int fake_timed_wait(long timeout_ns, struct timespec *deadline, int *waiting)
{
    pthread_mutex_lock(&fake_gil.mutex);
    clock_gettime(CLOCK_REALTIME, deadline);
    deadline->tv_sec += timeout_ns / 1000000000l;
    deadline->tv_nsec += timeout_ns % 1000000000l;
    if (deadline->tv_nsec >= 1000000000l) {
        deadline->tv_sec++;
        deadline->tv_nsec -= 1000000000l;
    }
    __atomic_store_n(waiting, 1, __ATOMIC_RELEASE);
    int rc;
    do
        rc = pthread_cond_timedwait(&fake_gil.cond, &fake_gil.mutex, deadline);
    while (rc == 0); /* nobody signals: only the timeout ends it */
    pthread_mutex_unlock(&fake_gil.mutex);
    return rc;
}

/* _PySemaphore_PlatformWait without a timeout, and _PySemaphore_Wakeup. */
int fake_park(sem_t *s)
{
    int rc;
    do
        rc = sem_wait(s);
    while (rc != 0 && errno == EINTR);
    return rc;
}

int fake_unpark(sem_t *s)
{
    return sem_post(s);
}

/* SPDX-License-Identifier: MIT */
/* See fake_interp.c. */
#ifndef FAKE_INTERP_H
#define FAKE_INTERP_H

#include <pthread.h>
#include <semaphore.h>
#include <time.h>

#define FAKE_API __attribute__((visibility("default")))

/* _gil_runtime_state of CPython 3.9-3.13 (default build). */
struct fake_gil {
    unsigned long interval;
    void *last_holder;
    int locked;
    unsigned long switch_number;
    pthread_cond_t cond;
    pthread_mutex_t mutex;
    pthread_cond_t switch_cond;
    pthread_mutex_t switch_mutex;
};

FAKE_API extern struct fake_gil fake_gil;
FAKE_API void fake_interp_symbol(void);
FAKE_API void fake_drop(void);
FAKE_API void fake_take(void *tstate);
FAKE_API void fake_drop_and_retake(void *tstate);
FAKE_API int fake_timed_wait(long timeout_ns, struct timespec *deadline, int *waiting);

/* The parking lot's semaphore calls (_PySemaphore_PlatformWait / _PySemaphore_Wakeup). */
FAKE_API int fake_park(sem_t *s);
FAKE_API int fake_unpark(sem_t *s);

#endif /* FAKE_INTERP_H */

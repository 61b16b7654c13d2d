/* SPDX-License-Identifier: MIT */
/* Contracts checked wherever assert() is (GT_ASSERTS: the unit tests', sanitizers' and
 * fuzzers' builds); an NDEBUG build leaves them out, so the hot paths pay nothing. */
#ifndef GT_ASSERT_H
#define GT_ASSERT_H

#include <assert.h>
#include <errno.h>
#include <pthread.h>

/* A function whose contract is "lock held": a trylock that gets the lock proves the
 * caller did not hold it (one that fails cannot tell whose it is: the check is
 * one-sided). */
#ifdef NDEBUG
#define GT_ASSERT_HELD(m) ((void)0)
#else
static inline int gt_lock_held(pthread_mutex_t *m)
{
    int err = pthread_mutex_trylock(m);
    if (err == 0)
        pthread_mutex_unlock(m);
    return err == EBUSY;
}
#define GT_ASSERT_HELD(m) assert(gt_lock_held(m))
#endif

#endif

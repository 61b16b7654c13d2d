/* SPDX-License-Identifier: MIT */
/* Other interpreters' thread states under the runtime's HEAD_LOCK (see heads.h). The
 * only file that includes CPython's internal headers: the lock is a field of _PyRuntime.
 * ThreadSanitizer cannot see that lock (a PyMutex in the uninstrumented interpreter):
 * tools/tsan-ft.supp names these functions. */
#define PY_SSIZE_T_CLEAN
#define Py_BUILD_CORE_MODULE 1
#include <Python.h>

#include "heads.h"

#if PY_VERSION_HEX >= 0x030C0000
#include "internal/pycore_runtime.h"
#if PY_VERSION_HEX >= 0x030D0000
#include <sched.h>

/* Taken as CPython's own HEAD_LOCK takes it, never detaching (the caller keeps its
 * GIL), but spinning rather than parking: its parking call is not exported before
 * 3.14, and the lock is held for a few list steps. */
static void head_lock(void)
{
    uint8_t *bits = &_PyRuntime.interpreters.mutex._bits;
    for (;;) {
        uint8_t v = __atomic_load_n(bits, __ATOMIC_RELAXED);
        if (!(v & _Py_LOCKED) &&
            __atomic_compare_exchange_n(bits, &v, (uint8_t)(v | _Py_LOCKED), 0, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED))
            return;
        sched_yield();
    }
}

static void head_unlock(void)
{
    PyMutex_Unlock(&_PyRuntime.interpreters.mutex);
}
#else
static void head_lock(void)
{
    PyThread_acquire_lock(_PyRuntime.interpreters.mutex, WAIT_LOCK);
}

static void head_unlock(void)
{
    PyThread_release_lock(_PyRuntime.interpreters.mutex);
}
#endif

int gt_heads__has_thread(uint64_t ident)
{
    int found = 0;
    head_lock();
    for (PyInterpreterState *in = _PyRuntime.interpreters.head; in && !found; in = in->next)
        for (PyThreadState *ts = in->threads.head; ts && !found; ts = ts->next)
            found = (uint64_t)ts->thread_id == ident;
    head_unlock();
    return found;
}

void gt_heads__each_thread(PyInterpreterState *in, void (*fn)(PyThreadState *ts, void *ctx),
                           void *ctx)
{
    head_lock();
    for (PyThreadState *ts = in->threads.head; ts; ts = ts->next)
        fn(ts, ctx);
    head_unlock();
}

void gt_heads__each(void (*fn)(PyInterpreterState *in, void *ctx), void *ctx)
{
    head_lock();
    for (PyInterpreterState *in = _PyRuntime.interpreters.head; in; in = in->next)
        fn(in, ctx);
    head_unlock();
}

int32_t gt_heads__native_id_locked(PyInterpreterState *in, PyThreadState *ts)
{
    for (PyThreadState *t = in->threads.head; t; t = t->next)
        if (t == ts)
            return (int32_t)t->native_thread_id;
    return 0;
}
#else
/* One GIL for every interpreter: its holder reads their lists. */
int gt_heads__has_thread(uint64_t ident)
{
    for (PyInterpreterState *in = PyInterpreterState_Head(); in; in = PyInterpreterState_Next(in))
        for (PyThreadState *ts = PyInterpreterState_ThreadHead(in); ts; ts = PyThreadState_Next(ts))
                if ((uint64_t)ts->thread_id == ident)
                    return 1;
    return 0;
}

void gt_heads__each_thread(PyInterpreterState *in, void (*fn)(PyThreadState *ts, void *ctx),
                           void *ctx)
{
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(in); ts; ts = PyThreadState_Next(ts))
        fn(ts, ctx);
}

void gt_heads__each(void (*fn)(PyInterpreterState *in, void *ctx), void *ctx)
{
    for (PyInterpreterState *in = PyInterpreterState_Head(); in; in = PyInterpreterState_Next(in))
        fn(in, ctx);
}

int32_t gt_heads__native_id_locked(PyInterpreterState *in, PyThreadState *ts)
{
    (void)in;
    (void)ts;
    return 0;
}
#endif

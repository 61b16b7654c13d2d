/* SPDX-License-Identifier: MIT */
/* Other interpreters' thread states, read under the runtime's lock on the lists of
 * interpreters and thread states (HEAD_LOCK). An interpreter with a GIL of its own
 * (PEP 684) makes, unlinks and frees its thread states holding that GIL and this lock,
 * never the main GIL; and a thread without any GIL may add one to any list. A walk under
 * the main GIL alone may read a thread state being freed. The lock is internal (3.12+);
 * older interpreters all share one GIL. */
#ifndef GT_HEADS_H
#define GT_HEADS_H

#include <stdint.h>

typedef struct _is PyInterpreterState;
typedef struct _ts PyThreadState;

/** gt_heads__has_thread() - has any interpreter a thread state of the thread whose
 * threading ident is `ident`? */
int gt_heads__has_thread(uint64_t ident);

/** gt_heads__each_thread() - calls fn(ts, ctx) for each thread state of `in`, under the
 * lock: fn takes no lock and may not detach (a free-threaded build's world stopped
 * first, as CPython's own sys._current_frames does). */
void gt_heads__each_thread(PyInterpreterState *in, void (*fn)(PyThreadState *ts, void *ctx),
                           void *ctx);

/** gt_heads__each() - calls fn(in, ctx) for every interpreter, under the lock: fn takes
 * no lock (and calls no Python). */
void gt_heads__each(void (*fn)(PyInterpreterState *in, void *ctx), void *ctx);

/** gt_heads__native_id_locked() - in gt_heads__each's fn: the native thread id of `ts`
 * if it is one of `in`'s thread states (else 0: it may have been freed, so it is not
 * read). */
int32_t gt_heads__native_id_locked(PyInterpreterState *in, PyThreadState *ts);

#endif /* GT_HEADS_H */

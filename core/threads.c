/* SPDX-License-Identifier: MIT */
/* Thread registry and block pool (see threads.h). */
#define _GNU_SOURCE
#include "threads.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "merge.h"

atomic_int gt_recording;
_Atomic uint64_t gt_registry_gen;
__thread struct gt_tls gt_tls;

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t last_gen;
static struct gt_thread *threads;     /* records of the current/last generation */
static struct gt_block *pool;         /* free blocks */
static size_t pool_size;
static gt_thread_cb on_new_thread;
static void *on_new_ctx;
/* Call-event budget in events; guarded by reg_lock. */
static uint64_t call_events_left;
static int call_events_limited;

/* Keep at most this many free blocks (64 MiB) between sessions. */
#define POOL_KEEP 1024

static struct gt_block *block_get(void)
{
    struct gt_block *b = pool;
    if (b) {
        pool = b->next;
        pool_size--;
    } else {
        b = aligned_alloc(64, GT_BLOCK_BYTES);
        if (!b)
            return NULL;
        /* Touch every page now rather than at event time. */
        memset(b, 0, GT_BLOCK_BYTES);
    }
    b->next = NULL;
    b->n = 0;
    return b;
}

static void block_put_list(struct gt_block *b)
{
    while (b) {
        struct gt_block *next = b->next;
        if (pool_size < POOL_KEEP) {
            b->next = pool;
            pool = b;
            pool_size++;
        } else {
            free(b);
        }
        b = next;
    }
}

static char *block_events(struct gt_block *b)
{
    return (char *)b + GT_BLOCK_HEADER;
}

int gt_stream__grow(struct gt_stream *s)
{
    int err = 0;
    pthread_mutex_lock(&reg_lock);
    if (atomic_load(&gt_registry_gen) == 0) { /* the session ended */
        err = -ESRCH;
        goto cleanup;
    }
    size_t room = GT_BLOCK_EVENTS;
    if (s->capped && call_events_limited) {
        if (call_events_left == 0) {
            err = -ENOSPC;
            goto cleanup;
        }
        /* Hand out at most a 16th of what is left (and at least 256), so that threads
         * that stop early cannot strand much of the budget in their last block. */
        uint64_t share = call_events_left / 16 < 256 ? 256 : call_events_left / 16;
        if (share < room)
            room = (size_t)share;
        if (call_events_left < room)
            room = (size_t)call_events_left;
    }
    struct gt_block *b = block_get();
    if (!b) {
        err = -ENOMEM;
        goto cleanup;
    }
    if (s->capped && call_events_limited)
        call_events_left -= room;
    if (s->tail) {
        s->tail->n = (size_t)((char *)s->cur - block_events(s->tail)) / 16;
        s->count += s->tail->n;
        s->tail->next = b;
    } else {
        s->head = b;
    }
    s->tail = b;
    s->cur = block_events(b);
    s->lim = block_events(b) + room * 16; /* the last block may be cut to the budget */
cleanup:
    pthread_mutex_unlock(&reg_lock);
    return err;
}

static void stream_close(struct gt_stream *s)
{
    if (s->tail && s->cur) {
        s->tail->n = (size_t)((char *)s->cur - block_events(s->tail)) / 16;
        s->count += s->tail->n;
    }
    /* Further pushes must grow (and will be refused once the generation ended). */
    s->cur = s->lim = NULL;
}

uint64_t gt_stream__count(const struct gt_stream *s)
{
    return s->count;
}

size_t gt_stream__chunks(const struct gt_stream *s, struct gt_chunk *out, size_t max)
{
    size_t k = 0;
    for (struct gt_block *b = s->head; b; b = b->next) {
        if (b->n == 0)
            continue;
        if (k < max) {
            out[k].data = block_events(b);
            out[k].n = b->n;
        }
        k++;
    }
    return k;
}

void gt_stream__each(struct gt_stream *s, gt_block_fn fn, void *ctx)
{
    for (struct gt_block *b = s->head; b; b = b->next)
        if (b->n)
            fn(block_events(b), b->n, ctx);
}

/* A forked child (e.g. a multiprocessing worker) records nothing of the parent's
 * session: its copies of the parent's records are dropped (never freed: they are the
 * parent's memory image) and the lock, possibly held by a parent thread at fork(), is
 * made usable again, so the child can run a session of its own. */
static void atfork_child(void)
{
    pthread_mutex_init(&reg_lock, NULL);
    atomic_store(&gt_recording, 0);
    atomic_store(&gt_registry_gen, 0);
    threads = NULL;
    on_new_thread = NULL;
    on_new_ctx = NULL;
}

static void register_atfork(void)
{
    pthread_atfork(NULL, NULL, atfork_child);
}

int gt_registry__begin(uint64_t max_call_events, gt_thread_cb on_new, void *ctx)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    int err = 0;
    pthread_once(&once, register_atfork);
    pthread_mutex_lock(&reg_lock);
    if (atomic_load(&gt_registry_gen) != 0) {
        err = -EBUSY;
        goto cleanup;
    }
    if (threads) { /* the previous generation was not released */
        err = -EBUSY;
        goto cleanup;
    }
    call_events_limited = max_call_events != 0;
    call_events_left = max_call_events;
    on_new_thread = on_new;
    on_new_ctx = ctx;
    atomic_store(&gt_registry_gen, ++last_gen);
cleanup:
    pthread_mutex_unlock(&reg_lock);
    return err;
}

static struct gt_thread *find_locked(int32_t tid)
{
    for (struct gt_thread *t = threads; t; t = t->next)
        if (t->tid == tid)
            return t;
    return NULL;
}

/* Returns the record and whether it is new. reg_lock held. */
static struct gt_thread *register_locked(int32_t tid, uint32_t flags, int *is_new)
{
    struct gt_thread *t = find_locked(tid);
    *is_new = 0;
    if (t) {
        t->flags |= flags;
        return t;
    }
    t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->tid = tid;
    t->pid = (int32_t)getpid();
    t->flags = flags;
    t->gen = atomic_load(&gt_registry_gen);
    t->calls.capped = 1;
    t->next = threads;
    threads = t;
    *is_new = 1;
    return t;
}

struct gt_thread *gt_registry__register(int32_t tid, uint32_t flags)
{
    int is_new = 0;
    pthread_mutex_lock(&reg_lock);
    struct gt_thread *t = NULL;
    if (atomic_load(&gt_registry_gen) == 0)
        errno = ESRCH;
    else if (!(t = register_locked(tid, flags, &is_new)))
        errno = ENOMEM;
    gt_thread_cb cb = on_new_thread;
    void *ctx = on_new_ctx;
    pthread_mutex_unlock(&reg_lock);
    if (t && is_new && cb)
        cb(t, ctx);
    return t;
}

struct gt_thread *gt_thread__current_slow(void)
{
    uint64_t gen = atomic_load(&gt_registry_gen);
    if (gen == 0)
        return NULL;
    int32_t tid = (int32_t)syscall(SYS_gettid);
    int is_new = 0;
    pthread_mutex_lock(&reg_lock);
    struct gt_thread *t = NULL;
    if (atomic_load(&gt_registry_gen) == gen)
        t = register_locked(tid, 0, &is_new);
    if (t)
        t->ident = (uint64_t)pthread_self();
    gt_thread_cb cb = on_new_thread;
    void *ctx = on_new_ctx;
    pthread_mutex_unlock(&reg_lock);
    if (!t)
        return NULL;
    if (is_new && cb)
        cb(t, ctx);
    gt_tls.thread = t;
    gt_tls.gen = gen;
    return t;
}

void gt_registry__end(void)
{
    atomic_store(&gt_recording, 0);
    pthread_mutex_lock(&reg_lock);
    atomic_store(&gt_registry_gen, 0);
    pthread_mutex_unlock(&reg_lock);
    /* A hook that read the generation just before may still be pushing; the GIL
     * (for calls) and the caller's ordering (stop after disabling hooks) make that
     * window empty for calls. GIL/sched producers are quiesced by their owners. */
    pthread_mutex_lock(&reg_lock);
    for (struct gt_thread *t = threads; t; t = t->next) {
        stream_close(&t->calls);
        stream_close(&t->gil);
        stream_close(&t->sched);
        stream_close(&t->gil_check);
    }
    pthread_mutex_unlock(&reg_lock);
}

struct gt_thread *gt_registry__threads(void)
{
    return threads;
}

void gt_registry__totals(uint64_t *recorded, uint64_t *dropped)
{
    uint64_t r = 0, d = 0;
    for (struct gt_thread *t = threads; t; t = t->next) {
        r += t->calls.count;
        d += t->calls.dropped;
    }
    *recorded = r;
    *dropped = d;
}

void gt_registry__release(void (*free_state)(struct gt_thread *t))
{
    pthread_mutex_lock(&reg_lock);
    struct gt_thread *t = threads;
    threads = NULL;
    while (t) {
        struct gt_thread *next = t->next;
        if (free_state)
            free_state(t);
        block_put_list(t->calls.head);
        block_put_list(t->gil.head);
        block_put_list(t->sched.head);
        block_put_list(t->gil_check.head);
        free(t);
        t = next;
    }
    pthread_mutex_unlock(&reg_lock);
}

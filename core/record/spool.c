/* SPDX-License-Identifier: MIT */
/* The child-process spool (spool.h). Layout: magic, version, the meta, the counts, then
 * the functions and the threads; strings are stored with their NUL and every array
 * starts 8-byte aligned, so the reader points into the file's bytes instead of copying. */
#include "spool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char MAGIC[8] = {'G', 'T', 'S', 'P', 'O', 'O', 'L', '1'};
#define NO_NAME UINT32_MAX
#define VERSION 2
#define ALIGN 8 /* every array starts ALIGN-byte aligned */
/* The least a function (two absent strings, line, flags) and a thread (its head) take:
 * the reader refuses counts the file is too short for before it allocates. */
#define MIN_FUNC_BYTES 16
#define MIN_THREAD_BYTES 64
/* The least a spool takes: the magic at both ends, version and meta size, the meta, the
 * counts of functions and threads. */
#define MIN_SPOOL_BYTES (sizeof(MAGIC) * 2 + 8 + sizeof(struct gt_spool_meta) + 16)

/* Each record's fields in file order, once: the writer and the reader are both made from
 * these lists (put_<record> and get_<record> below), so they cannot drift apart. A list
 * names its fields by kind: U32, I32, U64 and F64 (native order), STR (put_str),
 * ARRAY(ptr, count, most) (the count as u64, then the elements; the reader refuses a
 * count over `most`), ZERO32() (four reserved zero bytes) and PAD() (to 8 bytes). */

/* An aggregate (struct gt_coalesced; 8-byte aligned throughout). */
#define COALESCED_FIELDS(U32, I32, U64, F64, STR, ARRAY, ZERO32, PAD)                        \
    ARRAY(lead, nlead, UINT64_MAX)                                                           \
    U64(base)                                                                                \
    F64(width_ns)                                                                            \
    ARRAY(tiles, ntiles, GT_COALESCED_TILES)                                                 \
    U64(first)                                                                               \
    U64(last)                                                                                \
    U32(first_kind)                                                                          \
    U32(state)                                                                               \
    U32(aux)                                                                                 \
    ZERO32()                                                                                 \
    U64(events)                                                                              \
    U64(acquisitions)                                                                        \
    U64(drop_requests)                                                                       \
    U64(longest_wait_ns)                                                                     \
    U64(wait_since)

/* A per-thread call tree (struct gt_calltree). */
#define CALLTREE_FIELDS(U32, I32, U64, F64, STR, ARRAY, ZERO32, PAD)                         \
    ARRAY(nodes, n, UINT64_MAX)                                                              \
    U32(cur)                                                                                 \
    U32(cur_py)                                                                              \
    U64(first)                                                                               \
    U64(last)                                                                                \
    U64(events)                                                                              \
    ARRAY(tile_node, ntiles, UINT64_MAX)                                                     \
    PAD()                                                                                    \
    U64(tile_base)                                                                           \
    F64(tile_width_ns)

/* A thread's identity (struct gt_thread_input), before its function map and streams. */
#define THREAD_HEAD_FIELDS(U32, I32, U64, F64, STR, ARRAY, ZERO32, PAD)                      \
    PAD()                                                                                    \
    I32(tid)                                                                                 \
    I32(pid)                                                                                 \
    U64(ident)                                                                               \
    U32(flags)                                                                               \
    U32(interp)                                                                              \
    U64(calls_truncated_at)                                                                  \
    STR(name)                                                                                \
    PAD()

/* A function (struct gt_func). */
#define FUNC_FIELDS(U32, I32, U64, F64, STR, ARRAY, ZERO32, PAD)                             \
    STR(name)                                                                                \
    STR(file)                                                                                \
    U32(line)                                                                                \
    U32(flags)

/* The writer's and the reader's view of one field of record `c`. */
#define W_U32(f) put_u32(w, c->f);
#define W_I32(f) put_u32(w, (uint32_t)c->f);
#define W_U64(f) put_u64(w, c->f);
#define W_F64(f) put_f64(w, c->f);
#define W_STR(f) put_str(w, c->f);
#define W_ARRAY(p, count, most)                                                              \
    put_u64(w, c->count);                                                                    \
    put(w, c->p, c->count * sizeof(*c->p));
#define W_ZERO32() put_u32(w, 0);
#define W_PAD() pad(w);
#define WRITER W_U32, W_I32, W_U64, W_F64, W_STR, W_ARRAY, W_ZERO32, W_PAD

#define R_U32(f) c->f = get_u32(r);
#define R_I32(f) c->f = (int32_t)get_u32(r);
#define R_U64(f) c->f = get_u64(r);
#define R_F64(f) c->f = get_f64(r);
#define R_STR(f) c->f = get_str(r);
#define R_ARRAY(p, count, most)                                                              \
    {                                                                                        \
        uint64_t len_ = get_count(r, most);                                                  \
        c->p = get_array(r, len_, sizeof(*c->p));                                            \
        c->count = (size_t)len_;                                                             \
    }
#define R_ZERO32() get_u32(r);
#define R_PAD() skip_pad(r);
#define READER R_U32, R_I32, R_U64, R_F64, R_STR, R_ARRAY, R_ZERO32, R_PAD

/* Expands LIST with the kinds' macros of a side: FIELDS(COALESCED_FIELDS, WRITER). */
#define FIELDS(LIST, SIDE) FIELDS_(LIST, SIDE)
#define FIELDS_(LIST, ...) LIST(__VA_ARGS__)

struct wr {
    FILE *f;
    uint64_t off;
    int err;
};

static void put(struct wr *w, const void *p, size_t n)
{
    if (w->err || !n)
        return;
    if (fwrite(p, 1, n, w->f) != n)
        w->err = -EIO;
    w->off += n;
}

static void pad(struct wr *w)
{
    static const char zero[ALIGN];
    put(w, zero, (size_t)(-w->off & (ALIGN - 1u)));
}

static void put_u32(struct wr *w, uint32_t v) { put(w, &v, sizeof(v)); }
static void put_u64(struct wr *w, uint64_t v) { put(w, &v, sizeof(v)); }

static void put_str(struct wr *w, const char *s)
{
    if (!s) {
        put_u32(w, NO_NAME);
        return;
    }
    size_t n = strlen(s) + 1;
    put_u32(w, (uint32_t)n);
    put(w, s, n);
}

static uint64_t chunk_total(const struct gt_chunk *c, size_t n)
{
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += c[i].n;
    return total;
}

static void put_chunks(struct wr *w, const struct gt_chunk *c, size_t n, size_t size)
{
    for (size_t i = 0; i < n; i++)
        put(w, c[i].data, c[i].n * size);
}

static void put_f64(struct wr *w, double v) { put(w, &v, sizeof(v)); }

static void put_coalesced(struct wr *w, const struct gt_coalesced *c)
{
    FIELDS(COALESCED_FIELDS, WRITER)
}

static void put_calltree(struct wr *w, const struct gt_calltree *c)
{
    FIELDS(CALLTREE_FIELDS, WRITER)
}

/* Which aggregates follow (bits 1 gil, 2 sched, 4 calls), then each. */
static void put_more(struct wr *w, const struct gt_thread_input *t)
{
    put_u32(w, (t->gil_more ? 1u : 0) | (t->sched_more ? 2u : 0) | (t->calls_more ? 4u : 0));
    put_u32(w, 0);
    if (t->gil_more)
        put_coalesced(w, t->gil_more);
    if (t->sched_more)
        put_coalesced(w, t->sched_more);
    if (t->calls_more)
        put_calltree(w, t->calls_more);
}

static void put_thread_head(struct wr *w, const struct gt_thread_input *c)
{
    FIELDS(THREAD_HEAD_FIELDS, WRITER)
}

static void put_func(struct wr *w, const struct gt_func *c)
{
    FIELDS(FUNC_FIELDS, WRITER)
}

int gt_spool__write(FILE *f, const struct gt_trace_input *ti, const struct gt_spool_meta *m)
{
    struct wr w = {f, 0, 0};
    if (!f || !ti || !m)
        return -EINVAL;
    put(&w, MAGIC, sizeof(MAGIC));
    put_u32(&w, VERSION);
    put_u32(&w, (uint32_t)sizeof(*m));
    put(&w, m, sizeof(*m));
    put_u32(&w, ti->nfuncs);
    put_u32(&w, 0);
    put_u64(&w, ti->nthreads);
    for (uint32_t i = 0; i < ti->nfuncs; i++)
        put_func(&w, &ti->funcs[i]);
    for (size_t i = 0; i < ti->nthreads; i++) {
        const struct gt_thread_input *t = &ti->threads[i];
        int held = (t->flags & GT_THREAD_HELD_GIL_AT_START) != 0;
        put_thread_head(&w, t);
        /* NULL map: identity over the functions */
        put_u64(&w, t->func_map ? t->func_map_len : UINT64_MAX);
        if (t->func_map)
            put(&w, t->func_map, t->func_map_len * sizeof(*t->func_map));
        pad(&w);
        put_u64(&w, chunk_total(t->calls, t->ncalls));
        put_chunks(&w, t->calls, t->ncalls, sizeof(struct gt_call_rec));
        pad(&w);
        put_u64(&w, chunk_total(t->gil, t->ngil) + (uint64_t)held);
        if (held) {
            struct gt_gil_event e = {ti->t0, GT_GIL_ACQUIRED, 0};
            put(&w, &e, sizeof(e));
        }
        put_chunks(&w, t->gil, t->ngil, sizeof(struct gt_gil_event));
        put_u64(&w, chunk_total(t->sched, t->nsched));
        put_chunks(&w, t->sched, t->nsched, sizeof(struct gt_sched_event));
        put_more(&w, t);
    }
    put(&w, MAGIC, sizeof(MAGIC)); /* the end: a spool cut short is refused */
    if (!w.err && fflush(f) != 0)
        w.err = -EIO;
    return w.err;
}

struct rd {
    char *buf;
    uint64_t size, off;
    int err;
};

static const void *take(struct rd *r, uint64_t n)
{
    if (r->err || n > r->size - r->off) {
        r->err = -EINVAL;
        return NULL;
    }
    const void *p = r->buf + r->off;
    r->off += n;
    return p;
}

static void skip_pad(struct rd *r)
{
    uint64_t n = -r->off & (ALIGN - 1u);
    take(r, n);
}

static uint32_t get_u32(struct rd *r)
{
    uint32_t v = 0;
    const void *p = take(r, sizeof(v));
    if (p)
        memcpy(&v, p, sizeof(v));
    return v;
}

static uint64_t get_u64(struct rd *r)
{
    uint64_t v = 0;
    const void *p = take(r, sizeof(v));
    if (p)
        memcpy(&v, p, sizeof(v));
    return v;
}

static const char *get_str(struct rd *r)
{
    uint32_t n = get_u32(r);
    if (n == NO_NAME)
        return NULL;
    const char *s = take(r, n);
    if (s && (n == 0 || s[n - 1] != '\0')) {
        r->err = -EINVAL;
        return NULL;
    }
    return s;
}

/* An array of n elements of `size` bytes, or NULL (r->err says whether that is an error). */
static const void *get_array(struct rd *r, uint64_t n, size_t size)
{
    if (n > (r->size - r->off) / size) {
        r->err = -EINVAL;
        return NULL;
    }
    return take(r, n * size);
}

static double get_f64(struct rd *r)
{
    double v = 0;
    const void *p = take(r, sizeof(v));
    if (p)
        memcpy(&v, p, sizeof(v));
    return v;
}

/* A count of elements to follow, refused over `most`. */
static uint64_t get_count(struct rd *r, uint64_t most)
{
    uint64_t n = get_u64(r);
    if (n > most)
        r->err = -EINVAL;
    return n;
}

static void get_coalesced(struct rd *r, struct gt_coalesced *c)
{
    FIELDS(COALESCED_FIELDS, READER)
}

static void get_calltree(struct rd *r, struct gt_calltree *c)
{
    FIELDS(CALLTREE_FIELDS, READER)
}

static void get_thread_head(struct rd *r, struct gt_thread_input *c)
{
    FIELDS(THREAD_HEAD_FIELDS, READER)
}

static void get_more(struct rd *r, struct gt_thread_input *t, struct gt_spool_more *more)
{
    uint32_t have = get_u32(r);
    get_u32(r);
    if (have & ~7u)
        r->err = -EINVAL;
    if (have & 1) {
        get_coalesced(r, &more->gil);
        t->gil_more = &more->gil;
    }
    if (have & 2) {
        get_coalesced(r, &more->sched);
        t->sched_more = &more->sched;
    }
    if (have & 4) {
        get_calltree(r, &more->calls);
        t->calls_more = &more->calls;
    }
}

/* Thread i: its identity, function map, streams and aggregates. */
static void get_thread(struct rd *r, struct gt_spool *sp, size_t i)
{
    struct gt_thread_input *t = &sp->threads[i];
    struct gt_chunk *c = &sp->chunks[3 * i];
    get_thread_head(r, t);
    uint64_t nmap = get_u64(r);
    if (nmap != UINT64_MAX) {
        t->func_map = get_array(r, nmap, sizeof(uint32_t));
        t->func_map_len = (size_t)nmap;
        for (size_t k = 0; t->func_map && k < t->func_map_len; k++)
            if (t->func_map[k] >= sp->nfuncs && t->func_map[k] != GT_NO_FUNC)
                r->err = -EINVAL;
    }
    skip_pad(r);
    uint64_t n = get_u64(r);
    c[0] = (struct gt_chunk){get_array(r, n, sizeof(struct gt_call_rec)), (size_t)n};
    skip_pad(r);
    n = get_u64(r);
    c[1] = (struct gt_chunk){get_array(r, n, sizeof(struct gt_gil_event)), (size_t)n};
    n = get_u64(r);
    c[2] = (struct gt_chunk){get_array(r, n, sizeof(struct gt_sched_event)), (size_t)n};
    t->calls = &c[0];
    t->ncalls = c[0].n ? 1 : 0;
    t->gil = &c[1];
    t->ngil = c[1].n ? 1 : 0;
    t->sched = &c[2];
    t->nsched = c[2].n ? 1 : 0;
    get_more(r, t, &sp->more[i]);
}

static void get_func(struct rd *r, struct gt_func *c)
{
    FIELDS(FUNC_FIELDS, READER)
    if (!c->name)
        c->name = "?";
    if (!c->file)
        c->file = "";
}

/* The magic (at both ends), version, meta and counts; allocates the arrays. */
static void get_head(struct rd *r, struct gt_spool *sp)
{
    struct gt_spool_meta m;
    const void *magic = take(r, sizeof(MAGIC));
    if (!magic || memcmp(magic, MAGIC, sizeof(MAGIC)) != 0 || get_u32(r) != VERSION ||
        get_u32(r) != sizeof(m) || memcmp(r->buf + r->size - sizeof(MAGIC), MAGIC, sizeof(MAGIC))) {
        r->err = -EINVAL;
        return;
    }
    r->size -= sizeof(MAGIC);
    memcpy(&sp->meta, take(r, sizeof(m)), sizeof(m));
    sp->meta.cmd[sizeof(sp->meta.cmd) - 1] = '\0';
    sp->nfuncs = get_u32(r);
    get_u32(r);
    uint64_t nthreads = get_u64(r);
    if (r->err || sp->nfuncs > (r->size - r->off) / MIN_FUNC_BYTES ||
        nthreads > (r->size - r->off) / MIN_THREAD_BYTES ||
        sp->nfuncs >= GT_CALL_REC_FUNC_LIMIT) {
        r->err = -EINVAL;
        return;
    }
    sp->nthreads = (size_t)nthreads;
    sp->funcs = calloc(sp->nfuncs ? sp->nfuncs : 1, sizeof(*sp->funcs));
    sp->threads = calloc(sp->nthreads ? sp->nthreads : 1, sizeof(*sp->threads));
    sp->chunks = calloc(sp->nthreads ? 3 * sp->nthreads : 1, sizeof(*sp->chunks));
    sp->more = calloc(sp->nthreads ? sp->nthreads : 1, sizeof(*sp->more));
    if (!sp->funcs || !sp->threads || !sp->chunks || !sp->more)
        r->err = -ENOMEM;
}

int gt_spool__read(FILE *f, uint64_t size, struct gt_spool **out)
{
    *out = NULL;
    if (size < MIN_SPOOL_BYTES ||
        size > (uint64_t)SIZE_MAX / 2)
        return -EINVAL;
    struct gt_spool *sp = calloc(1, sizeof(*sp));
    struct rd r = {malloc(size), size, 0, 0};
    if (!sp || !r.buf) {
        free(sp);
        free(r.buf);
        return -ENOMEM;
    }
    sp->arena = r.buf;
    if (fread(r.buf, 1, size, f) != size)
        r.err = -EINVAL;
    else
        get_head(&r, sp);
    for (uint32_t i = 0; i < sp->nfuncs && !r.err; i++)
        get_func(&r, &sp->funcs[i]);
    for (size_t i = 0; i < sp->nthreads && !r.err; i++)
        get_thread(&r, sp, i);
    if (!r.err && r.off != r.size)
        r.err = -EINVAL;
    if (r.err) {
        gt_spool__free(sp);
        return r.err;
    }
    *out = sp;
    return 0;
}

int gt_spool__join(struct gt_spool **parts, size_t n, struct gt_spool **out)
{
    *out = NULL;
    if (!n)
        return -EINVAL;
    const struct gt_spool *last = parts[n - 1];
    for (size_t k = 0; k < n; k++) {
        if (parts[k]->nthreads > last->nthreads || parts[k]->meta.pid != last->meta.pid)
            return -EINVAL;
        for (size_t i = 0; i < parts[k]->nthreads; i++)
            if (parts[k]->threads[i].tid != last->threads[i].tid)
                return -EINVAL;
    }
    struct gt_spool *sp = calloc(1, sizeof(*sp));
    if (!sp)
        return -ENOMEM;
    size_t nt = last->nthreads;
    sp->funcs = malloc((last->nfuncs ? last->nfuncs : 1) * sizeof(*sp->funcs));
    sp->threads = calloc(nt ? nt : 1, sizeof(*sp->threads));
    sp->chunks = calloc(nt ? 3 * nt * n : 1, sizeof(*sp->chunks));
    sp->parts = malloc(n * sizeof(*sp->parts));
    if (!sp->funcs || !sp->threads || !sp->chunks || !sp->parts) {
        gt_spool__free(sp);
        return -ENOMEM;
    }
    if (last->nfuncs)
        memcpy(sp->funcs, last->funcs, last->nfuncs * sizeof(*sp->funcs));
    sp->nfuncs = last->nfuncs;
    sp->meta = last->meta;
    sp->meta.t0 = parts[0]->meta.t0;
    sp->meta.event_count = 0; /* each counts its own calls; the drops are running totals */
    for (size_t k = 0; k < n; k++)
        sp->meta.event_count += parts[k]->meta.event_count;
    for (size_t i = 0; i < nt; i++) {
        struct gt_thread_input *t = &sp->threads[i];
        *t = last->threads[i]; /* its flags and (latest) function map */
        for (size_t k = n; !t->name && k-- > 0;) /* its name as last known */
            if (i < parts[k]->nthreads)
                t->name = parts[k]->threads[i].name;
        struct gt_chunk *c[3] = {&sp->chunks[3 * i * n], &sp->chunks[(3 * i + 1) * n],
                                 &sp->chunks[(3 * i + 2) * n]};
        size_t m[3] = {0, 0, 0};
        for (size_t k = 0; k < n; k++) {
            if (i >= parts[k]->nthreads)
                continue;
            const struct gt_thread_input *p = &parts[k]->threads[i];
            if (p->ncalls)
                c[0][m[0]++] = p->calls[0];
            if (p->ngil)
                c[1][m[1]++] = p->gil[0];
            if (p->nsched)
                c[2][m[2]++] = p->sched[0];
            if (k == 0) /* the first checkpoint holds its GIL at the start */
                t->flags |= p->flags & GT_THREAD_HELD_GIL_AT_START;
        }
        t->calls = c[0];
        t->ncalls = m[0];
        t->gil = c[1];
        t->ngil = m[1];
        t->sched = c[2];
        t->nsched = m[2];
    }
    sp->nthreads = nt;
    memcpy(sp->parts, parts, n * sizeof(*parts));
    sp->nparts = n;
    *out = sp;
    return 0;
}

void gt_spool__free(struct gt_spool *sp)
{
    if (!sp)
        return;
    for (size_t k = 0; k < sp->nparts; k++)
        gt_spool__free(sp->parts[k]);
    free(sp->parts);
    free(sp->funcs);
    free(sp->threads);
    free(sp->chunks);
    free(sp->more);
    free(sp->arena);
    free(sp);
}

/* SPDX-License-Identifier: MIT */
/* The emitters' shared parts: a growable string, UTF-8 and JSON strings, a buffered
 * writer, number formatting and the labels every format shows. Internal to core/emit. */
#ifndef GT_EMIT_WRITER_H
#define GT_EMIT_WRITER_H

#include <assert.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "emit.h"

/* ---- growable string ---------------------------------------------------- */

/* A failed allocation sticks in err; later appends do nothing. */
struct sbuf {
    char *p;
    size_t len, cap;
    int err;
};

int sb_reserve(struct sbuf *b, size_t n);
void sb_mem(struct sbuf *b, const void *s, size_t n);
void sb_str(struct sbuf *b, const char *s);
__attribute__((format(printf, 2, 3))) void sb_printf(struct sbuf *b, const char *fmt, ...);

/* ---- UTF-8 and JSON strings --------------------------------------------- */

/* Append s[0, len) with each invalid UTF-8 sequence replaced by U+FFFD. */
void sb_utf8(struct sbuf *b, const char *s, size_t len);
/* A jansson string for s (NULL -> null); invalid UTF-8 becomes U+FFFD. */
json_t *jstr(const char *s);
/* s as a JSON string literal; html_safe writes '<', '>' and '&' as \u escapes. */
void sb_json_str(struct sbuf *b, const char *s, int html_safe);
/* "fib (demo.py:3)" for a Python function, "list.append" for a C function. */
void sb_func_label(struct sbuf *b, const struct gt_result *r, uint32_t func);
json_t *jreal(double v); /* a non-finite v as 0 */
json_t *jns(int64_t v);  /* a negative v (unknown) as null */

/* ---- buffered writer ---------------------------------------------------- */

#define WBUF_CAP (256 * 1024)

struct wr {
    FILE *f;
    char *buf;
    size_t len;
    int err;
    int html_safe; /* rewrite '<', '>', '&' in jansson dumps */
};

int w_init(struct wr *w, FILE *f, int html_safe);
void w_flush(struct wr *w);
/* Room for n <= WBUF_CAP bytes at the returned pointer; commit with w->len += used. */
static inline char *w_reserve(struct wr *w, size_t n)
{
    assert(n <= WBUF_CAP); /* bigger pieces go through w_mem */
    if (w->len + n > WBUF_CAP)
        w_flush(w);
    return w->buf + w->len;
}

void w_mem(struct wr *w, const void *p, size_t n);
void w_str(struct wr *w, const char *s);
/* Close the writer: flush, check the stream, free. Returns the first error. */
int w_finish(struct wr *w, int err);
/* Dump j compactly (consumes the reference). */
int w_json(struct wr *w, json_t *j);
void w_json_str(struct wr *w, struct sbuf *scratch, const char *s, int html_safe);

/* ---- number formatting -------------------------------------------------- */

static const char digits2[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

static inline unsigned n_digits(uint64_t v)
{
    unsigned n = 1;
    for (;;) {
        if (v < 10)
            return n;
        if (v < 100)
            return n + 1;
        if (v < 1000)
            return n + 2;
        if (v < 10000)
            return n + 3;
        v /= 10000;
        n += 4;
    }
}

/* Decimal digits of v at p; returns the end. */
static inline char *put_u64(char *p, uint64_t v)
{
    char *end = p + n_digits(v), *q = end;
    while (v >= 100) {
        unsigned d = (unsigned)(v % 100);
        v /= 100;
        q -= 2;
        memcpy(q, digits2 + 2 * d, 2);
    }
    if (v >= 10)
        memcpy(q - 2, digits2 + 2 * v, 2);
    else
        q[-1] = (char)('0' + v);
    return end;
}

static inline char *put_i64(char *p, int64_t v)
{
    if (v < 0) {
        *p++ = '-';
        return put_u64(p, (uint64_t)0 - (uint64_t)v);
    }
    return put_u64(p, (uint64_t)v);
}

/* ns as microseconds with exactly three decimals: 1234567 -> "1234.567". */
static inline char *put_us3(char *p, uint64_t ns)
{
    p = put_u64(p, ns / 1000);
    unsigned r = (unsigned)(ns % 1000);
    p[0] = '.';
    p[1] = (char)('0' + r / 100);
    memcpy(p + 2, digits2 + 2 * (r % 100), 2);
    return p + 4;
}

static inline uint64_t rel(uint64_t t, uint64_t t0)
{
    return t > t0 ? t - t0 : 0;
}

/* ---- shared helpers ----------------------------------------------------- */

int32_t thread_pid(const struct gt_thread_result *t, const struct gt_emit_meta *m);
const struct gt_thread_result *find_thread(const struct gt_result *r, int32_t tid);
/* Arrays that claim elements must exist. */
int check_result(const struct gt_result *r);
/* "MainThread (1234)" */
void sb_thread_label(struct sbuf *b, const struct gt_result *r, int32_t tid);
/* The run's facts (struct gt_emit_meta and the result's bounds) as a JSON object. */
json_t *meta_object(const struct gt_result *r, const struct gt_emit_meta *m);

#endif /* GT_EMIT_WRITER_H */

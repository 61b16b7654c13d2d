/* SPDX-License-Identifier: MIT */
/* The emitters' shared parts (writer.h). */
#define _GNU_SOURCE
#include "writer.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- growable string ---------------------------------------------------- */


int sb_reserve(struct sbuf *b, size_t n)
{
    if (b->err)
        return b->err;
    if (b->len + n + 1 <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + 1)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->err = -ENOMEM;
        return b->err;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

void sb_mem(struct sbuf *b, const void *s, size_t n)
{
    if (sb_reserve(b, n))
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void sb_str(struct sbuf *b, const char *s)
{
    sb_mem(b, s, strlen(s));
}

void sb_printf(struct sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        if (!b->err)
            b->err = -EINVAL;
        return;
    }
    if (sb_reserve(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* ---- UTF-8 and escaping ------------------------------------------------- */

/* Length of the valid UTF-8 sequence at p (1..4), or 0 if it is not valid. */
static size_t utf8_len(const unsigned char *p, size_t left)
{
    unsigned c = p[0];
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        return left >= 2 && (p[1] & 0xC0) == 0x80 ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        if (left < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80)
            return 0;
        if ((c == 0xE0 && p[1] < 0xA0) || (c == 0xED && p[1] > 0x9F))
            return 0;
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (left < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 ||
            (p[3] & 0xC0) != 0x80)
            return 0;
        if ((c == 0xF0 && p[1] < 0x90) || (c == 0xF4 && p[1] > 0x8F))
            return 0;
        return 4;
    }
    return 0;
}

/* Append s[0, len) with each invalid UTF-8 sequence replaced by U+FFFD. */
void sb_utf8(struct sbuf *b, const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s, *run = p;
    while (len) {
        size_t n = utf8_len(p, len);
        if (!n) {
            sb_mem(b, run, (size_t)(p - run));
            sb_mem(b, "\xEF\xBF\xBD", 3);
            n = 1;
            run = p + 1;
        }
        p += n;
        len -= n;
    }
    sb_mem(b, run, (size_t)(p - run));
}

/* A jansson string for s (NULL -> null); invalid UTF-8 becomes U+FFFD. */
json_t *jstr(const char *s)
{
    if (!s)
        return json_null();
    json_t *j = json_string(s);
    if (j)
        return j;
    /* Invalid UTF-8: rebuild the string with replacement characters. */
    struct sbuf b = {0};
    sb_utf8(&b, s, strlen(s));
    j = b.err ? NULL : json_stringn(b.p ? b.p : "", b.len);
    free(b.p);
    return j;
}

/* Append s as a JSON string literal, encoded by jansson (invalid UTF-8 becomes
 * U+FFFD). html_safe also writes '<', '>' and '&' as \u escapes, so the text is safe
 * inside <script>. Used once per unique string, never per event. */
void sb_json_str(struct sbuf *b, const char *s, int html_safe)
{
    json_t *j = jstr(s ? s : "");
    char *enc = j ? json_dumps(j, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
    json_decref(j);
    if (!enc) {
        if (!b->err)
            b->err = -ENOMEM;
        return;
    }
    const char *p = enc;
    while (*p) {
        size_t run = html_safe ? strcspn(p, "<>&") : strlen(p);
        sb_mem(b, p, run);
        p += run;
        if (*p) {
            static const char hex[] = "0123456789abcdef";
            unsigned char c = (unsigned char)*p;
            char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            sb_mem(b, e, 6);
            p++;
        }
    }
    free(enc);
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* "fib (demo.py:3)" for a Python function, "list.append" for a C function. */
void sb_func_label(struct sbuf *b, const struct gt_result *r, uint32_t func)
{
    if (func >= r->nfuncs) {
        sb_str(b, func == GT_NO_FUNC        ? "(no Python function)"
                  : func == GT_UNKNOWN_FUNC ? "unknown (calls truncated: max_events)"
                                            : "?");
        return;
    }
    const struct gt_func *fn = &r->funcs[func];
    sb_str(b, fn->name ? fn->name : "?");
    if ((fn->flags & GT_FUNC_C) || !fn->file || !fn->file[0])
        return;
    if (fn->line)
        sb_printf(b, " (%s:%" PRIu32 ")", base_name(fn->file), fn->line);
    else
        sb_printf(b, " (%s)", base_name(fn->file));
}

json_t *jreal(double v)
{
    return json_real(isfinite(v) ? v : 0.0);
}

json_t *jns(int64_t v)
{
    return v < 0 ? json_null() : json_integer(v);
}

/* ---- buffered writer ---------------------------------------------------- */


int w_init(struct wr *w, FILE *f, int html_safe)
{
    memset(w, 0, sizeof(*w));
    w->f = f;
    w->html_safe = html_safe;
    w->buf = malloc(WBUF_CAP);
    return w->buf ? 0 : -ENOMEM;
}

void w_flush(struct wr *w)
{
    if (w->len && !w->err && fwrite(w->buf, 1, w->len, w->f) != w->len)
        w->err = -EIO;
    w->len = 0;
}


void w_mem(struct wr *w, const void *p, size_t n)
{
    if (n > WBUF_CAP / 2) {
        w_flush(w);
        if (!w->err && fwrite(p, 1, n, w->f) != n)
            w->err = -EIO;
        return;
    }
    memcpy(w_reserve(w, n), p, n);
    w->len += n;
}

void w_str(struct wr *w, const char *s)
{
    w_mem(w, s, strlen(s));
}

/* Close the writer: flush, check the stream, free. Returns the first error. */
int w_finish(struct wr *w, int err)
{
    if (w->buf) {
        w_flush(w);
        free(w->buf);
        w->buf = NULL;
    }
    if (!err)
        err = w->err;
    if (fflush(w->f) != 0 || ferror(w->f))
        err = err ? err : -EIO;
    return err;
}

static int w_dump_cb(const char *buf, size_t size, void *data)
{
    struct wr *w = data;
    if (!w->html_safe) {
        w_mem(w, buf, size);
        return 0;
    }
    /* '<', '>' and '&' only occur inside strings in JSON, so \u escapes are exact. */
    size_t start = 0;
    for (size_t i = 0; i < size; i++) {
        const char *rep = buf[i] == '<' ? "\\u003c" : buf[i] == '>' ? "\\u003e"
                        : buf[i] == '&' ? "\\u0026" : NULL;
        if (!rep)
            continue;
        w_mem(w, buf + start, i - start);
        w_mem(w, rep, 6);
        start = i + 1;
    }
    w_mem(w, buf + start, size - start);
    return 0;
}

/* Dump j compactly (consumes the reference). */
int w_json(struct wr *w, json_t *j)
{
    if (!j)
        return -ENOMEM;
    int rc = json_dump_callback(j, w_dump_cb, w, JSON_COMPACT | JSON_REAL_PRECISION(6));
    json_decref(j);
    return rc ? -ENOMEM : 0;
}

void w_json_str(struct wr *w, struct sbuf *scratch, const char *s, int html_safe)
{
    scratch->len = 0;
    sb_json_str(scratch, s ? s : "", html_safe);
    if (!scratch->err)
        w_mem(w, scratch->p, scratch->len);
}

/* ---- shared helpers ----------------------------------------------------- */

int32_t thread_pid(const struct gt_thread_result *t, const struct gt_emit_meta *m)
{
    return t->pid ? t->pid : m->pid;
}

const struct gt_thread_result *find_thread(const struct gt_result *r, int32_t tid)
{
    for (size_t i = 0; i < r->nthreads; i++)
        if (r->threads[i].tid == tid)
            return &r->threads[i];
    return NULL;
}

/* Arrays that claim elements must exist. */
int check_result(const struct gt_result *r)
{
    if ((r->nthreads && !r->threads) || (r->nfuncs && !r->funcs) || (r->nblame && !r->blame))
        return -EINVAL;
    for (size_t i = 0; i < r->nthreads; i++) {
        const struct gt_thread_result *t = &r->threads[i];
        if ((t->nspans && !t->spans) || (t->ngil && !t->gil) || (t->nos && !t->os))
            return -EINVAL;
    }
    return 0;
}

/* "MainThread (1234)", "Thread-1 (1235, interp 2)" for one in a subinterpreter */
void sb_thread_label(struct sbuf *b, const struct gt_result *r, int32_t tid)
{
    const struct gt_thread_result *t = find_thread(r, tid);
    sb_printf(b, "%s (%" PRId32, t && t->name ? t->name : "thread", tid);
    if (t && t->interp)
        sb_printf(b, ", interp %" PRIu32, t->interp);
    sb_str(b, ")");
}

json_t *meta_object(const struct gt_result *r, const struct gt_emit_meta *m)
{
    char t0[24];
    snprintf(t0, sizeof(t0), "%" PRIu64, r->t0);
    json_t *o = json_pack("{s:o,s:o,s:o,s:o,s:o,s:i,s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:o,s:b}",
                          "title", jstr(m->title), "backend", jstr(m->backend),
                          "backend_reason", jstr(m->backend_reason), "sched", jstr(m->sched_status),
                          "python", jstr(m->python), "pid", (int)m->pid, "t0_ns", t0,
                          "duration_ns", (json_int_t)rel(r->t1, r->t0),
                          "event_count", (json_int_t)m->event_count,
                          "dropped_events", (json_int_t)m->dropped_events,
                          "gil_dropped", (json_int_t)m->gil_dropped,
                          "sched_lost", (json_int_t)m->sched_lost,
                          "max_events", (json_int_t)m->max_events, "tracer_note", jstr(m->tracer_note),
                          "gil_known", r->gil_known ? 1 : 0);
    int bad = !o;
    /* the GIL strip and figures are the park probe's (the viewer relabels them) */
    if (!bad && r->free_threaded)
        bad = json_object_set_new(o, "free_threaded", json_true()) < 0;
    /* the viewer's theme and the thread whose outer frames fold into the cell's scope */
    if (!bad && m->theme)
        bad = json_object_set_new(o, "theme", json_string(m->theme)) < 0;
    if (!bad && m->scope_tid > 0)
        bad = json_object_set_new(o, "scope_tid", json_integer(m->scope_tid)) < 0;
    if (!bad && m->sampling)
        bad = json_object_set_new(o, "sampling", json_string(m->sampling)) < 0;
    if (!bad && m->tool_note)
        bad = json_object_set_new(o, "tool_note", json_string(m->tool_note)) < 0;
    if (!bad && m->nprocesses) { /* child processes followed: pid -> command */
        json_t *procs = json_array();
        bad = !procs || json_object_set_new(o, "processes", procs) < 0;
        for (size_t k = 0; !bad && k < m->nprocesses; k++)
            bad = json_array_append_new(procs, json_pack("{s:i,s:o}", "pid", (int)m->processes[k].pid,
                                                         "cmd", jstr(m->processes[k].cmd))) < 0;
    }
    /* events past max_events kept as aggregates (exact totals, coalesced timeline) */
    if (!bad && m->gil_aggregated)
        bad = json_object_set_new(o, "gil_aggregated", json_integer((json_int_t)m->gil_aggregated)) < 0;
    if (!bad && m->calls_aggregated)
        bad = json_object_set_new(o, "calls_aggregated", json_integer((json_int_t)m->calls_aggregated)) < 0;
    if (!bad && m->keep_last)
        bad = json_object_set_new(o, "keep", json_string("last")) < 0;
    if (!bad && m->sched_aggregated)
        bad = json_object_set_new(o, "sched_aggregated", json_integer((json_int_t)m->sched_aggregated)) < 0;
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}


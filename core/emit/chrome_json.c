/* SPDX-License-Identifier: MIT */
/* Chrome Trace Event JSON (Perfetto, chrome://tracing). */
#define _GNU_SOURCE
#include "writer.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Chrome JSON: GIL and OS states live in two synthetic processes per real process,
 * with synthetic tids. Linux pids/tids are < 2^22 (PID_MAX_LIMIT), so these cannot
 * clash with real ones and still fit in 31 bits. */
#define GT_GIL_ID_BASE 0x10000000
#define GT_OS_ID_BASE 0x20000000

/* Blame rows copied into Chrome JSON's otherData. */
#define GT_CHROME_BLAME_MAX 1000

/* ---- Chrome Trace Event JSON -------------------------------------------- */

static const char *const gil_names[3] = {"released", "waiting for GIL", "held"};
/* A free-threaded build's strip: the park probe's states (no GIL). Released: a blocking
 * wait on a threading primitive (a lock's acquire, an event, a queue). */
static const char *const park_names[3] = {"released (waiting for another thread)",
                                          "parked (lock contention)", "running"};
static const char *const os_names[3] = {"on-cpu", "preempted", "blocked"};

/* Closing part of a span event by (flags & 7): clip and exception notes. */
static const char *const span_tails[8] = {
    "}",
    ",\"args\":{\"clipped\":\"start\"}}",
    ",\"args\":{\"clipped\":\"end\"}}",
    ",\"args\":{\"clipped\":\"start,end\"}}",
    ",\"args\":{\"exit\":\"exception\"}}",
    ",\"args\":{\"clipped\":\"start\",\"exit\":\"exception\"}}",
    ",\"args\":{\"clipped\":\"end\",\"exit\":\"exception\"}}",
    ",\"args\":{\"clipped\":\"start,end\",\"exit\":\"exception\"}}",
};

struct chrome {
    struct wr w;
    struct sbuf scratch;
    size_t nevents;
};

/* One X event: ",\n{"ph":"X","ts":T,"dur":D" + a + b + c. */
static inline void chrome_x(struct wr *w, uint64_t ts_ns, uint64_t dur_ns, const char *a,
                            size_t al, const char *b, size_t bl, const char *c, size_t cl)
{
    static const char head[] = ",\n{\"ph\":\"X\",\"ts\":";
    size_t need = 96 + al + bl + cl;
    if (need <= WBUF_CAP / 2) {
        char *p0 = w_reserve(w, need), *p = p0;
        memcpy(p, head, sizeof(head) - 1);
        p += sizeof(head) - 1;
        p = put_us3(p, ts_ns);
        memcpy(p, ",\"dur\":", 7);
        p = put_us3(p + 7, dur_ns);
        memcpy(p, a, al);
        p += al;
        memcpy(p, b, bl);
        p += bl;
        memcpy(p, c, cl);
        p += cl;
        w->len += (size_t)(p - p0);
        return;
    }
    char num[64], *p = num;
    p = put_us3(p, ts_ns);
    memcpy(p, ",\"dur\":", 7);
    p = put_us3(p + 7, dur_ns);
    w_mem(w, head, sizeof(head) - 1);
    w_mem(w, num, (size_t)(p - num));
    w_mem(w, a, al);
    w_mem(w, b, bl);
    w_mem(w, c, cl);
}

/* A metadata event; `value` is a string (sval) or an integer (ival). */
static void chrome_meta(struct chrome *c, const char *name, int32_t pid, int32_t tid,
                        const char *sval, int64_t ival)
{
    struct sbuf *b = &c->scratch;
    b->len = 0;
    sb_printf(b, "%s{\"ph\":\"M\",\"name\":\"%s\",\"pid\":%" PRId32 ",\"tid\":%" PRId32, c->nevents ? ",\n" : "\n", name, pid, tid);
    if (sval) {
        sb_str(b, ",\"args\":{\"name\":");
        sb_json_str(b, sval, 0);
        sb_str(b, "}}");
    } else {
        sb_printf(b, ",\"args\":{\"sort_index\":%" PRId64 "}}", ival);
    }
    if (!b->err)
        w_mem(&c->w, b->p, b->len);
    c->nevents++;
}

static json_t *chrome_other(const struct gt_result *r, const struct gt_emit_meta *m)
{
    struct sbuf b = {0};
    json_t *o = meta_object(r, m);
    json_t *threads = json_array(), *blame = json_array();
    int bad = !o || !threads || !blame;
    for (size_t i = 0; !bad && i < r->nthreads; i++) {
        const struct gt_thread_result *t = &r->threads[i];
        const struct gt_summary *s = &t->summary;
        json_t *row = json_pack("{s:i,s:o,s:I,s:o,s:o,s:o,s:o,s:o,s:I,s:I}", "tid", (int)t->tid,
                                "name", jstr(t->name), "wall_ns", (json_int_t)s->wall_ns,
                                "held_pct", jreal(s->held_pct), "wait_pct", jreal(s->wait_pct),
                                "released_pct", jreal(s->released_pct),
                                "off_cpu_ns", jns(s->off_cpu_ns),
                                "preempted_ns", jns(s->preempted_ns),
                                "acquisitions", (json_int_t)s->acquisitions,
                                "longest_wait_ns", (json_int_t)s->longest_wait_ns);
        bad = json_array_append_new(threads, row) != 0;
    }
    for (size_t i = 0; !bad && i < r->nblame && i < GT_CHROME_BLAME_MAX; i++) {
        const struct gt_blame *bl = &r->blame[i];
        b.len = 0;
        sb_func_label(&b, r, bl->func);
        json_t *fn = b.err ? NULL : bl->func == GT_NO_FUNC ? json_null() : jstr(b.p);
        b.len = 0;
        sb_thread_label(&b, r, bl->waiter_tid);
        json_t *wn = b.err ? NULL : jstr(b.p);
        b.len = 0;
        sb_thread_label(&b, r, bl->holder_tid);
        json_t *hn = b.err ? NULL : jstr(b.p);
        json_t *row = json_pack("{s:o,s:o,s:o,s:I,s:I}", "waiter", wn, "holder", hn, "func", fn,
                                "wait_ns", (json_int_t)bl->wait_ns, "count", (json_int_t)bl->count);
        bad = json_array_append_new(blame, row) != 0;
    }
    free(b.p);
    if (!bad)
        bad = json_object_set_new(o, "threads", threads) != 0;
    else
        json_decref(threads);
    if (!bad)
        bad = json_object_set_new(o, "blame", blame) != 0;
    else
        json_decref(blame);
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* Per function: the constant tail of its span events (name, category), escaped once, at
 * parts->p + off[i] .. off[i + 1]; index nfuncs stands for an unknown function. */
static int func_tails(const struct gt_result *r, struct sbuf *scratch, struct sbuf *parts,
                      size_t **off_out)
{
    size_t *off = malloc(((size_t)r->nfuncs + 2) * sizeof(*off));
    if (!off)
        return -ENOMEM;
    for (uint32_t i = 0; i <= r->nfuncs; i++) {
        off[i] = parts->len;
        scratch->len = 0;
        sb_func_label(scratch, r, i < r->nfuncs ? i : UINT32_MAX - 1);
        if (scratch->err)
            break;
        sb_str(parts, ",\"name\":");
        sb_json_str(parts, scratch->p, 0);
        if (i < r->nfuncs && (r->funcs[i].flags & GT_FUNC_C))
            sb_str(parts, ",\"cat\":\"c\"");
    }
    off[r->nfuncs + 1] = parts->len;
    *off_out = off;
    return parts->err || scratch->err ? -ENOMEM : 0;
}

/* The distinct processes of the threads, in order of first appearance. */
static int32_t *distinct_pids(const struct gt_result *r, const struct gt_emit_meta *m, size_t *n)
{
    int32_t *pids = malloc((r->nthreads + 1) * sizeof(*pids));
    *n = 0;
    for (size_t i = 0; pids && i < r->nthreads; i++) {
        int32_t pid = thread_pid(&r->threads[i], m);
        size_t k = 0;
        while (k < *n && pids[k] != pid)
            k++;
        if (k == *n)
            pids[(*n)++] = pid;
    }
    return pids;
}

/* Metadata of the k-th real process, its GIL process and its OS-state process. */
static void process_meta(struct chrome *c, const struct gt_result *r,
                         const struct gt_emit_meta *m, int32_t pid, size_t k)
{
    int has_gil = 0, has_os = 0;
    for (size_t i = 0; i < r->nthreads; i++) {
        const struct gt_thread_result *t = &r->threads[i];
        if (thread_pid(t, m) != pid)
            continue;
        has_gil |= r->gil_known && t->ngil;
        has_os |= t->has_sched && t->nos;
    }
    char name[160];
    snprintf(name, sizeof(name), "python (pid %" PRId32 ")", pid);
    for (size_t p = 0; p < m->nprocesses; p++) /* a child process: its command */
        if (m->processes[p].pid == pid && m->processes[p].cmd)
            snprintf(name, sizeof(name), "python (pid %" PRId32 "): %.120s", pid,
                     m->processes[p].cmd);
    chrome_meta(c, "process_name", pid, pid, name, 0);
    chrome_meta(c, "process_sort_index", pid, pid, NULL, (int64_t)(3 * k));
    if (has_gil) {
        snprintf(name, sizeof(name),
                 r->free_threaded ? "Lock contention, no GIL (pid %" PRId32 ")"
                                  : "GIL (pid %" PRId32 ")",
                 pid);
        chrome_meta(c, "process_name", GT_GIL_ID_BASE + pid, GT_GIL_ID_BASE + pid, name, 0);
        chrome_meta(c, "process_sort_index", GT_GIL_ID_BASE + pid, GT_GIL_ID_BASE + pid, NULL,
                    (int64_t)(3 * k + 1));
    }
    if (has_os) {
        snprintf(name, sizeof(name), "OS states (pid %" PRId32 ")", pid);
        chrome_meta(c, "process_name", GT_OS_ID_BASE + pid, GT_OS_ID_BASE + pid, name, 0);
        chrome_meta(c, "process_sort_index", GT_OS_ID_BASE + pid, GT_OS_ID_BASE + pid, NULL,
                    (int64_t)(3 * k + 2));
    }
}

/* Metadata of the i-th thread: its name and order in its process, its GIL and OS lanes. */
static int thread_meta(struct chrome *c, const struct gt_result *r,
                       const struct gt_emit_meta *m, size_t i, struct sbuf *label)
{
    const struct gt_thread_result *t = &r->threads[i];
    int32_t pid = thread_pid(t, m);
    struct sbuf lane = {0};
    label->len = 0;
    sb_printf(label, "%s (%" PRId32 ")", t->name ? t->name : "thread", t->tid);
    if (label->err)
        return -ENOMEM;
    chrome_meta(c, "thread_name", pid, t->tid, label->p, 0);
    chrome_meta(c, "thread_sort_index", pid, t->tid, NULL, (int64_t)i);
    if (r->gil_known && t->ngil) {
        sb_printf(&lane, r->free_threaded ? "Parked: %s" : "GIL: %s", label->p);
        if (!lane.err)
            chrome_meta(c, "thread_name", GT_GIL_ID_BASE + pid, GT_GIL_ID_BASE + t->tid,
                        lane.p, 0);
        chrome_meta(c, "thread_sort_index", GT_GIL_ID_BASE + pid, GT_GIL_ID_BASE + t->tid,
                    NULL, (int64_t)i);
    }
    if (t->has_sched && t->nos) {
        lane.len = 0;
        sb_printf(&lane, "OS: %s", label->p);
        if (!lane.err)
            chrome_meta(c, "thread_name", GT_OS_ID_BASE + pid, GT_OS_ID_BASE + t->tid,
                        lane.p, 0);
        chrome_meta(c, "thread_sort_index", GT_OS_ID_BASE + pid, GT_OS_ID_BASE + t->tid, NULL,
                    (int64_t)i);
    }
    int err = lane.err || c->scratch.err ? -ENOMEM : 0;
    free(lane.p);
    return err;
}

/* One thread's spans, then its GIL and OS-state intervals, streamed. */
static void thread_events(struct chrome *c, const struct gt_result *r,
                          const struct gt_emit_meta *m, const struct gt_thread_result *t,
                          const char *fparts, const size_t *foff)
{
    int32_t pid = thread_pid(t, m);
    char tp[64];
    size_t tpl = (size_t)snprintf(tp, sizeof(tp), ",\"pid\":%" PRId32 ",\"tid\":%" PRId32,
                                  pid, t->tid);
    for (size_t k = 0; k < t->nspans; k++) {
        const struct gt_span *s = &t->spans[k];
        uint32_t fi = s->func < r->nfuncs ? s->func : r->nfuncs;
        const char *tail = span_tails[s->flags & 7];
        chrome_x(&c->w, rel(s->start, r->t0), rel(s->end, s->start), fparts + foff[fi],
                 foff[fi + 1] - foff[fi], tp, tpl, tail, (s->flags & 7) ? strlen(tail) : 1);
    }
    for (int kind = 0; kind < 2; kind++) {
        const struct gt_interval *iv = kind ? t->os : t->gil;
        size_t n = kind ? (t->has_sched ? t->nos : 0) : (r->gil_known ? t->ngil : 0);
        const char *const *names = kind                ? os_names
                                    : r->free_threaded ? park_names
                                                       : gil_names;
        int32_t base = kind ? GT_OS_ID_BASE : GT_GIL_ID_BASE;
        char sp[160];
        size_t spl[3];
        char sts[3][96]; /* the longest name: park_names[0] */
        for (int st = 0; st < 3; st++)
            spl[st] = (size_t)snprintf(sts[st], sizeof(sts[st]), ",\"name\":\"%s\",\"cat\":\"%s\"",
                                       names[st], kind ? "os" : "gil");
        size_t spn = (size_t)snprintf(sp, sizeof(sp), ",\"pid\":%" PRId32 ",\"tid\":%" PRId32 "}",
                                      base + pid, base + t->tid);
        for (size_t k = 0; k < n; k++) {
            if (iv[k].end <= iv[k].start || iv[k].state > 2)
                continue;
            chrome_x(&c->w, rel(iv[k].start, r->t0), iv[k].end - iv[k].start,
                     sts[iv[k].state], spl[iv[k].state], sp, spn, "", 0);
        }
    }
}

int gt_emit__chrome_json(const struct gt_result *r, const struct gt_emit_meta *m, FILE *f)
{
    struct chrome c = {0};
    struct sbuf fparts = {0}, label = {0};
    size_t *foff = NULL;
    int32_t *pids = NULL;
    size_t npids = 0;
    int err = 0;

    if (!r || !m || !f)
        return -EINVAL;
    err = check_result(r);
    if (err)
        return err;
    err = w_init(&c.w, f, 0);
    if (err)
        goto cleanup;
    err = func_tails(r, &c.scratch, &fparts, &foff);
    if (err)
        goto cleanup;
    pids = distinct_pids(r, m, &npids);
    if (!pids) {
        err = -ENOMEM;
        goto cleanup;
    }

    w_str(&c.w, "{\"traceEvents\":[");
    for (size_t k = 0; k < npids; k++)
        process_meta(&c, r, m, pids[k], k);
    for (size_t i = 0; i < r->nthreads && !err; i++)
        err = thread_meta(&c, r, m, i, &label);
    if (err)
        goto cleanup;
    for (size_t i = 0; i < r->nthreads && !c.w.err; i++)
        thread_events(&c, r, m, &r->threads[i], fparts.p, foff);

    w_str(&c.w, "\n],\"displayTimeUnit\":\"ns\",\"otherData\":");
    err = w_json(&c.w, chrome_other(r, m));
    if (err)
        goto cleanup;
    w_str(&c.w, "}\n");

cleanup:
    err = w_finish(&c.w, err);
    free(c.scratch.p);
    free(fparts.p);
    free(label.p);
    free(foff);
    free(pids);
    return err;
}

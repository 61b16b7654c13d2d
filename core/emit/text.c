/* SPDX-License-Identifier: MIT */
/* The text summary: per-thread table and the top GIL-blame rows. */
#define _GNU_SOURCE
#include "writer.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- text --------------------------------------------------------------- */

/* Human duration: "1.234 s", "12.3 ms", "45.6 us", "789 ns". */
static const char *fmt_dur(char *buf, size_t n, uint64_t ns)
{
    if (ns >= 1000000000ull)
        snprintf(buf, n, "%.3f s", (double)ns / 1e9);
    else if (ns >= 1000000ull)
        snprintf(buf, n, "%.1f ms", (double)ns / 1e6);
    else if (ns >= 1000ull)
        snprintf(buf, n, "%.1f us", (double)ns / 1e3);
    else
        snprintf(buf, n, "%" PRIu64 " ns", ns);
    return buf;
}

static const char *fmt_pct(char *buf, size_t n, double pct, int known)
{
    if (!known || !isfinite(pct))
        snprintf(buf, n, "n/a");
    else
        snprintf(buf, n, "%.1f%%", pct);
    return buf;
}

/* The latest thread of `tid` (a reused tid: the one blame rows name) is background. */
static int background_tid(const struct gt_result *r, int32_t tid)
{
    for (size_t i = r->nthreads; i-- > 0;)
        if (r->threads[i].tid == tid)
            return r->threads[i].background;
    return 0;
}

/* Threads of more than one process (child processes followed): one block each. */
static int several_processes(const struct gt_result *r)
{
    for (size_t i = 1; i < r->nthreads; i++)
        if (r->threads[i].pid != r->threads[0].pid)
            return 1;
    return 0;
}

static void process_header(struct sbuf *b, const struct gt_emit_meta *m, int32_t pid)
{
    const char *cmd = NULL;
    for (size_t k = 0; k < m->nprocesses; k++)
        if (m->processes[k].pid == pid)
            cmd = m->processes[k].cmd;
    if (pid == m->pid || pid == 0)
        sb_printf(b, " pid %" PRId32 " (the traced process)\n", m->pid);
    else
        sb_printf(b, " pid %" PRId32 " (child process%s%.80s)\n", pid, cmd && cmd[0] ? ": " : "",
                  cmd ? cmd : "");
}

/* A child process idle all the trace (e.g. one of a pool's many workers that ran a short
 * task or none): its threads held the GIL less than 2 % of the trace together. Such
 * processes fold into one line, like background threads. */
static int idle_process(const struct gt_result *r, const struct gt_emit_meta *m, int32_t pid)
{
    if (pid == m->pid || pid == 0 || m->all_threads || !r->gil_known)
        return 0;
    double held = 0;
    for (size_t i = 0; i < r->nthreads; i++)
        if (r->threads[i].pid == pid)
            held += r->threads[i].summary.held_pct / 100.0 *
                    (double)r->threads[i].summary.wall_ns;
    return held < 0.02 * (double)(r->t1 - r->t0);
}

/* The idle child processes folded into one line (in the order of their threads, a
 * process's threads listed together): how many, and the first `max` in out[]. One count
 * for the line and its list. */
static size_t idle_pids(const struct gt_result *r, const struct gt_emit_meta *m, int32_t *out,
                        size_t max)
{
    size_t n = 0;
    int32_t last = 0;
    for (size_t i = 0; i < r->nthreads; i++) {
        int32_t pid = r->threads[i].pid;
        if (pid != last && idle_process(r, m, pid)) {
            if (n < max)
                out[n] = pid;
            n++;
        }
        last = pid;
    }
    return n;
}

#define ROW_FMT " %-8s %-*s %9s %6s %6s %8s %8s %6s %12s\n"

/* The headline: what was traced, by which probes, and what changed form or was lost. */
static void text_headline(struct sbuf *b, const struct gt_result *r, const struct gt_emit_meta *m)
{
    char d[40];
    sb_str(b, "giltracer");
    if (m->title)
        sb_printf(b, " (%s)", m->title);
    sb_printf(b, ": %zu thread%s, %s, %" PRIu64 " call events, backend %s", r->nthreads,
              r->nthreads == 1 ? "" : "s", fmt_dur(d, sizeof(d), rel(r->t1, r->t0)),
              m->event_count, m->backend ? m->backend : "?");
    if (m->backend_reason && m->backend_reason[0])
        sb_printf(b, " (%s)", m->backend_reason);
    sb_printf(b, ", OS states: %s\n", m->sched_status ? m->sched_status : "n/a");
    if (m->dropped_events)
        sb_printf(b, "WARNING: %" PRIu64 " call events dropped (max_events reached)\n",
                  m->dropped_events);
    if (m->gil_dropped)
        sb_printf(b, "WARNING: %" PRIu64 " GIL events dropped (max_events reached) or lost: "
                     "GIL figures may be inaccurate\n", m->gil_dropped);
    if (m->sched_lost)
        sb_printf(b, "WARNING: %" PRIu64 " scheduler records dropped (max_events reached) or "
                     "lost: OS states may have gaps\n", m->sched_lost);
    if (m->calls_aggregated && m->keep_last)
        sb_printf(b, "NOTE: max_events (%" PRIu64 ") reached, keep last: the timeline shows each "
                     "thread's last calls (from where its window starts); the %" PRIu64 " call "
                     "events before them went into a per-thread call tree, so the profile and top "
                     "functions cover the whole run (GIL blame before the window: unknown)\n",
                  m->max_events, m->calls_aggregated);
    else if (m->calls_aggregated)
        sb_printf(b, "NOTE: max_events (%" PRIu64 ") reached: the timeline shows the calls up to "
                     "then; the %" PRIu64 " call events after it went into a per-thread call tree, "
                     "so the profile and top functions cover the whole run (GIL blame after it "
                     "names the function that held the GIL most of each stretch). Raise "
                     "--max-events for a longer timeline\n",
                  m->max_events, m->calls_aggregated);
    if (m->gil_aggregated || m->sched_aggregated)
        sb_printf(b, "NOTE: past max_events, %" PRIu64 " GIL events and %" PRIu64 " scheduler "
                     "records were aggregated: the table is exact; their timeline is "
                     "coalesced (each thread's rest in at most %d tiles) and not blamed\n",
                  m->gil_aggregated, m->sched_aggregated, GT_COALESCED_TILES);
    if (m->tracer_note)
        sb_printf(b, "WARNING: %s\n", m->tracer_note);
    if (m->sampling)
        sb_printf(b, "Sampling: %s\n", m->sampling);
    if (m->tool_note)
        sb_printf(b, "Note: %s\n", m->tool_note);
    if (!r->gil_known)
        sb_printf(b, "GIL columns n/a: no GIL probe ran (%s)\n",
                  m->backend_reason && m->backend_reason[0] ? m->backend_reason : "no reason given");
}

/* One thread's row of the table. */
static void text_row(struct sbuf *b, const struct gt_result *r, const struct gt_thread_result *t,
                     int namew)
{
    const struct gt_summary *s = &t->summary;
    char tid[16], d[40], c1[16], c2[16], c3[16], c4[16], c5[24], c6[40], nm[96];
    int g = r->gil_known;
    double off = s->off_cpu_ns < 0 ? NAN
               : s->wall_ns ? 100.0 * (double)s->off_cpu_ns / (double)s->wall_ns : 0.0;
    snprintf(tid, sizeof(tid), "%" PRId32, t->tid);
    if (g)
        snprintf(c5, sizeof(c5), "%" PRIu64, s->acquisitions);
    else
        snprintf(c5, sizeof(c5), "n/a");
    if (g)
        fmt_dur(c6, sizeof(c6), s->longest_wait_ns);
    else
        snprintf(c6, sizeof(c6), "n/a");
    snprintf(nm, sizeof(nm), t->interp ? "%.60s [interp %" PRIu32 "]" : "%.60s",
             t->name ? t->name : "?", t->interp);
    sb_printf(b, ROW_FMT, tid, namew, nm,
              fmt_dur(d, sizeof(d), s->wall_ns), fmt_pct(c1, sizeof(c1), s->held_pct, g),
              fmt_pct(c2, sizeof(c2), s->wait_pct, g),
              fmt_pct(c3, sizeof(c3), s->released_pct, g),
              fmt_pct(c4, sizeof(c4), off, s->off_cpu_ns >= 0), c5, c6);
}

/* The per-thread table (one block per process when there are several; idle child
 * processes and background threads each on one line after it). */
static void text_table(struct sbuf *b, const struct gt_result *r, const struct gt_emit_meta *m)
{
    int namew = 4;
    size_t nbg = 0;
    int blocks = several_processes(r);
    for (size_t i = 0; i < r->nthreads; i++) {
        const char *nm = r->threads[i].name ? r->threads[i].name : "?";
        if (blocks && idle_process(r, m, r->threads[i].pid))
            continue; /* (on the idle processes' line) */
        if (r->threads[i].background && !m->all_threads) {
            nbg++;
            continue;
        }
        int l = (int)strlen(nm) + (r->threads[i].interp ? 20 : 0);
        if (l > namew)
            namew = l < 32 ? l : 32;
    }
    int ft = r->free_threaded; /* the GIL columns are the park probe's */
    if (ft)
        sb_str(b, "free-threaded build: no GIL; showing lock contention (run = not "
                  "parked, parked = waiting for a contended lock, stop-the-world or join, "
                  "released = waiting for another thread: a lock's acquire, an event, a "
                  "queue)\n");
    sb_printf(b, ROW_FMT, "tid", namew, "name", "wall", ft ? "run" : "held",
              ft ? "parked" : "wait", "released", "off-cpu", ft ? "parks" : "acq",
              ft ? "longest park" : "longest wait");
    int32_t block_pid = 0, shown[8];
    int in_block = 0;
    size_t nidle = blocks ? idle_pids(r, m, shown, 8) : 0;
    for (size_t i = 0; i < r->nthreads; i++) {
        const struct gt_thread_result *t = &r->threads[i];
        if (blocks && idle_process(r, m, t->pid))
            continue; /* (an idle process's threads: background or not, on its line) */
        if (t->background && !m->all_threads)
            continue;
        if (blocks && (!in_block || t->pid != block_pid)) {
            process_header(b, m, t->pid);
            block_pid = t->pid;
            in_block = 1;
        }
        text_row(b, r, t, namew);
    }

    if (nidle) { /* child processes that did next to nothing */
        sb_printf(b, " %zu idle worker process%s (each held its GIL under 2 %% of the "
                     "trace):", nidle, nidle == 1 ? "" : "es");
        size_t k = nidle < 8 ? nidle : 8;
        for (size_t i = 0; i < k; i++)
            sb_printf(b, "%s %" PRId32, i ? "," : "", shown[i]);
        sb_str(b, nidle > k ? ", ...\n" : "\n");
    }

    if (nbg) { /* threads that only sat in a call open at the start, without the GIL */
        sb_printf(b, " %zu background thread%s:", nbg, nbg == 1 ? "" : "s");
        for (size_t i = 0, k = 0; i < r->nthreads; i++)
            if (r->threads[i].background && !(blocks && idle_process(r, m, r->threads[i].pid)))
                sb_printf(b, "%s %s", k++ ? "," : "", r->threads[i].name ? r->threads[i].name : "?");
        sb_str(b, "\n");
    }
}

/* The top_n GIL-blame rows (a background thread's waits fold with it). */
static void text_blame(struct sbuf *b, struct sbuf *lbl, const struct gt_result *r,
                       const struct gt_emit_meta *m, int top_n)
{
    char d[40];
    size_t nrows = 0;
    for (size_t i = 0; i < r->nblame; i++)
        nrows += m->all_threads || !background_tid(r, r->blame[i].waiter_tid);
    if (!nrows)
        sb_str(b, r->free_threaded ? "Top lock contention: none\n" : "Top GIL waits: none\n");
    else
        sb_str(b, r->free_threaded
                      ? "Top lock contention (parked waiter <- waker in function):\n"
                      : "Top GIL waits (waiter <- holder in function):\n");
    for (size_t i = 0, shown = 0; i < r->nblame && shown < (size_t)top_n; i++) {
        const struct gt_blame *bl = &r->blame[i];
        if (!m->all_threads && background_tid(r, bl->waiter_tid))
            continue;
        shown++;
        lbl->len = 0;
        sb_str(lbl, "  ");
        sb_thread_label(lbl, r, bl->waiter_tid);
        sb_printf(lbl, r->free_threaded ? " parked %s, woken by " : " waited %s for ",
                  fmt_dur(d, sizeof(d), bl->wait_ns));
        sb_thread_label(lbl, r, bl->holder_tid);
        sb_str(lbl, " in ");
        sb_func_label(lbl, r, bl->func);
        sb_printf(lbl, " (%" PRIu32 " wait%s)\n", bl->count, bl->count == 1 ? "" : "s");
        if (!lbl->err)
            sb_mem(b, lbl->p, lbl->len);
    }
}

int gt_emit__text(const struct gt_result *r, const struct gt_emit_meta *m, int top_n, char **out)
{
    struct sbuf b = {0}, lbl = {0};
    int err = 0;

    if (!r || !m || !out)
        return -EINVAL;
    err = check_result(r);
    if (err)
        return err;
    *out = NULL;

    text_headline(&b, r, m);
    text_table(&b, r, m);
    if (r->gil_known && top_n > 0)
        text_blame(&b, &lbl, r, m, top_n);

    err = b.err ? b.err : lbl.err;
    if (!err && !b.p)
        err = -ENOMEM;
    if (err)
        goto cleanup;
    /* Names are bytes; the text must be UTF-8 (Python decodes it strictly). */
    lbl.len = 0;
    sb_utf8(&lbl, b.p, b.len);
    if ((err = lbl.err))
        goto cleanup;
    *out = lbl.p;
    lbl.p = NULL;

cleanup:
    free(b.p);
    free(lbl.p);
    return err;
}


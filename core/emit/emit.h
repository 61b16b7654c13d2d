/* SPDX-License-Identifier: MIT */
/* Emit: a merged result as Chrome Trace Event JSON, a self-contained HTML viewer,
 * or a text table. Plain C + jansson, unit-tested by tests/c/emit/test_emit.c. */
#ifndef GT_EMIT_H
#define GT_EMIT_H

#include <stdint.h>
#include <stdio.h>

#include "merge.h"

/* Facts about the run that every output shows. Strings are borrowed; NULL = absent. */
struct gt_emit_meta {
    const char *title;          /* e.g. the script or "cell 3" */
    const char *backend;        /* "hooks", "bpf" or "none" */
    const char *backend_reason; /* why that backend ran, or why another did not */
    const char *sched_status;   /* where OS states came from, or why they are missing */
    const char *python;         /* interpreter version and build */
    int32_t pid;
    uint64_t event_count;    /* call events recorded */
    uint64_t dropped_events; /* call events not recorded (max_events reached) */
    uint64_t gil_dropped;    /* GIL events not recorded (max_events reached, or lost) */
    uint64_t sched_lost;     /* scheduler records not recorded (max_events, or lost) */
    uint64_t max_events;     /* the cap of each kind of stream; 0 = none */
    const char *tracer_note; /* threads the function tracer missed (a sentence), or NULL */
    const char *view;        /* the viewer tab to open on (NULL = timeline) */
    const char *theme;       /* the viewer's theme: auto, light, dark (NULL = auto) */
    int32_t scope_tid;       /* the thread that started the trace, 0 = unknown */
    int all_threads;         /* text: list background threads too (else one line names them) */
    const char *sampling;    /* sampling mode: interval, samples, the sampler's GIL use; NULL */
    const char *tool_note;   /* what giltracer's own threads (in no view) cost; NULL: none */
    uint64_t gil_aggregated;   /* GIL events past max_events kept as aggregates (exact totals) */
    uint64_t sched_aggregated; /* scheduler records past max_events kept as aggregates */
    uint64_t calls_aggregated; /* call events past max_events kept as call trees */
    /* Child processes merged in (follow_children): each one's pid and command line. */
    const struct gt_emit_process *processes;
    size_t nprocesses;
    /* The payload's "what_if" (analyze/whatif.h): CPUs (0 = this machine's online CPUs),
     * the free-threading cost factor (0 = 1.0), a hand-off's wake-up cost (ns), the
     * tracer's own cost per call event (ns) and each CPU's speed with all busy (0 = 1.0). */
    unsigned whatif_cpus;
    double whatif_ft_factor;
    double whatif_handoff_ns;
    double whatif_event_ns;
    double whatif_parallel_speed; /* 0 = 1: CPUs as fast together as alone */
    int keep_last; /* past max_events the call streams kept their last events (a flight recorder) */
    /* Free-threaded builds with the lock-kind probe: the payload's "lock_kinds" value, a JSON
     * object made by the Python layer (magics/giltracer/lockkinds.py), written verbatim; NULL = none. */
    const char *lock_kinds;
};

struct gt_emit_process {
    int32_t pid;
    const char *cmd;
};

/**
 * gt_emit__chrome_json() - Chrome Trace Event JSON (Perfetto, chrome://tracing).
 * Returns 0 or -errno (-EIO on a write error, -ENOMEM).
 */
int gt_emit__chrome_json(const struct gt_result *r, const struct gt_emit_meta *m, FILE *f);

/**
 * gt_emit__payload_json() - the viewer's data payload (schema in core/viewer/README.md),
 * safe to embed in <script type="application/json">: '<', '>' and '&' are escaped.
 * Returns 0 or -errno.
 */
int gt_emit__payload_json(const struct gt_result *r, const struct gt_emit_meta *m, FILE *f);

/**
 * gt_emit__html() - one self-contained HTML file: viewer (core/viewer/) + payload.
 * Returns 0 or -errno.
 */
int gt_emit__html(const struct gt_result *r, const struct gt_emit_meta *m, FILE *f);

/**
 * gt_emit__text() - the per-thread summary table and the top GIL-blame rows.
 * Returns 0 and sets *out to a malloc'd NUL-terminated string, or -errno.
 */
int gt_emit__text(const struct gt_result *r, const struct gt_emit_meta *m, int top_n, char **out);

#endif /* GT_EMIT_H */

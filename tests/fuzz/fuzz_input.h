/* SPDX-License-Identifier: MIT */
/* Fuzz harness support: decode arbitrary bytes into a merge input (per-thread call,
 * GIL and scheduler streams: unbalanced, out of order, duplicate timestamps, bad
 * function ids) and, for the emitters, hostile names and run facts. */
#ifndef GT_FUZZ_INPUT_H
#define GT_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "emit.h"
#include "merge.h"

/* A failed property is a crash for libFuzzer (and a saved reproducer). */
#define FZ_ASSERT(cond)                                                              \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: property failed: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                 \
        }                                                                            \
    } while (0)

struct fz_trace {
    struct gt_trace_input in;
    struct gt_emit_meta meta;
    /* Everything below is owned: freed by fz_trace__free. */
    struct gt_func *funcs;
    struct gt_thread_input *threads;
    void **allocs; /* every other block (events, chunks, maps, names) */
    size_t nallocs, allocs_cap;
};

/* Decode `data` into t (always succeeds; missing bytes read as zero). With names,
 * function/thread names and meta strings are hostile (invalid UTF-8, "</script>",
 * U+2028, up to 100 KB); without, they are short fixed strings. */
void fz_trace__decode(const uint8_t *data, size_t size, int with_names, struct fz_trace *t);
void fz_trace__free(struct fz_trace *t);

/* The properties every merge result must have (aborts otherwise). */
void fz_check_result(const struct gt_trace_input *in, const struct gt_result *r);

#endif /* GT_FUZZ_INPUT_H */

/* SPDX-License-Identifier: MIT */
/* The page's column compression (core/emit/deflate.c: zlib level 1 for ids, our
 * Huffman-only blocks for times, on a thread of its own) against libdeflate on the same
 * columns: ours stays only if the library loses on the numbers.
 *   deflate_bench CHUNKS_FILE NSPANS [REPS]
 * CHUNKS_FILE: records of kind (1 byte: 0 ids, 1 times), length (u32 LE), bytes: the
 * inflated #gt-bin of a real page, written by bench/deflate_bench.py. Prints one JSON line:
 * per method the compressed bytes and the best-of-REPS time (ns per span). */
#define _GNU_SOURCE
#include <libdeflate.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "deflate.h"

struct chunk {
    enum zkind kind;
    uint8_t *p;
    size_t len;
};

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* The chunk stream as the page inflates it: uvarint(length) + bytes per chunk. */
static uint8_t *stream_of(const struct chunk *c, size_t n, size_t *len)
{
    size_t cap = 0;
    for (size_t i = 0; i < n; i++)
        cap += c[i].len + 10;
    uint8_t *s = malloc(cap ? cap : 1), *p = s;
    for (size_t i = 0; s && i < n; i++) {
        p = put_uvar(p, c[i].len);
        memcpy(p, c[i].p, c[i].len);
        p += c[i].len;
    }
    *len = (size_t)(p - s);
    return s;
}

/* Ours, as the page writer runs it: columns queued to the compressor thread. */
static size_t ours(const struct chunk *c, size_t n)
{
    struct zout z;
    if (zout_init(&z))
        return 0;
    struct sbuf b = {0};
    for (size_t i = 0; i < n; i++) {
        b.len = 0;
        sb_mem(&b, c[i].p, c[i].len);
        zout_chunk(&z, &b, c[i].kind);
    }
    size_t out = zout_finish(&z) ? 0 : z.out.len;
    free(b.p);
    zout_free(&z);
    return out;
}

/* libdeflate on the whole stream at one level (a zlib stream, as the page needs). */
static size_t whole(struct libdeflate_compressor *d, const uint8_t *s, size_t len, uint8_t *out,
                    size_t cap)
{
    return libdeflate_zlib_compress(d, s, len, out, cap);
}

/* zlib on the whole stream at level 1. */
static size_t zlib1(const uint8_t *s, size_t len, uint8_t *out, size_t cap)
{
    uLongf n = cap;
    return compress2(out, &n, s, len, 1) == Z_OK ? n : 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: deflate_bench CHUNKS_FILE NSPANS [REPS]\n");
        return 2;
    }
    double nspans = atof(argv[2]);
    int reps = argc > 3 ? atoi(argv[3]) : 5;
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    struct chunk *c = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        uint8_t hdr[5];
        if (fread(hdr, 1, 5, f) != 5)
            break;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            c = realloc(c, cap * sizeof(*c));
        }
        c[n].kind = hdr[0] ? Z_TIMES : Z_IDS;
        c[n].len = hdr[1] | hdr[2] << 8 | hdr[3] << 16 | (size_t)hdr[4] << 24;
        c[n].p = malloc(c[n].len ? c[n].len : 1);
        if (fread(c[n].p, 1, c[n].len, f) != c[n].len)
            return 1;
        n++;
    }
    fclose(f);
    size_t slen;
    uint8_t *s = stream_of(c, n, &slen);
    size_t ocap = libdeflate_zlib_compress_bound(NULL, slen) + compressBound(slen);
    uint8_t *out = malloc(ocap);

    const char *names[] = {"ours", "zlib-1", "libdeflate-1", "libdeflate-2", "libdeflate-4",
                           "libdeflate-6"};
    const int levels[] = {0, 0, 1, 2, 4, 6};
    enum { NMETHODS = sizeof(names) / sizeof(*names) };
    printf("{\"nspans\": %.0f, \"raw_bytes\": %zu, \"chunks\": %zu, \"methods\": {", nspans, slen, n);
    for (int m = 0; m < NMETHODS; m++) {
        struct libdeflate_compressor *d = levels[m] ? libdeflate_alloc_compressor(levels[m]) : NULL;
        double best = 1e300;
        size_t bytes = 0;
        for (int r = 0; r < reps; r++) {
            double t0 = now_ns();
            bytes = m == 0 ? ours(c, n) : m == 1 ? zlib1(s, slen, out, ocap) : whole(d, s, slen, out, ocap);
            double t = now_ns() - t0;
            best = t < best ? t : best;
        }
        libdeflate_free_compressor(d);
        printf("%s\"%s\": {\"bytes\": %zu, \"ns_per_span\": %.2f}", m ? ", " : "", names[m], bytes,
               best / nspans);
    }
    printf("}}\n");
    for (size_t i = 0; i < n; i++)
        free(c[i].p);
    free(c);
    free(s);
    free(out);
    return 0;
}

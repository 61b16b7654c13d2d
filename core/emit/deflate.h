/* SPDX-License-Identifier: MIT */
/* The page's binary columns: varint column encoding and their compression (zlib and
 * Huffman-only deflate blocks) on a thread of its own. Internal to core/emit. */
#ifndef GT_EMIT_DEFLATE_H
#define GT_EMIT_DEFLATE_H

#include <pthread.h>
#include <stdint.h>
#include <zlib.h>

#include "writer.h"

/* The page carries the bulky columns as one zlib stream of chunks, base64 in
 * <script type="application/octet-stream" id="gt-bin">; the JSON refers to chunks by
 * index. A chunk is uvarint(length) + bytes; one column per chunk, so each compresses
 * among its own kind (schema in core/viewer/README.md). */
#define ZOUT_STEP (256 * 1024)

/* How a column compresses. Ids, depths and flags repeat in runs and patterns: zlib's
 * level 1 finds those. Times are mostly noise in their low bits: string matching finds
 * little there (level 6 saves 4 % at 20x the time), so they are only Huffman coded, by
 * huff_block (deflate.c) at a few times the speed of zlib's Huffman-only mode. The stream is
 * zlib's format: header, raw deflate segments from zlib (reset at each, so none refers
 * back past our blocks) and our blocks, both ending on a byte boundary, then Adler-32. */
enum zkind { Z_IDS, Z_TIMES };

#define HUFF_MIN_CHUNK (16u << 10) /* smaller time columns: zlib, as the ids */
#define HUFF_BLOCK (64u << 10)     /* bytes per block (one code table each) */

/* A column waiting to be compressed. */
struct zjob {
    struct zjob *next;
    struct sbuf buf;
    enum zkind kind;
};

/* Compression is a third of the page's write time, so it runs on a thread of its own
 * while the caller encodes the next columns: the caller queues whole columns
 * (zout_chunk), the thread deflates them in order, so the stream is the same as when
 * compressed inline (the fallback when no thread can start). */
#define ZQUEUE_MAX_BYTES (64u << 20) /* the caller waits above this much queued */

struct zout {
    z_stream z; /* raw deflate, for the ids */
    struct sbuf out; /* the compressed bytes */
    uint32_t nchunks;
    uint32_t adler;        /* of everything compressed so far */
    int in_zlib, zlib_used; /* a zlib segment is open; zlib has been used (reset first) */
    uint64_t bitbuf;       /* huff_block's bits not yet in out */
    unsigned nbits;
    int err;  /* the compressor's first error */
    int perr; /* the caller's (encoding) first error */
    int open;
    /* the pipeline: the thread owns the fields above (but perr and nchunks, the
     * caller's) until joined; mu guards those below */
    pthread_t thread;
    int threaded, closing;
    pthread_mutex_t mu;
    pthread_cond_t work, room;
    struct zjob *head, *tail, *spare; /* queued columns; done ones for reuse */
    size_t queued;                    /* bytes in the queue */
    int shared_err;                   /* err, for the caller */
};

static inline uint8_t *put_uvar(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

static inline uint64_t zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline void col_uvar(struct sbuf *b, uint64_t v)
{
    if (b->len + 11 > b->cap && sb_reserve(b, 10))
        return;
    b->len = (size_t)((char *)put_uvar((uint8_t *)b->p + b->len, v) - b->p);
}

/* A time delta that is almost never negative (span times in nesting order): d + 1, so
 * the usual 1..127 ns gaps take one byte; a negative one as 0 then zigzag(d). */
static inline void col_delta(struct sbuf *b, int64_t d)
{
    if (d >= 0) {
        col_uvar(b, (uint64_t)d + 1);
    } else {
        col_uvar(b, 0);
        col_uvar(b, zigzag(d));
    }
}

/* Starts the compressor (its thread when one can start). Returns 0 or -ENOMEM. */
int zout_init(struct zout *z);
/* The first error so far (encoding, or compression). */
int zout_error(struct zout *z);
/* Append column b as the next chunk (and empty b for reuse); returns its index. */
uint32_t zout_chunk(struct zout *z, struct sbuf *b, enum zkind kind);
/* Ends the stream: z->out holds the whole zlib stream. Returns 0 or -errno. */
int zout_finish(struct zout *z);
void zout_free(struct zout *z);

#endif /* GT_EMIT_DEFLATE_H */

/* SPDX-License-Identifier: MIT */
/* Compression of the page's binary columns (deflate.h). */
#define _GNU_SOURCE
#include "deflate.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void zout_feed(struct zout *z, const void *p, size_t n, int flush)
{
    const Bytef *in = p;
    int rc = Z_OK;
    do {
        size_t take = n > (1u << 30) ? (1u << 30) : n;
        z->z.next_in = (Bytef *)in;
        z->z.avail_in = (uInt)take;
        if (take) /* zout_finish feeds (NULL, 0): no arithmetic on a null pointer */
            in += take;
        n -= take;
        int fl = n ? Z_NO_FLUSH : flush;
        do {
            if (z->err || (z->err = sb_reserve(&z->out, ZOUT_STEP)))
                return;
            z->z.next_out = (Bytef *)z->out.p + z->out.len;
            z->z.avail_out = ZOUT_STEP;
            rc = deflate(&z->z, fl);
            z->out.len += ZOUT_STEP - z->z.avail_out;
            if (rc == Z_STREAM_ERROR) {
                z->err = -EIO;
                return;
            }
        } while (z->z.avail_out == 0 || (fl == Z_FINISH && rc != Z_STREAM_END));
    } while (n);
}

/* ---- Huffman-only deflate blocks (RFC 1951, 3.2.7) ---- */

/* Appends n <= 32 bits, least significant first; room was reserved in z->out. */
static inline void bits_put(struct zout *z, uint32_t v, unsigned n)
{
    assert(n <= 32 && z->nbits < 32 && (n == 32 || v >> n == 0));
    z->bitbuf |= (uint64_t)v << z->nbits;
    z->nbits += n;
    if (z->nbits >= 32) {
        uint8_t *p = (uint8_t *)z->out.p + z->out.len;
        uint32_t lo = (uint32_t)z->bitbuf;
        p[0] = (uint8_t)lo;
        p[1] = (uint8_t)(lo >> 8);
        p[2] = (uint8_t)(lo >> 16);
        p[3] = (uint8_t)(lo >> 24);
        z->out.len += 4;
        z->bitbuf >>= 32;
        z->nbits -= 32;
    }
}

/* An empty stored block: the stream continues on a byte boundary. */
static void bits_align(struct zout *z)
{
    bits_put(z, 0, 3); /* BFINAL 0, BTYPE 00 */
    uint8_t *p = (uint8_t *)z->out.p + z->out.len;
    while (z->nbits) {
        *p++ = (uint8_t)z->bitbuf;
        z->bitbuf >>= 8;
        z->nbits = z->nbits > 8 ? z->nbits - 8 : 0;
    }
    memcpy(p, "\x00\x00\xff\xff", 4); /* LEN 0, NLEN */
    z->out.len = (size_t)(p + 4 - (uint8_t *)z->out.p);
    z->bitbuf = 0;
}

/* Code lengths (<= limit) of a Huffman code for freq[0..n) (n <= 288): two queues over
 * the symbols sorted by frequency; when too deep, the frequencies are halved and the
 * code built again (equal ones give a balanced tree, so this ends). A lone symbol gets
 * a partner of length 1 too, so every code is complete. */
static void huff_lengths(const uint32_t *freq, int n, int limit, uint8_t *len)
{
    uint64_t f[288], w[2 * 288];
    int sym[288], parent[2 * 288], depth[2 * 288], m = 0;
    for (int i = 0; i < n; i++) {
        f[i] = freq[i];
        len[i] = 0;
    }
    for (int i = 0; i < n; i++)
        if (f[i])
            sym[m++] = i;
    if (m < 2) {
        len[m ? sym[0] : 0] = 1;
        len[m && sym[0] == 0 ? 1 : 0] = 1;
        return;
    }
    for (;;) {
        for (int i = 1; i < m; i++) { /* insertion sort by frequency, then symbol */
            int s = sym[i], j = i;
            for (; j > 0 && f[sym[j - 1]] > f[s]; j--)
                sym[j] = sym[j - 1];
            sym[j] = s;
        }
        for (int i = 0; i < m; i++)
            w[i] = f[sym[i]];
        int leaf = 0, inner = m;
        for (int next = m; next < 2 * m - 1; next++) {
            int pick[2];
            for (int k = 0; k < 2; k++)
                pick[k] = leaf < m && (inner >= next || w[leaf] <= w[inner]) ? leaf++ : inner++;
            w[next] = w[pick[0]] + w[pick[1]];
            parent[pick[0]] = parent[pick[1]] = next;
        }
        int maxd = 0;
        depth[2 * m - 2] = 0;
        for (int i = 2 * m - 3; i >= 0; i--) {
            depth[i] = depth[parent[i]] + 1;
            if (i < m && depth[i] > maxd)
                maxd = depth[i];
        }
        if (maxd <= limit) {
            for (int i = 0; i < m; i++)
                len[sym[i]] = (uint8_t)depth[i];
            return;
        }
        for (int i = 0; i < m; i++)
            f[sym[i]] = (f[sym[i]] + 1) / 2;
    }
}

/* Canonical codes for the lengths, bit-reversed (deflate sends codes from the top bit). */
static void huff_codes(const uint8_t *len, int n, uint16_t *code)
{
    unsigned count[16] = {0}, next[16] = {0}, c = 0;
    for (int i = 0; i < n; i++)
        count[len[i]]++;
    count[0] = 0;
    for (int b = 1; b < 16; b++)
        next[b] = c = (c + count[b - 1]) << 1;
    for (int i = 0; i < n; i++) {
        unsigned v = len[i] ? next[len[i]]++ : 0, r = 0;
        for (int b = 0; b < len[i]; b++, v >>= 1)
            r = r << 1 | (v & 1);
        code[i] = (uint16_t)r;
    }
}

/* One dynamic-Huffman block of literals only: the bytes of a then of b. */
static void huff_block(struct zout *z, const uint8_t *a, size_t na, const uint8_t *b, size_t nb)
{
    static const uint8_t order[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};
    uint32_t freq[257] = {0}, cfreq[19] = {0};
    uint8_t len[257 + 2], clen[19];
    uint16_t code[257], ccode[19];
    if (z->err || (z->err = sb_reserve(&z->out, 2 * (na + nb) + 1024)))
        return; /* <= 15 bits a byte, plus the tables */
    for (size_t i = 0; i < na; i++)
        freq[a[i]]++;
    for (size_t i = 0; i < nb; i++)
        freq[b[i]]++;
    freq[256] = 1; /* end of block */
    huff_lengths(freq, 257, 15, len);
    len[257] = len[258] = 1; /* two distance codes, never used */
    for (int i = 0; i < 259; i++)
        cfreq[len[i]]++;
    huff_lengths(cfreq, 19, 7, clen);
    huff_codes(len, 257, code);
    huff_codes(clen, 19, ccode);
    int hclen = 19;
    while (hclen > 4 && !clen[order[hclen - 1]])
        hclen--;
    bits_put(z, 2 << 1, 3);                /* BFINAL 0, BTYPE 10: dynamic */
    bits_put(z, 0 | 1 << 5 | (unsigned)(hclen - 4) << 10, 14); /* HLIT 257, HDIST 2 */
    for (int i = 0; i < hclen; i++)
        bits_put(z, clen[order[i]], 3);
    for (int i = 0; i < 259; i++)
        bits_put(z, ccode[len[i]], clen[len[i]]);
    for (size_t i = 0; i < na; i++)
        bits_put(z, code[a[i]], len[a[i]]);
    for (size_t i = 0; i < nb; i++)
        bits_put(z, code[b[i]], len[b[i]]);
    bits_put(z, code[256], len[256]);
}

/* Deflate one column: uvarint(length) + bytes. */
static void zout_compress(struct zout *z, const struct sbuf *b, enum zkind kind)
{
    uint8_t hdr[10];
    size_t nh = (size_t)(put_uvar(hdr, b->len) - hdr);
    const uint8_t *p = (const uint8_t *)b->p;
    z->adler = (uint32_t)adler32(z->adler, hdr, (uInt)nh);
    for (size_t at = 0; at < b->len;) { /* adler32 takes uInt lengths */
        size_t take = b->len - at > (1u << 30) ? (1u << 30) : b->len - at;
        z->adler = (uint32_t)adler32(z->adler, p + at, (uInt)take);
        at += take;
    }
    if (kind == Z_TIMES && b->len >= HUFF_MIN_CHUNK) {
        if (z->in_zlib) { /* end zlib's segment on a byte boundary */
            zout_feed(z, NULL, 0, Z_SYNC_FLUSH);
            z->in_zlib = 0;
        }
        size_t first = b->len < HUFF_BLOCK ? b->len : HUFF_BLOCK;
        huff_block(z, hdr, nh, p, first);
        for (size_t at = first; at < b->len; at += HUFF_BLOCK)
            huff_block(z, NULL, 0, p + at, b->len - at < HUFF_BLOCK ? b->len - at : HUFF_BLOCK);
        if (!z->err && !(z->err = sb_reserve(&z->out, 16)))
            bits_align(z);
        return;
    }
    if (!z->in_zlib) {
        if (z->zlib_used && deflateReset(&z->z) != Z_OK)
            z->err = z->err ? z->err : -EIO;
        z->in_zlib = z->zlib_used = 1;
    }
    zout_feed(z, hdr, nh, Z_NO_FLUSH);
    if (b->len)
        zout_feed(z, b->p, b->len, Z_NO_FLUSH);
}

static void *zout_thread(void *arg)
{
    struct zout *z = arg;
    pthread_mutex_lock(&z->mu);
    for (;;) {
        struct zjob *j = z->head;
        if (!j) {
            if (z->closing)
                break;
            pthread_cond_wait(&z->work, &z->mu);
            continue;
        }
        z->head = j->next;
        if (!z->head)
            z->tail = NULL;
        pthread_mutex_unlock(&z->mu);
        zout_compress(z, &j->buf, j->kind); /* the stream is this thread's until joined */
        pthread_mutex_lock(&z->mu);
        z->shared_err = z->err;
        z->queued -= j->buf.len;
        j->buf.len = 0;
        j->next = z->spare;
        z->spare = j;
        pthread_cond_signal(&z->room);
    }
    pthread_mutex_unlock(&z->mu);
    return NULL;
}

int zout_init(struct zout *z)
{
    memset(z, 0, sizeof(*z));
    if (deflateInit2(&z->z, 1, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return -ENOMEM;
    z->open = 1;
    z->adler = (uint32_t)adler32(0, NULL, 0);
    sb_mem(&z->out, "\x78\x01", 2); /* zlib header: deflate, 32K window, level 1 */
    if (z->out.err) {
        zout_free(z);
        return -ENOMEM;
    }
    if (pthread_mutex_init(&z->mu, NULL))
        return 0; /* compress inline */
    if (pthread_cond_init(&z->work, NULL)) {
        pthread_mutex_destroy(&z->mu);
        return 0;
    }
    if (pthread_cond_init(&z->room, NULL)) {
        pthread_cond_destroy(&z->work);
        pthread_mutex_destroy(&z->mu);
        return 0;
    }
    z->threaded = pthread_create(&z->thread, NULL, zout_thread, z) == 0;
    if (!z->threaded) {
        pthread_cond_destroy(&z->room);
        pthread_cond_destroy(&z->work);
        pthread_mutex_destroy(&z->mu);
    }
    return 0;
}

/* Wait for the compressor to finish the queue and end (idempotent). */
static void zout_join(struct zout *z)
{
    if (!z->threaded)
        return;
    pthread_mutex_lock(&z->mu);
    z->closing = 1;
    pthread_cond_signal(&z->work);
    pthread_mutex_unlock(&z->mu);
    pthread_join(z->thread, NULL);
    pthread_cond_destroy(&z->room);
    pthread_cond_destroy(&z->work);
    pthread_mutex_destroy(&z->mu);
    z->threaded = 0;
}

/* The first error so far (encoding, or compression). */
int zout_error(struct zout *z)
{
    if (z->perr || !z->threaded)
        return z->perr ? z->perr : z->err;
    pthread_mutex_lock(&z->mu);
    int err = z->shared_err;
    pthread_mutex_unlock(&z->mu);
    return err;
}

/* Append column b as the next chunk (and empty b for reuse); returns its index. */
uint32_t zout_chunk(struct zout *z, struct sbuf *b, enum zkind kind)
{
    if (b->err && !z->perr)
        z->perr = b->err;
    if (!z->threaded) {
        zout_compress(z, b, kind);
        b->len = 0;
        return z->nchunks++;
    }
    pthread_mutex_lock(&z->mu);
    while (z->queued > ZQUEUE_MAX_BYTES && z->head)
        pthread_cond_wait(&z->room, &z->mu);
    struct zjob *j = z->spare;
    if (j)
        z->spare = j->next;
    pthread_mutex_unlock(&z->mu);
    if (!j && !(j = calloc(1, sizeof(*j)))) {
        z->perr = z->perr ? z->perr : -ENOMEM;
        b->len = 0;
        return z->nchunks++;
    }
    /* The column moves to the job; b takes the job's old (empty) buffer. */
    struct sbuf old = j->buf;
    j->buf = *b;
    j->buf.err = 0;
    j->kind = kind;
    j->next = NULL;
    *b = old;
    b->len = 0;
    b->err = 0;
    pthread_mutex_lock(&z->mu);
    if (z->tail)
        z->tail->next = j;
    else
        z->head = j;
    z->tail = j;
    z->queued += j->buf.len;
    pthread_cond_signal(&z->work);
    pthread_mutex_unlock(&z->mu);
    return z->nchunks++;
}

int zout_finish(struct zout *z)
{
    zout_join(z);
    if (z->perr)
        return z->perr;
    if (!z->in_zlib && z->zlib_used && deflateReset(&z->z) != Z_OK)
        z->err = z->err ? z->err : -EIO;
    zout_feed(z, NULL, 0, Z_FINISH); /* the last block */
    uint8_t tail[4] = {(uint8_t)(z->adler >> 24), (uint8_t)(z->adler >> 16),
                       (uint8_t)(z->adler >> 8), (uint8_t)z->adler};
    if (!z->err)
        sb_mem(&z->out, tail, 4);
    return z->err ? z->err : z->out.err;
}

void zout_free(struct zout *z)
{
    zout_join(z);
    for (int list = 0; list < 2; list++) {
        for (struct zjob *j = list ? z->spare : z->head, *next; j; j = next) {
            next = j->next;
            free(j->buf.p);
            free(j);
        }
    }
    z->head = z->tail = z->spare = NULL;
    if (z->open)
        deflateEnd(&z->z);
    free(z->out.p);
    z->out.p = NULL;
}

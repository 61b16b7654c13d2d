/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the emitters (Chrome JSON, viewer payload, HTML page, text) on
 * merge results with hostile names. Properties: every JSON output parses; the
 * payload has no '<', '>' or '&' (safe inside <script>); the HTML page's payload
 * ends exactly at its own </script> and the title holds no markup; text is valid
 * UTF-8 (the Python boundary decodes it strictly). */
#define _GNU_SOURCE
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The checks scan whole pages byte by byte: no coverage feedback from them (it would
 * only slow the fuzzer down). */
#if defined(__clang__)
#define NO_COVERAGE __attribute__((no_sanitize("coverage")))
#else
#define NO_COVERAGE
#endif

typedef int (*emit_fn)(const struct gt_result *, const struct gt_emit_meta *, FILE *);

/* The emitter's whole output as a NUL-terminated string (caller frees). */
static char *emit(emit_fn fn, const struct gt_result *r, const struct gt_emit_meta *m,
                  size_t *len)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    FZ_ASSERT(f);
    int err = fn(r, m, f);
    FZ_ASSERT(fclose(f) == 0);
    FZ_ASSERT(err == 0);
    FZ_ASSERT(strlen(buf) == *len); /* no NUL inside */
    return buf;
}

static void parses(const char *s, size_t len)
{
    json_error_t e;
    json_t *j = json_loadb(s, len, 0, &e);
    if (!j)
        fprintf(stderr, "invalid JSON at %d: %s\n", e.position, e.text);
    FZ_ASSERT(j);
    json_decref(j);
}

/* base64 of a zlib stream of JSON (the page's #gt-data): base64 only, and the JSON parses. */
static void parses_deflated(const char *b64, size_t len)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    unsigned char *z = malloc(len / 4 * 3 + 3);
    size_t zn = 0;
    uint32_t acc = 0;
    int bits = 0;
    FZ_ASSERT(z);
    for (size_t i = 0; i < len; i++) {
        const char *c = b64[i] ? memchr(tab, b64[i], 64) : NULL;
        FZ_ASSERT(c || (b64[i] == '=' && i + 2 >= len));
        if (!c)
            continue;
        acc = acc << 6 | (uint32_t)(c - tab);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            z[zn++] = (unsigned char)(acc >> bits);
        }
    }
    uLongf cap = 1 << 16, got = 0;
    unsigned char *u = NULL;
    int rc;
    for (;;) {
        u = realloc(u, cap);
        got = cap;
        rc = uncompress(u, &got, z, zn);
        if (rc != Z_BUF_ERROR || !u)
            break;
        cap *= 4;
    }
    FZ_ASSERT(u && rc == Z_OK);
    FZ_ASSERT(!memchr(u, '<', got) && !memchr(u, '>', got) && !memchr(u, '&', got));
    parses((const char *)u, got);
    free(z);
    free(u);
}

/* Case-insensitive search for needle (which starts with '<'). By hand: libFuzzer
 * hooks strncasecmp, and a call per byte of a 100 KB page is slow. */
NO_COVERAGE static const char *find_ci(const char *hay, const char *end, const char *needle)
{
    size_t n = strlen(needle);
    for (const char *p = hay; p + n <= end; p++) {
        if (*p != '<')
            continue;
        size_t i = 1;
        while (i < n && (p[i] | 0x20) == (needle[i] | 0x20))
            i++;
        if (i == n)
            return p;
    }
    return NULL;
}

NO_COVERAGE static int valid_utf8(const unsigned char *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = p[i];
        size_t k = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3
                 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        if (!k || i + k > n)
            return 0;
        for (size_t j = 1; j < k; j++)
            if ((p[i + j] & 0xC0) != 0x80)
                return 0;
        if ((c == 0xE0 && p[i + 1] < 0xA0) || (c == 0xED && p[i + 1] > 0x9F) ||
            (c == 0xF0 && p[i + 1] < 0x90) || (c == 0xF4 && p[i + 1] > 0x8F))
            return 0;
        i += k;
    }
    return 1;
}

static void check_html(const char *h, size_t len)
{
    static const char open[] = "<script type=\"application/octet-stream\" id=\"gt-data\">\n";
    const char *end = h + len;
    const char *p = strstr(h, open);
    FZ_ASSERT(p);
    p += sizeof(open) - 1;
    /* The first thing that can end the script element is the template's own; the payload
     * is base64 of its deflated JSON. */
    const char *close = find_ci(p, end, "</script");
    FZ_ASSERT(close && close > p && close[-1] == '\n');
    FZ_ASSERT(!find_ci(p, close, "<!--") && !memchr(p, '<', (size_t)(close - p)));
    parses_deflated(p, (size_t)(close - p - 1));
    /* The title element holds text only. */
    const char *t = strstr(h, "<title>");
    const char *te = t ? strstr(t, "</title>") : NULL;
    FZ_ASSERT(t && te && te < p);
    FZ_ASSERT(!memchr(t + 7, '<', (size_t)(te - t - 7)));
    /* The binary columns: base64 only, so nothing in them can end the element. */
    static const char bin[] = "<script type=\"application/octet-stream\" id=\"gt-bin\">\n";
    const char *b = strstr(close, bin);
    FZ_ASSERT(b);
    b += sizeof(bin) - 1;
    const char *be = find_ci(b, end, "</script");
    FZ_ASSERT(be && be > b && be[-1] == '\n');
    for (const char *q = b; q < be - 1; q++)
        FZ_ASSERT((*q >= 'A' && *q <= 'Z') || (*q >= 'a' && *q <= 'z') || (*q >= '0' && *q <= '9') ||
                  *q == '+' || *q == '/' || *q == '=');
    /* Exactly the template's four script elements (data, columns, compressed code, its
     * loader), each closed once, and the page ends. */
    size_t nclose = 0;
    for (const char *q = h; (q = find_ci(q, end, "</script")); q++)
        nclose++;
    FZ_ASSERT(nclose == 4);
    FZ_ASSERT(len >= 8 && strcmp(end - 8, "</html>\n") == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fz_trace t;
    struct gt_result *r = NULL;
    size_t len;

    fz_trace__decode(data, size, 1, &t);
    if (gt_merge__run(&t.in, &r) != 0)
        goto cleanup;

    char *s = emit(gt_emit__chrome_json, r, &t.meta, &len);
    parses(s, len);
    free(s);

    s = emit(gt_emit__payload_json, r, &t.meta, &len);
    parses(s, len);
    FZ_ASSERT(!memchr(s, '<', len) && !memchr(s, '>', len) && !memchr(s, '&', len));
    free(s);

    s = emit(gt_emit__html, r, &t.meta, &len);
    check_html(s, len);
    free(s);

    FZ_ASSERT(gt_emit__text(r, &t.meta, (int)(size % 7) - 1, &s) == 0);
    FZ_ASSERT(s && valid_utf8((const unsigned char *)s, strlen(s)));
    free(s);

cleanup:
    gt_result__free(r);
    fz_trace__free(&t);
    return 0;
}

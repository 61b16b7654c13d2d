/* SPDX-License-Identifier: MIT */
/* Unit tests for core/emit/ on hand-built results (no merge); prints "N passed, M failed". */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "emit.h"
#include "pack.h"
#include "whatif.h"
#include "profile.h"

extern const char gt_asset_app_html[];
extern const char gt_asset_viewer_css[];
extern const char gt_asset_viewer_js[];

static int passed, failed;

#define CHECK(cond)                                                          \
    do {                                                                     \
        if (cond) {                                                          \
            passed++;                                                        \
        } else {                                                             \
            failed++;                                                        \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                    \
    } while (0)

#define T0 1000000000000ull
#define GIL_BASE 0x10000000
#define OS_BASE 0x20000000

/* ---- the hand-built result ---------------------------------------------- */

static struct gt_func funcs[] = {
    {"fib", "/x/demo.py", 3, 0},
    {"list.append", "", 0, GT_FUNC_C},
    {"</script><!--&", "/x/evil<>&.py", 7, 0},
};

static struct gt_span spans0[] = {
    {T0 + 0, T0 + 1000000, 0, 0, GT_SPAN_CLIPPED_START},
    {T0 + 1500, T0 + 2750, 1, 1, GT_SPAN_C},
    {T0 + 10000, T0 + 20000, 2, 1, GT_SPAN_UNWIND},
};
static struct gt_span spans1[] = {
    {T0 + 100000, T0 + 900000, 0, 0, 0},
};
static struct gt_interval gil0[] = {
    {T0, T0 + 600000, GT_GIL_STATE_HELD, 0},
    {T0 + 600000, T0 + 1000000, GT_GIL_STATE_RELEASED, 0},
};
static struct gt_interval gil1[] = {
    {T0 + 100000, T0 + 600000, GT_GIL_STATE_WAIT, 0},
    {T0 + 600000, T0 + 900000, GT_GIL_STATE_HELD, 0},
};
static struct gt_interval os0[] = {
    {T0, T0 + 500000, GT_OS_ON_CPU, 0},
    {T0 + 500000, T0 + 700000, GT_OS_PREEMPTED, 0},
    {T0 + 700000, T0 + 1000000, GT_OS_BLOCKED, 0},
};
static struct gt_blame blame[] = {
    {1235, 1234, 0, 1, 500000},
    {1234, 1235, GT_NO_FUNC, 2, 1500},
};

static struct gt_thread_result threads[2];
static struct gt_result res;
static struct gt_emit_meta meta;

static void build(void)
{
    memset(threads, 0, sizeof(threads));
    threads[0] = (struct gt_thread_result){
        .tid = 1234, .pid = 0, .ident = 140000000000001ull, .name = "MainThread",
        .start_ns = T0, .end_ns = T0 + 1000000, .spans = spans0, .nspans = 3,
        .gil = gil0, .ngil = 2, .os = os0, .nos = 3, .has_sched = 1,
        .summary = {.wall_ns = 1000000, .held_ns = 600000, .wait_ns = 0,
                    .released_ns = 400000, .off_cpu_ns = 500000, .preempted_ns = 200000,
                    .acquisitions = 3, .longest_wait_ns = 0, .drop_requests = 0,
                    .held_pct = 60.0, .wait_pct = 0.0, .released_pct = 40.0},
    };
    threads[1] = (struct gt_thread_result){
        .tid = 1235, .pid = 0, .ident = 140000000000002ull, .name = "Thread-1",
        .start_ns = T0 + 100000, .end_ns = T0 + 900000, .spans = spans1, .nspans = 1,
        .gil = gil1, .ngil = 2, .os = NULL, .nos = 0, .has_sched = 0,
        .summary = {.wall_ns = 800000, .held_ns = 300000, .wait_ns = 500000,
                    .released_ns = 0, .off_cpu_ns = -1, .preempted_ns = -1,
                    .acquisitions = 1, .longest_wait_ns = 500000, .drop_requests = 2,
                    .held_pct = 37.5, .wait_pct = 62.5, .released_pct = 0.0},
    };
    res = (struct gt_result){
        .t0 = T0, .t1 = T0 + 1000000, .funcs = funcs, .nfuncs = 3, .threads = threads,
        .nthreads = 2, .blame = blame, .nblame = 2, .gil_known = 1,
    };
    meta = (struct gt_emit_meta){
        .title = "demo.py", .backend = "hooks", .backend_reason = "GOT hooks installed",
        .sched_status = "perf_event", .python = "3.11.7", .pid = 1234, .event_count = 8,
    };
}

/* ---- helpers ------------------------------------------------------------ */

typedef int (*emit_fn)(const struct gt_result *, const struct gt_emit_meta *, FILE *);

static char *run(emit_fn fn, const struct gt_result *r, const struct gt_emit_meta *m,
                 size_t *len, int *rc)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f) {
        *rc = -errno;
        return NULL;
    }
    *rc = fn(r, m, f);
    fclose(f);
    if (len)
        *len = n;
    return buf;
}

static size_t count_substr(const char *s, const char *sub)
{
    size_t n = 0, l = strlen(sub);
    for (const char *p = strstr(s, sub); p; p = strstr(p + l, sub))
        n++;
    return n;
}

/* The event in traceEvents with these ph/name/pid/tid, or NULL. */
/* ---- a decoder for the page's binary columns (core/viewer/README.md) ------ */

struct chunks {
    unsigned char *u; /* inflated */
    size_t n, *off, *len, count;
};

static int b64val(int c)
{
    return c >= 'A' && c <= 'Z' ? c - 'A' : c >= 'a' && c <= 'z' ? c - 'a' + 26
         : c >= '0' && c <= '9' ? c - '0' + 52 : c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* base64 text (whitespace around it allowed) -> inflated chunks; 0 or -1 */
/* base64 of a zlib stream, inflated into *u (malloc'd, *n bytes). 0 or -1. */
static int b64_inflate(const char *b64, size_t len, unsigned char **u, size_t *n)
{
    unsigned char *z = malloc(len / 4 * 3 + 3);
    size_t zn = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < len; i++) {
        int v = b64val((unsigned char)b64[i]);
        if (v < 0)
            continue; /* whitespace, padding */
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            z[zn++] = (unsigned char)(acc >> bits);
        }
    }
    uLongf cap = 1 << 16, got;
    int rc;
    *u = NULL;
    for (;;) {
        *u = realloc(*u, cap);
        got = cap;
        rc = uncompress(*u, &got, z, zn);
        if (rc != Z_BUF_ERROR)
            break;
        cap *= 4;
    }
    free(z);
    *n = got;
    return rc == Z_OK ? 0 : -1;
}

static int chunks_load(const char *b64, size_t len, struct chunks *c)
{
    memset(c, 0, sizeof(*c));
    if (b64_inflate(b64, len, &c->u, &c->n))
        return -1;
    for (size_t p = 0; p < c->n;) {
        uint64_t v = 0;
        int sh = 0;
        while (c->u[p] & 0x80)
            v |= (uint64_t)(c->u[p++] & 0x7f) << sh, sh += 7;
        v |= (uint64_t)c->u[p++] << sh;
        c->off = realloc(c->off, (c->count + 1) * sizeof(size_t));
        c->len = realloc(c->len, (c->count + 1) * sizeof(size_t));
        c->off[c->count] = p;
        c->len[c->count++] = v;
        p += v;
        if (p > c->n)
            return -1;
    }
    return 0;
}

static void chunks_free(struct chunks *c)
{
    free(c->u);
    free(c->off);
    free(c->len);
}

static uint64_t uvar_at(const struct chunks *c, size_t *p, size_t e)
{
    uint64_t v = 0;
    int sh = 0;
    while (*p < e && c->u[*p] & 0x80)
        v |= (uint64_t)(c->u[(*p)++] & 0x7f) << sh, sh += 7;
    if (*p < e)
        v |= (uint64_t)c->u[(*p)++] << sh;
    return v;
}

static int64_t unzigzag(uint64_t v)
{
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* n values of chunk k, read as uvarints (zz 1: zigzag-signed; 2: time deltas, d + 1 or
 * 0 then zigzag d); the chunk must hold exactly n */
static int64_t *col_read(const struct chunks *c, size_t k, size_t n, int zz)
{
    int64_t *out = calloc(n + 1, sizeof(*out));
    if (k >= c->count)
        return out;
    size_t p = c->off[k], e = p + c->len[k];
    for (size_t i = 0; i < n && p < e; i++) {
        uint64_t v = uvar_at(c, &p, e);
        if (zz == 2)
            out[i] = v ? (int64_t)(v - 1) : unzigzag(uvar_at(c, &p, e));
        else
            out[i] = zz ? unzigzag(v) : (int64_t)v;
    }
    CHECK(p == e); /* no bytes left over */
    return out;
}

static json_t *jarr(const int64_t *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_integer(v[i]));
    return a;
}

/* {"n", "c"} of spans -> the version 1 columns */
static json_t *dec_spans(const struct chunks *c, size_t n, size_t k)
{
    int64_t *depth = col_read(c, k, n, 1), *func = col_read(c, k + 1, n, 0);
    int64_t *flags = col_read(c, k + 2, n, 0), *start = col_read(c, k + 3, n, 2);
    int64_t *end = calloc(n + 1, sizeof(*end));
    size_t nexit = n, *stack = calloc(n + 1, sizeof(*stack)), top = 0;
    int64_t *ex = col_read(c, k + 4, nexit, 2), clock = 0, prevd = -1;
    size_t ei = 0;
    for (size_t i = 0; i <= n; i++) {
        int64_t d = i < n ? prevd + 1 + depth[i] : -1;
        while (top && depth[stack[top - 1]] >= d) {
            clock += ex[ei++];
            end[stack[--top]] = clock;
        }
        if (i == n)
            break;
        depth[i] = prevd = d;
        func[i] -= 1;
        clock += start[i];
        start[i] = clock;
        stack[top++] = i;
    }
    for (size_t i = 0; i < n; i++)
        end[i] -= start[i];
    json_t *o = json_pack("{s:o,s:o,s:o,s:o,s:o}", "start", jarr(start, n), "dur", jarr(end, n),
                          "func", jarr(func, n), "depth", jarr(depth, n), "flags", jarr(flags, n));
    free(depth), free(func), free(flags), free(start), free(end), free(stack), free(ex);
    return o;
}

static json_t *dec_intervals(const struct chunks *c, size_t n, size_t k)
{
    int64_t *start = col_read(c, k, n, 1), *dur = col_read(c, k + 1, n, 0);
    int64_t *state = col_read(c, k + 2, n, 0), end = 0;
    for (size_t i = 0; i < n; i++) {
        start[i] += end;
        end = start[i] + dur[i];
    }
    json_t *o = json_pack("{s:o,s:o,s:o}", "start", jarr(start, n), "dur", jarr(dur, n),
                          "state", jarr(state, n));
    free(start), free(dur), free(state);
    return o;
}

static json_t *dec_profile(const struct chunks *c, size_t n, size_t k)
{
    static const char *const keys[] = {"parent", "func", "calls", "run", "hoff", "wait", "rel", "unk"};
    json_t *o = json_object();
    for (size_t j = 0; j < 8; j++) {
        int64_t *v = col_read(c, k + j, n, 0);
        for (size_t i = 0; i < n; i++)
            v[i] = j == 0 ? (int64_t)i - v[i] : j == 1 ? v[i] - 1 : v[i];
        json_object_set_new(o, keys[j], jarr(v, n));
        free(v);
    }
    return o;
}

/* The page's #gt-code block, base64 decoded and inflated, is the viewer's CSS, a NUL, the
 * panes' markup, a NUL and its script as embedded: minified at build time (core/jsmin), so
 * no indented line. */
static int page_code_is(const char *html)
{
    const char *p = strstr(html, "id=\"gt-code\"");
    p = p ? strchr(p, '>') : NULL;
    const char *pe = p ? strstr(p, "</script>") : NULL;
    if (!pe)
        return 0;
    size_t css = strlen(gt_asset_viewer_css), app = strlen(gt_asset_app_html), js = strlen(gt_asset_viewer_js);
    size_t un = 0;
    unsigned char *u = NULL;
    int ok = !b64_inflate(p + 1, (size_t)(pe - p - 1), &u, &un) && un == css + 1 + app + 1 + js &&
             !memcmp(u, gt_asset_viewer_css, css) && !u[css] && !memcmp(u + css + 1, gt_asset_app_html, app) &&
             !u[css + 1 + app] && !memcmp(u + css + app + 2, gt_asset_viewer_js, js) && js > 1000 &&
             strstr(gt_asset_app_html, "id=\"gt-tab-timeline\"") && !strstr(gt_asset_viewer_js, "\n ") &&
             !strstr(gt_asset_viewer_js, "\n/*");
    free(u);
    return ok;
}

/* The page's payload with its columns decoded: what gt_emit__payload_json writes
 * (version 1). NULL if the page does not parse. */
static json_t *page_payload(const char *html)
{
    const char *p = strstr(html, "id=\"gt-data\""), *q = strstr(html, "id=\"gt-bin\"");
    p = p ? strchr(p, '>') : NULL;
    q = q ? strchr(q, '>') : NULL;
    const char *pe = p ? strstr(p, "</script>") : NULL, *qe = q ? strstr(q, "</script>") : NULL;
    if (!pe || !qe)
        return NULL;
    unsigned char *ju = NULL;
    size_t jn = 0;
    json_t *j = b64_inflate(p + 1, (size_t)(pe - p - 1), &ju, &jn) ? NULL : json_loadb((char *)ju, jn, 0, NULL);
    free(ju);
    struct chunks c;
    if (!j || chunks_load(q + 1, (size_t)(qe - q - 1), &c)) {
        json_decref(j);
        return NULL;
    }
    CHECK(json_integer_value(json_object_get(j, "version")) == 2);
    json_object_set_new(j, "version", json_integer(1));
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(j, "threads"), i, t) {
        static const char *const keys[] = {"spans", "gil", "os", "profile"};
        for (int k = 0; k < 4; k++) {
            json_t *ref = json_object_get(t, keys[k]);
            size_t n = (size_t)json_integer_value(json_object_get(ref, "n"));
            size_t ck = (size_t)json_integer_value(json_object_get(ref, "c"));
            int packed = k == 0 && json_object_get(ref, "p") != NULL;
            CHECK(json_object_size(ref) == 2u + (size_t)packed);
            if (packed) { /* the calls each record stands for, less one: all calls in all */
                int64_t *more = col_read(&c, ck + 5, n, 0);
                uint64_t calls = n;
                for (size_t q = 0; more && q < n; q++)
                    calls += (uint64_t)more[q];
                free(more);
                json_t *st = json_object_get(json_object_get(t, "span_stats"), "n");
                size_t q;
                json_t *v;
                uint64_t counted = 0;
                json_array_foreach(st, q, v)
                    counted += (uint64_t)json_integer_value(v);
                CHECK(counted == calls);
                json_object_del(t, "span_stats");
            }
            json_object_set_new(t, keys[k], k == 0 ? dec_spans(&c, n, ck)
                                          : k == 3 ? dec_profile(&c, n, ck) : dec_intervals(&c, n, ck));
        }
    }
    chunks_free(&c);
    return j;
}

static json_t *find_event(json_t *evs, const char *ph, const char *name, json_int_t pid,
                          json_int_t tid)
{
    size_t i;
    json_t *e;
    json_array_foreach(evs, i, e) {
        if (strcmp(json_string_value(json_object_get(e, "ph")), ph) == 0 &&
            strcmp(json_string_value(json_object_get(e, "name")), name) == 0 &&
            json_integer_value(json_object_get(e, "pid")) == pid &&
            json_integer_value(json_object_get(e, "tid")) == tid)
            return e;
    }
    return NULL;
}

/* r with the spans of each thread past GT_PACK_MIN_SPANS as the page packs them; NULL:
 * none is. Free the spans of threads whose spans differ from r's, then the threads. */
static struct gt_thread_result *packed_threads(const struct gt_result *r)
{
    struct gt_thread_result *th = NULL;
    for (size_t i = 0; i < r->nthreads; i++) {
        const struct gt_thread_result *t = &r->threads[i];
        if (t->nspans <= GT_PACK_MIN_SPANS)
            continue;
        if (!th) {
            th = malloc(r->nthreads * sizeof(*th));
            memcpy(th, r->threads, r->nthreads * sizeof(*th));
        }
        struct gt_span *sp = malloc(t->nspans * sizeof(*sp));
        struct gt_pack pk;
        uint64_t calls;
        size_t n = 0;
        gt_pack__init(&pk, t->spans, t->nspans, r->t0, (r->t1 - r->t0) / GT_PACK_PIXELS);
        while (gt_pack__next(&pk, &sp[n], &calls))
            n++;
        th[i].spans = sp;
        th[i].nspans = n;
    }
    return th;
}

/* The page's binary columns decode to exactly the plain JSON payload of the same run
 * (with a big thread's spans packed as pack.h says: what the page ships). */
static void check_page_decodes_to_payload(const struct gt_result *r)
{
    size_t len;
    int rc, prc;
    char *out = run(gt_emit__html, r, &meta, &len, &rc);
    struct gt_result rp = *r;
    struct gt_thread_result *pth = packed_threads(r);
    if (pth)
        rp.threads = pth;
    char *pay = run(gt_emit__payload_json, &rp, &meta, &len, &prc);
    for (size_t i = 0; pth && i < r->nthreads; i++)
        if (pth[i].spans != r->threads[i].spans)
            free(pth[i].spans);
    int packed = pth != NULL;
    free(pth);
    CHECK(rc == 0 && prc == 0);
    json_t *a = out ? page_payload(out) : NULL;
    json_t *b = pay ? json_loads(pay, 0, NULL) : NULL;
    if (packed && b) { /* the profile is of the calls as recorded: from r's own payload */
        char *full = run(gt_emit__payload_json, r, &meta, &len, &prc);
        json_t *fj = full ? json_loads(full, 0, NULL) : NULL;
        size_t i;
        json_t *t;
        json_array_foreach(json_object_get(b, "threads"), i, t) {
            json_t *ft = json_array_get(json_object_get(fj, "threads"), i);
            json_object_set(t, "profile", json_object_get(ft, "profile"));
        }
        CHECK(fj != NULL);
        json_decref(fj);
        free(full);
    }
    CHECK(a && b && json_equal(a, b));
    json_decref(a);
    json_decref(b);
    free(out);
    free(pay);
}

/* Under valgrind (GT_TEST_UNDER_VALGRIND) a big page is only written, for memcheck of the
 * writer's paths: decoding it back into jansson objects (a node per number) took 2 minutes
 * there; that check runs natively and under ASan. Returns whether it did so. */
static int page_written_only_under_valgrind(const struct gt_result *r)
{
    if (!getenv("GT_TEST_UNDER_VALGRIND"))
        return 0;
    size_t len;
    int rc;
    char *out = run(gt_emit__html, r, &meta, &len, &rc);
    CHECK(rc == 0 && out && strstr(out, "id=\"gt-bin\""));
    free(out);
    return 1;
}

static const char *meta_arg(json_t *evs, const char *name, json_int_t pid, json_int_t tid)
{
    json_t *e = find_event(evs, "M", name, pid, tid);
    return e ? json_string_value(json_object_get(json_object_get(e, "args"), "name")) : NULL;
}

static size_t count_x(json_t *evs, json_int_t pid)
{
    size_t i, n = 0;
    json_t *e;
    json_array_foreach(evs, i, e) {
        if (strcmp(json_string_value(json_object_get(e, "ph")), "X") == 0 &&
            json_integer_value(json_object_get(e, "pid")) == pid)
            n++;
    }
    return n;
}

/* Every "ts": and "dur": value is digits '.' three digits. */
static int times_are_fixed3(const char *s)
{
    const char *keys[2] = {"\"ts\":", "\"dur\":"};
    for (int k = 0; k < 2; k++) {
        for (const char *p = strstr(s, keys[k]); p; p = strstr(p + 1, keys[k])) {
            const char *q = p + strlen(keys[k]);
            int d = 0;
            while (*q >= '0' && *q <= '9')
                q++, d++;
            if (!d || q[0] != '.' || q[1] < '0' || q[1] > '9' || q[2] < '0' || q[2] > '9' ||
                q[3] < '0' || q[3] > '9' || (q[4] != ',' && q[4] != '}'))
                return 0;
        }
    }
    return 1;
}

/* ---- tests -------------------------------------------------------------- */

static void test_chrome(void)
{
    size_t len;
    int rc;
    char *out = run(gt_emit__chrome_json, &res, &meta, &len, &rc);
    CHECK(rc == 0);
    CHECK(out && len > 0);
    json_error_t jerr;
    json_t *root = out ? json_loads(out, 0, &jerr) : NULL;
    CHECK(root != NULL);
    if (!root) {
        fprintf(stderr, "chrome JSON: %s at line %d\n", jerr.text, jerr.line);
        free(out);
        return;
    }
    json_t *evs = json_object_get(root, "traceEvents");
    CHECK(json_is_array(evs));
    CHECK(strcmp(json_string_value(json_object_get(root, "displayTimeUnit")), "ns") == 0);

    /* Exact span events, as text (3 decimals, ints for pid/tid). */
    CHECK(strstr(out, "{\"ph\":\"X\",\"ts\":0.000,\"dur\":1000.000,\"name\":\"fib (demo.py:3)\","
                      "\"pid\":1234,\"tid\":1234,\"args\":{\"clipped\":\"start\"}}") != NULL);
    CHECK(strstr(out, "{\"ph\":\"X\",\"ts\":1.500,\"dur\":1.250,\"name\":\"list.append\","
                      "\"cat\":\"c\",\"pid\":1234,\"tid\":1234}") != NULL);
    CHECK(strstr(out, "{\"ph\":\"X\",\"ts\":10.000,\"dur\":10.000,\"name\":"
                      "\"</script><!--& (evil<>&.py:7)\",\"pid\":1234,\"tid\":1234,"
                      "\"args\":{\"exit\":\"exception\"}}") != NULL);
    CHECK(strstr(out, "{\"ph\":\"X\",\"ts\":100.000,\"dur\":800.000,\"name\":\"fib (demo.py:3)\","
                      "\"pid\":1234,\"tid\":1235}") != NULL);
    CHECK(times_are_fixed3(out));

    /* Parsed: the same events, right types. */
    json_t *e = find_event(evs, "X", "list.append", 1234, 1234);
    CHECK(e != NULL);
    if (e) {
        CHECK(json_is_real(json_object_get(e, "ts")));
        CHECK(json_real_value(json_object_get(e, "ts")) == 1.5);
        CHECK(json_real_value(json_object_get(e, "dur")) == 1.25);
        CHECK(strcmp(json_string_value(json_object_get(e, "cat")), "c") == 0);
    }
    e = find_event(evs, "X", "</script><!--& (evil<>&.py:7)", 1234, 1234);
    CHECK(e != NULL);
    CHECK(count_x(evs, 1234) == 4);

    /* GIL and OS tracks: synthetic processes with synthetic tids. */
    CHECK(count_x(evs, GIL_BASE + 1234) == 4);
    CHECK(count_x(evs, OS_BASE + 1234) == 3);
    CHECK(find_event(evs, "X", "held", GIL_BASE + 1234, GIL_BASE + 1234) != NULL);
    CHECK(find_event(evs, "X", "released", GIL_BASE + 1234, GIL_BASE + 1234) != NULL);
    CHECK(find_event(evs, "X", "waiting for GIL", GIL_BASE + 1234, GIL_BASE + 1235) != NULL);
    CHECK(find_event(evs, "X", "held", GIL_BASE + 1234, GIL_BASE + 1235) != NULL);
    CHECK(find_event(evs, "X", "on-cpu", OS_BASE + 1234, OS_BASE + 1234) != NULL);
    CHECK(find_event(evs, "X", "blocked", OS_BASE + 1234, OS_BASE + 1234) != NULL);
    CHECK(strstr(out, "{\"ph\":\"X\",\"ts\":100.000,\"dur\":500.000,\"name\":\"waiting for GIL\","
                      "\"cat\":\"gil\",\"pid\":268436690,\"tid\":268436691}") != NULL);
    CHECK(strstr(out, "{\"ph\":\"X\",\"ts\":500.000,\"dur\":200.000,\"name\":\"preempted\","
                      "\"cat\":\"os\",\"pid\":536872146,\"tid\":536872146}") != NULL);

    /* Metadata. */
    const char *s;
    s = meta_arg(evs, "process_name", 1234, 1234);
    CHECK(s && strcmp(s, "python (pid 1234)") == 0);
    s = meta_arg(evs, "process_name", GIL_BASE + 1234, GIL_BASE + 1234);
    CHECK(s && strcmp(s, "GIL (pid 1234)") == 0);
    s = meta_arg(evs, "process_name", OS_BASE + 1234, OS_BASE + 1234);
    CHECK(s && strcmp(s, "OS states (pid 1234)") == 0);
    s = meta_arg(evs, "thread_name", 1234, 1234);
    CHECK(s && strcmp(s, "MainThread (1234)") == 0);
    s = meta_arg(evs, "thread_name", 1234, 1235);
    CHECK(s && strcmp(s, "Thread-1 (1235)") == 0);
    s = meta_arg(evs, "thread_name", GIL_BASE + 1234, GIL_BASE + 1235);
    CHECK(s && strcmp(s, "GIL: Thread-1 (1235)") == 0);
    s = meta_arg(evs, "thread_name", OS_BASE + 1234, OS_BASE + 1234);
    CHECK(s && strcmp(s, "OS: MainThread (1234)") == 0);
    CHECK(find_event(evs, "M", "thread_name", OS_BASE + 1234, OS_BASE + 1235) == NULL);
    e = find_event(evs, "M", "thread_sort_index", 1234, 1235);
    CHECK(e && json_integer_value(json_object_get(json_object_get(e, "args"), "sort_index")) == 1);
    CHECK(find_event(evs, "M", "process_name", 1234, 1234) != NULL);
    CHECK(count_substr(out, "\"process_name\"") == 3);

    /* Every pid/tid is an integer that fits in 31 bits. */
    size_t i;
    int ints_ok = 1;
    json_array_foreach(evs, i, e) {
        json_t *pid = json_object_get(e, "pid"), *tid = json_object_get(e, "tid");
        if (!json_is_integer(pid) || !json_is_integer(tid) || json_integer_value(pid) < 0 ||
            json_integer_value(pid) > INT32_MAX || json_integer_value(tid) < 0 ||
            json_integer_value(tid) > INT32_MAX)
            ints_ok = 0;
    }
    CHECK(ints_ok);
    CHECK(json_array_size(evs) == 4 + 4 + 3 + 6 + 10);

    /* otherData: meta and blame. */
    json_t *od = json_object_get(root, "otherData");
    CHECK(json_is_object(od));
    CHECK(strcmp(json_string_value(json_object_get(od, "title")), "demo.py") == 0);
    CHECK(strcmp(json_string_value(json_object_get(od, "t0_ns")), "1000000000000") == 0);
    CHECK(json_is_true(json_object_get(od, "gil_known")));
    json_t *bl = json_object_get(od, "blame");
    CHECK(json_array_size(bl) == 2);
    json_t *b0 = json_array_get(bl, 0), *b1 = json_array_get(bl, 1);
    CHECK(b0 && strcmp(json_string_value(json_object_get(b0, "waiter")), "Thread-1 (1235)") == 0);
    CHECK(b0 && strcmp(json_string_value(json_object_get(b0, "holder")), "MainThread (1234)") == 0);
    CHECK(b0 && strcmp(json_string_value(json_object_get(b0, "func")), "fib (demo.py:3)") == 0);
    CHECK(b0 && json_integer_value(json_object_get(b0, "wait_ns")) == 500000);
    CHECK(b1 && json_is_null(json_object_get(b1, "func")));
    CHECK(json_array_size(json_object_get(od, "threads")) == 2);

    json_decref(root);
    free(out);

    /* Without a GIL probe and without OS states: no synthetic processes. */
    res.gil_known = 0;
    threads[0].has_sched = 0;
    out = run(gt_emit__chrome_json, &res, &meta, &len, &rc);
    CHECK(rc == 0);
    root = out ? json_loads(out, 0, NULL) : NULL;
    CHECK(root != NULL);
    if (root) {
        evs = json_object_get(root, "traceEvents");
        CHECK(count_x(evs, 1234) == 4);
        CHECK(count_x(evs, GIL_BASE + 1234) == 0);
        CHECK(count_x(evs, OS_BASE + 1234) == 0);
        CHECK(count_substr(out, "\"process_name\"") == 1);
        json_decref(root);
    }
    free(out);
    build();

    /* Threads of another process (bpf): own pid, own GIL/OS processes. */
    threads[1].pid = 777;
    out = run(gt_emit__chrome_json, &res, &meta, &len, &rc);
    CHECK(rc == 0);
    root = out ? json_loads(out, 0, NULL) : NULL;
    CHECK(root != NULL);
    if (root) {
        evs = json_object_get(root, "traceEvents");
        CHECK(count_x(evs, 777) == 1);
        CHECK(count_x(evs, GIL_BASE + 777) == 2);
        s = meta_arg(evs, "process_name", 777, 777);
        CHECK(s && strcmp(s, "python (pid 777)") == 0);
        json_decref(root);
    }
    free(out);
    build();

    /* Empty result. */
    struct gt_result empty = {.t0 = T0, .t1 = T0};
    out = run(gt_emit__chrome_json, &empty, &meta, &len, &rc);
    CHECK(rc == 0);
    root = out ? json_loads(out, 0, NULL) : NULL;
    CHECK(root && json_array_size(json_object_get(root, "traceEvents")) == 0);
    json_decref(root);
    free(out);
}

static const char expected_payload[] =
    "{\"version\":1,"
    "\"meta\":{\"title\":\"demo.py\",\"backend\":\"hooks\",\"backend_reason\":\"GOT hooks installed\","
    "\"sched\":\"perf_event\",\"python\":\"3.11.7\",\"pid\":1234,\"t0_ns\":\"1000000000000\","
    "\"duration_ns\":1000000,\"event_count\":8,\"dropped_events\":0,\"gil_dropped\":0,"
    "\"sched_lost\":0,\"max_events\":0,\"tracer_note\":null,\"gil_known\":true},"
    "\"funcs\":{\"name\":[\"fib\",\"list.append\",\"</script><!--&\"],"
    "\"file\":[\"/x/demo.py\",\"\",\"/x/evil<>&.py\"],\"line\":[3,0,7],\"c\":[0,1,0]},"
    "\"threads\":["
    "{\"tid\":1234,\"pid\":1234,\"ident\":\"140000000000001\",\"name\":\"MainThread\","
    "\"start\":0,\"end\":1000000,"
    "\"summary\":{\"wall_ns\":1000000,\"held_ns\":600000,\"wait_ns\":0,\"released_ns\":400000,"
    "\"off_cpu_ns\":500000,\"preempted_ns\":200000,\"acquisitions\":3,\"longest_wait_ns\":0,"
    "\"drop_requests\":0,\"held_pct\":60.0,\"wait_pct\":0.0,\"released_pct\":40.0},"
    "\"spans\":{\"start\":[0,1500,10000],\"dur\":[1000000,1250,10000],\"func\":[0,1,2],"
    "\"depth\":[0,1,1],\"flags\":[1,8,4]},"
    "\"gil\":{\"start\":[0,600000],\"dur\":[600000,400000],\"state\":[2,0]},"
    "\"os\":{\"start\":[0,500000,700000],\"dur\":[500000,200000,300000],\"state\":[0,1,2]},"
    /* fib: clipped (0 calls); on CPU while held, preempted 500-600 us, then released */
    "\"profile\":{\"parent\":[-1,0,1,1],\"func\":[-1,0,1,2],\"calls\":[0,0,1,1],"
    "\"run\":[0,488750,1250,10000],\"hoff\":[0,100000,0,0],\"wait\":[0,0,0,0],"
    "\"rel\":[0,400000,0,0],\"unk\":[0,0,0,0]}},"
    "{\"tid\":1235,\"pid\":1234,\"ident\":\"140000000000002\",\"name\":\"Thread-1\","
    "\"start\":100000,\"end\":900000,"
    "\"summary\":{\"wall_ns\":800000,\"held_ns\":300000,\"wait_ns\":500000,\"released_ns\":0,"
    "\"off_cpu_ns\":null,\"preempted_ns\":null,\"acquisitions\":1,\"longest_wait_ns\":500000,"
    "\"drop_requests\":2,\"held_pct\":37.5,\"wait_pct\":62.5,\"released_pct\":0.0},"
    "\"spans\":{\"start\":[100000],\"dur\":[800000],\"func\":[0],\"depth\":[0],\"flags\":[0]},"
    "\"gil\":{\"start\":[100000,600000],\"dur\":[500000,300000],\"state\":[1,2]},"
    "\"os\":{\"start\":[],\"dur\":[],\"state\":[]},"
    "\"profile\":{\"parent\":[-1,0],\"func\":[-1,0],\"calls\":[0,1],\"run\":[0,300000],"
    "\"hoff\":[0,0],\"wait\":[0,500000],\"rel\":[0,0],\"unk\":[0,0]}}],"
    "\"blame\":[{\"waiter\":1235,\"holder\":1234,\"func\":0,\"wait_ns\":500000,\"count\":1},"
    "{\"waiter\":1234,\"holder\":1235,\"func\":-1,\"wait_ns\":1500,\"count\":2}]}";

static void test_payload(void)
{
    size_t len;
    int rc;
    char *out = run(gt_emit__payload_json, &res, &meta, &len, &rc);
    CHECK(rc == 0);
    json_error_t jerr;
    json_t *got = out ? json_loads(out, 0, &jerr) : NULL;
    json_t *want = json_loads(expected_payload, 0, &jerr);
    CHECK(want != NULL);
    CHECK(got != NULL);
    /* "what_if" depends on this machine's CPU count: its shape here, its numbers in
     * tests/c/analyze/test_whatif.c. */
    json_t *wi = got ? json_object_get(got, "what_if") : NULL;
    CHECK(wi && json_is_object(wi) && json_is_integer(json_object_get(wi, "cpus")) &&
          json_is_real(json_object_get(wi, "speedup")) &&
          json_array_size(json_object_get(wi, "threads")) == 2 &&
          json_array_size(json_object_get(wi, "assumptions")) == GT_WHATIF_ASSUMPTIONS);
    if (got)
        json_object_del(got, "what_if");
    CHECK(got && want && json_equal(got, want));
    if (got && want && !json_equal(got, want))
        fprintf(stderr, "payload:\n%s\n", out);
    /* Embeddable: no raw '<', '>' or '&' anywhere in the bytes. */
    CHECK(out && !memchr(out, '<', len) && !memchr(out, '>', len) && !memchr(out, '&', len));
    CHECK(out && strstr(out, "\\u003c/script\\u003e\\u003c!--\\u0026") != NULL);
    /* The key order of the schema is kept. */
    CHECK(out && strncmp(out, "{\"version\":1,\"meta\":{\"title\":", 29) == 0);
    json_decref(got);
    json_decref(want);
    free(out);

    /* Absent strings are null; invalid UTF-8 becomes U+FFFD; control chars escaped. */
    struct gt_emit_meta m2 = meta;
    m2.title = NULL;
    m2.python = "3.12 \xff\xfe build\n<x>";
    m2.theme = "dark";
    m2.scope_tid = 4242;
    threads[0].name = NULL;
    out = run(gt_emit__payload_json, &res, &m2, &len, &rc);
    CHECK(rc == 0);
    got = out ? json_loads(out, 0, &jerr) : NULL;
    CHECK(got != NULL);
    if (got) {
        json_t *mm = json_object_get(got, "meta");
        CHECK(json_is_null(json_object_get(mm, "title")));
        const char *py = json_string_value(json_object_get(mm, "python"));
        CHECK(py && strcmp(py, "3.12 \xEF\xBF\xBD\xEF\xBF\xBD build\n<x>") == 0);
        /* the viewer's theme and the thread that started the trace (absent when unset, above) */
        const char *theme = json_string_value(json_object_get(mm, "theme"));
        CHECK(theme && strcmp(theme, "dark") == 0);
        CHECK(json_integer_value(json_object_get(mm, "scope_tid")) == 4242);
        CHECK(json_is_null(json_object_get(json_array_get(json_object_get(got, "threads"), 0),
                                           "name")));
    }
    CHECK(out && !memchr(out, '<', len));
    json_decref(got);
    free(out);
    build();

    /* No GIL probe: gil columns empty, gil_known false. */
    res.gil_known = 0;
    out = run(gt_emit__payload_json, &res, &meta, &len, &rc);
    CHECK(rc == 0);
    got = out ? json_loads(out, 0, &jerr) : NULL;
    CHECK(got != NULL);
    if (got) {
        json_t *t0 = json_array_get(json_object_get(got, "threads"), 0);
        CHECK(json_is_false(json_object_get(json_object_get(got, "meta"), "gil_known")));
        CHECK(json_array_size(json_object_get(json_object_get(t0, "gil"), "start")) == 0);
        CHECK(json_array_size(json_object_get(json_object_get(t0, "os"), "state")) == 3);
    }
    json_decref(got);
    free(out);
    build();
}

static void test_html(void)
{
    size_t len, plen;
    int rc, prc;
    struct gt_emit_meta m2 = meta;
    m2.title = "a<b>&\"c'";
    char *out = run(gt_emit__html, &res, &m2, &len, &rc);
    char *pay = run(gt_emit__payload_json, &res, &m2, &plen, &prc);
    CHECK(rc == 0 && prc == 0);
    if (!out || !pay) {
        free(out);
        free(pay);
        return;
    }
    CHECK(strlen(out) == len);
    CHECK(!strstr(out, "GT_PAYLOAD") && !strstr(out, "GT_TITLE") && !strstr(out, "GT_CODE"));
    CHECK(count_substr(out, "id=\"gt-data\"") == 1);
    CHECK(strstr(out, "a&lt;b&gt;&amp;&quot;c&#39;") != NULL);
    CHECK(strstr(out, "a<b>") == NULL);
    CHECK(strstr(out, "gtViewer") == NULL); /* the style and script are carried compressed */
    CHECK(page_code_is(out));
    CHECK(count_substr(out, "</script>") == count_substr(out, "<script"));

    /* The payload read back from the page, its binary columns decoded, equals the
     * standalone (version 1, plain JSON) payload. */
    CHECK(count_substr(out, "<script type=\"application/octet-stream\" id=\"gt-bin\">") == 1);
    json_t *a = page_payload(out);
    json_t *b = json_loads(pay, 0, NULL);
    CHECK(a && b && json_equal(a, b));
    json_decref(a);
    json_decref(b);
    free(out);
    free(pay);
}

/* Spans that do not nest as they should (a child before its parent, depth jumps, an
 * end before the start), far-apart times and big ids still round-trip exactly. */
static void test_html_odd_spans(void)
{
    static struct gt_span odd[] = {
        {T0 + 5000, T0 + 9000, 0, 0, 0},
        {T0 + 4000, T0 + 8000, 2, 3, 0xffff}, /* before its parent, depth 0 -> 3 */
        {T0 + 7000, T0 + 6000, 1, 1, 0},      /* ends before it starts: duration 0 */
        {T0 + (1ull << 45), T0 + (1ull << 45) + 1, 7, 2, 4}, /* func out of range: -1 */
        {T0, T0 + (1ull << 46), 0, 0, 1},
        {T0 + 3, T0 + 3, 1, 65535, 2},
    };
    struct gt_thread_result th[2];
    memcpy(th, threads, sizeof(th));
    th[0].spans = odd;
    th[0].nspans = sizeof(odd) / sizeof(odd[0]);
    th[1].gil = NULL;
    th[1].ngil = 0;
    th[1].nspans = 0;
    struct gt_result r = res;
    r.threads = th;
    check_page_decodes_to_payload(&r);
}

/* Columns big enough for the page's own Huffman blocks (16 KiB and up, several 64 KiB
 * blocks), next to small ones that zlib codes, in many threads (the compressor thread
 * queues them): times with a wide spread, constant times (two symbols a block), and
 * Fibonacci-skewed times (codes deeper than deflate's 15 bits, so the lengths must be
 * limited). The page decodes to the plain JSON payload exactly. */
static void test_html_big_columns(void)
{
    enum { NTH = 6 };
    static const size_t nsp[NTH] = {150000, 40000, 0, 121392, 20000, 5000};
    struct gt_thread_result th[NTH];
    struct gt_span *sp[NTH] = {0};
    struct gt_interval *gil = calloc(60000, sizeof(*gil));
    uint64_t x = 88172645463325252ull;
    int ok = gil != NULL;
    for (int t = 0; t < NTH; t++) {
        sp[t] = calloc(nsp[t] + 1, sizeof(*sp[t]));
        ok &= sp[t] != NULL;
    }
    CHECK(ok);
    if (!ok)
        goto cleanup;
    /* Fibonacci counts of the gaps 0, 1, 2, ...: fib(1) + ... + fib(25) = 121392 - 1 */
    static size_t fib_gap[121392];
    size_t nf = 0;
    for (size_t k = 0, a = 1, b = 1; nf < 121392; k++, a += b, b = a - b)
        for (size_t i = 0; i < a && nf < 121392; i++)
            fib_gap[nf++] = k;
    for (int t = 0; t < NTH; t++) {
        uint64_t ts = T0 + 100;
        for (size_t i = 0; i < nsp[t]; i++) {
            uint64_t gap, dur;
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            if (t == 1)
                gap = dur = 40; /* constant */
            else if (t == 3)
                gap = fib_gap[i], dur = fib_gap[(i * 7919) % nf];
            else
                gap = x % 5000, dur = (x >> 20) % 100000;
            sp[t][i] = (struct gt_span){ts + gap, ts + gap + dur, (uint32_t)(x % 3), 0, 0};
            ts += gap + dur;
        }
        th[t] = threads[t % 2];
        th[t].tid = 5000 + t;
        th[t].spans = sp[t];
        th[t].nspans = nsp[t];
        th[t].start_ns = T0;
        th[t].end_ns = ts + 1;
        th[t].gil = NULL;
        th[t].ngil = 0;
    }
    uint64_t at = T0; /* thread 0: many GIL intervals (a big chunk of GIL times) */
    for (size_t i = 0; i < 60000; i++, at += 1000 + i % 700)
        gil[i] = (struct gt_interval){at, at + 900 + i % 500, (uint8_t)(i % 3), 0};
    th[0].gil = gil;
    th[0].ngil = 60000;
    th[0].end_ns = at > th[0].end_ns ? at : th[0].end_ns;
    struct gt_result r = res;
    r.threads = th;
    r.nthreads = NTH;
    r.nblame = 0;
    if (!page_written_only_under_valgrind(&r))
        check_page_decodes_to_payload(&r);
cleanup:
    for (int t = 0; t < NTH; t++)
        free(sp[t]);
    free(gil);
}

/* A thread whose spans nearly all start a call path of their own (pairs of calls over
 * 1000 functions): the page keeps at most one profile node per 64 spans (at least 4000),
 * and the kept nodes' self times still add up to the thread's time. */
static void test_page_profile_budget(void)
{
    enum { PAIRS = 200000, NFN = 1000 };
    static struct gt_func fns[NFN];
    struct gt_span *sp = calloc(2 * PAIRS, sizeof(*sp));
    CHECK(sp != NULL);
    if (!sp)
        return;
    for (int f = 0; f < NFN; f++)
        fns[f] = (struct gt_func){"f", "many.py", (uint32_t)f, 0};
    uint64_t ts = T0 + 10;
    for (size_t i = 0; i < PAIRS; i++) { /* (parent, child) pairs: ~all distinct */
        /* Durations 1, 2, 4, ... ns, each twice as rare as the one before: the pruning
         * threshold (a power of two) can keep any share of the nodes. */
        uint64_t d = (uint64_t)1 << (__builtin_ctzll(i + 1) % 20);
        sp[2 * i] = (struct gt_span){ts, ts + d + 20, (uint32_t)(i % NFN), 0, 0};
        sp[2 * i + 1] = (struct gt_span){ts + 10, ts + 10 + d, (uint32_t)((i / NFN * 7 + i) % NFN), 1, 0};
        ts += d + 30;
    }
    struct gt_thread_result th = threads[0];
    th.spans = sp;
    th.nspans = 2 * PAIRS;
    th.start_ns = T0;
    th.end_ns = ts;
    th.gil = NULL;
    th.ngil = 0;
    struct gt_result r = res;
    r.funcs = fns;
    r.nfuncs = NFN;
    r.threads = &th;
    r.nthreads = 1;
    r.nblame = 0;
    r.t1 = ts;
    size_t len;
    int rc;
    if (page_written_only_under_valgrind(&r)) {
        free(sp);
        return;
    }
    char *pay = run(gt_emit__payload_json, &r, &meta, &len, &rc);
    json_t *j = pay ? json_loads(pay, 0, NULL) : NULL;
    json_t *prof = json_object_get(json_array_get(json_object_get(j, "threads"), 0), "profile");
    size_t kept = json_array_size(json_object_get(prof, "parent"));
    CHECK(rc == 0 && kept > 1000 && kept <= 2 * PAIRS / 64 + 1);
    uint64_t total = 0;
    static const char *const cols[] = {"run", "hoff", "wait", "rel", "unk"};
    for (size_t c = 0; c < 5; c++) {
        size_t i;
        json_t *v;
        json_array_foreach(json_object_get(prof, cols[c]), i, v)
            total += (uint64_t)json_integer_value(v);
    }
    CHECK(total == ts - T0);
    check_page_decodes_to_payload(&r);
    json_decref(j);
    free(pay);
    free(sp);
}

static char *text(const struct gt_result *r, const struct gt_emit_meta *m, int top_n, int *rc)
{
    char *s = NULL;
    *rc = gt_emit__text(r, m, top_n, &s);
    return s;
}

static void test_text(void)
{
    int rc;
    char *s = text(&res, &meta, 5, &rc);
    CHECK(rc == 0 && s);
    if (!s)
        return;
    static const char want[] =
        "giltracer (demo.py): 2 threads, 1.0 ms, 8 call events, backend hooks (GOT hooks "
        "installed), OS states: perf_event\n"
        " tid      name            wall   held   wait released  off-cpu    acq longest wait\n"
        " 1234     MainThread    1.0 ms  60.0%   0.0%    40.0%    50.0%      3         0 ns\n"
        " 1235     Thread-1    800.0 us  37.5%  62.5%     0.0%      n/a      1     500.0 us\n"
        "Top GIL waits (waiter <- holder in function):\n"
        "  Thread-1 (1235) waited 500.0 us for MainThread (1234) in fib (demo.py:3) (1 wait)\n"
        "  MainThread (1234) waited 1.5 us for Thread-1 (1235) in (no Python function) (2 waits)\n";
    CHECK(strcmp(s, want) == 0);
    if (strcmp(s, want) != 0)
        fprintf(stderr, "text:\n%s\n", s);
    free(s);

    /* top_n limits the blame rows; <= 0 shows none. */
    s = text(&res, &meta, 1, &rc);
    CHECK(rc == 0 && s && count_substr(s, " waited ") == 1);
    free(s);
    s = text(&res, &meta, 0, &rc);
    CHECK(rc == 0 && s && !strstr(s, "Top GIL waits"));
    free(s);
    s = text(&res, &meta, -3, &rc);
    CHECK(rc == 0 && s && !strstr(s, "Top GIL waits"));
    free(s);

    /* No GIL probe: GIL columns n/a and a line saying why. Dropped events: loud. */
    struct gt_emit_meta m2 = meta;
    m2.backend = "none";
    m2.backend_reason = "no symbol take_gil in libpython";
    m2.dropped_events = 123;
    m2.gil_dropped = 4;
    res.gil_known = 0;
    s = text(&res, &m2, 5, &rc);
    CHECK(rc == 0 && s);
    if (s) {
        CHECK(strstr(s, "WARNING: 123 call events dropped (max_events reached)\n") != NULL);
        CHECK(strstr(s, "WARNING: 4 GIL events dropped (max_events reached) or lost") != NULL);
        CHECK(strstr(s, "GIL columns n/a: no GIL probe ran (no symbol take_gil in libpython)\n"));
        CHECK(strstr(s, " 1234     MainThread    1.0 ms    n/a    n/a      n/a    50.0%    n/a"
                        "          n/a\n") != NULL);
        CHECK(strstr(s, " 1235     Thread-1    800.0 us    n/a    n/a      n/a      n/a    n/a"
                        "          n/a\n") != NULL);
        CHECK(!strstr(s, "Top GIL waits"));
    }
    free(s);
    build();

    /* Empty result, absent strings. */
    struct gt_result empty = {.t0 = T0, .t1 = T0 + 1234567890};
    struct gt_emit_meta m3 = {0};
    s = text(&empty, &m3, 5, &rc);
    CHECK(rc == 0 && s);
    CHECK(s && strncmp(s, "giltracer: 0 threads, 1.235 s, 0 call events, backend ?, OS states: n/a\n",
                       72) == 0);
    CHECK(s && strstr(s, "Top GIL waits") == NULL);
    free(s);
}

/* Idle child processes fold into one line whose count and list agree, whether or not a
 * child's threads are background ones: a worker whose only thread sat in get() from the
 * start (background) was listed but not counted ("5 idle worker processes: " and 6 pids,
 * once in CI), and its thread was named on the background line as well. */
static void test_text_idle_processes(void)
{
    static struct gt_interval held[1] = {{T0, T0 + 1000000, GT_GIL_STATE_HELD, 0}},
                              idle[1] = {{T0, T0 + 1000000, GT_GIL_STATE_RELEASED, 0}};
    struct gt_thread_result th[5] = {
        {.tid = 100, .pid = 100, .name = "MainThread", .gil = held, .ngil = 1},
        {.tid = 101, .pid = 100, .name = "sleeper", .gil = idle, .ngil = 1, .background = 1},
        {.tid = 200, .pid = 200, .name = "MainThread", .gil = idle, .ngil = 1},
        {.tid = 300, .pid = 300, .name = "MainThread", .gil = idle, .ngil = 1, .background = 1},
        {.tid = 400, .pid = 400, .name = "MainThread", .gil = held, .ngil = 1},
    };
    for (size_t i = 0; i < 5; i++) {
        th[i].start_ns = T0;
        th[i].end_ns = T0 + 1000000;
        th[i].summary.wall_ns = 1000000;
        th[i].summary.held_pct = th[i].gil == held ? 100.0 : 0.0;
        th[i].summary.released_pct = th[i].gil == held ? 0.0 : 100.0;
        th[i].summary.off_cpu_ns = -1;
        th[i].summary.preempted_ns = -1;
    }
    struct gt_result r = {.t0 = T0, .t1 = T0 + 1000000, .threads = th, .nthreads = 5,
                          .gil_known = 1};
    struct gt_emit_meta m = {.pid = 100, .backend = "hooks"};
    int rc;
    char *s = text(&r, &m, 0, &rc);
    CHECK(rc == 0 && s);
    if (s) {
        int ok = strstr(s, " 2 idle worker processes (each held its GIL under 2 % of the "
                           "trace): 200, 300\n") != NULL &&
                 strstr(s, " 1 background thread: sleeper\n") != NULL &&
                 strstr(s, " pid 400") != NULL && strstr(s, " pid 300") == NULL;
        CHECK(ok);
        if (!ok)
            fprintf(stderr, "text:\n%s\n", s);
    }
    free(s);
}

/* jansson's allocator, failing its `fail_at`-th call (counted from 1; 0 = never). */
static _Atomic long jalloc_calls, jalloc_fail_at, jalloc_failed;

static void *failing_jmalloc(size_t n)
{
    long k = ++jalloc_calls;
    if (jalloc_fail_at && k == jalloc_fail_at) {
        jalloc_failed = 1;
        return NULL;
    }
    return malloc(n);
}

/* Out of memory inside jansson, at each allocation an emitter makes in turn (string
 * literals are encoded by jansson: sb_json_str): every emitter either recovers (and
 * writes exactly what it writes with memory to spare) or returns -ENOMEM, never success
 * with a truncated file. */
static void test_out_of_memory(void)
{
    emit_fn fns[3] = {gt_emit__chrome_json, gt_emit__payload_json, gt_emit__html};
    json_set_alloc_funcs(failing_jmalloc, free);
    for (int i = 0; i < 3; i++) {
        jalloc_fail_at = 0;
        jalloc_calls = 0;
        int rc;
        size_t want_len = 0, len = 0;
        char *want = run(fns[i], &res, &meta, &want_len, &rc);
        CHECK(rc == 0 && want != NULL);
        long total = jalloc_calls;
        CHECK(total > 0);
        int wrong = 0, enomem = 0;
        for (long at = 1; want && at <= total; at++) {
            jalloc_calls = 0;
            jalloc_fail_at = at;
            jalloc_failed = 0;
            char *out = run(fns[i], &res, &meta, &len, &rc);
            enomem += rc == -ENOMEM;
            int ok = rc == -ENOMEM || (rc == 0 && out && len == want_len &&
                                       memcmp(out, want, len) == 0);
            if (!ok && !wrong++)
                fprintf(stderr, "emitter %d: allocation %ld of %ld failed (%s), returned %d, "
                        "%zu of %zu bytes\n", i, at, total, jalloc_failed ? "hit" : "not hit",
                        rc, len, want_len);
            free(out);
        }
        CHECK(wrong == 0);
        CHECK(enomem > 0); /* the failures were seen, not only absorbed */
        free(want);
    }
    jalloc_fail_at = 0;
    json_set_alloc_funcs(malloc, free);
}

static void test_errors(void)
{
    char *s = NULL;
    FILE *f = fopen("/dev/null", "w");
    CHECK(f != NULL);
    if (!f)
        return;
    CHECK(gt_emit__chrome_json(NULL, &meta, f) == -EINVAL);
    CHECK(gt_emit__chrome_json(&res, NULL, f) == -EINVAL);
    CHECK(gt_emit__chrome_json(&res, &meta, NULL) == -EINVAL);
    CHECK(gt_emit__payload_json(NULL, &meta, f) == -EINVAL);
    CHECK(gt_emit__payload_json(&res, NULL, f) == -EINVAL);
    CHECK(gt_emit__payload_json(&res, &meta, NULL) == -EINVAL);
    CHECK(gt_emit__html(NULL, &meta, f) == -EINVAL);
    CHECK(gt_emit__html(&res, NULL, f) == -EINVAL);
    CHECK(gt_emit__html(&res, &meta, NULL) == -EINVAL);
    CHECK(gt_emit__text(NULL, &meta, 3, &s) == -EINVAL);
    CHECK(gt_emit__text(&res, NULL, 3, &s) == -EINVAL);
    CHECK(gt_emit__text(&res, &meta, 3, NULL) == -EINVAL);
    CHECK(s == NULL);
    struct gt_result bad = res;
    bad.threads = NULL;
    CHECK(gt_emit__chrome_json(&bad, &meta, f) == -EINVAL);
    threads[1].spans = NULL;
    CHECK(gt_emit__chrome_json(&res, &meta, f) == -EINVAL);
    CHECK(gt_emit__payload_json(&res, &meta, f) == -EINVAL);
    CHECK(gt_emit__html(&res, &meta, f) == -EINVAL);
    CHECK(gt_emit__text(&res, &meta, 3, &s) == -EINVAL);
    build();
    CHECK(gt_emit__chrome_json(&res, &meta, f) == 0);
    fclose(f);

    /* A read-only stream and a full device: -EIO. */
    emit_fn fns[3] = {gt_emit__chrome_json, gt_emit__payload_json, gt_emit__html};
    for (int i = 0; i < 3; i++) {
        f = fopen("/dev/null", "r");
        CHECK(f && fns[i](&res, &meta, f) == -EIO);
        if (f)
            fclose(f);
        f = fopen("/dev/full", "w");
        if (f) {
            CHECK(fns[i](&res, &meta, f) == -EIO);
            fclose(f);
        }
    }
}

/* ---- speed smoke test --------------------------------------------------- */

static ssize_t count_write(void *c, const char *buf, size_t n)
{
    (void)buf;
    *(uint64_t *)c += n;
    return (ssize_t)n;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void test_speed(void)
{
    static const char *classes[] = {"Counter", "Worker", "Parser", "Cache", "Node",
                                    "Session", "Request", "Matrix", "Graph", "Logger"};
    static const char *methods[] = {"inc", "run", "parse_line", "get", "visit", "step",
                                    "__init__", "update", "send", "compute"};
    const size_t nfn = 1000, nthr = 4;
    /* Under valgrind (50x slower) the same paths with fewer spans: the figures are only printed. */
    size_t nsp = getenv("GT_TEST_UNDER_VALGRIND") ? 50000 : 1000000;
    const char *env = getenv("GT_TEST_SPANS");
    if (env && atol(env) > 0)
        nsp = (size_t)atol(env);
    struct gt_func *fns = calloc(nfn, sizeof(*fns));
    char (*names)[48] = calloc(nfn, sizeof(*names));
    struct gt_span *sp = calloc(nsp, sizeof(*sp));
    struct gt_thread_result *th = calloc(nthr, sizeof(*th));
    struct gt_interval *gil = calloc(nthr * 2, sizeof(*gil));
    CHECK(fns && names && sp && th && gil);
    if (!fns || !names || !sp || !th || !gil)
        goto cleanup;
    for (size_t i = 0; i < nfn; i++) {
        /* "Counter.inc", "Worker.parse_line", ... with a numeric suffix past 100 */
        if (i < 100)
            snprintf(names[i], sizeof(names[i]), "%s.%s", classes[i / 10], methods[i % 10]);
        else
            snprintf(names[i], sizeof(names[i]), "%s%zu.%s", classes[i % 10], i / 100,
                     methods[(i / 10) % 10]);
        fns[i] = (struct gt_func){names[i], "/home/user/project/workloads.py",
                                  (uint32_t)(10 + 3 * i), 0};
    }
    /* Per thread: parents covering 9 children each; ~1 us per child. */
    size_t per = nsp / nthr;
    uint64_t x = 88172645463325252ull;
    for (size_t t = 0; t < nthr; t++) {
        struct gt_span *s = sp + t * per;
        size_t n = t == nthr - 1 ? nsp - t * per : per;
        uint64_t ts = T0 + 1000;
        size_t k = 0;
        while (k < n) {
            size_t parent = k++;
            s[parent] = (struct gt_span){ts, 0, (uint32_t)(parent % nfn), 0, 0};
            ts += 150;
            for (int c = 0; c < 9 && k < n; c++, k++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                uint64_t d = 300 + x % 1500;
                s[k] = (struct gt_span){ts, ts + d, (uint32_t)(x % nfn), 1, 0};
                ts += d + 120;
            }
            s[parent].end = ts;
            ts += 200;
        }
        th[t] = (struct gt_thread_result){
            .tid = 1234567 + (int32_t)t, .pid = 1234567, .ident = 139700000000000ull + t,
            .name = t ? "Thread-n" : "MainThread", .start_ns = T0, .end_ns = ts,
            .spans = s, .nspans = n, .gil = gil + 2 * t, .ngil = 2,
        };
        gil[2 * t] = (struct gt_interval){T0, T0 + (ts - T0) / 2, GT_GIL_STATE_HELD, 0};
        gil[2 * t + 1] = (struct gt_interval){T0 + (ts - T0) / 2, ts, GT_GIL_STATE_RELEASED, 0};
    }
    struct gt_result r = {.t0 = T0, .t1 = th[nthr - 1].end_ns, .funcs = fns, .nfuncs = (uint32_t)nfn,
                          .threads = th, .nthreads = nthr, .gil_known = 1};

    struct {
        const char *what;
        emit_fn fn;
        double max_bytes;
    } outs[3] = {{"chrome json", gt_emit__chrome_json, 120.0},
                 {"payload json", gt_emit__payload_json, 0},
                 {"html", gt_emit__html, 0}};
    /* The page and the payload include the profile tree: its share, for the record. */
    struct gt_profile *prof = NULL;
    double tp = now_s();
    CHECK(gt_profile__build(&r, GT_PROFILE_THREADS_ONLY, &prof) == 0);
    printf("speed: profile tree %zu spans: %6.1f ns/span (part of payload json and html)\n", nsp,
           (now_s() - tp) * 1e9 / (double)nsp);
    gt_profile__free(prof);
    for (int i = 0; i < 3; i++) {
        uint64_t bytes = 0;
        cookie_io_functions_t io = {.write = count_write};
        FILE *f = fopencookie(&bytes, "w", io);
        CHECK(f != NULL);
        if (!f)
            continue;
        double t0 = now_s();
        int rc = outs[i].fn(&r, &meta, f);
        double dt = now_s() - t0;
        fclose(f);
        CHECK(rc == 0);
        double bps = (double)bytes / (double)nsp;
        printf("speed: %-12s %zu spans: %6.1f ns/span, %6.1f bytes/span (%.1f MB)\n",
               outs[i].what, nsp, dt * 1e9 / (double)nsp, bps, (double)bytes / 1e6);
        if (outs[i].max_bytes > 0)
            CHECK(bps <= outs[i].max_bytes);
    }

cleanup:
    free(fns);
    free(names);
    free(sp);
    free(th);
    free(gil);
}

/* Found by fuzz_emit: names are bytes, but Python decodes the text strictly (so
 * summary_text() raised). Invalid UTF-8 becomes U+FFFD; valid text is untouched. */
static void test_text_invalid_utf8(void)
{
    struct gt_result r = res;
    struct gt_thread_result th[2];
    struct gt_emit_meta m = meta;
    memcpy(th, threads, sizeof(th));
    th[0].name = "Main\xff\xc3(\xe2\x82";
    m.title = "caf\xc3\xa9 \xed\xa0\x80.py";
    r.threads = th;
    int rc;
    char *s = text(&r, &m, 5, &rc);
    CHECK(rc == 0 && s);
    if (!s)
        return;
    CHECK(strstr(s, "giltracer (caf\xc3\xa9 \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd.py)") != NULL);
    CHECK(strstr(s, "Main\xef\xbf\xbd\xef\xbf\xbd(\xef\xbf\xbd") != NULL);
    CHECK(!strchr(s, '\xff'));
    free(s);
}

int main(void)
{
    build();
    test_chrome();
    test_payload();
    test_html();
    test_html_odd_spans();
    test_html_big_columns();
    test_page_profile_budget();
    test_text();
    test_text_idle_processes();
    test_text_invalid_utf8();
    test_errors();
    test_out_of_memory();
    test_speed();
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

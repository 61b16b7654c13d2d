/* SPDX-License-Identifier: MIT */
/* Profile (see profile.h): call trees split by GIL state, per-function rows. */
#include "profile.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define EMPTY_KEY UINT64_MAX
#define NO_TIME UINT64_MAX

struct slot {
    uint64_t key; /* EMPTY_KEY: free */
    uint32_t node, unused;
};

/* A tree under construction: nodes plus an open-addressing map (parent, func) -> node. */
struct tbuild {
    struct gt_pnode *nodes;
    size_t n, cap;
    struct slot *slots;
    size_t hcap; /* power of two; at most half full */
};

/* An open frame of the sweep. */
struct pframe {
    uint64_t end;
    uint32_t node, func;
};

static uint64_t node_key(uint32_t parent, uint32_t func)
{
    return ((uint64_t)parent << 32) | func;
}

/* Where (parent, func) starts probing: functions whose ids differ only in the low two
 * bits share a group of 4 slots, one cache line of the table, picked by the parent and
 * the rest of the id. The sweep looks up the children of the frames on its stack, whose
 * lines then stay cached: a table hashed on the whole key missed the cache on most
 * lookups of a big tree. (Grouping by the parent alone made one probe run of all of a
 * wide parent's children: a dispatcher's lookups went linear.) */
static size_t slot_of(uint64_t key, size_t hcap)
{
    uint64_t g = (key >> 2) * 0x9E3779B97F4A7C15ull; /* parent and func >> 2 */
    size_t group = (size_t)(g ^ (g >> 29)) & (hcap - 1) & ~(size_t)3;
    return group + (size_t)(key & 3);
}

static int tb_rehash(struct tbuild *b, size_t hcap)
{
    assert(hcap >= 4 && (hcap & (hcap - 1)) == 0 && b->n <= hcap / 2);
    struct slot *slots = aligned_alloc(64, hcap * sizeof(*slots)); /* a group: one line */
    if (!slots)
        return -ENOMEM;
    for (size_t i = 0; i < hcap; i++)
        slots[i].key = EMPTY_KEY;
    for (size_t i = 1; i < b->n; i++) { /* the root is never looked up */
        uint64_t k = node_key(b->nodes[i].parent, b->nodes[i].func);
        size_t s = slot_of(k, hcap);
        while (slots[s].key != EMPTY_KEY)
            s = (s + 1) & (hcap - 1);
        slots[s] = (struct slot){k, (uint32_t)i, 0};
    }
    free(b->slots);
    b->slots = slots;
    b->hcap = hcap;
    return 0;
}

static int tb_init(struct tbuild *b)
{
    memset(b, 0, sizeof(*b));
    b->cap = 64;
    b->nodes = calloc(b->cap, sizeof(*b->nodes));
    if (!b->nodes)
        return -ENOMEM;
    b->nodes[0] = (struct gt_pnode){.func = GT_NO_FUNC, .parent = GT_PNODE_NONE,
                                    .first_child = GT_PNODE_NONE, .next_sibling = GT_PNODE_NONE,
                                    .hint = GT_PNODE_NONE, .hint_func = GT_NO_FUNC};
    b->n = 1;
    return tb_rehash(b, 128);
}

static void tb_free(struct tbuild *b)
{
    free(b->nodes);
    free(b->slots);
    memset(b, 0, sizeof(*b));
}

/* The child of `parent` for `func`, created (with `recursive`) if new. */
static int tb_child(struct tbuild *b, uint32_t parent, uint32_t func, uint32_t recursive,
                    uint32_t *out)
{
    struct gt_pnode *p = &b->nodes[parent];
    if (p->hint_func == func && p->hint != GT_PNODE_NONE) {
        *out = p->hint; /* loops call the same child again and again */
        return 0;
    }
    uint64_t k = node_key(parent, func);
    size_t s = slot_of(k, b->hcap);
    /* A parent without children has nothing to find: no read of the table (a new call
     * path descends through new nodes only, and their lines of the table are cold). */
    for (; p->first_child != GT_PNODE_NONE && b->slots[s].key != EMPTY_KEY; s = (s + 1) & (b->hcap - 1)) {
        if (b->slots[s].key == k) {
            *out = p->hint = b->slots[s].node;
            p->hint_func = func;
            return 0;
        }
    }
    if (b->n >= GT_PNODE_NONE - 1)
        return -ENOMEM;
    if (b->n == b->cap) {
        struct gt_pnode *q = realloc(b->nodes, 2 * b->cap * sizeof(*q));
        if (!q)
            return -ENOMEM;
        b->nodes = q;
        b->cap *= 2;
        p = &b->nodes[parent];
    }
    uint32_t id = (uint32_t)b->n++;
    b->nodes[id] = (struct gt_pnode){.func = func, .parent = parent,
                                     .first_child = GT_PNODE_NONE,
                                     .next_sibling = p->first_child,
                                     .depth = p->depth + 1, .recursive = recursive,
                                     .hint = GT_PNODE_NONE, .hint_func = GT_NO_FUNC};
    p->first_child = p->hint = id;
    p->hint_func = func;
    while (b->slots[s].key != EMPTY_KEY) /* (skipped above for a first child) */
        s = (s + 1) & (b->hcap - 1);
    b->slots[s] = (struct slot){k, id, 0};
    *out = id;
    if (2 * b->n > b->hcap)
        return tb_rehash(b, 2 * b->hcap);
    return 0;
}

/* Totals bottom-up (children have larger indices than their parent), then hand the
 * nodes to `t`. */
static void tb_finish(struct tbuild *b, struct gt_ptree *t)
{
    for (size_t i = b->n; i-- > 0;) {
        struct gt_pnode *nd = &b->nodes[i];
        nd->self_ns = nd->total_ns = 0;
        for (int s = 0; s < GT_NPSTATES; s++) {
            nd->total[s] += nd->self[s];
            nd->self_ns += nd->self[s];
            nd->total_ns += nd->total[s];
        }
        if (nd->parent != GT_PNODE_NONE)
            for (int s = 0; s < GT_NPSTATES; s++)
                b->nodes[nd->parent].total[s] += nd->total[s];
    }
    t->nodes = b->nodes;
    t->nnodes = b->n;
    b->nodes = NULL;
    tb_free(b);
}

/* GIL state (3 = unknown) x OS state (3 = unknown) -> profile state. */
static const uint8_t state_of[4][4] = {
    [GT_GIL_STATE_RELEASED] = {GT_PSTATE_RELEASED, GT_PSTATE_RELEASED, GT_PSTATE_RELEASED,
                               GT_PSTATE_RELEASED},
    [GT_GIL_STATE_WAIT] = {GT_PSTATE_WAITING, GT_PSTATE_WAITING, GT_PSTATE_WAITING,
                           GT_PSTATE_WAITING},
    [GT_GIL_STATE_HELD] = {GT_PSTATE_RUNNING, GT_PSTATE_HELD_OFF_CPU, GT_PSTATE_HELD_OFF_CPU,
                           GT_PSTATE_RUNNING},
    [3] = {GT_PSTATE_UNKNOWN, GT_PSTATE_UNKNOWN, GT_PSTATE_UNKNOWN, GT_PSTATE_UNKNOWN},
};

/* The calls past the budget (t->calls_more) into the tree, below the frames open when
 * the budget ran out (st[0..d), innermost last); their nodes' ids into map[]. Keep last:
 * the calls before the kept window, at the root, their first `skip` levels (the outer
 * frames) left out; depth[] is scratch. */
static int graft(struct tbuild *b, const struct gt_result *r, const struct gt_thread_result *t,
                 const struct pframe *st, size_t d, uint32_t *map, uint32_t *depth, unsigned skip)
{
    static const uint8_t pstate[4] = {GT_PSTATE_RELEASED, GT_PSTATE_WAITING, GT_PSTATE_RUNNING,
                                      GT_PSTATE_UNKNOWN};
    /* Time the tree could not split (no GIL counters in the thread: the bpf probe) is split
     * in the thread's own GIL proportions over the tree's stretch: each node's total per
     * state is then an estimate, the thread's exact. */
    uint64_t share[GT_GIL_NSTATES] = {0, 0, 0}, all = 0, got[3] = {0, 0, 0}, most[3] = {0, 0, 0};
    uint32_t big[3] = {0, 0, 0};
    if (r->gil_known) {
        uint64_t lo = t->calls_kept_from ? t->start_ns : t->calls_truncated_at, hi = t->calls_more_last;
        for (size_t i = 0; i < t->ngil; i++) {
            uint64_t a = t->gil[i].start > lo ? t->gil[i].start : lo;
            uint64_t e = t->gil[i].end < hi ? t->gil[i].end : hi;
            if (e > a && t->gil[i].state < GT_GIL_NSTATES) {
                share[t->gil[i].state] += e - a;
                all += e - a;
            }
        }
    }
    for (size_t i = 0; i < t->ncalls_more; i++) {
        const struct gt_cnode *nd = &t->calls_more[i];
        if (nd->func == GT_CNODE_ANCHOR) {
            map[i] = nd->parent < d ? st[d - 1 - nd->parent].node : 0;
            depth[i] = 0;
        } else if (nd->func >= r->nfuncs || (depth[i] = depth[nd->parent] + 1) <= skip) {
            map[i] = map[nd->parent]; /* (keep last: the outer frames are folded) */
        } else {
            uint32_t rec = 0;
            for (uint32_t u = map[nd->parent]; u != GT_PNODE_NONE && !rec; u = b->nodes[u].parent)
                rec = b->nodes[u].func == nd->func;
            int err = tb_child(b, map[nd->parent], nd->func, rec, &map[i]);
            if (err)
                return err;
            b->nodes[map[i]].calls += nd->calls;
        }
        uint64_t add[3] = {nd->self[0], nd->self[1], nd->self[2]};
        uint64_t u = nd->self[GT_CNODE_UNKNOWN];
        if (all && u) {
            uint64_t given = 0;
            for (int k = 0; k < 2; k++) { /* released, wait; held takes the rest */
                uint64_t part = (uint64_t)((double)u * (double)share[k] / (double)all);
                add[k] += part;
                given += part;
            }
            add[GT_CNODE_HELD] += u - given;
        } else {
            b->nodes[map[i]].self[GT_PSTATE_UNKNOWN] += u;
        }
        for (int k = 0; k < 3; k++) {
            b->nodes[map[i]].self[pstate[k]] += add[k];
            got[k] += add[k];
            if (add[k] > most[k]) {
                most[k] = add[k];
                big[k] = map[i];
            }
        }
    }
    /* The tree's split comes from the thread's counters in ticks, the intervals from each
     * event's ns: they differ by the rounding of the conversions (a few ns), which goes to
     * the node with the most time in that state, so the root splits like the table. */
    for (int k = 0; k < 3 && all; k++) {
        int64_t diff = (int64_t)share[k] - (int64_t)got[k];
        uint64_t *v = &b->nodes[big[k]].self[pstate[k]];
        if (diff == 0 || (uint64_t)(diff < 0 ? -diff : diff) > 1000 + 4 * t->ncalls_more ||
            (diff < 0 && (uint64_t)-diff > *v))
            continue;
        *v = (uint64_t)((int64_t)*v + diff);
    }
    return 0;
}

/* A sweep over one thread (build_thread): its tree, the open frames ((*stp)[0..d), the
 * caller's stack, reused across threads) and the next span to open (i). */
struct sweep {
    const struct gt_result *r;
    const struct gt_thread_result *t;
    struct tbuild b;
    uint32_t *in_path;
    struct pframe **stp;
    size_t *st_cap;
    size_t i, d;
    unsigned fold; /* the outer frames left out (folded), or 0 */
    int kept;      /* keep last: the tree is the time before the kept window */
};

/* Room for one more open frame. */
static int sweep_room(struct sweep *w)
{
    if (w->d < *w->st_cap)
        return 0;
    size_t c = *w->st_cap ? 2 * *w->st_cap : 64;
    struct pframe *q = realloc(*w->stp, c * sizeof(*q));
    if (!q)
        return -ENOMEM;
    *w->stp = q;
    *w->st_cap = c;
    return 0;
}

/* Frames starting by `last`; a frame's depth says which open frames enclose it. */
static int sweep_open(struct sweep *w, uint64_t last)
{
    const struct gt_thread_result *t = w->t;
    const struct gt_span *sp = t->spans;
    int err;
    for (; w->i < t->nspans && sp[w->i].start <= last; w->i++) {
        const struct gt_span *s = &sp[w->i];
        struct pframe *st = *w->stp;
        uint32_t f = s->func, node;
        unsigned depth = s->depth;
        if (f >= w->r->nfuncs)
            continue;
        if (w->fold && depth != UINT16_MAX) {
            if (depth < w->fold || s->start < t->outer_start || s->start >= t->outer_end)
                continue;
            depth -= w->fold;
        }
        while (w->d &&
               ((depth != UINT16_MAX && w->d > depth) || st[w->d - 1].end < s->start))
            w->in_path[st[--w->d].func]--;
        uint32_t cur = w->d ? st[w->d - 1].node : 0;
        if ((err = tb_child(&w->b, cur, f, w->in_path[f] != 0, &node)))
            return err;
        /* (keep last: the frames open at the window's start were counted in the tree) */
        w->b.nodes[node].calls += !(s->flags & GT_SPAN_CLIPPED_START) &&
                                  !(w->kept && s->start == t->calls_kept_from);
        if ((err = sweep_room(w)))
            return err;
        st = *w->stp;
        uint64_t end = s->end;
        if (w->d && end > st[w->d - 1].end)
            end = st[w->d - 1].end; /* a child never outlives its parent */
        st[w->d++] = (struct pframe){end < last ? last : end, node, f};
        w->in_path[f]++;
    }
    return 0;
}

/* The aggregate's tree grafted below the open frames (keep last: at the root); *map its
 * nodes' ids, *tail the node the aggregate had open. */
static int sweep_graft(struct sweep *w, uint32_t **map, uint32_t *tail)
{
    const struct gt_thread_result *t = w->t;
    int err;
    if (!(*map = malloc(2 * t->ncalls_more * sizeof(**map))))
        return -ENOMEM;
    if ((err = graft(&w->b, w->r, t, *w->stp, w->kept ? 0 : w->d, *map,
                     *map + t->ncalls_more, w->kept ? w->fold : 0)))
        return err;
    *tail = (*map)[t->calls_more_cur < t->ncalls_more ? t->calls_more_cur : 0];
    return 0;
}

/* The state of intervals v[0..nv) at `last` (3: in none) and until when it holds;
 * *k is the cursor, which only moves forward. */
static unsigned state_at(const struct gt_interval *v, size_t nv, size_t *k, uint64_t last,
                         uint64_t *until)
{
    while (*k < nv && v[*k].end <= last)
        (*k)++;
    unsigned s = *k < nv && v[*k].start <= last ? v[*k].state & 3 : 3;
    *until = *k == nv ? NO_TIME : v[*k].start > last ? v[*k].start : v[*k].end;
    return s;
}

/* The next boundary of any kind after `last` (GIL, OS, a span's start, an open frame's
 * end, the graft's point, the grafted tree's end), or NO_TIME past the thread's end. */
static uint64_t sweep_next(const struct sweep *w, uint64_t last, uint64_t g_until,
                           uint64_t o_until, int grafting, int grafted)
{
    const struct gt_thread_result *t = w->t;
    const struct pframe *st = *w->stp;
    uint64_t nx = last < t->end_ns ? t->end_ns : NO_TIME;
    if (nx != NO_TIME) {
        nx = g_until < nx ? g_until : nx;
        nx = o_until < nx ? o_until : nx;
    }
    if (w->i < t->nspans && t->spans[w->i].start < nx)
        nx = t->spans[w->i].start;
    if (w->d && st[w->d - 1].end < nx)
        nx = st[w->d - 1].end;
    uint64_t cut = t->calls_truncated_at;
    if (grafting && !grafted && cut > last && cut < nx)
        nx = cut;
    if (grafted && last < t->calls_more_last && t->calls_more_last < nx)
        nx = t->calls_more_last;
    return nx;
}

/* One thread: a single sweep over its spans (a stack of open frames) and its GIL and OS
 * intervals; each stretch between two boundaries goes to the innermost open frame's
 * self time, in the state of that stretch. */
static int build_thread(const struct gt_result *r, const struct gt_thread_result *t, int flags,
                        uint32_t *in_path, struct pframe **stp, size_t *st_cap,
                        struct gt_ptree *out)
{
    /* Folded, the frames above the traced code are left out: the root's children are what
     * began inside the innermost outer frame, one level below it. */
    struct sweep w = {.r = r, .t = t, .in_path = in_path, .stp = stp, .st_cap = st_cap,
                      .fold = (flags & GT_PROFILE_OUTER_FRAMES) ? 0 : t->outer_depth};
    const struct gt_interval *gil = r->gil_known ? t->gil : NULL, *os = t->has_sched ? t->os : NULL;
    size_t ngil = gil ? t->ngil : 0, nos = os ? t->nos : 0, gi = 0, oi = 0;
    uint64_t last = t->start_ns, g_until = 0, o_until = 0;
    unsigned gs = 3, osx = 3, state = GT_PSTATE_UNKNOWN;
    /* Past the call budget: the aggregate's tree is grafted at calls_truncated_at; it
     * holds the time up to its last event, the sweep's state splits the rest, which goes
     * to the node the aggregate had open. */
    int grafting = t->ncalls_more != 0, grafted = 0;
    /* Keep last: the tree is the time before the kept window (to calls_more_last), grafted
     * at the start; the spans are the window's, whose open frames begin at its start. */
    w.kept = grafting && t->calls_kept_from != 0;
    uint32_t tail_node = 0, *map = NULL;
    int err = tb_init(&w.b);

    if (err)
        goto cleanup;
    for (;;) {
        if ((err = sweep_open(&w, last)))
            goto cleanup;
        if (grafting && !grafted && (w.kept || last >= t->calls_truncated_at)) {
            if ((err = sweep_graft(&w, &map, &tail_node)))
                goto cleanup;
            grafted = 1;
        }
        struct pframe *st = *stp;
        while (w.d && st[w.d - 1].end <= last)
            in_path[st[--w.d].func]--;
        uint32_t cur = w.d ? st[w.d - 1].node : 0;

        /* The state from `last` on, recomputed only when a GIL or OS boundary is reached;
         * then the next boundary of any kind. */
        if (last >= g_until) {
            gs = state_at(gil, ngil, &gi, last, &g_until);
            state = state_of[gs][osx];
        }
        if (last >= o_until) {
            osx = state_at(os, nos, &oi, last, &o_until);
            state = state_of[gs][osx];
        }
        uint64_t nx = sweep_next(&w, last, g_until, o_until, grafting, grafted);
        if (nx == NO_TIME)
            break;
        if (!grafted || (w.kept && last >= t->calls_more_last))
            w.b.nodes[cur].self[state] += nx - last;
        else if (last >= t->calls_more_last)
            w.b.nodes[tail_node].self[state] += nx - last;
        last = nx;
    }
    tb_finish(&w.b, out);
    out->tid = t->tid;
cleanup:
    free(map);
    while (w.d)
        in_path[(*stp)[--w.d].func]--;
    if (err)
        tb_free(&w.b);
    return err;
}

/* Adds a thread tree into the merged one, node by node (parents come first). */
static int merge_into(struct tbuild *m, const struct gt_ptree *t, uint32_t *map)
{
    map[0] = 0;
    for (size_t i = 0; i < t->nnodes; i++) {
        const struct gt_pnode *nd = &t->nodes[i];
        if (i) {
            int err = tb_child(m, map[nd->parent], nd->func, nd->recursive, &map[i]);
            if (err)
                return err;
        }
        struct gt_pnode *md = &m->nodes[map[i]];
        md->calls += nd->calls;
        for (int s = 0; s < GT_NPSTATES; s++)
            md->self[s] += nd->self[s];
    }
    return 0;
}

int gt_profile__build(const struct gt_result *r, int flags, struct gt_profile **out)
{
    struct gt_profile *p = NULL;
    struct pframe *st = NULL;
    uint32_t *in_path = NULL, *map = NULL;
    size_t st_cap = 0, maxn = 1;
    struct tbuild m = {0};
    int err = 0;

    if (out)
        *out = NULL;
    if (!r || !out || (r->nthreads && !r->threads))
        return -EINVAL;
    p = calloc(1, sizeof(*p));
    in_path = calloc((size_t)r->nfuncs + 1, sizeof(*in_path));
    if (!p || !in_path || (r->nthreads && !(p->threads = calloc(r->nthreads, sizeof(*p->threads))))) {
        err = -ENOMEM;
        goto cleanup;
    }
    p->nthreads = r->nthreads;
    for (size_t i = 0; i < r->nthreads; i++) {
        if ((err = build_thread(r, &r->threads[i], flags, in_path, &st, &st_cap, &p->threads[i])))
            goto cleanup;
        if (p->threads[i].nnodes > maxn)
            maxn = p->threads[i].nnodes;
    }
    if (flags & GT_PROFILE_THREADS_ONLY) {
        *out = p;
        p = NULL;
        goto cleanup;
    }
    if ((err = tb_init(&m)))
        goto cleanup;
    if (!(map = malloc(maxn * sizeof(*map)))) {
        err = -ENOMEM;
        goto cleanup;
    }
    for (size_t i = 0; i < p->nthreads; i++)
        if ((flags & GT_PROFILE_ALL_THREADS) || !r->threads[i].background)
            if ((err = merge_into(&m, &p->threads[i], map)))
                goto cleanup;
    /* The thread trees are final already; only the merged one needs its totals. */
    tb_finish(&m, &p->merged);
    p->merged.tid = 0;
    *out = p;
    p = NULL;
cleanup:
    tb_free(&m);
    gt_profile__free(p);
    free(st);
    free(in_path);
    free(map);
    return err;
}

int gt_profile__thread(const struct gt_result *r, size_t i, int flags, struct gt_ptree *out)
{
    struct pframe *st = NULL;
    size_t st_cap = 0;
    uint32_t *in_path = NULL;
    int err;

    if (out)
        memset(out, 0, sizeof(*out));
    if (!r || !out || i >= r->nthreads || !r->threads)
        return -EINVAL;
    if (!(in_path = calloc((size_t)r->nfuncs + 1, sizeof(*in_path))))
        return -ENOMEM;
    err = build_thread(r, &r->threads[i], flags, in_path, &st, &st_cap, out);
    free(st);
    free(in_path);
    return err;
}

void gt_ptree__free(struct gt_ptree *t)
{
    if (!t)
        return;
    free(t->nodes);
    memset(t, 0, sizeof(*t));
}

void gt_profile__free(struct gt_profile *p)
{
    if (!p)
        return;
    for (size_t i = 0; p->threads && i < p->nthreads; i++)
        free(p->threads[i].nodes);
    free(p->threads);
    free(p->merged.nodes);
    free(p);
}

int gt_profile__functions(const struct gt_result *r, const struct gt_ptree *t, int32_t holder_tid,
                          struct gt_pfunc **rows, size_t *nrows)
{
    struct gt_pfunc *acc = NULL, *outv = NULL;
    size_t n = 0;
    int err = 0;

    if (!r || !t || !rows || !nrows || (t->nnodes && !t->nodes))
        return -EINVAL;
    *rows = NULL;
    *nrows = 0;
    if (!(acc = calloc((size_t)r->nfuncs + 1, sizeof(*acc)))) {
        err = -ENOMEM;
        goto cleanup;
    }
    for (size_t i = 1; i < t->nnodes; i++) {
        const struct gt_pnode *nd = &t->nodes[i];
        if (nd->func >= r->nfuncs)
            continue;
        struct gt_pfunc *a = &acc[nd->func];
        a->calls += nd->calls;
        for (int s = 0; s < GT_NPSTATES; s++) {
            a->self[s] += nd->self[s];
            a->self_ns += nd->self[s];
            if (!nd->recursive) { /* an enclosing call of the same function counts it */
                a->total[s] += nd->total[s];
                a->total_ns += nd->total[s];
            }
        }
    }
    for (size_t i = 0; i < r->nblame; i++) {
        const struct gt_blame *bl = &r->blame[i];
        if (bl->func < r->nfuncs && (!holder_tid || bl->holder_tid == holder_tid))
            acc[bl->func].wait_caused_ns += bl->wait_ns;
    }
    for (uint32_t f = 0; f < r->nfuncs; f++)
        n += acc[f].calls || acc[f].total_ns || acc[f].wait_caused_ns;
    if (n && !(outv = malloc(n * sizeof(*outv)))) {
        err = -ENOMEM;
        goto cleanup;
    }
    n = 0;
    for (uint32_t f = 0; f < r->nfuncs; f++) {
        if (acc[f].calls || acc[f].total_ns || acc[f].wait_caused_ns) {
            outv[n] = acc[f];
            outv[n++].func = f;
        }
    }
    *rows = outv;
    *nrows = n;
    outv = NULL;
cleanup:
    free(acc);
    free(outv);
    return err;
}

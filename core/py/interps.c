/* SPDX-License-Identifier: MIT */
/* Subinterpreters (see interps.h). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "interps.h"
#include "heads.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "note.h"
#include "registry.h"
#include "tracer.h"

#define MAX_INTERPS 64

enum { T_PENDING = 0, T_DONE = 1, T_FAILED = 2 };

struct seen {
    int64_t id;
    int traced; /* T_* */
};

static struct {
    atomic_int open;
    atomic_int attaching; /* audit hooks past the open check: stop waits for them */
    atomic_uint gen; /* bumps per session: invalidates the per-thread caches */
    int hook_state;  /* 0 not tried, 1 added (for the life of the process), -1 refused */
    int functions, bpf, hooks;
    /* Offsets of the GIL's mutex, cond and switch_cond from its interpreter: 3.12+
     * embeds each interpreter's own GIL in PyInterpreterState (interp->_gil). */
    intptr_t off[3];
    int off_ok;
    int layout_ok; /* cond, mutex, switch_cond consecutive: the fields before are known */
    pthread_mutex_t lock;
    struct seen seen[MAX_INTERPS];
    unsigned nseen;
    unsigned long existing;   /* subinterpreters alive at start */
    unsigned long gil_full;   /* GILs the hooks' table had no room for */
    unsigned long unknown_holders; /* GILs held at start by a thread not identified */
    unsigned long seen_full;  /* subinterpreters past MAX_INTERPS: neither probed nor traced */
} ip = {.lock = PTHREAD_MUTEX_INITIALIZER};

#if PY_VERSION_HEX >= 0x030C0000
static __thread int64_t tls_id = -1;
static __thread unsigned tls_gen;
static __thread int tls_busy;

static void add_gil(PyInterpreterState *in, int64_t id)
{
    if (!ip.off_ok || !ip.hooks)
        return;
    const char *base = (const char *)in;
    /* take_gil's call sites are the main GIL's (one function): only the addresses differ */
    struct gt_gil_addrs a = {.mutex = base + ip.off[0], .cond = base + ip.off[1],
                             .switch_cond = base + ip.off[2]};
    if (gt_gilhook__add_gil(&a, (uint32_t)id) < 0)
        ip.gil_full++;
}

/* The entry of interpreter `id`, added if new (GIL registered then); NULL when full.
 * Under ip.lock. */
static struct seen *seen_get(PyInterpreterState *in, int64_t id)
{
    for (unsigned i = 0; i < ip.nseen; i++)
        if (ip.seen[i].id == id)
            return &ip.seen[i];
    if (ip.nseen == MAX_INTERPS) {
        ip.seen_full++; /* counted per audited action: "some", not how many */
        return NULL;
    }
    add_gil(in, id);
    ip.seen[ip.nseen] = (struct seen){id, ip.functions ? T_PENDING : T_DONE};
    return &ip.seen[ip.nseen++];
}

/* Runs in every interpreter, for every audited action: a subinterpreter's first one
 * in a session is where it is attached. The rest cost a TLS compare. */
static int audit_hook(const char *event, PyObject *args, void *ud)
{
    (void)args;
    (void)ud;
    if (!atomic_load_explicit(&ip.open, memory_order_relaxed) || tls_busy)
        return 0;
    /* The interpreter's own life (cpython.PyInterpreterState_Clear while it is torn
     * down, ...): no place to attach. */
    if (strncmp(event, "cpython.", 8) == 0)
        return 0;
    unsigned gen = atomic_load_explicit(&ip.gen, memory_order_relaxed);
    PyInterpreterState *in = PyInterpreterState_Get();
    if (in == PyInterpreterState_Main())
        return 0;
    int64_t id = PyInterpreterState_GetID(in);
    if (id == tls_id && gen == tls_gen)
        return 0;
    tls_busy = 1; /* what attaching calls may be audited too */
    /* Announced, then open checked again (both seq_cst, as stop's store and load): a
     * stop either sees this hook and waits, or this hook sees it and attaches nothing
     * (an interpreter with its own GIL runs this beside the main one's stop). */
    atomic_fetch_add(&ip.attaching, 1);
    if (!atomic_load(&ip.open)) {
        atomic_fetch_sub(&ip.attaching, 1);
        tls_busy = 0;
        return 0;
    }
    pthread_mutex_lock(&ip.lock);
    struct seen *s = seen_get(in, id);
    int attach = s && s->traced == T_PENDING;
    if (attach)
        s->traced = T_FAILED; /* claimed: another thread of it does not attach too */
    pthread_mutex_unlock(&ip.lock);
    int done = 1;
    if (attach) {
        int r = gt_tracer__attach_interp();
        pthread_mutex_lock(&ip.lock);
        if (gen == atomic_load(&ip.gen))
            s->traced = r > 0 ? T_DONE : r < 0 ? T_FAILED : T_PENDING;
        pthread_mutex_unlock(&ip.lock);
        done = r != 0;
    }
    if (done) {
        tls_id = id;
        tls_gen = gen;
    }
    atomic_fetch_sub(&ip.attaching, 1);
    tls_busy = 0;
    return 0;
}

/* A subinterpreter that computes without contention never drops its GIL, so the
 * hooks would see nothing of a holder that took it before start: its holder (3.12+
 * _gil_runtime_state: last_holder at cond-24, locked at cond-16, when the calibrated
 * layout is the known one) is marked as holding from t0. Under the runtime's lock
 * (gt_heads__each): the native id of the holder if one holds it (0: not known), or -1. */
static int32_t gil_holder(PyInterpreterState *in)
{
    if (!ip.off_ok || !ip.layout_ok || !ip.hooks)
        return -1;
    const char *cond = (const char *)in + ip.off[1];
    if (!__atomic_load_n((const int *)(cond - 16), __ATOMIC_ACQUIRE))
        return -1;
    PyThreadState *ts = __atomic_load_n((PyThreadState *const *)(cond - 24), __ATOMIC_ACQUIRE);
    /* Read only while still one of the interpreter's (its thread may be ending it).
     * 3.12's run_string runs any thread on the interpreter's first thread state, whose
     * native id is its creator's (often this very thread, which holds the main GIL). */
    return ts ? gt_heads__native_id_locked(in, ts) : 0;
}

/* The subinterpreters alive at start, as read under the runtime's lock. */
struct alive {
    struct {
        PyInterpreterState *in;
        int64_t id;
        int32_t holder;
    } in[MAX_INTERPS];
    unsigned n;
    unsigned long more; /* past MAX_INTERPS */
};

static void collect(PyInterpreterState *in, void *ctx)
{
    struct alive *a = ctx;
    if (in == PyInterpreterState_Main())
        return;
    if (a->n == MAX_INTERPS) {
        a->more++;
        return;
    }
    int64_t id = PyInterpreterState_GetID(in);
    if (id < 0) { /* not initialized yet */
        PyErr_Clear();
        return;
    }
    a->in[a->n].in = in;
    a->in[a->n].id = id;
    a->in[a->n].holder = gil_holder(in);
    a->n++;
}

static void learn_offsets(const struct gt_gil_addrs *g)
{
    const char *main = (const char *)PyInterpreterState_Main();
    const void *f[3] = {g->mutex, g->cond, g->switch_cond};
    ip.off_ok = 1;
    for (int i = 0; i < 3; i++) {
        ip.off[i] = (const char *)f[i] - main;
        /* Embedded in the main interpreter's state, or not this layout at all. */
        if (ip.off[i] <= 0 || ip.off[i] > (1 << 20))
            ip.off_ok = 0;
    }
    ip.layout_ok = ip.off[0] == ip.off[1] + (intptr_t)sizeof(pthread_cond_t) &&
                   ip.off[2] == ip.off[0] + (intptr_t)sizeof(pthread_mutex_t) && ip.off[1] > 24;
}
#endif

int gt_interps__start(const struct gt_interps_opts *o)
{
    pthread_mutex_lock(&ip.lock);
    atomic_fetch_add(&ip.gen, 1);
    ip.nseen = 0;
    ip.existing = ip.gil_full = ip.unknown_holders = ip.seen_full = 0;
    ip.functions = o->functions;
    ip.bpf = o->bpf;
    ip.hooks = o->hooks != NULL;
    pthread_mutex_unlock(&ip.lock);
#if PY_VERSION_HEX >= 0x030C0000
    if (o->hooks) {
        gt_gilhook__set_addrs(o->hooks); /* forgets the last session's subinterpreters */
        learn_offsets(o->hooks);
    }
    /* Read under the runtime's lock: one with a GIL of its own may be torn down (and
     * freed) meanwhile. What is done with them after takes other locks. */
    static struct alive a;
    a.n = 0;
    a.more = 0;
    gt_heads__each(collect, &a);
    int32_t self = (int32_t)syscall(SYS_gettid);
    pthread_mutex_lock(&ip.lock);
    ip.existing = a.n + a.more;
    ip.seen_full += a.more;
    for (unsigned i = 0; i < a.n; i++) {
        seen_get(a.in[i].in, a.in[i].id);
        int32_t tid = a.in[i].holder;
        if (tid == 0 || (tid > 0 && (tid == self ||
                                     !gt_registry__register_holder(tid, (uint32_t)a.in[i].id))))
            ip.unknown_holders++;
    }
    pthread_mutex_unlock(&ip.lock);
    if (ip.hook_state == 0) {
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        ip.hook_state = PySys_AddAuditHook(audit_hook, NULL) == 0 ? 1 : -1;
        PyErr_Clear();
        PyErr_Restore(et, ev, tb);
    }
    atomic_store(&ip.open, 1);
#else
    (void)o;
#endif
    return 0;
}

void gt_interps__stop(void)
{
    atomic_store(&ip.open, 0);
    /* An attach in flight reads the tracer's state, which its stop clears next. Those
     * run under their own interpreter's GIL, never this one's. */
    while (atomic_load(&ip.attaching))
        usleep(100);
}

void gt_interps__after_fork_child(void)
{
    atomic_store(&ip.open, 0);
    atomic_store(&ip.attaching, 0); /* their threads are not in the child */
    pthread_mutex_init(&ip.lock, NULL);
}

int gt_interps__note(char *buf, size_t len)
{
    size_t before = strlen(buf);
    pthread_mutex_lock(&ip.lock);
    unsigned n = ip.nseen, pending = 0, failed = 0;
    for (unsigned i = 0; i < n; i++) {
        pending += ip.seen[i].traced == T_PENDING;
        failed += ip.seen[i].traced == T_FAILED;
    }
    pthread_mutex_unlock(&ip.lock);
    if (n == 0)
        return 0;
    if (ip.seen_full)
        gt_note__add(buf, len, "more than %d subinterpreters ran: those past the first %d were "
                 "neither probed nor traced (their GIL time shows as released)", MAX_INTERPS,
                 MAX_INTERPS);
    if (ip.hook_state < 0)
        gt_note__add(buf, len, "an audit hook refused giltracer's: subinterpreters started "
                 "during the trace were not seen (their calls are missing and their own "
                 "GILs show as released)");
    if (ip.functions && pending)
        gt_note__add(buf, len, "%u subinterpreter(s) did nothing giltracer could attach to "
                 "(it attaches on a subinterpreter's first audited action, e.g. an import, "
                 "after start): their calls are missing", pending);
    if (ip.functions && failed)
        gt_note__add(buf, len, "%u subinterpreter(s) refused the function tracer (sys.monitoring "
                 "tool id taken): their calls are missing", failed);
    if (ip.bpf)
        gt_note__add(buf, len, "%u subinterpreter(s) ran: the bpf probe follows the main "
                 "interpreter's GIL only, and takes of a subinterpreter's own GIL look like "
                 "takes of the main one, so the GIL figures and blame of every thread are "
                 "unreliable here (use backend='hooks')", n);
    else if (ip.hooks && !ip.off_ok)
        gt_note__add(buf, len, "%u subinterpreter(s) ran: their own GILs could not be located, "
                 "so time under them shows as released", n);
    else if (ip.unknown_holders)
        gt_note__add(buf, len, "%lu subinterpreter GIL(s) were held at start by a thread giltracer "
                 "could not identify: that thread shows as released until it drops it",
                 ip.unknown_holders);
    else if (ip.gil_full)
        gt_note__add(buf, len, "%lu subinterpreter GIL(s) past the first %d were not probed: "
                 "time under them shows as released", ip.gil_full, 31);
    return strlen(buf) != before;
}

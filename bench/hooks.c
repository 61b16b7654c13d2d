/* Reference hooks for the benchmarks, compiled by bench/hooks.py with the running
 * interpreter's headers.
 *
 * noop   A no-op PyEval_SetProfile hook (all versions): what the interpreter's
 *        profiling machinery costs on its own. On 3.12+ that is the legacy profile
 *        API, which the interpreter implements on top of sys.monitoring.
 *
 * floor  The minimal *recording* hook: per event one rdtsc, a strong reference to
 *        the code object (C events: the C function's PyMethodDef*, low bit set, no
 *        reference), and one 24-byte store into a pre-faulted per-thread array.
 *        Nothing else: no intern table, no filtering, no GIL probe. A tracer that
 *        records every call with a timestamp cannot cost less than this.
 *        3.9-3.11: PyEval_SetProfile; the array is found through the hook's `obj`
 *          argument, new threads get the hook from threading.setprofile(bootstrap).
 *        3.12+: sys.monitoring C callbacks for the events giltracer registers
 *          (core/probes/calls/tracer.c cb_table); the array is found through a thread-local
 *          pointer checked against a session generation, as giltracer finds its
 *          thread record.
 *        floor_stop() releases every reference and returns the counts. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#if PY_VERSION_HEX >= 0x030C0000
#define FLOOR_MONITORING 1
#else
#define FLOOR_MONITORING 0
#endif

#define FLOOR_TOOL_ID 2 /* sys.monitoring.PROFILER_ID, the slot giltracer uses */
#define C_TAG ((uintptr_t)1)

/* ------------------------------------------------------------------ no-op hook */

static int noop_profile(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    (void)obj;
    (void)frame;
    (void)what;
    (void)arg;
    return 0;
}

static PyObject *noop_install(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    PyEval_SetProfile(noop_profile, NULL);
    Py_RETURN_NONE;
}

static PyObject *noop_uninstall(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    PyEval_SetProfile(NULL, NULL);
    Py_RETURN_NONE;
}

/* threading.setprofile() target: a new thread's first profile event replaces it
 * with the C hook on that thread. */
static PyObject *noop_bootstrap(PyObject *self, PyObject *args)
{
    (void)self;
    (void)args;
    PyEval_SetProfile(noop_profile, NULL);
    Py_RETURN_NONE;
}

/* ---------------------------------------------------------------- floor records */

enum floor_kind { FK_CALL, FK_RETURN, FK_UNWIND, FK_CCALL, FK_CRETURN, FK_CRAISE, FK_COUNT };
static const char *const floor_kind_names[FK_COUNT] = {"call",   "return",   "unwind",
                                                       "c_call", "c_return", "c_raise"};

struct floor_rec {
    uint64_t ts;
    uintptr_t ptr; /* PyCodeObject* (strong), or PyMethodDef* | C_TAG */
    uint64_t kind;
};
_Static_assert(sizeof(struct floor_rec) == 24, "a record is 24 bytes");

struct floor_buf {
    struct floor_rec *recs;
    size_t n, cap, dropped;
    int in_use;
};

static struct {
    struct floor_buf **bufs; /* every buffer made; reused across sessions */
    size_t nbufs;
    size_t cap; /* records per buffer */
    size_t lost; /* events of threads that got no buffer (out of memory) */
    int active;
    uint64_t gen; /* bumped at every start: stale thread-local pointers miss */
#if FLOOR_MONITORING
    PyObject *monitoring; /* strong, while active */
#endif
} fl;

static inline uint64_t floor_ticks(void)
{
#if defined(__x86_64__) || defined(__i386__)
    return (uint64_t)__rdtsc();
#else
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
#endif
}

/* A buffer of fl.cap records with every page touched, or NULL. */
static struct floor_buf *floor_buf_new(void)
{
    struct floor_buf *b = calloc(1, sizeof(*b));
    struct floor_buf **grown = realloc(fl.bufs, (fl.nbufs + 1) * sizeof(*fl.bufs));
    if (!b || !grown) {
        free(b);
        return NULL;
    }
    fl.bufs = grown;
    b->recs = malloc(fl.cap * sizeof(*b->recs));
    if (!b->recs) {
        free(b);
        return NULL;
    }
    /* Pre-fault: write every page (a memset to 0 after malloc may become a calloc,
     * which leaves fresh pages unmapped). */
    volatile unsigned char *bytes = (volatile unsigned char *)b->recs;
    for (size_t off = 0; off < fl.cap * sizeof(*b->recs); off += 4096)
        bytes[off] = 1;
    b->cap = fl.cap;
    fl.bufs[fl.nbufs++] = b;
    return b;
}

/* A free buffer for the calling thread: from the prepared pool, or a new one (a
 * thread the pool was not sized for; made once, then reused). */
static struct floor_buf *floor_buf_acquire(void)
{
    for (size_t i = 0; i < fl.nbufs; i++) {
        if (!fl.bufs[i]->in_use) {
            fl.bufs[i]->in_use = 1;
            return fl.bufs[i];
        }
    }
    struct floor_buf *b = floor_buf_new();
    if (b)
        b->in_use = 1;
    return b;
}

static void floor_free_all(void)
{
    for (size_t i = 0; i < fl.nbufs; i++) {
        free(fl.bufs[i]->recs);
        free(fl.bufs[i]);
    }
    free(fl.bufs);
    fl.bufs = NULL;
    fl.nbufs = 0;
}

/* The hot path. `code` is a new reference, kept by the record. */
static inline void floor_push_code(struct floor_buf *b, uint64_t ts, PyObject *code, uint64_t kind)
{
    if (__builtin_expect(b->n == b->cap, 0)) {
        b->dropped++;
        Py_DECREF(code);
        return;
    }
    struct floor_rec *r = &b->recs[b->n++];
    r->ts = ts;
    r->ptr = (uintptr_t)code;
    r->kind = kind;
}

static inline void floor_push_c(struct floor_buf *b, uint64_t ts, PyMethodDef *ml, uint64_t kind)
{
    if (__builtin_expect(b->n == b->cap, 0)) {
        b->dropped++;
        return;
    }
    struct floor_rec *r = &b->recs[b->n++];
    r->ts = ts;
    r->ptr = (uintptr_t)ml | C_TAG;
    r->kind = kind;
}

/* The C function's PyMethodDef, or NULL when `callable` is not one (3.12+'s CALL
 * event fires for Python callables too). The same test giltracer makes. */
static inline PyMethodDef *floor_method_def(PyObject *callable)
{
    PyTypeObject *tp = Py_TYPE(callable);
    if (tp == &PyCFunction_Type || tp == &PyCMethod_Type)
        return ((PyCFunctionObject *)callable)->m_ml;
    if (tp == &PyMethodDescr_Type)
        return ((PyMethodDescrObject *)callable)->d_method;
    if (PyCFunction_Check(callable))
        return ((PyCFunctionObject *)callable)->m_ml;
    return NULL;
}

/* ------------------------------------------------------------ floor: 3.9 - 3.11 */
#if !FLOOR_MONITORING

/* The profile function's `obj`: points at the thread's buffer. */
typedef struct {
    PyObject_HEAD
    struct floor_buf *buf;
} FloorSlot;

static PyTypeObject FloorSlot_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "_gt_bench_hooks.FloorSlot",
    .tp_basicsize = sizeof(FloorSlot),
    .tp_flags = Py_TPFLAGS_DEFAULT,
};

static int floor_profile(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    uint64_t ts = floor_ticks();
    struct floor_buf *b = ((FloorSlot *)obj)->buf;
    PyMethodDef *ml;
    switch (what) {
    case PyTrace_CALL:
        floor_push_code(b, ts, (PyObject *)PyFrame_GetCode(frame), FK_CALL);
        break;
    case PyTrace_RETURN: /* arg is NULL when an exception unwinds the frame */
        floor_push_code(b, ts, (PyObject *)PyFrame_GetCode(frame), arg ? FK_RETURN : FK_UNWIND);
        break;
    case PyTrace_C_CALL:
        if ((ml = floor_method_def(arg)))
            floor_push_c(b, ts, ml, FK_CCALL);
        break;
    case PyTrace_C_RETURN:
        if ((ml = floor_method_def(arg)))
            floor_push_c(b, ts, ml, FK_CRETURN);
        break;
    case PyTrace_C_EXCEPTION:
        if ((ml = floor_method_def(arg)))
            floor_push_c(b, ts, ml, FK_CRAISE);
        break;
    default:
        break;
    }
    return 0;
}

/* Give the calling thread a buffer and the hook. */
static int floor_attach_current(void)
{
    struct floor_buf *b = floor_buf_acquire();
    if (!b) {
        fl.lost++;
        return 0; /* this thread goes unrecorded; said in the counts */
    }
    FloorSlot *slot = PyObject_New(FloorSlot, &FloorSlot_Type);
    if (!slot) {
        b->in_use = 0;
        return -1;
    }
    slot->buf = b;
    PyEval_SetProfile(floor_profile, (PyObject *)slot); /* takes its own reference */
    Py_DECREF(slot);
    return 0;
}

static int floor_install(void)
{
    return floor_attach_current();
}

/* Off on every thread that still has it (threads of the session may still run). */
static int floor_uninstall(void)
{
    PyInterpreterState *interp = PyThreadState_Get()->interp;
    int err = 0;
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(interp); ts; ts = PyThreadState_Next(ts))
        if (ts->c_profilefunc == floor_profile && _PyEval_SetProfile(ts, NULL, NULL) < 0)
            err = -1;
    return err;
}

static PyObject *floor_bootstrap(PyObject *self, PyObject *args)
{
    (void)self;
    (void)args;
    if (!fl.active) /* stopped before this thread's first event: leave it unhooked */
        PyEval_SetProfile(NULL, NULL);
    else if (floor_attach_current() < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* -------------------------------------------------------------- floor: 3.12+ */
#else

static _Thread_local struct floor_buf *tls_buf;
static _Thread_local uint64_t tls_gen;

static inline struct floor_buf *floor_current(void)
{
    if (__builtin_expect(tls_gen == fl.gen, 1))
        return tls_buf;
    tls_buf = floor_buf_acquire();
    tls_gen = fl.gen;
    if (!tls_buf)
        fl.lost++;
    return tls_buf;
}

static inline void floor_on_code(PyObject *code, uint64_t kind)
{
    uint64_t ts = floor_ticks();
    struct floor_buf *b = floor_current();
    if (__builtin_expect(b != NULL, 1))
        floor_push_code(b, ts, Py_NewRef(code), kind);
}

static inline void floor_on_c(PyObject *const *args, Py_ssize_t nargs, uint64_t kind)
{
    uint64_t ts = floor_ticks();
    PyMethodDef *ml;
    if (nargs < 3 || !(ml = floor_method_def(args[2])))
        return;
    struct floor_buf *b = floor_current();
    if (__builtin_expect(b != NULL, 1))
        floor_push_c(b, ts, ml, kind);
}

static PyObject *mon_start(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    (void)nargs;
    floor_on_code(args[0], FK_CALL);
    Py_RETURN_NONE;
}

static PyObject *mon_return(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    (void)nargs;
    floor_on_code(args[0], FK_RETURN);
    Py_RETURN_NONE;
}

static PyObject *mon_unwind(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    (void)nargs;
    floor_on_code(args[0], FK_UNWIND);
    Py_RETURN_NONE;
}

static PyObject *mon_call(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    floor_on_c(args, nargs, FK_CCALL);
    Py_RETURN_NONE;
}

static PyObject *mon_creturn(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    floor_on_c(args, nargs, FK_CRETURN);
    Py_RETURN_NONE;
}

static PyObject *mon_craise(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    floor_on_c(args, nargs, FK_CRAISE);
    Py_RETURN_NONE;
}

#define MON_CB(name, fn) {name, (PyCFunction)(void (*)(void))fn, METH_FASTCALL, NULL}
static PyMethodDef mon_defs[] = {
    MON_CB("floor_start", mon_start),   MON_CB("floor_return", mon_return),
    MON_CB("floor_unwind", mon_unwind), MON_CB("floor_call", mon_call),
    MON_CB("floor_creturn", mon_creturn), MON_CB("floor_craise", mon_craise),
};

/* The events giltracer registers with its defaults (core/probes/calls/tracer.c cb_table). */
static const struct {
    const char *event;
    int cb;
} mon_table[] = {
    {"PY_START", 0},  {"PY_RESUME", 0}, {"PY_THROW", 0}, {"PY_RETURN", 1}, {"PY_YIELD", 1},
    {"PY_UNWIND", 2}, {"CALL", 3},      {"C_RETURN", 4}, {"C_RAISE", 5},
};

static int floor_uninstall(void);

static int floor_install(void)
{
    int err = -1, claimed = 0;
    PyObject *events = NULL, *r = NULL;
    PyObject *sys = PyImport_ImportModule("sys");
    fl.monitoring = sys ? PyObject_GetAttrString(sys, "monitoring") : NULL;
    Py_XDECREF(sys);
    if (!fl.monitoring)
        goto cleanup;
    r = PyObject_CallMethod(fl.monitoring, "use_tool_id", "is", FLOOR_TOOL_ID, "giltracer-bench-floor");
    if (!r)
        goto cleanup;
    Py_CLEAR(r);
    claimed = 1;
    events = PyObject_GetAttrString(fl.monitoring, "events");
    if (!events)
        goto cleanup;
    long mask = 0;
    for (size_t i = 0; i < sizeof(mon_table) / sizeof(mon_table[0]); i++) {
        PyObject *ev = PyObject_GetAttrString(events, mon_table[i].event);
        long bit = ev ? PyLong_AsLong(ev) : -1;
        Py_XDECREF(ev);
        if (bit == -1 && PyErr_Occurred())
            goto cleanup;
        PyObject *fn = PyCFunction_New(&mon_defs[mon_table[i].cb], NULL);
        if (!fn)
            goto cleanup;
        r = PyObject_CallMethod(fl.monitoring, "register_callback", "ilO", FLOOR_TOOL_ID, bit, fn);
        Py_DECREF(fn);
        if (!r)
            goto cleanup;
        Py_CLEAR(r);
        mask |= bit;
    }
    r = PyObject_CallMethod(fl.monitoring, "set_events", "il", FLOOR_TOOL_ID, mask);
    if (!r)
        goto cleanup;
    err = 0;
cleanup:
    Py_XDECREF(r);
    Py_XDECREF(events);
    if (err < 0 && claimed) { /* give the tool id back, keep the first error */
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        (void)floor_uninstall();
        PyErr_Clear();
        PyErr_Restore(et, ev, tb);
    }
    if (err < 0)
        Py_CLEAR(fl.monitoring);
    return err;
}

static int floor_uninstall(void)
{
    int err = -1;
    PyObject *events = NULL, *r = NULL;
    if (!fl.monitoring)
        return 0;
    r = PyObject_CallMethod(fl.monitoring, "set_events", "ii", FLOOR_TOOL_ID, 0);
    if (!r)
        goto cleanup;
    Py_CLEAR(r);
    /* Drop the callbacks too: free_tool_id() keeps them on 3.12. */
    events = PyObject_GetAttrString(fl.monitoring, "events");
    if (!events)
        goto cleanup;
    for (size_t i = 0; i < sizeof(mon_table) / sizeof(mon_table[0]); i++) {
        PyObject *ev = PyObject_GetAttrString(events, mon_table[i].event);
        r = ev ? PyObject_CallMethod(fl.monitoring, "register_callback", "iOO", FLOOR_TOOL_ID, ev, Py_None)
               : NULL;
        Py_XDECREF(ev);
        if (!r)
            goto cleanup;
        Py_CLEAR(r);
    }
    r = PyObject_CallMethod(fl.monitoring, "free_tool_id", "i", FLOOR_TOOL_ID);
    if (!r)
        goto cleanup;
    err = 0;
cleanup:
    Py_XDECREF(r);
    Py_XDECREF(events);
    Py_CLEAR(fl.monitoring);
    return err;
}

#endif /* FLOOR_MONITORING */

/* ------------------------------------------------------------ floor: control */

/* floor_prepare(capacity, buffers): the pool of pre-faulted per-thread arrays. */
static PyObject *floor_prepare(PyObject *self, PyObject *args)
{
    (void)self;
    Py_ssize_t cap, nbufs;
    if (!PyArg_ParseTuple(args, "nn", &cap, &nbufs))
        return NULL;
    if (fl.active) {
        PyErr_SetString(PyExc_RuntimeError, "the floor hook is recording");
        return NULL;
    }
    if (cap < 1 || nbufs < 0) {
        PyErr_SetString(PyExc_ValueError, "capacity must be >= 1 and buffers >= 0");
        return NULL;
    }
    floor_free_all();
    fl.cap = (size_t)cap;
    for (Py_ssize_t i = 0; i < nbufs; i++)
        if (!floor_buf_new())
            return PyErr_NoMemory();
    Py_RETURN_NONE;
}

static PyObject *floor_start_py(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    if (fl.active || !fl.cap) {
        PyErr_SetString(PyExc_RuntimeError, fl.active ? "already recording" : "call floor_prepare() first");
        return NULL;
    }
    fl.gen++;
    fl.lost = 0;
    fl.active = 1;
    if (floor_install() < 0) {
        fl.active = 0;
        return NULL;
    }
    Py_RETURN_NONE;
}

/* floor_stop() -> {"events", "dropped", "threads", "lost", <kind>: count}; releases
 * every reference the records hold and returns the buffers to the pool. */
static PyObject *floor_stop_py(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    if (!fl.active) {
        PyErr_SetString(PyExc_RuntimeError, "not recording");
        return NULL;
    }
    int err = floor_uninstall();
    fl.active = 0;
    fl.gen++;
    size_t kinds[FK_COUNT] = {0}, events = 0, dropped = 0, threads = 0;
    for (size_t i = 0; i < fl.nbufs; i++) {
        struct floor_buf *b = fl.bufs[i];
        if (!b->in_use)
            continue;
        threads++;
        events += b->n;
        dropped += b->dropped;
        for (size_t j = 0; j < b->n; j++) {
            struct floor_rec *r = &b->recs[j];
            if (r->kind < FK_COUNT)
                kinds[r->kind]++;
            if (!(r->ptr & C_TAG))
                Py_DECREF((PyObject *)r->ptr);
        }
        b->n = b->dropped = 0;
        b->in_use = 0;
    }
    if (err < 0)
        return NULL;
    PyObject *d = Py_BuildValue("{s:n,s:n,s:n,s:n}", "events", (Py_ssize_t)events, "dropped",
                                (Py_ssize_t)dropped, "threads", (Py_ssize_t)threads, "lost",
                                (Py_ssize_t)fl.lost);
    for (int k = 0; d && k < FK_COUNT; k++) {
        PyObject *v = PyLong_FromSize_t(kinds[k]);
        if (!v || PyDict_SetItemString(d, floor_kind_names[k], v) < 0)
            Py_CLEAR(d);
        Py_XDECREF(v);
    }
    return d;
}

static PyMethodDef methods[] = {
    {"noop_install", noop_install, METH_NOARGS, "the no-op hook on this thread"},
    {"noop_uninstall", noop_uninstall, METH_NOARGS, "no profile hook on this thread"},
    {"noop_bootstrap", noop_bootstrap, METH_VARARGS, "threading.setprofile() target (no-op hook)"},
    {"floor_prepare", floor_prepare, METH_VARARGS, "floor_prepare(capacity, buffers): pre-faulted arrays"},
    {"floor_start", floor_start_py, METH_NOARGS, "start the minimal recording hook"},
    {"floor_stop", floor_stop_py, METH_NOARGS, "stop it, release its references, return the counts"},
#if !FLOOR_MONITORING
    {"floor_bootstrap", floor_bootstrap, METH_VARARGS, "threading.setprofile() target (floor hook)"},
#endif
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moddef = {
    PyModuleDef_HEAD_INIT, "_gt_bench_hooks", "reference hooks for the benchmarks (no-op, floor)", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__gt_bench_hooks(void)
{
#if !FLOOR_MONITORING
    if (PyType_Ready(&FloorSlot_Type) < 0)
        return NULL;
#endif
    PyObject *m = PyModule_Create(&moddef);
    if (m && PyModule_AddIntConstant(m, "FLOOR_USES_MONITORING", FLOOR_MONITORING) < 0)
        Py_CLEAR(m);
    return m;
}

/* SPDX-License-Identifier: MIT */
/* The function tracer (see tracer.h). The hot path: check the hook's generation, read
 * the clock, find the thread's record (the hook's slot, or TLS), look the code object
 * up in the thread's intern table, push 8 bytes. No allocation, no Python call, no
 * exception state touched. */
#include "tracer.h"

#include <fnmatch.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <frameobject.h>
#include <stdlib.h>
#include <string.h>

#include "gt_clock.h"
#include "note.h"
#include "threads.h"

#if PY_VERSION_HEX >= 0x030C0000
#define GT_USE_MONITORING 1
#else
#define GT_USE_MONITORING 0
#endif

/* Flags above a function id (ids stay below GT_CALL_REC_FUNC_LIMIT). */
#define FID_EXCLUDED 0x80000000u /* not traced (include / exclude, giltracer's own code) */
#define FID_FOLLOW 0x40000000u   /* a C function recorded only when its caller is traced */
#define FID_UNREF 0x20000000u    /* seen after the thread's call budget was spent: interned
                                  * without a reference, its events only counted as dropped */
#define FID_FLAGS (FID_EXCLUDED | FID_FOLLOW | FID_UNREF)
#define TOOL_ID 2 /* sys.monitoring.PROFILER_ID: we are a profiler */
#define INITIAL_SLOTS 1024u

enum entry_kind { ENTRY_CODE = 0, ENTRY_CFUNC = 1 };

/* What the filters decided for a function (see the FID_ flags). */
enum entry_filter { F_TRACED = 0, F_EXCLUDED = 1, F_FOLLOW = 2 };

struct tr_entry {
    void *key;
    /* Strong reference: the code object (ENTRY_CODE), or the C function's owner, a
     * type or a module-name str (ENTRY_CFUNC), kept so its name can be built at stop.
     * NULL, and `keep` too, for an entry made without references (FID_UNREF). */
    PyObject *obj;
    /* ENTRY_CFUNC, strong: what keeps the PyMethodDef (the key, and cname) allocated
     * until collect, so its address is never reused for another function meanwhile. */
    PyObject *keep;
    const char *cname; /* ENTRY_CFUNC: ml_name of the PyMethodDef */
    /* A function of a subinterpreter: its name and file, copied when first seen (no
     * reference to another interpreter's objects outlives the event), else NULL. */
    char *sname, *sfile;
    uint32_t sline;
    uint32_t kind;
    uint32_t excluded; /* nonzero: not traced, or FID_UNREF (no name to build) */
};

struct tr_state {
    /* One-entry cache in front of the table: a C call's return, and a function calling
     * itself, hit it without hashing. */
    const void *last_key;
    uint32_t last_fid;
    void **keys; /* open addressing, linear probing; NULL = empty */
    uint32_t *vals;
    uint32_t mask;
    uint32_t used;
    struct tr_entry *entries;
    uint32_t nentries, centries;
    uint32_t *map; /* after collect: local id -> global id */
    uint32_t nmap;
    int hooked_before_bootstrap; /* 3.9-3.11: attached late, before threading's hook ran */
};

/* A thread state whose hook went while recording (see slot_dealloc). */
struct dropped_slot {
    PyThreadState *ts;
    uint64_t ts_id;
    uint64_t ticks;
};

struct saved_profile {
    PyThreadState *ts;
    uint64_t ts_id; /* ts->id: unique, unlike the address a new thread state may reuse */
    Py_tracefunc func;
    PyObject *obj; /* strong */
};

static struct {
    int active;
    int c_calls;
    int max_depth;
    PyObject *include;      /* strong: list of bytes patterns, or NULL */
    PyObject *exclude;      /* strong: list of bytes patterns, or NULL */
    PyObject *own_dir;      /* strong: bytes */
    PyTypeObject *own_type; /* strong */
    uint64_t start_ticks;
#if GT_USE_MONITORING
    PyObject *monitoring; /* strong: sys.monitoring */
    PyObject *callbacks;  /* strong: list of callback functions (kept alive) */
#else
    struct saved_profile *saved;
    size_t nsaved;
    PyInterpreterState *interp;
    uint64_t known_head_id; /* id of the newest thread state seen (attach_new_threads) */
    uint64_t attached_late;    /* thread states given the hook after start */
    uint64_t attached_running; /* ... of which had run Python code untraced already */
    uint64_t attach_failed;    /* thread states it could not be given (out of memory) */
    /* Other profilers on the same thread states (their own profile functions). */
    uint64_t paused;            /* thread states whose profiler the trace paused */
    char paused_by[96];         /* ... the first one's name */
    uint64_t displaced;         /* thread states whose hook another profiler replaced */
    uint64_t displaced_ticks;   /* ... when the first was */
    char displaced_by[96];      /* ... by what */
    uint64_t left_running;      /* ... whose replacement still ran at stop (left there) */
    struct dropped_slot *dropped; /* slots that went while recording, to look at */
    size_t ndropped, cdropped;
    int look_scheduled;           /* look_at_dropped_slots is a pending call */
#endif
    int functions;
    int watching; /* threading.setprofile(bootstrap) is in place */
    PyObject *saved_threading_hook; /* strong */
    PyObject *bootstrap;            /* strong */
    PyObject *names;                /* strong: dict native id -> thread name */
    uint64_t include_matched;       /* functions and files the include globs matched */
    char include_unmatched[200];    /* at stop: the include globs, if they matched nothing */
} tr;

/* ------------------------------------------------------------------ intern table */

static inline uint32_t slot_of(const void *key, uint32_t mask)
{
    uint64_t h = (uint64_t)(uintptr_t)key * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h >> 32) & mask;
}

static struct tr_state *tr_state_new(struct gt_thread *t)
{
    struct tr_state *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->keys = calloc(INITIAL_SLOTS, sizeof(*s->keys));
    s->vals = calloc(INITIAL_SLOTS, sizeof(*s->vals));
    if (!s->keys || !s->vals) {
        free(s->keys);
        free(s->vals);
        free(s);
        return NULL;
    }
    s->mask = INITIAL_SLOTS - 1;
    t->tracer_state = s;
    return s;
}

static inline struct tr_state *tr_get(struct gt_thread *t)
{
    struct tr_state *s = t->tracer_state;
    if (__builtin_expect(s == NULL, 0))
        s = tr_state_new(t);
    return s;
}

static inline int tr_find(struct tr_state *s, const void *key, uint32_t *fid)
{
    if (key == s->last_key) {
        *fid = s->last_fid;
        return 1;
    }
    uint32_t i = slot_of(key, s->mask);
    for (;;) {
        const void *k = s->keys[i];
        if (k == key) {
            *fid = s->last_fid = s->vals[i];
            s->last_key = key;
            return 1;
        }
        if (!k)
            return 0;
        i = (i + 1) & s->mask;
    }
}

static int tr_grow(struct tr_state *s)
{
    uint32_t ncap = (s->mask + 1) * 2;
    void **keys = calloc(ncap, sizeof(*keys));
    uint32_t *vals = calloc(ncap, sizeof(*vals));
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return -1;
    }
    for (uint32_t i = 0; i <= s->mask; i++) {
        if (!s->keys[i])
            continue;
        uint32_t j = slot_of(s->keys[i], ncap - 1);
        while (keys[j])
            j = (j + 1) & (ncap - 1);
        keys[j] = s->keys[i];
        vals[j] = s->vals[i];
    }
    free(s->keys);
    free(s->vals);
    s->keys = keys;
    s->vals = vals;
    s->mask = ncap - 1;
    return 0;
}

/* Add an entry; takes over the strong references `obj` and `keep`. `flags` are the
 * FID_ flags of its id. Returns the function id, or FID_EXCLUDED when out of memory
 * (the event is then not recorded). */
static uint32_t tr_add(struct tr_state *s, void *key, PyObject *obj, PyObject *keep,
                       const char *cname, uint32_t kind, uint32_t flags)
{
    if (s->nentries >= GT_CALL_REC_FUNC_LIMIT) /* a call record holds 28 bits of id */
        goto fail;
    if ((s->used + 1) * 2 > s->mask + 1 && tr_grow(s) < 0)
        goto fail;
    if (s->nentries == s->centries) {
        uint32_t n = s->centries ? s->centries * 2 : 256;
        struct tr_entry *e = realloc(s->entries, n * sizeof(*e));
        if (!e)
            goto fail;
        s->entries = e;
        s->centries = n;
    }
    uint32_t id = s->nentries++;
    s->entries[id] = (struct tr_entry){key, obj, keep, cname, NULL, NULL, 0, kind,
                                       (flags & (FID_EXCLUDED | FID_UNREF)) != 0};
    uint32_t fid = id | flags;
    uint32_t i = slot_of(key, s->mask);
    while (s->keys[i])
        i = (i + 1) & s->mask;
    s->keys[i] = key;
    s->vals[i] = fid;
    s->used++;
    return fid;
fail:
    Py_XDECREF(obj);
    Py_XDECREF(keep);
    return FID_EXCLUDED;
}

static int matches_any(PyObject *patterns, const char *str)
{
    Py_ssize_t n = PyList_GET_SIZE(patterns);
    for (Py_ssize_t i = 0; i < n; i++)
        if (fnmatch(PyBytes_AS_STRING(PyList_GET_ITEM(patterns, i)), str, 0) == 0)
            return 1;
    return 0;
}

/* The include / exclude globs on a function: each matches its file path (NULL for a
 * C function) or its qualified name. A C function no include glob names is recorded
 * when its caller is (F_FOLLOW). */
static enum entry_filter filter(const char *path, const char *name)
{
    if (tr.exclude && ((path && matches_any(tr.exclude, path)) || matches_any(tr.exclude, name)))
        return F_EXCLUDED;
    if (!tr.include)
        return F_TRACED;
    if ((path && matches_any(tr.include, path)) || matches_any(tr.include, name)) {
        __atomic_fetch_add(&tr.include_matched, 1, __ATOMIC_RELAXED); /* any thread */
        return F_TRACED;
    }
    return path ? F_EXCLUDED : F_FOLLOW;
}

static const char *utf8_or_empty(PyObject *s)
{
    const char *p = s && PyUnicode_Check(s) ? PyUnicode_AsUTF8(s) : NULL;
    if (!p)
        PyErr_Clear();
    return p ? p : "";
}

/* Decide once per code object whether it is traced. */
static int code_excluded(PyCodeObject *code)
{
    int excluded = 0;
    PyObject *fs = PyUnicode_EncodeFSDefault(code->co_filename);
    if (!fs) {
        PyErr_Clear();
        return 0;
    }
    const char *path = PyBytes_AS_STRING(fs);
    Py_ssize_t own_len = PyBytes_GET_SIZE(tr.own_dir);
    if (own_len && strncmp(path, PyBytes_AS_STRING(tr.own_dir), (size_t)own_len) == 0)
        excluded = 1;
    else if (tr.include || tr.exclude)
#if PY_VERSION_HEX >= 0x030B0000
        excluded = filter(path, utf8_or_empty(code->co_qualname)) != F_TRACED;
#else
        excluded = filter(path, utf8_or_empty(code->co_name)) != F_TRACED;
#endif
    Py_DECREF(fs);
    return excluded;
}

/* Is the calling thread in a subinterpreter? Its objects must not be kept: they belong
 * to another GIL and may be gone (with their interpreter) by collect. */
static int in_subinterp(void)
{
#if PY_VERSION_HEX >= 0x030C0000
    return PyInterpreterState_Get() != PyInterpreterState_Main();
#else
    return 0;
#endif
}

#define SUB_KEEP "giltracer.keep"

/* Keep `o` (a subinterpreter's) alive until that interpreter's next session or its
 * end: in a list in its own state dict, so it is released there, under its GIL. An
 * entry's key then stays unique for the session (a freed code object's address is
 * soon another's). */
static void sub_keep(PyObject *o)
{
    PyObject *d = PyInterpreterState_GetDict(PyInterpreterState_Get());
    PyObject *l = d ? PyDict_GetItemString(d, SUB_KEEP) : NULL;
    if (l && PyList_Check(l) && PyList_Append(l, o) < 0)
        PyErr_Clear();
}

/* Give entry `fid` (made without references) the copied name of a subinterpreter's
 * function. Out of memory it stays nameless ("?"). */
static void tr_name_entry(struct tr_state *s, uint32_t fid, const char *name, const char *file,
                          uint32_t line)
{
    if (fid & FID_EXCLUDED)
        return;
    struct tr_entry *e = &s->entries[fid & ~FID_FLAGS];
    e->sname = strdup(name);
    e->sfile = strdup(file);
    e->sline = line;
}

/* A new entry for `code`, with a reference to it; without one (FID_UNREF) once the
 * thread's call stream refuses events: the table then holds no object past the budget. */
static uint32_t tr_insert_code(struct tr_state *s, struct gt_thread *t, PyCodeObject *code)
{
    /* May run while an exception is being propagated: keep it intact. */
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    uint32_t flags = code_excluded(code) ? FID_EXCLUDED : 0;
    uint32_t fid;
    if (t->calls.dropped) {
        fid = tr_add(s, code, NULL, NULL, NULL, ENTRY_CODE, flags | FID_UNREF);
    } else if (in_subinterp()) {
#if PY_VERSION_HEX >= 0x030B0000
        const char *name = utf8_or_empty(code->co_qualname);
#else
        const char *name = utf8_or_empty(code->co_name);
#endif
        sub_keep((PyObject *)code);
        fid = tr_add(s, code, NULL, NULL, NULL, ENTRY_CODE, flags);
        tr_name_entry(s, fid, name, utf8_or_empty(code->co_filename),
                      (uint32_t)code->co_firstlineno);
    } else {
        fid = tr_add(s, code, Py_NewRef((PyObject *)code), NULL, NULL, ENTRY_CODE, flags);
    }
    PyErr_Restore(et, ev, tb);
    return fid;
}

/* The identity of a C callee without keying by the callable itself (3.11 makes a
 * fresh bound builtin per `obj.method()` call): its PyMethodDef, which tr_insert_c
 * keeps allocated (c_identity). NULL when `callable` is not a C function. Exact type
 * compares first: this runs per event. */
static inline PyMethodDef *c_method_def(PyObject *callable)
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

static int is_descriptor_of(PyObject *d, PyMethodDef *ml)
{
    return d && (Py_IS_TYPE(d, &PyMethodDescr_Type) || Py_IS_TYPE(d, &PyClassMethodDescr_Type)) &&
           ((PyMethodDescrObject *)d)->d_method == ml;
}

/* The method descriptor of `tp` or a base of it whose PyMethodDef is `ml`, or NULL
 * (borrowed). Bases are searched too: a subclass may shadow the name (super().m()). */
static PyObject *type_descriptor_of(PyTypeObject *tp, PyMethodDef *ml)
{
    PyObject *name = PyUnicode_InternFromString(ml->ml_name), *found = NULL;
    PyObject *mro = tp->tp_mro;
    if (!name) {
        PyErr_Clear();
        return NULL;
    }
    PyObject *d = _PyType_Lookup(tp, name); /* borrowed */
    if (is_descriptor_of(d, ml))
        found = d;
    for (Py_ssize_t i = 1; !found && mro && PyTuple_Check(mro) && i < PyTuple_GET_SIZE(mro); i++) {
        PyObject *base = PyTuple_GET_ITEM(mro, i);
        d = PyType_Check(base) ? _PyType_Lookup((PyTypeObject *)base, name) : NULL;
        if (is_descriptor_of(d, ml))
            found = d;
    }
    Py_DECREF(name);
    PyErr_Clear();
    return found;
}

/* Once per unique C function: `*owner`, what its name is built from (a new reference
 * to a type or a module-name str, or NULL), and `*keep`, a new reference to what keeps
 * its PyMethodDef allocated: the type's method descriptor when the def is the type's
 * (a bound builtin made per call is not kept), else the function object itself
 * (module functions; pybind11's, whose def is freed with the function). */
static void c_identity(PyObject *callable, PyMethodDef *ml, PyObject **owner, PyObject **keep)
{
    if (Py_IS_TYPE(callable, &PyMethodDescr_Type)) {
        *owner = Py_NewRef((PyObject *)PyDescr_TYPE(callable));
        *keep = Py_NewRef(callable);
        return;
    }
    PyCFunctionObject *f = (PyCFunctionObject *)callable;
    PyObject *self = f->m_self, *d = NULL;
    if (self && PyModule_Check(self)) {
        if (!(*owner = PyModule_GetNameObject(self)))
            PyErr_Clear();
    } else if (self && PyType_Check(self)) {
        *owner = Py_NewRef(self);
        if (!(d = type_descriptor_of((PyTypeObject *)self, ml)))
            d = type_descriptor_of(Py_TYPE(self), ml);
    } else if (self && (d = type_descriptor_of(Py_TYPE(self), ml))) {
        *owner = Py_NewRef((PyObject *)Py_TYPE(self)); /* a bound builtin method */
    } else {
        /* No self, or one whose type does not have this function: it only carries the
         * function's data (pybind11's function record, a capsule). The function's
         * module names it, if it says one. */
        *owner = f->m_module && PyUnicode_Check(f->m_module) ? Py_NewRef(f->m_module) : NULL;
    }
    *keep = Py_NewRef(d ? d : callable);
}

/* The name entry_name() gives a C function, into `buf`. */
static void c_name(PyObject *owner, const char *cname, char *buf, size_t len)
{
    if (owner && PyType_Check(owner))
        snprintf(buf, len, "%s.%s", ((PyTypeObject *)owner)->tp_name, cname);
    else if (owner && PyUnicode_Check(owner) &&
             PyUnicode_CompareWithASCIIString(owner, "builtins") != 0)
        snprintf(buf, len, "%s.%s", utf8_or_empty(owner), cname);
    else
        snprintf(buf, len, "%s", cname);
}

static uint32_t tr_insert_c(struct tr_state *s, struct gt_thread *t, PyMethodDef *ml,
                            PyObject *callable)
{
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyObject *owner, *keep;
    c_identity(callable, ml, &owner, &keep);
    uint32_t flags = 0;
    if (owner == (PyObject *)tr.own_type) {
        flags = FID_EXCLUDED;
    } else if (owner && PyUnicode_Check(owner) &&
               PyUnicode_CompareWithASCIIString(owner, "giltracer._core") == 0) {
        flags = FID_EXCLUDED;
    } else if (tr.include || tr.exclude) {
        char name[256];
        c_name(owner, ml->ml_name, name, sizeof(name));
        enum entry_filter f = filter(NULL, name);
        flags = f == F_EXCLUDED ? FID_EXCLUDED : f == F_FOLLOW ? FID_FOLLOW : 0;
    }
    int sub = !t->calls.dropped && in_subinterp();
    char sname[256];
    if (sub) {
        c_name(owner, ml->ml_name, sname, sizeof(sname));
        if (keep)
            sub_keep(keep);
    }
    if (t->calls.dropped || sub) {
        Py_XDECREF(owner);
        Py_XDECREF(keep);
        owner = keep = NULL;
        if (!sub)
            flags |= FID_UNREF;
    }
    uint32_t fid = tr_add(s, ml, owner, keep, ml->ml_name, ENTRY_CFUNC, flags);
    if (sub)
        tr_name_entry(s, fid, sname, "", 0);
    PyErr_Restore(et, ev, tb);
    return fid;
}

/* ------------------------------------------------------------------ recording */

/* An event of a function that has flags: excluded ones are not events; FID_UNREF ones
 * are counted as the thread's full call stream counts them. */
static void record_flagged(struct gt_thread *t, uint32_t fid, int entering)
{
    if (fid & FID_EXCLUDED)
        return;
    if (tr.max_depth) {
        int d = entering ? ++t->depth : t->depth--;
        if (d > tr.max_depth)
            return;
    }
    t->calls.dropped++;
}

static inline void record(struct gt_thread *t, uint64_t ts, uint32_t fid, uint32_t kind,
                          int entering)
{
    if (__builtin_expect(fid & FID_FLAGS, 0)) {
        record_flagged(t, fid, entering);
        return;
    }
    if (tr.max_depth) {
        int d = entering ? ++t->depth : t->depth--;
        if (d > tr.max_depth)
            return;
    }
    gt_stream__push_call(&t->calls, ts, fid, kind);
}

static inline __attribute__((always_inline)) void on_py(struct gt_thread *t, uint64_t ts, PyCodeObject *code, uint32_t kind,
                         int entering)
{
    if (__builtin_expect(!t, 0))
        return;
    struct tr_state *s = tr_get(t);
    if (__builtin_expect(!s, 0))
        return;
    uint32_t fid;
    if (__builtin_expect(!tr_find(s, code, &fid), 0))
        fid = tr_insert_code(s, t, code);
    record(t, ts, fid, kind, entering);
}

/* Who made a C call: the caller's frame (profile function; its code is looked up only
 * for a C function that follows its caller), or its code (sys.monitoring). */
#if GT_USE_MONITORING
typedef PyCodeObject gt_caller;
static inline PyCodeObject *caller_code(gt_caller *c)
{
    return c;
}
#else
typedef PyFrameObject gt_caller;
static PyCodeObject *caller_code(gt_caller *f)
{
    if (!f)
        return NULL;
#if PY_VERSION_HEX >= 0x030B0000
    PyCodeObject *code = PyFrame_GetCode(f);
    Py_DECREF(code); /* the frame keeps it alive while we use it */
    return code;
#else
    return f->f_code;
#endif
}
#endif

/* A C function that follows its caller (FID_FOLLOW): the caller's id says. */
static uint32_t follow_caller(struct tr_state *s, uint32_t fid, gt_caller *from)
{
    uint32_t cfid;
    PyCodeObject *caller = caller_code(from);
    if (!caller || !tr_find(s, caller, &cfid) || (cfid & FID_EXCLUDED))
        return FID_EXCLUDED;
    return (fid & ~FID_FOLLOW) | (cfid & FID_UNREF);
}

/* A C event of C function `ml` (`callable`) made by `caller` (NULL: unknown), at `ts`. */
static inline __attribute__((always_inline)) void on_cfunc(struct gt_thread *t, uint64_t ts,
                                                           PyMethodDef *ml, PyObject *callable,
                                                           gt_caller *caller,
                                                           uint32_t kind, int entering)
{
    if (__builtin_expect(!t, 0))
        return;
    struct tr_state *s = tr_get(t);
    if (__builtin_expect(!s, 0))
        return;
    uint32_t fid;
    if (__builtin_expect(!tr_find(s, ml, &fid), 0))
        fid = tr_insert_c(s, t, ml, callable);
    if (__builtin_expect(fid & FID_FOLLOW, 0))
        fid = follow_caller(s, fid, caller);
    record(t, ts, fid, kind, entering);
}

static inline __attribute__((always_inline)) void on_c(struct gt_thread *t, uint64_t ts,
                                                       PyObject *callable, gt_caller *caller,
                                                       uint32_t kind, int entering)
{
    PyMethodDef *ml = c_method_def(callable);
    if (ml)
        on_cfunc(t, ts, ml, callable, caller, kind, entering);
}

/* Record the code objects `stack` (innermost first; n new references, released here)
 * of a thread's open frames as calls at `ts`, outermost first. `t` may be NULL. */
static void record_open_frames(struct gt_thread *t, PyCodeObject **stack, int n, uint64_t ts)
{
    struct tr_state *s = t ? tr_get(t) : NULL;
    for (int i = n - 1; i >= 0; i--) {
        if (s) {
            uint32_t fid;
            if (!tr_find(s, stack[i], &fid))
                fid = tr_insert_code(s, t, stack[i]);
            /* Not counted in t->depth: max_depth is relative to where tracing began
             * (a notebook cell already runs 30-40 frames deep). Their returns take the
             * depth below 0, so they are always recorded. */
            if (!(fid & FID_FLAGS))
                gt_stream__push_call(&t->calls, ts, fid, GT_CALL | GT_CALL_OPEN_AT_START);
            else if (!(fid & FID_EXCLUDED))
                t->calls.dropped++;
        }
        Py_DECREF(stack[i]);
    }
}

/* Record the Python frames open on a thread as calls at `ts`, outermost first. */
static void push_open_frames(struct gt_thread *t, PyFrameObject *innermost, uint64_t ts)
{
    PyCodeObject *stack[512];
    int n = 0;
    PyFrameObject *f = innermost;
    Py_XINCREF(f);
    while (f) {
        if (n < (int)(sizeof(stack) / sizeof(stack[0])))
            stack[n++] = PyFrame_GetCode(f); /* new reference */
        PyFrameObject *back = PyFrame_GetBack(f); /* new reference */
        Py_DECREF(f);
        f = back;
    }
    record_open_frames(t, stack, n, ts);
}

/* ------------------------------------------------------------------ 3.9 - 3.11 */
#if !GT_USE_MONITORING

static inline PyCodeObject *frame_code(PyFrameObject *frame)
{
#if PY_VERSION_HEX >= 0x030B0000
    PyCodeObject *code = PyFrame_GetCode(frame);
    Py_DECREF(code); /* the frame keeps it alive while we use it */
    return code;
#else
    return frame->f_code;
#endif
}

/* The profile function's `obj`, one per thread state: it carries the thread's record,
 * found once, so the hot path needs no TLS lookup. Lives from install to uninstall
 * (the thread state holds the only reference). */
typedef struct {
    PyObject_HEAD
    /* The registry generation the slot was made in: the record `t` is valid while the
     * registry's generation is still this one (the records are freed only after the
     * generation ends). A hook left behind by a session that could not remove it (an
     * audit hook refused sys.setprofile) sees another generation and touches nothing. */
    uint64_t gen;
    struct gt_thread *t; /* NULL until the thread's first event */
    PyThreadState *ts;   /* the thread state it was given to */
    uint64_t ts_id;      /* ... and its id (an address can be reused) */
    int late; /* installed by attach_new_threads: record the open frames at first event */
    int retired; /* stale, and could not remove itself: every event is ignored */
} SlotObject;

static void slot_dealloc(PyObject *self);

static PyTypeObject Slot_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "giltracer._core._ThreadSlot",
    .tp_basicsize = sizeof(SlotObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = slot_dealloc,
};

/* A new reference for thread state `ts`, or NULL with an exception set. */
static PyObject *slot_new(PyThreadState *ts)
{
    if (!(Slot_Type.tp_flags & Py_TPFLAGS_READY) && PyType_Ready(&Slot_Type) < 0)
        return NULL;
    SlotObject *o = PyObject_New(SlotObject, &Slot_Type);
    if (o) {
        o->gen = atomic_load(&gt_registry_gen);
        o->t = NULL;
        o->ts = ts;
        o->ts_id = ts->id;
        o->late = 0;
        o->retired = 0;
    }
    return (PyObject *)o;
}

static int profile_hook(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg);

/* cProfile.Profile or another subclass of _lsprof.Profiler? */
static int is_lsprof(PyTypeObject *tp)
{
    for (; tp; tp = tp->tp_base)
        if (strcmp(tp->tp_name, "_lsprof.Profiler") == 0)
            return 1;
    return 0;
}

/* A short name for the profile function `func(obj)`, for the trace's notes. No Python
 * code runs: this is called from a deallocator. */
static void profiler_name(Py_tracefunc func, PyObject *obj, char *buf, size_t len)
{
    if (!func) {
        snprintf(buf, len, "sys.setprofile(None)");
    } else if (obj && is_lsprof(Py_TYPE(obj))) {
        snprintf(buf, len, "cProfile");
    } else if (obj && PyFunction_Check(obj)) {
        PyObject *q = ((PyFunctionObject *)obj)->func_qualname;
        snprintf(buf, len, "sys.setprofile(%.72s)",
                 q && PyUnicode_Check(q) && PyUnicode_IS_ASCII(q) ? (const char *)PyUnicode_DATA(q)
                                                                   : "a function");
    } else {
        snprintf(buf, len, "a profile function (%.40s)", obj ? Py_TYPE(obj)->tp_name : "C");
    }
}

/* Does thread state `ts` run Python code (frames open)? A thread state without frames
 * is ending (PyThreadState_Clear drops its profile function). */
static int ts_has_frame(PyThreadState *ts)
{
#if PY_VERSION_HEX >= 0x030B0000
    return ts->cframe && ts->cframe->current_frame;
#else
    return ts->frame != NULL;
#endif
}

/* `o`'s thread state, if it still exists (a slot kept by sys.getprofile() can outlive it). */
static PyThreadState *slot_tstate(SlotObject *o)
{
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(tr.interp); ts; ts = PyThreadState_Next(ts))
        if (ts == o->ts && ts->id == o->ts_id)
            return ts;
    return NULL;
}

/* The thread states whose hook went (slot_dealloc): a thread that still runs Python
 * code and now has another profile function than ours or threading's bootstrap (or
 * none) had the tracer displaced, at that time. Runs with the GIL, soon after (a
 * pending call) and at stop. */
static void look_at_dropped_slots(void)
{
    for (size_t i = 0; i < tr.ndropped; i++) {
        struct dropped_slot *d = &tr.dropped[i];
        PyThreadState *ts = PyInterpreterState_ThreadHead(tr.interp);
        while (ts && !(ts == d->ts && ts->id == d->ts_id))
            ts = PyThreadState_Next(ts);
        if (!ts || !ts_has_frame(ts) || ts->c_profilefunc == profile_hook ||
            (ts->c_profileobj && ts->c_profileobj == tr.bootstrap))
            continue;
        if (tr.displaced++ == 0 || d->ticks < tr.displaced_ticks) {
            tr.displaced_ticks = d->ticks;
            profiler_name(ts->c_profilefunc, ts->c_profileobj, tr.displaced_by,
                          sizeof(tr.displaced_by));
        }
    }
    tr.ndropped = 0;
}

static int look_at_dropped_slots_pending(void *arg)
{
    (void)arg;
    tr.look_scheduled = 0;
    if (tr.active)
        look_at_dropped_slots();
    return 0;
}

/* A slot of the running session goes: the thread state released it (it ends), or its
 * profile function changed: threading's bootstrap, or another profiler, which then
 * displaced the tracer on that thread (its later calls are lost). The new profile
 * function is set after the old one is released: it is looked at a little later. No
 * Python code runs here. */
static void slot_dealloc(PyObject *self)
{
    SlotObject *o = (SlotObject *)self;
    PyThreadState *ts;
    if (tr.active && !o->retired && o->gen == atomic_load(&gt_registry_gen) &&
        (ts = slot_tstate(o)) && ts_has_frame(ts)) {
        if (tr.ndropped == tr.cdropped) {
            size_t n = tr.cdropped ? tr.cdropped * 2 : 16;
            struct dropped_slot *d = realloc(tr.dropped, n * sizeof(*d));
            if (d) {
                tr.dropped = d;
                tr.cdropped = n;
            }
        }
        if (tr.ndropped < tr.cdropped)
            tr.dropped[tr.ndropped++] = (struct dropped_slot){ts, ts->id, gt_ticks()};
        if (!tr.look_scheduled && Py_AddPendingCall(look_at_dropped_slots_pending, NULL) == 0)
            tr.look_scheduled = 1;
    }
    PyObject_Free(self);
}

/* A hook of an ended session (see SlotObject.gen): remove it from the thread, or, if
 * an audit hook refuses, mark it so that it ignores every event. Frees `o` when the
 * removal succeeds: the caller must not touch it afterwards. */
static void slot_retire(SlotObject *o)
{
    if (o->retired)
        return;
    o->retired = 1;
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    if (_PyEval_SetProfile(PyThreadState_Get(), NULL, NULL) < 0)
        PyErr_Clear();
    PyErr_Restore(et, ev, tb);
}

/* Once per thread: its record; a thread attached late first records the frames it
 * has open (for a call event, the frame being entered is not open yet). */
static struct gt_thread *slot_bind(SlotObject *o, PyFrameObject *frame, int what, uint64_t ts)
{
    if (!tr.active) /* between stop and the generation's end: record nothing */
        return NULL;
    struct gt_thread *t = o->t = gt_thread_current();
    if (t && o->late) {
        o->late = 0;
        struct tr_state *s = tr_get(t);
        if (s)
            s->hooked_before_bootstrap = 1;
        PyFrameObject *open = what == PyTrace_CALL ? PyFrame_GetBack(frame)
                                                   : (PyFrameObject *)Py_NewRef(frame);
        if (open) {
            push_open_frames(t, open, ts);
            Py_DECREF(open);
        }
    }
    return t;
}

static inline struct gt_thread *slot_thread(SlotObject *o, PyFrameObject *frame, int what,
                                            uint64_t ts)
{
    if (__builtin_expect(o->t != NULL, 1))
        return o->t;
    return slot_bind(o, frame, what, ts);
}

/* _PyEval_SetProfile on thread state `ts`: 0, or -1 with the exception set here. 3.10
 * and 3.11 refuse while another thread is installing a profile function (its audit
 * hook may be blocked) and set that error in `ts`: it is moved here, where it belongs. */
static int set_profile(PyThreadState *ts, Py_tracefunc func, PyObject *obj)
{
    int had = ts->curexc_type != NULL;
    if (_PyEval_SetProfile(ts, func, obj) == 0)
        return 0;
    if (ts != PyThreadState_Get() && !had && ts->curexc_type) {
        PyObject *et = ts->curexc_type, *ev = ts->curexc_value, *tb = ts->curexc_traceback;
        ts->curexc_type = ts->curexc_value = ts->curexc_traceback = NULL;
        if (PyErr_Occurred()) {
            Py_DECREF(et);
            Py_XDECREF(ev);
            Py_XDECREF(tb);
        } else {
            PyErr_Restore(et, ev, tb);
        }
    }
    if (!PyErr_Occurred())
        PyErr_SetString(PyExc_RuntimeError, "the profile function could not be changed");
    return -1;
}

/* Threads that start without threading.Thread (_thread.start_new_thread, C code calling
 * PyGILState_Ensure) never pass through threading's profile hook: give every thread
 * state that has no profile function ours. Runs, with the GIL, from a traced thread
 * when the newest thread state changed, e.g. right after start_new_thread returns,
 * before the new thread can run. */
static void attach_new_threads(PyThreadState *head)
{
    uint64_t known = tr.known_head_id;
    tr.known_head_id = head->id;
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    for (PyThreadState *ts = head; ts; ts = PyThreadState_Next(ts)) {
        /* Only thread states made since the last look (ids only grow): an older one
         * without a profile function had ours removed by another profiler, and its
         * recorded calls cannot be continued where they stopped. */
        if (ts->id <= known)
            continue;
        if (ts->c_profilefunc) /* ours, threading's bootstrap, or someone else's */
            continue;
        PyObject *slot = slot_new(ts);
        if (slot) {
            ((SlotObject *)slot)->late = 1;
            if (set_profile(ts, profile_hook, slot) == 0) {
                /* Frames already open: it started (from C) while no traced thread
                 * ran, and part of its life is missing. Said at stop. */
                PyFrameObject *f = PyThreadState_GetFrame(ts);
                tr.attached_running += f != NULL;
                Py_XDECREF(f);
                tr.attached_late++;
            } else {
                tr.attach_failed++;
            }
            Py_DECREF(slot);
        } else {
            tr.attach_failed++;
        }
        PyErr_Clear();
    }
    PyErr_Restore(et, ev, tb);
}

static inline void watch_thread_states(void)
{
    if (__builtin_expect(!tr.active, 0))
        return;
    PyThreadState *head = PyInterpreterState_ThreadHead(tr.interp);
    if (__builtin_expect(head && head->id != tr.known_head_id, 0))
        attach_new_threads(head);
}

static int profile_hook(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    SlotObject *o = (SlotObject *)obj;
    /* One relaxed load and a compare: is the session that made this hook still the
     * registry's generation? If not, its records may be freed. */
    if (__builtin_expect(o->gen != atomic_load_explicit(&gt_registry_gen, memory_order_relaxed), 0)) {
        slot_retire(o);
        return 0;
    }
    /* C events come with c_calls=False too: they need no clock (reading the TSC is
     * most of this hook's own cost), only the check for new thread states. */
    if (what >= PyTrace_C_CALL && what <= PyTrace_C_RETURN && !tr.c_calls) {
        if (what == PyTrace_C_RETURN)
            watch_thread_states(); /* e.g. _thread.start_new_thread just returned */
        return 0;
    }
    uint64_t ts = gt_ticks();
    struct gt_thread *t = slot_thread(o, frame, what, ts);
    switch (what) {
    case PyTrace_CALL:
        on_py(t, ts, frame_code(frame), GT_CALL, 1);
        break;
    case PyTrace_RETURN: /* arg is NULL when an exception unwinds the frame */
        on_py(t, ts, frame_code(frame), arg ? GT_RETURN : GT_UNWIND, 0);
        break;
    case PyTrace_C_CALL:
        on_c(t, ts, arg, frame, GT_CCALL, 1);
        break;
    case PyTrace_C_RETURN:
        on_c(t, ts, arg, frame, GT_CRETURN, 0);
        watch_thread_states(); /* e.g. _thread.start_new_thread just returned */
        break;
    case PyTrace_C_EXCEPTION:
        on_c(t, ts, arg, frame, GT_CRAISE, 0);
        break;
    default:
        break;
    }
    return 0;
}

static int install(void)
{
    int err = -1;
    PyInterpreterState *interp = PyThreadState_Get()->interp;
    tr.interp = interp;
    tr.attached_late = tr.attached_running = tr.attach_failed = 0;
    tr.paused = tr.displaced = tr.left_running = 0;
    tr.ndropped = 0;
    size_t n = 0;
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(interp); ts; ts = PyThreadState_Next(ts))
        n++;
    tr.saved = calloc(n ? n : 1, sizeof(*tr.saved));
    if (!tr.saved) {
        PyErr_NoMemory();
        goto cleanup;
    }
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(interp); ts; ts = PyThreadState_Next(ts)) {
        struct saved_profile *sp = &tr.saved[tr.nsaved++];
        sp->ts = ts;
        sp->ts_id = ts->id;
        if (ts->c_profilefunc != profile_hook) { /* ours: left by an ended session */
            sp->func = ts->c_profilefunc;
            sp->obj = Py_XNewRef(ts->c_profileobj);
        }
        if (sp->func && tr.paused++ == 0)
            profiler_name(sp->func, sp->obj, tr.paused_by, sizeof(tr.paused_by));
        PyObject *slot = slot_new(ts);
        if (!slot)
            goto cleanup;
        int rc = set_profile(ts, profile_hook, slot); /* takes its own reference */
        Py_DECREF(slot);
        if (rc < 0)
            goto cleanup;
    }
    PyThreadState *head = PyInterpreterState_ThreadHead(interp);
    tr.known_head_id = head ? head->id : 0;
    err = 0;
cleanup:
    return err;
}

/* Give every thread state back the profile function it had at start. A thread whose
 * hook another profiler replaced during the trace keeps that profiler if it still
 * runs (it was started last). Returns 0, or -1 with a Python exception set when an
 * audit hook refused: the hooks left behind then ignore every event (their session's
 * generation ends) and remove themselves at their next event if they can. */
static int uninstall(void)
{
    PyInterpreterState *interp = PyThreadState_Get()->interp;
    look_at_dropped_slots();
    uint64_t failed = 0;
    PyObject *et = NULL, *ev = NULL, *tb = NULL;
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(interp); ts; ts = PyThreadState_Next(ts)) {
        Py_tracefunc func = NULL;
        PyObject *obj = NULL;
        for (size_t i = 0; i < tr.nsaved; i++) {
            if (tr.saved[i].ts == ts && tr.saved[i].ts_id == ts->id) {
                func = tr.saved[i].func;
                obj = tr.saved[i].obj;
                break;
            }
        }
        Py_tracefunc cur = ts->c_profilefunc;
        if (cur && cur != profile_hook && !(ts->c_profileobj && ts->c_profileobj == tr.bootstrap)) {
            tr.left_running++;
            continue;
        }
        if (!cur && !func)
            continue;
        if (set_profile(ts, func, obj) < 0) {
            if (failed++ == 0)
                PyErr_Fetch(&et, &ev, &tb);
            else
                PyErr_Clear();
        }
    }
    for (size_t i = 0; i < tr.nsaved; i++)
        Py_XDECREF(tr.saved[i].obj);
    free(tr.saved);
    tr.saved = NULL;
    tr.nsaved = 0;
    if (!failed)
        return 0;
    PyErr_Restore(et, ev, tb); /* set_profile's: the cause */
    _PyErr_FormatFromCause(PyExc_RuntimeError,
                           "giltracer: could not remove the function tracer from %llu thread(s) "
                           "(refused, e.g. by an audit hook on sys.setprofile): it records "
                           "nothing more there, and the profile functions those threads had "
                           "before the trace are not restored",
                           (unsigned long long)failed);
    return -1;
}

#else /* ------------------------------------------------------------ 3.12+ */

/* The calling thread's record, as gt_thread_current() gives it, cached in a TLS
 * variable of the initial-exec model: gt_tls, in a dlopen()ed module's default model,
 * costs a __tls_get_addr call per event (perf, builtins on 3.12: ~7 % of all samples).
 * Keyed by the registry generation like gt_tls, so a new session never sees a stale
 * record. 16 bytes of static TLS, which glibc reserves room for. */
static __thread struct gt_tls tr_tls __attribute__((tls_model("initial-exec")));

static inline struct gt_thread *tr_thread(void)
{
    uint64_t gen = atomic_load_explicit(&gt_registry_gen, memory_order_relaxed);
    if (__builtin_expect(tr_tls.gen == gen && gen != 0, 1))
        return tr_tls.thread;
    /* callbacks left registered by a failed uninstall: record nothing */
    if (!__atomic_load_n(&tr.active, __ATOMIC_RELAXED))
        return NULL;
    struct gt_thread *t = gt_thread_current();
    if (t) {
        tr_tls.thread = t;
        tr_tls.gen = gen;
    }
    return t;
}

/* The callbacks are called by sys.monitoring through vectorcall, directly: as
 * PyCFunctions each event went through one more dispatch layer
 * (cfunction_vectorcall_FASTCALL, ~3 % of a traced fib's samples on 3.12). */
typedef struct {
    PyObject_HEAD
    vectorcallfunc call;
} CallbackObject;

static PyTypeObject Callback_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "giltracer._core._MonitoringCallback",
    .tp_basicsize = sizeof(CallbackObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(CallbackObject, call),
    .tp_call = PyVectorcall_Call,
};

/* A new reference, or NULL with an exception set. */
static PyObject *callback_new(vectorcallfunc fn)
{
    if (!Callback_Type.tp_dealloc && PyType_Ready(&Callback_Type) < 0)
        return NULL;
    CallbackObject *o = PyObject_New(CallbackObject, &Callback_Type);
    if (o)
        o->call = fn;
    return (PyObject *)o;
}

/* PY_START, PY_RESUME, PY_THROW, PY_RETURN, PY_YIELD, PY_UNWIND: (code, offset, ...). */
static inline PyObject *py_callback(PyObject *const *args, size_t nargsf, uint32_t kind,
                                    int entering)
{
    uint64_t ts = gt_ticks();
    if (PyVectorcall_NARGS(nargsf) >= 1)
        on_py(tr_thread(), ts, (PyCodeObject *)args[0], kind, entering);
    Py_RETURN_NONE;
}

static PyObject *cb_start(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kw)
{
    (void)self;
    (void)kw;
    return py_callback(args, nargsf, GT_CALL, 1);
}

static PyObject *cb_return(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kw)
{
    (void)self;
    (void)kw;
    return py_callback(args, nargsf, GT_RETURN, 0);
}

static PyObject *cb_unwind(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kw)
{
    (void)self;
    (void)kw;
    return py_callback(args, nargsf, GT_UNWIND, 0);
}

/* CALL, C_RETURN, C_RAISE: (code, offset, callable, arg0). CALL comes for every call,
 * Python callees included: neither the clock (reading the TSC is most of a callback's
 * own cost) nor the thread's record is looked at unless the callee is a C function. */
static inline PyObject *c_callback(PyObject *const *args, size_t nargsf, uint32_t kind,
                                   int entering)
{
    PyMethodDef *ml = PyVectorcall_NARGS(nargsf) >= 3 ? c_method_def(args[2]) : NULL;
    if (ml) {
        struct gt_thread *t = tr_thread();
        on_cfunc(t, gt_ticks(), ml, args[2], (PyCodeObject *)args[0], kind, entering);
    }
    Py_RETURN_NONE;
}

static PyObject *cb_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kw)
{
    (void)self;
    (void)kw;
    return c_callback(args, nargsf, GT_CCALL, 1);
}

static PyObject *cb_creturn(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kw)
{
    (void)self;
    (void)kw;
    return c_callback(args, nargsf, GT_CRETURN, 0);
}

static PyObject *cb_craise(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kw)
{
    (void)self;
    (void)kw;
    return c_callback(args, nargsf, GT_CRAISE, 0);
}

static const vectorcallfunc cb_funcs[] = {cb_start, cb_return, cb_unwind,
                                          cb_call,  cb_creturn, cb_craise};

/* (event name, callback index, needs c_calls) */
static const struct {
    const char *event;
    int cb;
    int c;
} cb_table[] = {
    {"PY_START", 0, 0}, {"PY_RESUME", 0, 0}, {"PY_THROW", 0, 0},
    {"PY_RETURN", 1, 0}, {"PY_YIELD", 1, 0}, {"PY_UNWIND", 2, 0},
    {"CALL", 3, 1},      {"C_RETURN", 4, 1}, {"C_RAISE", 5, 1},
};
#define NCB ((int)(sizeof(cb_table) / sizeof(cb_table[0])))

static int register_here(PyObject *m, const vectorcallfunc *fns, PyObject *keep);
static const vectorcallfunc *main_callbacks(void);

static int install(void)
{
    PyObject *sys = PyImport_ImportModule("sys");
    if (!sys)
        return -1;
    tr.monitoring = PyObject_GetAttrString(sys, "monitoring");
    Py_DECREF(sys);
    tr.callbacks = PyList_New(0);
    if (!tr.monitoring || !tr.callbacks)
        return -1;
    int err = register_here(tr.monitoring, main_callbacks(), tr.callbacks);
    if (err == -2) /* not ours: uninstall must not free it */
        Py_CLEAR(tr.monitoring);
    return err < 0 ? -1 : 0;
}

/* ---- subinterpreters (each has its own sys.monitoring) ----

 * Their callbacks run under another GIL than the one stop holds: each marks itself in
 * flight (a per-thread stripe of counters) and checks sub_open, so that once stop has
 * closed it and waited for the marks no subinterpreter thread touches a record or a
 * tracer table. A closed subinterpreter's callbacks remove themselves (it is the only
 * place code can run there). */
#define SUB_STRIPES 64
static atomic_int sub_open;
static struct {
    atomic_int n;
    char pad[64 - sizeof(atomic_int)];
} sub_inflight[SUB_STRIPES] __attribute__((aligned(64)));
static atomic_uint sub_next_stripe;
static __thread int sub_stripe = -1;
static atomic_ulong sub_attached, sub_attach_failed;

static inline int sub_enter(void)
{
    if (__builtin_expect(sub_stripe < 0, 0))
        sub_stripe = (int)(atomic_fetch_add(&sub_next_stripe, 1) % SUB_STRIPES);
    int i = sub_stripe;
    atomic_fetch_add(&sub_inflight[i].n, 1); /* seq_cst: pairs with close_subinterps */
    if (__builtin_expect(atomic_load(&sub_open), 1))
        return i;
    atomic_fetch_sub_explicit(&sub_inflight[i].n, 1, memory_order_release);
    return -1;
}

static inline void sub_leave(int i)
{
    atomic_fetch_sub_explicit(&sub_inflight[i].n, 1, memory_order_release);
}

/* sys.monitoring of the calling (sub)interpreter: borrowed, or NULL (none yet). */
static PyObject *here_monitoring(void)
{
    PyObject *m = PySys_GetObject("monitoring");
    if (!m)
        PyErr_Clear();
    return m;
}

/* In a subinterpreter whose session ended: take our callbacks out. */
static void sub_retire(void)
{
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyObject *m = here_monitoring();
    PyObject *r = m ? PyObject_CallMethod(m, "get_tool", "i", TOOL_ID) : NULL;
    if (r && PyUnicode_Check(r) && PyUnicode_CompareWithASCIIString(r, "giltracer") == 0) {
        Py_XDECREF(PyObject_CallMethod(m, "set_events", "ii", TOOL_ID, 0));
        Py_XDECREF(PyObject_CallMethod(m, "free_tool_id", "i", TOOL_ID));
        PyObject *d = PyInterpreterState_GetDict(PyInterpreterState_Get());
        if (d && PyDict_GetItemString(d, SUB_KEEP))
            PyDict_DelItemString(d, SUB_KEEP);
    }
    Py_XDECREF(r);
    PyErr_Clear();
    PyErr_Restore(et, ev, tb);
}

#define SUB_CB(name, inner)                                                                  \
    static PyObject *sub_##name(PyObject *self, PyObject *const *args, size_t nargsf,        \
                                PyObject *kw)                                                \
    {                                                                                        \
        int i = sub_enter();                                                                 \
        if (i < 0) {                                                                         \
            sub_retire();                                                                    \
            Py_RETURN_NONE;                                                                  \
        }                                                                                    \
        PyObject *r = inner(self, args, nargsf, kw);                                         \
        sub_leave(i);                                                                        \
        return r;                                                                            \
    }
SUB_CB(start, cb_start)
SUB_CB(return, cb_return)
SUB_CB(unwind, cb_unwind)
SUB_CB(call, cb_call)
SUB_CB(creturn, cb_creturn)
SUB_CB(craise, cb_craise)

static const vectorcallfunc sub_cb_funcs[] = {sub_start, sub_return, sub_unwind, sub_call, sub_creturn, sub_craise};

/* ---- free-threaded builds: the main interpreter's callbacks ----

 * No GIL keeps them out of stop: they mark themselves in flight on the same stripes
 * as a subinterpreter's (each thread its own cache line, no lock) and check ft_open,
 * so that once stop has closed it and waited for the marks no thread touches a record
 * or a tracer table. Closed, they record nothing (their removal is uninstall's). */
#ifdef Py_GIL_DISABLED
static atomic_int ft_open;

static inline int ft_enter(void)
{
    if (__builtin_expect(sub_stripe < 0, 0))
        sub_stripe = (int)(atomic_fetch_add(&sub_next_stripe, 1) % SUB_STRIPES);
    int i = sub_stripe;
    atomic_fetch_add(&sub_inflight[i].n, 1); /* seq_cst: pairs with close_subinterps */
    if (__builtin_expect(atomic_load(&ft_open), 1))
        return i;
    atomic_fetch_sub_explicit(&sub_inflight[i].n, 1, memory_order_release);
    return -1;
}

#define FT_CB(name, inner)                                                                   \
    static PyObject *ft_##name(PyObject *self, PyObject *const *args, size_t nargsf,         \
                               PyObject *kw)                                                 \
    {                                                                                        \
        int i = ft_enter();                                                                  \
        if (i < 0)                                                                           \
            Py_RETURN_NONE;                                                                  \
        PyObject *r = inner(self, args, nargsf, kw);                                         \
        sub_leave(i);                                                                        \
        return r;                                                                            \
    }
FT_CB(start, cb_start)
FT_CB(return, cb_return)
FT_CB(unwind, cb_unwind)
FT_CB(call, cb_call)
FT_CB(creturn, cb_creturn)
FT_CB(craise, cb_craise)

static const vectorcallfunc ft_cb_funcs[] = {ft_start, ft_return, ft_unwind, ft_call, ft_creturn, ft_craise};
#endif

static const vectorcallfunc *main_callbacks(void)
{
#ifdef Py_GIL_DISABLED
    return ft_cb_funcs;
#else
    return cb_funcs;
#endif
}

/* Register the callbacks `fns` in sys.monitoring `m` of the calling interpreter. 0, or
 * -1 with an exception set (-2: the tool id is another tool's, left alone). */
static int register_here(PyObject *m, const vectorcallfunc *fns, PyObject *keep)
{
    int err = -1;
    PyObject *events = NULL, *r = PyObject_CallMethod(m, "get_tool", "i", TOOL_ID);
    if (!r)
        return -1;
    if (PyUnicode_Check(r) && PyUnicode_CompareWithASCIIString(r, "giltracer") == 0) {
        Py_SETREF(r, PyObject_CallMethod(m, "free_tool_id", "i", TOOL_ID));
        if (!r)
            return -1;
        Py_SETREF(r, Py_NewRef(Py_None));
    }
    if (r != Py_None) {
        PyErr_Format(PyExc_RuntimeError,
                     "giltracer: sys.monitoring tool id %d (the profiler slot) is in use by "
                     "%R; stop that profiler first (cProfile/profile: disable(); another "
                     "tool: its own stop, or sys.monitoring.free_tool_id(%d) if nothing "
                     "uses it any more), or trace with functions=False (the GIL probe "
                     "needs no tool id)",
                     TOOL_ID, r, TOOL_ID);
        Py_DECREF(r);
        return -2;
    }
    Py_CLEAR(r);
    r = PyObject_CallMethod(m, "use_tool_id", "is", TOOL_ID, "giltracer");
    if (!r)
        goto cleanup;
    Py_CLEAR(r);
    events = PyObject_GetAttrString(m, "events");
    if (!events)
        goto cleanup;
    long mask = 0;
    for (int i = 0; i < NCB; i++) {
        if (cb_table[i].c && !tr.c_calls)
            continue;
        PyObject *ev = PyObject_GetAttrString(events, cb_table[i].event);
        if (!ev)
            goto cleanup;
        long bit = PyLong_AsLong(ev);
        Py_DECREF(ev);
        if (bit == -1 && PyErr_Occurred())
            goto cleanup;
        PyObject *fn = callback_new(fns[cb_table[i].cb]);
        if (!fn || (keep && PyList_Append(keep, fn) < 0)) {
            Py_XDECREF(fn);
            goto cleanup;
        }
        r = PyObject_CallMethod(m, "register_callback", "ilO", TOOL_ID, bit, fn);
        Py_DECREF(fn);
        if (!r)
            goto cleanup;
        Py_CLEAR(r);
        mask |= bit;
    }
    r = PyObject_CallMethod(m, "set_events", "il", TOOL_ID, mask);
    if (!r)
        goto cleanup;
    err = 0;
cleanup:
    Py_XDECREF(r);
    Py_XDECREF(events);
    return err;
}

int gt_tracer__attach_interp(void)
{
    if (!atomic_load(&sub_open) || !in_subinterp() || !Callback_Type.tp_dealloc)
        return 0;
    PyObject *m = here_monitoring();
    if (!m) /* still being created */
        return 0;
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyObject *d = PyInterpreterState_GetDict(PyInterpreterState_Get());
    PyObject *keep = PyList_New(0);
    int err = !d || !keep || PyDict_SetItemString(d, SUB_KEEP, keep) < 0 ? -1 : 0;
    Py_XDECREF(keep);
    if (err == 0)
        err = register_here(m, sub_cb_funcs, NULL);
    if (err < 0) {
        PyErr_Clear();
        atomic_fetch_add(&sub_attach_failed, 1);
    } else {
        atomic_fetch_add(&sub_attached, 1);
    }
    PyErr_Restore(et, ev, tb);
    return err < 0 ? -1 : 1;
}

/* No subinterpreter callback records from here on (called with the main GIL); on a
 * free-threaded build no callback at all. */
static void close_subinterps(void)
{
    atomic_store(&sub_open, 0);
#ifdef Py_GIL_DISABLED
    atomic_store(&ft_open, 0);
    /* Detached: a marked thread may wait for a stop-the-world (or a lock of a thread
     * that waits for one), which would wait for this thread forever. */
    Py_BEGIN_ALLOW_THREADS
#endif
    for (int i = 0; i < SUB_STRIPES; i++)
        while (atomic_load_explicit(&sub_inflight[i].n, memory_order_acquire))
            sched_yield();
#ifdef Py_GIL_DISABLED
    Py_END_ALLOW_THREADS
#endif
}

/* Leaves nothing behind for the id's next user: 3.14+ clear_tool_id() drops the
 * events and callbacks (and free_tool_id() calls it too); 3.12 and 3.13's
 * free_tool_id() keeps the callbacks registered, so they are unregistered one by
 * one (a later tool with this id that enabled an event it registered no callback
 * for would otherwise call ours). */
static int uninstall(void)
{
    if (!tr.monitoring)
        return 0;
    /* Every step is tried; the first failure (e.g. an audit hook's refusal) is reported,
     * and no Python is called with an exception pending. */
    PyObject *et = NULL, *ev = NULL, *tb = NULL;
#define KEEP_FIRST_ERROR()                                                                 \
    do {                                                                                   \
        if (!et)                                                                           \
            PyErr_Fetch(&et, &ev, &tb);                                                    \
        else                                                                               \
            PyErr_Clear();                                                                 \
    } while (0)
    PyObject *r = PyObject_CallMethod(tr.monitoring, "set_events", "ii", TOOL_ID, 0);
    if (!r)
        KEEP_FIRST_ERROR();
    Py_XDECREF(r);
    if (PyObject_HasAttrString(tr.monitoring, "clear_tool_id")) {
        r = PyObject_CallMethod(tr.monitoring, "clear_tool_id", "i", TOOL_ID);
        if (!r)
            KEEP_FIRST_ERROR();
        Py_XDECREF(r);
    } else {
        PyObject *events = PyObject_GetAttrString(tr.monitoring, "events");
        if (!events)
            KEEP_FIRST_ERROR();
        for (int i = 0; events && i < NCB; i++) {
            PyObject *evbit = PyObject_GetAttrString(events, cb_table[i].event);
            long bit = evbit ? PyLong_AsLong(evbit) : -1;
            Py_XDECREF(evbit);
            r = bit > 0 ? PyObject_CallMethod(tr.monitoring, "register_callback", "ilO",
                                              TOOL_ID, bit, Py_None)
                        : NULL;
            Py_XDECREF(r);
            if (!r) {
                KEEP_FIRST_ERROR();
                break; /* a refusal refuses them all */
            }
        }
        Py_XDECREF(events);
    }
    r = PyObject_CallMethod(tr.monitoring, "free_tool_id", "i", TOOL_ID);
    if (!r)
        KEEP_FIRST_ERROR();
    Py_XDECREF(r);
#undef KEEP_FIRST_ERROR
    Py_CLEAR(tr.callbacks);
    Py_CLEAR(tr.monitoring);
    if (!et)
        return 0;
    /* One RuntimeError that says what was left behind, caused by the first failure. */
    PyErr_NormalizeException(&et, &ev, &tb);
    if (tb && ev)
        PyException_SetTraceback(ev, tb);
    PyErr_Format(PyExc_RuntimeError,
                 "giltracer: could not remove the function tracer's sys.monitoring "
                 "callbacks (tool id %d): %S; they stay registered and record nothing",
                 TOOL_ID, ev ? ev : Py_None);
    PyObject *nt, *nv, *ntb;
    PyErr_Fetch(&nt, &nv, &ntb);
    PyErr_NormalizeException(&nt, &nv, &ntb);
    if (nv && ev)
        PyException_SetCause(nv, ev); /* steals ev */
    else
        Py_XDECREF(ev);
    Py_XDECREF(et);
    Py_XDECREF(tb);
    PyErr_Restore(nt, nv, ntb);
    return -1;
}

#endif /* GT_USE_MONITORING */

#if !GT_USE_MONITORING /* subinterpreters share the main GIL and are not traced */
int gt_tracer__attach_interp(void)
{
    return 0;
}

static void close_subinterps(void)
{
}
#endif

/* ------------------------------------------------------------------ new threads */

/* threading.setprofile() target: runs once in every threading.Thread started while
 * recording (from Thread._bootstrap_inner, when the thread is registered and named).
 * It notes the thread's name (threads that end before stop are otherwise nameless),
 * then either installs the C profile hook for the thread (3.9-3.11 with functions) or
 * removes itself. */
static PyObject *thread_bootstrap(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    struct gt_thread *t = gt_thread_current();
    if (t && tr.names) {
        PyObject *key = PyLong_FromLong(t->tid); /* t is not used after Python code ran */
        PyObject *threading = PyImport_ImportModule("threading");
        PyObject *cur = threading ? PyObject_CallMethod(threading, "current_thread", NULL) : NULL;
        PyObject *name = cur ? PyObject_GetAttrString(cur, "name") : NULL;
        if (!name || !key || !tr.names || PyDict_SetItem(tr.names, key, name) < 0)
            PyErr_Clear();
        Py_XDECREF(key);
        Py_XDECREF(name);
        Py_XDECREF(cur);
        Py_XDECREF(threading);
    }
#if !GT_USE_MONITORING
    if (tr.active) {
        uint64_t now = gt_ticks();
        uint64_t gen = atomic_load(&gt_registry_gen);
        PyThreadState *me = PyThreadState_Get();
        PyObject *slot = slot_new(me);
        if (!slot || _PyEval_SetProfile(me, profile_hook, slot) < 0) { /* takes its own ref */
            PyErr_Clear();
            tr.attach_failed++;
        }
        Py_XDECREF(slot);
        /* Python code may have run above (thread names, an audit hook) and let the GIL
         * go: the session may have ended and its records be freed. */
        t = tr.active && atomic_load(&gt_registry_gen) == gen ? gt_thread_current() : NULL;
        struct tr_state *s = t ? tr_get(t) : NULL;
        if (s && s->hooked_before_bootstrap) {
            /* Our hook (attached late) saw this thread from its start, up to the call
             * of sys.setprofile that put this function in its place: close that call. */
            if (tr.c_calls && nargs >= 3 && PyUnicode_Check(args[1]) &&
                PyUnicode_CompareWithASCIIString(args[1], "c_return") == 0)
                on_c(t, now, args[2], PyFrame_Check(args[0]) ? (PyFrameObject *)args[0] : NULL,
                     GT_CRETURN, 0);
        } else if (t && nargs >= 1 && PyFrame_Check(args[0])) {
            push_open_frames(t, (PyFrameObject *)args[0], now);
        }
    } else if (_PyEval_SetProfile(PyThreadState_Get(), NULL, NULL) < 0) {
        PyErr_Clear();
    }
#else
    (void)args;
    (void)nargs;
    PyEval_SetProfile(NULL, NULL);
#endif
    PyErr_Restore(et, ev, tb);
    Py_RETURN_NONE;
}

static PyMethodDef bootstrap_def = {"_giltracer_thread_bootstrap",
                                    (PyCFunction)(void (*)(void))thread_bootstrap,
                                    METH_FASTCALL, NULL};

static int threading_setprofile(PyObject *func)
{
    PyObject *threading = PyImport_ImportModule("threading");
    if (!threading)
        return -1;
    PyObject *r = PyObject_CallMethod(threading, "setprofile", "O", func);
    Py_DECREF(threading);
    if (!r)
        return -1;
    Py_DECREF(r);
    return 0;
}

static int watch_new_threads(void)
{
    PyObject *threading = PyImport_ImportModule("threading");
    if (!threading)
        return -1;
    Py_XSETREF(tr.saved_threading_hook, PyObject_GetAttrString(threading, "_profile_hook"));
    Py_DECREF(threading);
    if (!tr.saved_threading_hook) {
        PyErr_Clear();
        tr.saved_threading_hook = Py_NewRef(Py_None);
    }
    if (!tr.bootstrap && !(tr.bootstrap = PyCFunction_New(&bootstrap_def, NULL)))
        return -1;
    return threading_setprofile(tr.bootstrap);
}

static int unwatch_new_threads(void)
{
    int err = 0;
    if (tr.saved_threading_hook) {
        err = threading_setprofile(tr.saved_threading_hook);
        Py_CLEAR(tr.saved_threading_hook);
    }
    return err;
}

PyObject *gt_tracer__thread_names(void)
{
    return tr.names;
}

/* ------------------------------------------------------------------ lifecycle */

static PyObject *fs_patterns(PyObject *seq)
{
    if (!seq || seq == Py_None)
        return NULL;
    PyObject *out = PyList_New(0);
    PyObject *it = out ? PyObject_GetIter(seq) : NULL;
    PyObject *item;
    if (!it)
        goto fail;
    while ((item = PyIter_Next(it))) {
        PyObject *b = NULL;
        if (!PyUnicode_FSConverter(item, &b)) {
            Py_DECREF(item);
            goto fail;
        }
        Py_DECREF(item);
        if (PyList_Append(out, b) < 0) {
            Py_DECREF(b);
            goto fail;
        }
        Py_DECREF(b);
    }
    if (PyErr_Occurred())
        goto fail;
    Py_DECREF(it);
    return out;
fail:
    Py_XDECREF(it);
    Py_XDECREF(out);
    return NULL;
}

static void clear_options(void)
{
    Py_CLEAR(tr.include);
    Py_CLEAR(tr.exclude);
    Py_CLEAR(tr.own_dir);
    Py_CLEAR(tr.own_type);
}

/* Native thread id of a thread state (needs the threading list before 3.11). */
static int32_t tstate_tid(PyThreadState *ts, PyObject *threads)
{
#if PY_VERSION_HEX >= 0x030B0000
    (void)threads;
    return (int32_t)ts->native_thread_id;
#else
    if (!threads)
        return 0;
    Py_ssize_t n = PySequence_Size(threads);
    if (n < 0) { /* not a sequence: no thread is known by its ident */
        PyErr_Clear();
        return 0;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PySequence_GetItem(threads, i);
        unsigned long ident = 0;
        long native = 0;
        int service = 0; /* the optional third item: see gt_session__start */
        int ok = pair && PyArg_ParseTuple(pair, "kl|p", &ident, &native, &service);
        Py_XDECREF(pair);
        if (!ok) {
            PyErr_Clear();
            continue;
        }
        if (ident == ts->thread_id)
            return (int32_t)native;
    }
    return 0;
#endif
}

#ifdef Py_GIL_DISABLED
/* Internal but exported (Include/internal/pycore_pystate.h, 3.13+): every other thread
 * of the interpreter waits at its next safe point until the world starts again. */
extern void _PyEval_StopTheWorld(PyInterpreterState *interp);
extern void _PyEval_StartTheWorld(PyInterpreterState *interp);
#endif

/* The code objects of a thread's open frames, innermost first (new references). */
struct open_stack {
    int32_t tid;
    int n;
    PyCodeObject *code[512];
};

static int frames_of(PyThreadState *ts, struct open_stack *st)
{
    PyFrameObject *f = PyThreadState_GetFrame(ts); /* new ref */
    int n = 0;
    while (f) {
        if (n < (int)(sizeof(st->code) / sizeof(st->code[0])))
            st->code[n++] = PyFrame_GetCode(f); /* new reference */
        PyFrameObject *back = PyFrame_GetBack(f); /* new reference */
        Py_DECREF(f);
        f = back;
    }
    st->n = n;
    return n;
}

/* Register every thread of the interpreter and record the Python frames open in each
 * (`functions`) as calls at `ts`. The frames are read first, then recorded: on a
 * free-threaded build the other threads run, so they are read with the world stopped
 * (which takes no Python call: nothing in between may detach), and recorded into the
 * other threads' streams before install() lets those threads push there. 0, or -1
 * with an exception set (out of memory). */
static int open_frames_at_start(int functions, uint64_t ts_ticks, PyObject *threads)
{
    PyThreadState *me = PyThreadState_Get();
    size_t n = 0, cap = 0;
    struct open_stack *stacks = NULL;
    int32_t *tids = NULL;
    /* Thread ids first (tstate_tid may call Python before 3.11; never here on ft). */
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(me->interp); ts;
         ts = PyThreadState_Next(ts))
        cap++;
    cap += 16; /* threads started while we look */
    tids = calloc(cap, sizeof(*tids));
    if (!tids) {
        PyErr_NoMemory();
        return -1;
    }
    if (functions && !(stacks = malloc(cap * sizeof(*stacks)))) {
        free(tids);
        PyErr_NoMemory();
        return -1;
    }
#ifdef Py_GIL_DISABLED
    _PyEval_StopTheWorld(me->interp);
#endif
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(me->interp); ts && n < cap;
         ts = PyThreadState_Next(ts)) {
        int32_t tid = tstate_tid(ts, threads);
        if (tid <= 0)
            continue;
        tids[n] = tid;
        if (stacks)
            frames_of(ts, &stacks[n]);
        n++;
    }
#ifdef Py_GIL_DISABLED
    _PyEval_StartTheWorld(me->interp);
#endif
    for (size_t i = 0; i < n; i++) {
        struct gt_thread *t = gt_registry__register(tids[i], GT_THREAD_EXISTED_AT_START);
        if (stacks)
            record_open_frames(t, stacks[i].code, stacks[i].n, ts_ticks);
    }
    free(stacks);
    free(tids);
    return 0;
}

int gt_tracer__start(const struct gt_tracer_opts *o, uint64_t start_ticks, PyObject *threads)
{
    if (tr.active) {
        PyErr_SetString(PyExc_RuntimeError, "giltracer: the tracer is already running");
        return -1;
    }
    tr.c_calls = o->c_calls;
    tr.include_matched = 0;
    tr.include_unmatched[0] = '\0';
    tr.max_depth = o->max_depth > 0 ? o->max_depth : 0;
    tr.start_ticks = start_ticks;
    tr.include = fs_patterns(o->include);
    if (!tr.include && PyErr_Occurred())
        goto fail;
    tr.exclude = fs_patterns(o->exclude);
    if (!tr.exclude && PyErr_Occurred())
        goto fail;
    if (o->own_dir && o->own_dir != Py_None) {
        if (!PyUnicode_FSConverter(o->own_dir, &tr.own_dir))
            goto fail;
    } else {
        tr.own_dir = PyBytes_FromString("");
        if (!tr.own_dir)
            goto fail;
    }
    tr.own_type = (PyTypeObject *)Py_XNewRef((PyObject *)o->own_type);

    /* Frames already open in every thread become calls at the session start, so
     * returns that happen later nest correctly (seed 000's incomplete events). */
    if (open_frames_at_start(o->functions, start_ticks, threads) < 0)
        goto fail;
    Py_XSETREF(tr.names, PyDict_New());
    if (!tr.names || watch_new_threads() < 0)
        goto fail;
    tr.watching = 1;
    tr.functions = o->functions;
#ifdef Py_GIL_DISABLED
    /* Other threads run on while install() turns the events on: they record from then. */
    __atomic_store_n(&tr.active, o->functions, __ATOMIC_RELAXED);
    atomic_store(&ft_open, o->functions);
#endif
    if (o->functions && install() < 0) {
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
#ifdef Py_GIL_DISABLED
        close_subinterps();
        __atomic_store_n(&tr.active, 0, __ATOMIC_RELAXED);
#endif
        uninstall();
        unwatch_new_threads();
        tr.watching = 0;
        PyErr_Clear();
        PyErr_Restore(et, ev, tb);
        goto fail;
    }
    __atomic_store_n(&tr.active, o->functions, __ATOMIC_RELAXED);
#if GT_USE_MONITORING
    atomic_store(&sub_attached, 0);
    atomic_store(&sub_attach_failed, 0);
    atomic_store(&sub_open, o->functions);
#endif
    return 0;
fail:
    clear_options();
    return -1;
}

/* The include globs, quoted, into tr.include_unmatched (for the note). */
static void note_unmatched_include(void)
{
    size_t len = sizeof(tr.include_unmatched), n = 0;
    Py_ssize_t count = PyList_GET_SIZE(tr.include);
    n += (size_t)snprintf(tr.include_unmatched, len, "[");
    for (Py_ssize_t i = 0; i < count && n < len; i++)
        n += (size_t)snprintf(tr.include_unmatched + n, len - n, "%s'%s'", i ? ", " : "",
                              PyBytes_AS_STRING(PyList_GET_ITEM(tr.include, i)));
    if (n < len)
        snprintf(tr.include_unmatched + n, len - n, "]");
}

int gt_tracer__stop(void)
{
    int err = 0;
    close_subinterps();
    if (tr.active && tr.include && !tr.include_matched)
        note_unmatched_include();
    if (tr.active) {
        __atomic_store_n(&tr.active, 0, __ATOMIC_RELAXED);
        err = uninstall();
    }
    if (tr.watching) {
        tr.watching = 0;
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb); /* the first error is the one reported */
        if (unwatch_new_threads() < 0) {
            if (err == 0)
                PyErr_Fetch(&et, &ev, &tb);
            else
                PyErr_Clear();
            err = -1;
        }
        PyErr_Restore(et, ev, tb);
    }
    clear_options();
    return err;
}

void gt_tracer__after_fork_child(void)
{
#if GT_USE_MONITORING
    /* Marks of subinterpreter threads caught in a callback by fork() stay set here,
     * where those threads do not exist. */
    atomic_store(&sub_open, 0);
    for (int i = 0; i < SUB_STRIPES; i++)
        atomic_store(&sub_inflight[i].n, 0);
#endif
    /* Only the forking thread survives; it still carries the parent's hooks. */
    if (tr.active || tr.watching) {
        if (gt_tracer__stop() < 0)
            PyErr_Clear();
    }
}

int gt_tracer__untraced_note(char *buf, size_t len)
{
    if (!len)
        return 0;
    buf[0] = '\0';
#if !GT_USE_MONITORING /* sys.monitoring sees every thread, and shares with no profiler */
    if (tr.attached_running)
        gt_note__add(buf, len, "%llu thread(s) started by C code ran Python code before the "
                 "function tracer could attach to them: their first calls are missing",
                 (unsigned long long)tr.attached_running);
    if (tr.attach_failed)
        gt_note__add(buf, len, "%llu thread(s) could not be given the function tracer (out of "
                 "memory, or an audit hook refused): their calls are missing",
                 (unsigned long long)tr.attach_failed);
    if (tr.paused)
        gt_note__add(buf, len, "%s was profiling %llu thread(s) when the trace started: it was "
                 "paused during the trace (it missed those calls) and resumed after",
                 tr.paused_by, (unsigned long long)tr.paused);
    if (tr.displaced) {
        struct gt_clock_fit fit;
        gt_clock__fit(&fit);
        double ms = (double)(gt_clock__to_ns(&fit, tr.displaced_ticks) -
                             gt_clock__to_ns(&fit, tr.start_ticks)) / 1e6;
        gt_note__add(buf, len, "%s replaced the function tracer on %llu thread(s) during the "
                 "trace (the first %.1f ms after start): their calls from then on are "
                 "missing%s", tr.displaced_by, (unsigned long long)tr.displaced, ms,
                 tr.left_running ? " (that profiler still ran at stop and was left running)" : "");
    }
#endif
    if (tr.include_unmatched[0])
        gt_note__add(buf, len, "include=%s matched no function and no file: nothing was recorded",
                 tr.include_unmatched);
    return buf[0] != '\0';
}

void gt_tracer__subinterp_counts(unsigned long *attached, unsigned long *failed)
{
#if GT_USE_MONITORING
    *attached = atomic_load(&sub_attached);
    *failed = atomic_load(&sub_attach_failed);
#else
    *attached = *failed = 0;
#endif
}

int gt_tracer__active(void)
{
    return tr.active;
}

const char *gt_tracer__mechanism(void)
{
    return GT_USE_MONITORING ? "sys.monitoring" : "PyEval_SetProfile";
}

/* ------------------------------------------------------------------ collect */

static PyObject *entry_name(const struct tr_entry *e, PyObject **file, int *line)
{
    *file = NULL;
    *line = 0;
    if (e->sname) {
        *file = PyUnicode_DecodeFSDefault(e->sfile ? e->sfile : "");
        if (!*file)
            PyErr_Clear();
        *line = (int)e->sline;
        return PyUnicode_FromString(e->sname);
    }
    if (e->kind == ENTRY_CODE) {
        PyCodeObject *co = (PyCodeObject *)e->obj;
        *file = Py_NewRef(co->co_filename);
        *line = co->co_firstlineno;
#if PY_VERSION_HEX >= 0x030B0000
        return Py_NewRef(co->co_qualname);
#else
        return Py_NewRef(co->co_name);
#endif
    }
    PyObject *owner = e->obj;
    if (owner && PyType_Check(owner))
        return PyUnicode_FromFormat("%s.%s", ((PyTypeObject *)owner)->tp_name, e->cname);
    if (owner && PyUnicode_Check(owner) &&
        PyUnicode_CompareWithASCIIString(owner, "builtins") != 0)
        return PyUnicode_FromFormat("%U.%s", owner, e->cname);
    return PyUnicode_FromString(e->cname);
}

static const char *utf8_or(PyObject *s, Py_ssize_t *len, const char *dflt)
{
    const char *p = s ? PyUnicode_AsUTF8AndSize(s, len) : NULL;
    if (!p) {
        PyErr_Clear();
        *len = (Py_ssize_t)strlen(dflt);
        return dflt;
    }
    return p;
}

struct gkey {
    void *key;
    uint32_t gid;
};

int gt_tracer__collect(struct gt_thread *threads, PyObject *file_labels, struct gt_functable *out)
{
    int err = -1;
    struct gkey *table = NULL;
    PyObject *names = NULL, *files = NULL;
    uint32_t cap = 1024, nglobal = 0;
    size_t arena_len = 0;
    memset(out, 0, sizeof(*out));

    for (struct gt_thread *t = threads; t; t = t->next) {
        struct tr_state *s = t->tracer_state;
        if (s)
            while (cap < 2 * (s->nentries + nglobal + 1))
                cap *= 2;
    }
    /* Upper bound on unique functions: the sum of per-thread entries. */
    size_t total = 0;
    for (struct gt_thread *t = threads; t; t = t->next)
        if (t->tracer_state)
            total += ((struct tr_state *)t->tracer_state)->nentries;
    while (cap < 2 * total + 2)
        cap *= 2;
    table = calloc(cap, sizeof(*table));
    names = PyList_New(0);
    files = PyList_New(0);
    out->funcs = calloc(total ? total : 1, sizeof(*out->funcs));
    if (!table || !names || !files || !out->funcs) {
        PyErr_NoMemory();
        goto cleanup;
    }
    for (struct gt_thread *t = threads; t; t = t->next) {
        struct tr_state *s = t->tracer_state;
        if (!s)
            continue;
        s->map = malloc((s->nentries ? s->nentries : 1) * sizeof(*s->map));
        if (!s->map) {
            PyErr_NoMemory();
            goto cleanup;
        }
        s->nmap = s->nentries;
        for (uint32_t i = 0; i < s->nentries; i++) {
            struct tr_entry *e = &s->entries[i];
            if (e->excluded) {
                s->map[i] = GT_NO_FUNC;
                continue;
            }
            uint32_t j = slot_of(e->key, cap - 1);
            while (table[j].key && table[j].key != e->key)
                j = (j + 1) & (cap - 1);
            if (!table[j].key) {
                PyObject *file = NULL;
                int line = 0;
                PyObject *name = entry_name(e, &file, &line);
                if (!name) {
                    PyErr_Clear();
                    name = PyUnicode_FromString("?");
                    if (!name)
                        goto cleanup;
                }
                if (!file)
                    file = PyUnicode_FromString("");
                if (file && file_labels) { /* e.g. a notebook cell's file -> "In [5]" */
                    PyObject *label = PyDict_GetItemWithError(file_labels, file);
                    if (label && PyUnicode_Check(label)) {
                        Py_INCREF(label);
                        Py_DECREF(file);
                        file = label;
                    } else if (!label) {
                        PyErr_Clear();
                    }
                }
                if (!file || PyList_Append(names, name) < 0 || PyList_Append(files, file) < 0) {
                    Py_DECREF(name);
                    Py_XDECREF(file);
                    goto cleanup;
                }
                Py_DECREF(name);
                Py_DECREF(file);
                table[j].key = e->key;
                table[j].gid = nglobal;
                out->funcs[nglobal].line = (uint32_t)line;
                out->funcs[nglobal].flags = e->kind == ENTRY_CFUNC ? GT_FUNC_C : 0;
                nglobal++;
            }
            s->map[i] = table[j].gid;
        }
    }
    /* Copy the strings into one arena owned by the table. */
    for (uint32_t i = 0; i < nglobal; i++) {
        Py_ssize_t a, b;
        utf8_or(PyList_GET_ITEM(names, i), &a, "?");
        utf8_or(PyList_GET_ITEM(files, i), &b, "");
        arena_len += (size_t)a + (size_t)b + 2;
    }
    out->arena = malloc(arena_len ? arena_len : 1);
    if (!out->arena) {
        PyErr_NoMemory();
        goto cleanup;
    }
    char *p = out->arena;
    for (uint32_t i = 0; i < nglobal; i++) {
        Py_ssize_t a, b;
        const char *n = utf8_or(PyList_GET_ITEM(names, i), &a, "?");
        const char *f = utf8_or(PyList_GET_ITEM(files, i), &b, "");
        memcpy(p, n, (size_t)a);
        p[a] = '\0';
        out->funcs[i].name = p;
        p += a + 1;
        memcpy(p, f, (size_t)b);
        p[b] = '\0';
        out->funcs[i].file = p;
        p += b + 1;
    }
    out->n = nglobal;
    err = 0;
cleanup:
    /* Every reference the tracer held goes now, success or not. */
    for (struct gt_thread *t = threads; t; t = t->next) {
        struct tr_state *s = t->tracer_state;
        if (!s)
            continue;
        for (uint32_t i = 0; i < s->nentries; i++) {
            Py_CLEAR(s->entries[i].obj);
            Py_CLEAR(s->entries[i].keep);
        }
    }
    free(table);
    Py_XDECREF(names);
    Py_XDECREF(files);
    if (err < 0)
        gt_functable__free(out);
    return err;
}

const uint32_t *gt_tracer__func_map(const struct gt_thread *t, size_t *len)
{
    const struct tr_state *s = t->tracer_state;
    *len = s && s->map ? s->nmap : 0;
    return s ? s->map : NULL;
}

void gt_tracer__free_state(struct gt_thread *t)
{
    struct tr_state *s = t->tracer_state;
    if (!s)
        return;
    for (uint32_t i = 0; i < s->nentries; i++) {
        Py_XDECREF(s->entries[i].obj);
        Py_XDECREF(s->entries[i].keep);
        free(s->entries[i].sname);
        free(s->entries[i].sfile);
    }
    free(s->keys);
    free(s->vals);
    free(s->entries);
    free(s->map);
    free(s);
    t->tracer_state = NULL;
}

void gt_functable__free(struct gt_functable *ft)
{
    if (!ft)
        return;
    free(ft->funcs);
    free(ft->arena);
    memset(ft, 0, sizeof(*ft));
}

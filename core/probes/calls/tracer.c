/* SPDX-License-Identifier: MIT */
/* The function tracer (see tracer.h). The hot path: check the hook's generation, read
 * the clock, find the thread's record (the hook's slot, or TLS), look the code object
 * up in the thread's intern table, push 8 bytes. No allocation, no Python call, no
 * exception state touched.
 *
 * This file is the recorder every hook API shares (the per-thread intern tables, the
 * recording, start/stop, collect); each hook API is a file included below, so that its
 * hot path inlines the recorder's: profile_hook.inc (3.9-3.11, PyEval_SetProfile),
 * monitoring.inc (3.12+, sys.monitoring) with free_threaded.inc (Py_GIL_DISABLED). */
#include "tracer.h"
#include "heads.h"

#include <errno.h>
#include <fnmatch.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <frameobject.h>
#include <stdlib.h>
#include <string.h>

#include "gt_clock.h"
#include "note.h"
#include "registry.h"

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
    uint32_t *sstack; /* sampling: the thread's last sampled stack, outermost first */
    uint32_t sdepth, scap;
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
    int tool_id;          /* the sys.monitoring tool id held (monitoring.inc), or -1 */
    PyObject *use_tool_id; /* strong: sys.monitoring.use_tool_id while ours stands in */
    PyObject *use_tool_id_hook; /* strong: ours (a program asking for our id gets it) */
    char tools_taken[200]; /* no tool id was free at start: who held them */
    int stepped_aside;     /* the program took our id and no other was free */
    uint64_t stepped_aside_ticks;
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
    int sample;                     /* sampling mode: gt_tracer__sample() records stacks */
    PyObject *start_threads;        /* strong, sampling before 3.11: start()'s thread list */
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

/* Entry `fid`, made without references past the call budget, named by copy (its calls
 * are counted in the aggregate's call tree; the code object may go, its name stays). */
static void tr_name_unref(struct tr_state *s, uint32_t fid, const char *name, const char *file,
                          uint32_t line)
{
    if (fid & FID_EXCLUDED)
        return;
    tr_name_entry(s, fid, name, file, line);
    s->entries[fid & ~FID_FLAGS].excluded = 0;
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
    if (t->calls.refused_at) {
        /* Past the budget its calls go to the aggregate's call tree: named by copy. */
        fid = tr_add(s, code, NULL, NULL, NULL, ENTRY_CODE, flags | FID_UNREF);
#if PY_VERSION_HEX >= 0x030B0000
        tr_name_unref(s, fid, utf8_or_empty(code->co_qualname), utf8_or_empty(code->co_filename),
                      (uint32_t)code->co_firstlineno);
#else
        tr_name_unref(s, fid, utf8_or_empty(code->co_name), utf8_or_empty(code->co_filename),
                      (uint32_t)code->co_firstlineno);
#endif
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
    const int refused = t->calls.refused_at != 0;
    int sub = !refused && in_subinterp();
    char sname[256];
    if (sub || refused)
        c_name(owner, ml->ml_name, sname, sizeof(sname));
    if (sub && keep)
        sub_keep(keep);
    if (refused || sub) {
        Py_XDECREF(owner);
        Py_XDECREF(keep);
        owner = keep = NULL;
        if (!sub)
            flags |= FID_UNREF;
    }
    uint32_t fid = tr_add(s, ml, owner, keep, ml->ml_name, ENTRY_CFUNC, flags);
    if (sub)
        tr_name_entry(s, fid, sname, "", 0);
    else if (refused)
        tr_name_unref(s, fid, sname, "", 0);
    PyErr_Restore(et, ev, tb);
    return fid;
}

/* ------------------------------------------------------------------ recording */

/* An event of a function that has flags: excluded ones are not events; FID_UNREF ones
 * (first seen past the budget) go to the full call stream, which hands them to its
 * overflow sink (the aggregate's call tree). */
static __attribute__((noinline, cold)) void record_flagged(struct gt_thread *t, uint64_t ts,
                                                           uint32_t fid, uint32_t kind, int entering)
{
    if (fid & FID_EXCLUDED)
        return;
    if (tr.max_depth) {
        int d = entering ? ++t->depth : t->depth--;
        if (d > tr.max_depth)
            return;
    }
    gt_stream__push_call(&t->calls, ts, fid & ~FID_FLAGS, kind);
}

static inline void record(struct gt_thread *t, uint64_t ts, uint32_t fid, uint32_t kind,
                          int entering)
{
    if (__builtin_expect(fid & FID_FLAGS, 0)) {
        record_flagged(t, ts, fid, kind, entering);
        return;
    }
    if (tr.max_depth) {
        int d = entering ? ++t->depth : t->depth--;
        if (d > tr.max_depth)
            return;
    }
    gt_stream__push_call(&t->calls, ts, fid, kind);
}

/* The id of `code` in the thread's table (interned the first time it is seen). */
static inline __attribute__((always_inline)) uint32_t code_fid(struct tr_state *s,
                                                               struct gt_thread *t,
                                                               PyCodeObject *code)
{
    uint32_t fid;
    if (__builtin_expect(!tr_find(s, code, &fid), 0))
        fid = tr_insert_code(s, t, code);
    return fid;
}

/* The thread's tracer state, or NULL (no thread, or a thread the tracer has not set up). */
static inline __attribute__((always_inline)) struct tr_state *state_of(struct gt_thread *t)
{
    return __builtin_expect(t != NULL, 1) ? tr_get(t) : NULL;
}

static inline __attribute__((always_inline)) void on_py(struct gt_thread *t, uint64_t ts, PyCodeObject *code, uint32_t kind,
                         int entering)
{
    struct tr_state *s = state_of(t);
    if (__builtin_expect(!s, 0))
        return;
    record(t, ts, code_fid(s, t, code), kind, entering);
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
    struct tr_state *s = state_of(t);
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
    struct tr_state *s = state_of(t);
    for (int i = n - 1; i >= 0; i--) {
        if (s) {
            uint32_t fid = code_fid(s, t, stack[i]);
            /* Not counted in t->depth: max_depth is relative to where tracing began
             * (a notebook cell already runs 30-40 frames deep). Their returns take the
             * depth below 0, so they are always recorded. */
            if (!(fid & FID_EXCLUDED))
                gt_stream__push_call(&t->calls, ts, fid & ~FID_FLAGS, GT_CALL | GT_CALL_OPEN_AT_START);
        }
        Py_DECREF(stack[i]);
    }
}

/* Sampling: make the thread's recorded stack the one open now (innermost frame
 * `innermost`, NULL for none) at `ts`: return from the frames the last sample had that
 * are gone (innermost first), call the new ones (outermost first, `flag` or-ed in).
 * Each stack then lasts from its sample to the next: a span is a run of samples.
 * Excluded functions (giltracer's own, include/exclude) and those past the budget are
 * left out of the stack. The sampler thread is the call stream's only producer (no
 * function tracer runs), with the GIL held. */
static void sample_codes(struct gt_thread *t, PyCodeObject **codes, int n, uint64_t ts,
                         uint32_t flag);

static void sample_frames(struct gt_thread *t, PyFrameObject *innermost, uint64_t ts,
                          uint32_t flag)
{
    PyCodeObject *codes[512];
    int n = 0;
    PyFrameObject *f = innermost;
    Py_XINCREF(f);
    while (f) {
        if (n < (int)(sizeof(codes) / sizeof(codes[0])))
            codes[n++] = PyFrame_GetCode(f); /* new reference */
        PyFrameObject *back = PyFrame_GetBack(f); /* new reference */
        Py_DECREF(f);
        f = back;
    }
    sample_codes(t, codes, n, ts, flag);
}

/* sample_frames' step for a stack already read: `codes` innermost first, n new
 * references, released here. */
static void sample_codes(struct gt_thread *t, PyCodeObject **codes, int n, uint64_t ts,
                         uint32_t flag)
{
    struct tr_state *s = state_of(t);
    uint32_t now[512];
    uint32_t depth = 0;
    for (int i = n - 1; i >= 0; i--) {
        if (s) {
            uint32_t fid = code_fid(s, t, codes[i]);
            if (!(fid & FID_FLAGS))
                now[depth++] = fid;
        }
        Py_DECREF(codes[i]);
    }
    if (!s)
        return;
    if (depth > s->scap) {
        uint32_t *grown = realloc(s->sstack, depth * sizeof(*grown));
        if (!grown)
            return; /* the last stack stays: this sample is lost */
        s->sstack = grown;
        s->scap = depth;
    }
    uint32_t same = 0;
    while (same < depth && same < s->sdepth && now[same] == s->sstack[same])
        same++;
    for (uint32_t i = s->sdepth; i > same; i--)
        gt_stream__push_call(&t->calls, ts, s->sstack[i - 1], GT_RETURN);
    for (uint32_t i = same; i < depth; i++)
        gt_stream__push_call(&t->calls, ts, now[i], GT_CALL | flag);
    if (depth) /* (sstack is NULL before the first stack with a frame) */
        memcpy(s->sstack, now, depth * sizeof(*now));
    s->sdepth = depth;
}

/* ------------------------------------------------------------------ hook APIs */
#if GT_USE_MONITORING
#include "monitoring.inc" /* 3.12+: sys.monitoring (free_threaded.inc inside) */
#else
#include "profile_hook.inc" /* 3.9-3.11: PyEval_SetProfile */
#endif

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
#ifdef Py_GIL_DISABLED
    /* The record and the names dict are read marked in flight, as a callback does (stop
     * frees the records after waiting for the marks); no Python runs while marked. */
    int mark = ft_enter();
    struct gt_thread *t = mark >= 0 ? gt_thread_current() : NULL;
    int32_t tid = t ? t->tid : 0;
    PyObject *names = t ? Py_XNewRef(tr.names) : NULL;
    if (mark >= 0)
        sub_leave(mark);
#else
    struct gt_thread *t = gt_thread_current();
    int32_t tid = t ? t->tid : 0;
    PyObject *names = t ? Py_XNewRef(tr.names) : NULL;
#endif
    if (names) {
        PyObject *key = PyLong_FromLong(tid); /* t is not used after Python code ran */
        PyObject *threading = PyImport_ImportModule("threading");
        PyObject *cur = threading ? PyObject_CallMethod(threading, "current_thread", NULL) : NULL;
        PyObject *name = cur ? PyObject_GetAttrString(cur, "name") : NULL;
        if (!name || !key || PyDict_SetItem(names, key, name) < 0)
            PyErr_Clear();
        Py_XDECREF(key);
        Py_XDECREF(name);
        Py_XDECREF(cur);
        Py_XDECREF(threading);
        Py_DECREF(names);
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

/* Is `f` giltracer's threading.setprofile() target (this module's, or a copy's)? */
static int is_bootstrap(PyObject *f)
{
    return f == tr.bootstrap ||
           (PyCFunction_Check(f) &&
            strcmp(((PyCFunctionObject *)f)->m_ml->ml_name, bootstrap_def.ml_name) == 0);
}

static int watch_new_threads(void)
{
    PyObject *threading = PyImport_ImportModule("threading");
    if (!threading)
        return -1;
    PyObject *hook = PyObject_GetAttrString(threading, "_profile_hook");
    Py_DECREF(threading);
    if (!hook) {
        PyErr_Clear();
        hook = Py_NewRef(Py_None);
    }
    /* Our own bootstrap (left by a session that could not remove it) is never the
     * program's hook to restore: the one saved before it is, if known. */
    if (is_bootstrap(hook)) {
        Py_DECREF(hook);
        hook = tr.saved_threading_hook ? Py_NewRef(tr.saved_threading_hook) : Py_NewRef(Py_None);
    }
    Py_XSETREF(tr.saved_threading_hook, hook);
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
    Py_CLEAR(tr.start_threads);
    tr.sample = 0;
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
struct open_walk {
    PyObject *threads;
    size_t n, cap;
    int32_t *tids;
    struct open_stack *stacks;
};

static void count_one(PyThreadState *ts, void *ctx)
{
    (void)ts;
    ((struct open_walk *)ctx)->cap++;
}

static void open_one(PyThreadState *ts, void *ctx)
{
    struct open_walk *w = ctx;
    if (w->n == w->cap)
        return;
    int32_t tid = tstate_tid(ts, w->threads);
    if (tid <= 0)
        return;
    w->tids[w->n] = tid;
    if (w->stacks)
        frames_of(ts, &w->stacks[w->n]);
    w->n++;
}

static int open_frames_at_start(int functions, int sample, uint64_t ts_ticks, PyObject *threads)
{
    PyThreadState *me = PyThreadState_Get();
    /* The list under the runtime's lock (heads.h): a thread without this GIL may add
     * its thread state to it, or free one, meanwhile. */
    struct open_walk w = {.threads = threads};
    /* Thread ids first (tstate_tid may call Python before 3.11; never here on ft). */
    gt_heads__each_thread(me->interp, count_one, &w);
    w.cap += 16; /* threads started while we look */
    w.tids = calloc(w.cap, sizeof(*w.tids));
    if (!w.tids) {
        PyErr_NoMemory();
        return -1;
    }
    if ((functions || sample) && !(w.stacks = malloc(w.cap * sizeof(*w.stacks)))) {
        free(w.tids);
        PyErr_NoMemory();
        return -1;
    }
#ifdef Py_GIL_DISABLED
    _PyEval_StopTheWorld(me->interp);
#endif
    gt_heads__each_thread(me->interp, open_one, &w);
#ifdef Py_GIL_DISABLED
    _PyEval_StartTheWorld(me->interp);
#endif
    size_t n = w.n;
    int32_t *tids = w.tids;
    struct open_stack *stacks = w.stacks;
    for (size_t i = 0; i < n; i++) {
        struct gt_thread *t = gt_registry__register(tids[i], GT_THREAD_EXISTED_AT_START);
        if (stacks && sample) /* the sampler's first stack */
            sample_codes(t, stacks[i].code, stacks[i].n, ts_ticks, GT_CALL_OPEN_AT_START);
        else if (stacks)
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
    tr.sample = o->sample && !o->functions;
    if (tr.sample && threads)
        tr.start_threads = Py_NewRef(threads);

    /* Frames already open in every thread become calls at the session start, so
     * returns that happen later nest correctly (seed 000's incomplete events). */
    if (open_frames_at_start(o->functions, o->sample, start_ticks, threads) < 0)
        goto fail;
    Py_XSETREF(tr.names, PyDict_New());
    if (!tr.names || watch_new_threads() < 0)
        goto fail;
    tr.watching = 1;
    tr.functions = o->functions;
#ifdef Py_GIL_DISABLED
    /* Other threads run on while install() turns the events on: they record from then. */
    __atomic_store_n(&tr.active, o->functions, __ATOMIC_RELAXED);
    atomic_store(&ft_open, 1); /* also for thread_bootstrap, which names threads */
#endif
#if GT_USE_MONITORING
    tr.tool_id = -1;
    tr.tools_taken[0] = '\0';
    tr.stepped_aside = 0;
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

/* Milliseconds from the trace's start to `ticks`, for the notes. */
static double ms_after_start(uint64_t ticks)
{
    struct gt_clock_fit fit;
    gt_clock__fit(&fit);
    return (double)(gt_clock__to_ns(&fit, ticks) - gt_clock__to_ns(&fit, tr.start_ticks)) / 1e6;
}

int gt_tracer__untraced_note(char *buf, size_t len)
{
    if (!len)
        return 0;
    buf[0] = '\0';
#if !GT_USE_MONITORING /* sys.monitoring sees every thread, its tools run side by side */
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
        double ms = ms_after_start(tr.displaced_ticks);
        gt_note__add(buf, len, "%s replaced the function tracer on %llu thread(s) during the "
                 "trace (the first %.1f ms after start): their calls from then on are "
                 "missing%s", tr.displaced_by, (unsigned long long)tr.displaced, ms,
                 tr.left_running ? " (that profiler still ran at stop and was left running)" : "");
    }
#else
    if (tr.tools_taken[0])
        gt_note__add(buf, len, "every sys.monitoring tool id was in use when the trace started "
                     "(%s): no call was recorded (the GIL was probed); free one to trace calls",
                     tr.tools_taken);
    if (tr.stepped_aside) {
        double ms = ms_after_start(tr.stepped_aside_ticks);
        gt_note__add(buf, len, "the traced program asked for the sys.monitoring tool id the "
                     "function tracer held and no other was free: the tracer gave it up %.1f ms "
                     "after start, calls from then on are missing", ms);
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

static int collect(struct gt_thread *threads, PyObject *file_labels, struct gt_functable *out,
                   int final);

int gt_tracer__collect(struct gt_thread *threads, PyObject *file_labels, struct gt_functable *out)
{
    return collect(threads, file_labels, out, 1);
}

int gt_tracer__collect_live(struct gt_thread *threads, struct gt_functable *out)
{
    return collect(threads, NULL, out, 0);
}

/* The global table: a hash of entry keys to global ids, the names and files in id order
 * (Python lists until the arena takes their bytes), and the table being filled. */
struct collect_ctx {
    struct gkey *table;
    uint32_t cap; /* a power of two, at least twice the entries: probing ends */
    uint32_t nglobal;
    size_t total; /* upper bound on unique functions: the sum of per-thread entries */
    PyObject *names, *files;
    PyObject *file_labels;
    struct gt_functable *out;
};

static size_t count_entries(struct gt_thread *threads)
{
    size_t total = 0;
    for (struct gt_thread *t = threads; t; t = t->next)
        if (t->tracer_state)
            total += ((struct tr_state *)t->tracer_state)->nentries;
    return total;
}

/* A notebook cell's file becomes its label, e.g. "In [5]". Steals file; returns new
 * reference (the label, or file). */
static PyObject *label_file(PyObject *file, PyObject *file_labels)
{
    if (!file || !file_labels)
        return file;
    PyObject *label = PyDict_GetItemWithError(file_labels, file);
    if (label && PyUnicode_Check(label)) {
        Py_INCREF(label);
        Py_DECREF(file);
        return label;
    }
    if (!label)
        PyErr_Clear();
    return file;
}

/* Appends entry e's name and file to the lists and gives it the next global id. */
static int add_function(struct collect_ctx *c, const struct tr_entry *e)
{
    /* Read before entry_name runs Python, which may move the entries. */
    uint32_t flags = e->kind == ENTRY_CFUNC ? GT_FUNC_C : 0;
    PyObject *file = NULL;
    int line = 0;
    PyObject *name = entry_name(e, &file, &line);
    if (!name) {
        PyErr_Clear();
        name = PyUnicode_FromString("?");
        if (!name)
            return -1;
    }
    if (!file)
        file = PyUnicode_FromString("");
    file = label_file(file, c->file_labels);
    if (!file || PyList_Append(c->names, name) < 0 || PyList_Append(c->files, file) < 0) {
        Py_DECREF(name);
        Py_XDECREF(file);
        return -1;
    }
    Py_DECREF(name);
    Py_DECREF(file);
    c->out->funcs[c->nglobal].line = (uint32_t)line;
    c->out->funcs[c->nglobal].flags = flags;
    return 0;
}

/* Builds s->map: each of the thread's entries to its global id, adding the new ones. */
static int map_thread(struct collect_ctx *c, struct tr_state *s)
{
    uint32_t mask = c->cap - 1;
    free(s->map); /* a live collect's, before this one */
    s->map = malloc((s->nentries ? s->nentries : 1) * sizeof(*s->map));
    if (!s->map) {
        PyErr_NoMemory();
        return -1;
    }
    s->nmap = s->nentries;
    /* (A live collect runs Python, e.g. a finalizer, which the tracer records: the
     * entries may grow, and move, meanwhile. The map covers those there were.) */
    for (uint32_t i = 0; i < s->nmap; i++) {
        struct tr_entry *e = &s->entries[i];
        if (e->excluded || c->nglobal == c->total) {
            s->map[i] = GT_NO_FUNC;
            continue;
        }
        uint32_t j = slot_of(e->key, mask);
        while (c->table[j].key && c->table[j].key != e->key)
            j = (j + 1) & mask;
        if (!c->table[j].key) {
            if (add_function(c, e) < 0)
                return -1;
            e = &s->entries[i];
            c->table[j].key = e->key;
            c->table[j].gid = c->nglobal++;
        }
        s->map[i] = c->table[j].gid;
    }
    return 0;
}

/* Copies the names and files into one arena owned by the table. */
static int fill_arena(struct collect_ctx *c)
{
    size_t arena_len = 0;
    for (uint32_t i = 0; i < c->nglobal; i++) {
        Py_ssize_t a, b;
        utf8_or(PyList_GET_ITEM(c->names, i), &a, "?");
        utf8_or(PyList_GET_ITEM(c->files, i), &b, "");
        arena_len += (size_t)a + (size_t)b + 2;
    }
    struct gt_functable *out = c->out;
    out->arena = malloc(arena_len ? arena_len : 1);
    if (!out->arena) {
        PyErr_NoMemory();
        return -1;
    }
    char *p = out->arena;
    for (uint32_t i = 0; i < c->nglobal; i++) {
        Py_ssize_t a, b;
        const char *n = utf8_or(PyList_GET_ITEM(c->names, i), &a, "?");
        const char *f = utf8_or(PyList_GET_ITEM(c->files, i), &b, "");
        memcpy(p, n, (size_t)a);
        p[a] = '\0';
        out->funcs[i].name = p;
        p += a + 1;
        memcpy(p, f, (size_t)b);
        p[b] = '\0';
        out->funcs[i].file = p;
        p += b + 1;
    }
    out->n = c->nglobal;
    return 0;
}

/* Drops every reference the tracer holds to code objects and owners. */
static void release_entries(struct gt_thread *threads)
{
    for (struct gt_thread *t = threads; t; t = t->next) {
        struct tr_state *s = t->tracer_state;
        if (!s)
            continue;
        for (uint32_t i = 0; i < s->nentries; i++) {
            Py_CLEAR(s->entries[i].obj);
            Py_CLEAR(s->entries[i].keep);
        }
    }
}

static int collect(struct gt_thread *threads, PyObject *file_labels, struct gt_functable *out,
                   int final)
{
    int err = -1;
    struct collect_ctx c = {.cap = 1024, .file_labels = file_labels, .out = out};
    memset(out, 0, sizeof(*out));

    c.total = count_entries(threads);
    while (c.cap < 2 * c.total + 2)
        c.cap *= 2;
    c.table = calloc(c.cap, sizeof(*c.table));
    c.names = PyList_New(0);
    c.files = PyList_New(0);
    out->funcs = calloc(c.total ? c.total : 1, sizeof(*out->funcs));
    if (!c.table || !c.names || !c.files || !out->funcs) {
        PyErr_NoMemory();
        goto cleanup;
    }
    for (struct gt_thread *t = threads; t; t = t->next)
        if (t->tracer_state && map_thread(&c, t->tracer_state) < 0)
            goto cleanup;
    if (fill_arena(&c) < 0)
        goto cleanup;
    err = 0;
cleanup:
    /* Every reference the tracer held goes now, success or not (a live collect keeps
     * them: the threads go on recording). */
    if (final)
        release_entries(threads);
    free(c.table);
    Py_XDECREF(c.names);
    Py_XDECREF(c.files);
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

int gt_tracer__unmapped(const struct gt_thread *t)
{
    const struct tr_state *s = __atomic_load_n(&t->tracer_state, __ATOMIC_ACQUIRE);
    return s && __atomic_load_n(&s->nentries, __ATOMIC_RELAXED) != (s->map ? s->nmap : 0);
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
    free(s->sstack);
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

/* ------------------------------------------------------------------ sampling */

/* The record of the thread of `ts`, registered when new: by its native id (3.11+; before,
 * start()'s list of threads, or the record a thread started later bound: threading's
 * hook binds one in every new thread). NULL when it cannot be told. */
static struct gt_thread *sampled_thread(PyThreadState *ts)
{
#if PY_VERSION_HEX >= 0x030B0000
    int32_t tid = (int32_t)ts->native_thread_id;
#else
    int32_t tid = tstate_tid(ts, tr.start_threads);
    if (tid <= 0) {
        for (struct gt_thread *t = gt_registry__threads(); t; t = t->next)
            if (t->bound && t->ident == (uint64_t)ts->thread_id && !t->superseded)
                return t;
        return NULL;
    }
#endif
    return tid > 0 ? gt_registry__register(tid, 0) : NULL;
}

#ifdef Py_GIL_DISABLED
/* The other threads run meanwhile: their frames are read with the world stopped (as at
 * the start: frames_of takes no Python call, and nothing of ours that may lock runs
 * then), registered and recorded after. */
static int sample_stopped(PyThreadState *me, uint64_t ticks)
{
    size_t n = 0, cap = 16; /* and threads started while we look */
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(me->interp); ts;
         ts = PyThreadState_Next(ts))
        cap++;
    struct open_stack *stacks = malloc(cap * sizeof(*stacks));
    if (!stacks)
        return -ENOMEM;
    _PyEval_StopTheWorld(me->interp);
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(me->interp); ts && n < cap;
         ts = PyThreadState_Next(ts)) {
        if (ts == me || ts->native_thread_id <= 0)
            continue;
        stacks[n].tid = (int32_t)ts->native_thread_id;
        frames_of(ts, &stacks[n]);
        n++;
    }
    _PyEval_StartTheWorld(me->interp);
    for (size_t i = 0; i < n; i++)
        sample_codes(gt_registry__register(stacks[i].tid, 0), stacks[i].code, stacks[i].n,
                     ticks, 0);
    free(stacks);
    return 0;
}
#endif

int gt_tracer__sample(uint64_t ticks)
{
    if (!tr.sample)
        return -ESRCH;
    PyThreadState *me = PyThreadState_Get();
#ifdef Py_GIL_DISABLED
    return sample_stopped(me, ticks);
#endif
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(me->interp); ts;
         ts = PyThreadState_Next(ts)) {
        if (ts == me)
            continue;
        struct gt_thread *t = sampled_thread(ts);
        if (!t)
            continue;
        PyFrameObject *f = PyThreadState_GetFrame(ts); /* new reference, or NULL */
        sample_frames(t, f, ticks, 0);
        Py_XDECREF(f);
    }
    return 0;
}

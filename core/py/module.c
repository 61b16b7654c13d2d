/* SPDX-License-Identifier: MIT */
/* giltracer._core: the Python boundary. Types Session (start/stop/finish) and Result
 * (the merged facts, exports). C errors become Python exceptions here, once. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpfprobe.h"
#include "lockkinds.h"
#include "emit.h"
#include "gt_clock.h"
#include "interps.h"
#include "profile.h"
#include "session.h"
#include "termwatch.h"
#include "tracer.h"
#include "whatif.h"
#include "compat.h"

typedef struct {
    PyObject_HEAD
    struct gt_session *s;
} SessionObject;

/* A Result's profiles: with or without the outer frames, of the foreground threads or all. */
#define PROFILE_VARIANTS 4
/* The rows text() and what_if() show by default. */
#define DEFAULT_TOP 5
/* save()'s stdio buffer: a page is written in a few large writes. */
#define SAVE_BUFFER_BYTES (1 << 20)

typedef struct {
    PyObject_HEAD
    struct gt_run *run;
    /* per enum gt_profile_flags OUTER_FRAMES|ALL_THREADS (>> 1), built on first use */
    struct gt_profile *prof[PROFILE_VARIANTS];
    /* set_lock_kinds: the payload's "lock_kinds" JSON, or NULL. A writer holds its own
     * reference while it writes without the GIL or the object's lock (a free-threaded
     * build's critical section is suspended there), so a set meanwhile cannot free the
     * text under it. */
    struct shared_text *lock_kinds;
} ResultObject;

/* A text with a count of its holders, in malloc's memory rather than a bytes object's:
 * its hand-off from the last holder to the next allocation is then one ThreadSanitizer
 * sees (a free-threaded build's allocator passes blocks between threads unseen). */
struct shared_text {
    atomic_long refs;
    char s[];
};

static struct shared_text *text_new(const char *s)
{
    size_t n = strlen(s) + 1;
    struct shared_text *t = malloc(sizeof(*t) + n);
    if (!t)
        return NULL;
    atomic_init(&t->refs, 1);
    memcpy(t->s, s, n);
    return t;
}

static struct shared_text *text_hold(struct shared_text *t)
{
    if (t)
        atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
    return t;
}

static void text_release(struct shared_text *t)
{
    if (t && atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) == 1)
        free(t);
}

static PyTypeObject Session_Type;

/* A Result's own lock (a free-threaded build's critical section on it). ThreadSanitizer
 * does not see that lock (a PyMutex inside the uninstrumented interpreter): in its
 * builds each section also tells it what the lock orders, so it checks the rest. */
#if defined(__SANITIZE_THREAD__)
#define GT_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GT_TSAN 1
#endif
#endif
#ifdef GT_TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define RESULT_LOCK(r) Py_BEGIN_CRITICAL_SECTION(r); __tsan_acquire(r)
#define RESULT_UNLOCK(r) __tsan_release(r); Py_END_CRITICAL_SECTION()
#else
#define RESULT_LOCK(r) Py_BEGIN_CRITICAL_SECTION(r)
#define RESULT_UNLOCK(r) Py_END_CRITICAL_SECTION()
#endif

static PyTypeObject Result_Type;

/* ------------------------------------------------------------------ rows */

/* The positional rows Result's methods return are struct sequences: tuples (indexing,
 * unpacking, len and equality with tuples as before) whose fields have names and docs,
 * declared here once. Static types made ready once per process, as Session and Result. */
#define FIELD(name, doc) {name, doc}
#define END_FIELDS {NULL, NULL}

static PyStructSequence_Field interval_fields[] = {
    FIELD("start_ns", "start, CLOCK_MONOTONIC ns"),
    FIELD("end_ns", "end, CLOCK_MONOTONIC ns"),
    FIELD("state", "GIL: 0 released, 1 wait, 2 held; OS: 0 on-cpu, 1 preempted, 2 blocked"),
    END_FIELDS,
};
static PyStructSequence_Field span_fields[] = {
    FIELD("start_ns", "call, CLOCK_MONOTONIC ns"),
    FIELD("end_ns", "return, CLOCK_MONOTONIC ns"),
    FIELD("name", "function name, or None"),
    FIELD("depth", "call depth"),
    FIELD("flags", "enum gt_span_flags (core/model/gt_trace.h)"),
    END_FIELDS,
};
static PyStructSequence_Field park_waker_fields[] = {
    FIELD("start_ns", "park start, CLOCK_MONOTONIC ns"),
    FIELD("end_ns", "park end, CLOCK_MONOTONIC ns"),
    FIELD("waker_tid", "tid of the thread that woke it"),
    END_FIELDS,
};
static PyStructSequence_Field function_fields[] = {
    FIELD("name", "qualified name"),
    FIELD("file", "source file ('' for C functions)"),
    FIELD("line", "first line"),
    FIELD("is_c", "whether it is a C function"),
    END_FIELDS,
};
static PyStructSequence_Field states_fields[] = {
    FIELD("running", "ns with the GIL held and on CPU"),
    FIELD("held_off_cpu", "ns with the GIL held while preempted or blocked"),
    FIELD("waiting", "ns waiting for the GIL"),
    FIELD("released", "ns with the GIL released"),
    FIELD("unknown", "ns with no GIL data"),
    END_FIELDS,
};
static PyStructSequence_Field profile_node_fields[] = {
    FIELD("parent", "index of the parent node, -1: the root"),
    FIELD("func", "function id (index into functions()), -1: none"),
    FIELD("calls", "calls"),
    FIELD("total_ns", "time in it and its callees"),
    FIELD("self_ns", "time in it alone"),
    FIELD("total_states", "total_ns by state (States)"),
    FIELD("self_states", "self_ns by state (States)"),
    END_FIELDS,
};
static PyStructSequence_Field profile_function_fields[] = {
    FIELD("func", "function id (index into functions()), -1: none"),
    FIELD("calls", "calls"),
    FIELD("total_ns", "time in it and its callees (recursion counted once)"),
    FIELD("self_ns", "time in it alone"),
    FIELD("total_states", "total_ns by state (States)"),
    FIELD("self_states", "self_ns by state (States)"),
    FIELD("wait_caused_ns", "GIL waits of other threads while it held the GIL"),
    END_FIELDS,
};
static PyStructSequence_Field whatif_thread_fields[] = {
    FIELD("tid", "native thread id"),
    FIELD("name", "thread name"),
    FIELD("measured_ns", "its traced life"),
    FIELD("predicted_ns", "its predicted life without the GIL"),
    FIELD("gil_wait_ns", "its measured GIL waits"),
    END_FIELDS,
};
static PyStructSequence_Field whatif_function_fields[] = {
    FIELD("func", "function id (index into functions()), -1: none"),
    FIELD("wait_caused_ns", "other threads' GIL wait while it held the GIL"),
    FIELD("saving_ns", "its share of the predicted saving (by wait caused)"),
    FIELD("release_wall_ns", "predicted wall with the GIL kept but it releasing the GIL"),
    END_FIELDS,
};
static PyStructSequence_Field whatif_fields[] = {
    FIELD("cpus", "CPUs predicted for"),
    FIELD("ft_factor", "the free-threaded build's slowdown applied"),
    FIELD("measured_ns", "measured wall time"),
    FIELD("predicted_ns", "predicted wall time without the GIL"),
    FIELD("gil_replay_ns", "the same scheduler replaying the trace with the GIL: a check"),
    FIELD("handoffs", "hand-offs found (thread starts and queue_handoffs included)"),
    FIELD("threads", "[WhatIfThread]"),
    FIELD("functions", "[WhatIfFunction], top first"),
    FIELD("assumptions", "[str]: what the prediction assumes"),
    FIELD("handoff_ns", "wake-up cost per hand-off without the GIL"),
    FIELD("queue_handoffs", "of them: gets that did not block, tied to their puts"),
    FIELD("waited", "hand-offs waited on in the no-GIL schedule (each costs handoff_ns)"),
    FIELD("event_ns", "the tracer's cost per call event"),
    FIELD("events", "call events (span starts and ends) in held time"),
    FIELD("tracer_ns", "held time removed from the no-GIL work as the tracer's"),
    FIELD("parallel_speed", "each CPU's speed with all busy (1 = independent CPUs)"),
    END_FIELDS,
};

#define ROW_TYPE(var, name, doc, fields)                                                     \
    static PyTypeObject var;                                                                 \
    static PyStructSequence_Desc var##_desc = {"giltracer._core." name, doc, fields,         \
                                               sizeof(fields) / sizeof(fields[0]) - 1}
ROW_TYPE(Interval_Type, "Interval", "gil_intervals(tid) and os_intervals(tid) rows",
         interval_fields);
ROW_TYPE(Span_Type, "Span", "spans(tid) rows: one function call", span_fields);
ROW_TYPE(ParkWaker_Type, "ParkWaker",
         "park_wakers(tid) rows: a free-threaded build's parked interval and its waker",
         park_waker_fields);
ROW_TYPE(Function_Type, "Function", "functions() rows, indexed by function id",
         function_fields);
ROW_TYPE(States_Type, "States", "time per profile state", states_fields);
ROW_TYPE(ProfileNode_Type, "ProfileNode", "profile() rows: call-tree nodes, parents first",
         profile_node_fields);
ROW_TYPE(ProfileFunction_Type, "ProfileFunction", "profile_functions() rows: per function",
         profile_function_fields);
ROW_TYPE(WhatIfThread_Type, "WhatIfThread", "what_if() per-thread rows", whatif_thread_fields);
ROW_TYPE(WhatIfFunction_Type, "WhatIfFunction", "what_if() per-function rows",
         whatif_function_fields);
ROW_TYPE(WhatIf_Type, "WhatIf", "what_if(): the no-GIL prediction", whatif_fields);

static struct {
    PyTypeObject *type;
    PyStructSequence_Desc *desc;
    const char *name;
} row_types[] = {
#define ROW(var, name) {&var, &var##_desc, name}
    ROW(Interval_Type, "Interval"),
    ROW(Span_Type, "Span"),
    ROW(ParkWaker_Type, "ParkWaker"),
    ROW(Function_Type, "Function"),
    ROW(States_Type, "States"),
    ROW(ProfileNode_Type, "ProfileNode"),
    ROW(ProfileFunction_Type, "ProfileFunction"),
    ROW(WhatIfThread_Type, "WhatIfThread"),
    ROW(WhatIfFunction_Type, "WhatIfFunction"),
    ROW(WhatIf_Type, "WhatIf"),
#undef ROW
};

/* Readies the row types (once: a module re-executed, after a re-import, finds them
 * ready) and adds them to the module. */
static int rows_init(PyObject *m)
{
    for (size_t i = 0; i < sizeof(row_types) / sizeof(row_types[0]); i++) {
        PyTypeObject *t = row_types[i].type;
        if (!(t->tp_flags & Py_TPFLAGS_READY) &&
            PyStructSequence_InitType2(t, row_types[i].desc) < 0)
            return -1;
        if (PyModule_AddObjectRef(m, row_types[i].name, (PyObject *)t) < 0)
            return -1;
    }
    return 0;
}

/* A row of `type` from a Py_BuildValue format of its fields in order, "(...)", with that
 * format's references ("N" stolen, on failure too); NULL with the exception set. */
static PyObject *row(PyTypeObject *type, const char *format, ...)
{
    va_list va;
    va_start(va, format);
    PyObject *t = Py_VaBuildValue(format, va);
    va_end(va);
    if (!t)
        return NULL;
    PyObject *r = PyStructSequence_New(type);
    if (r && (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != Py_SIZE(r))) {
        PyErr_Format(PyExc_SystemError, "%s: row format %s does not match its fields",
                     type->tp_name, format);
        Py_CLEAR(r);
    }
    for (Py_ssize_t i = 0; r && i < Py_SIZE(r); i++)
        PyStructSequence_SET_ITEM(r, i, Py_NewRef(PyTuple_GET_ITEM(t, i)));
    Py_DECREF(t);
    return r;
}

/* ------------------------------------------------------------------ Session */

/* The converters of Session's keywords, one per kind (session_keywords.h): each parses
 * as the PyArg format of its kind and stores the field's C type. */
static int kw_bool(PyObject *v, void *field)
{
    int r = PyObject_IsTrue(v); /* as "p" */
    if (r < 0)
        return 0;
    *(int *)field = r;
    return 1;
}

static int kw_int(PyObject *v, void *field)
{
    return PyArg_Parse(v, "i", (int *)field);
}

static int kw_u64(PyObject *v, void *field)
{
    unsigned long long u;
    if (!PyArg_Parse(v, "K", &u))
        return 0;
    *(uint64_t *)field = u;
    return 1;
}

/* Borrowed; None is NULL. */
static int kw_object(PyObject *v, void *field)
{
    *(PyObject **)field = v == Py_None ? NULL : v;
    return 1;
}

static int kw_str(PyObject *v, void *field)
{
    return PyArg_Parse(v, "z", (const char **)field);
}

/* A choice's index in `choices` (NULL-terminated), or ValueError naming them. */
static int kw_choice(PyObject *v, void *field, const char *keyword, const char *const *choices)
{
    const char *s;
    if (!PyArg_Parse(v, "s", &s))
        return 0;
    size_t n = 0;
    for (; choices[n]; n++) {
        if (strcmp(s, choices[n]) == 0) {
            *(int *)field = (int)n;
            return 1;
        }
    }
    char said[256] = "";
    for (size_t i = 0; i < n; i++)
        snprintf(said + strlen(said), sizeof said - strlen(said), "%s'%s'",
                 i == 0 ? "" : i + 1 == n ? " or " : ", ", choices[i]);
    PyErr_Format(PyExc_ValueError, "%s must be %s, not %R", keyword, said, v);
    return 0;
}

#define KW_CHOICE_CONVERTER(keyword, ...)                                   \
    static const char *const keyword##_choices[] = {__VA_ARGS__, NULL};     \
    static int kw_##keyword(PyObject *v, void *field)                       \
    {                                                                       \
        return kw_choice(v, field, #keyword, keyword##_choices);            \
    }
GT_SESSION_CHOICES(KW_CHOICE_CONVERTER)

/* One converter per keyword: its kind's, with the keyword named in a TypeError (as
 * "argument 'max_depth': ..."). */
static int kw_failed(const char *keyword)
{
    if (PyErr_ExceptionMatches(PyExc_TypeError)) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        PyErr_Format(type, "argument '%s': %S", keyword, value);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
    }
    return 0;
}

#define KW_CONVERTER(keyword, type, kind, dflt)                             \
    static int kw_arg_##keyword(PyObject *v, void *field)                   \
    {                                                                       \
        return kw_##kind(v, field) || kw_failed(#keyword);                  \
    }
GT_SESSION_KEYWORDS(KW_CONVERTER)

#define KW_NAME(keyword, type, kind, dflt) #keyword,
#define KW_FORMAT(keyword, type, kind, dflt) "O&"
#define KW_DEFAULT(keyword, type, kind, dflt) .keyword = dflt,
#define KW_TARGET(keyword, type, kind, dflt) , kw_arg_##keyword, &o.keyword

static int Session_init(SessionObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {GT_SESSION_KEYWORDS(KW_NAME) NULL};
    struct gt_session_opts o = {GT_SESSION_KEYWORDS(KW_DEFAULT) .own_type = &Session_Type};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$" GT_SESSION_KEYWORDS(KW_FORMAT), kwlist
                                     GT_SESSION_KEYWORDS(KW_TARGET)))
        return -1;
    if (o.sample_ns && o.functions) {
        PyErr_SetString(PyExc_ValueError, "sampling (sample_ns) replaces function tracing: "
                                          "pass functions=False with it");
        return -1;
    }
    if (o.max_depth < 0) {
        PyErr_SetString(PyExc_ValueError, "max_depth must be >= 0 (0 = unlimited)");
        return -1;
    }
    if (self->s) {
        PyErr_SetString(PyExc_RuntimeError, "Session is already initialised");
        return -1;
    }
    self->s = gt_session__new(&o);
    return self->s ? 0 : -1;
}

/* A Session freed while it records (e.g. `trace().start() + 1`: the temporary dies as
 * the TypeError unwinds) is stopped here, so the exception being raised is set aside
 * and put back afterwards: Python code runs here, and a pending exception would make
 * it fail or be lost. The Python that still runs: the tracer's uninstall
 * (sys.monitoring.set_events / free_tool_id on 3.12+, _PyEval_SetProfile and its
 * "sys.setprofile" audit event before) and threading.setprofile to restore the
 * previous thread hook, then the finalizers of the code objects the records held.
 * It is safe: it runs with no exception pending, cannot reach this object (its
 * refcount is 0 and nothing refers to it), and a failure is reported as unraisable
 * with what failed; the hooks and records are released anyway. A stopped, finished
 * or released session runs no Python here beyond those finalizers. */
#ifdef Py_GIL_DISABLED
/* Free-threaded builds: no GIL keeps two threads out of the session calls at once (they
 * start and stop the process-wide probes): this lock does. The thread holding it enters
 * again freely (Python code a call runs may start another session, which then finds
 * this one active, as with the GIL). Waiting for it detaches the thread. */
static PyMutex session_lock;
static _Atomic unsigned long session_owner;

static int session_enter(void)
{
    unsigned long me = PyThread_get_thread_ident();
    if (atomic_load(&session_owner) == me)
        return 0;
    PyMutex_Lock(&session_lock);
    atomic_store(&session_owner, me);
    return 1;
}

static void session_leave(int locked)
{
    if (!locked)
        return;
    atomic_store(&session_owner, 0);
    PyMutex_Unlock(&session_lock);
}
#else
static int session_enter(void)
{
    return 0;
}

static void session_leave(int locked)
{
    (void)locked;
}
#endif

static void Session_dealloc(SessionObject *self)
{
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    int locked = session_enter();
    int freed = gt_session__free(self->s);
    session_leave(locked);
    if (freed < 0) {
        /* At exit a trace still recording is torn down with the modules it needs
         * (threading): nothing is left to tell the user about. */
        if (gt_is_finalizing())
            PyErr_Clear();
        else
            gt_write_unraisable("while giltracer stopped a trace freed while it was recording");
    }
    self->s = NULL;
    PyErr_Restore(et, ev, tb);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Session_start(SessionObject *self, PyObject *args)
{
    PyObject *threads = Py_None;
    if (!PyArg_ParseTuple(args, "|O", &threads))
        return NULL;
    if (!self->s) {
        PyErr_SetString(PyExc_RuntimeError, "Session not initialised");
        return NULL;
    }
    int locked = session_enter();
    int rc = gt_session__start(self->s, threads == Py_None ? NULL : threads);
    session_leave(locked);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *Session_stop(SessionObject *self, PyObject *noargs)
{
    (void)noargs;
    int locked = session_enter();
    int rc = self->s ? gt_session__stop(self->s) : 0;
    session_leave(locked);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *Session_finish(SessionObject *self, PyObject *args)
{
    PyObject *names = Py_None, *files = Py_None;
    const char *title = NULL;
    if (!PyArg_ParseTuple(args, "|OzO", &names, &title, &files))
        return NULL;
    if (files != Py_None && !PyDict_Check(files)) {
        PyErr_SetString(PyExc_TypeError, "finish(): files must be a dict (file name -> shown name) or None");
        return NULL;
    }
    if (!self->s) {
        PyErr_SetString(PyExc_RuntimeError, "Session not initialised");
        return NULL;
    }
    int locked = session_enter();
    struct gt_run *run = gt_session__finish(self->s, names, title, files == Py_None ? NULL : files);
    session_leave(locked);
    if (!run)
        return NULL;
    ResultObject *r = PyObject_New(ResultObject, &Result_Type);
    if (!r) {
        gt_run__free(run);
        return NULL;
    }
    r->run = run;
    memset(r->prof, 0, sizeof(r->prof));
    r->lock_kinds = NULL;
    return (PyObject *)r;
}

static PyObject *Session_progress(SessionObject *self, PyObject *noargs)
{
    (void)noargs;
    if (!self->s)
        Py_RETURN_NONE;
    return gt_session__progress(self->s);
}

static PyObject *Session_spool(SessionObject *self, PyObject *args)
{
    PyObject *names_fn = Py_None, *ready = Py_None;
    unsigned int every_ms = 0;
    if (!PyArg_ParseTuple(args, "|OIO", &names_fn, &every_ms, &ready))
        return NULL;
    if (ready != Py_None) { /* its starter goes on (to start the session) once this runs */
        PyObject *r = PyObject_CallMethod(ready, "release", NULL);
        if (!r)
            return NULL;
        Py_DECREF(r);
    }
    if (names_fn != Py_None && !PyCallable_Check(names_fn)) {
        PyErr_SetString(PyExc_TypeError, "spool: names must be callable or None");
        return NULL;
    }
    if (!self->s)
        return PyLong_FromLong(-EINVAL);
    Py_INCREF(self); /* (the session outlives the loop) */
    int rc = gt_session__spool(self->s, names_fn == Py_None ? NULL : names_fn, every_ms);
    Py_DECREF(self);
    return PyLong_FromLong(rc);
}

static PyObject *Session_get_state(SessionObject *self, void *c)
{
    (void)c;
    static const char *const names[GT_SESSION_NSTATES] = {
        [GT_SESSION_NEW] = "new",           [GT_SESSION_RECORDING] = "recording",
        [GT_SESSION_STOPPED] = "stopped",   [GT_SESSION_FINISHED] = "finished",
        [GT_SESSION_RELEASED] = "released",
    };
    return PyUnicode_FromString(names[self->s ? gt_session__state(self->s) : GT_SESSION_NEW]);
}

static PyMethodDef Session_methods[] = {
    {"start", (PyCFunction)Session_start, METH_VARARGS,
     "start(threads=None): start recording; threads = [(ident, native_id), ...]"},
    {"stop", (PyCFunction)Session_stop, METH_NOARGS, "stop(): stop every probe"},
    {"spool", (PyCFunction)Session_spool, METH_VARARGS,
     "spool(names=None, every_ms=500, ready=None) -> int: a followed child's spooler (its "
     "own thread, called before start; releases the lock `ready` first): until stop, "
     "writes what the session recorded since to a checkpoint every ~every_ms (0 once "
     "stopped, or -errno; -ENOENT: the parent's trace stopped; -EINTR: a SIGTERM the main "
     "thread did not answer, see watch_sigterm)"},
    {"progress", (PyCFunction)Session_progress, METH_NOARGS,
     "progress() -> dict or None: the recording's facts so far (per-thread GIL ns, "
     "events, dropped, budget_reached), cheap, for a live view"},
    {"finish", (PyCFunction)Session_finish, METH_VARARGS,
     "finish(names=None, title=None, files=None) -> Result: merge the streams; files: "
     "{file name: name shown instead} (a notebook cell's file -> 'In [5]')"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Session_getset[] = {
    {"state", (getter)Session_get_state, NULL,
     "new, recording, stopped, finished or released (by stop_active())", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject Session_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "giltracer._core.Session",
    .tp_basicsize = sizeof(SessionObject),
    .tp_dealloc = (destructor)Session_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One tracing session (use giltracer.trace() instead).",
    .tp_methods = Session_methods,
    .tp_getset = Session_getset,
    .tp_init = (initproc)Session_init,
    .tp_new = PyType_GenericNew,
};

/* ------------------------------------------------------------------ Result */

static void profile_free(struct gt_profile *p);

/* Plain C. */
static void Result_dealloc(ResultObject *self)
{
    for (int k = 0; k < PROFILE_VARIANTS; k++)
        profile_free(self->prof[k]);
    text_release(self->lock_kinds);
    gt_run__free(self->run);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static const struct gt_result *R(ResultObject *self)
{
    return self->run->result;
}

static PyObject *thread_name(const struct gt_thread_result *t)
{
    if (t->name)
        return PyUnicode_FromString(t->name);
    return PyUnicode_FromFormat("thread %d", (int)t->tid);
}

/* Puts row i of a list being filled (PyList_New), or, when building the row failed
 * (NULL), drops the list: returns -1 and *out is NULL with the exception set. */
static int list_put(PyObject **out, size_t i, PyObject *row)
{
    if (!row) {
        Py_CLEAR(*out);
        return -1;
    }
    PyList_SET_ITEM(*out, (Py_ssize_t)i, row);
    return 0;
}

static PyObject *Result_threads(ResultObject *self, PyObject *noargs)
{
    (void)noargs;
    const struct gt_result *r = R(self);
    PyObject *out = PyList_New((Py_ssize_t)r->nthreads);
    for (size_t i = 0; out && i < r->nthreads; i++) {
        const struct gt_thread_result *t = &r->threads[i];
        PyObject *d = Py_BuildValue("{s:i,s:i,s:K,s:N,s:n,s:K,s:K,s:O,s:O,s:I}", "tid", t->tid, "pid",
                                    t->pid, "ident", (unsigned long long)t->ident, "name",
                                    thread_name(t), "spans", (Py_ssize_t)t->nspans, "start_ns",
                                    (unsigned long long)t->start_ns, "end_ns",
                                    (unsigned long long)t->end_ns, "os_states",
                                    t->has_sched ? Py_True : Py_False, "background",
                                    t->background ? Py_True : Py_False, "interp", t->interp);
        if (list_put(&out, i, d) < 0)
            break;
    }
    return out;
}

static PyObject *opt_ns(int64_t v)
{
    if (v < 0)
        Py_RETURN_NONE;
    return PyLong_FromLongLong(v);
}

/* A free-threaded build's summary also names its "GIL" figures for what they are. */
static int park_keys(PyObject *d, const struct gt_summary *s)
{
    PyObject *v = Py_BuildValue("{s:K,s:K,s:K,s:K,s:d,s:d}", "running_ns",
                                (unsigned long long)s->held_ns, "parked_ns",
                                (unsigned long long)s->wait_ns, "parks",
                                (unsigned long long)s->acquisitions, "longest_park_ns",
                                (unsigned long long)s->longest_wait_ns, "running_pct",
                                s->held_pct, "parked_pct", s->wait_pct);
    int err = v ? PyDict_Update(d, v) : -1;
    Py_XDECREF(v);
    return err;
}

static PyObject *thread_summaries(const struct gt_result *r, const struct gt_thread_result *threads,
                                  size_t n)
{
    PyObject *out = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; out && i < n; i++) {
        const struct gt_thread_result *t = &threads[i];
        const struct gt_summary *s = &t->summary;
        PyObject *d = Py_BuildValue(
            "{s:i,s:i,s:K,s:N,s:K,s:K,s:K,s:K,s:N,s:N,s:K,s:K,s:K,s:d,s:d,s:d,s:n,s:O,s:I}", "tid",
            t->tid, "pid", t->pid, "ident", (unsigned long long)t->ident, "name", thread_name(t),
            "wall_ns", (unsigned long long)s->wall_ns, "held_ns", (unsigned long long)s->held_ns,
            "wait_ns", (unsigned long long)s->wait_ns, "released_ns",
            (unsigned long long)s->released_ns, "off_cpu_ns", opt_ns(s->off_cpu_ns),
            "preempted_ns", opt_ns(s->preempted_ns), "acquisitions",
            (unsigned long long)s->acquisitions, "longest_wait_ns",
            (unsigned long long)s->longest_wait_ns, "drop_requests",
            (unsigned long long)s->drop_requests, "held_pct", s->held_pct, "wait_pct",
            s->wait_pct, "released_pct", s->released_pct, "spans", (Py_ssize_t)t->nspans,
            "background", t->background ? Py_True : Py_False, "interp", t->interp);
        if (d && r->free_threaded && park_keys(d, s) < 0)
            Py_CLEAR(d);
        if (list_put(&out, i, d) < 0)
            break;
    }
    return out;
}

static PyObject *summaries(const struct gt_result *r)
{
    return thread_summaries(r, r->threads, r->nthreads);
}

/* giltracer's own threads (in no view): their summaries and the waits they caused. */
static PyObject *Result_tool(ResultObject *self, PyObject *noargs)
{
    (void)noargs;
    const struct gt_result *r = R(self);
    return Py_BuildValue("{s:N,s:K,s:K}", "threads",
                         thread_summaries(r, r->tool.threads, r->tool.nthreads), "caused_ns",
                         (unsigned long long)r->tool.caused_ns, "caused_waits",
                         (unsigned long long)r->tool.caused_waits);
}

static PyObject *Result_summary(ResultObject *self, PyObject *noargs)
{
    (void)noargs;
    return summaries(R(self));
}

static PyObject *Result_crosscheck(ResultObject *self, PyObject *noargs)
{
    (void)noargs;
    if (!self->run->check)
        Py_RETURN_NONE;
    return summaries(self->run->check);
}

static PyObject *func_name(const struct gt_result *r, uint32_t f)
{
    if (f == GT_UNKNOWN_FUNC) /* the holder's calls were truncated (max_events) */
        return PyUnicode_FromString("unknown (calls truncated: max_events)");
    if (f == GT_NO_FUNC || f >= r->nfuncs)
        Py_RETURN_NONE;
    return PyUnicode_FromString(r->funcs[f].name);
}

static PyObject *Result_blame(ResultObject *self, PyObject *noargs)
{
    (void)noargs;
    const struct gt_result *r = R(self);
    PyObject *out = PyList_New((Py_ssize_t)r->nblame);
    for (size_t i = 0; out && i < r->nblame; i++) {
        const struct gt_blame *b = &r->blame[i];
        const char *file = "";
        uint32_t line = 0;
        if (b->func != GT_NO_FUNC && b->func < r->nfuncs) {
            file = r->funcs[b->func].file;
            line = r->funcs[b->func].line;
        }
        PyObject *d = Py_BuildValue("{s:i,s:i,s:N,s:s,s:I,s:K,s:I}", "waiter", b->waiter_tid,
                                    "holder", b->holder_tid, "function", func_name(r, b->func),
                                    "file", file, "line", line, "wait_ns",
                                    (unsigned long long)b->wait_ns, "count", b->count);
        if (list_put(&out, i, d) < 0)
            break;
    }
    return out;
}

static const struct gt_thread_result *thread_arg(ResultObject *self, PyObject *args)
{
    int tid;
    if (!PyArg_ParseTuple(args, "i", &tid))
        return NULL;
    const struct gt_result *r = R(self);
    /* A tid reused within the session has two threads: the latest is the one meant. */
    for (size_t i = r->nthreads; i-- > 0;)
        if (r->threads[i].tid == tid)
            return &r->threads[i];
    PyErr_Format(PyExc_KeyError, "no thread with tid %d in this trace", tid);
    return NULL;
}

static PyObject *Result_spans(ResultObject *self, PyObject *args)
{
    const struct gt_thread_result *t = thread_arg(self, args);
    if (!t)
        return NULL;
    const struct gt_result *r = R(self);
    PyObject *out = PyList_New((Py_ssize_t)t->nspans);
    for (size_t i = 0; out && i < t->nspans; i++) {
        const struct gt_span *s = &t->spans[i];
        PyObject *v = row(&Span_Type, "(KKNiI)", (unsigned long long)s->start,
                                    (unsigned long long)s->end, func_name(r, s->func),
                                    (int)s->depth, (unsigned)s->flags);
        if (list_put(&out, i, v) < 0)
            break;
    }
    return out;
}

static PyObject *intervals(const struct gt_interval *iv, size_t n)
{
    PyObject *out = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; out && i < n; i++) {
        PyObject *v = row(&Interval_Type, "(KKI)", (unsigned long long)iv[i].start,
                                    (unsigned long long)iv[i].end, iv[i].state);
        if (list_put(&out, i, v) < 0)
            break;
    }
    return out;
}

static PyObject *Result_gil_intervals(ResultObject *self, PyObject *args)
{
    const struct gt_thread_result *t = thread_arg(self, args);
    return t ? intervals(t->gil, t->ngil) : NULL;
}

/* Free-threaded builds: the parked intervals contention blame uses (not coalesced), each
 * with its waker's tid (the interval's aux), so lock-kind labels can be given per blame pair. */
static PyObject *Result_park_wakers(ResultObject *self, PyObject *args)
{
    const struct gt_thread_result *t = thread_arg(self, args);
    if (!t)
        return NULL;
    PyObject *out = PyList_New(0);
    for (size_t i = 0; out && R(self)->free_threaded && i < t->ngil; i++) {
        const struct gt_interval *iv = &t->gil[i];
        if (iv->state != GT_GIL_STATE_WAIT || (t->gil_coalesced_from && iv->end > t->gil_coalesced_from))
            continue;
        PyObject *v = row(&ParkWaker_Type, "(KKI)", (unsigned long long)iv->start, (unsigned long long)iv->end, iv->aux);
        if (!v || PyList_Append(out, v) < 0)
            Py_CLEAR(out);
        Py_XDECREF(v);
    }
    return out;
}

static PyObject *Result_os_intervals(ResultObject *self, PyObject *args)
{
    const struct gt_thread_result *t = thread_arg(self, args);
    return t ? intervals(t->os, t->nos) : NULL;
}

static PyObject *Result_functions(ResultObject *self, PyObject *noargs)
{
    (void)noargs;
    const struct gt_result *r = R(self);
    PyObject *out = PyList_New(r->nfuncs);
    for (uint32_t i = 0; out && i < r->nfuncs; i++) {
        const struct gt_func *f = &r->funcs[i];
        PyObject *v = row(&Function_Type, "(ssIO)", f->name, f->file, f->line,
                                    (f->flags & GT_FUNC_C) ? Py_True : Py_False);
        if (list_put(&out, i, v) < 0)
            break;
    }
    return out;
}

/* Profiles built and not freed yet, for tests (_core._live_profiles()). Atomic: a
 * free-threaded build has no GIL to count under. */
static _Atomic long live_profiles;

static void profile_free(struct gt_profile *p)
{
    if (p)
        live_profiles--;
    gt_profile__free(p);
}

/* The profile, built once; NULL with an exception set on failure. The build lets the
 * GIL go (and a free-threaded build has none), so threads asking at once may each build
 * one: the first stored (compare-and-swap) is kept, the others are freed. */
static const struct gt_profile *profile_of(ResultObject *self, int flags)
{
    struct gt_profile **slot = &self->prof[(flags >> 1) & (PROFILE_VARIANTS - 1)];
    struct gt_profile *have = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (!have) {
        struct gt_profile *p = NULL;
        int err;
        Py_BEGIN_ALLOW_THREADS;
        err = gt_profile__build(R(self), flags, &p);
        Py_END_ALLOW_THREADS;
        if (err < 0) {
            errno = -err;
            PyErr_SetFromErrno(err == -ENOMEM ? PyExc_MemoryError : PyExc_OSError);
            return NULL;
        }
        live_profiles++;
        if (__atomic_compare_exchange_n(slot, &have, p, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            have = p;
        else
            profile_free(p); /* another thread's is there: `have` */
    }
    return have;
}

/* The tree of thread `tid` (None: the merged tree); outer_frames keeps the frames above
 * the traced code, all_threads merges the background threads too. */
static const struct gt_ptree *ptree_arg(ResultObject *self, PyObject *args)
{
    PyObject *tid_obj = Py_None;
    int outer = 0, all = 0;
    if (!PyArg_ParseTuple(args, "|Opp", &tid_obj, &outer, &all))
        return NULL;
    const struct gt_profile *p =
        profile_of(self, (outer ? GT_PROFILE_OUTER_FRAMES : 0) | (all ? GT_PROFILE_ALL_THREADS : 0));
    if (!p)
        return NULL;
    if (tid_obj == Py_None)
        return &p->merged;
    long tid = PyLong_AsLong(tid_obj);
    if (tid == -1 && PyErr_Occurred())
        return NULL;
    for (size_t i = p->nthreads; i-- > 0;) /* the latest thread of a reused tid */
        if (p->threads[i].tid == tid)
            return &p->threads[i];
    PyErr_Format(PyExc_KeyError, "no thread with tid %ld in this trace", tid);
    return NULL;
}

static PyObject *states5(const uint64_t *v)
{
    return row(&States_Type, "(KKKKK)", (unsigned long long)v[0], (unsigned long long)v[1],
                         (unsigned long long)v[2], (unsigned long long)v[3],
                         (unsigned long long)v[4]);
}

static long func_index(const struct gt_result *r, uint32_t f)
{
    return f < r->nfuncs ? (long)f : -1;
}

static PyObject *Result_profile(ResultObject *self, PyObject *args)
{
    const struct gt_ptree *t = ptree_arg(self, args);
    if (!t)
        return NULL;
    const struct gt_result *r = R(self);
    PyObject *out = PyList_New((Py_ssize_t)t->nnodes);
    for (size_t i = 0; out && i < t->nnodes; i++) {
        const struct gt_pnode *n = &t->nodes[i];
        PyObject *v = row(&ProfileNode_Type, "(llKKKNN)",
                                    n->parent == GT_PNODE_NONE ? -1L : (long)n->parent,
                                    func_index(r, n->func), (unsigned long long)n->calls,
                                    (unsigned long long)n->total_ns,
                                    (unsigned long long)n->self_ns, states5(n->total),
                                    states5(n->self));
        if (list_put(&out, i, v) < 0)
            break;
    }
    return out;
}

static PyObject *Result_profile_functions(ResultObject *self, PyObject *args)
{
    const struct gt_ptree *t = ptree_arg(self, args);
    if (!t)
        return NULL;
    const struct gt_result *r = R(self);
    struct gt_pfunc *rows = NULL;
    size_t n = 0;
    int err = gt_profile__functions(r, t, t->tid, &rows, &n);
    if (err < 0) {
        errno = -err;
        return PyErr_SetFromErrno(err == -ENOMEM ? PyExc_MemoryError : PyExc_OSError);
    }
    PyObject *out = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; out && i < n; i++) {
        const struct gt_pfunc *f = &rows[i];
        PyObject *v = row(&ProfileFunction_Type, "(lKKKNNK)", func_index(r, f->func),
                                    (unsigned long long)f->calls, (unsigned long long)f->total_ns,
                                    (unsigned long long)f->self_ns, states5(f->total),
                                    states5(f->self), (unsigned long long)f->wait_caused_ns);
        if (list_put(&out, i, v) < 0)
            break;
    }
    free(rows);
    return out;
}

/* 0, or -1 with a ValueError naming the option that is wrong in `o` (made from `args`). */
static int whatif_opts_check(const struct gt_whatif_opts *o, PyObject *args)
{
    const char *problem = gt_whatif__opts_problem(o);
    if (!problem)
        return 0;
    PyErr_Format(PyExc_ValueError, "%s (got %R)", problem, args);
    return -1;
}

/* what_if(cpus, ft_factor, top, handoff_ns, event_ns, parallel_speed) -> (cpus, ft_factor,
 * measured_ns, predicted_ns, gil_replay_ns, handoffs, [(tid, name, measured_ns,
 * predicted_ns, gil_wait_ns)], [(func, wait_caused_ns, saving_ns, release_wall_ns)],
 * [assumption], handoff_ns, queue_handoffs, waited, event_ns, events, tracer_ns,
 * parallel_speed) */
static PyObject *Result_what_if(ResultObject *self, PyObject *args)
{
    int cpus;
    double factor;
    Py_ssize_t top = DEFAULT_TOP;
    double handoff = 0, event = 0, pspeed = 1;
    if (!PyArg_ParseTuple(args, "id|nddd", &cpus, &factor, &top, &handoff, &event, &pspeed))
        return NULL;
    if (top < 0) {
        PyErr_Format(PyExc_ValueError, "top must be >= 0 (got %zd)", top);
        return NULL;
    }
    struct gt_whatif_opts o = {.cpus = cpus < 1 ? 0 : (unsigned)cpus, .ft_factor = factor,
                               .top_functions = (size_t)top, .handoff_ns = handoff,
                               .event_ns = event, .parallel_speed = pspeed};
    if (whatif_opts_check(&o, args) < 0)
        return NULL;
    struct gt_whatif *w = NULL;
    int err;
    Py_BEGIN_ALLOW_THREADS;
    err = gt_whatif__predict(R(self), &o, &w);
    Py_END_ALLOW_THREADS;
    if (err == -ENODATA || err == -EOPNOTSUPP) {
        PyErr_SetString(PyExc_ValueError,
                        err == -EOPNOTSUPP
                            ? "what_if needs a trace with a GIL: this one is free-threaded"
                            : "what_if needs GIL data: trace with the GIL probe (backend hooks "
                              "or bpf) and at least one foreground thread");
        return NULL;
    }
    if (err < 0) {
        errno = -err;
        return PyErr_SetFromErrno(err == -ENOMEM ? PyExc_MemoryError : PyExc_OSError);
    }
    const struct gt_result *r = R(self);
    PyObject *threads = PyList_New((Py_ssize_t)w->nthreads);
    PyObject *funcs = PyList_New((Py_ssize_t)w->nfuncs);
    for (size_t i = 0; threads && funcs && i < w->nthreads; i++) {
        const struct gt_whatif_thread *t = &w->threads[i];
        PyObject *v = row(&WhatIfThread_Type, "(isddd)", (int)t->tid, t->name ? t->name : "",
                                    t->measured_ns, t->predicted_ns, t->gil_wait_ns);
        if (list_put(&threads, i, v) < 0)
            break;
    }
    for (size_t i = 0; threads && funcs && i < w->nfuncs; i++) {
        const struct gt_whatif_func *f = &w->funcs[i];
        PyObject *v = row(&WhatIfFunction_Type, "(lddd)", func_index(r, f->func), f->wait_caused_ns,
                                    f->saving_ns, f->release_wall_ns);
        if (list_put(&funcs, i, v) < 0)
            break;
    }
    PyObject *assumptions = PyList_New(GT_WHATIF_ASSUMPTIONS);
    char buf[GT_WHATIF_ASSUMPTION_LEN];
    for (size_t i = 0; assumptions && i < GT_WHATIF_ASSUMPTIONS; i++) {
        PyObject *v = PyUnicode_FromString(gt_whatif__assumption(w, i, buf));
        if (list_put(&assumptions, i, v) < 0)
            break;
    }
    PyObject *out = NULL;
    if (threads && funcs && assumptions)
        out = row(&WhatIf_Type, "(iddddnOOOdnndddd)", (int)w->cpus, w->ft_factor,
                            w->measured_wall_ns, w->predicted_wall_ns, w->gil_wall_ns,
                            (Py_ssize_t)w->handoffs, threads, funcs, assumptions, w->handoff_ns,
                            (Py_ssize_t)w->queue_handoffs, (Py_ssize_t)w->waited, w->event_ns,
                            w->events, w->tracer_ns, w->parallel_speed);
    Py_XDECREF(threads);
    Py_XDECREF(funcs);
    Py_XDECREF(assumptions);
    gt_whatif__free(w);
    return out;
}

/* set_what_if(cpus, ft_factor, handoff_ns=0, event_ns=0, parallel_speed=1): what the
 * payload's "what_if" is predicted with. */
static PyObject *Result_set_what_if(ResultObject *self, PyObject *args)
{
    int cpus;
    double factor, handoff = 0, event = 0, pspeed = 1;
    if (!PyArg_ParseTuple(args, "id|ddd", &cpus, &factor, &handoff, &event, &pspeed))
        return NULL;
    struct gt_whatif_opts o = {.cpus = cpus < 1 ? 0 : (unsigned)cpus, .ft_factor = factor,
                               .handoff_ns = handoff, .event_ns = event,
                               .parallel_speed = pspeed};
    if (whatif_opts_check(&o, args) < 0)
        return NULL;
    RESULT_LOCK(self);
    self->run->meta.whatif_parallel_speed = pspeed;
    self->run->meta.whatif_cpus = (unsigned)cpus;
    self->run->meta.whatif_ft_factor = factor;
    self->run->meta.whatif_handoff_ns = handoff;
    self->run->meta.whatif_event_ns = event;
    RESULT_UNLOCK(self);
    Py_RETURN_NONE;
}

/* The labels are computed in Python after the stop (lockkinds.py); the page's payload
 * carries them so the viewer shows them. The text must be one JSON object. */
static PyObject *Result_set_lock_kinds(ResultObject *self, PyObject *args)
{
    const char *json = NULL;
    if (!PyArg_ParseTuple(args, "z", &json))
        return NULL;
    struct shared_text *copy = json ? text_new(json) : NULL, *old;
    if (json && !copy)
        return PyErr_NoMemory();
    RESULT_LOCK(self);
    old = self->lock_kinds;
    self->lock_kinds = copy;
    RESULT_UNLOCK(self);
    text_release(old);
    Py_RETURN_NONE;
}

/* The meta to emit with, copied whole (set_what_if writes it), and lock_kinds: returns a
 * hold on the text meta->lock_kinds points into (or NULL), to be released once the
 * emitter is done. */
static struct shared_text *emit_meta(ResultObject *self, struct gt_emit_meta *meta)
{
    struct shared_text *kinds;
    RESULT_LOCK(self);
    *meta = self->run->meta;
    kinds = text_hold(self->lock_kinds);
    RESULT_UNLOCK(self);
    meta->lock_kinds = kinds ? kinds->s : NULL;
    return kinds;
}

static PyObject *Result_save(ResultObject *self, PyObject *args)
{
    PyObject *path_obj = NULL;
    const char *format, *tab = NULL, *theme = NULL;
    if (!PyArg_ParseTuple(args, "O&s|zz", PyUnicode_FSConverter, &path_obj, &format, &tab, &theme))
        return NULL;
    const char *path = PyBytes_AS_STRING(path_obj);
    int kind = strcmp(format, "json") == 0 ? 0 : strcmp(format, "html") == 0 ? 1 : -1;
    if (kind < 0) {
        Py_DECREF(path_obj);
        PyErr_Format(PyExc_ValueError, "format must be 'json' or 'html', not %s", format);
        return NULL;
    }
    struct gt_emit_meta meta;
    struct shared_text *kinds = emit_meta(self, &meta);
    meta.view = tab;
    meta.theme = theme;
    int err;
    /* The open too without the GIL: a FIFO's waits for its reader, a network file's for
     * the server. */
    Py_BEGIN_ALLOW_THREADS;
    FILE *f = fopen(path, "w");
    if (!f) {
        err = -errno;
    } else {
        setvbuf(f, NULL, _IOFBF, SAVE_BUFFER_BYTES);
        err = kind == 0 ? gt_emit__chrome_json(R(self), &meta, f) : gt_emit__html(R(self), &meta, f);
        if (fclose(f) != 0 && err == 0)
            err = -errno;
    }
    Py_END_ALLOW_THREADS;
    text_release(kinds);
    if (err < 0) {
        errno = -err;
        PyErr_SetFromErrnoWithFilenameObject(err == -ENOMEM ? PyExc_MemoryError : PyExc_OSError,
                                             path_obj);
        Py_DECREF(path_obj);
        return NULL;
    }
    Py_DECREF(path_obj);
    Py_RETURN_NONE;
}

static PyObject *Result_text(ResultObject *self, PyObject *args)
{
    int top = DEFAULT_TOP, all = 0;
    if (!PyArg_ParseTuple(args, "|ip", &top, &all))
        return NULL;
    char *s = NULL;
    struct gt_emit_meta meta;
    struct shared_text *kinds = emit_meta(self, &meta);
    meta.all_threads = all;
    int err = gt_emit__text(R(self), &meta, top, &s);
    text_release(kinds);
    if (err < 0) {
        errno = -err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    PyObject *out = PyUnicode_FromString(s);
    free(s);
    return out;
}

static PyObject *Result_payload(ResultObject *self, PyObject *noargs)
{
    (void)noargs;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return PyErr_SetFromErrno(PyExc_OSError);
    struct gt_emit_meta meta;
    struct shared_text *kinds = emit_meta(self, &meta);
    int err = gt_emit__payload_json(R(self), &meta, f);
    text_release(kinds);
    fclose(f);
    if (err < 0) {
        free(buf);
        errno = -err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    PyObject *out = PyUnicode_FromStringAndSize(buf, (Py_ssize_t)len);
    free(buf);
    return out;
}

#define META_STR(field)                                                                      \
    static PyObject *Result_get_##field(ResultObject *self, void *c)                         \
    {                                                                                        \
        (void)c;                                                                             \
        return PyUnicode_FromString(self->run->field);                                       \
    }
META_STR(backend)
META_STR(backend_reason)
META_STR(sched_status)
META_STR(python)
META_STR(title)

static PyObject *Result_get_tracer_note(ResultObject *self, void *c)
{
    (void)c;
    if (!self->run->tracer_note[0])
        Py_RETURN_NONE;
    return PyUnicode_FromString(self->run->tracer_note);
}

static PyObject *Result_get_sampling(ResultObject *self, void *c)
{
    (void)c;
    if (!self->run->sampled)
        Py_RETURN_NONE;
    return PyUnicode_FromString(self->run->sampling);
}

static PyObject *Result_get_tool_note(ResultObject *self, void *c)
{
    (void)c;
    if (!self->run->tool_note[0])
        Py_RETURN_NONE;
    return PyUnicode_FromString(self->run->tool_note);
}

/* Sampling mode's own figures, or None: the sampler's GIL use is not the user's. */
static PyObject *Result_get_sampler(ResultObject *self, void *c)
{
    (void)c;
    if (!self->run->sampled)
        Py_RETURN_NONE;
    const struct gt_sampler_stats *st = &self->run->sampler;
    return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:i}",
                         "interval_ns", (unsigned long long)st->interval_ns,
                         "samples", (unsigned long long)st->samples,
                         "skipped", (unsigned long long)st->skipped,
                         "failed", (unsigned long long)st->failed,
                         "held_ns", (unsigned long long)st->held_ns,
                         "max_held_ns", (unsigned long long)st->max_held_ns,
                         "waited_ns", (unsigned long long)st->waited_ns, "tid", (int)st->tid);
}

#define RES_U64(name, expr)                                                                  \
    static PyObject *Result_get_##name(ResultObject *self, void *c)                          \
    {                                                                                        \
        (void)c;                                                                             \
        return PyLong_FromUnsignedLongLong((unsigned long long)(expr));                      \
    }
RES_U64(t0_ns, R(self)->t0)
RES_U64(t1_ns, R(self)->t1)
RES_U64(duration_ns, R(self)->t1 - R(self)->t0)
RES_U64(event_count, self->run->meta.event_count)
RES_U64(dropped_events, self->run->meta.dropped_events)
RES_U64(gil_events, self->run->gil_events)
RES_U64(gil_dropped, self->run->meta.gil_dropped)
RES_U64(sched_lost, self->run->meta.sched_lost)
RES_U64(gil_aggregated, self->run->meta.gil_aggregated)
RES_U64(calls_aggregated, self->run->meta.calls_aggregated)
RES_U64(sched_aggregated, self->run->meta.sched_aggregated)

static PyObject *Result_get_gil_known(ResultObject *self, void *c)
{
    (void)c;
    return PyBool_FromLong(R(self)->gil_known);
}

static PyObject *Result_get_free_threaded(ResultObject *self, void *c)
{
    (void)c;
    return PyBool_FromLong(R(self)->free_threaded);
}

#define GET(name, doc) {#name, (getter)Result_get_##name, NULL, doc, NULL}
static PyGetSetDef Result_getset[] = {
    GET(backend, "GIL probe that ran: hooks, bpf or none"),
    GET(backend_reason, "why that backend ran, or why another did not"),
    GET(sched_status, "where OS states came from, or why they are missing"),
    GET(python, "interpreter version"),
    GET(title, "title of the trace"),
    GET(t0_ns, "session start, CLOCK_MONOTONIC ns"),
    GET(t1_ns, "session end, CLOCK_MONOTONIC ns"),
    GET(duration_ns, "t1_ns - t0_ns"),
    GET(event_count, "call events recorded"),
    GET(dropped_events, "call events not recorded because max_events was reached"),
    GET(gil_events, "GIL events recorded"),
    GET(gil_dropped, "GIL events lost"),
    GET(sched_lost, "scheduler records lost"),
    GET(gil_aggregated, "GIL events past max_events kept as aggregates (exact totals)"),
    GET(calls_aggregated, "call events past max_events kept as per-thread call trees"),
    GET(sched_aggregated, "scheduler records past max_events kept as aggregates"),
    GET(gil_known, "whether a GIL probe ran"),
    GET(free_threaded, "a free-threaded build's trace: the GIL figures are lock contention "
                       "(held = running, wait = parked, blame = waiter <- waker)"),
    GET(tracer_note, "threads the function tracer missed (a sentence), or None"),
    GET(sampling, "sampling mode: interval, samples and the sampler's GIL use (a sentence), or None"),
    GET(tool_note, "what giltracer's own threads (in no view) cost the traced code (a sentence), "
                   "or None"),
    GET(sampler, "sampling mode: the sampler's figures (dict: interval_ns, samples, skipped, "
                 "failed, held_ns, max_held_ns, waited_ns, tid), or None"),
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef Result_methods[] = {
    {"threads", (PyCFunction)Result_threads, METH_NOARGS, "per-thread identity and counts"},
    {"summary", (PyCFunction)Result_summary, METH_NOARGS, "per-thread GIL and OS summary"},
    {"tool", (PyCFunction)Result_tool, METH_NOARGS,
     "giltracer's own threads, in no view: {threads: their summaries, caused_ns, caused_waits}"},
    {"blame", (PyCFunction)Result_blame, METH_NOARGS, "GIL blame rows, largest first"},
    {"crosscheck", (PyCFunction)Result_crosscheck, METH_NOARGS,
     "per-thread summary from the bpf probe's view (crosscheck=True), else None"},
    {"spans", (PyCFunction)Result_spans, METH_VARARGS,
     "spans(tid) -> [(start_ns, end_ns, name, depth, flags)]"},
    {"gil_intervals", (PyCFunction)Result_gil_intervals, METH_VARARGS,
     "gil_intervals(tid) -> [(start_ns, end_ns, state)] (0 released, 1 wait, 2 held)"},
    {"park_wakers", (PyCFunction)Result_park_wakers, METH_VARARGS,
     "park_wakers(tid) -> [(start_ns, end_ns, waker_tid)]: a free-threaded build's parked intervals that blame uses"},
    {"os_intervals", (PyCFunction)Result_os_intervals, METH_VARARGS,
     "os_intervals(tid) -> [(start_ns, end_ns, state)] (0 on-cpu, 1 preempted, 2 blocked)"},
    {"functions", (PyCFunction)Result_functions, METH_NOARGS,
     "[(name, file, line, is_c)] indexed by function id"},
    {"profile", (PyCFunction)Result_profile, METH_VARARGS,
     "profile(tid=None, outer_frames=False, all_threads=False) -> call-tree nodes (parent, func, calls, total_ns, self_ns, "
     "total_states, self_states), parents first; None = merged over threads"},
    {"profile_functions", (PyCFunction)Result_profile_functions, METH_VARARGS,
     "profile_functions(tid=None, outer_frames=False, all_threads=False) -> (func, calls, total_ns, self_ns, total_states, "
     "self_states, wait_caused_ns) per function"},
    {"save", (PyCFunction)Result_save, METH_VARARGS,
     "save(path, format, tab=None, theme=None): 'json' or 'html' (opened on `tab`, in `theme`)"},
    {"text", (PyCFunction)Result_text, METH_VARARGS, "text(top_n=5, all_threads=False) -> summary table"},
    {"payload", (PyCFunction)Result_payload, METH_NOARGS, "the viewer's JSON payload"},
    {"what_if", (PyCFunction)Result_what_if, METH_VARARGS,
     "what_if(cpus, ft_factor, top=5, handoff_ns=0, event_ns=0, parallel_speed=1) -> the "
     "no-GIL prediction (core/analyze/whatif.h)"},
    {"set_what_if", (PyCFunction)Result_set_what_if, METH_VARARGS,
     "set_what_if(cpus, ft_factor, handoff_ns=0, event_ns=0, parallel_speed=1): the payload's "
     "what_if is predicted with these"},
    {"set_lock_kinds", (PyCFunction)Result_set_lock_kinds, METH_VARARGS,
     "set_lock_kinds(json or None): the payload's lock_kinds object (free-threaded, lock-kind probe)"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject Result_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "giltracer._core.Result",
    .tp_basicsize = sizeof(ResultObject),
    .tp_dealloc = (destructor)Result_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The merged result of a session.",
    .tp_methods = Result_methods,
    .tp_getset = Result_getset,
};

/* ------------------------------------------------------------------ module */

static PyObject *mod_probe_info(PyObject *m, PyObject *noargs)
{
    (void)m;
    (void)noargs;
    int locked = session_enter();
    PyObject *info = gt_session__probe_info();
    session_leave(locked);
    return info;
}

static PyObject *mod_build_info(PyObject *m, PyObject *noargs)
{
    (void)m;
    (void)noargs;
    const char *why = NULL;
    int bpf = gt_bpf__available(&why);
    gt_clock__init();
#ifdef Py_GIL_DISABLED
    PyObject *free_threaded = Py_True;
#else
    PyObject *free_threaded = Py_False;
#endif
    return Py_BuildValue("{s:s,s:s,s:O,s:s,s:O}", "clock", gt_clock__source(), "tracer",
                         gt_tracer__mechanism(), "bpf_available", bpf == 0 ? Py_True : Py_False,
                         "bpf_why", bpf == 0 ? "" : (why ? why : "unavailable"),
                         "free_threaded", free_threaded);
}

static PyObject *mod_live_profiles(PyObject *m, PyObject *noargs)
{
    (void)m;
    (void)noargs;
    return PyLong_FromLong(live_profiles);
}

static PyObject *mod_stop_active(PyObject *m, PyObject *noargs)
{
    (void)m;
    (void)noargs;
    int locked = session_enter();
    int rc = gt_session__stop_active();
    session_leave(locked);
    if (rc < 0)
        return NULL;
    return PyBool_FromLong(rc);
}

/* run_code(code, globals, locals=None): exec/eval of a code object from C, so that the
 * magics and the CLI add no frame of their own below the trace's start: the tracer
 * excludes this module's C functions, and the user's code is depth 1 for max_depth. */
static PyObject *mod_run_code(PyObject *m, PyObject *args)
{
    (void)m;
    PyObject *code, *globals, *locals = Py_None;
    if (!PyArg_ParseTuple(args, "O!O!|O:run_code", &PyCode_Type, &code, &PyDict_Type, &globals,
                          &locals))
        return NULL;
    if (locals == Py_None)
        locals = globals;
    else if (!PyMapping_Check(locals)) {
        PyErr_SetString(PyExc_TypeError, "run_code: locals must be a mapping or None");
        return NULL;
    }
    if (PyDict_GetItemString(globals, "__builtins__") == NULL &&
        PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins()) < 0)
        return NULL;
    return PyEval_EvalCode(code, globals, locals);
}

/* call_untraced(f, *args): f(*args), called from C. The tracer records neither this
 * call (it excludes this module's C functions) nor f's when f is a C function (it sees
 * the calls bytecode makes): the CLI's own plumbing while the script is traced. */
static PyObject *mod_call_untraced(PyObject *m, PyObject *args)
{
    (void)m;
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    if (n < 1) {
        PyErr_SetString(PyExc_TypeError, "call_untraced() needs a function to call");
        return NULL;
    }
    PyObject *rest = PyTuple_GetSlice(args, 1, n);
    if (!rest)
        return NULL;
    PyObject *out = PyObject_Call(PyTuple_GET_ITEM(args, 0), rest, NULL);
    Py_DECREF(rest);
    return out;
}

/* A followed child's SIGTERM (core/support/termwatch.h), for _giltracer_boot. */
static PyObject *mod_watch_sigterm(PyObject *m, PyObject *noargs)
{
    (void)m;
    (void)noargs;
    return PyBool_FromLong(gt_termwatch__install() == 0);
}

static PyObject *mod_sigterm_default(PyObject *m, PyObject *noargs)
{
    (void)m;
    (void)noargs;
    return PyBool_FromLong(gt_termwatch__default() == 0);
}

static PyObject *mod_die_of_sigterm(PyObject *m, PyObject *noargs)
{
    (void)m;
    (void)noargs;
    int err = gt_termwatch__die();
    errno = -err;
    return PyErr_SetFromErrno(PyExc_OSError);
}

static PyObject *mod_after_fork_child(PyObject *m, PyObject *noargs)
{
    (void)m;
    (void)noargs;
    gt_tracer__after_fork_child();
    gt_interps__after_fork_child();
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"_after_fork_child", mod_after_fork_child, METH_NOARGS,
     "os.register_at_fork(after_in_child=...) hook: drop the parent's session"},
    {"probe_info", mod_probe_info, METH_NOARGS,
     "install the GIL hooks if needed and report what they found"},
    {"build_info", mod_build_info, METH_NOARGS, "clock, tracer mechanism, bpf availability"},
    {"_live_profiles", mod_live_profiles, METH_NOARGS,
     "test-only: profiles built by Result.profile()/profile_functions() not freed yet"},
    {"stop_active", mod_stop_active, METH_NOARGS,
     "stop_active() -> bool: stop and release the process's active session, whoever holds "
     "it (True if there was one)"},
    {"_lock_kinds_open", gt_py__lock_kinds_open, METH_NOARGS,
     "_lock_kinds_open() -> (ok, text): load the lock-kind probe once (root, free-threaded "
     "builds); text says what is probed, or why not"},
    {"_lock_kinds_start", gt_py__lock_kinds_start, METH_NOARGS,
     "_lock_kinds_start() -> bool: open its gate"},
    {"_lock_kinds_stop", gt_py__lock_kinds_stop, METH_NOARGS,
     "_lock_kinds_stop() -> (events or None, lost): close the gate; events are "
     "(ts_ns, addr, tid, kind, flags, type name)"},
    {"run_code", mod_run_code, METH_VARARGS,
     "run_code(code, globals, locals=None): exec (or eval) a code object; the tracer "
     "does not record this call"},
    {"watch_sigterm", mod_watch_sigterm, METH_NOARGS,
     "watch_sigterm() -> bool: note every SIGTERM before the handler it finds (Python's) "
     "runs, so that a followed child's spooler answers one the main thread does not "
     "(Session.spool returns -EINTR); False if SIGTERM's disposition is the default or "
     "ignored"},
    {"sigterm_default", mod_sigterm_default, METH_NOARGS,
     "sigterm_default() -> bool: SIGTERM's disposition back to the default if it is "
     "watch_sigterm's (the followed child's session is over: the signal kills as it would "
     "untraced, with no Python handler that a wait might keep from running)"},
    {"die_of_sigterm", mod_die_of_sigterm, METH_NOARGS,
     "die_of_sigterm(): the process dies of SIGTERM now (its default disposition), from any "
     "thread; raises OSError only if that failed"},
    {"call_untraced", mod_call_untraced, METH_VARARGS,
     "call_untraced(f, *args): f(*args); the tracer records neither this call nor f's, "
     "where f is a C function"},
    {NULL, NULL, 0, NULL},
};

static int module_exec(PyObject *m)
{
    if (PyType_Ready(&Session_Type) < 0 || PyType_Ready(&Result_Type) < 0)
        return -1;
    if (PyModule_AddObjectRef(m, "Session", (PyObject *)&Session_Type) < 0 ||
        PyModule_AddObjectRef(m, "Result", (PyObject *)&Result_Type) < 0)
        return -1;
    if (rows_init(m) < 0)
        return -1;
    if (PyModule_AddStringConstant(m, "RELEASED_MESSAGE", gt_session__released_message) < 0)
        return -1;
    /* A forked child (multiprocessing) must not keep the parent's profile hooks: say so
     * once, here, whoever imports the core (the API or a raw Session). */
    PyObject *os = PyImport_ImportModule("os"), *child = NULL, *r = NULL;
    int err = -1;
    if (!os)
        goto cleanup;
    child = PyObject_GetAttrString(m, "_after_fork_child");
    if (!child)
        goto cleanup;
    if (PyObject_HasAttrString(os, "register_at_fork")) {
        PyObject *reg = PyObject_GetAttrString(os, "register_at_fork");
        PyObject *args = PyTuple_New(0), *kw = Py_BuildValue("{s:O}", "after_in_child", child);
        if (reg && args && kw)
            r = PyObject_Call(reg, args, kw);
        Py_XDECREF(reg);
        Py_XDECREF(args);
        Py_XDECREF(kw);
        if (!r)
            goto cleanup;
    }
    gt_clock__init();
    err = 0;
cleanup:
    Py_XDECREF(r);
    Py_XDECREF(child);
    Py_XDECREF(os);
    return err;
}

/* Free-threaded builds: the core runs without the GIL (the tracer's callbacks mark
 * themselves in flight for stop, it reads other threads' frames with the world stopped,
 * its tables are per thread: `make test-tsan-ft`), so importing it leaves the GIL off. */
static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, (void *)module_exec},
#ifdef Py_GIL_DISABLED
    {Py_mod_gil, Py_MOD_GIL_NOT_USED},
#endif
    {0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "giltracer._core",
    .m_doc = "giltracer's C core: function tracer, GIL probes, merge and emitters.",
    .m_size = 0,
    .m_methods = module_methods,
    .m_slots = module_slots,
};

PyMODINIT_FUNC PyInit__core(void)
{
    return PyModuleDef_Init(&module_def);
}

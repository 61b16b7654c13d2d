/* SPDX-License-Identifier: MIT */
/* Test helper (built by tests/test_tracer_robustness.py): C functions whose PyMethodDef
 * is allocated per function and freed with it, bound to a capsule (pybind11 2) or to a
 * record object (pybind11 3);
 * and Python code run in a thread that C started. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static PyObject *noop(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    Py_RETURN_NONE;
}

static void free_def(PyObject *capsule)
{
    PyMethodDef *def = PyCapsule_GetPointer(capsule, "gt_dyndef.def");
    if (!def)
        return;
    free((char *)def->ml_name);
    memset(def, 0xdd, sizeof(*def)); /* a use after free reads garbage, not the old name */
    free(def);
}

/* What pybind11 3 binds a function to: an object that owns its record (here, the
 * PyMethodDef) and frees it with itself. */
typedef struct {
    PyObject_HEAD
    PyMethodDef *def;
} Record;

static void record_dealloc(PyObject *self)
{
    PyMethodDef *def = ((Record *)self)->def;
    if (def) {
        free((char *)def->ml_name);
        memset(def, 0xdd, sizeof(*def));
        free(def);
    }
    PyObject_Free(self);
}

static PyTypeObject Record_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gt_dyndef.function_record",
    .tp_basicsize = sizeof(Record),
    .tp_dealloc = record_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
};

/* make(name, holder="capsule"|"record") -> a new C function `name` bound to its holder
 * (m_self), which owns the PyMethodDef: it dies with the function. */
static PyObject *make(PyObject *module, PyObject *args)
{
    (void)module;
    const char *name, *holder_kind = "capsule";
    if (!PyArg_ParseTuple(args, "s|s", &name, &holder_kind))
        return NULL;
    PyMethodDef *def = calloc(1, sizeof(*def));
    char *copy = strdup(name);
    if (!def || !copy) {
        free(def);
        free(copy);
        return PyErr_NoMemory();
    }
    def->ml_name = copy;
    def->ml_meth = noop;
    def->ml_flags = METH_NOARGS;
    PyObject *holder;
    if (strcmp(holder_kind, "record") == 0) {
        Record *r = PyObject_New(Record, &Record_Type);
        if (r)
            r->def = def;
        holder = (PyObject *)r;
    } else {
        holder = PyCapsule_New(def, "gt_dyndef.def", free_def);
    }
    if (!holder) {
        free(copy);
        free(def);
        return NULL;
    }
    PyObject *modname = PyUnicode_FromString("gt_dyndef");
    PyObject *f = modname ? PyCFunction_NewEx(def, holder, modname) : NULL;
    Py_XDECREF(modname);
    Py_DECREF(holder);
    return f;
}

struct c_call {
    PyObject *fn;
    unsigned delay_us;
};

static void *c_thread(void *arg)
{
    struct c_call *c = arg;
    if (c->delay_us)
        usleep(c->delay_us);
    PyGILState_STATE g = PyGILState_Ensure(); /* a thread state threading never saw */
    PyObject *r = PyObject_CallObject(c->fn, NULL);
    if (!r)
        PyErr_Print();
    Py_XDECREF(r);
    Py_DECREF(c->fn);
    PyGILState_Release(g);
    free(c);
    return NULL;
}

/* call_in_c_thread(fn, delay_us=0): fn() in a thread started by C, not by Python,
 * which creates its thread state after `delay_us`. */
static PyObject *call_in_c_thread(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *fn;
    unsigned delay_us = 0;
    if (!PyArg_ParseTuple(args, "O|I", &fn, &delay_us))
        return NULL;
    struct c_call *c = malloc(sizeof(*c));
    if (!c)
        return PyErr_NoMemory();
    c->fn = fn;
    c->delay_us = delay_us;
    Py_INCREF(fn);
    pthread_t th;
    if (pthread_create(&th, NULL, c_thread, c) != 0) {
        Py_DECREF(fn);
        free(c);
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    pthread_detach(th);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"call_in_c_thread", call_in_c_thread, METH_VARARGS,
     "call_in_c_thread(fn, delay_us=0): fn() in a thread started by C"},
    {"make", make, METH_VARARGS, "make(name, holder='capsule') -> a C function with its own PyMethodDef"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "gt_dyndef", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_gt_dyndef(void)
{
    if (PyType_Ready(&Record_Type) < 0)
        return NULL;
    return PyModule_Create(&moddef);
}

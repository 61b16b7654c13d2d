/* SPDX-License-Identifier: MIT */
/* Test helper (built by tests/test_hardening_tracer.py): C functions whose PyMethodDef
 * is allocated per function and freed with it, bound to a capsule, as pybind11 does;
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

/* make(name) -> a new C function `name`; its PyMethodDef dies with it. */
static PyObject *make(PyObject *module, PyObject *arg)
{
    (void)module;
    const char *name = PyUnicode_AsUTF8(arg);
    if (!name)
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
    PyObject *capsule = PyCapsule_New(def, "gt_dyndef.def", free_def);
    if (!capsule) {
        free(copy);
        free(def);
        return NULL;
    }
    PyObject *modname = PyUnicode_FromString("gt_dyndef");
    PyObject *f = modname ? PyCFunction_NewEx(def, capsule, modname) : NULL;
    Py_XDECREF(modname);
    Py_DECREF(capsule);
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
    {"make", make, METH_O, "make(name) -> a C function with its own PyMethodDef"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "gt_dyndef", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_gt_dyndef(void)
{
    return PyModule_Create(&moddef);
}

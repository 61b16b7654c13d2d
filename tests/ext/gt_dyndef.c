/* SPDX-License-Identifier: MIT */
/* Test helper (built by tests/test_hardening_tracer.py): C functions whose PyMethodDef
 * is allocated per function and freed with it, bound to a capsule, as pybind11 does;
 * and Python code run in a thread that C started. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

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

static void *c_thread(void *arg)
{
    PyGILState_STATE g = PyGILState_Ensure(); /* a thread state threading never saw */
    PyObject *r = PyObject_CallObject((PyObject *)arg, NULL);
    if (!r)
        PyErr_Print();
    Py_XDECREF(r);
    Py_DECREF((PyObject *)arg);
    PyGILState_Release(g);
    return NULL;
}

/* call_in_c_thread(fn): run fn() in a thread started by C, not by Python. */
static PyObject *call_in_c_thread(PyObject *module, PyObject *fn)
{
    (void)module;
    pthread_t th;
    Py_INCREF(fn);
    if (pthread_create(&th, NULL, c_thread, fn) != 0) {
        Py_DECREF(fn);
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    pthread_detach(th);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"call_in_c_thread", call_in_c_thread, METH_O, "call_in_c_thread(fn): fn() in a C thread"},
    {"make", make, METH_O, "make(name) -> a C function with its own PyMethodDef"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "gt_dyndef", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_gt_dyndef(void)
{
    return PyModule_Create(&moddef);
}

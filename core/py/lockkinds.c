/* SPDX-License-Identifier: MIT */
/* The lock-kind probe (core/probes/bpf/lockprobe.h) at the Python boundary: opened once
 * per process, started and stopped around a trace by the API (api.py), which labels
 * the park probe's intervals with what it read. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <unistd.h>

#include "lockkinds.h"
#include "lockprobe.h"

static struct gt_lockprobe *probe;
static pid_t probe_owner;
static char open_why[512];
static int opened; /* 1: tried in this process (probe or open_why says how it went) */

PyObject *gt_py__lock_kinds_open(PyObject *m, PyObject *noargs)
{
    (void)m;
    (void)noargs;
    if (opened && probe_owner != getpid()) { /* a forked child: the parent's handle */
        probe = NULL;
        opened = 0;
    }
    if (!opened) {
        struct gt_lockprobe_opts o = {.pid = getpid(),
                                      .park_fn = dlsym(RTLD_DEFAULT, "_PyParkingLot_Park"),
                                      .type_type = (const void *)&PyType_Type};
        const char *why = NULL;
        int err;
        Py_BEGIN_ALLOW_THREADS
        err = gt_lockprobe__open(&probe, &o, &why);
        Py_END_ALLOW_THREADS
        snprintf(open_why, sizeof(open_why), "%s",
                 err ? (why ? why : "lock kinds: the probe could not be loaded")
                     : gt_lockprobe__where(probe));
        probe_owner = getpid();
        opened = 1;
    }
    return Py_BuildValue("(Os)", probe ? Py_True : Py_False, open_why);
}

PyObject *gt_py__lock_kinds_start(PyObject *m, PyObject *noargs)
{
    (void)m;
    (void)noargs;
    if (!probe || probe_owner != getpid() || gt_lockprobe__start(probe) != 0)
        Py_RETURN_FALSE;
    Py_RETURN_TRUE;
}

static int add_event(void *ctx, const struct gt_lock_event *e)
{
    /* tname as bytes: the probe cut it at a fixed length, maybe inside a character
     * (lockkinds.type_name decodes it) */
    PyObject *t = Py_BuildValue("(KKIHHy)", (unsigned long long)e->ts,
                                (unsigned long long)e->addr, (unsigned int)e->tid,
                                (unsigned short)e->kind, (unsigned short)e->flags, e->tname);
    int rc = t ? PyList_Append((PyObject *)ctx, t) : -1;
    Py_XDECREF(t);
    return rc ? 1 : 0;
}

PyObject *gt_py__lock_kinds_stop(PyObject *m, PyObject *noargs)
{
    (void)m;
    (void)noargs;
    if (!probe || probe_owner != getpid())
        return Py_BuildValue("(OK)", Py_None, 0ULL);
    PyObject *list = PyList_New(0);
    if (!list)
        return NULL;
    uint64_t lost = 0;
    int rc = gt_lockprobe__stop(probe, add_event, list, &lost);
    if (rc > 0 || PyErr_Occurred()) {
        Py_DECREF(list);
        return PyErr_Occurred() ? NULL : PyErr_NoMemory();
    }
    if (rc < 0) {
        Py_DECREF(list);
        return PyErr_Format(PyExc_OSError, "lock kinds: reading the ring buffer failed (%d)", rc);
    }
    PyObject *r = Py_BuildValue("(OK)", list, (unsigned long long)lost);
    Py_DECREF(list);
    return r;
}

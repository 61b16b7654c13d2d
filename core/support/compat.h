/* SPDX-License-Identifier: MIT */
/* Small shims for C API functions newer than Python 3.9. */
#ifndef GT_COMPAT_H
#define GT_COMPAT_H

#include <Python.h>

#if PY_VERSION_HEX < 0x030A0000
static inline PyObject *gt_newref(PyObject *o)
{
    Py_INCREF(o);
    return o;
}
static inline PyObject *gt_xnewref(PyObject *o)
{
    Py_XINCREF(o);
    return o;
}
#define Py_NewRef(o) gt_newref((PyObject *)(o))
#define Py_XNewRef(o) gt_xnewref((PyObject *)(o))
static inline int PyModule_AddObjectRef(PyObject *m, const char *name, PyObject *value)
{
    Py_INCREF(value);
    if (PyModule_AddObject(m, name, value) < 0) {
        Py_DECREF(value);
        return -1;
    }
    return 0;
}
#endif

/* A per-object lock on free-threaded builds (3.13+); the GIL does it before. */
#if PY_VERSION_HEX < 0x030D0000
#define Py_BEGIN_CRITICAL_SECTION(op) {
#define Py_END_CRITICAL_SECTION() }
#endif

/* Report the pending exception as unraisable, printed as "Exception ignored <what>". */
static inline void gt_write_unraisable(const char *what)
{
#if PY_VERSION_HEX >= 0x030D0000
    PyErr_FormatUnraisable("Exception ignored %s", what);
#else
    _PyErr_WriteUnraisableMsg(what, NULL);
#endif
}

/* Is the interpreter shutting down (modules being torn down, imports refused)? */
static inline int gt_is_finalizing(void)
{
#if PY_VERSION_HEX >= 0x030D0000
    return Py_IsFinalizing();
#else
    return _Py_IsFinalizing();
#endif
}

#endif /* GT_COMPAT_H */

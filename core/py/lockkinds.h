/* SPDX-License-Identifier: MIT */
/* _core's lock-kind probe functions (lockkinds.c), for module.c's method table. */
#ifndef GT_PY_LOCKKINDS_H
#define GT_PY_LOCKKINDS_H

#include <Python.h>

PyObject *gt_py__lock_kinds_open(PyObject *m, PyObject *noargs);
PyObject *gt_py__lock_kinds_start(PyObject *m, PyObject *noargs);
PyObject *gt_py__lock_kinds_stop(PyObject *m, PyObject *noargs);

#endif /* GT_PY_LOCKKINDS_H */

/* A no-op C profile hook: the floor for any profile-hook tracer.
 *
 * install()   PyEval_SetProfile(noop, NULL) on the calling thread.
 * bootstrap   a C callable for threading.setprofile(): the first profile event of a
 *             new thread calls it, and it replaces itself with the no-op C hook on
 *             that thread (the trick viztracer and giltracer use before 3.12).
 * uninstall() PyEval_SetProfile(NULL, NULL) on the calling thread.
 *
 * On 3.12+ PyEval_SetProfile is the legacy profile API (implemented on top of
 * sys.monitoring by the interpreter); it is still what "a no-op C profile hook" means.
 * Built by bench/noop_hook.py with the running interpreter's headers. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>

static int noop(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    (void)obj; (void)frame; (void)what; (void)arg;
    return 0;
}

static PyObject *install(PyObject *self, PyObject *unused)
{
    (void)self; (void)unused;
    PyEval_SetProfile(noop, NULL);
    Py_RETURN_NONE;
}

static PyObject *uninstall(PyObject *self, PyObject *unused)
{
    (void)self; (void)unused;
    PyEval_SetProfile(NULL, NULL);
    Py_RETURN_NONE;
}

static PyObject *bootstrap(PyObject *self, PyObject *args)
{
    (void)self; (void)args;
    PyEval_SetProfile(noop, NULL);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"install", install, METH_NOARGS, "install the no-op hook on this thread"},
    {"uninstall", uninstall, METH_NOARGS, "remove the profile hook from this thread"},
    {"bootstrap", bootstrap, METH_VARARGS, "threading.setprofile() target"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moddef = {
    PyModuleDef_HEAD_INIT, "_gt_noop_hook", "no-op C profile hook (benchmark floor)", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__gt_noop_hook(void)
{
    return PyModule_Create(&moddef);
}

/* tylo._launch: the module, and LauncherBase, the base type of tylo's launchers, which
 * tries a launcher's InlineLaunch (_launch.c) without entering Python. Split from
 * _launch.c so that the inline launch and the launcher's dispatch are each one file. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include "_launch.h"

/* LauncherBase: the base of tylo.kernel.launch.Launcher. Calling a launcher with
 * positional arguments only first tries its inline launch (when that is an InlineLaunch)
 * without entering Python; otherwise, or when it declines, it calls the launcher's
 * Python method _launch(*args, **kwargs), which decides. */
typedef struct {
    PyObject_HEAD
    PyObject *inline_fn;
    PyObject *dims;
} LauncherBase;

static PyObject *s_launch, *zero;

static void lb_dealloc(LauncherBase *self) {
    Py_CLEAR(self->inline_fn);
    Py_CLEAR(self->dims);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *lb_call(LauncherBase *self, PyObject *args, PyObject *kw) {
    if ((kw == NULL || PyDict_GET_SIZE(kw) == 0) && self->inline_fn &&
        Py_TYPE(self->inline_fn) == &InlineLaunchType && self->dims) {
        PyObject *r = il_launch((InlineLaunch *)self->inline_fn, self->dims, args, zero, Py_None);
        if (!r) return NULL;
        int launched = r == Py_True;
        Py_DECREF(r);
        if (launched) Py_RETURN_NONE;
    }
    PyObject *method = PyObject_GetAttr((PyObject *)self, s_launch);
    if (!method) return NULL;
    PyObject *res = PyObject_Call(method, args, kw);
    Py_DECREF(method);
    return res;
}

static PyMemberDef lb_members[] = {
    {"inline", T_OBJECT, offsetof(LauncherBase, inline_fn), 0,
     "the inline launch tried first (None: none yet)"},
    {"dims", T_OBJECT, offsetof(LauncherBase, dims), 0,
     "(gx, gy, gz, bx, by, bz), or None for a grid the checked path must report"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject LauncherBaseType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tylo._launch.LauncherBase",
    .tp_basicsize = sizeof(LauncherBase),
    .tp_dealloc = (destructor)lb_dealloc,
    .tp_call = (ternaryfunc)lb_call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "The base of tylo's launchers: the inline launch tried without Python.",
    .tp_members = lb_members,
    .tp_new = PyType_GenericNew,
};

/* The guard of an InlineLaunch on this launch: 1 when it holds, 0 when not, -1 with an
 * exception. The values as the reader path gives them (pointers and ints as ints, floats,
 * a tensor map's bytes, statics as they are); a guard with tylo_launch_guard (the bounds
 * guards, which read each array's extent) also gets the arguments and the dimensions. */
int il_guard(InlineLaunch *self, PyObject *args, PyObject *dims) {
    PyObject *vals = PyTuple_New(self->nargs);
    if (!vals) return -1;
    for (Py_ssize_t i = 0; i < self->nargs; i++) {
        PyObject *x;
        switch (self->args[i].kind) {
        case K_BUFFER:
        case K_OWNED:
        case K_TORCH: x = PyLong_FromUnsignedLongLong(self->values[i].u); break;
        case K_FLOAT: x = PyFloat_FromDouble(self->values[i].d); break;
        case K_TENSOR_MAP: /* its value is its bytes, as on the reader path */
            x = PyBytes_FromStringAndSize(self->buffer + self->args[i].raw_offset,
                                          self->args[i].raw_size);
            break;
        default: x = PyTuple_GET_ITEM(args, i); Py_INCREF(x);
        }
        if (!x) {
            Py_DECREF(vals);
            return -1;
        }
        PyTuple_SET_ITEM(vals, i, x);
    }
    PyObject *ok = self->guard_sees_launch
                       ? PyObject_CallFunctionObjArgs(self->guard, vals, args, dims, NULL)
                       : PyObject_CallOneArg(self->guard, vals);
    Py_DECREF(vals);
    if (!ok) return -1;
    int truth = PyObject_IsTrue(ok);
    Py_DECREF(ok);
    return truth;
}

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "tylo._launch",
    "The inline launch path in C (see tylo.kernel.fastpath).", -1, NULL, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__launch(void) {
    if (inline_launch_ready() < 0 || PyType_Ready(&LauncherBaseType) < 0) return NULL;
    s_launch = PyUnicode_InternFromString("_launch");
    zero = PyLong_FromLong(0);
    if (!s_launch || !zero) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&InlineLaunchType);
    if (PyModule_AddObject(m, "InlineLaunch", (PyObject *)&InlineLaunchType) < 0) {
        Py_DECREF(&InlineLaunchType);
        Py_DECREF(m);
        return NULL;
    }
    /* what InlineLaunch takes beyond the first version: tensor-map arguments (K_TENSOR_MAP,
     * "<size>s" slots); tylo.kernel.fastpath asks before passing them */
    if (PyModule_AddIntConstant(m, "TENSOR_MAPS", 1) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    /* guards called on (values, args, dims) when they have tylo_launch_guard (the bounds
     * guards); an older build leaves such specializations to the Python inline path */
    if (PyModule_AddIntConstant(m, "LAUNCH_GUARDS", 1) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&LauncherBaseType);
    if (PyModule_AddObject(m, "LauncherBase", (PyObject *)&LauncherBaseType) < 0) {
        Py_DECREF(&LauncherBaseType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

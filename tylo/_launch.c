/* tylo._launch: the inline launch path in C (optional; tylo.kernel.fastpath has the same
 * function in Python and uses this one when it was built).
 *
 * An InlineLaunch is made for one specialization, one thread and one tuple of argument
 * types. Called as f(dims, args, shared, stream) it returns True after launching, or
 * False (having launched nothing) when anything differs from what it was made for: then
 * the launcher's reader path decides. What it tests and does, in order:
 *   - len(args), the calling thread, and that tylo's current device in this thread
 *     (tls.ordinal) is the one the function was loaded on;
 *   - each argument: its exact type, then by kind: a tylo buffer's dtype object and
 *     device, a torch tensor's dtype object and get_device(), a static argument's value
 *     (identity or equality), a tensor map's plan (likewise), the device of its array
 *     and its bytes (exactly its parameter's size, else the reader path decides); for an
 *     array whose spec refuses layouts, a DeviceArray's flags (none of the refused bits)
 *     or a tensor's is_contiguous(); a null address (the reader path decides: allowed
 *     only for an empty array);
 *   - the stream: None (the legacy default stream) or an int handle;
 *   - the values: int facts (lo <= v <= hi, v % multiple == 0), pointer alignment, the
 *     kernel's guards (a Python callable on the tuple of values, or, with the attribute
 *     tylo_launch_guard, on (values, args, dims): the bounds guards), and
 *     the dynamic shared memory (dyn <= shared <= 48 KB, or the raised limit in smem);
 *   - then writes the CUlaunchConfig and the values into its own buffer and calls
 *     cuLaunchKernelEx(config, function, kernelParams, NULL) with the GIL released; a
 *     non-zero CUresult is passed to failed(code), which raises.
 * Exceptions from reading an argument (a closed buffer's .ptr) propagate unchanged. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pythread.h>
#include <structmember.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_launch.h"

static PyObject *s_dtype, *s_device, *s_ptr, *s_private_ptr, *s_get_device, *s_data_ptr,
    *s_ordinal, *s_flags, *s_is_contiguous, *s_plan, *s_array, *s_data;

#define CONFIG_BYTES 56

static void il_dealloc(InlineLaunch *self) {
    Py_XDECREF(self->tls);
    Py_XDECREF(self->failed);
    Py_XDECREF(self->guard);
    Py_XDECREF(self->smem);
    Py_XDECREF(self->keep);
    PyMem_Free(self->args);
    PyMem_Free(self->slots);
    PyMem_Free(self->ints);
    PyMem_Free(self->aligns);
    free(self->allocation);
    PyMem_Free(self->params);
    PyMem_Free(self->values);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int as_ll(PyObject *o, long long *out) {
    long long v = PyLong_AsLongLong(o);
    if (v == -1 && PyErr_Occurred()) return -1;
    *out = v;
    return 0;
}

/* InlineLaunch(launch, function, thread, ordinal, tls, failed, guard, smem, dyn,
 *              default_smem, args, slots, ints, aligns, values_end[, attrs, num_attrs])
 * attrs, num_attrs: the config's launch attributes (launchex.cluster_attribute; or none)
 * args: ((kind, type, dtype, device, value[, refuse]), ...); slots: ((arg, code, offset), ...)
 * where code is a struct code, "<size>s" for a tensor map's bytes
 * ints: ((arg, lo, hi, multiple), ...); aligns: ((arg, align), ...) */
static PyObject *il_new(PyTypeObject *type, PyObject *a, PyObject *kw) {
    unsigned long long launch, function, thread, dyn, default_smem, attrs = 0;
    unsigned int num_attrs = 0;
    long ordinal;
    Py_ssize_t values_end;
    PyObject *tls, *failed, *guard, *smem, *args, *slots, *ints, *aligns;
    if (kw && PyDict_GET_SIZE(kw)) {
        PyErr_SetString(PyExc_TypeError, "InlineLaunch takes positional arguments only");
        return NULL;
    }
    if (!PyArg_ParseTuple(a, "KKKlOOOOKKO!O!O!O!n|KI", &launch, &function, &thread, &ordinal,
                          &tls, &failed, &guard, &smem, &dyn, &default_smem, &PyTuple_Type,
                          &args, &PyTuple_Type, &slots, &PyTuple_Type, &ints, &PyTuple_Type,
                          &aligns, &values_end, &attrs, &num_attrs))
        return NULL;
    if (!launch || !PyCallable_Check(failed) || (guard != Py_None && !PyCallable_Check(guard)) ||
        !PyDict_Check(smem) || values_end < CONFIG_BYTES || (attrs == 0) != (num_attrs == 0)) {
        PyErr_SetString(PyExc_ValueError, "InlineLaunch: bad launch, callables, smem, size, attrs");
        return NULL;
    }
    InlineLaunch *self = (InlineLaunch *)type->tp_alloc(type, 0);
    if (!self) return NULL;
    self->launch = (launch_ex_t)(uintptr_t)launch;
    self->function = (void *)(uintptr_t)function;
    self->thread = (unsigned long)thread;
    self->ordinal = ordinal;
    self->dyn = dyn;
    self->default_smem = default_smem;
    Py_INCREF(tls); self->tls = tls;
    Py_INCREF(failed); self->failed = failed;
    if (guard != Py_None) { /* tylo_launch_guard: called on (values, args, dims) */
        Py_INCREF(guard);
        self->guard = guard;
        self->guard_sees_launch = PyObject_HasAttrString(guard, "tylo_launch_guard");
    }
    Py_INCREF(smem); self->smem = smem;
    self->keep = PyTuple_Pack(4, args, slots, ints, aligns); /* owns what ArgSpec borrows */
    if (!self->keep) goto fail;

    self->nargs = PyTuple_GET_SIZE(args);
    self->nslots = PyTuple_GET_SIZE(slots);
    self->nints = PyTuple_GET_SIZE(ints);
    self->naligns = PyTuple_GET_SIZE(aligns);
    self->args = PyMem_Calloc(self->nargs ? self->nargs : 1, sizeof(ArgSpec));
    self->values = PyMem_Calloc(self->nargs ? self->nargs : 1, sizeof(Value));
    self->slots = PyMem_Calloc(self->nslots ? self->nslots : 1, sizeof(Slot));
    self->params = PyMem_Calloc(self->nslots ? self->nslots : 1, sizeof(void *));
    self->ints = PyMem_Calloc(self->nints ? self->nints : 1, sizeof(IntCheck));
    self->aligns = PyMem_Calloc(self->naligns ? self->naligns : 1, sizeof(AlignCheck));
    /* malloc is 16-byte aligned: each value at its declared alignment needs BUFFER_ALIGN */
    self->allocation = calloc(1, (size_t)values_end + 16 + BUFFER_ALIGN);
    if (self->allocation)
        self->buffer = self->allocation + (-(uintptr_t)self->allocation & (BUFFER_ALIGN - 1));
    if (!self->args || !self->values || !self->slots || !self->params || !self->ints ||
        !self->aligns || !self->buffer) {
        PyErr_NoMemory();
        goto fail;
    }
    memcpy(self->buffer + 40, &attrs, 8), memcpy(self->buffer + 48, &num_attrs, 4); /* attrs */
    for (Py_ssize_t i = 0; i < self->nargs; i++) {
        PyObject *t = PyTuple_GET_ITEM(args, i);
        ArgSpec *s = &self->args[i];
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) < 5 || PyTuple_GET_SIZE(t) > 6) goto bad;
        s->kind = (int)PyLong_AsLong(PyTuple_GET_ITEM(t, 0));
        s->type = PyTuple_GET_ITEM(t, 1);
        s->dtype = PyTuple_GET_ITEM(t, 2);
        s->value = PyTuple_GET_ITEM(t, 4);
        if (s->kind < K_BUFFER || s->kind > K_TENSOR_MAP || !PyType_Check(s->type)) goto bad;
        if (s->kind == K_BUFFER || s->kind == K_TORCH || s->kind == K_OWNED ||
            s->kind == K_TENSOR_MAP) {
            s->device = PyLong_AsLong(PyTuple_GET_ITEM(t, 3));
            if (s->device == -1 && PyErr_Occurred()) goto fail;
            if (PyTuple_GET_SIZE(t) == 6) {
                s->refuse = PyLong_AsLong(PyTuple_GET_ITEM(t, 5));
                if (s->refuse == -1 && PyErr_Occurred()) goto fail;
                if (s->refuse & ~(long)(F_NOT_DENSE | F_READ_ONLY)) goto bad;
            }
        }
    }
    for (Py_ssize_t i = 0; i < self->nslots; i++) {
        PyObject *t = PyTuple_GET_ITEM(slots, i);
        Slot *s = &self->slots[i];
        const char *code;
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 3) goto bad;
        s->arg = PyLong_AsSsize_t(PyTuple_GET_ITEM(t, 0));
        code = PyUnicode_AsUTF8(PyTuple_GET_ITEM(t, 1));
        s->offset = PyLong_AsSsize_t(PyTuple_GET_ITEM(t, 2));
        if (!code || PyErr_Occurred()) goto fail;
        s->code = code[0];
        s->size = 8;
        if (s->code >= '1' && s->code <= '9') { /* by-value bytes: "<size>s" */
            char *end;
            s->size = (Py_ssize_t)strtol(code, &end, 10);
            if (end[0] != 's' || end[1] || s->size > 4096 || s->arg < 0 ||
                s->arg >= self->nargs || self->args[s->arg].kind != K_TENSOR_MAP ||
                self->args[s->arg].raw_size)
                goto bad;
            s->code = 's';
            self->args[s->arg].raw_offset = s->offset;
            self->args[s->arg].raw_size = s->size;
        } else if (!strchr("QqiIfd", s->code) || !s->code || code[1]) {
            goto bad;
        } else if (s->code == 'i' || s->code == 'I' || s->code == 'f') {
            s->size = 4;
        }
        if (s->code != 's' && (s->arg < 0 || s->arg >= self->nargs ||
                               self->args[s->arg].kind == K_TENSOR_MAP))
            goto bad; /* a map's one slot is its bytes */
        if (s->offset < CONFIG_BYTES || s->offset + s->size > values_end) goto bad;
        self->params[i] = self->buffer + s->offset;
    }
    for (Py_ssize_t i = 0; i < self->nargs; i++)
        if (self->args[i].kind == K_TENSOR_MAP && !self->args[i].raw_size) goto bad;
    for (Py_ssize_t i = 0; i < self->nints; i++) {
        PyObject *t = PyTuple_GET_ITEM(ints, i);
        IntCheck *c = &self->ints[i];
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 4) goto bad;
        c->arg = PyLong_AsSsize_t(PyTuple_GET_ITEM(t, 0));
        if (c->arg == -1 && PyErr_Occurred()) goto fail;
        if (as_ll(PyTuple_GET_ITEM(t, 1), &c->lo) || as_ll(PyTuple_GET_ITEM(t, 2), &c->hi) ||
            as_ll(PyTuple_GET_ITEM(t, 3), &c->multiple))
            goto fail;
        if (c->arg < 0 || c->arg >= self->nargs || c->multiple < 1) goto bad;
    }
    for (Py_ssize_t i = 0; i < self->naligns; i++) {
        PyObject *t = PyTuple_GET_ITEM(aligns, i);
        AlignCheck *c = &self->aligns[i];
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 2) goto bad;
        c->arg = PyLong_AsSsize_t(PyTuple_GET_ITEM(t, 0));
        c->align = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(t, 1));
        if (PyErr_Occurred()) goto fail;
        if (c->arg < 0 || c->arg >= self->nargs || c->align < 1) goto bad;
    }
    return (PyObject *)self;
bad:
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "InlineLaunch: malformed spec");
fail:
    Py_DECREF(self);
    return NULL;
}

/* 1: equal, 0: not, -1: error */
static int attr_is(PyObject *o, PyObject *name, PyObject *want) {
    PyObject *v = PyObject_GetAttr(o, name);
    if (!v) return -1;
    int r = v == want;
    Py_DECREF(v);
    return r;
}

static int long_result(PyObject *v, long want) {
    if (!v) return -1;
    int r = 0;
    if (PyLong_CheckExact(v)) {
        long got = PyLong_AsLong(v);
        if (got == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            r = 0;
        } else {
            r = got == want;
        }
    }
    Py_DECREF(v);
    return r;
}

/* reads an unsigned 64-bit pointer value; 1 ok, 0 unusable (not an int, out of range),
 * -1 error raised by the attribute or method */
static int ptr_result(PyObject *v, unsigned long long *out) {
    if (!v) return -1;
    int r = 0;
    if (PyLong_CheckExact(v)) {
        unsigned long long p = PyLong_AsUnsignedLongLong(v);
        if (p == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
        } else {
            *out = p;
            r = 1;
        }
    }
    Py_DECREF(v);
    return r;
}

/* o.name as a new reference in *out: 1, or 0 when o has no such attribute (as getattr's
 * default: the reader path decides), or -1 on any other error */
static int get_attr(PyObject *o, PyObject *name, PyObject **out) {
    *out = PyObject_GetAttr(o, name);
    if (*out) return 1;
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
    PyErr_Clear();
    return 0;
}

/* A tensor map (K_TENSOR_MAP): its plan is the one seen (or an equal one), the array it
 * was encoded for is on the device seen, and its bytes, exactly the slot's size, are
 * copied into the slot. 1: so, 0: not (nothing raised), -1: raised. */
static int read_tensor_map(InlineLaunch *self, ArgSpec *s, PyObject *x) {
    PyObject *o, *arr;
    int r = get_attr(x, s_plan, &o);
    if (r <= 0) return r;
    r = o == s->value ? 1 : PyObject_RichCompareBool(o, s->value, Py_EQ); /* as the key */
    Py_DECREF(o);
    if (r <= 0) return r;
    r = get_attr(x, s_array, &arr);
    if (r <= 0) return r;
    r = get_attr(arr, s_device, &o);
    Py_DECREF(arr);
    if (r <= 0) return r;
    r = long_result(o, s->device); /* consumes o */
    if (r <= 0) {
        if (r < 0) PyErr_Clear();
        return 0;
    }
    r = get_attr(x, s_data, &o);
    if (r <= 0) return r;
    r = PyBytes_CheckExact(o) && PyBytes_GET_SIZE(o) == s->raw_size;
    if (r) memcpy(self->buffer + s->raw_offset, PyBytes_AS_STRING(o), (size_t)s->raw_size);
    Py_DECREF(o);
    return r;
}

#define MISS(x) do { result = (x); goto done; } while (0)

/* The launch itself: a new reference to True (launched) or False, or NULL (raised). */
PyObject *il_launch(InlineLaunch *self, PyObject *dims, PyObject *args, PyObject *shared_o,
                    PyObject *stream_o) {
    PyObject *result = Py_False;
    if (!PyTuple_CheckExact(args) || PyTuple_GET_SIZE(args) != self->nargs ||
        !PyTuple_CheckExact(dims) || PyTuple_GET_SIZE(dims) != 6 ||
        PyThread_get_thread_ident() != self->thread)
        MISS(Py_False);
    {
        PyObject *o = PyObject_GetAttr(self->tls, s_ordinal);
        if (!o) {
            PyErr_Clear();
            MISS(Py_False);
        }
        int same = long_result(o, self->ordinal);
        if (same <= 0) {
            if (same < 0) PyErr_Clear();
            MISS(Py_False);
        }
    }
    /* arguments */
    for (Py_ssize_t i = 0; i < self->nargs; i++) {
        PyObject *x = PyTuple_GET_ITEM(args, i);
        ArgSpec *s = &self->args[i];
        Value *v = &self->values[i];
        int r;
        if ((PyObject *)Py_TYPE(x) != s->type) MISS(Py_False);
        switch (s->kind) {
        case K_BUFFER: { /* a DeviceArray (the exact, frozen type): its fields, read from
                          * its instance dict (no properties shadow them) */
            PyObject *d = PyObject_GenericGetDict(x, NULL);
            if (!d) MISS(NULL);
            PyObject *dt = PyDict_GetItemWithError(d, s_dtype); /* borrowed, held by x */
            PyObject *dev = dt ? PyDict_GetItemWithError(d, s_device) : NULL;
            PyObject *f = dev ? PyDict_GetItemWithError(d, s_flags) : NULL;
            PyObject *p = f ? PyDict_GetItemWithError(d, s_ptr) : NULL;
            Py_DECREF(d);
            if (!p) {
                if (PyErr_Occurred()) MISS(NULL);
                MISS(Py_False);
            }
            if (dt != s->dtype || !PyLong_CheckExact(dev) || !PyLong_CheckExact(f) ||
                !PyLong_CheckExact(p))
                MISS(Py_False);
            long device = PyLong_AsLong(dev), flags = PyLong_AsLong(f);
            v->u = PyLong_AsUnsignedLongLong(p);
            if (PyErr_Occurred()) {
                PyErr_Clear();
                MISS(Py_False);
            }
            if (device != s->device || (flags & s->refuse) || !v->u) MISS(Py_False);
            break;
        }
        case K_OWNED:
        case K_TORCH: {
            int torch = s->kind == K_TORCH;
            r = attr_is(x, s_dtype, s->dtype);
            if (r < 0) MISS(NULL);
            if (!r) MISS(Py_False);
            r = long_result(torch ? PyObject_CallMethodNoArgs(x, s_get_device)
                                  : PyObject_GetAttr(x, s_device),
                            s->device);
            if (r < 0) MISS(NULL);
            if (!r) MISS(Py_False);
            if ((s->refuse & F_NOT_DENSE) && torch) {
                PyObject *c = PyObject_CallMethodNoArgs(x, s_is_contiguous);
                if (!c) MISS(NULL);
                int dense = c == Py_True;
                Py_DECREF(c);
                if (!dense) MISS(Py_False);
            }
            PyObject *p;
            if (torch) {
                p = PyObject_CallMethodNoArgs(x, s_data_ptr);
            } else {
                p = PyObject_GetAttr(x, s_private_ptr);
                if (p == Py_None) { /* closed: the property raises the user's error */
                    Py_DECREF(p);
                    p = PyObject_GetAttr(x, s_ptr);
                }
            }
            r = ptr_result(p, &v->u);
            if (r < 0) MISS(NULL);
            if (!r || !v->u) MISS(Py_False); /* null: the reader path decides */
            break;
        }
        case K_INT:
            v->i = PyLong_AsLongLong(x);
            if (v->i == -1 && PyErr_Occurred()) {
                PyErr_Clear();
                MISS(Py_False);
            }
            break;
        case K_FLOAT:
            v->d = PyFloat_AsDouble(x);
            if (v->d == -1.0 && PyErr_Occurred()) {
                PyErr_Clear();
                MISS(Py_False);
            }
            break;
        case K_TENSOR_MAP:
            r = read_tensor_map(self, s, x);
            if (r < 0) MISS(NULL);
            if (!r) MISS(Py_False);
            break;
        default: /* K_STATIC */
            if (x != s->value) {
                r = PyObject_RichCompareBool(x, s->value, Py_EQ);
                if (r < 0) MISS(NULL);
                if (!r) MISS(Py_False);
            }
        }
    }
    /* stream, shared */
    unsigned long long stream = 0, shared;
    if (stream_o != Py_None) {
        if (!PyLong_CheckExact(stream_o)) MISS(Py_False);
        stream = PyLong_AsUnsignedLongLong(stream_o);
        if (stream == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            MISS(Py_False);
        }
    }
    if (!PyLong_CheckExact(shared_o)) MISS(Py_False);
    shared = PyLong_AsUnsignedLongLong(shared_o);
    if (shared == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        MISS(Py_False);
    }
    if (shared < self->dyn) MISS(Py_False);
    if (shared > self->default_smem) {
        PyObject *key = PyLong_FromLong(self->ordinal);
        if (!key) MISS(NULL);
        PyObject *lim = PyDict_GetItemWithError(self->smem, key); /* borrowed */
        Py_DECREF(key);
        if (!lim) {
            if (PyErr_Occurred()) MISS(NULL);
            MISS(Py_False);
        }
        unsigned long long limit = PyLong_AsUnsignedLongLong(lim);
        if (limit == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            MISS(Py_False);
        }
        if (shared > limit) MISS(Py_False);
    }
    /* int facts, alignment */
    for (Py_ssize_t i = 0; i < self->nints; i++) {
        IntCheck *c = &self->ints[i];
        long long x = self->values[c->arg].i;
        if (x < c->lo || x > c->hi || x % c->multiple) MISS(Py_False);
    }
    for (Py_ssize_t i = 0; i < self->naligns; i++) {
        AlignCheck *c = &self->aligns[i];
        if (self->values[c->arg].u % c->align) MISS(Py_False);
    }
    if (self->guard) { /* the kernel's assumptions, as Python: il_guard (_launch_module.c) */
        int truth = il_guard(self, args, dims);
        if (truth < 0) MISS(NULL);
        if (!truth) MISS(Py_False);
    }
    /* the configuration: grid, block (checked to fit 32 bits), shared, stream */
    {
        uint32_t cfg[7];
        for (int d = 0; d < 6; d++) {
            unsigned long long x = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(dims, d));
            if ((x == (unsigned long long)-1 && PyErr_Occurred()) || x == 0 || x > 0xFFFFFFFFull) {
                PyErr_Clear();
                MISS(Py_False);
            }
            cfg[d] = (uint32_t)x;
        }
        if (shared > 0xFFFFFFFFull) MISS(Py_False);
        cfg[6] = (uint32_t)shared;
        memcpy(self->buffer, cfg, sizeof cfg);
        memcpy(self->buffer + 32, &stream, 8); /* hStream; attrs and numAttrs stay as made */
    }
    /* the values, each converted to its parameter's type (ranges checked) */
    for (Py_ssize_t i = 0; i < self->nslots; i++) {
        Slot *s = &self->slots[i];
        Value v = self->values[s->arg];
        char *at = self->buffer + s->offset;
        switch (s->code) {
        case 'Q': memcpy(at, &v.u, 8); break;
        case 'q': memcpy(at, &v.i, 8); break;
        case 'i': {
            if (v.i < INT32_MIN || v.i > INT32_MAX) MISS(Py_False);
            int32_t x = (int32_t)v.i;
            memcpy(at, &x, 4);
            break;
        }
        case 'I': {
            if (v.i < 0 || v.i > (long long)UINT32_MAX) MISS(Py_False);
            uint32_t x = (uint32_t)v.i;
            memcpy(at, &x, 4);
            break;
        }
        case 'f': {
            float x = (float)v.d;
            memcpy(at, &x, 4);
            break;
        }
        case 's': break; /* a tensor map's bytes: copied when read */
        default: memcpy(at, &v.d, 8); /* 'd' */
        }
    }
    {
        int err;
        Py_BEGIN_ALLOW_THREADS
        err = self->launch(self->buffer, self->function, self->params, NULL);
        Py_END_ALLOW_THREADS
        if (err) {
            PyObject *r = PyObject_CallFunction(self->failed, "i", err);
            if (!r) MISS(NULL);
            Py_DECREF(r);
        }
    }
    result = Py_True;
done:
    Py_XINCREF(result);
    return result;
}

static PyObject *il_call(InlineLaunch *self, PyObject *a, PyObject *kw) {
    if ((kw && PyDict_GET_SIZE(kw)) || PyTuple_GET_SIZE(a) != 4) {
        PyErr_SetString(PyExc_TypeError, "InlineLaunch(dims, args, shared, stream)");
        return NULL;
    }
    return il_launch(self, PyTuple_GET_ITEM(a, 0), PyTuple_GET_ITEM(a, 1),
                     PyTuple_GET_ITEM(a, 2), PyTuple_GET_ITEM(a, 3));
}

static PyObject *il_values(InlineLaunch *self, PyObject *unused) {
    /* the packed argument bytes, for tests: one bytes object per parameter */
    (void)unused;
    PyObject *out = PyTuple_New(self->nslots);
    if (!out) return NULL;
    for (Py_ssize_t i = 0; i < self->nslots; i++) {
        PyObject *b = PyBytes_FromStringAndSize(self->buffer + self->slots[i].offset,
                                                self->slots[i].size);
        if (!b) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, i, b);
    }
    return out;
}

static PyMethodDef il_methods[] = {
    {"packed", (PyCFunction)il_values, METH_NOARGS, "The last packed value bytes."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject InlineLaunchType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tylo._launch.InlineLaunch",
    .tp_basicsize = sizeof(InlineLaunch),
    .tp_dealloc = (destructor)il_dealloc,
    .tp_call = (ternaryfunc)il_call,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A launch of one specialization from one thread, inlined (see tylo/_launch.c).",
    .tp_methods = il_methods,
    .tp_new = il_new,
};

int inline_launch_ready(void) {
    if (PyType_Ready(&InlineLaunchType) < 0) return -1;
    s_dtype = PyUnicode_InternFromString("dtype");
    s_device = PyUnicode_InternFromString("device");
    s_ptr = PyUnicode_InternFromString("ptr");
    s_private_ptr = PyUnicode_InternFromString("_ptr");
    s_get_device = PyUnicode_InternFromString("get_device");
    s_data_ptr = PyUnicode_InternFromString("data_ptr");
    s_ordinal = PyUnicode_InternFromString("ordinal");
    s_flags = PyUnicode_InternFromString("flags");
    s_is_contiguous = PyUnicode_InternFromString("is_contiguous");
    s_plan = PyUnicode_InternFromString("plan");
    s_array = PyUnicode_InternFromString("array");
    s_data = PyUnicode_InternFromString("data");
    if (!s_dtype || !s_device || !s_ptr || !s_private_ptr || !s_get_device || !s_data_ptr ||
        !s_ordinal || !s_flags || !s_is_contiguous || !s_plan || !s_array || !s_data)
        return -1;
    return 0;
}

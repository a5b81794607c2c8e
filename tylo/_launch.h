/* tylo._launch: the records an inline launch keeps (see _launch.c for what it does with
 * them). Split from _launch.c so that the code and the data layout are each one file. */
#ifndef TYLO_LAUNCH_H
#define TYLO_LAUNCH_H

#include <Python.h>

typedef int (*launch_ex_t)(const void *config, void *function, void **params, void **extra);

/* K_OWNED: a tylo DeviceBuffer, whose .ptr is a property that raises once the buffer is
 * closed; its _ptr attribute is read instead, and .ptr only when that is None.
 * K_TENSOR_MAP: a TMA tensor map, passed by value: its .plan (identity or equality), the .device of
 * its .array, and its .data (exactly the raw slot's size of bytes, copied into the slot). */
enum { K_BUFFER, K_TORCH, K_INT, K_FLOAT, K_STATIC, K_OWNED, K_TENSOR_MAP };

/* DeviceArray.flags bits (tylo/arrays.py) */
enum { F_NOT_DENSE = 1, F_READ_ONLY = 2 };

typedef struct {
    int kind;
    PyObject *type;   /* borrowed from the spec tuple we keep */
    PyObject *dtype;  /* buffer/torch: the dtype object */
    long device;      /* buffer/torch/tensor map */
    PyObject *value;  /* static: the value; tensor map: the plan */
    long refuse;      /* buffer: flags bits refused; torch: F_NOT_DENSE asks is_contiguous() */
    Py_ssize_t raw_offset, raw_size; /* tensor map: where its bytes go in the buffer */
} ArgSpec;

typedef struct {
    Py_ssize_t arg;   /* which argument */
    char code;        /* struct code: Q q i I f d, or s (by-value bytes: "<size>s") */
    Py_ssize_t offset, size;
} Slot;

typedef struct {
    Py_ssize_t arg;
    long long lo, hi, multiple; /* ints */
} IntCheck;

typedef struct {
    Py_ssize_t arg;
    unsigned long long align;
} AlignCheck;

typedef union {
    unsigned long long u;
    long long i;
    double d;
} Value;

typedef struct {
    PyObject_HEAD
    launch_ex_t launch;
    void *function;
    unsigned long thread;
    long ordinal;
    PyObject *tls, *failed, *guard, *smem, *keep;
    int guard_sees_launch; /* guard(values, args, dims): it has tylo_launch_guard */
    unsigned long long dyn, default_smem;
    Py_ssize_t nargs, nslots, nints, naligns;
    ArgSpec *args;
    Slot *slots;
    IntCheck *ints;
    AlignCheck *aligns;
    char *allocation; /* what buffer lies in (freed) */
    char *buffer;   /* CUlaunchConfig (56 bytes), then the values; BUFFER_ALIGN-aligned */
    void **params;  /* kernelParams: pointers into buffer */
    Value *values;  /* scratch, one per argument */
} InlineLaunch;

/* the guard on one launch (_launch_module.c): 1 holds, 0 not, -1 with an exception */
int il_guard(InlineLaunch *self, PyObject *args, PyObject *dims);

/* the buffer's alignment: the largest a parameter declares (a CUtensorMap's 64 bytes) */
#define BUFFER_ALIGN 64

/* _launch.c: the type, its launch (a new reference to True or False, or NULL), and the
 * module's setup of both (0, or -1 with an exception set) */
extern PyTypeObject InlineLaunchType;
PyObject *il_launch(InlineLaunch *self, PyObject *dims, PyObject *args, PyObject *shared_o,
                    PyObject *stream_o);
int inline_launch_ready(void);

#endif /* TYLO_LAUNCH_H */

/* tylo._launch: the records an inline launch keeps (see _launch.c for what it does with
 * them). Split from _launch.c so that the code and the data layout are each one file. */
#ifndef TYLO_LAUNCH_H
#define TYLO_LAUNCH_H

#include <Python.h>

typedef int (*launch_ex_t)(const void *config, void *function, void **params, void **extra);

/* K_OWNED: a tylo DeviceBuffer, whose .ptr is a property that raises once the buffer is
 * closed; its _ptr attribute is read instead, and .ptr only when that is None. */
enum { K_BUFFER, K_TORCH, K_INT, K_FLOAT, K_STATIC, K_OWNED };

/* DeviceArray.flags bits (tylo/arrays.py) */
enum { F_NOT_DENSE = 1, F_READ_ONLY = 2 };

typedef struct {
    int kind;
    PyObject *type;   /* borrowed from the spec tuple we keep */
    PyObject *dtype;  /* buffer/torch: the dtype object */
    long device;      /* buffer/torch */
    PyObject *value;  /* static */
    long refuse;      /* buffer: flags bits refused; torch: F_NOT_DENSE asks is_contiguous() */
} ArgSpec;

typedef struct {
    Py_ssize_t arg;   /* which argument */
    char code;        /* struct code: Q q i I f d */
    Py_ssize_t offset;
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
    unsigned long long dyn, default_smem;
    Py_ssize_t nargs, nslots, nints, naligns;
    ArgSpec *args;
    Slot *slots;
    IntCheck *ints;
    AlignCheck *aligns;
    char *buffer;   /* CUlaunchConfig (56 bytes), then the values */
    void **params;  /* kernelParams: pointers into buffer */
    Value *values;  /* scratch, one per argument */
} InlineLaunch;

#endif /* TYLO_LAUNCH_H */

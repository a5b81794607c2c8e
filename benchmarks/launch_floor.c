/* The driver's own launch cost, measured from C: the floor under any Python launcher.
 *
 * usage: launch_floor CUBIN ENTRY N_POINTERS INT_BYTES LAUNCHES
 * Loads ENTRY from CUBIN (a kernel taking N_POINTERS pointers then one integer of
 * INT_BYTES bytes, e.g. tylo's vector_add), gives each pointer a small allocation and the
 * integer the value 1, and launches one block of 256 threads LAUNCHES times in each of
 * three ways on the legacy default stream:
 *   - cuLaunchKernel, host time per call, the queue kept shallow (a synchronize every 64
 *     calls, outside the timed region): median, 10th and 90th percentile;
 *   - the same through cuLaunchKernelEx (what tylo's fast path calls);
 *   - back to back with no synchronize: host issue time per call.
 * Prints one line per way: "name median_us p10_us p90_us". libcuda is opened with dlopen,
 * so no CUDA headers or import libraries are needed; every driver call is checked. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int (*fn_t)();
typedef struct {
  unsigned grid[3], block[3], shared;
  void *stream, *attrs;
  unsigned num_attrs;
} config_t; /* CUlaunchConfig */

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}
static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
#define CK(x)                                                  \
  do {                                                         \
    int e_ = (x);                                              \
    if (e_) {                                                  \
      fprintf(stderr, "launch_floor: %s failed: %d\n", #x, e_); \
      exit(1);                                                 \
    }                                                          \
  } while (0)

static void *sym(void *lib, const char *name) {
  void *p = dlsym(lib, name);
  if (!p) {
    fprintf(stderr, "launch_floor: libcuda has no %s\n", name);
    exit(1);
  }
  return p;
}

int main(int argc, char **argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: %s CUBIN ENTRY N_POINTERS INT_BYTES LAUNCHES\n", argv[0]);
    return 2;
  }
  int nptr = atoi(argv[3]), ibytes = atoi(argv[4]), n = atoi(argv[5]);
  if (nptr < 0 || nptr > 16 || (ibytes != 4 && ibytes != 8) || n < 64) {
    fprintf(stderr, "launch_floor: bad arguments\n");
    return 2;
  }
  FILE *f = fopen(argv[1], "rb");
  if (!f) {
    perror(argv[1]);
    return 1;
  }
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *image = malloc(size);
  if (fread(image, 1, size, f) != (size_t)size) {
    fprintf(stderr, "launch_floor: short read\n");
    return 1;
  }
  fclose(f);

  void *lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (!lib) {
    fprintf(stderr, "launch_floor: no libcuda.so.1\n");
    return 1;
  }
  fn_t cuInit = sym(lib, "cuInit"), cuDeviceGet = sym(lib, "cuDeviceGet"),
       retain = sym(lib, "cuDevicePrimaryCtxRetain"), set = sym(lib, "cuCtxSetCurrent"),
       load = sym(lib, "cuModuleLoadData"), get = sym(lib, "cuModuleGetFunction"),
       sync = sym(lib, "cuCtxSynchronize"), alloc = sym(lib, "cuMemAlloc_v2");
  int (*launch)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                void *, void **, void **) = sym(lib, "cuLaunchKernel");
  int (*launch_ex)(const config_t *, void *, void **, void **) = sym(lib, "cuLaunchKernelEx");

  int dev;
  void *ctx, *mod, *fn;
  CK(cuInit(0));
  CK(cuDeviceGet(&dev, 0));
  CK(retain(&ctx, dev));
  CK(set(ctx));
  CK(load(&mod, image));
  CK(get(&fn, mod, argv[2]));

  uint64_t values[17];
  void *params[17];
  for (int i = 0; i < nptr; i++) {
    CK(alloc(&values[i], 4096));
    params[i] = &values[i];
  }
  int32_t n32 = 1;
  values[nptr] = 1;
  params[nptr] = ibytes == 4 ? (void *)&n32 : (void *)&values[nptr];
  config_t cfg = {{1, 1, 1}, {256, 1, 1}, 0, NULL, NULL, 0};

  double *t = malloc(sizeof(double) * n);
  for (int way = 0; way < 3; way++) {
    for (int i = 0; i < 1000; i++) CK(launch(fn, 1, 1, 1, 256, 1, 1, 0, NULL, params, NULL));
    CK(sync());
    const char *name;
    if (way < 2) {
      name = way == 0 ? "cuLaunchKernel" : "cuLaunchKernelEx";
      for (int k = 0; k < n;) {
        CK(sync());
        for (int j = 0; j < 64 && k < n; j++, k++) {
          double a = now();
          int e = way == 0 ? launch(fn, 1, 1, 1, 256, 1, 1, 0, NULL, params, NULL)
                           : launch_ex(&cfg, fn, params, NULL);
          t[k] = now() - a;
          CK(e);
        }
      }
    } else {
      name = "cuLaunchKernel_back_to_back";
      for (int k = 0; k < n; k++) {
        double a = now();
        int e = launch(fn, 1, 1, 1, 256, 1, 1, 0, NULL, params, NULL);
        t[k] = now() - a;
        CK(e);
      }
    }
    CK(sync());
    qsort(t, n, sizeof(double), cmp);
    printf("%s %.3f %.3f %.3f\n", name, 1e6 * t[n / 2], 1e6 * t[n / 10], 1e6 * t[9 * n / 10]);
  }
  return 0;
}

/* Device memory for the examples: the few CUDA driver calls they need, loaded
 * with dlopen so that the examples (like libmlajit) build and run without the
 * CUDA toolkit, and take their no-GPU path on machines without a driver.
 * mlajit itself allocates nothing for the caller: a real application passes the
 * pointers it already has (torch tensors, cudaMalloc, a memory pool).
 *
 *   struct cuda_memory m;
 *   if (!cuda_memory_open(&m)) { puts(m.error); ... }   // no driver or device
 *   uint64_t p = cuda_alloc_copy(&m, host, bytes);      // 0 on failure
 *   cuda_copy_back(&m, host, p, bytes);
 *
 * Plain C (and valid C++); static functions, so each example includes it once.
 */
#ifndef MLAJIT_EXAMPLES_CUDA_MEMORY_H_
#define MLAJIT_EXAMPLES_CUDA_MEMORY_H_

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The driver API's own types, reduced to what the ABI guarantees. The _v2
 * names are what <cuda.h> maps cuMemAlloc & co. to on 64-bit hosts. */
typedef int cu_result;
typedef void* cu_context;
typedef uint64_t cu_deviceptr;

struct cuda_memory {
  void* lib;
  cu_result (*init)(unsigned);
  cu_result (*device_get)(int*, int);
  cu_result (*primary_ctx_retain)(cu_context*, int);
  cu_result (*ctx_set_current)(cu_context);
  cu_result (*ctx_synchronize)(void);
  cu_result (*mem_alloc)(cu_deviceptr*, size_t);
  cu_result (*mem_free)(cu_deviceptr);
  cu_result (*htod)(cu_deviceptr, const void*, size_t);
  cu_result (*dtoh)(void*, cu_deviceptr, size_t);
  char error[160];
};

/* Loads the driver and makes device 0's primary context (the one mlajit and
 * the CUDA runtime use) current on this thread. Returns 0 with m->error set
 * when there is no driver or no device. */
static int cuda_memory_open(struct cuda_memory* m) {
  int device = 0;
  cu_context ctx = NULL;
  cu_result r;
  m->error[0] = '\0';
  m->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (m->lib == NULL) {
    snprintf(m->error, sizeof m->error, "libcuda.so.1 not loadable: %s", dlerror());
    return 0;
  }
  /* dlsym returns void*; POSIX guarantees it holds a function pointer, and
   * memcpy converts it without a cast ISO C forbids. */
#define CUDA_MEMORY_BIND(field, name)                                     \
  {                                                                       \
    void* sym = dlsym(m->lib, name);                                      \
    if (sym == NULL) {                                                    \
      snprintf(m->error, sizeof m->error, "libcuda.so.1 lacks %s", name); \
      return 0;                                                           \
    }                                                                     \
    memcpy(&m->field, &sym, sizeof sym);                                  \
  }
  CUDA_MEMORY_BIND(init, "cuInit")
  CUDA_MEMORY_BIND(device_get, "cuDeviceGet")
  CUDA_MEMORY_BIND(primary_ctx_retain, "cuDevicePrimaryCtxRetain")
  CUDA_MEMORY_BIND(ctx_set_current, "cuCtxSetCurrent")
  CUDA_MEMORY_BIND(ctx_synchronize, "cuCtxSynchronize")
  CUDA_MEMORY_BIND(mem_alloc, "cuMemAlloc_v2")
  CUDA_MEMORY_BIND(mem_free, "cuMemFree_v2")
  CUDA_MEMORY_BIND(htod, "cuMemcpyHtoD_v2")
  CUDA_MEMORY_BIND(dtoh, "cuMemcpyDtoH_v2")
#undef CUDA_MEMORY_BIND
  if ((r = m->init(0)) != 0 || (r = m->device_get(&device, 0)) != 0 ||
      (r = m->primary_ctx_retain(&ctx, device)) != 0 || (r = m->ctx_set_current(ctx)) != 0) {
    snprintf(m->error, sizeof m->error, "CUDA driver error %d while opening device 0", r);
    return 0;
  }
  return 1;
}

/* Allocates `bytes` on the device and copies `host` there (host may be NULL:
 * allocation only). Returns 0 on failure. */
static cu_deviceptr cuda_alloc_copy(struct cuda_memory* m, const void* host, size_t bytes) {
  cu_deviceptr p = 0;
  if (m->mem_alloc(&p, bytes) != 0) return 0;
  if (host != NULL && m->htod(p, host, bytes) != 0) {
    m->mem_free(p);
    return 0;
  }
  return p;
}

/* Waits for the queued work, then copies `bytes` back. Returns 0 on failure. */
static int cuda_copy_back(struct cuda_memory* m, void* host, cu_deviceptr p, size_t bytes) {
  return m->ctx_synchronize() == 0 && m->dtoh(host, p, bytes) == 0;
}

#endif /* MLAJIT_EXAMPLES_CUDA_MEMORY_H_ */

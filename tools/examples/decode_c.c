/* decode_c.c: the whole mlajit flow from plain C, as an application uses it.
 *
 * Opens a private kernel cache (a temporary directory) and prints its stats,
 * creates a runtime on device 0, builds a plan for a batch of two sequences
 * (100 and 64 cached tokens, one query row each, 16 heads, bf16 KV), uploads
 * inputs, decodes, reads the output back and checks it: every cached token holds
 * the same latent vector, so whatever the attention weights, each output row
 * must equal that vector's first 512 dims. Without a GPU it says so and exits 0
 * after the cache part: that is the path it takes on CPU-only machines.
 *
 *   cc decode_c.c $(pkg-config --cflags --libs mlajit) -o decode_c && ./decode_c
 *
 * or with CMake: find_package(mlajit) and link mlajit::mlajit (see consumer/).
 * The lines between the readme markers are the README's "Using the library"
 * snippet, checked by tests/docs/readme_snippet_test.sh.
 */
#define _XOPEN_SOURCE 700 /* mkdtemp, nftw */

#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mlajit/mlajit.h>

#include "cuda_memory.h"

#define BATCH 2
#define HEADS 16
#define TOTAL_Q 2       /* query rows: one per sequence */
#define TOKENS 164      /* cached tokens of the whole batch */
#define LATENT 576      /* dims of a query / cached token; the first 512 are values */
#define VALUE 512
#define NUM_LAYERS 61   /* DeepSeek-V3; the example reuses one layer's buffers */

static const int32_t qo_indptr[BATCH + 1] = {0, 1, 2};
static const int32_t kv_indptr[BATCH + 1] = {0, 100, 164};

/* Prints the failed call and the library's message, and fails main. */
#define CHECK(call)                                                                      \
  do {                                                                                   \
    mlajit_status_t check_status_ = (call);                                              \
    if (check_status_ != MLAJIT_STATUS_OK) {                                             \
      fprintf(stderr, "%s: status %d: %s\n", #call, (int)check_status_, mlajit_last_error()); \
      return 1;                                                                          \
    }                                                                                    \
  } while (0)

static char cache_dir[] = "/tmp/mlajit-example-XXXXXX";

static int remove_entry(const char* path, const struct stat* st, int type, struct FTW* ftw) {
  (void)st, (void)type, (void)ftw;
  return remove(path);
}

static void remove_cache_dir(void) { nftw(cache_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

static int print_cache_stats(const mlajit_cache_options_t* options) {
  mlajit_cache_t cache;
  char* json;
  CHECK(mlajit_cache_open(options, &cache));
  mlajit_status_t s = mlajit_cache_stats_json(cache, &json);
  mlajit_cache_close(cache);
  CHECK(s);
  printf("cache stats: %s\n", json);
  mlajit_free(json); /* strings from the library go back to it */
  return 0;
}

static int no_gpu(void) {
  printf("no GPU: %s\nskipping plan, decode and read-back\n", mlajit_last_error());
  return 0;
}

/* bf16 is the top half of an fp32; every value used here is exact in bf16. */
static uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return (uint16_t)(u >> 16);
}
static float from_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
static float latent(int d) { return (float)(d % 17 - 8) / 8.0f; }

static uint16_t host_q[TOTAL_Q * HEADS * LATENT];
static uint16_t host_kv[TOKENS * LATENT];
static uint16_t host_out[TOTAL_Q * HEADS * VALUE];
static struct cuda_memory cuda;

struct device_buffers {
  const void* q;
  const void* kv;
  uint64_t kv_bytes;
  void* out;
};

/* The caller owns device memory; here it comes from the CUDA driver. */
static struct device_buffers upload_inputs(void) {
  struct device_buffers d = {NULL, NULL, sizeof host_kv, NULL};
  for (int i = 0; i < TOTAL_Q * HEADS * LATENT; ++i) host_q[i] = to_bf16((float)(i % 13 - 6) / 16.0f);
  for (int i = 0; i < TOKENS * LATENT; ++i) host_kv[i] = to_bf16(latent(i % LATENT));
  if (!cuda_memory_open(&cuda)) {
    /* A runtime without the CUDA driver is a ROCm device: hipMalloc is the
     * equivalent there; this example only knows the CUDA driver. */
    printf("runtime is up but %s: skipping the decode\n", cuda.error);
    exit(0);
  }
  d.q = (const void*)(uintptr_t)cuda_alloc_copy(&cuda, host_q, sizeof host_q);
  d.kv = (const void*)(uintptr_t)cuda_alloc_copy(&cuda, host_kv, sizeof host_kv);
  d.out = (void*)(uintptr_t)cuda_alloc_copy(&cuda, NULL, sizeof host_out);
  if (d.q == NULL || d.kv == NULL || d.out == NULL) {
    fprintf(stderr, "cuMemAlloc/cuMemcpyHtoD failed\n");
    exit(1);
  }
  printf("uploaded q [%d, %d, %d] and kv [%d, %d] bf16\n", TOTAL_Q, HEADS, LATENT, TOKENS, LATENT);
  return d;
}

int main(void) {
  printf("mlajit %s\n", mlajit_version());
  if (mkdtemp(cache_dir) == NULL) {
    perror("mkdtemp");
    return 1;
  }
  atexit(remove_cache_dir);
  mlajit_cache_options_t co = MLAJIT_CACHE_OPTIONS_INIT;
  co.cache_dir = cache_dir; /* private, so that the example leaves nothing behind */
  printf("kernel cache: %s\n", cache_dir);
  if (print_cache_stats(&co) != 0) return 1;

  // [readme-begin]
  mlajit_runtime_options_t ro = MLAJIT_RUNTIME_OPTIONS_INIT; /* device 0 */
  ro.cache = &co;                /* NULL: $MLAJIT_CACHE_DIR, else ~/.cache/mlajit */
  mlajit_runtime_t rt;           /* one per device; thread-safe */
  mlajit_status_t s = mlajit_runtime_create(&ro, &rt);
  if (s == MLAJIT_STATUS_FAILED_PRECONDITION) return no_gpu(); /* no GPU or driver */
  CHECK(s);

  mlajit_plan_config_t cfg = MLAJIT_PLAN_CONFIG_INIT;
  cfg.num_heads = HEADS;         /* 16: DeepSeek-R1 at TP8 */
  cfg.kv_format = MLAJIT_KV_FORMAT_BF16;
  cfg.sm_scale = 0.0721688f;     /* 1/sqrt(192) */
  mlajit_plan_t plan;            /* host int32 indptr arrays, BATCH + 1 entries */
  CHECK(mlajit_plan_create(rt, &cfg, BATCH, qo_indptr, kv_indptr, NULL, &plan));

  struct device_buffers d = upload_inputs();
  mlajit_decode_args_t a = MLAJIT_DECODE_ARGS_INIT;
  a.q = d.q; a.kv = d.kv; a.kv_bytes = d.kv_bytes; a.out = d.out; /* device pointers */
  for (int layer = 0; layer < NUM_LAYERS; ++layer)  /* one plan serves every layer */
    CHECK(mlajit_decode(plan, &a, NULL));  /* NULL: default stream; no allocation, no sync */
  // [readme-end]
  printf("plan for %d sequences on %s; %d decodes enqueued\n", BATCH, mlajit_runtime_arch(rt),
         NUM_LAYERS);

  if (!cuda_copy_back(&cuda, host_out, (cu_deviceptr)(uintptr_t)d.out, sizeof host_out)) {
    fprintf(stderr, "cuCtxSynchronize/cuMemcpyDtoH failed\n");
    return 1;
  }
  int bad = 0;
  for (int i = 0; i < TOTAL_Q * HEADS * VALUE; ++i) {
    float got = from_bf16(host_out[i]), want = latent(i % VALUE);
    float err = got > want ? got - want : want - got;
    if (!(err <= 1.0f / 64)) ++bad; /* bf16 rounding of values in [-1, 1]; NaN counts */
  }
  printf("read back out [%d, %d, %d]: out[0][0][0..3] = %g %g %g %g, %d of %d values off\n",
         TOTAL_Q, HEADS, VALUE, from_bf16(host_out[0]), from_bf16(host_out[1]),
         from_bf16(host_out[2]), from_bf16(host_out[3]), bad, TOTAL_Q * HEADS * VALUE);

  cuda.mem_free((cu_deviceptr)(uintptr_t)d.q);
  cuda.mem_free((cu_deviceptr)(uintptr_t)d.kv);
  cuda.mem_free((cu_deviceptr)(uintptr_t)d.out);
  mlajit_plan_free(plan);
  mlajit_runtime_free(rt);
  if (print_cache_stats(&co) != 0) return 1; /* now holds the compiled kernel */
  return bad == 0 ? 0 : 1;
}

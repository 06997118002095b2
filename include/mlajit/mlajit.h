/* mlajit: run-time compiled MLA (multi-head latent attention) decode kernels.
 *
 * The one public C header. Every function returns an mlajit_status_t; on failure
 * mlajit_last_error() (thread-local) holds a message naming the argument, the
 * value received and what was expected. Nothing here aborts the process.
 *
 * Usage (error checks elided):
 *
 *   mlajit_runtime_t rt;
 *   mlajit_runtime_options_t ro = MLAJIT_RUNTIME_OPTIONS_INIT;   // device 0
 *   mlajit_runtime_create(&ro, &rt);
 *
 *   mlajit_plan_config_t cfg = MLAJIT_PLAN_CONFIG_INIT;
 *   cfg.num_heads = 16; cfg.kv_format = MLAJIT_KV_FORMAT_FP8_E4M3;
 *   cfg.sm_scale = 1.0f / sqrtf(192.0f);
 *   mlajit_plan_t plan;   // host indptr arrays; reused by every layer of a step
 *   mlajit_plan_create(rt, &cfg, batch, qo_indptr, kv_indptr, NULL, &plan);
 *
 *   mlajit_decode_args_t a = MLAJIT_DECODE_ARGS_INIT;
 *   a.q = q; a.kv = kv; a.kv_scale = 0.02f; a.out = out;          // device pointers
 *   for (int layer = 0; layer < 61; ++layer) mlajit_decode(plan, &a, stream);
 *
 *   mlajit_plan_free(plan);
 *   mlajit_runtime_free(rt);
 *
 * Tensor layouts (all device pointers, row-major, contiguous):
 *   q:   [total_q, num_heads, 576] bf16
 *   kv:  flat  [num_tokens, token_bytes]; paged [num_pages * page_size, token_bytes]
 *        token_bytes = 1152 (bf16), 576 (fp8 e4m3), 306 (MXFP4: 288 packed e2m1,
 *        low nibble = even element, then 18 e8m0 scales, one per 32 elements)
 *        Decodes read only the bytes of the tokens a plan addresses: kv may
 *        end at its last token. With kv_bytes given they may also read other
 *        bytes inside [kv, kv + kv_bytes), never beyond (MXFP4 pages of fewer
 *        than 8 tokens are copied in 16-byte chunks that straddle records).
 *   out: [total_q, num_heads, 512] bf16
 *   lse: [total_q, num_heads] fp32, natural log, optional (NULL)
 */
#ifndef MLAJIT_MLAJIT_H_
#define MLAJIT_MLAJIT_H_

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define MLAJIT_API
#else
#define MLAJIT_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes; the values equal absl::StatusCode's. */
typedef enum mlajit_status {
  MLAJIT_STATUS_OK = 0,
  MLAJIT_STATUS_CANCELLED = 1,
  MLAJIT_STATUS_UNKNOWN = 2,
  MLAJIT_STATUS_INVALID_ARGUMENT = 3,
  MLAJIT_STATUS_DEADLINE_EXCEEDED = 4,
  MLAJIT_STATUS_NOT_FOUND = 5,
  MLAJIT_STATUS_ALREADY_EXISTS = 6,
  MLAJIT_STATUS_PERMISSION_DENIED = 7,
  MLAJIT_STATUS_RESOURCE_EXHAUSTED = 8,
  MLAJIT_STATUS_FAILED_PRECONDITION = 9, /* no device, no driver, JIT disabled */
  MLAJIT_STATUS_ABORTED = 10,
  MLAJIT_STATUS_OUT_OF_RANGE = 11,
  MLAJIT_STATUS_UNIMPLEMENTED = 12, /* unsupported combination or architecture */
  MLAJIT_STATUS_INTERNAL = 13,      /* e.g. our own template failed to compile */
  MLAJIT_STATUS_UNAVAILABLE = 14,   /* e.g. cache lock timeout */
  MLAJIT_STATUS_DATA_LOSS = 15,
  MLAJIT_STATUS_UNAUTHENTICATED = 16
} mlajit_status_t;

typedef enum mlajit_kv_format {
  MLAJIT_KV_FORMAT_BF16 = 0,
  MLAJIT_KV_FORMAT_FP8_E4M3 = 1, /* one fp32 scale per tensor (kv_scale) */
  MLAJIT_KV_FORMAT_MXFP4 = 2
} mlajit_kv_format_t;

typedef enum mlajit_q_mode {
  MLAJIT_Q_MODE_BF16 = 0, /* "a16": products use Q in bf16 */
  /* "a8": Q quantised to fp8 e4m3 on the fly, one scale per query row
     (token and head): the smallest power of two 2^e with amax <= 448 * 2^e
     over the row's 576 values (NaN left out; 1 for a row of zeros). The
     decode kernel takes each row's scale as it loads the row, so a8 adds no
     kernel to the call. Faster than bf16 Q on compute-bound calls (q_len > 1
     over long KV); see tools/bench/RESULTS.md, v74. The price is e4m3's
     rounding of Q: on random normal inputs the outputs move from bf16 Q's
     by about 3.5e-2 relative (L2), of the order of what fp8 KV itself costs
     against bf16 KV (RESULTS.md v79). */
  MLAJIT_Q_MODE_FP8 = 1
} mlajit_q_mode_t;

typedef enum mlajit_log_level {
  MLAJIT_LOG_LEVEL_ERROR = 0,
  MLAJIT_LOG_LEVEL_WARN = 1,
  MLAJIT_LOG_LEVEL_INFO = 2,
  MLAJIT_LOG_LEVEL_DEBUG = 3
} mlajit_log_level_t;

/* Library version "MAJOR.MINOR.PATCH". */
MLAJIT_API const char* mlajit_version(void);
/* Message of the last failed call on this thread ("" if none). Valid until the
 * next mlajit call on this thread. */
MLAJIT_API const char* mlajit_last_error(void);
/* Routes log lines (one event per line) to `sink`; NULL restores stderr. */
typedef void (*mlajit_log_sink_t)(mlajit_log_level_t level, const char* line, void* user);
MLAJIT_API void mlajit_set_log_sink(mlajit_log_sink_t sink, void* user);
/* Frees memory returned by the library (strings from the *_json calls). */
MLAJIT_API void mlajit_free(void* p);

/* ---- kernel cache ------------------------------------------------------ */

typedef struct mlajit_cache_options {
  uint32_t struct_size;     /* sizeof(mlajit_cache_options_t) */
  const char* cache_dir;    /* NULL: $MLAJIT_CACHE_DIR, $XDG_CACHE_HOME/mlajit, ~/.cache/mlajit */
  const char* prebuilt_dir; /* read-only layer consulted first; NULL: $MLAJIT_CACHE_PREBUILT */
  int memory_only;          /* 1: never touch the disk */
  int disable_jit;          /* 1: a miss is an error (MLAJIT_DISABLE_JIT=1 also sets it) */
  int save_source;          /* 1: keep rendered sources beside entries (MLAJIT_SAVE_SOURCE=1) */
  int trust_cache_dir;      /* 1: skip the ownership/permission check on cache_dir */
  uint64_t max_bytes;       /* size cap for LRU eviction; 0: default (4 GiB) */
  const char* record_manifest; /* append every compiled spec to this manifest; NULL: $MLAJIT_RECORD_MANIFEST */
  /* Pins for the prebuilt layer: a file of "<key> <payload sha256>" lines (the
   * manifest mlajit_cache_export writes). When set, a prebuilt entry not listed
   * with its digest is refused (a miss, with a warning); an unreadable or
   * malformed file fails mlajit_cache_open. NULL: $MLAJIT_CACHE_PINS. Added in
   * 0.1.x: a struct_size that ends before it leaves it NULL. */
  const char* pins_file;
} mlajit_cache_options_t;
#define MLAJIT_CACHE_OPTIONS_INIT \
  { sizeof(mlajit_cache_options_t), NULL, NULL, 0, 0, 0, 0, 0, NULL, NULL }

/* A kernel cache opened for inspection, maintenance and warm-up (jitcache uses
 * only these calls). Thread-safe. Results are JSON documents (UTF-8, one object)
 * stored in *json and released with mlajit_free; their fields are described in
 * cache/README.md. A compiler (NVRTC / hiprtc) is loaded only when warming.
 *
 *   mlajit_cache_t c;
 *   mlajit_cache_options_t o = MLAJIT_CACHE_OPTIONS_INIT;
 *   o.cache_dir = "/srv/kernels";
 *   mlajit_cache_open(&o, &c);
 *   mlajit_cache_warm(c, "cache/manifests/deepseek_v3.jsonl", "sm_90a", 8, NULL, NULL, NULL);
 *   char* stats;  mlajit_cache_stats_json(c, &stats);  puts(stats);  mlajit_free(stats);
 *   mlajit_cache_close(c);
 */
typedef struct mlajit_cache* mlajit_cache_t;

/* options: NULL for defaults and environment. Fields left NULL / 0 keep the
 * environment's value (MLAJIT_CACHE_DIR, MLAJIT_DISABLE_JIT, ...). */
MLAJIT_API mlajit_status_t mlajit_cache_open(const mlajit_cache_options_t* options,
                                             mlajit_cache_t* cache);
MLAJIT_API void mlajit_cache_close(mlajit_cache_t cache);

/* {"cache_dir":..., "entries":[{"key","template","arch","spec",{...},"compiler",
 *  "library_version","compile_ms","path","bytes","last_use_unix_s","valid","problem"}]} */
MLAJIT_API mlajit_status_t mlajit_cache_list_json(mlajit_cache_t cache, char** json);
/* One entry (key_hex: 32 hex digits) with its key fields and the functions
 * its binary defines, kernels and the device functions they call
 * ("functions":[{"name","code_bytes"}], or "functions_error" when the binary's
 * symbol table cannot be read); NOT_FOUND when absent, DATA_LOSS when its file
 * is invalid. */
MLAJIT_API mlajit_status_t mlajit_cache_show_json(mlajit_cache_t cache, const char* key_hex,
                                                  char** json);
/* Checks every entry file (checksums, format, key). *num_bad: entries that are
 * not usable (each listed with its path and problem); may be NULL. */
MLAJIT_API mlajit_status_t mlajit_cache_verify_json(mlajit_cache_t cache, int* num_bad,
                                                    char** json);
/* Entries, bytes, hits, misses, compiles, and entries / bytes by arch and template. */
MLAJIT_API mlajit_status_t mlajit_cache_stats_json(mlajit_cache_t cache, char** json);
/* Which key fields (source, header:x, options, compiler, arch, ...) and which spec
 * fields differ between two entries. */
MLAJIT_API mlajit_status_t mlajit_cache_explain_json(mlajit_cache_t cache, const char* key_a,
                                                     const char* key_b, char** json);

/* The autotuner's records (see mlajit_tune) in the cache directory and the
 * prebuilt layer: {"records":[{"file","current","class","device","arch",
 * "sm_count","kv_format","q_mode","page_size","rows","work_bucket","block_m",
 * "block_n","num_warps","num_stages","ctas_per_sm","min_split_cost",
 * "median_ns","default_ns","candidates","unix_s","library_version"}],
 * "malformed":N}. "current": written by this library version, so used. */
MLAJIT_API mlajit_status_t mlajit_cache_tuning_json(mlajit_cache_t cache, char** json);

typedef struct mlajit_cache_prune_options {
  uint32_t struct_size; /* sizeof(mlajit_cache_prune_options_t) */
  int64_t max_bytes;    /* >= 0: evict least recently used entries down to this size; -1: off */
  int64_t older_than_s; /* >= 0: remove entries unused for this many seconds; -1: off */
  int stale;            /* 1: remove other versions' entries, invalid files, dead temp files */
} mlajit_cache_prune_options_t;
#define MLAJIT_CACHE_PRUNE_OPTIONS_INIT { sizeof(mlajit_cache_prune_options_t), -1, -1, 0 }

/* Applies stale, then older_than_s, then max_bytes; at least one must be set.
 * json: {"removed":N,"stale":N,"older_than":N,"max_bytes":N}; may be NULL. */
MLAJIT_API mlajit_status_t mlajit_cache_prune_json(mlajit_cache_t cache,
                                                   const mlajit_cache_prune_options_t* options,
                                                   char** json);
/* Removes every entry of the disk tier and the memory tier. removed may be NULL. */
MLAJIT_API mlajit_status_t mlajit_cache_clear(mlajit_cache_t cache, uint64_t* removed);

/* Progress of mlajit_cache_warm, one report per finished spec. Strings are valid
 * during the callback only. */
typedef struct mlajit_warm_progress {
  uint32_t struct_size;  /* sizeof(mlajit_warm_progress_t) */
  int done;              /* specs finished so far (compiled, cached or failed) */
  int total;
  int compiled;          /* of done: compiled by this call */
  int failed;            /* of done */
  double elapsed_s;
  const char* spec_name; /* "mla_decode_h16_q1_fp8_e4m3_a16_flat_causal_m64n64w8s2_sm_90a" */
  const char* key_hex;   /* "" if the spec failed before it had a key */
  mlajit_status_t status;
  const char* error;     /* "" when status is MLAJIT_STATUS_OK */
} mlajit_warm_progress_t;
/* Called from worker threads, never concurrently. */
typedef void (*mlajit_warm_callback_t)(const mlajit_warm_progress_t* progress, void* user);

/* Compiles every spec of a manifest (one KernelSpec JSON per line, see
 * cache/README.md) into the cache; no GPU needed. arch: overrides each spec's
 * target (NULL or "": keep). jobs: compile threads (<= 0: one per core).
 * Every spec is attempted; the status is the first failure's, its message counts
 * all failures. summary_json (may be NULL), set on success:
 * {"total":N,"compiled":N,"cached":N,"failed":0,"elapsed_s":S}. */
MLAJIT_API mlajit_status_t mlajit_cache_warm(mlajit_cache_t cache, const char* manifest_path,
                                             const char* arch, int jobs,
                                             mlajit_warm_callback_t progress, void* user,
                                             char** summary_json);

/* Trust pinning: packs every valid entry of the cache directory into one bundle
 * file (a text manifest of "<key> <payload sha256> <entry bytes> <spec>" lines,
 * the well-formed records of the directory's tuning.jsonl, then the entry files;
 * format in cache/README.md) written atomically. Invalid entries are left out
 * and counted. manifest_path (may be NULL) also receives the manifest alone: a
 * pins file for mlajit_cache_options_t.pins_file (it pins entries, not records).
 * summary_json (may be NULL):
 * {"bundle","entries":N,"bytes":N,"skipped":N,"tuning_records":N}. */
MLAJIT_API mlajit_status_t mlajit_cache_export(mlajit_cache_t cache, const char* bundle_path,
                                               const char* manifest_path, char** summary_json);
/* Verifies every entry of a bundle (entry checksums, the key its manifest line
 * names, payload SHA-256, spec, and with expect_pins_path (may be NULL) that the
 * key and digest are pinned there) and every tuning record it carries, then
 * installs the entries into the cache directory and merges the records into its
 * tuning.jsonl (a bundle's record replaces the one of the same class and library
 * version). One bad entry or record installs nothing: DATA_LOSS naming each bad
 * key, or the bad record's line; a file that is not a bundle is
 * INVALID_ARGUMENT; a memory-only cache is FAILED_PRECONDITION. summary_json
 * (may be NULL): {"bundle","installed":N,"bytes":N,"tuning_records":N}. */
MLAJIT_API mlajit_status_t mlajit_cache_import(mlajit_cache_t cache, const char* bundle_path,
                                               const char* expect_pins_path, char** summary_json);

/* ---- runtime ----------------------------------------------------------- */

typedef struct mlajit_runtime* mlajit_runtime_t;

typedef struct mlajit_runtime_options {
  uint32_t struct_size;                /* sizeof(mlajit_runtime_options_t) */
  int device_index;                    /* CUDA/HIP ordinal */
  const mlajit_cache_options_t* cache; /* NULL: defaults and environment */
} mlajit_runtime_options_t;
#define MLAJIT_RUNTIME_OPTIONS_INIT { sizeof(mlajit_runtime_options_t), 0, NULL }

/* One runtime per device. Thread-safe. FAILED_PRECONDITION without a GPU/driver.
 * Several devices in one process (tensor parallelism): one runtime per device;
 * runtimes with the same cache options share one in-process cache, so a spec
 * compiles once for all of them, while each loads its own module. Every call
 * leaves the calling thread's current device/context as it found it. Decode
 * rejects (INVALID_ARGUMENT) buffers and streams that belong to another device. */
MLAJIT_API mlajit_status_t mlajit_runtime_create(const mlajit_runtime_options_t* options,
                                                 mlajit_runtime_t* runtime);
MLAJIT_API void mlajit_runtime_free(mlajit_runtime_t runtime);
/* Architecture string of the runtime's device ("sm_90a", "gfx942"); static storage. */
MLAJIT_API const char* mlajit_runtime_arch(mlajit_runtime_t runtime);

/* ---- plan -------------------------------------------------------------- */

typedef struct mlajit_plan* mlajit_plan_t;

typedef struct mlajit_plan_config {
  uint32_t struct_size;          /* sizeof(mlajit_plan_config_t) */
  int num_heads;                 /* 1..128 */
  mlajit_kv_format_t kv_format;
  mlajit_q_mode_t q_mode;
  int causal;                    /* 1 (default): row t of a sequence sees kv_len-q_len+t */
  float sm_scale;                /* softmax scale, > 0 and finite */
  int page_size;                 /* 0: flat KV; 1, 16, 32, 64, 128: paged */
  int write_lse;                 /* 1: decode writes lse */
} mlajit_plan_config_t;
#define MLAJIT_PLAN_CONFIG_INIT \
  { sizeof(mlajit_plan_config_t), 0, MLAJIT_KV_FORMAT_FP8_E4M3, MLAJIT_Q_MODE_BF16, 1, 0.0f, 0, 0 }

/* Builds the schedule for one batch layout and uploads it to the device.
 *   qo_indptr: [batch_size + 1] host int32, query rows of sequence b are
 *              [qo_indptr[b], qo_indptr[b+1]), q_len 0..8.
 *   kv_indptr: [batch_size + 1] host int32; flat: token range of sequence b in kv;
 *              paged: range of sequence b in kv_indices (in pages).
 *   kv_lens:   [batch_size] host int32 tokens per sequence; paged only (NULL: full pages).
 * The plan depends on the contents of these arrays; build a new one when they change. */
MLAJIT_API mlajit_status_t mlajit_plan_create(mlajit_runtime_t runtime,
                                              const mlajit_plan_config_t* config,
                                              int batch_size, const int32_t* qo_indptr,
                                              const int32_t* kv_indptr, const int32_t* kv_lens,
                                              mlajit_plan_t* plan);
MLAJIT_API void mlajit_plan_free(mlajit_plan_t plan);

/* What a plan runs, for logs and debugging: {"kernel":"mla_decode_h16_..._sm_90a",
 * "block_m":16,"block_n":64,"num_warps":4,"num_stages":2,"num_ctas":264,
 * "min_split_cost":64,"tuned":false,"kv_tensor_maps":true} ("tuned": the shape
 * came from a tuning record, see mlajit_tune; "kv_tensor_maps": fp8 tiles are
 * copied by tensor maps, which MLAJIT_KV_TMA=0 turns off). Release with
 * mlajit_free. */
MLAJIT_API mlajit_status_t mlajit_plan_describe_json(mlajit_plan_t plan, char** json);

/* ---- device-built plans (CUDA graphs) --------------------------------------
 * A plan whose schedule the GPU builds from a layout in device memory, into
 * buffers sized once from declared limits. mlajit_plan_update_async and
 * mlajit_decode then only enqueue work on the caller's stream (no allocation,
 * no host synchronisation, no device-to-host copy), so one decode step, the
 * update followed by any number of decodes (one per layer), can be captured in
 * a CUDA graph and replayed while the lengths and page tables in those device
 * arrays change between replays. Padded slots: a sequence of length 0, or in a
 * paged layout one whose first page id is -1, reads no KV and gets zeros and
 * lse -inf. The host-built plan (mlajit_plan_create) builds the same schedule.
 *
 *   mlajit_plan_limits_t lim = MLAJIT_PLAN_LIMITS_INIT;
 *   lim.max_batch_size = 256; lim.max_q_len = 1;
 *   mlajit_plan_create_device(rt, &cfg, &lim, &plan);
 *   cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
 *   mlajit_plan_update_async(plan, 256, d_qo_indptr, d_kv_indptr, d_kv_lens, s);
 *   for (int layer = 0; layer < 61; ++layer) mlajit_decode(plan, &args[layer], s);
 *   cudaStreamEndCapture(s, &graph);   ... replay with cudaGraphLaunch ...
 */
typedef struct mlajit_plan_limits {
  uint32_t struct_size; /* sizeof(mlajit_plan_limits_t) */
  int max_batch_size;   /* 1..1048576: the largest batch_size of an update */
  int max_q_len;        /* 1..8: the longest q_len of a sequence in an update */
  /* 0 (none), or the longest kv_len (tokens) the caller expects of a sequence
   * in an update. A hint, not a limit. Without one the plan sees no batch and
   * takes the tiles of a large one, whatever the updates bring. With one, it
   * takes the tiles a host-built plan would take for its largest batch
   * (max_batch_size sequences of max_q_len queries and kv_len_hint tokens
   * each): for small batches, tiles of fewer query rows, which keep more SMs
   * busy (on an H200, 9-22 % faster calls with 32 heads). Longer sequences
   * are still decoded exactly, with the tiles chosen for shorter ones.
   * Added in 0.1.x: a struct_size that ends before it leaves it 0. */
  int kv_len_hint;
} mlajit_plan_limits_t;
#define MLAJIT_PLAN_LIMITS_INIT \
  { sizeof(mlajit_plan_limits_t), 0, 1, 0 }

/* Allocates the plan's fixed buffers and loads its kernels; until the first
 * update its schedule is empty (a decode writes nothing). */
MLAJIT_API mlajit_status_t mlajit_plan_create_device(mlajit_runtime_t runtime,
                                                     const mlajit_plan_config_t* config,
                                                     const mlajit_plan_limits_t* limits,
                                                     mlajit_plan_t* plan);
/* Enqueues the rebuild of the schedule on `stream` from device arrays laid out
 * as for mlajit_plan_create (qo_indptr and kv_indptr: batch_size + 1 entries;
 * kv_lens: paged only, NULL for full pages). Decodes enqueued after it on the
 * same stream use the new schedule. The arrays are read when the update runs,
 * not when it is enqueued. A layout the planner cannot use (indptr not
 * starting at 0, q_len above the limit, kv_indptr decreasing, kv_lens beyond
 * its pages) leaves an empty schedule; mlajit_plan_check_update reports it. */
MLAJIT_API mlajit_status_t mlajit_plan_update_async(mlajit_plan_t plan, int batch_size,
                                                    const int32_t* qo_indptr,
                                                    const int32_t* kv_indptr,
                                                    const int32_t* kv_lens, void* stream);
/* Waits for `stream` and returns the last update's verdict: OK, or
 * INVALID_ARGUMENT naming the sequence and value the planner rejected. For
 * debugging; not capture-safe (it synchronises). */
MLAJIT_API mlajit_status_t mlajit_plan_check_update(mlajit_plan_t plan, void* stream);

typedef struct mlajit_decode_args {
  uint32_t struct_size;     /* sizeof(mlajit_decode_args_t) */
  const void* q;            /* [total_q, num_heads, 576] bf16 */
  const void* kv;           /* see the layouts above */
  uint64_t kv_bytes;        /* size of the kv allocation: bounds validation, and the extent
                               decodes may read (see kv above); 0: unchecked */
  float kv_scale;           /* fp8: dequantisation scale (real = code * kv_scale); else ignored */
  const int32_t* kv_indices; /* paged: device page ids, indexed by kv_indptr; else NULL */
  void* out;                /* [total_q, num_heads, 512] bf16 */
  float* lse;               /* [total_q, num_heads] fp32, required iff config.write_lse */
} mlajit_decode_args_t;
#define MLAJIT_DECODE_ARGS_INIT \
  { sizeof(mlajit_decode_args_t), NULL, NULL, 0, 1.0f, NULL, NULL, NULL }

/* Enqueues the decode on `stream` (cudaStream_t / hipStream_t; NULL: default).
 * With an existing plan and a loaded kernel it allocates nothing, does no file
 * I/O and never synchronises the host. On sm_90+ the kernels are launched as
 * programmatic dependents (each waits for the previous kernel on the stream
 * before touching memory) and let their own dependents launch early: a kernel
 * of yours launched after it with programmatic stream serialization must call
 * cudaGridDependencySynchronize() before reading the output, as with any such
 * launch. MLAJIT_PDL=0 in the environment turns this off. */
MLAJIT_API mlajit_status_t mlajit_decode(mlajit_plan_t plan, const mlajit_decode_args_t* args,
                                         void* stream);

/* ---- autotuning ------------------------------------------------------------
 * mlajit_tune times the kernel shapes the library can run for a plan config
 * and batch layout (tile rows and tokens, pipeline stages, CTAs per SM, split
 * floor) on the runtime's device and records the fastest for the batch's
 * class: this device model, kv_format, q_mode, page_size, max q_len x heads,
 * and the batch's work within a factor of two. Plans created afterwards for
 * that class use it, in this process and, through <cache_dir>/tuning.jsonl,
 * in every later one that opens the cache directory (or has it as its
 * prebuilt layer), until the library version changes. Run it where the
 * target GPU is, for example while warming a cache before shipping it: a
 * tuned kernel missing from a cache that may not compile falls back to the
 * default shape with a warning.
 *
 * It allocates synthetic inputs for the layout (paged: an identity page
 * table; KV copies rotated so that reads come from memory, not L2),
 * compiles every candidate (in parallel; seconds on a cold cache), checks
 * each candidate's output against the default shape's (a candidate that
 * disagrees is reported and never chosen), then times each with device
 * events: timed_calls calls issued back to back as the benchmark does, in
 * five rounds that visit the candidates in turn (after warmup_calls), the
 * median kept. A candidate must beat the default shape by 2 % to replace
 * it. Synchronous; uses its own stream; not for the hot path. */
typedef struct mlajit_tune_options {
  uint32_t struct_size; /* sizeof(mlajit_tune_options_t) */
  int warmup_calls;     /* per candidate, 0..1000; default 5 */
  int timed_calls;      /* per candidate, 1..10000; default 100 */
  int persist;          /* 1 (default): write the record to the cache directory */
  /* 1: record the choice also for device-built plans (mlajit_plan_create_device)
   * of this config whose limits.max_q_len is the layout's longest q_len: they
   * have no batch to size by, so the layout stands for the batches they will
   * see. 0 (default): host-built plans of the layout's class only. */
  int device_plans;
} mlajit_tune_options_t;
#define MLAJIT_TUNE_OPTIONS_INIT { sizeof(mlajit_tune_options_t), 5, 100, 1, 0 }

/* Arguments as for mlajit_plan_create; options NULL for the defaults.
 * result_json (may be NULL): {"class":"...","chosen":i,"persisted":bool,
 * "candidates":[{"shape":"16x64 w4 s2 c2 split64","block_m":16,...,
 * "median_us":x,"rel_diff":y,"status":"ok" or the reason it was skipped}]},
 * candidate 0 being the default shape; release with mlajit_free. */
MLAJIT_API mlajit_status_t mlajit_tune(mlajit_runtime_t runtime, const mlajit_plan_config_t* config,
                                       int batch_size, const int32_t* qo_indptr,
                                       const int32_t* kv_indptr, const int32_t* kv_lens,
                                       const mlajit_tune_options_t* options, char** result_json);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MLAJIT_MLAJIT_H_ */

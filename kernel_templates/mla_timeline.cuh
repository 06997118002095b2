// An opt-in timeline of one CTA, for kernel development: where a tile's time
// goes between the warpgroups' hand-overs (RESULTS.md v34 found the
// warp-specialised path's critical chain this way).
//
// Off unless the kernel is compiled with MLA_TIMELINE=N (MLAJIT_TIMELINE=N in
// the environment; the compile options are part of the cache key): then on
// the N-th launch of the decode kernel (N >= 1, counted per loaded module),
// CTA 0 stamps clock64 at each event of its first TILES tiles (counted over
// its work items; the bf16 seesaw counts pairs of tiles), one thread per role
// (the scorer; each accumulating warp; each warp of the seesaw),
// and the merge kernel of that call prints the stamps (a printf in the decode
// kernel itself makes ptxas serialise its wgmmas, C7510; the runtime runs
// the merge kernel of timeline builds even when a call has nothing to
// merge), one line per tile and role:
//   mla_timeline tile T role R: c0 c1 ... (cycles since the first stamp; -1: none)
// tools/bench/timeline.py turns a run's lines into per-step medians. Off, every
// stamp compiles to nothing (the PTX is the same as without them). On, the
// kernel differs a little (a 4-byte spill in the warp-specialised path, 1 KB
// of static shared memory for one flag), so cases are timed without it. The
// stamps are predicated stores, not branches: a branch between wgmmas that
// ptxas cannot prove uniform serializes them (info C7518).
//
// The same builds also stamp the whole grid of that launch, coarsely: thread 0
// of every CTA notes its SM and reads %globaltimer (nanoseconds, one clock
// for all SMs) at its entry, when its wait for the previous kernel returns,
// at the start and end of each of its first GRID_ITEMS work items (with the
// item's tile count) and at its exit; the merge kernel then prints one line
// per CTA,
//   mla_grid cta C sm S: entry waited exit items n: start end tiles ...
// (ns since the first CTA's entry; -1: none) and when its CTA 0 was done,
//   mla_grid merge done: t
// and, a call later at most, the merge's own CTAs (PrintMergeIfStamped),
// which tools/bench/grid_timeline.py summarises: how the CTAs' ends spread,
// and whether some SMs run their tiles slower than others.
#ifndef MLAJIT_KERNEL_TEMPLATES_MLA_TIMELINE_CUH_
#define MLAJIT_KERNEL_TEMPLATES_MLA_TIMELINE_CUH_

#include "mla_common.cuh"

namespace mla_timeline {

constexpr int TILES = 40;
constexpr int EVENTS = 8;
// The scorer (0) and each warp of the accumulators (1..8, one stamping lane
// each: RESULTS.md v36 needed to see them apart).
constexpr int ROLES = 9;

// Events of the warp-specialised 64-row path (mla_decode_wgmma_rows_ws.cuh).
enum ScorerEvent {
  kTileLanded = 0,    // the tile's wait returned; S is issued next
  kSIssued = 1,       // the issue returned (it blocks while the tensor cores are busy)
  kSDone = 2,         // S waited for
  kPBufferFree = 3,   // the P buffer came back
  kPWritten = 4,      // P and the rescale factors published
};
enum AccumulatorEvent {
  kTileStart = 0,        // waiting for P next
  kPSeen = 1,            // P arrived
  kFirstGroupDone = 2,   // the first k-step's products issued, the ones before waited for
  kLastGroupIssued = 3,  // the last k-step's products issued
  kStageHandedOver = 4,  // the stage's next copy issued
  kDrained = 5,          // the tile's products done
};

// Events of the swap-AB path (mla_decode_wgmma.cuh), stamped by thread 0:
// role 0 per tile (counted over the CTA's work items), role 1 per work item,
// role 2 once per launch.
enum SwapAbTileEvent {
  kSwTileWaited = 0,  // this thread's copies of the tile landed
  kSwTileSynced = 1,  // ... everyone's (the barrier before S)
  kSwSDone = 2,       // S waited for
  kSwPWritten = 3,    // softmax done, P^T stored (after the exchange, if any)
  kSwPvIssued = 4,    // the last k-step of P V issued
  kSwPvDone = 5,      // P V waited for
};
enum SwapAbItemEvent {
  kSwItemStart = 0,     // ProcessItem entered
  kSwQLoaded = 1,       // Q converted and stored, the first tiles issued
  kSwLoopDone = 2,      // the item's last tile done
  kSwSumsShared = 3,    // the row sums exchanged (the epilogue's first barrier)
  kSwRowsStaged = 4,    // normalised rows staged in shared memory (second barrier)
  kSwStoresIssued = 5,  // the rows' global stores issued
  kSwOwnRowsStaged = 6, // this thread's rows staged (before the barrier of 4)
};
enum SwapAbLaunchEvent {
  kSwCtaStart = 0,  // the CTA passed its wait for the previous kernel
};

// Events of the bf16 64-row seesaw (mla_decode_wgmma_rows_seesaw.cuh), per
// pair of tiles (counted over the CTA's seesaw items), stamped by lane 0 of
// every warp as role = warp: roles 0-3 are warpgroup 0 (it scores tile A),
// roles 4-7 warpgroup 1 (tile B).
enum SeesawEvent {
  kSeLanded = 0,  // S over the tile's first blocks done, its last blocks landed
  kSeSDone = 1,   // S waited for
  // warpgroup 0:
  kSeMaxOut = 2,     // its maxima published
  kSePOut = 3,       // P_A written and published
  kSeOwnPvDone = 4,  // P_A V_A[L] done, tile A + 2's copies issued
  kSeMaxIn = 5,      // warpgroup 1's maxima seen
  kSePIn = 6,        // P_B seen
  // warpgroup 1 (tile B):
  kSeBMaxIn = 2,      // warpgroup 0's maxima seen
  kSeBMaxOut = 3,     // its maxima published
  kSeBPIn = 4,        // P_A seen
  kSeBPOut = 5,       // P_A V_A[R] issued, P_B written and published
  kSeBOtherPvDone = 6,  // P_A V_A[R] done, tile A + 2's copies issued
  kSePairDone = 7,    // both: the pair's P V done, tile B + 2's copies issued
};

// Events of the 64-row path's two-stage schedule (mla_decode_wgmma_rows.cuh:
// bf16 items shorter than the seesaw's, fp8 without the warp-specialised
// path), per tile (counted over the CTA's two-stage items), stamped by the
// first thread of each warpgroup as role 0 (warpgroup 0: S and the softmax)
// and role 4 (warpgroup 1).
enum TwoStageEvent {
  kTsLanded = 0,    // this thread's copies of the tile landed
  kTsSynced = 1,    // barrier (1): the tile complete, tile t - 1 done with
  kTsSDone = 2,     // warpgroup 0: S waited for
  kTsPOut = 3,      // warpgroup 0: the softmax done, P and alpha written
  kTsPSynced = 4,   // barrier (2): P and alpha seen
  kTsPvIssued = 5,  // P V issued (and, fp8, the next loads)
  kTsPvDone = 6,    // P V waited for
};

// The 64-row path's work items (two-stage and seesaw, mla_decode_wgmma_rows.cuh),
// stamped by thread 0 as role ROWS_ITEM_ROLE, the "tile" being the CTA's item
// count: where an item's start (its Q, its first tiles' copies) and its
// epilogue fall between the tiles' stamps.
constexpr int ROWS_ITEM_ROLE = 8;
enum RowsItemEvent {
  kRiStart = 0,  // the item begins (before its first barrier)
  kRiEnd = 1,    // its epilogue's stores issued
};

// The grid's events per CTA (then start, end and tiles of each work item).
enum GridEvent { kGridEntry = 0, kGridWaited = 1, kGridExit = 2, GRID_EVENTS = 3 };

#if !MLA_HIP && defined(__CUDA_ARCH__) && defined(MLA_TIMELINE) && MLA_TIMELINE > 0
__device__ long long stamps[ROLES][TILES][EVENTS];
__device__ unsigned int launches;  // decode launches so far; PRINT_NOW once stamped
__shared__ int stamping;           // this CTA stamps on this launch
constexpr unsigned int PRINT_NOW = 0x40000000u, PRINTED = 0x80000000u;

// At the decode kernel's start, one thread per CTA, before a barrier. The
// stamps are cleared one launch ahead of the stamped one (serially, by one
// thread: on the stamped launch it held CTA 0 back 13-16 µs, which the grid
// timeline then showed as CTA 0's late start, RESULTS.md v51); with
// MLA_TIMELINE=1 there is no launch ahead, and the stamped one clears them.
MLA_INLINE void BeginLaunch() {
  if (threadIdx.x == 0) {
    constexpr unsigned int CLEAR_ON = MLA_TIMELINE > 1 ? MLA_TIMELINE - 1 : 1;
    const unsigned int launch = blockIdx.x == 0 ? atomicAdd(&launches, 1u) + 1u : 0u;
    stamping = launch == MLA_TIMELINE;
    if (launch == CLEAR_ON) {
      for (int i = 0; i < ROLES * TILES * EVENTS; ++i) (&stamps[0][0][0])[i] = -1;
      __threadfence();
    }
  }
}
// Thread `first_thread` of the role stamps `event` of `tile`.
MLA_INLINE void Stamp(int role, int first_thread, int tile, int event) {
  const int on = stamping & (tile < TILES) & (static_cast<int>(threadIdx.x) == first_thread);
  long long* at = &stamps[role][tile < TILES ? tile : 0][event];
  asm volatile(
      "{\n.reg .pred q;\n.reg .u64 c;\nsetp.ne.s32 q, %0, 0;\nmov.u64 c, %%clock64;\n"
      "@q st.global.u64 [%1], c;\n}\n" ::"r"(on),
      "l"(at));  // no memory clobber: volatile asm keeps its place among the
                 // wgmma and mbarrier asm, and loads may still move around it
}
// Once the stamping thread of the last role to finish is done.
MLA_INLINE void EndLaunch(int last_thread) {
  const int on = stamping & (static_cast<int>(threadIdx.x) == last_thread);
  asm volatile(
      "{\n.reg .pred q;\nsetp.ne.s32 q, %0, 0;\n@q red.global.or.b32 [%1], %2;\n}\n" ::"r"(on),
      "l"(&launches), "r"(PRINT_NOW)
      : "memory");
}

// ---- the grid's stamps ----
constexpr int GRID_ITEMS = 6;
constexpr int GRID_CTAS = 1024;  // CTAs beyond these do not stamp
__device__ long long grid_stamps[GRID_CTAS][GRID_EVENTS + 3 * GRID_ITEMS];
__device__ int grid_sms[GRID_CTAS];  // the SM each CTA ran on (are the slow ones together?)
__device__ unsigned int grid_entries;  // CTA entries over all launches: the launch of each
__device__ unsigned int grid_stamped;  // CTAs that stamped the launch, once exited
__device__ unsigned int grid_ctas;     // the stamped launch's grid
__shared__ int grid_stamping;          // this CTA stamps (set by thread 0 before a barrier)

MLA_INLINE long long GlobalTimer() {
  long long t;
  asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t)::"memory");
  return t;
}
MLA_INLINE int SmId() {
  unsigned int sm;
  asm volatile("mov.u32 %0, %%smid;\n" : "=r"(sm));
  return static_cast<int>(sm);
}
// Thread 0 at a kernel's entry: whether its CTA stamps, i.e. belongs to launch
// MLA_TIMELINE, counted by `entries` over all launches of the kernel, and
// has a row.
MLA_INLINE bool StampsThisLaunch(unsigned int* entries) {
  const unsigned int launch = atomicAdd(entries, 1u) / gridDim.x + 1u;
  return launch == MLA_TIMELINE && blockIdx.x < GRID_CTAS;
}
// At the decode kernel's entry, before its wait for the previous kernel. The
// launch a CTA belongs to is its entry's count over the grid (every launch of
// a module in the bench runs the same grid; one launch's CTAs all enter
// before the next's, which start only as SMs come free).
MLA_INLINE void GridEntry() {
  if (threadIdx.x != 0) return;
  const long long t = GlobalTimer();
  grid_stamping = StampsThisLaunch(&grid_entries);
  if (!grid_stamping) return;
  long long* row = grid_stamps[blockIdx.x];
  for (int i = 0; i < GRID_EVENTS + 3 * GRID_ITEMS; ++i) row[i] = -1;
  row[kGridEntry] = t;
  grid_sms[blockIdx.x] = SmId();
  if (blockIdx.x == 0) grid_ctas = gridDim.x;
}
MLA_INLINE void GridStamp(int event) {
  if (threadIdx.x == 0 && grid_stamping) grid_stamps[blockIdx.x][event] = GlobalTimer();
}
// Work item `index` of this CTA starts (with its tile count) or ends.
// Predicated stores by thread 0, no branch (as Stamp above: the warp-
// specialised path's loops serialise their wgmmas around a divergent one).
MLA_INLINE void GridItemStamp(int index, int end, long long tiles) {
  const int on = grid_stamping & (static_cast<int>(threadIdx.x) == 0) & (index < GRID_ITEMS);
  long long* at = &grid_stamps[on ? blockIdx.x : 0][GRID_EVENTS + 3 * (on ? index : 0) + end];
  asm volatile(
      "{\n.reg .pred q;\n.reg .u64 t;\nsetp.ne.s32 q, %0, 0;\nmov.u64 t, %%globaltimer;\n"
      "@q st.global.u64 [%1], t;\n@q st.global.u64 [%1+16], %2;\n}\n" ::"r"(on & (end == 0)),
      "l"(at), "l"(tiles));
  asm volatile(
      "{\n.reg .pred q;\n.reg .u64 t;\nsetp.ne.s32 q, %0, 0;\nmov.u64 t, %%globaltimer;\n"
      "@q st.global.u64 [%1], t;\n}\n" ::"r"(on & (end != 0)),
      "l"(at));
}
MLA_INLINE void GridItemStart(int index, int tiles) { GridItemStamp(index, 0, tiles); }
MLA_INLINE void GridItemEnd(int index) { GridItemStamp(index, 1, 0); }
// Where the CTA's last thread to finish, `last_thread`, is done (beside
// EndLaunch). Predicated, no branch: as Stamp above.
MLA_INLINE void GridExit(int last_thread) {
  const int on = grid_stamping & (static_cast<int>(threadIdx.x) == last_thread);
  asm volatile(
      "{\n.reg .pred q;\n.reg .u64 t;\nsetp.ne.s32 q, %0, 0;\nmov.u64 t, %%globaltimer;\n"
      "@q st.global.u64 [%1], t;\n@q membar.gl;\n@q red.global.add.u32 [%2], 1;\n}\n" ::"r"(on),
      "l"(&grid_stamps[on ? blockIdx.x : 0][kGridExit]), "l"(&grid_stamped)
      : "memory");
}
// The stamping CTAs of a launch whose `ctas` (its grid) have all counted
// themselves in `stamped`, once: the first caller to find them all in claims
// the print (its count goes one past) and gets their number; 0 otherwise.
MLA_INLINE unsigned int ClaimCompleteStamps(unsigned int* ctas, unsigned int* stamped) {
  const unsigned int grid = *reinterpret_cast<volatile unsigned int*>(ctas);
  const unsigned int done = *reinterpret_cast<volatile unsigned int*>(stamped);
  const unsigned int want = grid < GRID_CTAS ? grid : GRID_CTAS;
  if (grid == 0 || done != want) return 0;
  return atomicAdd(stamped, 1u) == want ? want : 0;  // else printed by another merge
}
// In the merge kernel's CTA 0, after its work: once, after the stamped launch.
MLA_INLINE void PrintGridIfStamped() {
  const unsigned int want = ClaimCompleteStamps(&grid_ctas, &grid_stamped);
  if (want == 0) return;
  const long long merge_done = GlobalTimer();
  static_assert(GRID_EVENTS + 3 * GRID_ITEMS == 21, "the line below prints 21 values");
  long long t0 = grid_stamps[0][kGridEntry];
  for (unsigned int c = 1; c < want; ++c) t0 = min(t0, grid_stamps[c][kGridEntry]);
  for (unsigned int c = 0; c < want; ++c) {
    const long long* row = grid_stamps[c];
    long long d[GRID_EVENTS + 3 * GRID_ITEMS];
    for (int i = 0; i < GRID_EVENTS + 3 * GRID_ITEMS; ++i) {
      const bool tiles = i >= GRID_EVENTS && (i - GRID_EVENTS) % 3 == 2;
      d[i] = row[i] < 0 || tiles ? row[i] : row[i] - t0;
    }
    printf("mla_grid cta %u sm %d: %lld %lld %lld items %d: %lld %lld %lld %lld %lld %lld %lld "
           "%lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld\n",
           c, grid_sms[c], d[0], d[1], d[2], GRID_ITEMS, d[3], d[4], d[5], d[6], d[7], d[8], d[9],
           d[10], d[11], d[12], d[13], d[14], d[15], d[16], d[17], d[18], d[19], d[20]);
  }
  printf("mla_grid merge done: %lld\n", merge_done - t0);
}

// ---- the merge kernel's stamps ----
// Thread 0 of each CTA of the stamped call's merge (the merge's own
// MLA_TIMELINE-th launch: the runtime launches one merge per call in these
// builds) notes its SM and %globaltimer at entry, when its wait for the
// decode returned (-1 where its CTA had nothing to merge and skipped the
// wait) and at its end. They are printed, in ns since the decode's first
// CTA entered, by the first merge CTA 0 to find every one of them in (the
// stamped call's, or the next call's), one line per CTA:
//   mla_grid merge cta C sm S: entry waited exit
enum MergeEvent { kMergeEntry = 0, kMergeWaited = 1, kMergeExit = 2, MERGE_EVENTS = 3 };
__device__ long long merge_stamps[GRID_CTAS][MERGE_EVENTS];
__device__ int merge_sms[GRID_CTAS];
__device__ unsigned int merge_entries;  // merge CTA entries over all launches
__device__ unsigned int merge_stamped;  // CTAs that stamped the merge, once done
__device__ unsigned int merge_ctas;     // the stamped merge's grid
__shared__ int merge_stamping;          // this CTA stamps (thread 0's own flag)

MLA_INLINE void MergeEntry() {
  if (threadIdx.x != 0) return;
  const long long t = GlobalTimer();
  merge_stamping = StampsThisLaunch(&merge_entries);
  if (!merge_stamping) return;
  long long* row = merge_stamps[blockIdx.x];
  row[kMergeEntry] = t;
  row[kMergeWaited] = -1;
  row[kMergeExit] = -1;
  merge_sms[blockIdx.x] = SmId();
  if (blockIdx.x == 0) merge_ctas = gridDim.x;
}
// Right after the merge's wait for the decode (the wait of thread 0's group).
MLA_INLINE void MergeWaited() {
  if (threadIdx.x == 0 && merge_stamping) merge_stamps[blockIdx.x][kMergeWaited] = GlobalTimer();
}
// At the end of thread 0's work.
MLA_INLINE void MergeExit() {
  if (threadIdx.x != 0 || !merge_stamping) return;
  merge_stamps[blockIdx.x][kMergeExit] = GlobalTimer();
  __threadfence();
  atomicAdd(&merge_stamped, 1u);
}
MLA_INLINE void PrintMergeIfStamped() {
  const unsigned int want = ClaimCompleteStamps(&merge_ctas, &merge_stamped);
  if (want == 0) return;
  // The decode's first entry where its grid was stamped, else the merge's.
  const unsigned int decode_ctas = *reinterpret_cast<volatile unsigned int*>(&grid_ctas);
  long long t0 = merge_stamps[0][kMergeEntry];
  for (unsigned int c = 0; c < want; ++c) t0 = min(t0, merge_stamps[c][kMergeEntry]);
  for (unsigned int c = 0; c < decode_ctas && c < GRID_CTAS; ++c) {
    t0 = min(t0, grid_stamps[c][kGridEntry]);
  }
  for (unsigned int c = 0; c < want; ++c) {
    const long long* row = merge_stamps[c];
    long long d[MERGE_EVENTS];
    for (int i = 0; i < MERGE_EVENTS; ++i) d[i] = row[i] < 0 ? -1 : row[i] - t0;
    printf("mla_grid merge cta %u sm %d: %lld %lld %lld\n", c, merge_sms[c], d[0], d[1], d[2]);
  }
}

// At the end of the merge kernel: each CTA's thread 0 notes its end (where
// its CTA stamps); CTA 0 then waits for the decode and prints what is
// complete. (Later launches keep counting in the low bits; the flags stay.)
MLA_INLINE void PrintIfStamped() {
  MergeExit();
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  // A merge with nothing to merge returns before its wait for the decode
  // (mla_combine.cuh); the stamps are complete only after it.
  MlaGridDependencySync();
  PrintGridIfStamped();
  PrintMergeIfStamped();
  const unsigned int seen = *reinterpret_cast<volatile unsigned int*>(&launches);
  if ((seen & PRINT_NOW) == 0 || (seen & PRINTED) != 0) return;
  if ((atomicOr(&launches, PRINTED) & PRINTED) != 0) return;
  long long t0 = stamps[0][0][0];
  for (int r = 0; r < ROLES; ++r) {
    for (int e = 0; e < EVENTS; ++e) {
      if (stamps[r][0][e] >= 0 && stamps[r][0][e] < t0) t0 = stamps[r][0][e];
    }
  }
  for (int t = 0; t < TILES; ++t) {
    for (int r = 0; r < ROLES; ++r) {
      long long d[EVENTS];
      for (int e = 0; e < EVENTS; ++e) d[e] = stamps[r][t][e] < 0 ? -1 : stamps[r][t][e] - t0;
      printf("mla_timeline tile %d role %d: %lld %lld %lld %lld %lld %lld %lld %lld\n", t, r, d[0],
             d[1], d[2], d[3], d[4], d[5], d[6], d[7]);
    }
  }
}
#else
MLA_INLINE void GridEntry() {}
MLA_INLINE void GridStamp(int) {}
MLA_INLINE void GridItemStart(int, int) {}
MLA_INLINE void GridItemEnd(int) {}
MLA_INLINE void GridExit(int) {}
MLA_INLINE void BeginLaunch() {}
MLA_INLINE void Stamp(int, int, int, int) {}
MLA_INLINE void EndLaunch(int) {}
MLA_INLINE void PrintIfStamped() {}
MLA_INLINE void MergeEntry() {}
MLA_INLINE void MergeWaited() {}
#endif

}  // namespace mla_timeline

#endif  // MLAJIT_KERNEL_TEMPLATES_MLA_TIMELINE_CUH_

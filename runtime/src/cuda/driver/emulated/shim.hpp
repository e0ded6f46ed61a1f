// kusari's emulated CUDA device: host definitions of what CUDA C++ gives a kernel (threadIdx and
// friends, __syncthreads, __shared__, atomics, math), and the block scheduler that runs a grid.
// It is pasted in front of the very source NVRTC compiles, which is then built as a shared
// library with the host C++ compiler. __CUDA_ARCH__ stays undefined, so device-only code in the
// kernel (inline PTX) takes its `#ifndef __CUDA_ARCH__` host form.
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <dlfcn.h>
#ifdef __linux__
#include <link.h>
#endif
#include <ucontext.h>
#include <sys/mman.h>
#include <new>
#include <tuple>
#include <type_traits>
#include <utility>

// Exported to the runtime; everything else (the kernels among it) is hidden, so that a kernel
// named like a C library function (`index`, `sync`) is the one called, not the library's.
#define KUSARI_EMU_EXPORT __attribute__((visibility("default")))
// The shim's own code is never instrumented by the checked build (see KUSARI_EMU_CHECKED).
#define KUSARI_EMU_SHIM __attribute__((no_sanitize_thread, no_sanitize("bounds")))

#define __global__
#define __device__
#define __host__
#define __noinline__ __attribute__((noinline))
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __constant__ static
// One copy per host thread; a host thread runs one block at a time, so one copy per block.
#define __shared__ static thread_local

struct uint3 { unsigned int x, y, z; };
struct dim3 {
  unsigned int x, y, z;
  dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1) : x(x_), y(y_), z(z_) {}
  dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
};

namespace kusari_emu {

// What the host side passes to a launch (laid out as `LaunchDesc` in runtime/src/cuda/emulator/run.rs).
struct Launch {
  unsigned int grid[3];
  unsigned int block[3];
  unsigned long long first_block;  // linear block index range [first_block, end_block)
  unsigned long long end_block;
  int fibers;                      // 1 when the kernel uses __syncthreads
  char* error;                     // filled (NUL-terminated) on failure
  size_t error_len;
  unsigned long long shared_bytes; // dynamic shared memory per block
  void* const* stacks;             // with fibers: one stack per thread of a block (host-owned)
  unsigned long long stack_bytes;  // the size of each
  unsigned int checks;             // the checked build's checks (kCheck* below)
  unsigned int nranges;
  const struct Range* ranges;      // the pointer parameters' allocations, sorted by `lo`
  struct Report* reports;          // what the checks and a fault found
  unsigned int report_cap;
  unsigned int report_count;
  // Checked launches: the live allocation whose accessible bytes hold an address (written to
  // `out`, with `param` -2), for memory the kernel reached through a pointer stored in memory;
  // returns 0 when none does.
  int (*lookup)(unsigned long long address, struct Range* out);
  // Checked launches: the bytes of race shadow the launch may map (see `shadow`).
  unsigned long long shadow_budget;
};

enum { kCheckRaces = 1, kCheckInit = 2, kCheckBounds = 4, kInitReportOnly = 8 };

// An allocation a pointer parameter addresses (`RangeDesc` in run.rs).
struct Range {
  unsigned long long lo;     // its first accessible byte (the start of its first page)
  unsigned long long start;  // its first byte
  unsigned long long end;    // one past its last byte (the guard page starts there)
  unsigned long long* init;  // a bit a byte of [start, end): written; null when not tracked
  int param;                 // the first parameter that points into it
  int readonly;              // every parameter that points into it is a pointer to const
};

// One side of a finding (`AccessDesc` in run.rs).
struct Access {
  unsigned int block[3];
  unsigned int thread[3];
  int kind;                  // 0 read, 1 write, 2 atomic
  unsigned int epoch;        // barriers the block had passed
  unsigned int lane;         // the thread's warp (high 27 bits) and lane (low 5) in its block
  unsigned int pad;
  unsigned long long pc;     // the instruction's offset in the library (0: unknown)
};

// A finding (`ReportDesc` in run.rs).
struct Report {
  int what;                  // 1 race, 2 uninitialized read, 3 out of bounds, 4 signal,
                             // 5 a write to memory only pointers to const address,
                             // 6 an allocation without race shadow (`offset`: its bytes),
                             // 7 an index outside an array of fixed size (`address`: the
                             // array type's name, a string of the library; `offset`: the
                             // index; `signal`: 1 a signed index, 2 unsigned, 0 unknown;
                             // `line`: the source line)
  int space;                 // 0 a parameter's allocation, 1 __shared__, 2 extern __shared__, 3 other
  int param;
  int size;                  // bytes accessed
  long long offset;          // from the start of the allocation or shared memory
  unsigned long long address;
  int signal;
  int line;                  // 7: the source line
  Access now, before;        // `before`: the other access of a race
};

// A thread of a block whose kernel may wait (at a barrier or a warp intrinsic). It has no stack
// of its own: it starts on a runner's (below), which it keeps from its first wait to its end.
struct Fiber {
  jmp_buf ctx;  // where it waits
  uint3 tid;
  int state;  // 0: not started, 1: at a barrier, 2: finished the block, 3: resumes,
              // 4: at a warp intrinsic
  // The warp intrinsic it waits at (state 4), and what it gets back.
  int op;
  unsigned int mask;
  unsigned long long value;
  int arg, width;
  unsigned long long result;
  unsigned int pred;
};

// A stack on which a block's threads start, one after another, in one loop with the kernel
// inlined, for as long as none of them waits: a kernel that never reaches a barrier or warp
// intrinsic runs as fast as in a module without any (the module's source decides only whether
// its launches may wait, not which kernels do). A thread that waits keeps the runner's stack
// until it finishes; the next thread starts on another runner. Runner `k` runs on the launch's
// stack `k`; there are never more runners than threads, as each busy one holds a waiting thread.
struct Runner {
  jmp_buf ctx;  // where it parks, its loop done
  ucontext_t boot;
  unsigned int index;
  int fresh;    // booted for this launch, not yet entered
};

enum { kMaxThreads = 1024, kPage = 4096 };

struct Worker {
  jmp_buf sched;
  Fiber* fibers[kMaxThreads];
  Fiber* current;
  Runner* runners[kMaxThreads];
  unsigned int idle[kMaxThreads];  // the parked runners (a stack of their indices)
  unsigned int nidle;
  Runner* runner;                  // the runner being entered, and the thread it starts at
  unsigned int start_at;
  unsigned int nthreads;
  // Runs the block's threads from the first argument on, while each it reaches is unstarted.
  void (*threads)(void*, unsigned int, unsigned int);
  void* arg;
  uint3 thread_idx;  // the running thread (on fibers, the scheduler's last switch)
  uint3 block_idx;
  // uint3, not dim3: dim3's constructor would give this thread-local an initializer, whose
  // code the checked build would instrument.
  uint3 block_dim;
  uint3 grid_dim;
  int on_fibers;
  unsigned int booted;  // runners given this launch's stacks
  int tids_set;          // the fibers hold this launch's thread indices
  Launch* launch;
  int failed;
  unsigned int epoch;           // barriers the running block has passed
  unsigned long long block_linear;
  sigjmp_buf* abort_to;         // where a fault or a failing check ends the launch
};

static thread_local Worker worker;

// This host thread's worker. A thread-local's address costs a call into the dynamic loader
// (`__tls_get_addr`, the library being loaded at run time) at each use; this function is
// `const` and not inlined, so the compiler computes it once a kernel (hoisted out of the
// loop over a block's threads, into which the kernel is inlined), not once an index read.
// A block runs on one host thread from start to end, fibers included, so it never changes.
KUSARI_EMU_SHIM __attribute__((const, noinline)) static Worker* self() { return &worker; }

// The running thread's index: the scheduler sets it as it switches to a fiber, so a read is
// one load, with no test of whether the block runs on fibers.
KUSARI_EMU_SHIM static inline const uint3& current_thread() { return self()->thread_idx; }

KUSARI_EMU_SHIM static void fail(const char* what) {
  if (!worker.failed) {
    worker.failed = 1;
    snprintf(worker.launch->error, worker.launch->error_len, "%s", what);
  }
}

// Dynamic shared memory (`extern __shared__`, which the emulator rewrites into a pointer to
// this): one buffer per host thread, which runs one block at a time, as large as a launch may
// ask for (MAX_DYNAMIC_SHARED in run.rs). Its address never changes, so a pointer taken once per
// host thread stays right for every later block and launch. Each launch makes only the pages
// its shared-memory bytes need accessible (poisoned, as fresh device memory is), so a kernel
// reaching a page beyond them, or using dynamic shared memory launched without any, crashes.
// (The checked build checks the launch's bytes exactly.) In the checked build, whose launches
// run one at a time on one host thread, the buffer is one for the library, so that the pointer
// a declaration makes is not itself thread-local memory the checks would see as shared.
enum { kMaxDynamicShared = 48 * 1024 };
#ifdef KUSARI_EMU_CHECKED
static unsigned char* dynamic_buffer = nullptr;
static size_t dynamic_open = 0;
#define KUSARI_DYNAMIC_SHARED static
#else
static thread_local unsigned char* dynamic_buffer = nullptr;
static thread_local size_t dynamic_open = 0;
#define KUSARI_DYNAMIC_SHARED static thread_local
#endif

KUSARI_EMU_SHIM static void open_dynamic_shared(size_t bytes) {
  const size_t open = (bytes + kPage - 1) / kPage * kPage;
  if (open != dynamic_open) {
    if (open) mprotect(dynamic_buffer, open, PROT_READ | PROT_WRITE);
    if (open < kMaxDynamicShared)
      mprotect(dynamic_buffer + open, kMaxDynamicShared - open, PROT_NONE);
    dynamic_open = open;
  }
  memset(dynamic_buffer, 0xff, open);
}

KUSARI_EMU_SHIM static void* dynamic_shared() {
  if (!dynamic_buffer) {
    // With an inaccessible page after it.
    void* mem = mmap(nullptr, kMaxDynamicShared + kPage, PROT_NONE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED) {
      fail("out of host memory for dynamic shared memory");
      return nullptr;
    }
    dynamic_buffer = (unsigned char*)mem;
    dynamic_open = 0;
    if (worker.launch) open_dynamic_shared(worker.launch->shared_bytes);
  }
  return dynamic_buffer;
}

// Ends the launch now (a fault, or a check that fails): back to `run`, which reports.
KUSARI_EMU_SHIM [[noreturn]] static void abort_launch() {
  worker.failed = 1;
  siglongjmp(*worker.abort_to, 1);
}

KUSARI_EMU_SHIM static void describe_thread(Access* a, unsigned long long block_linear,
                                            unsigned int t) {
  const unsigned long long gx = worker.grid_dim.x, gy = worker.grid_dim.y;
  const uint3 b = worker.block_dim;
  a->block[0] = (unsigned int)(block_linear % gx);
  a->block[1] = (unsigned int)((block_linear / gx) % gy);
  a->block[2] = (unsigned int)(block_linear / (gx * gy));
  a->thread[0] = t % b.x;
  a->thread[1] = (t / b.x) % b.y;
  a->thread[2] = t / (b.x * b.y);
  a->lane = t;
}

KUSARI_EMU_SHIM static unsigned int thread_linear() {
  const uint3& t = current_thread();
  const uint3 b = self()->block_dim;
  return t.x + b.x * (t.y + b.y * t.z);
}

// A new report, or null when there is no room left.
KUSARI_EMU_SHIM static Report* new_report(int what) {
  Launch* l = worker.launch;
  if (l->report_count >= l->report_cap) return nullptr;
  Report* r = &l->reports[l->report_count++];
  memset(r, 0, sizeof *r);
  r->what = what;
  r->param = -1;
  r->space = 3;
  describe_thread(&r->now, worker.block_linear, thread_linear());
  r->now.epoch = worker.epoch;
  return r;
}

}  // namespace kusari_emu

// Called by the runtime's signal handler when a kernel of this library faults on this thread:
// records the fault and the running thread, and ends the launch.
extern "C" KUSARI_EMU_EXPORT KUSARI_EMU_SHIM void kusari_emu_fault(int sig, void* address) {
  using namespace kusari_emu;
  if (!worker.abort_to) return;
  if (Report* r = new_report(4)) {
    r->signal = sig;
    r->address = (unsigned long long)address;
  }
  abort_launch();
}

namespace kusari_emu {

#ifdef KUSARI_EMU_CHECKED
// The checked build: compiled with the host compiler's thread-sanitizer instrumentation, whose
// calls (`__tsan_read4(address)`, ...) come here instead of to a sanitizer runtime. Each access
// of a kernel to a parameter's allocation or to shared memory is checked, to the byte (the race
// shadow of an allocation has a cell for each 4 bytes, which records the bytes each access
// touched; that of shared memory, small, a cell a byte):
// - bounds: to the byte (the gap before an allocation's first byte, dynamic shared memory past
//   the bytes the launch gave);
// - initialization: a read of a byte nothing has written (allocations: kernels, copies and
//   memsets since it was made, tracked by the runtime; shared memory: this block);
// - races: two accesses by different threads of the launch, one a write, not both atomic, and
//   not ordered by a `__syncthreads` of their block.

// The last write and the last read(s) of 4 aligned bytes (of an allocation) or of a byte (of
// shared memory).
struct Cell {
  unsigned long long w, r;    // thread key + 1 (0: none), with the flags below
  unsigned long long we, re;  // the thread's epoch at the access (see `thread_epoch`)
  unsigned int wpc, rpc;      // the instruction's offset in the library
};
enum : unsigned long long {
  kKey = (1ull << 48) - 1,
  kAtomic = 1ull << 63,       // w, r: by an atomic operation
  kMany = 1ull << 62,         // r: more than one thread read it since it was last ordered
  kBlocks = 1ull << 61,       // r: threads of more than one block read it
  kBytes = 0xfull << 52,      // w, r: which of the 4 bytes the access(es) touched
};
enum { kBytesShift = 52 };

// Cells for `len` bytes from `start`, in granules of 2^shift bytes of aligned addresses.
KUSARI_EMU_SHIM static inline size_t granules(unsigned long long start, size_t len,
                                              unsigned int shift) {
  return (size_t)(((start + len + (1u << shift) - 1) >> shift) - (start >> shift)) + 1;
}
// An allocation the kernel reached through a pointer stored in memory, with its race shadow.
struct Reached {
  Range range;
  Cell* cells;
};

KUSARI_EMU_SHIM static inline const Range& range_of(const Range& r) { return r; }
KUSARI_EMU_SHIM static inline const Range& range_of(const Reached& r) { return r.range; }

// The index of the first of `n` allocations sorted by `lo` (the launch's ranges, or those it
// reached) that starts past `a`: the one before it is the only one that may hold `a`.
template <typename T>
KUSARI_EMU_SHIM static inline size_t first_past(const T* sorted, size_t n, unsigned long long a) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (range_of(sorted[mid]).lo <= a) lo = mid + 1; else hi = mid;
  }
  return lo;
}

struct Checker {
  unsigned long long lib_base;
  unsigned long long tls_lo, tls_hi;   // this thread's `__shared__` variables (the TLS block)
  Cell** range_cells;                  // per range (the launch's nranges), races checked
  Cell* tls_cells;                     // [tls_lo, tls_hi)
  Cell* dyn_cells;                     // the dynamic shared buffer
  unsigned long long* shared_init;     // a bit a byte: TLS block, then the dynamic buffer
  size_t tls_words;
  unsigned int* touched;               // shared cells written this block (to clear)
  size_t touched_len, touched_cap;
  // The read-only ranges whose reads need no check at all (every byte written before the
  // launch, or initialization unchecked): a read within one returns at once. Plain globals,
  // not thread-local: a library's checked launches run one at a time, on the launching thread.
  unsigned long long fast_start[8], fast_len[8];
  unsigned int nfast;
  // What `__syncwarp(mask)` orders (a vector clock per thread over the lanes of its warp;
  // the race check only): `lane_clock[t]`, the __syncwarp()s thread t has passed;
  // `lane_seen[t * 32 + l]`, the clock of lane l of t's warp at the last __syncwarp() that
  // ordered l's earlier accesses before t's next ones (directly, both in its mask, or through
  // lanes that met both). Whole warps of the block, reset each block that used them.
  unsigned int* lane_clock;
  unsigned int* lane_seen;
  size_t lane_bytes;
  bool lanes_used;
  // The allocations the kernel reached through pointers stored in memory (no parameter points
  // into them), each looked up at its first access (see `reached`), with their race shadows,
  // sorted by `lo` (as many as the launch reaches; the table grows); and the pages no
  // allocation holds (the threads' stacks, the library's own variables), remembered by page
  // number + 1 in a slot per page number modulo 64, so that their accesses ask the host's table
  // of allocations once.
  Reached* reached;
  size_t nreached, reached_cap;
  size_t last_reached;             // the one the last such access found (loops stay on one)
  unsigned long long not_device[64];
  unsigned long long shadow_left;  // of the launch's `shadow_budget`
};
static Checker checker;

#ifdef __linux__
KUSARI_EMU_SHIM static int phdr_visit(struct dl_phdr_info* info, size_t, void* data) {
  Checker* c = (Checker*)data;
  if (info->dlpi_addr != c->lib_base) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    if (info->dlpi_phdr[i].p_type == PT_TLS && info->dlpi_tls_data) {
      c->tls_lo = (unsigned long long)info->dlpi_tls_data;
      c->tls_hi = c->tls_lo + info->dlpi_phdr[i].p_memsz;
    }
  }
  return 1;
}
#endif

KUSARI_EMU_SHIM static void* map_zeroed(size_t bytes) {
  if (!bytes) return nullptr;
  void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return m == MAP_FAILED ? nullptr : m;
}

KUSARI_EMU_SHIM static void unmap(void* p, size_t bytes) {
  if (p) munmap(p, bytes);
}

static const size_t kCell = sizeof(Cell);

KUSARI_EMU_SHIM static size_t range_len(const Range& r) { return (size_t)(r.end - r.start); }

// The bytes of range `r`'s race shadow: a 40-byte cell for each 4 bytes.
KUSARI_EMU_SHIM static size_t shadow_bytes(const Range& r) {
  return granules(r.start, range_len(r), 2) * kCell;
}

// The race shadow of range `r` (mapped as touched), within what is left of the launch's
// budget; past it, or when the mapping fails, none, and a report (not a failure) says that
// races on `r` go unchecked.
KUSARI_EMU_SHIM static Cell* shadow(const Range& r) {
  Checker& c = checker;
  const size_t bytes = shadow_bytes(r);
  Cell* cells = bytes <= c.shadow_left ? (Cell*)map_zeroed(bytes) : nullptr;
  if (cells) {
    c.shadow_left -= bytes;
  } else if (Report* made = new_report(6)) {
    made->space = 0;
    made->param = r.param;
    made->address = r.start;
    made->offset = (long long)range_len(r);
  }
  return cells;
}

// Whether reads of range `r` need no check at all: the kernel reaches it only through pointers
// to const (no race: nothing writes it), and every byte was written before the launch (`init`
// null) or initialization goes unchecked.
KUSARI_EMU_SHIM static inline bool reads_unchecked(const Range& r, unsigned int checks) {
  return r.readonly && (!r.init || !(checks & kCheckInit));
}

// Before a checked launch: where shared memory is, and fresh shadows.
KUSARI_EMU_SHIM static void begin_checks(Launch* l) {
  Checker& c = checker;
  if (!c.lib_base) {
    Dl_info info;
    if (dladdr((void*)&begin_checks, &info)) c.lib_base = (unsigned long long)info.dli_fbase;
  }
  dynamic_shared();
  (void)self()->failed;  // touch this thread's TLS block, so it exists before dl_iterate_phdr
  c.tls_lo = c.tls_hi = 0;
#ifdef __linux__
  dl_iterate_phdr(phdr_visit, &c);  // elsewhere, `__shared__` variables go unchecked
#endif
  const size_t tls_len = (size_t)(c.tls_hi - c.tls_lo);
  c.tls_words = (tls_len + 63) / 64;
  c.shared_init = (unsigned long long*)map_zeroed((c.tls_words + kMaxDynamicShared / 64) * 8);
  if (l->checks & kCheckRaces) {
    c.tls_cells = (Cell*)map_zeroed(granules(c.tls_lo, tls_len, 0) * kCell);
    c.dyn_cells = (Cell*)map_zeroed(granules(0, kMaxDynamicShared, 0) * kCell);
    const size_t warps = ((size_t)l->block[0] * l->block[1] * l->block[2] + 31) / 32;
    c.lane_bytes = warps * 32 * 33 * sizeof(unsigned int);
    c.lane_clock = (unsigned int*)map_zeroed(c.lane_bytes);
    c.lane_seen = c.lane_clock ? c.lane_clock + warps * 32 : nullptr;
    c.lanes_used = false;
    c.shadow_left = l->shadow_budget;
    c.range_cells = l->nranges ? new (std::nothrow) Cell*[l->nranges] : nullptr;
    for (unsigned int i = 0; c.range_cells && i < l->nranges; ++i) {
      const Range& r = l->ranges[i];
      // A read-only range needs no race shadow: reads do not race with reads.
      c.range_cells[i] = r.readonly ? nullptr : shadow(r);
    }
    if (l->nranges && !c.range_cells) fail("out of host memory for the race check");
  }
  c.touched_len = 0;
  c.nreached = 0;
  c.last_reached = 0;
  memset(c.not_device, 0, sizeof c.not_device);
  c.nfast = 0;
  for (unsigned int i = 0; i < l->nranges && c.nfast < 8; ++i) {
    const Range& r = l->ranges[i];
    if (reads_unchecked(r, l->checks)) {
      c.fast_start[c.nfast] = r.start;
      c.fast_len[c.nfast++] = range_len(r);
    }
  }
}

// Whether a read of `size` bytes at `p` lies within one of the launch's fast read-only ranges
// (then there is nothing to check).
KUSARI_EMU_SHIM __attribute__((always_inline)) static inline bool unchecked_read(
    const void* p, unsigned int size) {
  const Checker& c = checker;
  const unsigned long long a = (unsigned long long)p;
  for (unsigned int i = 0; i < c.nfast; ++i) {
    const unsigned long long off = a - c.fast_start[i];
    if (a >= c.fast_start[i] && off < c.fast_len[i] && size <= c.fast_len[i] - off) return true;
  }
  return false;
}

KUSARI_EMU_SHIM static void end_checks(Launch* l) {
  Checker& c = checker;
  c.nfast = 0;
  const size_t tls_len = (size_t)(c.tls_hi - c.tls_lo);
  unmap(c.shared_init, (c.tls_words + kMaxDynamicShared / 64) * 8);
  c.shared_init = nullptr;
  if (l->checks & kCheckRaces) {
    unmap(c.tls_cells, granules(c.tls_lo, tls_len, 0) * kCell);
    unmap(c.dyn_cells, granules(0, kMaxDynamicShared, 0) * kCell);
    c.tls_cells = c.dyn_cells = nullptr;
    unmap(c.lane_clock, c.lane_bytes);
    c.lane_clock = c.lane_seen = nullptr;
    for (unsigned int i = 0; c.range_cells && i < l->nranges; ++i)
      unmap(c.range_cells[i], shadow_bytes(l->ranges[i]));
    delete[] c.range_cells;
    c.range_cells = nullptr;
  }
  for (size_t i = 0; i < c.nreached; ++i)
    unmap(c.reached[i].cells, shadow_bytes(c.reached[i].range));
  free(c.reached);
  c.reached = nullptr;
  c.nreached = c.reached_cap = 0;
  delete[] c.touched;
  c.touched = nullptr;
  c.touched_cap = c.touched_len = 0;
}

// A new block: its shared memory is new, unwritten and unraced.
KUSARI_EMU_SHIM static void begin_block_checks() {
  Checker& c = checker;
  if (c.shared_init) memset(c.shared_init, 0, (c.tls_words + kMaxDynamicShared / 64) * 8);
  const size_t tls_cells = granules(c.tls_lo, (size_t)(c.tls_hi - c.tls_lo), 0);
  for (size_t i = 0; i < c.touched_len; ++i) {
    const size_t at = c.touched[i];
    Cell* cell = at < tls_cells ? &c.tls_cells[at] : &c.dyn_cells[at - tls_cells];
    memset(cell, 0, sizeof *cell);
  }
  c.touched_len = 0;
  if (c.lanes_used) memset(c.lane_clock, 0, c.lane_bytes);
  c.lanes_used = false;
}

KUSARI_EMU_SHIM static void touch(size_t at) {
  Checker& c = checker;
  if (c.touched_len == c.touched_cap) {
    const size_t cap = c.touched_cap ? 2 * c.touched_cap : 1024;
    unsigned int* t = new (std::nothrow) unsigned int[cap];
    if (!t) return;
    if (c.touched_len) memcpy(t, c.touched, c.touched_len * sizeof(unsigned int));
    delete[] c.touched;
    c.touched = t;
    c.touched_cap = cap;
  }
  c.touched[c.touched_len++] = (unsigned int)at;
}

KUSARI_EMU_SHIM static void fill_access(Access* a, unsigned long long key,
                                        unsigned long long epoch, int kind, unsigned int pc) {
  describe_thread(a, (key - 1) >> 10, (unsigned int)((key - 1) & 1023));
  a->kind = kind;
  a->epoch = (unsigned int)(epoch >> 32);
  a->pc = pc;
}

// A new report of what the running thread's access found, or null when there is no room.
KUSARI_EMU_SHIM static Report* new_finding(int what, int space, int param, long long offset,
                                           unsigned long long address, int size, int kind,
                                           unsigned int pc) {
  Report* r = new_report(what);
  if (r) {
    r->space = space;
    r->param = param;
    r->offset = offset;
    r->address = address;
    r->size = size;
    r->now.kind = kind;
    r->now.pc = pc;
  }
  return r;
}

KUSARI_EMU_SHIM static void finding(int what, int space, int param, long long offset,
                                    unsigned long long address, int size, int kind,
                                    unsigned int pc) {
  Launch* l = self()->launch;
  const bool report_only = what == 2 && (l->checks & kInitReportOnly);
  if (report_only) {
    // One report an instruction and place.
    for (unsigned int i = 0; i < l->report_count; ++i) {
      const Report& r = l->reports[i];
      if (r.what == 2 && r.now.pc == pc && r.space == space && r.param == param) return;
    }
  }
  new_finding(what, space, param, offset, address, size, kind, pc);
  if (!report_only) abort_launch();
}

// The running thread's epoch: the block's barriers passed (high half) and the thread's
// __syncwarp()s passed (low half).
KUSARI_EMU_SHIM static unsigned long long thread_epoch() {
  const Checker& c = checker;
  const unsigned int lane_clock = c.lane_clock ? c.lane_clock[thread_linear()] : 0;
  return ((unsigned long long)self()->epoch << 32) | lane_clock;
}

// Whether an access by thread `key` at `epoch` happened before the running thread's accesses:
// a thread of the same block, before a barrier both passed since, or a lane of the same warp,
// before a __syncwarp() that orders it before this thread (see `lane_seen`).
KUSARI_EMU_SHIM static bool ordered(unsigned long long key, unsigned long long epoch) {
  if (((key - 1) >> 10) != self()->block_linear) return false;
  if ((epoch >> 32) < self()->epoch) return true;
  const Checker& c = checker;
  const unsigned int t = thread_linear(), other = (unsigned int)((key - 1) & 1023);
  if (!c.lane_seen || other / 32 != t / 32) return false;
  return (epoch & 0xffffffffu) < c.lane_seen[t * 32 + other % 32];
}

// A __syncwarp(mask) of warp `w` has completed: each lane of the mask passes it, and each now
// has every access that any lane of the mask had ordered before it (vector clocks joined).
KUSARI_EMU_SHIM static void order_lanes(unsigned int w, unsigned int mask) {
  Checker& c = checker;
  if (!c.lane_clock) return;
  c.lanes_used = true;
  unsigned int* const clock = c.lane_clock + w * 32;
  unsigned int* const seen = c.lane_seen + (size_t)w * 32 * 32;
  unsigned int joined[32] = {0};
  for (unsigned int l = 0; l < 32; ++l) {
    if (!((mask >> l) & 1)) continue;
    ++clock[l];
    for (unsigned int x = 0; x < 32; ++x)
      if (seen[l * 32 + x] > joined[x]) joined[x] = seen[l * 32 + x];
  }
  for (unsigned int l = 0; l < 32; ++l)
    if ((mask >> l) & 1) joined[l] = clock[l];
  for (unsigned int l = 0; l < 32; ++l)
    if ((mask >> l) & 1) memcpy(seen + l * 32, joined, sizeof joined);
}

KUSARI_EMU_SHIM static void race(int space, int param, long long offset,
                                 unsigned long long address, int size, int kind, unsigned int pc,
                                 unsigned long long other, unsigned long long other_epoch,
                                 int other_kind, unsigned int other_pc) {
  if (Report* made = new_finding(1, space, param, offset, address, size, kind, pc))
    fill_access(&made->before, other & kKey, other_epoch, other_kind, other_pc);
  abort_launch();
}

KUSARI_EMU_SHIM static void check_race(Cell& c, unsigned long long key, int kind, unsigned int pc,
                                       unsigned int bytes, int space, int param, long long offset,
                                       unsigned long long address, int size) {
  const bool atomic = kind == 2;
  const unsigned long long epoch = thread_epoch();
  const unsigned long long m = (unsigned long long)bytes << kBytesShift;
  if (c.w & m) {
    const unsigned long long wk = c.w & kKey;
    const bool watomic = (c.w & kAtomic) != 0;
    if (wk != key && !(watomic && atomic) && !ordered(wk, c.we))
      race(space, param, offset, address, size, kind, pc, wk, c.we, watomic ? 2 : 1, c.wpc);
  }
  if (kind != 0) {
    if (c.r & m) {
      const unsigned long long rk = c.r & kKey;
      const bool ratomic = (c.r & kAtomic) != 0;
      const bool many = (c.r & kMany) != 0, blocks = (c.r & kBlocks) != 0;
      if (blocks || (!(ratomic && atomic) && (many || rk != key) && !ordered(rk, c.re)))
        race(space, param, offset, address, size, kind, pc, rk, c.re, ratomic ? 2 : 0, c.rpc);
    }
    c.w = key | m | (atomic ? kAtomic : 0);
    c.we = epoch;
    c.wpc = pc;
    if (!(c.r & kBytes & ~m)) c.r = 0;  // the reads of these bytes are ordered before it
  } else if (!c.r || ordered(c.r & kKey, c.re)) {
    c.r = key | m;
    c.re = epoch;
    c.rpc = pc;
  } else if ((c.r & kKey) != key) {
    // A second reader: the first stays named (the one a later write races with, unless it is
    // the writer), with the flags saying there are more.
    const bool other_block = (((c.r & kKey) - 1) >> 10) != self()->block_linear;
    c.r |= m | kMany | (other_block ? kBlocks : 0);
  } else {
    c.r |= m;
  }
}

KUSARI_EMU_SHIM static bool bit(const unsigned long long* bits, size_t i) {
  return (__atomic_load_n(&bits[i / 64], __ATOMIC_RELAXED) >> (i % 64)) & 1;
}

KUSARI_EMU_SHIM static void set_bit(unsigned long long* bits, size_t i) {
  const unsigned long long m = 1ull << (i % 64);
  if (!(__atomic_load_n(&bits[i / 64], __ATOMIC_RELAXED) & m))
    __atomic_fetch_or(&bits[i / 64], m, __ATOMIC_RELAXED);
}

// The allocation holding `a` that no parameter points into, which the kernel reached through a
// pointer stored in memory (an array of pointers), with its race shadow in `cells`; null when
// no allocation holds `a` (a thread's stack, the library's own variables). The launch's table
// of them is searched by halves, the last one found first.
KUSARI_EMU_SHIM static const Range* reached(unsigned long long a, Cell** cells) {
  Checker& c = checker;
  if (c.last_reached < c.nreached) {
    const Reached& last = c.reached[c.last_reached];
    if (a >= last.range.lo && a < last.range.end) {
      *cells = last.cells;
      return &last.range;
    }
  }
  const size_t lo = first_past(c.reached, c.nreached, a);
  if (lo > 0 && a < c.reached[lo - 1].range.end) {
    c.last_reached = lo - 1;
    *cells = c.reached[lo - 1].cells;
    return &c.reached[lo - 1].range;
  }
  const unsigned long long page = a / kPage;
  unsigned long long& not_device = c.not_device[page % 64];
  const Launch* l = self()->launch;
  if (not_device == page + 1 || !l->lookup) return nullptr;
  Range r;
  if (!l->lookup(a, &r)) {
    not_device = page + 1;
    return nullptr;
  }
  if (c.nreached == c.reached_cap) {
    const size_t cap = c.reached_cap ? 2 * c.reached_cap : 16;
    Reached* grown = (Reached*)realloc(c.reached, cap * sizeof(Reached));
    if (!grown) {
      fail("out of host memory for the allocations the kernel reached through stored pointers");
      abort_launch();
    }
    c.reached = grown;
    c.reached_cap = cap;
  }
  // Allocations do not overlap, so `lo` is where it goes.
  memmove(c.reached + lo + 1, c.reached + lo, (c.nreached - lo) * sizeof(Reached));
  ++c.nreached;
  Reached& made = c.reached[lo];
  made.range = r;
  made.cells = (l->checks & kCheckRaces) ? shadow(r) : nullptr;
  c.last_reached = lo;
  *cells = made.cells;
  return &made.range;
}

// One access of `size` bytes at `p` by the running thread; `kind` 0 read, 1 write, 2 atomic.
KUSARI_EMU_SHIM static void on_access(const void* p, unsigned int size, int kind, void* ret) {
  Launch* l = self()->launch;
  if (!l || !l->checks || !self()->abort_to) return;
  Checker& c = checker;
  const unsigned long long a = (unsigned long long)p;
  // The shim's own thread-local state is not the kernel's memory.
  if (a >= (unsigned long long)self() && a < (unsigned long long)(self() + 1)) return;
  const unsigned int pc =
      (unsigned int)((unsigned long long)ret - c.lib_base - 1);
  int space, param = -1;
  long long offset;
  Cell* cells = nullptr;
  unsigned long long* init = nullptr;
  unsigned long long base = 0;  // the address the cells start at (rounded down to 4 bytes)
  size_t shared_at = 0;         // the first cell's index among the shared cells
  const size_t tls_len = (size_t)(c.tls_hi - c.tls_lo);
  const unsigned long long dyn = (unsigned long long)dynamic_buffer;
  if (dyn && a >= dyn && a < dyn + kMaxDynamicShared + kPage) {
    space = 2;
    offset = (long long)(a - dyn);
    if (offset + size > (long long)l->shared_bytes) {
      if (l->checks & kCheckBounds) finding(3, space, -1, offset, a, (int)size, kind, pc);
      return;
    }
    cells = c.dyn_cells;
    init = c.shared_init ? c.shared_init + c.tls_words : nullptr;
    base = dyn;
    shared_at = granules(c.tls_lo, tls_len, 0);
  } else if (a >= c.tls_lo && a < c.tls_hi) {
    space = 1;
    offset = (long long)(a - c.tls_lo);
    cells = c.tls_cells;
    init = c.shared_init;
    base = c.tls_lo;
  } else {
    // The allocation whose accessible pages hold `a`.
    const size_t lo = first_past(l->ranges, l->nranges, a);
    const Range* found = lo > 0 && a < l->ranges[lo - 1].end ? &l->ranges[lo - 1] : nullptr;
    Cell* found_cells = found && c.range_cells ? c.range_cells[lo - 1] : nullptr;
    if (!found) found = reached(a, &found_cells);
    if (!found) return;
    const Range& r = *found;
    space = 0;
    param = r.param;
    offset = (long long)(a - r.start);
    if (a < r.start) {
      if (l->checks & kCheckBounds) finding(3, space, param, offset, a, (int)size, kind, pc);
      return;
    }
    if (a + size > r.end) size = (unsigned int)(r.end - a);
    // Memory the kernel reaches only through pointers to const (the ranges past the fast
    // path's eight, and range reads): a write is the kernel's mistake, since the race check
    // does not track these reads.
    if (r.readonly && kind != 0 && (l->checks & kCheckRaces)) {
      finding(5, space, param, offset, a, (int)size, kind, pc);
      return;
    }
    if (kind == 0 && reads_unchecked(r, l->checks)) return;
    cells = found_cells;
    init = r.init;
    base = r.start;
  }
  const unsigned long long key =
      ((self()->block_linear << 10) | thread_linear()) + 1;
  // Writes to an allocation are recorded whatever the checks, for a later launch's
  // initialization check (shared memory lives only as long as its block).
  if (init && ((l->checks & kCheckInit) || (kind != 0 && space == 0))) {
    for (unsigned int b = 0; b < size; ++b) {
      const size_t at = (size_t)offset + b;
      if ((l->checks & kCheckInit) && kind != 1 && !bit(init, at)) {
        finding(2, space, param, offset, a, (int)size, kind, pc);
        break;  // reported (in report mode): once an access
      }
      if (kind != 0) set_bit(init, at);
    }
  }
  if ((l->checks & kCheckRaces) && cells) {
    const unsigned int shift = space == 0 ? 2 : 0, width = 1u << shift;
    for (unsigned long long g = a >> shift; g <= (a + size - 1) >> shift; ++g) {
      const unsigned long long lo = g << shift > a ? g << shift : a;
      const unsigned long long hi = (g << shift) + width < a + size ? (g << shift) + width : a + size;
      const unsigned int bytes = ((1u << (hi - lo)) - 1) << (lo & (width - 1));
      const size_t at = (size_t)(g - (base >> shift));
      Cell& cell = cells[at];
      if (space != 0 && !cell.w && !cell.r) touch(shared_at + at);
      check_race(cell, key, kind, pc, bytes, space, param, offset, a, (int)size);
    }
  }
}

// An atomic operation of the shim's (atomicAdd, ...) on `size` bytes at `p`.
KUSARI_EMU_SHIM __attribute__((always_inline)) static inline void on_atomic(const void* p, unsigned int size) {
  on_access(p, size, 2, __builtin_return_address(0));
}
#else
static inline void on_atomic(const void*, unsigned int) {}
static inline void begin_checks(Launch*) {}
static inline void end_checks(Launch*) {}
static inline void begin_block_checks() {}
#endif

KUSARI_EMU_SHIM __attribute__((noinline)) static void barrier() {
  if (!worker.on_fibers) {
    fail("__syncthreads was reached in a kernel launched without barriers");
    return;
  }
  Fiber* f = worker.current;
  f->state = 1;
  if (!_setjmp(f->ctx)) _longjmp(worker.sched, 1);
}

KUSARI_EMU_SHIM static void runner_main() {
  for (;;) {
    // A local, on this runner's own stack: `worker.runner` names whichever runner the
    // scheduler entered last, which is another once a thread here has waited.
    Runner* const r = worker.runner;
    worker.threads(worker.arg, worker.start_at, worker.nthreads);
    worker.idle[worker.nidle++] = r->index;
    if (!_setjmp(r->ctx)) _longjmp(worker.sched, 1);
  }
}

// A parked runner, or a new one on the launch's next stack (null when out of host memory). The
// stacks belong to the host side (one set per host thread, shared by every kernel library, each
// with a guard page below it): a library keeps no stacks of its own, so loading many kernels
// costs no memory mappings. Every launch boots its runners afresh, since another library may
// have used the stacks since.
KUSARI_EMU_SHIM static Runner* take_runner(unsigned int nthreads) {
  if (worker.nidle) return worker.runners[worker.idle[--worker.nidle]];
  const unsigned int k = worker.booted;
  if (k >= nthreads) return nullptr;  // cannot happen: a busy runner holds a waiting thread
  Runner* r = worker.runners[k];
  if (!r) {
    r = new (std::nothrow) Runner();
    if (!r) return nullptr;
    getcontext(&r->boot);
    r->index = k;
    worker.runners[k] = r;
  }
  r->boot.uc_stack.ss_sp = worker.launch->stacks[k];
  r->boot.uc_stack.ss_size = worker.launch->stack_bytes;
  r->boot.uc_link = nullptr;
  makecontext(&r->boot, runner_main, 0);
  r->fresh = 1;
  ++worker.booted;
  return r;
}

// ---- Warp intrinsics ----
// A warp is 32 consecutive threads of a block (by linear index). Each `_sync` intrinsic is a
// meeting point of the lanes its mask names: a lane that reaches it waits (as at a barrier)
// until every lane of the mask has reached the same intrinsic with the same mask; then each
// gets its result. CUDA leaves undefined a lane calling with a mask without itself, a mask
// naming a lane that has exited, waits elsewhere or does not exist, lanes of one meeting with
// different intrinsics or masks, and a shuffle reading a lane outside the mask: each is an error
// here, naming the lanes.
enum {
  kShfl = 1, kShflUp, kShflDown, kShflXor, kBallot, kAny, kAll, kSyncwarp, kReduceAdd,
  kReduceMinU, kReduceMaxU, kReduceMinS, kReduceMaxS, kReduceAnd, kReduceOr, kReduceXor,
  kMatchAny, kMatchAll, kActiveMask
};

KUSARI_EMU_SHIM static const char* op_name(int op) {
  static const char* const names[] = {
      "?", "__shfl_sync", "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync",
      "__ballot_sync", "__any_sync", "__all_sync", "__syncwarp", "__reduce_add_sync",
      "__reduce_min_sync", "__reduce_max_sync", "__reduce_min_sync", "__reduce_max_sync",
      "__reduce_and_sync", "__reduce_or_sync", "__reduce_xor_sync", "__match_any_sync",
      "__match_all_sync", "__activemask"};
  return op > 0 && op <= kActiveMask ? names[op] : "?";
}

// Fails the launch with a message (formatted by the caller) and ends it.
KUSARI_EMU_SHIM [[noreturn]] static void warp_error(const char* text) {
  fail(text);
  abort_launch();
}

KUSARI_EMU_SHIM __attribute__((noinline)) static unsigned long long warp_meet(int op, unsigned int mask,
                                                    unsigned long long value, int arg, int width) {
  if (!worker.on_fibers) warp_error("a warp intrinsic ran in a kernel launched without fibers");
  const unsigned int lane = thread_linear() % 32;
  if (op != kActiveMask && !((mask >> lane) & 1)) {
    char text[200];
    snprintf(text, sizeof text,
             "%s: lane %u of warp %u calls it with mask 0x%08x, which does not name the lane "
             "itself (undefined behaviour in CUDA)",
             op_name(op), lane, thread_linear() / 32, mask);
    warp_error(text);
  }
  Fiber* f = worker.current;
  f->op = op;
  f->mask = mask;
  f->value = value;
  f->arg = arg;
  f->width = width;
  f->state = 4;
  if (!_setjmp(f->ctx)) _longjmp(worker.sched, 1);
  return f->result;
}

KUSARI_EMU_SHIM static const char* state_name(int state) {
  switch (state) {
    case 1: return "waits at __syncthreads";
    case 2: return "has exited";
    default: return "has not reached it";
  }
}

// The meeting of warp `w` that lane `first` (waiting) belongs to: completes it, or fails the
// launch when it cannot complete as CUDA defines. Returns whether it completed.
KUSARI_EMU_SHIM static bool complete_meeting(unsigned int w, unsigned int first,
                                             unsigned int nthreads, bool stuck) {
  Fiber* const* fib = worker.fibers + w * 32;
  const Fiber* a = fib[first];
  const unsigned int mask = a->mask;
  const unsigned int lanes = nthreads - w * 32 < 32 ? nthreads - w * 32 : 32;
  char text[300];
  if (a->op == kActiveMask) {
    // The lanes converged here: those of the warp waiting at __activemask() once every lane
    // that could run has run.
    unsigned int here = 0;
    for (unsigned int l = 0; l < lanes; ++l)
      if (fib[l]->state == 4 && fib[l]->op == kActiveMask) here |= 1u << l;
    for (unsigned int l = 0; l < lanes; ++l) {
      if (!((here >> l) & 1)) continue;
      fib[l]->result = here;
      fib[l]->state = 3;
    }
    return true;
  }
  for (unsigned int l = 0; l < 32; ++l) {
    if (!((mask >> l) & 1)) continue;
    if (l >= lanes) {
      snprintf(text, sizeof text,
               "%s: lane %u of warp %u names lane %u in mask 0x%08x, but the block has %u "
               "threads, so that lane does not exist (undefined behaviour in CUDA)",
               op_name(a->op), first, w, l, mask, nthreads);
      warp_error(text);
    }
    const Fiber* b = fib[l];
    if (b->state == 4 && (b->op != a->op || b->mask != a->mask)) {
      snprintf(text, sizeof text,
               "warp %u: lane %u calls %s with mask 0x%08x while lane %u calls %s with mask "
               "0x%08x: the lanes of a mask must meet at the same intrinsic with the same mask",
               w, first, op_name(a->op), mask, l, op_name(b->op), b->mask);
      warp_error(text);
    }
    if (b->state != 4) {
      if (!stuck && b->state != 2 && b->state != 1) return false;
      snprintf(text, sizeof text,
               "%s: lane %u of warp %u waits for lane %u (mask 0x%08x), which %s: an inactive "
               "lane named in the mask (undefined behaviour in CUDA)",
               op_name(a->op), first, w, l, mask, state_name(b->state));
      warp_error(text);
    }
  }
  // Every lane of the mask is here.
  unsigned long long results[32];
  unsigned int preds[32];
  for (unsigned int l = 0; l < 32; ++l) {
    if (!((mask >> l) & 1)) continue;
    const Fiber* b = fib[l];
    const int width = b->width;
    unsigned long long r = b->value;
    unsigned int pred = 0;
    const auto read = [&](unsigned int src) -> unsigned long long {
      if (!((mask >> src) & 1)) {
        snprintf(text, sizeof text,
                 "%s: lane %u of warp %u reads lane %u, which is not in the mask 0x%08x "
                 "(undefined behaviour in CUDA)",
                 op_name(a->op), l, w, src, mask);
        warp_error(text);
      }
      return fib[src]->value;
    };
    if (a->op >= kShfl && a->op <= kShflXor &&
        (width < 1 || width > 32 || (width & (width - 1)))) {
      snprintf(text, sizeof text, "%s: width %d is not a power of two from 1 to 32",
               op_name(a->op), width);
      warp_error(text);
    }
    const unsigned int seg = a->op >= kShfl && a->op <= kShflXor ? l / width * width : 0;
    switch (a->op) {
      case kShfl: r = read(seg + ((unsigned int)b->arg % width)); break;
      case kShflUp:
        if ((int)(l - seg) >= b->arg) r = read(l - b->arg);
        break;
      case kShflDown:
        if ((int)(l - seg) + b->arg < width) r = read(l + b->arg);
        break;
      case kShflXor: {
        const unsigned int src = l ^ ((unsigned int)b->arg & 31);
        if (src / width <= l / width) r = read(src);
        break;
      }
      default: {
        unsigned long long acc = 0;
        bool first_lane = true, all_same = true;
        for (unsigned int m = 0; m < 32; ++m) {
          if (!((mask >> m) & 1)) continue;
          const unsigned long long v = fib[m]->value;
          switch (a->op) {
            case kBallot: case kAny: case kAll: acc |= (unsigned long long)(v != 0) << m; break;
            case kReduceAdd: acc = (unsigned int)(acc + v); break;
            case kReduceMinU:
              acc = first_lane || (unsigned int)v < (unsigned int)acc ? v : acc; break;
            case kReduceMaxU:
              acc = first_lane || (unsigned int)v > (unsigned int)acc ? v : acc; break;
            case kReduceMinS: acc = first_lane || (int)v < (int)acc ? v : acc; break;
            case kReduceMaxS: acc = first_lane || (int)v > (int)acc ? v : acc; break;
            case kReduceAnd: acc = first_lane ? v : (acc & v); break;
            case kReduceOr: acc |= v; break;
            case kReduceXor: acc ^= v; break;
            case kMatchAny: if (v == b->value) acc |= 1ull << m; break;
            case kMatchAll: if (v != b->value) all_same = false; break;
            default: break;
          }
          first_lane = false;
        }
        switch (a->op) {
          case kAny: r = acc != 0; break;
          case kAll: r = acc == mask; break;
          case kMatchAll: r = all_same ? mask : 0; pred = all_same; break;
          case kSyncwarp: r = 0; break;
          default: r = acc; break;
        }
      }
    }
    results[l] = r;
    preds[l] = pred;
  }
#ifdef KUSARI_EMU_CHECKED
  // A __syncwarp() orders the memory accesses of the lanes its mask names.
  if (a->op == kSyncwarp) order_lanes(w, mask);
#endif
  for (unsigned int l = 0; l < 32; ++l) {
    if (!((mask >> l) & 1)) continue;
    fib[l]->result = results[l];
    fib[l]->pred = preds[l];
    fib[l]->state = 3;
  }
  return true;
}

// Completes what warp meetings can complete; with `stuck` (nothing else can run), a meeting
// that cannot is an error. Returns whether one completed.
KUSARI_EMU_SHIM static bool complete_meetings(unsigned int nthreads, bool stuck) {
  bool progress = false;
  for (unsigned int w = 0; w * 32 < nthreads; ++w) {
    for (unsigned int l = 0; l < 32 && w * 32 + l < nthreads; ++l) {
      if (worker.fibers[w * 32 + l]->state == 4 && complete_meeting(w, l, nthreads, stuck))
        progress = true;
    }
  }
  return progress;
}

KUSARI_EMU_SHIM static void run_block_on_fibers(unsigned int nthreads) {
  // Through `self()`: each `worker.` would look the thread-local up again after every switch.
  Worker* const w = self();
  if (!w->tids_set) {
    // Every block of a launch has the same threads: their indices are set at the first.
    const uint3 b = w->block_dim;
    for (unsigned int t = 0; t < nthreads; ++t) {
      Fiber* f = w->fibers[t];
      if (!f) {
        f = new (std::nothrow) Fiber();
        if (!f) { fail("out of host memory for the block's threads"); return; }
        w->fibers[t] = f;
      }
      f->tid = uint3{t % b.x, (t / b.x) % b.y, t / (b.x * b.y)};
    }
    w->tids_set = 1;
  }
  for (unsigned int t = 0; t < nthreads; ++t) w->fibers[t]->state = 0;
  w->nthreads = nthreads;
  for (;;) {
    // Run every thread that can run until it waits or finishes: a thread not started starts on
    // a runner, which goes on to the threads after it until one waits; a waiting one resumes.
    unsigned int waiting = 0, finished = 0, at_warp = 0;
    for (unsigned int t = 0; t < nthreads; ++t) {
      Fiber* f = w->fibers[t];
      if (f->state == 0) {
        Runner* r = take_runner(nthreads);
        if (!r) { fail("out of host memory for the block's threads"); return; }
        w->runner = r;
        w->start_at = t;
        if (!_setjmp(w->sched)) {
          if (r->fresh) {
            r->fresh = 0;
            setcontext(&r->boot);
          }
          _longjmp(r->ctx, 1);
        }
        if (w->failed) return;
      } else if (f->state == 3) {
        w->current = f;
        w->thread_idx = f->tid;
        if (!_setjmp(w->sched)) _longjmp(f->ctx, 1);
        if (w->failed) return;
      }
      if (f->state == 1) ++waiting;
      else if (f->state == 2) ++finished;
      else if (f->state == 4) ++at_warp;
    }
    if (finished == nthreads) return;
    if (at_warp) {
      // Meetings that can complete do; the rest wait for lanes that can still run.
      if (complete_meetings(nthreads, false)) continue;
      complete_meetings(nthreads, true);  // fails the launch, naming the lanes
      return;
    }
    if (finished != 0) {
      fail("__syncthreads was not reached by every thread of a block: some threads finished while "
           "others wait at the barrier (undefined behaviour in CUDA)");
      return;
    }
    ++w->epoch;
    for (unsigned int t = 0; t < nthreads; ++t) w->fibers[t]->state = 3;
  }
}

// `block`, when given, runs every thread of a block without barriers (the kernel inlined into
// its loop); else `body` runs one thread.
KUSARI_EMU_SHIM static void run_blocks(Launch* l, void (*body)(void*), void* arg,
                                       void (*block)(void*, unsigned int)) {
  worker.arg = arg;
  const unsigned int nthreads = l->block[0] * l->block[1] * l->block[2];
  const unsigned long long gx = l->grid[0], gy = l->grid[1];
  for (unsigned long long bi = l->first_block; bi < l->end_block && !worker.failed; ++bi) {
    worker.block_idx = uint3{(unsigned int)(bi % gx), (unsigned int)((bi / gx) % gy),
                             (unsigned int)(bi / (gx * gy))};
    worker.block_linear = bi;
    worker.epoch = 0;
    if (l->checks) begin_block_checks();
    if (l->fibers) {
      run_block_on_fibers(nthreads);
    } else if (block) {
      block(arg, nthreads);
    } else {
      const uint3 b = worker.block_dim;
      for (unsigned int t = 0; t < nthreads && !worker.failed; ++t) {
        worker.thread_idx = uint3{t % b.x, (t / b.x) % b.y, t / (b.x * b.y)};
        body(arg);
      }
    }
  }
}

// `threads` runs a block's threads on a runner (a launch with `fibers`).
KUSARI_EMU_SHIM static void run(Launch* l, void (*body)(void*), void* arg,
                                void (*block)(void*, unsigned int),
                                void (*threads)(void*, unsigned int, unsigned int)) {
  worker.launch = l;
  if (dynamic_buffer) open_dynamic_shared(l->shared_bytes);
  worker.failed = 0;
  worker.threads = threads;
  worker.on_fibers = l->fibers;
  worker.booted = 0;
  worker.nidle = 0;
  worker.tids_set = 0;
  worker.grid_dim = uint3{l->grid[0], l->grid[1], l->grid[2]};
  worker.block_dim = uint3{l->block[0], l->block[1], l->block[2]};
  if (l->checks) begin_checks(l);
  sigjmp_buf abort_to;
  if (sigsetjmp(abort_to, 1) == 0) {
    worker.abort_to = &abort_to;
    run_blocks(l, body, arg, block);
  } else {
    // A fault or a failing check: the runners' stacks hold abandoned threads, to boot afresh.
    worker.booted = 0;
    worker.nidle = 0;
    fail("the launch was stopped");
  }
  worker.abort_to = nullptr;
  if (l->checks) end_checks(l);
  // A finding fails the launch; an uninitialized read in report mode, and an allocation
  // without race shadow, do not.
  for (unsigned int i = 0; i < l->report_count && !worker.failed; ++i) {
    const int what = l->reports[i].what;
    if (what != 6 && !(what == 2 && (l->checks & kInitReportOnly))) worker.failed = 1;
  }
  worker.launch = nullptr;
}

// The kernel's parameters, read from the launch's `kernelParams` with their device-side types.
template <typename K, typename... A, size_t... I>
KUSARI_EMU_SHIM static void call(K k, void** params, std::index_sequence<I...>) {
  k(*static_cast<typename std::remove_cv<A>::type*>(params[I])...);
}

template <typename A>
constexpr int pointer_kind() {
  if constexpr (std::is_pointer<A>::value)
    return std::is_const<typename std::remove_pointer<A>::type>::value ? 2 : 1;
  else
    return 0;
}

template <typename... A>
struct Entry {
  // The launch's parameters, copied out of `kernelParams` once a block.
  using Values = std::tuple<typename std::remove_cv<A>::type...>;
  template <size_t... I>
  KUSARI_EMU_SHIM static inline Values values(void** params, std::index_sequence<I...>) {
    return Values(*static_cast<typename std::remove_cv<A>::type*>(params[I])...);
  }
  // Kernel `K` called directly (so that it can be inlined) with the launch's parameters.
  template <void (*K)(A...), size_t... I>
  KUSARI_EMU_SHIM static inline void call_direct(const Values& v, std::index_sequence<I...>) {
    K(std::get<I>(v)...);
  }
  struct Bound {
    void (*kernel)(A...);
    void** params;
  };
  KUSARI_EMU_SHIM static void thread(void* p) {
    Bound* b = static_cast<Bound*>(p);
    call<void (*)(A...), A...>(b->kernel, b->params, std::index_sequence_for<A...>{});
  }
  // Every thread of a block, the kernel `K` inlined into the loop over them (a kernel without
  // barriers: its threads run one after another).
  template <void (*K)(A...)>
  KUSARI_EMU_SHIM __attribute__((flatten)) static void block_of(void* p, unsigned int nthreads) {
    // Locals, which the kernel's writes through its pointers cannot alias: read once a block.
    const Values v = values(static_cast<Bound*>(p)->params, std::index_sequence_for<A...>{});
    Worker* w = self();
    const uint3 d = w->block_dim;
    if (d.y == 1 && d.z == 1) {
      for (unsigned int t = 0; t < nthreads && !w->failed; ++t) {
        w->thread_idx = uint3{t, 0, 0};
        call_direct<K>(v, std::index_sequence_for<A...>{});
      }
      return;
    }
    for (unsigned int t = 0; t < nthreads && !w->failed; ++t) {
      w->thread_idx = uint3{t % d.x, (t / d.x) % d.y, t / (d.x * d.y)};
      call_direct<K>(v, std::index_sequence_for<A...>{});
    }
  }
  // The threads of a block from `start` on, on a runner (a launch that may wait), each while
  // it has not been started: when one waits, the scheduler starts the next on another runner,
  // and this loop, once its thread resumes and finishes, finds the next thread started.
  template <void (*K)(A...)>
  KUSARI_EMU_SHIM __attribute__((flatten)) static void threads_from(void* p, unsigned int start,
                                                                     unsigned int nthreads) {
#ifndef KUSARI_EMU_CHECKED
    const Values v = values(static_cast<Bound*>(p)->params, std::index_sequence_for<A...>{});
#endif
    Worker* w = self();
    for (unsigned int t = start; t < nthreads && !w->failed; ++t) {
      Fiber* f = w->fibers[t];
      if (f->state != 0) return;
      w->current = f;
      w->thread_idx = f->tid;
#ifdef KUSARI_EMU_CHECKED
      thread(p);
#else
      call_direct<K>(v, std::index_sequence_for<A...>{});
#endif
      f->state = 2;
    }
  }
  template <void (*K)(A...)>
  KUSARI_EMU_SHIM static int launch(void** params, Launch* l) {
    Bound b{K, params};
#ifdef KUSARI_EMU_CHECKED
    // The checked build keeps each thread a call of the instrumented kernel.
    run(l, &Entry::thread, &b, nullptr, &Entry::template threads_from<K>);
#else
    run(l, &Entry::thread, &b, &Entry::template block_of<K>, &Entry::template threads_from<K>);
#endif
    return worker.failed;
  }
  static unsigned int count() { return sizeof...(A); }
  static void describe(unsigned long long* sizes, int* pointers) {
    const unsigned long long s[] = {0ull, (unsigned long long)sizeof(A)...};
    // 1: a pointer, 2: a pointer to const (the kernel does not write through it).
    const int p[] = {0, pointer_kind<A>()...};
    for (size_t i = 0; i < sizeof...(A); ++i) { sizes[i] = s[i + 1]; pointers[i] = p[i + 1]; }
  }
};

template <typename... A>
static Entry<A...> entry_of(void (*)(A...)) { return Entry<A...>{}; }

KUSARI_EMU_SHIM static inline const uint3& block_idx() { return self()->block_idx; }
KUSARI_EMU_SHIM static inline dim3 block_dim() { return self()->block_dim; }
KUSARI_EMU_SHIM static inline dim3 grid_dim() { return self()->grid_dim; }

}  // namespace kusari_emu

#ifdef KUSARI_EMU_CHECKED
// The instrumentation's entry points (no sanitizer runtime is linked).
#define KUSARI_TSAN_ACCESS(N)                                                                   \
  extern "C" KUSARI_EMU_SHIM void __tsan_read##N(void* p) {                                     \
    if (!kusari_emu::unchecked_read(p, N))                                                      \
      kusari_emu::on_access(p, N, 0, __builtin_return_address(0));                              \
  }                                                                                             \
  extern "C" KUSARI_EMU_SHIM void __tsan_write##N(void* p) {                                    \
    kusari_emu::on_access(p, N, 1, __builtin_return_address(0));                                \
  }                                                                                             \
  extern "C" KUSARI_EMU_SHIM void __tsan_unaligned_read##N(void* p) {                           \
    if (!kusari_emu::unchecked_read(p, N))                                                      \
      kusari_emu::on_access(p, N, 0, __builtin_return_address(0));                              \
  }                                                                                             \
  extern "C" KUSARI_EMU_SHIM void __tsan_unaligned_write##N(void* p) {                          \
    kusari_emu::on_access(p, N, 1, __builtin_return_address(0));                                \
  }
KUSARI_TSAN_ACCESS(1)
KUSARI_TSAN_ACCESS(2)
KUSARI_TSAN_ACCESS(4)
KUSARI_TSAN_ACCESS(8)
KUSARI_TSAN_ACCESS(16)
#undef KUSARI_TSAN_ACCESS
extern "C" KUSARI_EMU_SHIM void __tsan_read_range(void* p, unsigned long n) {
  kusari_emu::on_access(p, (unsigned int)n, 0, __builtin_return_address(0));
}
extern "C" KUSARI_EMU_SHIM void __tsan_write_range(void* p, unsigned long n) {
  kusari_emu::on_access(p, (unsigned int)n, 1, __builtin_return_address(0));
}
extern "C" KUSARI_EMU_SHIM void __tsan_func_entry(void*) {}
extern "C" KUSARI_EMU_SHIM void __tsan_func_exit(void*) {}
extern "C" KUSARI_EMU_SHIM void __tsan_init() {}
extern "C" KUSARI_EMU_SHIM void __tsan_vptr_update(void**, void*) {}
extern "C" KUSARI_EMU_SHIM void __tsan_vptr_read(void**) {}

// The bounds instrumentation (`-fsanitize=bounds`): an index into an array whose size the type
// gives (`__constant__ float c[16]`, `__shared__ float s[256]`, `float acc[4]`, a row of
// `float tile[16][17]`) outside [0, size) calls this, with what the compiler knows (the same
// layout for GCC and Clang), before the access happens.
namespace kusari_emu {
struct UbsanType {
  unsigned short kind;  // 0: an integer
  unsigned short info;  // integers: bit 0 signed, the rest log2 of the width in bits
  char name[1];         // NUL-terminated, quoted: 'float [16]'
};
struct UbsanOutOfBounds {
  const char* file;
  unsigned int line, column;
  const UbsanType* array;
  const UbsanType* index;
};
// The index as a 64-bit value (`handle` holds integers up to the pointer's width), and whether
// its type is signed; false when it is wider.
KUSARI_EMU_SHIM static bool ubsan_index(const UbsanType* t, uintptr_t handle, long long* out,
                                        bool* is_signed) {
  if (t->kind != 0) return false;
  const unsigned int bits = 1u << (t->info >> 1);
  *is_signed = t->info & 1;
  if (bits > 64) return false;
  unsigned long long v = handle;
  if (bits < 64) {
    v &= (1ull << bits) - 1;
    if (*is_signed && (v >> (bits - 1))) v |= ~0ull << bits;
  }
  *out = (long long)v;
  return true;
}
KUSARI_EMU_SHIM static void index_out_of_bounds(const UbsanOutOfBounds* d, uintptr_t index,
                                                void* ret) {
  Launch* l = self()->launch;
  if (!l || !(l->checks & kCheckBounds) || !self()->abort_to) return;
  if (Report* r = new_report(7)) {
    long long value = 0;
    bool is_signed = true;
    r->signal = ubsan_index(d->index, index, &value, &is_signed) ? (is_signed ? 1 : 2) : 0;
    r->offset = value;
    r->address = (unsigned long long)d->array->name;
    r->line = (int)d->line;
    r->now.pc = (unsigned int)((unsigned long long)ret - checker.lib_base - 1);
  }
  abort_launch();
}
}  // namespace kusari_emu
extern "C" KUSARI_EMU_SHIM void __ubsan_handle_out_of_bounds(void* data, uintptr_t index) {
  kusari_emu::index_out_of_bounds((const kusari_emu::UbsanOutOfBounds*)data, index,
                                  __builtin_return_address(0));
}
extern "C" KUSARI_EMU_SHIM void __ubsan_handle_out_of_bounds_abort(void* data, uintptr_t index) {
  kusari_emu::index_out_of_bounds((const kusari_emu::UbsanOutOfBounds*)data, index,
                                  __builtin_return_address(0));
  __builtin_trap();
}
#endif

namespace kusari_emu {
}  // namespace kusari_emu

// For each name expression E (a template kernel's instance, `f<float, 2>`), the emulator appends
// KUSARI_EMU_ENTRY_AS(S, E), which exports `kusari_emu_launch_S`, `kusari_emu_param_count_S`
// and `kusari_emu_params_S` for it.
#define KUSARI_EMU_ENTRY_AS(S, ...)                                                            \
  extern "C" KUSARI_EMU_EXPORT int kusari_emu_launch_##S(void** params, kusari_emu::Launch* l) {                 \
    return decltype(kusari_emu::entry_of(&__VA_ARGS__))::template launch<&__VA_ARGS__>(params, l); \
  }                                                                                            \
  extern "C" KUSARI_EMU_EXPORT unsigned int kusari_emu_param_count_##S() {                                       \
    return decltype(kusari_emu::entry_of(&__VA_ARGS__))::count();                              \
  }                                                                                            \
  extern "C" KUSARI_EMU_EXPORT void kusari_emu_params_##S(unsigned long long* sizes, int* pointers) {           \
    decltype(kusari_emu::entry_of(&__VA_ARGS__))::describe(sizes, pointers);                   \
  }

// For each kernel K the emulator appends KUSARI_EMU_ENTRY(K), which exports
// `kusari_emu_launch_K`, `kusari_emu_param_count_K` and `kusari_emu_params_K`.
#define KUSARI_EMU_ENTRY(K) KUSARI_EMU_ENTRY_AS(K, K)

#define threadIdx (kusari_emu::current_thread())
#define blockIdx (kusari_emu::block_idx())
#define blockDim (kusari_emu::block_dim())
#define gridDim (kusari_emu::grid_dim())
#define warpSize 32

static inline void __syncthreads() { kusari_emu::barrier(); }

// Warp intrinsics (see `warp_meet`). Values of up to 8 bytes travel as their bits.
namespace kusari_emu {
template <typename T>
KUSARI_EMU_SHIM static inline unsigned long long warp_bits(T v) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value,
                "a warp shuffle moves values of at most 8 bytes");
  unsigned long long b = 0;
  memcpy(&b, &v, sizeof v);
  return b;
}
template <typename T>
KUSARI_EMU_SHIM static inline T warp_value(unsigned long long b) {
  T v;
  memcpy(&v, &b, sizeof v);
  return v;
}
KUSARI_EMU_SHIM static inline unsigned int active_mask() {
  return (unsigned int)warp_meet(kActiveMask, 0, 0, 0, 32);
}
}  // namespace kusari_emu

template <typename T>
KUSARI_EMU_SHIM static inline T __shfl_sync(unsigned int mask, T var, int src_lane,
                                            int width = warpSize) {
  return kusari_emu::warp_value<T>(
      kusari_emu::warp_meet(kusari_emu::kShfl, mask, kusari_emu::warp_bits(var), src_lane, width));
}
template <typename T>
KUSARI_EMU_SHIM static inline T __shfl_up_sync(unsigned int mask, T var, unsigned int delta,
                                               int width = warpSize) {
  return kusari_emu::warp_value<T>(kusari_emu::warp_meet(
      kusari_emu::kShflUp, mask, kusari_emu::warp_bits(var), (int)delta, width));
}
template <typename T>
KUSARI_EMU_SHIM static inline T __shfl_down_sync(unsigned int mask, T var, unsigned int delta,
                                                 int width = warpSize) {
  return kusari_emu::warp_value<T>(kusari_emu::warp_meet(
      kusari_emu::kShflDown, mask, kusari_emu::warp_bits(var), (int)delta, width));
}
template <typename T>
KUSARI_EMU_SHIM static inline T __shfl_xor_sync(unsigned int mask, T var, int lane_mask,
                                                int width = warpSize) {
  return kusari_emu::warp_value<T>(kusari_emu::warp_meet(
      kusari_emu::kShflXor, mask, kusari_emu::warp_bits(var), lane_mask, width));
}
KUSARI_EMU_SHIM static inline unsigned int __ballot_sync(unsigned int mask, int predicate) {
  return (unsigned int)kusari_emu::warp_meet(kusari_emu::kBallot, mask, predicate != 0, 0, 32);
}
KUSARI_EMU_SHIM static inline int __any_sync(unsigned int mask, int predicate) {
  return (int)kusari_emu::warp_meet(kusari_emu::kAny, mask, predicate != 0, 0, 32);
}
KUSARI_EMU_SHIM static inline int __all_sync(unsigned int mask, int predicate) {
  return (int)kusari_emu::warp_meet(kusari_emu::kAll, mask, predicate != 0, 0, 32);
}
KUSARI_EMU_SHIM static inline void __syncwarp(unsigned int mask = 0xffffffffu) {
  kusari_emu::warp_meet(kusari_emu::kSyncwarp, mask, 0, 0, 32);
}
// The lanes of the warp converged at this point: those that reach it before any can go on.
KUSARI_EMU_SHIM static inline unsigned int __activemask() { return kusari_emu::active_mask(); }
#define KUSARI_WARP_REDUCE(NAME, T, OP)                                                   \
  KUSARI_EMU_SHIM static inline T NAME(unsigned int mask, T value) {                      \
    return (T)kusari_emu::warp_meet(kusari_emu::OP, mask, (unsigned int)value, 0, 32);     \
  }
KUSARI_WARP_REDUCE(__reduce_add_sync, unsigned int, kReduceAdd)
KUSARI_WARP_REDUCE(__reduce_add_sync, int, kReduceAdd)
KUSARI_WARP_REDUCE(__reduce_min_sync, unsigned int, kReduceMinU)
KUSARI_WARP_REDUCE(__reduce_min_sync, int, kReduceMinS)
KUSARI_WARP_REDUCE(__reduce_max_sync, unsigned int, kReduceMaxU)
KUSARI_WARP_REDUCE(__reduce_max_sync, int, kReduceMaxS)
KUSARI_WARP_REDUCE(__reduce_and_sync, unsigned int, kReduceAnd)
KUSARI_WARP_REDUCE(__reduce_or_sync, unsigned int, kReduceOr)
KUSARI_WARP_REDUCE(__reduce_xor_sync, unsigned int, kReduceXor)
#undef KUSARI_WARP_REDUCE
template <typename T>
KUSARI_EMU_SHIM static inline unsigned int __match_any_sync(unsigned int mask, T value) {
  return (unsigned int)kusari_emu::warp_meet(kusari_emu::kMatchAny, mask,
                                             kusari_emu::warp_bits(value), 0, 32);
}
template <typename T>
KUSARI_EMU_SHIM static inline unsigned int __match_all_sync(unsigned int mask, T value,
                                                            int* pred) {
  const unsigned int m = (unsigned int)kusari_emu::warp_meet(kusari_emu::kMatchAll, mask,
                                                             kusari_emu::warp_bits(value), 0, 32);
  *pred = (int)kusari_emu::worker.current->pred;
  return m;
}
KUSARI_EMU_SHIM static inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
KUSARI_EMU_SHIM static inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __trap() { kusari_emu::fail("__trap() was called"); }

// Bit casts.
template <typename To, typename From>
static inline To kusari_bit_cast(From v) { To t; memcpy(&t, &v, sizeof t); return t; }
static inline unsigned int __float_as_uint(float f) { return kusari_bit_cast<unsigned int>(f); }
static inline int __float_as_int(float f) { return kusari_bit_cast<int>(f); }
static inline float __uint_as_float(unsigned int u) { return kusari_bit_cast<float>(u); }
static inline float __int_as_float(int u) { return kusari_bit_cast<float>(u); }
static inline long long __double_as_longlong(double d) { return kusari_bit_cast<long long>(d); }
static inline double __longlong_as_double(long long v) { return kusari_bit_cast<double>(v); }

// CUDA's global min/max overloads.
#define KUSARI_MINMAX(T)                                    \
  static inline T min(T a, T b) { return a < b ? a : b; } \
  static inline T max(T a, T b) { return a > b ? a : b; }
KUSARI_MINMAX(int)
KUSARI_MINMAX(unsigned int)
KUSARI_MINMAX(long long)
KUSARI_MINMAX(unsigned long long)
static inline float min(float a, float b) { return fminf(a, b); }
static inline float max(float a, float b) { return fmaxf(a, b); }
static inline double min(double a, double b) { return fmin(a, b); }
static inline double max(double a, double b) { return fmax(a, b); }
#undef KUSARI_MINMAX

static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float __fdividef(float a, float b) { return a / b; }
static inline float saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
static inline int __popc(unsigned int x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned int)x); }
static inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
template <typename T> static inline T __ldg(const T* p) { return *p; }

// Atomics: blocks run on several host threads at once, so these are real atomic operations.
// T is deduced from the pointer alone: the value converts, as it does to CUDA's overloads
// (`atomicAdd(&unsigned_counter, 1)`).
namespace kusari_emu {
template <typename T> struct same { typedef T type; };
}
#define KUSARI_VAL(T) typename kusari_emu::same<T>::type
// The checked build records each atomic operation (atomics do not race with atomics).
#define KUSARI_ATOMIC_AT(p) kusari_emu::on_atomic((const void*)(p), sizeof *(p))
template <typename T>
KUSARI_EMU_SHIM static inline T atomicAdd(T* p, KUSARI_VAL(T) v) { KUSARI_ATOMIC_AT(p); return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
KUSARI_EMU_SHIM static inline float atomicAdd(float* p, float v) {
  KUSARI_ATOMIC_AT(p);
  unsigned int expected = __atomic_load_n((unsigned int*)p, __ATOMIC_RELAXED);
  for (;;) {
    const float old = __uint_as_float(expected);
    const unsigned int desired = __float_as_uint(old + v);
    if (__atomic_compare_exchange_n((unsigned int*)p, &expected, desired, false, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED))
      return old;
  }
}
KUSARI_EMU_SHIM static inline double atomicAdd(double* p, double v) {
  KUSARI_ATOMIC_AT(p);
  unsigned long long expected = __atomic_load_n((unsigned long long*)p, __ATOMIC_RELAXED);
  for (;;) {
    const double old = __longlong_as_double((long long)expected);
    const unsigned long long desired = (unsigned long long)__double_as_longlong(old + v);
    if (__atomic_compare_exchange_n((unsigned long long*)p, &expected, desired, false,
                                    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
      return old;
  }
}
template <typename T>
KUSARI_EMU_SHIM static inline T atomicSub(T* p, KUSARI_VAL(T) v) { KUSARI_ATOMIC_AT(p); return __atomic_fetch_sub(p, v, __ATOMIC_RELAXED); }
template <typename T>
KUSARI_EMU_SHIM static inline T atomicExch(T* p, KUSARI_VAL(T) v) { KUSARI_ATOMIC_AT(p); return __atomic_exchange_n(p, v, __ATOMIC_RELAXED); }
template <typename T>
KUSARI_EMU_SHIM static inline T atomicCAS(T* p, KUSARI_VAL(T) compare, KUSARI_VAL(T) v) {
  KUSARI_ATOMIC_AT(p);
  __atomic_compare_exchange_n(p, &compare, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  return compare;
}
template <typename T>
KUSARI_EMU_SHIM static inline T atomicMax(T* p, KUSARI_VAL(T) v) {
  KUSARI_ATOMIC_AT(p);
  T old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (old < v && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_RELAXED,
                                                 __ATOMIC_RELAXED)) {
  }
  return old;
}
template <typename T>
KUSARI_EMU_SHIM static inline T atomicMin(T* p, KUSARI_VAL(T) v) {
  KUSARI_ATOMIC_AT(p);
  T old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (old > v && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_RELAXED,
                                                 __ATOMIC_RELAXED)) {
  }
  return old;
}
template <typename T>
KUSARI_EMU_SHIM static inline T atomicAnd(T* p, KUSARI_VAL(T) v) { KUSARI_ATOMIC_AT(p); return __atomic_fetch_and(p, v, __ATOMIC_RELAXED); }
template <typename T>
KUSARI_EMU_SHIM static inline T atomicOr(T* p, KUSARI_VAL(T) v) { KUSARI_ATOMIC_AT(p); return __atomic_fetch_or(p, v, __ATOMIC_RELAXED); }
template <typename T>
KUSARI_EMU_SHIM static inline T atomicXor(T* p, KUSARI_VAL(T) v) { KUSARI_ATOMIC_AT(p); return __atomic_fetch_xor(p, v, __ATOMIC_RELAXED); }
#undef KUSARI_VAL
#undef KUSARI_ATOMIC_AT

#line 1 "kernel"

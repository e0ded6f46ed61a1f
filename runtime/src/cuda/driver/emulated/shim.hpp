// kusari's emulated CUDA device: host definitions of what CUDA C++ gives a kernel (threadIdx and
// friends, __syncthreads, __shared__, atomics, math), and the block scheduler that runs a grid.
// It is pasted in front of the very source NVRTC compiles, which is then built as a shared
// library with the host C++ compiler. __CUDA_ARCH__ stays undefined, so device-only code in the
// kernel (inline PTX) takes its `#ifndef __CUDA_ARCH__` host form.
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <setjmp.h>
#include <ucontext.h>
#include <sys/mman.h>
#include <new>
#include <type_traits>
#include <utility>

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
};

struct Fiber {
  jmp_buf ctx;
  ucontext_t boot;
  uint3 tid;
  int state;  // 0: not started, 1: at a barrier, 2: finished the block, 3: resumes
};

enum { kMaxThreads = 1024, kPage = 4096 };

struct Worker {
  jmp_buf sched;
  Fiber* fibers[kMaxThreads];
  Fiber* current;
  void (*body)(void*);
  void* arg;
  uint3 thread_idx;  // the running thread, when not on fibers
  uint3 block_idx;
  dim3 block_dim;
  dim3 grid_dim;
  int on_fibers;
  unsigned int booted;  // fibers given this launch's stacks (the first block boots them)
  Launch* launch;
  int failed;
};

static thread_local Worker worker;

static inline const uint3& current_thread() {
  return worker.on_fibers ? worker.current->tid : worker.thread_idx;
}

static void fail(const char* what) {
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
enum { kMaxDynamicShared = 48 * 1024 };
static thread_local unsigned char* dynamic_buffer = nullptr;
static thread_local size_t dynamic_open = 0;

static void open_dynamic_shared(size_t bytes) {
  const size_t open = (bytes + kPage - 1) / kPage * kPage;
  if (open != dynamic_open) {
    if (open) mprotect(dynamic_buffer, open, PROT_READ | PROT_WRITE);
    if (open < kMaxDynamicShared)
      mprotect(dynamic_buffer + open, kMaxDynamicShared - open, PROT_NONE);
    dynamic_open = open;
  }
  memset(dynamic_buffer, 0xff, open);
}

static void* dynamic_shared() {
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
    open_dynamic_shared(worker.launch->shared_bytes);
  }
  return dynamic_buffer;
}

static void barrier() {
  if (!worker.on_fibers) {
    fail("__syncthreads was reached in a kernel launched without barriers");
    return;
  }
  Fiber* f = worker.current;
  f->state = 1;
  if (!_setjmp(f->ctx)) _longjmp(worker.sched, 1);
}

static void fiber_main() {
  for (;;) {
    Fiber* f = worker.current;
    worker.body(worker.arg);
    f->state = 2;
    if (!_setjmp(f->ctx)) _longjmp(worker.sched, 1);
  }
}

// Fiber `t` of this host thread, booted on the launch's stack `t`. The stacks belong to the host
// side (one set per host thread, shared by every kernel library, each with a guard page below
// it): a library keeps no stacks of its own, so loading many kernels costs no memory mappings.
// Every launch boots its fibers afresh, since another library may have used the stacks since.
static Fiber* fiber(int t) {
  Fiber* f = worker.fibers[t];
  if (!f) {
    f = new (std::nothrow) Fiber();
    if (!f) return nullptr;
    getcontext(&f->boot);
    worker.fibers[t] = f;
  }
  f->boot.uc_stack.ss_sp = worker.launch->stacks[t];
  f->boot.uc_stack.ss_size = worker.launch->stack_bytes;
  f->boot.uc_link = nullptr;
  makecontext(&f->boot, fiber_main, 0);
  f->state = 0;
  return f;
}

static void run_block_on_fibers(unsigned int nthreads) {
  const dim3 b = worker.block_dim;
  const bool boot = worker.booted < nthreads;
  for (unsigned int t = 0; t < nthreads; ++t) {
    Fiber* f = boot ? fiber((int)t) : worker.fibers[t];
    if (!f) { fail("out of host memory for the block's threads"); return; }
    f->tid = uint3{t % b.x, (t / b.x) % b.y, t / (b.x * b.y)};
    f->state = boot ? 0 : 3;  // 3: started in an earlier block, resumes into this one
  }
  worker.booted = nthreads;
  for (;;) {
    unsigned int waiting = 0, finished = 0;
    for (unsigned int t = 0; t < nthreads; ++t) {
      Fiber* f = worker.fibers[t];
      worker.current = f;
      if (!_setjmp(worker.sched)) {
        if (f->state == 0) setcontext(&f->boot);
        _longjmp(f->ctx, 1);
      }
      if (worker.failed) return;
      if (f->state == 1) ++waiting; else ++finished;
    }
    if (finished == nthreads) return;
    if (finished != 0) {
      fail("__syncthreads was not reached by every thread of a block: some threads finished while "
           "others wait at the barrier (undefined behaviour in CUDA)");
      return;
    }
    for (unsigned int t = 0; t < nthreads; ++t) worker.fibers[t]->state = 3;
  }
}

static void run(Launch* l, void (*body)(void*), void* arg) {
  worker.launch = l;
  if (dynamic_buffer) open_dynamic_shared(l->shared_bytes);
  worker.failed = 0;
  worker.body = body;
  worker.arg = arg;
  worker.on_fibers = l->fibers;
  worker.booted = 0;
  worker.grid_dim = dim3(l->grid[0], l->grid[1], l->grid[2]);
  worker.block_dim = dim3(l->block[0], l->block[1], l->block[2]);
  const unsigned int nthreads = l->block[0] * l->block[1] * l->block[2];
  const unsigned long long gx = l->grid[0], gy = l->grid[1];
  for (unsigned long long bi = l->first_block; bi < l->end_block && !worker.failed; ++bi) {
    worker.block_idx = uint3{(unsigned int)(bi % gx), (unsigned int)((bi / gx) % gy),
                             (unsigned int)(bi / (gx * gy))};
    if (l->fibers) {
      run_block_on_fibers(nthreads);
    } else {
      const dim3 b = worker.block_dim;
      for (unsigned int t = 0; t < nthreads && !worker.failed; ++t) {
        worker.thread_idx = uint3{t % b.x, (t / b.x) % b.y, t / (b.x * b.y)};
        body(arg);
      }
    }
  }
}

// The kernel's parameters, read from the launch's `kernelParams` with their device-side types.
template <typename K, typename... A, size_t... I>
static void call(K k, void** params, std::index_sequence<I...>) {
  k(*static_cast<typename std::remove_cv<A>::type*>(params[I])...);
}

template <typename... A>
struct Entry {
  struct Bound {
    void (*kernel)(A...);
    void** params;
  };
  static void thread(void* p) {
    Bound* b = static_cast<Bound*>(p);
    call<void (*)(A...), A...>(b->kernel, b->params, std::index_sequence_for<A...>{});
  }
  static int launch(void (*kernel)(A...), void** params, Launch* l) {
    Bound b{kernel, params};
    run(l, &Entry::thread, &b);
    return worker.failed;
  }
  static unsigned int count() { return sizeof...(A); }
  static void describe(unsigned long long* sizes, int* pointers) {
    const unsigned long long s[] = {0ull, (unsigned long long)sizeof(A)...};
    const int p[] = {0, (int)std::is_pointer<A>::value...};
    for (size_t i = 0; i < sizeof...(A); ++i) { sizes[i] = s[i + 1]; pointers[i] = p[i + 1]; }
  }
};

template <typename... A>
static Entry<A...> entry_of(void (*)(A...)) { return Entry<A...>{}; }

}  // namespace kusari_emu

// For each name expression E (a template kernel's instance, `f<float, 2>`), the emulator appends
// KUSARI_EMU_ENTRY_AS(S, E), which exports `kusari_emu_launch_S`, `kusari_emu_param_count_S`
// and `kusari_emu_params_S` for it.
#define KUSARI_EMU_ENTRY_AS(S, ...)                                                            \
  extern "C" int kusari_emu_launch_##S(void** params, kusari_emu::Launch* l) {                 \
    return decltype(kusari_emu::entry_of(&__VA_ARGS__))::launch(&__VA_ARGS__, params, l);      \
  }                                                                                            \
  extern "C" unsigned int kusari_emu_param_count_##S() {                                       \
    return decltype(kusari_emu::entry_of(&__VA_ARGS__))::count();                              \
  }                                                                                            \
  extern "C" void kusari_emu_params_##S(unsigned long long* sizes, int* pointers) {           \
    decltype(kusari_emu::entry_of(&__VA_ARGS__))::describe(sizes, pointers);                   \
  }

// For each kernel K the emulator appends KUSARI_EMU_ENTRY(K), which exports
// `kusari_emu_launch_K`, `kusari_emu_param_count_K` and `kusari_emu_params_K`.
#define KUSARI_EMU_ENTRY(K) KUSARI_EMU_ENTRY_AS(K, K)

#define threadIdx (kusari_emu::current_thread())
#define blockIdx (kusari_emu::worker.block_idx)
#define blockDim (kusari_emu::worker.block_dim)
#define gridDim (kusari_emu::worker.grid_dim)
#define warpSize 32

static inline void __syncthreads() { kusari_emu::barrier(); }
static inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
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
template <typename T>
static inline T atomicAdd(T* p, KUSARI_VAL(T) v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
static inline float atomicAdd(float* p, float v) {
  unsigned int expected = __atomic_load_n((unsigned int*)p, __ATOMIC_RELAXED);
  for (;;) {
    const float old = __uint_as_float(expected);
    const unsigned int desired = __float_as_uint(old + v);
    if (__atomic_compare_exchange_n((unsigned int*)p, &expected, desired, false, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED))
      return old;
  }
}
static inline double atomicAdd(double* p, double v) {
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
static inline T atomicSub(T* p, KUSARI_VAL(T) v) { return __atomic_fetch_sub(p, v, __ATOMIC_RELAXED); }
template <typename T>
static inline T atomicExch(T* p, KUSARI_VAL(T) v) { return __atomic_exchange_n(p, v, __ATOMIC_RELAXED); }
template <typename T>
static inline T atomicCAS(T* p, KUSARI_VAL(T) compare, KUSARI_VAL(T) v) {
  __atomic_compare_exchange_n(p, &compare, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  return compare;
}
template <typename T>
static inline T atomicMax(T* p, KUSARI_VAL(T) v) {
  T old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (old < v && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_RELAXED,
                                                 __ATOMIC_RELAXED)) {
  }
  return old;
}
template <typename T>
static inline T atomicMin(T* p, KUSARI_VAL(T) v) {
  T old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (old > v && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_RELAXED,
                                                 __ATOMIC_RELAXED)) {
  }
  return old;
}
template <typename T>
static inline T atomicAnd(T* p, KUSARI_VAL(T) v) { return __atomic_fetch_and(p, v, __ATOMIC_RELAXED); }
template <typename T>
static inline T atomicOr(T* p, KUSARI_VAL(T) v) { return __atomic_fetch_or(p, v, __ATOMIC_RELAXED); }
template <typename T>
static inline T atomicXor(T* p, KUSARI_VAL(T) v) { return __atomic_fetch_xor(p, v, __ATOMIC_RELAXED); }
#undef KUSARI_VAL

#line 1 "kernel"

// Runs ember's generated CUDA C++ on the CPU, so that the values of CUDA kernels are checked on
// machines without a GPU (docs/testing.md). The generated source is compiled by the host
// compiler with this header first (-include) and EMBER_CUDA_EMULATION defined.
//
// What it provides is the subset of CUDA the emitter uses (codegen/cuda/emit_cuda.cpp), and
// nothing more, so that it stays honest:
//   __global__, __device__, __forceinline__, __restrict__, __launch_bounds__;
//   threadIdx.x, blockIdx.x, blockDim.x, gridDim.x (one-dimensional launches);
//   __shared__ arrays, shared by the threads of a block;
//   __syncthreads(), a barrier of the block;
//   __shfl_xor_sync(mask, value, lane_mask) on a full warp of 32, for float, double, int and
//   long long;
//   the device math functions, which are the host's <cmath> ones;
//   a vector access at an address that is not a multiple of its size aborts, as a GPU faults.
// Each block runs its threads as coroutines on one host thread, switching at every barrier and
// shuffle, so a thread that reaches __syncthreads waits for every other thread of its block, as
// on a GPU; a barrier that some threads never reach is reported, not hung on. The switch is a
// few instructions on x86-64 (callee-saved registers and the stack pointer), ucontext elsewhere:
// a row kernel switches a dozen times per row and thread.
#pragma once

#include <ucontext.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
// One block at a time runs on this host thread: its coroutines share these.
#define __shared__ static thread_local

#if defined(__x86_64__)
// ember_switch(&from, to): saves this coroutine's callee-saved registers on its stack and its
// stack pointer in `from`, then resumes the coroutine whose stack pointer is `to`.
extern "C" void ember_switch(void** from, void* to);
asm(R"(
.text
.p2align 4
.type ember_switch, @function
ember_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
.size ember_switch, .-ember_switch
)");
#endif

namespace ember_emulation {

// A coroutine: its stack and where it stopped.
struct Context {
#if defined(__x86_64__)
  void* sp = nullptr;
#else
  ucontext_t context;
#endif
};

// Starts `entry` on `stack` the first time `to` is switched to.
inline void prepare(Context& c, std::vector<char>& stack, void (*entry)()) {
#if defined(__x86_64__)
  uintptr_t top = (reinterpret_cast<uintptr_t>(stack.data()) + stack.size()) & ~uintptr_t{15};
  void** sp = reinterpret_cast<void**>(top);
  *--sp = nullptr;                             // where `entry` would return: it never does
  *--sp = reinterpret_cast<void*>(entry);      // ember_switch's ret goes here
  for (int r = 0; r < 6; ++r) *--sp = nullptr;  // the callee-saved registers it pops
  c.sp = sp;
#else
  getcontext(&c.context);
  c.context.uc_stack.ss_sp = stack.data();
  c.context.uc_stack.ss_size = stack.size();
  c.context.uc_link = nullptr;
  makecontext(&c.context, entry, 0);
#endif
}

inline void switch_to(Context& from, Context& to) {
#if defined(__x86_64__)
  ember_switch(&from.sp, to.sp);
#else
  swapcontext(&from.context, &to.context);
#endif
}

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

enum class Wait { None, Block, Warp, Done };

struct Thread {
  Context context;
  Wait wait = Wait::None;
  unsigned index = 0;
};

struct Block {
  std::vector<Thread> threads;
  Context scheduler;
  unsigned current = 0;
  uint64_t lanes[32 * 32];  // a shuffle's values, per warp and lane (up to 1024 threads)
  void (*body)(void*) = nullptr;
  void* argument = nullptr;
};

inline thread_local Block* block = nullptr;
// Rows of at most this many elements are a warp's in the kernels' launches; < 0: the kernel's own.
inline thread_local long long warp_row_limit = -1;
inline thread_local Dim3 block_index, block_dim, grid_dim;

inline Thread& self() { return block->threads[block->current]; }

// Gives the scheduler this thread's turn, waiting as `why` says.
inline void yield(Wait why) {
  Thread& t = self();
  t.wait = why;
  switch_to(t.context, block->scheduler);
}

inline void entry() {
  block->body(block->argument);
  self().wait = Wait::Done;
  switch_to(self().context, block->scheduler);
}

// The coroutines' stacks, kept from block to block on this host thread. Their lowest bytes are a
// guard: a thread that used the whole stack is reported, not left to corrupt the heap below it.
constexpr size_t kStackBytes = 256 * 1024, kStackGuard = 4096;
constexpr char kStackFill = 0x5a;

inline std::vector<char>& stack_of(unsigned thread) {
  static thread_local std::vector<std::vector<char>> stacks;
  while (stacks.size() <= thread) stacks.emplace_back(kStackBytes, kStackFill);
  return stacks[thread];
}

inline void check_stack(unsigned thread) {
  const std::vector<char>& stack = stack_of(thread);
  if (!std::all_of(stack.begin(), stack.begin() + kStackGuard, [](char c) { return c == kStackFill; })) {
    std::fprintf(stderr, "cuda emulation: thread %u overflowed its %zu-byte stack\n", thread, kStackBytes);
    std::abort();
  }
}

// Whether every thread of `warp` (or of the block) that has not finished waits as `why` says.
inline bool all_wait(Wait why, int warp) {
  bool any = false;
  for (const Thread& t : block->threads) {
    if (warp >= 0 && static_cast<int>(t.index / 32) != warp) continue;
    if (t.wait == Wait::Done) continue;
    if (t.wait != why) return false;
    any = true;
  }
  return any;
}

// Runs one block: each thread until it waits; a barrier opens when every live thread it binds
// waits at it.
inline void run_block(unsigned threads, void (*body)(void*), void* argument) {
  Block b;
  b.body = body;
  b.argument = argument;
  b.threads.resize(threads);
  block = &b;
  for (unsigned i = 0; i < threads; ++i) {
    b.threads[i].index = i;
    prepare(b.threads[i].context, stack_of(i), entry);
  }
  for (;;) {
    bool ran = false;
    for (unsigned i = 0; i < threads; ++i) {
      if (b.threads[i].wait != Wait::None) continue;
      b.current = i;
      switch_to(b.scheduler, b.threads[i].context);
      ran = true;
    }
    if (ran) continue;
    if (std::all_of(b.threads.begin(), b.threads.end(), [](const Thread& t) { return t.wait == Wait::Done; })) break;
    bool opened = false;
    if (all_wait(Wait::Block, -1)) {
      for (Thread& t : b.threads)
        if (t.wait == Wait::Block) t.wait = Wait::None;
      opened = true;
    }
    for (unsigned warp = 0; warp * 32 < threads; ++warp)
      if (all_wait(Wait::Warp, static_cast<int>(warp))) {
        for (Thread& t : b.threads)
          if (t.index / 32 == warp && t.wait == Wait::Warp) t.wait = Wait::None;
        opened = true;
      }
    if (!opened) {
      std::fprintf(stderr, "cuda emulation: a barrier that not every thread of the block reaches\n");
      std::abort();
    }
  }
  for (unsigned i = 0; i < threads; ++i) check_stack(i);
  block = nullptr;
}

// A launch: every block in turn.
inline void launch(unsigned grid, unsigned threads, void (*body)(void*), void* argument) {
  grid_dim = {grid, 1, 1};
  block_dim = {threads, 1, 1};
  for (unsigned g = 0; g < grid; ++g) {
    block_index = {g, 1, 1};
    block_index.y = block_index.z = 0;
    run_block(threads, body, argument);
  }
}

struct ThreadIndex {
  struct {
    operator unsigned() const { return self().index; }
  } x;
  unsigned y = 0, z = 0;
};

template <class T>
T shuffle_xor(T value, int lane_mask) {
  static_assert(sizeof(T) <= 8, "a shuffle of at most 8 bytes");
  unsigned me = self().index, warp = me / 32, lane = me % 32;
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  block->lanes[warp * 32 + lane] = bits;
  yield(Wait::Warp);  // every lane has written
  uint64_t theirs = block->lanes[warp * 32 + (lane ^ static_cast<unsigned>(lane_mask))];
  yield(Wait::Warp);  // every lane has read before the next shuffle writes
  T out;
  std::memcpy(&out, &theirs, sizeof(T));
  return out;
}

// A vector access's address, which must be a multiple of its size (a GPU faults otherwise).
inline void require_aligned(const void* base, size_t bytes) {
  if (reinterpret_cast<uintptr_t>(base) % bytes == 0) return;
  std::fprintf(stderr, "cuda emulation: a %zu-byte vector access at %p, misaligned\n", bytes, base);
  std::abort();
}

}  // namespace ember_emulation

static const ember_emulation::ThreadIndex threadIdx{};
#define blockIdx (ember_emulation::block_index)
#define blockDim (ember_emulation::block_dim)
#define gridDim (ember_emulation::grid_dim)

inline void __syncthreads() { ember_emulation::yield(ember_emulation::Wait::Block); }

template <class T>
T __shfl_xor_sync(unsigned mask, T value, int lane_mask) {
  if (mask != 0xffffffffu) {
    std::fprintf(stderr, "cuda emulation: only full-warp shuffles are emulated\n");
    std::abort();
  }
  return ember_emulation::shuffle_xor(value, lane_mask);
}

// A KernelSpec as CUDA C++ source, for NVRTC (codegen/cuda/nvrtc.h) and, in the tests, for the
// host compiler with tests/unit/cuda_emulation.h.
//
// [Note: the CUDA kernel ABI]
//   extern "C" __global__ void NAME(NAME_params p)
//   struct NAME_params { void* buffer[inputs + outputs]; long long meta[rank * (1 + operands)]; }
// The parameters travel by value in the launch (no copy to the device first). `buffer` holds the
// address of element 0 of each input, then of each output; `meta` the domain's sizes, then each
// operand's strides over it (0 on broadcast dims), all in elements: the CPU kernel's layout
// ([Note: the CPU kernel ABI]), so the host side fills both the same way. Sizes are arguments,
// so one compiled kernel serves every size, as on the CPU.
//
// Launch geometry (launch_of): blocks of kBlockThreads threads.
//   elementwise   a grid-stride loop over the domain's elements. When every operand is
//                 contiguous (or an input of one value) and starts on 16 bytes, each thread
//                 moves a 16-byte vector of elements per step; when only contiguous, one element
//                 by its index; otherwise one element by its per-dim offsets
//                 ([Note: flat elementwise kernels]);
//   row kernel    a warp per row for rows of at most kWarpRowLimit elements, else a block per
//                 row (grid-stride loops over rows): each thread folds the row's elements at
//                 its own stride, the lanes combine by shuffles (and a block's warps through
//                 shared memory), then each thread stores its elements;
//   column kernel a thread per column (over the kept outer rows and the last dim), folding down
//                 the column in blocks, as the CPU's column kernel does with vector lanes.
// Numerics are the CPU backend's: float16 and bfloat16 stored, float32 computed; float32 sums
// and products refold in float64 when their result is not finite (not normal), as
// [Note: overflow-safe folds] says; transcendental functions are CUDA's accurate ones (no fast
// math), within the tolerances of docs/testing.md (powf is within 2 ulp, glibc's 0.52: a
// comparison on the boundary may differ), and no multiply-add is contracted into an FMA
// (--fmad=false).
#pragma once

#include <cstdint>
#include <string>

#include "codegen/kernel_spec.h"

namespace ember::codegen::cuda {

inline constexpr int kBlockThreads = 256;
// Rows of at most this many elements are folded by a warp, longer ones by a block
// ([Note: a warp or a block per row]).
inline constexpr int64_t kWarpRowLimit = 1024;

// The device functions every kernel's source starts with (prelude.cpp).
const char* prelude();

// The whole source of the kernel: the prelude, its parameter struct, and the kernel. Under
// EMBER_CUDA_EMULATION it also defines `NAME_emulate(buffers, meta, grid, threads,
// warp_row_limit)`, which runs it with tests/unit/cuda_emulation.h in blocks of `threads` (any
// multiple of 32: the kernel reads blockDim), rows of at most `warp_row_limit` elements a warp's
// (negative: kWarpRowLimit).
std::string emit_cuda(const KernelSpec& spec, const std::string& name);
// The same without the prelude: several kernels in one source (one NVRTC program) share one.
std::string emit_cuda_kernel(const KernelSpec& spec, const std::string& name);

// Whether every instruction of the spec has a CUDA form (the CPU backend's set, in the same
// compute types).
bool can_emit_cuda(const KernelSpec& spec);

// Blocks to launch for a domain of these sizes (meta's first `rank` entries): enough to cover
// it, at most `max_blocks` (the grid-stride loops take the rest).
int64_t grid_of(const KernelSpec& spec, const int64_t* sizes, int64_t max_blocks = 65535);

}  // namespace ember::codegen::cuda

// A kernel's arguments for one launch, the same for every backend ([Note: the CPU kernel ABI],
// [Note: the CUDA kernel ABI]): the address of each operand's element 0, and `meta`, the
// domain's sizes then each operand's strides over it, collapsed (size-1 dims other than the last
// dropped, neighbours every operand walks as one merged, the rank kept with leading 1s; a row
// kernel's reduced last dim and a column kernel's last two stay as they are).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "codegen/kernel_spec.h"
#include "runtime/array.h"

namespace ember::codegen {

struct KernelLayout {
  const KernelSpec* spec = nullptr;
  bool reduces = false;
  bool columns = false;
  std::vector<bool> line_outputs;  // per output: stored once per row or column
};

KernelLayout layout_of(const KernelSpec& spec);

// Fills `meta` (rank * (1 + operands) entries) and `buffers` for a launch on these arrays. With
// `keep_last_dim`, the last dim is never merged into the rows (a caller that runs pieces of
// rows: a GEMM's epilogue, codegen/cpu/gemm_epilogue.h).
void kernel_args(const KernelLayout& layout, std::span<const Array> inputs, std::span<const Array> outputs,
                 std::vector<int64_t>& meta, std::vector<void*>& buffers, bool keep_last_dim = false);

}  // namespace ember::codegen

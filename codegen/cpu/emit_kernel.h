// A KernelSpec as an MLIR module (text), for the CPU.
//
// [Note: the CPU kernel ABI]
//   void NAME(int64_t row_begin, int64_t row_end, int64_t inner_begin, int64_t inner_end,
//             void* const* buffers, const int64_t* meta)
// The domain is rows (every dim but the last, flattened) times the inner dim. A call computes
// rows [row_begin, row_end) over inner positions [inner_begin, inner_end), so the thread pool can
// split either. `buffers` holds the address of element 0 of each input, then of each output;
// `meta` holds the domain's sizes (rank of them), then each input's strides over the domain (0
// on broadcast dims), then each output's, all in elements. The inner loop runs on vectors when
// every input the spec reads along the inner dim has stride 1 there, and the outputs too (a
// run-time check); otherwise on scalars, through the strides. A row kernel ([Note: row kernels])
// always gets whole rows (inner_begin 0, inner_end the row's length).
#pragma once

#include <string>

#include "codegen/cpu/kernel_config.h"
#include "codegen/kernel_spec.h"

namespace ember::codegen::cpu {

// Elements per vector: 64 bytes of the widest register type (AVX-512's width).
int vector_width(const KernelSpec& spec);
// The lanes a kernel's vector loops step by unless KernelConfig::lanes says otherwise: four
// registers' worth for a row kernel (independent accumulators), one for the rest.
int default_lanes(const KernelSpec& spec);

std::string emit_kernel(const KernelSpec& spec, const std::string& name, const KernelConfig& config = {});

// Whether a reduction a row or column group holds (passes/fuse.h, folded_dim) can be part of its
// kernel: floating inputs and outputs, and no max or min over nothing.
bool can_emit_reduction(const Node* n);

}  // namespace ember::codegen::cpu

// [Note: split row reductions]
// A row kernel's threads split its rows, each row folded whole by one of them. When the rows are
// fewer than the threads (the sum of a whole tensor is one row) the other threads would idle, so
// a kernel whose outputs are all plain folds (sum, mean, max or min over the row, stored in their
// accumulator's dtype: float32, float64 or int64) splits each row's length instead. Each share
// runs the same kernel over its part of the row, its outputs pointed at scratch; the shares'
// partial results are then combined, earlier share first, as the reduction semantics allow
// ([Note: reduction semantics], ir/reduction.h): float sums in float64 (a mean's partials are
// already divided by the whole row's length), integer sums wrapping, max and min keeping a NaN.
// A float partial that is not finite may be a share's overflow that the whole row does not have
// ([Note: overflow-safe folds], emit_kernel.cpp): such a row is folded again, whole.
#pragma once

#include <cstdint>

#include "codegen/cpu/jit.h"
#include "codegen/kernel_spec.h"

namespace ember::codegen::cpu {

// Whether a row kernel of this spec may split its rows' length over threads.
bool splits_rows(const KernelSpec& spec);

// Runs such a kernel over `rows` rows of `inner` elements in `shares` parts of each row
// (buffers and meta as the kernel takes them).
void run_split_rows(const KernelSpec& spec, KernelFn fn, int64_t rows, int64_t inner, int64_t shares,
                    void* const* buffers, const int64_t* meta);

}  // namespace ember::codegen::cpu

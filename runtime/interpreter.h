// The reference interpreter: runs every op for every dtype it supports on strided CPU arrays. It
// defines eager semantics and is the oracle of the tests. GEMM-shaped work goes to OpenBLAS.
#pragma once

#include <span>
#include <vector>

#include "ir/graph.h"
#include "runtime/array.h"

namespace ember {

// One op on concrete inputs, giving one array per output. `outs` are the node's types; their
// symbols are evaluated with `symbols`. `destinations` (one per output, or none) are contiguous
// arrays of the outputs' dtypes and shapes to write into; an undefined one means "allocate".
std::vector<Array> run_op(Op op, const Attrs& attrs, std::span<const Array> inputs,
                          std::span<const TensorType> outs, const SymbolValues& symbols = {},
                          std::span<const Array> destinations = {});
// The same for a single-output op.
Array run_op(Op op, const Attrs& attrs, std::span<const Array> inputs, const TensorType& out,
             const SymbolValues& symbols = {});

// Runs a whole graph once (an Executable does the same for repeated runs).
std::vector<Array> run_graph(const Graph& g, std::span<const Array> inputs, const SymbolValues& symbols);

}  // namespace ember

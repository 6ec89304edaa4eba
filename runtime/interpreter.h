// The reference interpreter: runs every op for every dtype it supports on strided CPU arrays. It
// defines eager semantics and is the oracle of the tests. GEMM-shaped work goes to OpenBLAS.
#pragma once

#include <span>
#include <vector>

#include "ir/graph.h"
#include "runtime/array.h"

namespace ember {

// One op on concrete inputs. `out` is the node's type; its symbols are evaluated with `symbols`.
Array run_op(Op op, const Attrs& attrs, std::span<const Array> inputs, const TensorType& out,
             const SymbolValues& symbols = {});

// Runs a whole graph once (an Executable does the same for repeated runs).
std::vector<Array> run_graph(const Graph& g, std::span<const Array> inputs, const SymbolValues& symbols);

}  // namespace ember

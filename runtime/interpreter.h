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

// Binds each symbol that appears as a whole dim of a graph input to the array's size there.
// Throws ember::Error if an input disagrees with the graph (rank, dtype, static dims).
SymbolValues bind_symbols(const Graph& g, std::span<const Array> inputs);

// Runs a whole graph; intermediate arrays are freed after their last use.
std::vector<Array> run_graph(const Graph& g, std::span<const Array> inputs, const SymbolValues& symbols);

}  // namespace ember

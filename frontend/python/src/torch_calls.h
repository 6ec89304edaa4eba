// Torch calls: extern nodes that run a PyTorch op inside a compiled graph (the bridge's fallback
// for an ATen op ember cannot lower yet), so that op costs no graph break.
//
// [Note: torch calls]
// Each such node is an `extern` {name = "torch" or "torch_impure", call = id}. The id names an
// entry of a table: its output types (symbolic dims of its own graph), kept here because the
// extern attributes cannot hold shapes, and, on the Python side (ember/_torch_calls.py), the
// op and its non-tensor arguments. At run time the node's CPU function takes the GIL and hands
// the inputs and the destinations to the Python runner, which calls the op and copies its
// results into the destinations. The compiled graph that owns the ids releases them.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <vector>

#include "ir/graph.h"

namespace ember::python {

// The node for call `id` with these inputs and output types, added at the end of `g`.
std::vector<Value> add_torch_call(Graph& g, int64_t id, bool pure, std::vector<Value> inputs,
                                  std::vector<TensorType> outputs);
void release_torch_calls(const std::vector<int64_t>& ids);
// Registers the extern ops and the Python runner: runner(id, inputs, outputs), arrays as
// ember._C.Array.
void register_torch_calls(pybind11::module_& m);

}  // namespace ember::python

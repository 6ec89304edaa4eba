// What every way of calling a compiled graph from Python shares: the inputs' check, the plan
// run without the GIL on PyTorch's thread count, and output buffers the caller made.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <vector>

#include "frontend/graph_compile.h"

namespace ember::python {

// The plan trusts its inputs' types; a caller's mistake must be an error, not wrong memory.
void check_input(size_t i, const TensorType& t, const Array& a, const SymbolValues& symbols);

// Kernels and the thread pool run without the GIL (torch calls take it), on as many threads as
// PyTorch would use.
std::vector<Array> run_plan(const GraphPlan& plan, const std::vector<Array>& arrays, const SymbolValues& symbols,
                            const OutputStorages& storages);

// A caller's tensor that is all of output `output`'s buffer.
struct GivenOutput {
  int output;
  const Storage* storage;
  const void* data;
  pybind11::handle tensor;  // kept alive by the caller's GivenBuffers
};

// The caller's tensors for a call's output buffers, taken while the GIL is held: each buffer's
// array, and the tensor it is (kept alive for the call).
struct GivenBuffers {
  std::vector<Array> arrays;
  std::vector<pybind11::object> tensors;
};

// The given buffers for the plan's request, without the GIL: each must be the whole output the
// plan asks for (the caller made them from an earlier call's request, for the same sizes).
std::vector<std::shared_ptr<Storage>> bind_given(const GivenBuffers& given, const std::vector<OutputBuffer>& buffers,
                                                 std::vector<GivenOutput>& given_outputs);

// The caller's tensor that output k is, or an empty handle.
pybind11::handle given_tensor(const std::vector<GivenOutput>& given_outputs, size_t k, const Array& output);

}  // namespace ember::python

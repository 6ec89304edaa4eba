// Custom ops: C++ functions that compiled code calls as graph nodes, without a graph break.
//
//   ember::register_op({
//       .name = "scaled_add",
//       .shape = [](std::span<const TensorType> in, const Attrs&) {
//         return std::vector<TensorType>{in[0]};   // symbolic dims flow through
//       },
//       .cpu = [](std::span<const Array> in, std::span<const Array> out, const Attrs& attrs) {
//         ... write out[0] from in[0], in[1] and attr_float(attrs, "alpha") ...
//       }});
//   Tensor y = ember::call_op("scaled_add", {a, b}, {{"alpha", 0.5}})[0];
//
// Inside compile() the call records an `extern` node (ir/extern.h, [Note: extern ops]); eagerly it
// runs at once. The shape function decides the outputs' dtypes and shapes and raises
// ember::Error (message "[name] ...") for bad inputs; the CPU function writes each output into the
// contiguous array it is given. An op that is not `pure` (it has side effects) runs on every
// call, in program order, even when its results are unused.
#pragma once

#include <string>
#include <vector>

#include "frontend/tensor.h"
#include "ir/extern.h"
#include "runtime/extern_kernels.h"

namespace ember {

struct CustomOp {
  std::string name;
  ExternShapeFn shape;
  ExternCpuFn cpu;
  bool pure = true;
};

// Registers (or replaces) the op. A Value error for a missing name, shape or CPU function.
void register_op(CustomOp op);

// Calls the op registered as `name` on `inputs` with attributes `attrs` (int, float, bool,
// string, dtype, ints or literal values); returns its outputs.
std::vector<Tensor> call_op(const std::string& name, const std::vector<Tensor>& inputs, Attrs attrs = {});

}  // namespace ember

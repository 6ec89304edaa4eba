#include "runtime/interpreter.h"

#include "runtime/executable.h"
#include "runtime/kernels/kernel.h"

namespace ember {

namespace {

const kernels::KernelTable& kernel_table() {
  static const kernels::KernelTable table = [] {
    kernels::KernelTable t{};
    kernels::register_elementwise(t);
    kernels::register_reductions(t);
    kernels::register_contractions(t);
    kernels::register_movement(t);
    kernels::register_composites(t);
    kernels::register_creation(t);
    return t;
  }();
  return table;
}

}  // namespace

Array run_op(Op op, const Attrs& attrs, std::span<const Array> inputs, const TensorType& out,
             const SymbolValues& symbols) {
  kernels::Kernel kernel = kernel_table()[static_cast<size_t>(op)];
  EMBER_CHECK(kernel != nullptr, "the interpreter has no kernel for '", op_name(op), "'");
  kernels::Call call{op, attrs, inputs, out.dtype, evaluate(out.shape, symbols), symbols};
  // Symbolic sizes are evaluated here: an overflow is the op's error, as in eager.
  checked_numel(op_name(op), call.shape);
  return kernel(call);
}

std::vector<Array> run_graph(const Graph& g, std::span<const Array> inputs, const SymbolValues& symbols) {
  return Executable(g.clone()).run(inputs, symbols);
}

}  // namespace ember

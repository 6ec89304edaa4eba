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
    kernels::register_arg_extremes(t);
    kernels::register_contractions(t);
    kernels::register_conv_grads(t);
    kernels::register_movement(t);
    kernels::register_scatter(t);
    kernels::register_scans(t);
    kernels::register_composites(t);
    kernels::register_creation(t);
    return t;
  }();
  return table;
}

const kernels::MultiKernelTable& multi_kernel_table() {
  static const kernels::MultiKernelTable table = [] {
    kernels::MultiKernelTable t{};
    kernels::register_multi_reductions(t);
    kernels::register_multi_arg_extremes(t);
    kernels::register_native_norms(t);
    kernels::register_sorting(t);
    kernels::register_split(t);
    kernels::register_extern(t);
    return t;
  }();
  return table;
}

}  // namespace

std::vector<Array> run_op(Op op, const Attrs& attrs, std::span<const Array> inputs,
                          std::span<const TensorType> outs, const SymbolValues& symbols,
                          std::span<const Array> destinations) {
  EMBER_CHECK(!outs.empty(), "run_op of '", op_name(op), "' without output types");
  kernels::Call call{op, attrs, inputs, outs[0].dtype, evaluate(outs[0].shape, symbols), symbols,
                     {}, {}, destinations};
  for (const TensorType& t : outs) {
    call.dtypes.push_back(t.dtype);
    call.shapes.push_back(evaluate(t.shape, symbols));
    // Symbolic sizes are evaluated here: an overflow is the op's error, as in eager.
    checked_numel(op_name(op), call.shapes.back());
  }
  if (!op_info(op).multi_output()) {
    kernels::Kernel kernel = kernel_table()[static_cast<size_t>(op)];
    EMBER_CHECK(kernel != nullptr, "the interpreter has no kernel for '", op_name(op), "'");
    return {kernel(call)};
  }
  kernels::MultiKernel kernel = multi_kernel_table()[static_cast<size_t>(op)];
  EMBER_CHECK(kernel != nullptr, "the interpreter has no kernel for '", op_name(op), "'");
  std::vector<Array> results = kernel(call);
  EMBER_CHECK(results.size() == outs.size(), "the '", op_name(op), "' kernel returned ",
              results.size(), " arrays for ", outs.size(), " outputs");
  return results;
}

Array run_op(Op op, const Attrs& attrs, std::span<const Array> inputs, const TensorType& out,
             const SymbolValues& symbols) {
  EMBER_CHECK(!op_info(op).multi_output(), "run_op of the multi-output op '", op_name(op),
              "' with one type");
  return std::move(run_op(op, attrs, inputs, std::span<const TensorType>(&out, 1), symbols)[0]);
}

std::vector<Array> run_graph(const Graph& g, std::span<const Array> inputs, const SymbolValues& symbols) {
  return Executable(g.clone()).run(inputs, symbols);
}

}  // namespace ember

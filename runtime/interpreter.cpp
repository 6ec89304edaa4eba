#include "runtime/interpreter.h"

#include <unordered_map>

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
  return kernel(call);
}

SymbolValues bind_symbols(const Graph& g, std::span<const Array> inputs) {
  if (inputs.size() != g.inputs().size())
    EMBER_THROW(Value, "[run] the graph takes ", g.inputs().size(), " inputs, got ", inputs.size());
  SymbolValues values(g.symbols().size(), -1);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorType& t = g.inputs()[i]->type;
    const Array& a = inputs[i];
    if (a.dtype() != t.dtype || a.rank() != static_cast<int64_t>(t.shape.size()))
      EMBER_THROW(Value, "[run] input ", i, " must be ", t.str(), ", got ", a.str(0));
    for (size_t d = 0; d < t.shape.size(); ++d) {
      int s = t.shape[d].as_symbol();
      if (s >= 0 && values[s] < 0) values[s] = a.shape()[d];
    }
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorType& t = g.inputs()[i]->type;
    for (size_t d = 0; d < t.shape.size(); ++d) {
      bool bound = true;
      for (int s : t.shape[d].symbols()) bound = bound && values[s] >= 0;
      if (bound && t.shape[d].evaluate(values) != inputs[i].shape()[d])
        EMBER_THROW(Value, "[run] input ", i, " dim ", d, " must be ", t.shape[d].str(), ", got ",
                    inputs[i].shape()[d]);
    }
  }
  return values;
}

std::vector<Array> run_graph(const Graph& g, std::span<const Array> inputs, const SymbolValues& symbols) {
  std::unordered_map<const Node*, Array> values;
  std::unordered_map<const Node*, int> remaining;
  for (const auto& [node, uses] : g.use_counts()) remaining[node] = uses;
  for (size_t i = 0; i < g.inputs().size(); ++i) values[g.inputs()[i]] = inputs[i];
  std::vector<Array> args;
  for (const Node* n : g.nodes()) {
    if (n->op == Op::Input) continue;
    args.clear();
    for (const Node* in : n->inputs) args.push_back(values.at(in));
    values[n] = run_op(n->op, n->attrs, args, n->type, symbols);
    for (const Node* in : n->inputs)
      if (--remaining[in] == 0) values.erase(in);  // the last use: free it early
  }
  std::vector<Array> outputs;
  for (const Node* out : g.outputs()) outputs.push_back(values.at(out));
  return outputs;
}

}  // namespace ember

#include "passes/decompose.h"

#include "ir/builder.h"
#include "ir/error.h"
#include "runtime/config.h"

namespace ember {

namespace {

// The decomposition must give the node's exact types: inference built them, so a difference is
// a bug in the decomposition, not something to paper over here.
void check_replacement(const Node* n, const std::vector<Value>& values) {
  EMBER_CHECK(values.size() == n->types.size(), "the decomposition of '", n->info().name,
              "' gave ", values.size(), " values for ", n->types.size(), " outputs");
  for (size_t i = 0; i < values.size(); ++i)
    EMBER_CHECK(values[i].type() == n->types[i], "the decomposition of '", n->info().name,
                "' gave ", values[i].type().str(), " for output ", i, " of type ",
                n->types[i].str());
}

// Whether n's decomposition is elementwise nodes and reductions (over any dims: split-reductions
// makes them what row and column kernels fold), so that fusion makes it a few kernels.
bool fusible(const Node* n) {
  const TensorType& x = n->inputs()[0].type();
  int64_t rank = static_cast<int64_t>(x.shape.size());
  if (rank == 0) return false;
  switch (n->op) {
    case Op::Softmax: case Op::LogSoftmax: case Op::LayerNorm: case Op::NativeLayerNorm: case Op::RmsNorm:
    case Op::BatchNorm: case Op::NativeBatchNorm: case Op::Var: case Op::VarMean: case Op::LogSumExp:
      return true;
    // Attention stays whole: the interpreter's blocked kernel never writes the L x S scores that
    // the decomposition (matmuls around a row softmax) writes and reads ([Note: blocked attention]).
    case Op::ScaledDotProductAttention: return false;
    // std in float32 is sqrt of a float32 variance, which overflows where eager's (accumulated in
    // double) is finite; over the last dim with keepdim it is already a row kernel's.
    case Op::Std: {
      std::vector<int64_t> axes = normalize_axes(n->info().name, attr_ints(n->attrs, "axes"), rank);
      return axes == std::vector<int64_t>{rank - 1} && attr_bool(n->attrs, "keepdim");
    }
    default: return false;
  }
}

class Decompose : public Pass {
 public:
  explicit Decompose(bool fusible_only) : fusible_only_(fusible_only) {}
  std::string_view name() const override { return fusible_only_ ? "decompose-fusible" : "decompose"; }

  bool run(Graph& g) override {
    // decompose-fusible exists for fusion: without code generation the interpreter runs the
    // composites directly, faster and bit for bit as eager.
    if (fusible_only_ && config::get("EMBER_CODEGEN") == "0") return false;
    bool changed = false;
    for (Node* n : g.nodes()) {  // a snapshot: the new nodes are primitives, nothing to revisit
      if (!n->info().has_decomposition() || (fusible_only_ && !fusible(n))) continue;
      Builder b(g, n);
      std::vector<Value> values = n->info().decompose(b, n->inputs(), n->attrs);
      if (values.empty()) continue;  // declined: the node stays
      check_replacement(n, values);
      for (int i = 0; i < n->num_outputs(); ++i) g.replace_uses(n->out(i), values[i]);
      changed = true;
    }
    return changed;
  }

 private:
  bool fusible_only_;
};

}  // namespace

std::unique_ptr<Pass> make_decompose() { return std::make_unique<Decompose>(false); }
std::unique_ptr<Pass> make_decompose_fusible() { return std::make_unique<Decompose>(true); }

}  // namespace ember

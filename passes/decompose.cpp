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

// Whether n's decomposition reduces only along the last dim (or not at all), so that it becomes
// elementwise nodes and reductions one row kernel holds (passes/fuse.h).
bool row_wise(const Node* n) {
  const TensorType& x = n->inputs()[0].type();
  int64_t rank = static_cast<int64_t>(x.shape.size());
  if (rank == 0) return false;
  auto last = [&](int64_t axis) { return normalize_axis(n->info().name, axis, rank) == rank - 1; };
  switch (n->op) {
    case Op::Softmax: case Op::LogSoftmax: return last(attr_int(n->attrs, "axis"));
    case Op::LayerNorm: case Op::NativeLayerNorm: case Op::RmsNorm: return attr_int(n->attrs, "ndim") == 1;
    case Op::BatchNorm: return true;  // per-channel arithmetic, no reduction
    // Attention stays whole: the interpreter's blocked kernel never writes the L x S scores that
    // the decomposition (matmuls around a row softmax) writes and reads ([Note: blocked attention]).
    case Op::ScaledDotProductAttention: return false;
    case Op::Var: case Op::Std: case Op::LogSumExp: {
      std::vector<int64_t> axes = normalize_axes(n->info().name, attr_ints(n->attrs, "axes"), rank);
      return axes == std::vector<int64_t>{rank - 1} && attr_bool(n->attrs, "keepdim");
    }
    default: return false;
  }
}

class Decompose : public Pass {
 public:
  explicit Decompose(bool rows_only) : rows_only_(rows_only) {}
  std::string_view name() const override { return rows_only_ ? "decompose-rows" : "decompose"; }

  bool run(Graph& g) override {
    // decompose-rows exists for fusion: without code generation the interpreter runs the
    // composites directly, faster and bit for bit as eager.
    if (rows_only_ && config::get("EMBER_CODEGEN") == "0") return false;
    bool changed = false;
    for (Node* n : g.nodes()) {  // a snapshot: the new nodes are primitives, nothing to revisit
      if (!n->info().has_decomposition() || (rows_only_ && !row_wise(n))) continue;
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
  bool rows_only_;
};

}  // namespace

std::unique_ptr<Pass> make_decompose() { return std::make_unique<Decompose>(false); }
std::unique_ptr<Pass> make_decompose_rows() { return std::make_unique<Decompose>(true); }

}  // namespace ember

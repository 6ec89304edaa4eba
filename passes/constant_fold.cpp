#include "passes/constant_fold.h"

#include "ir/error.h"
#include "runtime/interpreter.h"

namespace ember {

namespace {

constexpr int64_t kMaxFoldedElements = 64;

Literal to_literal(const Array& a) {
  Literal lit;
  lit.dtype = a.dtype();
  for (int64_t i = 0, n = a.numel(); i < n; ++i) {
    if (is_floating(a.dtype())) lit.floats.push_back(a.get(i));
    else lit.ints.push_back(a.get_int(i));
  }
  return lit;
}

// Small and static in every output: folding it keeps the IR small.
bool small_enough(const Node* n) {
  int64_t total = 0;
  for (const TensorType& t : n->types) {
    if (!is_static(t.shape)) return false;
    total += numel(t.shape).value();
  }
  return total <= kMaxFoldedElements;
}

bool foldable(const Node* n) {
  if (n->op == Op::Input || n->op == Op::Constant) return false;
  if (n->op == Op::Uniform || n->op == Op::Normal) return false;  // keep the seed visible in the IR
  if (n->info().is_extern()) return false;  // opaque ([Note: extern ops])
  if (!small_enough(n)) return false;
  for (const Value& in : n->inputs())
    if (in.node->op != Op::Constant) return false;
  return true;
}

class ConstantFold : public Pass {
 public:
  std::string_view name() const override { return "constant-fold"; }

  bool run(Graph& g) override {
    bool changed = false;
    for (Node* n : g.nodes()) {
      if (!foldable(n)) continue;
      std::vector<Array> args;
      for (const Value& in : n->inputs())
        args.push_back(run_op(Op::Constant, in.node->attrs, {}, in.type()));
      std::vector<Array> results;
      try {
        results = run_op(n->op, n->attrs, args, n->types);
      } catch (const Error&) {
        continue;  // raises at run time, where the user sees it
      }
      // Every output becomes a constant; the node itself is left dead.
      for (int i = 0; i < n->num_outputs(); ++i)
        g.replace_uses(n->out(i), g.add_constant(to_literal(results[i]), n->types[i].shape, n));
      changed = true;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> make_constant_fold() { return std::make_unique<ConstantFold>(); }

}  // namespace ember

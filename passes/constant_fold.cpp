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

class ConstantFold : public Pass {
 public:
  std::string_view name() const override { return "constant-fold"; }

  bool run(Graph& g) override {
    bool changed = false;
    for (Node* n : g.nodes()) {
      if (n->op == Op::Input || n->op == Op::Constant) continue;
      if (n->op == Op::Uniform || n->op == Op::Normal) continue;  // keep the seed visible in the IR
      if (!is_static(n->type.shape) || numel(n->type.shape).value() > kMaxFoldedElements) continue;
      bool all_constant = true;
      for (Node* in : n->inputs) all_constant = all_constant && in->op == Op::Constant;
      if (!all_constant) continue;
      std::vector<Array> args;
      for (Node* in : n->inputs) args.push_back(run_op(Op::Constant, in->attrs, {}, in->type));
      Array result;
      try {
        result = run_op(n->op, n->attrs, args, n->type);
      } catch (const Error&) {
        continue;  // raises at run time, where the user sees it
      }
      Node* folded = g.add_constant(to_literal(result), n->type.shape, n);
      g.replace_uses(n, folded);
      changed = true;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> make_constant_fold() { return std::make_unique<ConstantFold>(); }

}  // namespace ember

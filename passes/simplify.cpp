#include "passes/simplify.h"

#include <cmath>

namespace ember {

namespace {

// True when `n` is a constant or a `full` whose every element equals `v`.
bool is_splat(const Node* n, double v) {
  if (n->op == Op::Full) return attr_float(n->attrs, "value") == v;
  if (n->op != Op::Constant) return false;
  const Literal& lit = attr_literal(n->attrs, "value");
  for (size_t i = 0; i < lit.size(); ++i)
    if (lit.as_double(i) != v) return false;
  return lit.size() > 0;
}

// Arithmetic identities (x + 0, x * 1, x ^ 1, ...) hold bit for bit only on integers: on floats
// x + 0.0 turns -0.0 into +0.0, and every arithmetic op quiets a signalling NaN, which eager
// does too. So they apply to integer results only; codegen makes the float ones free anyway.
bool integer_identity(const Node* n, const Node* constant, double v) {
  return !is_floating(n->type.dtype) && is_splat(constant, v);
}

Node* arg(Node* n, size_t i) { return n->inputs[i]; }
bool same_shape(const Node* n) { return n->inputs[0]->type.shape == n->type.shape; }

bool identity_permutation(const Node* n) {
  const auto& dims = attr_ints(n->attrs, "dims");
  int64_t rank = static_cast<int64_t>(dims.size());
  for (int64_t i = 0; i < rank; ++i)
    if (dims[i] != i && dims[i] != i - rank) return false;
  return true;
}

struct Rule {
  Op op;
  Node* (*rewrite)(Node* n);  // the replacement, or nullptr when the rule does not match
};

const Rule kRules[] = {
    {Op::Add, [](Node* n) { return integer_identity(n, arg(n, 1), 0) ? arg(n, 0) : nullptr; }},  // x + 0 -> x (integers)
    {Op::Add, [](Node* n) { return integer_identity(n, arg(n, 0), 0) ? arg(n, 1) : nullptr; }},  // 0 + x -> x (integers)
    {Op::Sub, [](Node* n) { return integer_identity(n, arg(n, 1), 0) ? arg(n, 0) : nullptr; }},  // x - 0 -> x (integers)
    {Op::Mul, [](Node* n) { return integer_identity(n, arg(n, 1), 1) ? arg(n, 0) : nullptr; }},  // x * 1 -> x (integers)
    {Op::Mul, [](Node* n) { return integer_identity(n, arg(n, 0), 1) ? arg(n, 1) : nullptr; }},  // 1 * x -> x (integers)
    {Op::Pow, [](Node* n) { return integer_identity(n, arg(n, 1), 1) ? arg(n, 0) : nullptr; }},  // x ^ 1 -> x (integers)
    {Op::Neg, [](Node* n) { return arg(n, 0)->op == Op::Neg ? arg(arg(n, 0), 0) : nullptr; }},  // -(-x) -> x
    {Op::Relu, [](Node* n) { return arg(n, 0)->op == Op::Relu ? arg(n, 0) : nullptr; }},      // relu(relu(x)) -> relu(x)
    {Op::LogicalNot, [](Node* n) {                                                             // !!x -> x (bool x)
       return arg(n, 0)->op == Op::LogicalNot ? arg(arg(n, 0), 0) : nullptr; }},
    {Op::Cast, [](Node* n) { return arg(n, 0); }},                                             // cast to its own dtype -> x
    {Op::Reshape, [](Node* n) { return same_shape(n) ? arg(n, 0) : nullptr; }},               // reshape to the same shape -> x
    {Op::Flatten, [](Node* n) { return same_shape(n) ? arg(n, 0) : nullptr; }},               // flatten of nothing -> x
    {Op::Squeeze, [](Node* n) { return same_shape(n) ? arg(n, 0) : nullptr; }},               // squeeze of nothing -> x
    {Op::Expand, [](Node* n) { return same_shape(n) ? arg(n, 0) : nullptr; }},                // expand to the same shape -> x
    {Op::Permute, [](Node* n) { return identity_permutation(n) ? arg(n, 0) : nullptr; }},     // identity permute -> x
    {Op::Transpose, [](Node* n) {                                                              // transpose(d, d) -> x
       return attr_int(n->attrs, "dim0") == attr_int(n->attrs, "dim1") ? arg(n, 0) : nullptr; }},
    {Op::Slice, [](Node* n) {                                                                  // whole slice -> x
       return same_shape(n) && attr_int(n->attrs, "start") == 0 && attr_int(n->attrs, "step") == 1 ? arg(n, 0) : nullptr; }},
};

class Simplify : public Pass {
 public:
  std::string_view name() const override { return "simplify"; }

  bool run(Graph& g) override {
    bool changed = false;
    for (Node* n : g.nodes()) {
      for (const Rule& rule : kRules) {
        if (rule.op != n->op) continue;
        Node* replacement = rule.rewrite(n);
        if (!replacement || replacement == n || !(replacement->type == n->type)) continue;
        g.replace_uses(n, replacement);
        changed = true;
        break;
      }
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> make_simplify() { return std::make_unique<Simplify>(); }

}  // namespace ember

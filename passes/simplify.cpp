#include "passes/simplify.h"

#include <cmath>
#include <unordered_map>

#include "ir/builder.h"

namespace ember {

namespace {

// True when `value` is a constant or a `full` whose every element equals `v`.
bool is_splat(const Value& value, double v) {
  const Node* n = value.node;
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
bool integer_identity(const Node* n, const Value& constant, double v) {
  return !is_floating(n->types[0].dtype) && is_splat(constant, v);
}

Value arg(const Node* n, size_t i) { return n->inputs()[i]; }
// The op that defines input i of n.
Op arg_op(const Node* n, size_t i) { return n->inputs()[i].node->op; }
bool same_shape(const Node* n) { return n->inputs()[0].type().shape == n->type().shape; }

bool identity_permutation(const Node* n) {
  const auto& dims = attr_ints(n->attrs, "dims");
  int64_t rank = static_cast<int64_t>(dims.size());
  for (int64_t i = 0; i < rank; ++i)
    if (dims[i] != i && dims[i] != i - rank) return false;
  return true;
}

// Rules rewrite single-output nodes; a rule's replacement is any value of the graph.
struct Rule {
  Op op;
  Value (*rewrite)(const Node* n);  // the replacement, or `none` when the rule does not match
};

const Value none{};

const Rule kRules[] = {
    {Op::Add, [](const Node* n) { return integer_identity(n, arg(n, 1), 0) ? arg(n, 0) : none; }},  // x + 0 -> x (integers)
    {Op::Add, [](const Node* n) { return integer_identity(n, arg(n, 0), 0) ? arg(n, 1) : none; }},  // 0 + x -> x (integers)
    {Op::Sub, [](const Node* n) { return integer_identity(n, arg(n, 1), 0) ? arg(n, 0) : none; }},  // x - 0 -> x (integers)
    {Op::Mul, [](const Node* n) { return integer_identity(n, arg(n, 1), 1) ? arg(n, 0) : none; }},  // x * 1 -> x (integers)
    {Op::Mul, [](const Node* n) { return integer_identity(n, arg(n, 0), 1) ? arg(n, 1) : none; }},  // 1 * x -> x (integers)
    {Op::Pow, [](const Node* n) { return integer_identity(n, arg(n, 1), 1) ? arg(n, 0) : none; }},  // x ^ 1 -> x (integers)
    {Op::Neg, [](const Node* n) { return arg_op(n, 0) == Op::Neg ? arg(arg(n, 0).node, 0) : none; }},  // -(-x) -> x
    {Op::Relu, [](const Node* n) { return arg_op(n, 0) == Op::Relu ? arg(n, 0) : none; }},      // relu(relu(x)) -> relu(x)
    {Op::LogicalNot, [](const Node* n) {                                                             // !!x -> x (bool x)
       return arg_op(n, 0) == Op::LogicalNot ? arg(arg(n, 0).node, 0) : none; }},
    {Op::Cast, [](const Node* n) { return arg(n, 0); }},                                                  // cast to its own dtype -> x
    {Op::Reshape, [](const Node* n) { return same_shape(n) ? arg(n, 0) : none; }},               // reshape to the same shape -> x
    {Op::Flatten, [](const Node* n) { return same_shape(n) ? arg(n, 0) : none; }},               // flatten of nothing -> x
    {Op::Squeeze, [](const Node* n) { return same_shape(n) ? arg(n, 0) : none; }},               // squeeze of nothing -> x
    {Op::Expand, [](const Node* n) { return same_shape(n) ? arg(n, 0) : none; }},                // expand to the same shape -> x
    {Op::Permute, [](const Node* n) { return identity_permutation(n) ? arg(n, 0) : none; }},     // identity permute -> x
    {Op::Transpose, [](const Node* n) {                                                              // transpose(d, d) -> x
       return attr_int(n->attrs, "dim0") == attr_int(n->attrs, "dim1") ? arg(n, 0) : none; }},
    {Op::Slice, [](const Node* n) {                                                                  // whole slice -> x
       return same_shape(n) && attr_int(n->attrs, "start") == 0 && attr_int(n->attrs, "step") == 1 ? arg(n, 0) : none; }},
};

// conv2d(pad(x) with zeros around H and W) -> conv2d(x) padded the same: the convolution reads
// zeros past the edges either way, and the padded copy (TensorFlow-style "same" padding, as in
// MobileNetV2's transformers port) is never written. Negative pads crop: they stay.
Value fold_pad_into_conv(Graph& g, Node* n) {
  if (n->op != Op::Conv2d || arg_op(n, 0) != Op::Pad) return none;
  const Node* pad = arg(n, 0).node;
  const std::vector<int64_t>& pads = attr_ints(pad->attrs, "pads");  // last dim first
  if (attr_float(pad->attrs, "value") != 0.0 || pads.size() < 4) return none;
  for (size_t i = 0; i < pads.size(); ++i)
    if (pads[i] < 0 || (i >= 4 && pads[i] != 0)) return none;
  std::vector<int64_t> padding = attr_ints(n->attrs, "padding");
  if (padding.size() == 2) padding = {padding[0], padding[1], padding[0], padding[1]};
  std::vector<int64_t> folded{padding[0] + pads[2], padding[1] + pads[0], padding[2] + pads[3], padding[3] + pads[1]};
  std::vector<Value> inputs = n->inputs();
  inputs[0] = arg(pad, 0);
  Attrs attrs = n->attrs;
  attrs["padding"] = folded;
  Builder b(g, n);
  return b.op(Op::Conv2d, inputs, attrs);
}

// [Note: reshapes above elementwise ops]
// reshape(f(a, b)) -> f(reshape(a), reshape(b)) when f is elementwise, its value feeds only the
// reshape, and a and b have its whole shape (or are 0-d): the same values in the same order.
// An operand that broadcasts only over trailing dims the reshape keeps (a bias [n] of
// [rows, n] viewed as [batch, seq, n]) stays as it is: it broadcasts the same way after.
// Fusion groups nodes over one domain and does not look through views, so
// `x.exp().view(rows, -1).sum(-1)` was two kernels with the exponentials written between them;
// with the reshape on x (a view) it is one. It climbs chains of such nodes, and only chains
// that start at graph inputs, constants, reshapes or library calls (GEMM, convolution), whose
// outputs are contiguous: there a reshape is a view. So a linear layer's bias add joins the
// residual add and layer norm after the [batch * seq, n] -> [batch, seq, n] view. A chain that
// starts at a reduction is that kernel's epilogue, which fuses with it over its shape; moved
// past a reshape it would not (a float16 sum's cast back, a var_mean's division).
bool feeds_only(const Node* producer, const Node* reader) {
  for (const Use& u : producer->uses())
    if (u.user != reader) return false;  // another reader, or a graph output (no user)
  return !producer->uses().empty();
}

// How many trailing dims `from` and `to` share: a reshape between them keeps those.
size_t kept_trailing_dims(const Shape& from, const Shape& to) {
  size_t k = 0;
  while (k < from.size() && k < to.size() && from[from.size() - 1 - k] == to[to.size() - 1 - k]) ++k;
  return k;
}

// Whether operand shape `in` broadcasts over only the last `kept` dims (leading size-1 dims
// aside) and has no more dims than the reshaped shape, so that it broadcasts the same way into
// that shape.
bool broadcasts_within_trailing(const Shape& in, size_t kept, size_t reshaped_rank) {
  size_t lead = 0;
  while (lead < in.size() && in[lead] == Dim(1)) ++lead;
  return in.size() - lead <= kept && in.size() <= reshaped_rank;
}

// Whether e is elementwise over its whole shape, read only by `reader`, each operand of that
// shape, 0-d, or broadcast within the `kept` trailing dims.
bool whole_elementwise(const Node* e, const Node* reader, size_t kept, size_t reshaped_rank) {
  if (!e->info().is_elementwise() || e->num_outputs() != 1 || !feeds_only(e, reader)) return false;
  const Shape& shape = e->type().shape;
  if (shape.empty()) return false;
  for (const Value& in : e->inputs()) {
    const Shape& s = in.type().shape;
    if (!s.empty() && s != shape && !broadcasts_within_trailing(s, kept, reshaped_rank)) return false;
  }
  return true;
}

bool is_reshape(Op op) { return op == Op::Reshape || op == Op::Flatten; }

bool is_library_call(Op op) { return op == Op::MatMul || op == Op::Linear || op == Op::Conv2d; }

bool reshape_is_a_view(const Value& v) {
  Op op = v.node->op;
  return op == Op::Input || op == Op::Constant || op == Op::Full || is_reshape(op) || is_library_call(op);
}

// Moves one reshape (or flatten) `view` above the chain hoistable() allows. A node read twice
// by its reader (x * x) is visited once: by memo, or a chain of squarings would be visited (and
// built) 2^depth times.
class ReshapeHoist {
 public:
  ReshapeHoist(Graph& g, const Node* view)
      : g_(g), view_(view), kept_(kept_trailing_dims(view->inputs()[0].type().shape, view->type().shape)) {}

  // Whether a reshape of v, which only `reader` reads, can move above v's producer and the
  // chain of such producers above it.
  bool hoistable(const Value& v, const Node* reader) {
    auto [it, fresh] = hoistable_.try_emplace(v.node, false);
    if (!fresh) return it->second;
    bool ok = whole_elementwise(v.node, reader, kept_, view_->type().shape.size());
    for (const Value& in : v.node->inputs())
      if (ok && reshaped_here(in, v) && !hoistable(in, v.node) && !reshape_is_a_view(in)) ok = false;
    return hoistable_[v.node] = ok;
  }

  // v reshaped as `view` reshapes, built just before it, moved above the chain hoistable allows.
  Value reshaped(const Value& v, const Node* reader) {
    if (auto it = built_.find(v.node); it != built_.end()) return it->second;
    Builder b(g_, view_);
    Value out;
    if (!hoistable(v, reader)) {
      out = b.op(view_->op, {v}, view_->attrs);
    } else {
      std::vector<Value> inputs;
      for (const Value& in : v.node->inputs()) inputs.push_back(reshaped_here(in, v) ? reshaped(in, v.node) : in);
      out = b.op(v.node->op, inputs, v.node->attrs);
    }
    return built_[v.node] = out;
  }

 private:
  // Whether operand `in` of v is reshaped with it: it has v's whole shape (else it is 0-d or
  // broadcasts within the kept trailing dims, and stays).
  static bool reshaped_here(const Value& in, const Value& v) { return in.type().shape == v.type().shape; }

  Graph& g_;
  const Node* view_;
  size_t kept_;
  std::unordered_map<const Node*, bool> hoistable_;
  std::unordered_map<const Node*, Value> built_;
};

Value hoist_reshape(Graph& g, Node* n) {
  if (!is_reshape(n->op) || same_shape(n)) return none;
  ReshapeHoist hoist(g, n);
  if (!hoist.hoistable(n->inputs()[0], n)) return none;
  Value out = hoist.reshaped(n->inputs()[0], n);
  return out.type() == n->type() ? out : none;
}

// [Note: slices sunk below elementwise ops]
// slice(f(a, b)) -> f(slice(a), slice(b)) when f is elementwise and the slice keeps one element
// along its dim: the shifted variance (decompose's [Note: shifted two-pass]) subtracts the last
// element of each row, and when the row is computed in the kernel (a residual add before a
// layer norm, a bias add in training) that element was a value the row kernel could not load,
// so the norm split into two kernels with the sum written between them. Sunk to the kernel's
// inputs, the slice is a view the kernel reads. f itself stays for its other readers; the copy
// computes one element per row. An operand broadcast along the dim (missing or of size 1) is
// not sliced. Below f, it sinks only through values nothing else reads: the others are likely
// stored, and are read there.
bool is_one_element_slice(const Node* n) {
  if (n->op != Op::Slice || same_shape(n)) return false;
  int64_t axis = normalize_axis("slice", attr_int(n->attrs, "axis"), static_cast<int64_t>(n->type().shape.size()));
  return n->type().shape[axis] == Dim(1);
}

class SliceSink {
 public:
  SliceSink(Graph& g, const Node* slice)
      : g_(g), slice_(slice), rank_(static_cast<int64_t>(slice->type().shape.size())),
        axis_(normalize_axis("slice", attr_int(slice->attrs, "axis"), rank_)) {}

  static bool sinks_through(const Node* n) {
    return n->info().is_elementwise() && n->num_outputs() == 1 && !n->type().shape.empty();
  }

  // v (of the slice's input rank) as the slice would cut it, with the slice moved above
  // elementwise producers: v's own (v is what the slice read), and below it those that only
  // `reader` reads. A value read elsewhere too is likely stored by a kernel of its own (a
  // residual stream that the next layer reads), and the slice reads it there, rather than
  // recomputing it back through every layer.
  Value sliced(const Value& v, const Node* reader) {
    if (auto it = built_.find(v.node); it != built_.end()) return it->second;
    Builder b(g_, slice_);
    Value out;
    if (!sinks_through(v.node) || (reader && !feeds_only(v.node, reader))) {
      out = b.op(Op::Slice, {v}, slice_->attrs);
    } else {
      std::vector<Value> inputs;
      for (const Value& in : v.node->inputs()) inputs.push_back(operand(in, v.node));
      out = b.op(v.node->op, inputs, v.node->attrs);
    }
    return built_[v.node] = out;
  }

 private:
  // An operand of elementwise node `reader`, right-aligned against the slice's rank.
  Value operand(const Value& in, const Node* reader) {
    int64_t dim = axis_ - (rank_ - static_cast<int64_t>(in.type().shape.size()));
    if (dim < 0 || in.type().shape[dim] == Dim(1)) return in;  // broadcast along the sliced dim
    if (dim == axis_) return sliced(in, reader);
    Attrs attrs = slice_->attrs;  // a lower-rank operand: the same cut on its own dim
    attrs["axis"] = Attr(dim);
    return Builder(g_, slice_).op(Op::Slice, {in}, attrs);
  }

  Graph& g_;
  const Node* slice_;
  int64_t rank_, axis_;
  std::unordered_map<const Node*, Value> built_;
};

// Whether n's value is returned, itself or through views: then it views the memory of the
// value it slices, in eager and in torch.compile (offset and storage size), and the slice stays.
bool returned_through_views(const Node* n) {
  for (const Use& u : n->uses())
    if (!u.user || (u.user->info().is_view() && returned_through_views(u.user))) return true;
  return false;
}

Value sink_slice(Graph& g, Node* n) {
  if (!is_one_element_slice(n) || !SliceSink::sinks_through(n->inputs()[0].node) || returned_through_views(n))
    return none;
  Value out = SliceSink(g, n).sliced(n->inputs()[0], nullptr);
  return out.type() == n->type() ? out : none;
}

class Simplify : public Pass {
 public:
  std::string_view name() const override { return "simplify"; }

  bool run(Graph& g) override {
    bool changed = false;
    for (Node* n : g.nodes()) {
      if (Value folded = fold_pad_into_conv(g, n); folded.node) {
        g.replace_uses(n, folded);
        changed = true;
        continue;
      }
      if (Value hoisted = hoist_reshape(g, n); hoisted.node) {
        g.replace_uses(n, hoisted);
        changed = true;
        continue;
      }
      if (Value sunk = sink_slice(g, n); sunk.node) {
        g.replace_uses(n, sunk);
        changed = true;
        continue;
      }
      for (const Rule& rule : kRules) {
        if (rule.op != n->op) continue;
        Value replacement = rule.rewrite(n);
        if (!replacement.node || replacement.node == n) continue;
        if (!(replacement.type() == n->type())) continue;
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

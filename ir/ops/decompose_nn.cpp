// Decompositions of softmax, log_softmax, attention, gelu, silu and linear. Each computes in
// float32 (float64 for float64) and rounds once to the output dtype.
#include <cmath>
#include <limits>

#include "ir/ops/decompositions.h"

namespace ember::ops {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

Values softmax(Builder& b, Op op, const Values& in, const Attrs& attrs) {
  TensorType out = output_types(op, in, attrs)[0];
  Value xc = b.cast(in[0], compute_dtype(out.dtype));
  return {b.as_type(softmax_along(b, xc, attr_int(attrs, "axis"), op == Op::LogSoftmax), out)};
}

// k^T over the last two dims.
Value transpose_last(Builder& b, Value k) {
  return b.op(Op::Transpose, {k}, {{"dim0", int64_t{-2}}, {"dim1", int64_t{-1}}});
}

// The scores' factor: `scale`, or 1 / sqrt(E) when it is 0.
Value attention_scale(Builder& b, Value qc, double scale) {
  DType c = qc.type().dtype;
  if (scale != 0) return b.scalar(scale, c);
  int64_t last = static_cast<int64_t>(qc.type().shape.size()) - 1;
  if (auto e = Builder::static_count(qc.type(), {last}))
    return b.scalar(1.0 / std::sqrt(static_cast<double>(*e)), c);
  return b.unary(Op::Rsqrt, b.count(qc, {last}, c));
}

// -inf where key j comes after query i (j > i): [L, S] from two iotas.
Value causal_mask(Builder& b, const Dim& L, const Dim& S) {
  auto iota = [&](const Dim& n) {
    return b.op(Op::Arange, {}, {{"end", static_cast<double>(n.value())}});
  };
  return b.op(Op::Gt, {iota(S), b.reshape(iota(L), {L, Dim(1)})});
}

}  // namespace

// exp(x - max) / sum(exp(x - max))
Values decompose_softmax(Builder& b, const Values& in, const Attrs& attrs) {
  return softmax(b, Op::Softmax, in, attrs);
}

// (x - max) - log(sum(exp(x - max)))
Values decompose_log_softmax(Builder& b, const Values& in, const Attrs& attrs) {
  return softmax(b, Op::LogSoftmax, in, attrs);
}

// softmax(q k^T * scale, masked) v, with two matmuls and the stable softmax.
Values decompose_attention(Builder& b, const Values& in, const Attrs& attrs) {
  TensorType out = output_types(Op::ScaledDotProductAttention, in, attrs)[0];
  const Shape &q = in[0].type().shape, &k = in[1].type().shape;
  const Dim &L = q[q.size() - 2], &S = k[k.size() - 2];
  bool causal = attr_bool(attrs, "causal");
  // Declined: the causal mask compares iotas, and arange makes static lengths only.
  if (causal && (!L.is_static() || !S.is_static())) return {};
  DType c = compute_dtype(out.dtype);
  Value qc = b.cast(in[0], c), kc = b.cast(in[1], c), vc = b.cast(in[2], c);
  Value scores = b.op(Op::MatMul, {qc, transpose_last(b, kc)});
  scores = b.mul(scores, attention_scale(b, qc, attr_float(attrs, "scale")));
  if (in.size() == 4 && in[3].type().dtype == DType::Bool)  // true attends
    scores = b.op(Op::Where, {in[3], scores, b.scalar(-kInf, c)});
  else if (in.size() == 4)  // additive
    scores = b.add(scores, b.cast(in[3], c));
  if (causal) scores = b.op(Op::Where, {causal_mask(b, L, S), b.scalar(-kInf, c), scores});
  Value weights = softmax_along(b, scores, -1, false);
  // A row masked everywhere weighs every key 0, as PyTorch's safe softmax does; its max is -inf
  // (a NaN score makes it NaN, and the row NaN, as there).
  std::vector<int64_t> last = {static_cast<int64_t>(scores.type().shape.size()) - 1};
  if (!empty_along(scores.type(), last)) {
    Value hidden = b.op(Op::Eq, {b.reduce(Op::Max, scores, last, true), b.scalar(-kInf, c)});
    weights = b.op(Op::Where, {hidden, b.scalar(0.0, c), weights});
  }
  return {b.as_type(b.op(Op::MatMul, {weights, vc}), out)};
}

// 0.5 * x * (1 + erf(x / sqrt(2))), or with tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)) for erf;
// the same operations in the same order as the scalar function (ir/ops/elementwise.cpp).
Values decompose_gelu(Builder& b, const Values& in, const Attrs& attrs) {
  TensorType out = output_types(Op::Gelu, in, attrs)[0];
  DType c = compute_dtype(out.dtype);
  Value x = b.cast(in[0], c);
  auto k = [&](double v) { return b.scalar(v, c); };
  Value inner;
  if (attr_string(attrs, "approximate") == "tanh") {
    Value cube = b.mul(b.mul(b.mul(k(0.044715), x), x), x);
    Value sum = b.add(x, cube);
    inner = b.unary(Op::Tanh, b.mul(k(0.7978845608028654), sum));
  } else {
    inner = b.unary(Op::Erf, b.mul(x, k(0.7071067811865476)));
  }
  Value half_x = b.mul(k(0.5), x);
  return {b.as_type(b.mul(half_x, b.add(k(1.0), inner)), out)};
}

// x * sigmoid(x)
Values decompose_silu(Builder& b, const Values& in, const Attrs& attrs) {
  TensorType out = output_types(Op::Silu, in, attrs)[0];
  Value x = b.cast(in[0], compute_dtype(out.dtype));
  return {b.as_type(b.mul(x, b.unary(Op::Sigmoid, x)), out)};
}

// x @ weight^T (+ bias): the matmul stays a library call.
Values decompose_linear(Builder& b, const Values& in, const Attrs& attrs) {
  TensorType out = output_types(Op::Linear, in, attrs)[0];
  DType c = compute_dtype(out.dtype);
  Value w = b.op(Op::Transpose, {b.cast(in[1], c)}, {{"dim0", int64_t{0}}, {"dim1", int64_t{1}}});
  Value y = b.op(Op::MatMul, {b.cast(in[0], c), w});
  if (in.size() == 3) y = b.add(y, b.cast(in[2], c));
  return {b.as_type(y, out)};
}

}  // namespace ember::ops

// Decompositions of the composite reductions into sum and max: mean, var, std, var_mean and
// logsumexp, computed in float32 (float64 for float64, and var and std of float32) and rounded
// once to the output dtype.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ir/ops/decompositions.h"

namespace ember::ops {

namespace {

struct Variance {
  Value var;   // over the reduced dims, kept as size 1
  Value mean;  // likewise, when asked for
};

// Two-pass variance ([Note: shifted two-pass]) with `correction`: sum((x - mean)^2) / max(0, n - correction), which is inf
// past the last degree of freedom and NaN when every deviation is 0, as PyTorch and the kernel.
Variance variance(Builder& b, Op op, const Values& in, const Attrs& attrs, DType c,
                  bool want_mean = false) {
  std::vector<int64_t> axes = reduced_axes(op_name(op), in[0].type(), attr_ints(attrs, "axes"));
  Moments m = moments(b, in[0], c, axes, want_mean);
  double correction = attr_float(attrs, "correction");
  Value denominator;
  if (auto n = Builder::static_count(in[0].type(), axes))
    denominator = b.scalar(std::max(0.0, static_cast<double>(*n) - correction), c);
  else
    denominator = b.op(Op::Maximum, {b.sub(m.count, b.scalar(correction, c)), b.scalar(0.0, c)});
  Value var = b.div(m.sum_squares, denominator);
  return {var, m.mean};
}

// The dtype var and std sum their squared deviations in: float64 for a float32 input, as eager's
// CPU kernel accumulates (a float32 square overflows past 1.8e19, where eager's variance is
// finite), at a fifth of eager's time still; else the output's compute dtype. var_mean stays in
// float32: group norm is lowered through it, and eager's group norm kernel sums in float32 at
// the speed ember's float32 passes have (float64 was 1.3x slower).
DType variance_dtype(const Value& x, DType out) { return x.type().dtype == DType::Float32 ? DType::Float64 : compute_dtype(out); }

}  // namespace

// sum(x) / n
Values decompose_mean(Builder& b, const Values& in, const Attrs& attrs) {
  TensorType out = output_types(Op::Mean, in, attrs)[0];
  std::vector<int64_t> axes = reduced_axes("mean", in[0].type(), attr_ints(attrs, "axes"));
  DType c = compute_dtype(out.dtype);
  Value xc = b.cast(in[0], c);
  Value sum = b.reduce(Op::Sum, xc, axes, attr_bool(attrs, "keepdim"));
  return {b.as_type(b.div(sum, b.count(xc, axes, c)), out)};
}

Values decompose_var(Builder& b, const Values& in, const Attrs& attrs) {
  TensorType out = output_types(Op::Var, in, attrs)[0];
  return {b.as_type(variance(b, Op::Var, in, attrs, variance_dtype(in[0], out.dtype)).var, out)};
}

// sqrt(var(x))
Values decompose_std(Builder& b, const Values& in, const Attrs& attrs) {
  TensorType out = output_types(Op::Std, in, attrs)[0];
  Value var = variance(b, Op::Std, in, attrs, variance_dtype(in[0], out.dtype)).var;
  return {b.as_type(b.unary(Op::Sqrt, var), out)};
}

Values decompose_var_mean(Builder& b, const Values& in, const Attrs& attrs) {
  std::vector<TensorType> out = output_types(Op::VarMean, in, attrs);
  Variance v = variance(b, Op::VarMean, in, attrs, compute_dtype(out[0].dtype), true);
  return {b.as_type(v.var, out[0]), b.as_type(v.mean, out[1])};
}

// m + log(sum(exp(x - m))) with m the max, or 0 where the max is infinite: then the max is the
// answer (all -inf gives -inf, a +inf gives +inf) and x - m would be inf - inf.
Values decompose_logsumexp(Builder& b, const Values& in, const Attrs& attrs) {
  TensorType out = output_types(Op::LogSumExp, in, attrs)[0];
  std::vector<int64_t> axes = reduced_axes("logsumexp", in[0].type(), attr_ints(attrs, "axes"));
  if (empty_along(in[0].type(), axes))  // the log of an empty sum; max has no element to take
    return {b.op(Op::Full, {}, {{"shape", out.shape},
                                {"value", -std::numeric_limits<double>::infinity()},
                                {"dtype", out.dtype}})};
  DType c = compute_dtype(out.dtype);
  Value xc = b.cast(in[0], c);
  Value max = b.reduce(Op::Max, xc, axes, true);
  Value shift = b.op(Op::Where, {b.unary(Op::IsInf, max), b.scalar(0.0, c), max});
  Value sum = b.reduce(Op::Sum, b.unary(Op::Exp, b.sub(xc, shift)), axes, true);
  return {b.as_type(b.add(b.unary(Op::Log, sum), shift), out)};
}

}  // namespace ember::ops

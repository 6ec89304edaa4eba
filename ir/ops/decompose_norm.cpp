// Decompositions of the norms: layer_norm, rms_norm, batch_norm (inference) and the native forms
// with their statistics. Statistics are two-pass (mean, then the mean of squared deviations) in
// float32 (float64 for float64), and each output is rounded once to the input's dtype.
#include "ir/ops/decompositions.h"

namespace ember::ops {

namespace {

// The last `ndim` dims of x.
std::vector<int64_t> last_dims(const TensorType& x, int64_t ndim) {
  int64_t rank = static_cast<int64_t>(x.shape.size());
  std::vector<int64_t> axes;
  for (int64_t i = rank - ndim; i < rank; ++i) axes.push_back(i);
  return axes;
}

struct Normalized {
  Value y;     // (x - mean) * rstd, or x * rstd without centring
  Value rstd;  // 1 / sqrt(var + eps), kept as size 1
  Value mean;  // likewise, when asked for
};

enum class Center { No, Yes, AndMean };

// Layer norm's core over `axes` (biased variance); rms norm's without centring.
Normalized normalize(Builder& b, Value xc, const std::vector<int64_t>& axes, double eps,
                     Center center) {
  DType c = xc.type().dtype;
  Normalized n;
  Value var;
  if (center != Center::No) {
    Moments m = moments(b, xc, c, axes, center == Center::AndMean);
    n.mean = m.mean;
    var = b.div(m.sum_squares, m.count);
    xc = m.centered;
  } else {
    Value sum_squares = b.reduce(Op::Sum, b.mul(xc, xc), axes, true);
    var = b.div(sum_squares, b.count(xc, axes, c));
  }
  n.rstd = b.unary(Op::Rsqrt, b.add(var, b.scalar(eps, c)));
  n.y = b.mul(xc, n.rstd);
  return n;
}

Normalized layer_normalize(Builder& b, const Values& in, const Attrs& attrs, DType c,
                           Center center) {
  std::vector<int64_t> axes = last_dims(in[0].type(), attr_int(attrs, "ndim"));
  return normalize(b, b.cast(in[0], c), axes, attr_float(attrs, "eps"), center);
}

// y * weight + bias, in y's dtype.
Value affine(Builder& b, Value y, Value weight, Value bias) {
  DType c = y.type().dtype;
  Value scaled = b.mul(y, b.cast(weight, c));
  return b.add(scaled, b.cast(bias, c));
}

// A per-channel parameter [C] of x [N, C, ...] as [C, 1, ...], to broadcast against x.
Value per_channel(Builder& b, Value p, const TensorType& x) {
  Shape shape{x.shape[1]};
  for (size_t i = 2; i < x.shape.size(); ++i) shape.push_back(Dim(1));
  return b.reshape(p, shape);
}

}  // namespace

// (x - mean) * rsqrt(var + eps) * weight + bias
Values decompose_layer_norm(Builder& b, const Values& in, const Attrs& attrs) {
  TensorType out = output_types(Op::LayerNorm, in, attrs)[0];
  DType c = compute_dtype(out.dtype);
  Normalized n = layer_normalize(b, in, attrs, c, Center::Yes);
  return {b.as_type(affine(b, n.y, in[1], in[2]), out)};
}

Values decompose_native_layer_norm(Builder& b, const Values& in, const Attrs& attrs) {
  std::vector<TensorType> out = output_types(Op::NativeLayerNorm, in, attrs);
  DType c = compute_dtype(out[0].dtype);
  Normalized n = layer_normalize(b, in, attrs, c, Center::AndMean);
  Value y = affine(b, n.y, in[1], in[2]);
  return {b.as_type(y, out[0]), b.as_type(n.mean, out[1]), b.as_type(n.rstd, out[2])};
}

// x * rsqrt(mean(x^2) + eps) * weight
Values decompose_rms_norm(Builder& b, const Values& in, const Attrs& attrs) {
  TensorType out = output_types(Op::RmsNorm, in, attrs)[0];
  DType c = compute_dtype(out.dtype);
  Normalized n = layer_normalize(b, in, attrs, c, Center::No);
  return {b.as_type(b.mul(n.y, b.cast(in[1], c)), out)};
}

// (x - running_mean) * (weight / sqrt(running_var + eps)) + bias, per channel
Values decompose_batch_norm(Builder& b, const Values& in, const Attrs& attrs) {
  TensorType out = output_types(Op::BatchNorm, in, attrs)[0];
  DType c = compute_dtype(out.dtype);
  const TensorType& x = in[0].type();
  Value xc = b.cast(in[0], c);
  Value mean = per_channel(b, b.cast(in[1], c), x);
  Value var = b.cast(in[2], c);
  Value weight = b.cast(in[3], c);
  Value var_eps = b.add(var, b.scalar(attr_float(attrs, "eps"), c));
  Value scale = b.div(weight, b.unary(Op::Sqrt, var_eps));
  Value centered = b.sub(xc, mean);
  Value scaled = b.mul(centered, per_channel(b, scale, x));
  return {b.as_type(b.add(scaled, per_channel(b, b.cast(in[4], c), x)), out)};
}

// Batch statistics over every dim but the channel's; the running statistics move `momentum` of
// the way to the batch's, the variance's unbiased (sum of squares / (n - 1)).
Values decompose_native_batch_norm(Builder& b, const Values& in, const Attrs& attrs) {
  std::vector<TensorType> out = output_types(Op::NativeBatchNorm, in, attrs);
  DType c = compute_dtype(out[0].dtype);
  const TensorType& x = in[0].type();
  std::vector<int64_t> axes{0};
  for (int64_t i = 2; i < static_cast<int64_t>(x.shape.size()); ++i) axes.push_back(i);
  Value xc = b.cast(in[0], c);
  // The statistics accumulate in float64, as eager's (at::acc_type of float is double on the
  // CPU): a training step's gradients pass back through every batch norm, and float32 sums
  // left ember's ResNet and MobileNet gradients several times eager's error (docs/testing.md's
  // model rule allows 2x). Reading x once either way, it costs no memory traffic.
  Moments m = moments(b, in[0], DType::Float64, axes, true);
  m.mean = b.cast(m.mean, c);
  m.sum_squares = b.cast(m.sum_squares, c);
  m.count = b.cast(m.count, c);
  m.centered = b.sub(xc, m.mean);
  double eps = attr_float(attrs, "eps"), momentum = attr_float(attrs, "momentum");
  Value var = b.div(m.sum_squares, m.count);
  Value invstd = b.unary(Op::Rsqrt, b.add(var, b.scalar(eps, c)));
  Value normalized = b.mul(m.centered, invstd);
  Value weight = per_channel(b, b.cast(in[1], c), x);
  Value scaled = b.mul(normalized, weight);
  Value y = b.add(scaled, per_channel(b, b.cast(in[2], c), x));
  Shape channels{x.shape[1]};
  Value mean = b.reshape(m.mean, channels);
  Value keep = b.scalar(1 - momentum, c), take = b.scalar(momentum, c);
  Value kept_mean = b.mul(keep, b.cast(in[3], c));
  Value new_mean = b.add(kept_mean, b.mul(take, mean));
  Value moved = b.mul(take, b.reshape(m.sum_squares, channels));
  Value unbiased = b.div(moved, b.sub(m.count, b.scalar(1.0, c)));
  Value new_var = b.add(b.mul(keep, b.cast(in[4], c)), unbiased);
  return {b.as_type(y, out[0]), b.as_type(mean, out[1]),
          b.as_type(b.reshape(invstd, channels), out[2]), b.as_type(new_mean, out[3]),
          b.as_type(new_var, out[4])};
}

}  // namespace ember::ops

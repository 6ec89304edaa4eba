// Composite ops: softmax, log_softmax, the norms and attention. Each record points to its
// decomposition into primitive ops (ir/ops/decompose_*.cpp), which the decompose pass applies;
// the interpreter runs them directly.
#include "ir/ops/decompositions.h"
#include "ir/ops/registry.h"

namespace ember::ops {

namespace {

TensorType infer_softmax(const OpInfo& op, std::span<const TensorType> in, const Attrs& attrs) {
  const TensorType& x = in[0];
  normalize_axis(op.name, attr_int(attrs, "axis"), static_cast<int64_t>(x.shape.size()));
  return {is_floating(x.dtype) ? x.dtype : kDefaultFloat, x.shape};
}

void check_param(const OpInfo& op, const TensorType& x, const TensorType& p, const Shape& expected, const char* what) {
  if (p.dtype != x.dtype)
    EMBER_OP_ERROR(Type, op, what, " dtype ", dtype_name(p.dtype), " differs from input ", dtype_name(x.dtype));
  if (p.shape.size() != expected.size())
    EMBER_OP_ERROR(Value, op, what, " must be ", shape_str(expected), ", got ", p.str());
  for (size_t i = 0; i < expected.size(); ++i)
    require_equal_dims(op.name, p.shape[i], expected[i],
                       detail::concat(what, " must be ", shape_str(expected), ", got ", p.str()));
}

TensorType infer_norm(const OpInfo& op, std::span<const TensorType> in, const Attrs& attrs) {
  const TensorType& x = in[0];
  check_floating(op, x, "input");
  int64_t ndim = attr_int(attrs, "ndim");
  if (ndim < 1 || ndim > static_cast<int64_t>(x.shape.size()))
    EMBER_OP_ERROR(Value, op, "ndim must be in [1, ", x.shape.size(), "] for input ", x.str(), ", got ", ndim);
  if (attr_float(attrs, "eps") < 0) EMBER_OP_ERROR(Value, op, "eps must be >= 0");
  Shape normalized(x.shape.end() - ndim, x.shape.end());
  for (size_t i = 1; i < in.size(); ++i) check_param(op, x, in[i], normalized, i == 1 ? "weight" : "bias");
  return {x.dtype, x.shape};
}

TensorType infer_batch_norm(const OpInfo& op, std::span<const TensorType> in, const Attrs& attrs) {
  const TensorType& x = in[0];
  check_floating(op, x, "input");
  if (x.shape.size() < 2) EMBER_OP_ERROR(Value, op, "input must be [N, C, ...], got ", x.str());
  if (attr_float(attrs, "eps") < 0) EMBER_OP_ERROR(Value, op, "eps must be >= 0");
  const char* names[] = {"", "running_mean", "running_var", "weight", "bias"};
  for (size_t i = 1; i < 5; ++i) check_param(op, x, in[i], {x.shape[1]}, names[i]);
  return {x.dtype, x.shape};
}

// (out, mean, rstd); mean and rstd keep the normalised dims as size 1, as aten.native_layer_norm.
std::vector<TensorType> infer_native_layer_norm(const OpInfo& op, std::span<const TensorType> in,
                                                const Attrs& attrs) {
  TensorType out = infer_norm(op, in, attrs);
  TensorType stat = out;
  size_t first = out.shape.size() - attr_int(attrs, "ndim");
  for (size_t i = first; i < out.shape.size(); ++i) stat.shape[i] = Dim(1);
  return {out, stat, stat};
}

// (out, batch mean, batch invstd, new running_mean, new running_var) from
// (x, weight, bias, running_mean, running_var), the inputs in aten.native_batch_norm's order.
std::vector<TensorType> infer_native_batch_norm(const OpInfo& op, std::span<const TensorType> in,
                                                const Attrs& attrs) {
  const TensorType& x = in[0];
  check_floating(op, x, "input");
  if (x.shape.size() < 2) EMBER_OP_ERROR(Value, op, "input must be [N, C, ...], got ", x.str());
  if (attr_float(attrs, "eps") < 0) EMBER_OP_ERROR(Value, op, "eps must be >= 0");
  const char* names[] = {"", "weight", "bias", "running_mean", "running_var"};
  for (size_t i = 1; i < 5; ++i) check_param(op, x, in[i], {x.shape[1]}, names[i]);
  Dim count = x.shape[0];
  for (size_t d = 2; d < x.shape.size(); ++d) count = count * x.shape[d];
  // The unbiased variance needs two values (F.batch_norm checks the same in training).
  if (count.is_static() && count.value() < 2)
    EMBER_OP_ERROR(Value, op, "expected more than 1 value per channel in training, got input ",
                   x.str());
  TensorType channel{x.dtype, {x.shape[1]}};
  return {x, channel, channel, channel, channel};
}

TensorType infer_attention(const OpInfo& op, std::span<const TensorType> in, const Attrs&) {
  const TensorType &q = in[0], &k = in[1], &v = in[2];
  check_floating(op, q, "query");
  for (const TensorType* t : {&k, &v}) {
    if (t->dtype != q.dtype)
      EMBER_OP_ERROR(Type, op, "query, key and value must share a dtype, got ", q.str(), ", ", k.str(), ", ", v.str());
    if (t->shape.size() < 2 || t->shape.size() != q.shape.size())
      EMBER_OP_ERROR(Value, op, "query, key and value must have the same rank >= 2, got ", q.str(), ", ",
                     k.str(), ", ", v.str());
  }
  size_t r = q.shape.size();
  require_equal_dims(op.name, q.shape[r - 1], k.shape[r - 1],
                     detail::concat("query ", q.str(), " and key ", k.str(), " differ in the last dim"));
  require_equal_dims(op.name, k.shape[r - 2], v.shape[r - 2],
                     detail::concat("key ", k.str(), " and value ", v.str(), " differ in sequence length"));
  Shape batch = broadcast_shapes(op.name, Shape(q.shape.begin(), q.shape.end() - 2), Shape(k.shape.begin(), k.shape.end() - 2));
  batch = broadcast_shapes(op.name, batch, Shape(v.shape.begin(), v.shape.end() - 2));
  if (in.size() == 4) {
    const TensorType& mask = in[3];
    if (mask.dtype != DType::Bool && mask.dtype != q.dtype)
      EMBER_OP_ERROR(Type, op, "mask must be bool or ", dtype_name(q.dtype), ", got ", dtype_name(mask.dtype));
    Shape scores = batch;
    scores.push_back(q.shape[r - 2]);
    scores.push_back(k.shape[r - 2]);
    if (broadcast_shapes(op.name, scores, mask.shape) != scores)
      EMBER_OP_ERROR(Value, op, "mask ", mask.str(), " does not broadcast to the scores ", shape_str(scores));
  }
  batch.push_back(q.shape[r - 2]);
  batch.push_back(v.shape[r - 1]);
  return {q.dtype, batch};
}

}  // namespace

void register_composites(Table& table) {
  auto at = [&](Op op) -> OpInfo& { return table[static_cast<size_t>(op)]; };
  for (Op op : {Op::Softmax, Op::LogSoftmax}) {
    at(op).infer = infer_softmax;
    at(op).attrs = {{"axis", AttrType::Int, std::nullopt}};
  }
  at(Op::Softmax).doc = "exp(x - max) / sum(exp(x - max)) along `axis`";
  at(Op::LogSoftmax).doc = "x - logsumexp(x) along `axis`";
  at(Op::LayerNorm).doc = "(x - mean) / sqrt(var + eps) * weight + bias over the last `ndim` dims (biased var)";
  at(Op::LayerNorm).infer = infer_norm;
  at(Op::LayerNorm).attrs = {{"ndim", AttrType::Int, Attr(int64_t{1})}, {"eps", AttrType::Float, Attr(1e-5)}};
  at(Op::RmsNorm).doc = "x / sqrt(mean(x^2) + eps) * weight over the last `ndim` dims";
  at(Op::RmsNorm).infer = infer_norm;
  at(Op::RmsNorm).attrs = {{"ndim", AttrType::Int, Attr(int64_t{1})}, {"eps", AttrType::Float, std::nullopt}};
  at(Op::BatchNorm).doc = "inference batch norm: (x - running_mean) / sqrt(running_var + eps) * weight + bias per channel";
  at(Op::BatchNorm).infer = infer_batch_norm;
  at(Op::BatchNorm).attrs = {{"eps", AttrType::Float, Attr(1e-5)}};
  at(Op::NativeLayerNorm).doc =
      "(layer_norm(x, weight, bias), mean, 1 / sqrt(var + eps)) over the last `ndim` dims; "
      "mean and rstd keep them as size 1";
  at(Op::NativeLayerNorm).infer_multi = infer_native_layer_norm;
  at(Op::NativeLayerNorm).attrs = at(Op::LayerNorm).attrs;
  at(Op::NativeBatchNorm).doc =
      "training batch norm of (x, weight, bias, running_mean, running_var): (out, mean, "
      "1 / sqrt(var + eps), updated running_mean, running_var); var is biased, the running var "
      "update unbiased";
  at(Op::NativeBatchNorm).infer_multi = infer_native_batch_norm;
  at(Op::NativeBatchNorm).attrs = {{"momentum", AttrType::Float, Attr(0.1)},
                                   {"eps", AttrType::Float, Attr(1e-5)}};
  at(Op::ScaledDotProductAttention).doc =
      "softmax(q k^T * scale + mask) v; mask is bool (true attends) or additive; scale 0 means 1/sqrt(E); "
      "a query row that attends to nothing is 0 (as PyTorch's safe softmax), NaN if one of its scores is";
  at(Op::ScaledDotProductAttention).infer = infer_attention;
  at(Op::ScaledDotProductAttention).attrs = {{"causal", AttrType::Bool, Attr(false)},
                                             {"scale", AttrType::Float, Attr(0.0)}};
  at(Op::Softmax).decompose = decompose_softmax;
  at(Op::LogSoftmax).decompose = decompose_log_softmax;
  at(Op::LayerNorm).decompose = decompose_layer_norm;
  at(Op::RmsNorm).decompose = decompose_rms_norm;
  at(Op::BatchNorm).decompose = decompose_batch_norm;
  at(Op::NativeLayerNorm).decompose = decompose_native_layer_norm;
  at(Op::NativeBatchNorm).decompose = decompose_native_batch_norm;
  at(Op::ScaledDotProductAttention).decompose = decompose_attention;
}

}  // namespace ember::ops

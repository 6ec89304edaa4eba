// Creation ops: full, arange and counter-based random numbers (each element depends only on the
// seed and its index, so results do not depend on how a kernel is split).
#include <cmath>

#include "ir/ops/registry.h"

namespace ember::ops {

namespace {

Shape checked_shape(const OpInfo& op, const Attrs& attrs) {
  const Shape& s = attr_shape(attrs, "shape");
  for (const Dim& d : s)
    if (d.is_static() && d.value() < 0) EMBER_OP_ERROR(Value, op, "negative dim in shape ", shape_str(s));
  return s;
}

TensorType infer_full(const OpInfo& op, std::span<const TensorType>, const Attrs& attrs) {
  return {attr_dtype(attrs, "dtype"), checked_shape(op, attrs)};
}

TensorType infer_random(const OpInfo& op, std::span<const TensorType>, const Attrs& attrs) {
  DType dtype = attr_dtype(attrs, "dtype");
  if (!is_floating(dtype)) EMBER_OP_ERROR(Type, op, "dtype must be floating point, got ", dtype_name(dtype));
  if (op.op == Op::Uniform && !(attr_float(attrs, "low") <= attr_float(attrs, "high")))
    EMBER_OP_ERROR(Value, op, "low must be <= high");
  if (op.op == Op::Normal && !(attr_float(attrs, "std") >= 0)) EMBER_OP_ERROR(Value, op, "std must be >= 0");
  return {dtype, checked_shape(op, attrs)};
}

TensorType infer_arange(const OpInfo& op, std::span<const TensorType>, const Attrs& attrs) {
  double start = attr_float(attrs, "start"), end = attr_float(attrs, "end"), step = attr_float(attrs, "step");
  if (!std::isfinite(start) || !std::isfinite(end) || !std::isfinite(step))
    EMBER_OP_ERROR(Value, op, "start, end and step must be finite");
  if (step == 0) EMBER_OP_ERROR(Value, op, "step must be nonzero");
  if ((end - start) * step < 0)
    EMBER_OP_ERROR(Value, op, "upper bound and lower bound inconsistent with step sign (start ", start,
                   ", end ", end, ", step ", step, ")");
  double n = std::ceil((end - start) / step);
  // 2^63 is the first double past int64; converting it or more would be undefined.
  if (!(n < 0x1p63))
    EMBER_OP_ERROR(Value, op, "[", start, ", ", end, ") by ", step, " has ", n, " elements, more than int64 holds");
  return {attr_dtype(attrs, "dtype"), {Dim(static_cast<int64_t>(n))}};
}

}  // namespace

void register_creation(Table& table) {
  auto at = [&](Op op) -> OpInfo& { return table[static_cast<size_t>(op)]; };
  at(Op::Full).doc = "a tensor of `shape` filled with `value`";
  at(Op::Full).infer = infer_full;
  at(Op::Full).attrs = {{"shape", AttrType::Shape, std::nullopt},
                        {"value", AttrType::Float, std::nullopt},
                        {"dtype", AttrType::DType, Attr(DType::Float32)}};
  at(Op::Arange).doc = "start, start + step, ... up to (excluding) end";
  at(Op::Arange).infer = infer_arange;
  at(Op::Arange).attrs = {{"start", AttrType::Float, Attr(0.0)},
                          {"end", AttrType::Float, std::nullopt},
                          {"step", AttrType::Float, Attr(1.0)},
                          {"dtype", AttrType::DType, Attr(DType::Int64)}};
  at(Op::Uniform).doc = "uniform random numbers in [low, high) from an explicit seed";
  at(Op::Uniform).infer = infer_random;
  at(Op::Uniform).attrs = {{"shape", AttrType::Shape, std::nullopt},
                           {"low", AttrType::Float, Attr(0.0)},
                           {"high", AttrType::Float, Attr(1.0)},
                           {"seed", AttrType::Int, std::nullopt},
                           {"dtype", AttrType::DType, Attr(DType::Float32)}};
  at(Op::Normal).doc = "normal random numbers N(mean, std^2) from an explicit seed";
  at(Op::Normal).infer = infer_random;
  at(Op::Normal).attrs = {{"shape", AttrType::Shape, std::nullopt},
                          {"mean", AttrType::Float, Attr(0.0)},
                          {"std", AttrType::Float, Attr(1.0)},
                          {"seed", AttrType::Int, std::nullopt},
                          {"dtype", AttrType::DType, Attr(DType::Float32)}};
  // Graph structure: the type of an input or constant is set when it is built.
  at(Op::Input).doc = "a graph input; `index` is its position";
  at(Op::Input).attrs = {{"index", AttrType::Int, std::nullopt}};
  at(Op::Input).infer = [](const OpInfo& op, std::span<const TensorType>, const Attrs&) -> TensorType {
    EMBER_OP_ERROR(Internal, op, "an input's type is given, not inferred");
  };
  at(Op::Constant).doc = "a literal tensor; `value` holds its elements in row-major order";
  at(Op::Constant).attrs = {{"value", AttrType::Literal, std::nullopt}};
  at(Op::Constant).infer = at(Op::Input).infer;
}

}  // namespace ember::ops

// Helpers shared by the decompositions: the compute dtype, reduction axes, the two-pass moments
// and the stable softmax.
#include <algorithm>

#include "ir/ops/decompositions.h"

namespace ember::ops {

DType compute_dtype(DType t) { return t == DType::Float64 ? t : DType::Float32; }

std::vector<TensorType> output_types(Op op, const Values& in, const Attrs& attrs) {
  std::vector<TensorType> types;
  for (const Value& v : in) types.push_back(v.type());
  Attrs filled = attrs;
  return infer_types(op, types, filled);
}

std::vector<int64_t> reduced_axes(std::string_view op, const TensorType& x,
                                  const std::vector<int64_t>& axes) {
  int64_t rank = static_cast<int64_t>(x.shape.size());
  if (rank == 0) return {};  // a 0-d tensor takes axis 0 or -1 and reduces nothing
  std::vector<int64_t> out = normalize_axes(op, axes, rank);
  if (out.empty())
    for (int64_t i = 0; i < rank; ++i) out.push_back(i);
  return out;
}

bool empty_along(const TensorType& x, const std::vector<int64_t>& axes) {
  return std::any_of(axes.begin(), axes.end(), [&](int64_t a) { return x.shape[a] == Dim(0); });
}

// The last element of x along each of `axes`, which stay as size 1 (a slice from -1 has length 1
// for a symbolic dim too).
Value last_along(Builder& b, Value x, const std::vector<int64_t>& axes) {
  for (int64_t axis : axes) x = b.op(Op::Slice, {x}, {{"axis", axis}, {"start", int64_t{-1}}});
  return x;
}

Moments moments(Builder& b, Value xc, const std::vector<int64_t>& axes) {
  Moments m;
  m.count = b.count(xc, axes, xc.type().dtype);
  Value shifted = xc;  // an empty group has no element to shift by, nor a deviation
  if (!empty_along(xc.type(), axes)) shifted = b.sub(xc, last_along(b, xc, axes));
  Value shifted_mean = b.div(b.reduce(Op::Sum, shifted, axes, true), m.count);
  m.centered = b.sub(shifted, shifted_mean);
  m.sum_squares = b.reduce(Op::Sum, b.mul(m.centered, m.centered), axes, true);
  return m;
}

Value mean_of(Builder& b, Value xc, const std::vector<int64_t>& axes, Value count) {
  return b.div(b.reduce(Op::Sum, xc, axes, true), count);
}

Value softmax_along(Builder& b, Value xc, int64_t axis, bool log) {
  const TensorType& t = xc.type();
  int64_t rank = static_cast<int64_t>(t.shape.size());
  std::vector<int64_t> axes;  // none for a 0-d tensor: its max is itself
  if (rank > 0) axes = {normalize_axis("softmax", axis, rank)};
  if (empty_along(t, axes)) return xc;
  // A row of -inf gives -inf - -inf = NaN everywhere, as the direct kernel does.
  Value shifted = b.sub(xc, b.reduce(Op::Max, xc, axes, true));
  Value e = b.unary(Op::Exp, shifted);
  Value s = b.reduce(Op::Sum, e, axes, true);
  return log ? b.sub(shifted, b.unary(Op::Log, s)) : b.div(e, s);
}

}  // namespace ember::ops

#include "ir/builder.h"

namespace ember {

Value Builder::op(Op op, std::vector<Value> inputs, Attrs attrs) {
  return g_.add(op, std::move(inputs), std::move(attrs), before_);
}

std::vector<Value> Builder::op_multi(Op op, std::vector<Value> inputs, Attrs attrs) {
  Node* n = g_.add(op, std::move(inputs), std::move(attrs), before_);
  std::vector<Value> outs;
  for (int i = 0; i < n->num_outputs(); ++i) outs.push_back(n->out(i));
  return outs;
}

Value Builder::scalar(double value, DType dtype) {
  return op(Op::Full, {}, {{"shape", Shape{}}, {"value", value}, {"dtype", dtype}});
}

Value Builder::cast(Value x, DType dtype) {
  if (x.type().dtype == dtype) return x;
  return op(Op::Cast, {x}, {{"dtype", dtype}});
}

Value Builder::reshape(Value x, const Shape& shape) {
  if (x.type().shape == shape) return x;
  return op(Op::Reshape, {x}, {{"shape", shape}});
}

Value Builder::as_type(Value x, const TensorType& type) {
  return reshape(cast(x, type.dtype), type.shape);
}

Value Builder::reduce(Op op_, Value x, const std::vector<int64_t>& axes, bool keepdim) {
  return op(op_, {x}, {{"axes", axes}, {"keepdim", keepdim}});
}

std::optional<int64_t> Builder::static_count(const TensorType& x,
                                             const std::vector<int64_t>& axes) {
  int64_t n = 1;
  for (int64_t a : axes) {
    if (!x.shape[a].is_static()) return std::nullopt;
    n *= x.shape[a].value();
  }
  return n;
}

Value Builder::count(Value x, const std::vector<int64_t>& axes, DType dtype) {
  const TensorType& t = x.type();
  if (auto n = static_count(t, axes)) return scalar(static_cast<double>(*n), dtype);
  Shape dims;
  for (int64_t a : axes) dims.push_back(t.shape[a]);
  Value ones = op(Op::Full, {}, {{"shape", dims}, {"value", 1.0}, {"dtype", DType::Int64}});
  return cast(reduce(Op::Sum, ones, {}, false), dtype);
}

}  // namespace ember

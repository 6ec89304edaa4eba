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
  // A symbolic dim's size exists only at run time: the int64 sum of a one broadcast along it (a
  // view: no memory), dim by dim, so that the work is the dims' sum, not their product.
  Value one = op(Op::Full, {}, {{"shape", Shape{Dim(1)}}, {"value", 1.0}, {"dtype", DType::Int64}});
  int64_t known = 1;
  Value n;
  for (int64_t a : axes) {
    if (t.shape[a].is_static()) {
      known *= t.shape[a].value();
      continue;
    }
    Value along = reduce(Op::Sum, op(Op::Expand, {one}, {{"shape", Shape{t.shape[a]}}}), {}, false);
    n = n.node ? mul(n, along) : along;
  }
  if (known != 1) n = mul(n, scalar(static_cast<double>(known), DType::Int64));
  return cast(n, dtype);
}

}  // namespace ember

// Builder: adds nodes to a graph at one place (just before a node, or at the end), with
// shorthands for the ops decompositions use. Every node goes through Graph::add, so inference
// runs (and attribute defaults are filled in) exactly as for any other node.
#pragma once

#include <optional>
#include <vector>

#include "ir/graph.h"

namespace ember {

class Builder {
 public:
  explicit Builder(Graph& g, const Node* before = nullptr) : g_(g), before_(before) {}
  Graph& graph() { return g_; }

  // Any single-output op, and any op by its outputs.
  Value op(Op op, std::vector<Value> inputs, Attrs attrs = {});
  std::vector<Value> op_multi(Op op, std::vector<Value> inputs, Attrs attrs = {});

  // A 0-d `full` of `dtype` holding `value`.
  Value scalar(double value, DType dtype);
  // `x` converted to `dtype` (x itself when it has it).
  Value cast(Value x, DType dtype);
  // `x` reshaped to `shape` (x itself when it has it).
  Value reshape(Value x, const Shape& shape);
  // `x` as exactly `type`: cast, then reshaped to the same number of elements.
  Value as_type(Value x, const TensorType& type);

  Value add(Value a, Value b) { return op(Op::Add, {a, b}); }
  Value sub(Value a, Value b) { return op(Op::Sub, {a, b}); }
  Value mul(Value a, Value b) { return op(Op::Mul, {a, b}); }
  Value div(Value a, Value b) { return op(Op::Div, {a, b}); }
  Value unary(Op op_, Value x) { return op(op_, {x}); }
  // A reduction over `axes` (empty: all), as the reduction ops take them.
  Value reduce(Op op_, Value x, const std::vector<int64_t>& axes, bool keepdim);

  // The number of elements in the dims `axes` of x (normalised; none: 1) as a 0-d tensor of
  // `dtype`: a constant when they are static, else the product of int64 sums of a one broadcast
  // along each symbolic dim, converted (a symbolic count exists only at run time).
  Value count(Value x, const std::vector<int64_t>& axes, DType dtype);
  // The same count when it is static.
  static std::optional<int64_t> static_count(const TensorType& x, const std::vector<int64_t>& axes);

 private:
  Graph& g_;
  const Node* before_;
};

}  // namespace ember

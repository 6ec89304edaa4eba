// The op sweep's elementwise semantics: PyTorch's result of every elementwise op, in double.
#include "tests/unit/sweep_elementwise.h"

#include <algorithm>
#include <cmath>

namespace ember::sweep {
namespace {

enum class EwKind { Same, Float, Bool, Cast };

EwKind ew_kind(Op op) {
  switch (op) {
    case Op::Exp:
    case Op::Exp2:
    case Op::Log:
    case Op::Log2:
    case Op::Log1p:
    case Op::Expm1:
    case Op::Sqrt:
    case Op::Rsqrt:
    case Op::Sin:
    case Op::Cos:
    case Op::Tan:
    case Op::Tanh:
    case Op::Sigmoid:
    case Op::Gelu:
    case Op::Silu:
    case Op::Erf:
    case Op::Reciprocal:
    case Op::Div:
      return EwKind::Float;
    case Op::LogicalNot:
    case Op::IsNan:
    case Op::IsInf:
    case Op::Eq:
    case Op::Ne:
    case Op::Lt:
    case Op::Le:
    case Op::Gt:
    case Op::Ge:
    case Op::LogicalAnd:
    case Op::LogicalOr:
    case Op::LogicalXor:
      return EwKind::Bool;
    case Op::Cast:
      return EwKind::Cast;
    default:
      return EwKind::Same;
  }
}

// PyTorch semantics of one element, in double, on operands already converted to the compute dtype.
double ew_ref(Op op, const std::vector<double>& a, bool integer, int variant) {
  double x = a[0], y = a.size() > 1 ? a[1] : 0;
  auto to_i = [](double v) { return static_cast<int64_t>(v); };
  switch (op) {
    case Op::Neg:
      return -x;
    case Op::Abs:
      return std::fabs(x);
    case Op::Exp:
      return std::exp(x);
    case Op::Exp2:
      return std::exp2(x);
    case Op::Log:
      return std::log(x);
    case Op::Log2:
      return std::log2(x);
    case Op::Log1p:
      return std::log1p(x);
    case Op::Expm1:
      return std::expm1(x);
    case Op::Sqrt:
      return std::sqrt(x);
    case Op::Rsqrt:
      return 1.0 / std::sqrt(x);
    case Op::Sin:
      return std::sin(x);
    case Op::Cos:
      return std::cos(x);
    case Op::Tan:
      return std::tan(x);
    case Op::Tanh:
      return std::tanh(x);
    case Op::Sigmoid:
      return 1.0 / (1.0 + std::exp(-x));
    case Op::Relu:
      return std::isnan(x) ? x : std::max(x, 0.0);
    case Op::Gelu:
      if (variant)
        return 0.5 * x *
               (1 + std::tanh(std::sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
      return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case Op::Silu:
      return x / (1.0 + std::exp(-x));
    case Op::Erf:
      return std::erf(x);
    case Op::Floor:
      return std::floor(x);
    case Op::Ceil:
      return std::ceil(x);
    case Op::Round:
      return std::nearbyint(x);  // half to even in the default rounding mode
    case Op::Trunc:
      return std::trunc(x);
    case Op::Sign:
      return std::isnan(x) ? x : (x > 0) - (x < 0);
    case Op::Reciprocal:
      return 1.0 / x;
    case Op::LogicalNot:
      return x == 0;
    case Op::IsNan:
      return std::isnan(x);
    case Op::IsInf:
      return std::isinf(x);
    case Op::Cast:
      return x;
    case Op::Add:
      return x + y;
    case Op::Sub:
      return x - y;
    case Op::Mul:
      return x * y;
    case Op::Div:
      return x / y;
    case Op::FloorDivide:
      if (integer) return std::floor(x / y);
      return static_cast<double>(std::floor(static_cast<long double>(x) / y));
    case Op::Remainder: {
      if (integer) return x - y * std::floor(x / y);
      long double q = std::floor(static_cast<long double>(x) / y);
      return static_cast<double>(x - static_cast<long double>(y) * q);
    }
    case Op::Pow:
      return std::pow(x, y);
    case Op::Maximum:
      return std::isnan(x) || std::isnan(y) ? ref::kNaN : std::max(x, y);
    case Op::Minimum:
      return std::isnan(x) || std::isnan(y) ? ref::kNaN : std::min(x, y);
    case Op::Eq:
      return x == y;
    case Op::Ne:
      return x != y;
    case Op::Lt:
      return x < y;
    case Op::Le:
      return x <= y;
    case Op::Gt:
      return x > y;
    case Op::Ge:
      return x >= y;
    case Op::LogicalAnd:
      return x != 0 && y != 0;
    case Op::LogicalOr:
      return x != 0 || y != 0;
    case Op::LogicalXor:
      return (x != 0) != (y != 0);
    case Op::BitwiseAnd:
      return static_cast<double>(to_i(x) & to_i(y));
    case Op::BitwiseOr:
      return static_cast<double>(to_i(x) | to_i(y));
    case Op::BitwiseXor:
      return static_cast<double>(to_i(x) ^ to_i(y));
    case Op::Where:
      return x != 0 ? a[1] : a[2];
    case Op::Clamp: {  // torch.clamp: min(max(x, lo), hi), so lo > hi gives hi
      if (std::isnan(x) || std::isnan(a[1]) || std::isnan(a[2])) return ref::kNaN;
      return std::min(std::max(x, a[1]), a[2]);
    }
    default:
      unlisted(op, "elementwise reference");
  }
}

}  // namespace

int arity(Op op) {
  if (op == Op::Where || op == Op::Clamp) return 3;
  return op >= Op::Add ? 2 : 1;
}

Tensor call_unary(Op op, const Tensor& x, int variant, DType cast_to) {
  switch (op) {
    case Op::Neg:
      return neg(x);
    case Op::Abs:
      return ember::abs(x);
    case Op::Exp:
      return ember::exp(x);
    case Op::Exp2:
      return ember::exp2(x);
    case Op::Log:
      return ember::log(x);
    case Op::Log2:
      return ember::log2(x);
    case Op::Log1p:
      return ember::log1p(x);
    case Op::Expm1:
      return ember::expm1(x);
    case Op::Sqrt:
      return ember::sqrt(x);
    case Op::Rsqrt:
      return rsqrt(x);
    case Op::Sin:
      return ember::sin(x);
    case Op::Cos:
      return ember::cos(x);
    case Op::Tan:
      return ember::tan(x);
    case Op::Tanh:
      return ember::tanh(x);
    case Op::Sigmoid:
      return sigmoid(x);
    case Op::Relu:
      return relu(x);
    case Op::Gelu:
      return gelu(x, variant ? "tanh" : "none");
    case Op::Silu:
      return silu(x);
    case Op::Erf:
      return ember::erf(x);
    case Op::Floor:
      return ember::floor(x);
    case Op::Ceil:
      return ember::ceil(x);
    case Op::Round:
      return ember::round(x);
    case Op::Trunc:
      return ember::trunc(x);
    case Op::Sign:
      return sign(x);
    case Op::Reciprocal:
      return reciprocal(x);
    case Op::LogicalNot:
      return logical_not(x);
    case Op::IsNan:
      return ember::isnan(x);
    case Op::IsInf:
      return ember::isinf(x);
    case Op::Cast:
      return cast(x, cast_to);
    default:
      EMBER_THROW(Internal, "not a unary op");
  }
}

DType scalar_dtype(DType tensor, const Scalar& s) {
  if (s.is_float()) return ref::is_float(tensor) ? tensor : DType::Float32;
  if (s.is_bool()) return tensor;
  return tensor == DType::Bool ? DType::Int64 : tensor;
}

Expected ew_expect(Op op, const std::vector<Ref>& refs, const std::vector<DType>& dts, int variant,
                   DType cast_to) {
  std::vector<ref::Operand> values;
  for (size_t i = op == Op::Where ? 1 : 0; i < refs.size(); ++i)
    values.push_back({dts[i], refs[i].shape.empty()});
  DType promoted = ref::result_type(values);
  EwKind kind = ew_kind(op);
  DType compute = kind == EwKind::Float && !ref::is_float(promoted) ? DType::Float32 : promoted;
  if (op == Op::Cast) compute = dts[0];
  Expected e;
  e.dtype = kind == EwKind::Bool ? DType::Bool : kind == EwKind::Cast ? cast_to : compute;
  Ints shape = refs[0].shape;
  for (const Ref& r : refs) shape = *ref::broadcast(shape, r.shape);
  e.out.shape = shape;
  bool integer = !ref::is_float(compute);
  std::vector<double> args(refs.size());
  for (int64_t i = 0; i < ref::numel(shape); ++i) {
    Ints idx = ref::unravel(i, shape);
    for (size_t k = 0; k < refs.size(); ++k) {
      double v = ref::at_broadcast(refs[k], idx);
      args[k] = (op == Op::Where && k == 0) ? v : ref::cast_value(v, compute);
    }
    e.out.v.push_back(ew_ref(op, args, integer, variant));
  }
  return e;
}

}  // namespace ember::sweep

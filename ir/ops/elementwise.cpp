// Elementwise ops: shape by broadcasting, dtype by promotion, and their scalar semantics, written
// once and shared by the interpreter, constant folding and (later) the code generators.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ir/ops/decompositions.h"
#include "ir/ops/registry.h"

namespace ember::ops {

namespace {

// Integer arithmetic wraps at 64 bits (and then at the dtype's width when stored), never UB.
int64_t wrap(uint64_t v) { return static_cast<int64_t>(v); }
uint64_t u(int64_t v) { return static_cast<uint64_t>(v); }

template <class T>
bool is_nan(T x) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(x);
  return false;
}

template <class T>
T floor_divide(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    // Python semantics, computed as PyTorch's div_floor does to stay exact near integers.
    if (b == 0) return a / b;
    T mod = std::fmod(a, b);
    T div = (a - mod) / b;
    if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
    if (div == 0) return std::copysign(T(0), a / b);
    T floordiv = std::floor(div);
    if (div - floordiv > T(0.5)) floordiv += 1;
    return floordiv;
  } else {
    if (b == 0) EMBER_THROW(Runtime, "[floor_divide] integer division by zero");
    if (b == -1) return wrap(0 - u(a));
    T q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
  }
}

template <class T>
T remainder(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    T m = std::fmod(a, b);
    if (m != 0 && ((b < 0) != (m < 0))) m += b;
    return m;
  } else {
    if (b == 0) EMBER_THROW(Runtime, "[remainder] integer division by zero");
    if (b == -1) return 0;
    T m = a % b;
    if (m != 0 && ((b < 0) != (m < 0))) m += b;
    return m;
  }
}

template <class T>
T power(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::pow(a, b);
  } else {
    if (b < 0) {
      if (a == 1) return 1;
      if (a == -1) return (b % 2 == 0) ? 1 : -1;
      EMBER_THROW(Value, "[pow] integers to negative integer powers are not allowed");
    }
    uint64_t result = 1, base = u(a);
    for (uint64_t e = u(b); e; e >>= 1, base *= base)
      if (e & 1) result *= base;
    return wrap(result);
  }
}

template <class T>
T gelu(T x, int tanh_form) {
  if (tanh_form) {
    const T k = T(0.7978845608028654);  // sqrt(2 / pi)
    return T(0.5) * x * (T(1) + std::tanh(k * (x + T(0.044715) * x * x * x)));
  }
  return T(0.5) * x * (T(1) + std::erf(x * T(0.7071067811865476)));
}

// min(max(x, lo), hi) as PyTorch computes it: when lo > hi every element becomes hi.
template <class T>
T clamp(T x, T lo, T hi) {
  if (is_nan(x)) return x;
  T r = (x < lo || is_nan(lo)) ? lo : x;
  return (r > hi || is_nan(hi)) ? hi : r;
}

template <class T>
T sigmoid(T x) { return T(1) / (T(1) + std::exp(-x)); }

// Builds the per-compute-type function pointers from one generic lambda body over `a` (the
// argument array) and `v` (the variant).
#define EMBER_FNS(expr)                                                           \
  ScalarFns {                                                                     \
    [](const float* a, int v) -> float { (void)v; using T = float; (void)sizeof(T); return (expr); },   \
    [](const double* a, int v) -> double { (void)v; using T = double; (void)sizeof(T); return (expr); }, \
    [](const int64_t* a, int v) -> int64_t { (void)v; using T = int64_t; (void)sizeof(T); return (expr); } \
  }
#define EMBER_FLOAT_FNS(expr)                                                     \
  ScalarFns {                                                                     \
    [](const float* a, int v) -> float { (void)v; using T = float; (void)sizeof(T); return (expr); },   \
    [](const double* a, int v) -> double { (void)v; using T = double; (void)sizeof(T); return (expr); }, \
    nullptr                                                                       \
  }

TensorType infer_elementwise(const OpInfo& op, std::span<const TensorType> in, const Attrs& attrs) {
  if (op.scalar_variant) op.scalar_variant(attrs);  // validates the attribute that selects it
  std::span<const TensorType> values = in;
  if (op.op == Op::Where) {
    if (in[0].dtype != DType::Bool)
      EMBER_OP_ERROR(Type, op, "condition must be bool, got ", dtype_name(in[0].dtype));
    values = in.subspan(1);
  }
  Shape shape = in[0].shape;
  for (size_t i = 1; i < in.size(); ++i) shape = broadcast_shapes(op.name, shape, in[i].shape);
  DType promoted = promoted_dtype(values);
  if (op.integral_only && is_floating(promoted))
    EMBER_OP_ERROR(Type, op, "is only defined on integer and bool tensors, got ", dtype_name(promoted));
  // OpInfo::no_bool (neg, abs, sub): PyTorch refuses a bool operand even where the other
  // promotes it away (True - uint8).
  if (op.no_bool && std::any_of(values.begin(), values.end(), [](const TensorType& t) { return is_bool(t.dtype); }))
    EMBER_OP_ERROR(Type, op, "is not supported on bool tensors, as in PyTorch (for masks: logical_not, logical_xor)");
  if (op.op == Op::Cast) return {attr_dtype(attrs, "dtype"), shape};
  if (op.bool_result) return {DType::Bool, shape};
  if (op.float_result && !is_floating(promoted)) return {kDefaultFloat, shape};
  return {promoted, shape};
}

struct Def {
  Op op;
  const char* doc;
  ScalarFns fns;
  enum Flag { None = 0, FloatResult = 1, BoolResult = 2, IntegralOnly = 4, Commutative = 8, NoBool = 16 };
  int flags = None;
};

}  // namespace

void register_elementwise(Table& table) {
  using D = Def;
  const Def defs[] = {
      {Op::Neg, "-x", EMBER_FNS((std::is_integral_v<T> ? T(wrap(0 - u(int64_t(a[0])))) : -a[0])), D::NoBool},
      {Op::Abs, "|x|", EMBER_FNS((a[0] < 0 ? (std::is_integral_v<T> ? T(wrap(0 - u(int64_t(a[0])))) : -a[0]) : (a[0] == 0 ? T(0) : a[0]))), D::NoBool},
      {Op::Exp, "e^x", EMBER_FLOAT_FNS(std::exp(a[0])), D::FloatResult},
      {Op::Exp2, "2^x", EMBER_FLOAT_FNS(std::exp2(a[0])), D::FloatResult},
      {Op::Log, "natural logarithm", EMBER_FLOAT_FNS(std::log(a[0])), D::FloatResult},
      {Op::Log2, "base-2 logarithm", EMBER_FLOAT_FNS(std::log2(a[0])), D::FloatResult},
      {Op::Log1p, "log(1 + x), accurate near 0", EMBER_FLOAT_FNS(std::log1p(a[0])), D::FloatResult},
      {Op::Expm1, "e^x - 1, accurate near 0", EMBER_FLOAT_FNS(std::expm1(a[0])), D::FloatResult},
      {Op::Sqrt, "square root", EMBER_FLOAT_FNS(std::sqrt(a[0])), D::FloatResult},
      {Op::Rsqrt, "1 / sqrt(x)", EMBER_FLOAT_FNS(T(1) / std::sqrt(a[0])), D::FloatResult},
      {Op::Sin, "sine", EMBER_FLOAT_FNS(std::sin(a[0])), D::FloatResult},
      {Op::Cos, "cosine", EMBER_FLOAT_FNS(std::cos(a[0])), D::FloatResult},
      {Op::Tan, "tangent", EMBER_FLOAT_FNS(std::tan(a[0])), D::FloatResult},
      {Op::Tanh, "hyperbolic tangent", EMBER_FLOAT_FNS(std::tanh(a[0])), D::FloatResult},
      {Op::Sigmoid, "1 / (1 + e^-x)", EMBER_FLOAT_FNS(sigmoid(a[0])), D::FloatResult},
      {Op::Relu, "max(x, 0); NaN stays NaN", EMBER_FNS((a[0] > 0 || is_nan(a[0])) ? a[0] : T(0))},
      {Op::Gelu, "x * Phi(x); approximate=\"tanh\" uses the tanh form", EMBER_FLOAT_FNS(gelu(a[0], v)), D::FloatResult},
      {Op::Silu, "x * sigmoid(x)", EMBER_FLOAT_FNS(a[0] * sigmoid(a[0])), D::FloatResult},
      {Op::Erf, "the error function", EMBER_FLOAT_FNS(std::erf(a[0])), D::FloatResult},
      {Op::Floor, "round toward -inf; integers unchanged", EMBER_FNS((std::is_integral_v<T> ? a[0] : T(std::floor(a[0]))))},
      {Op::Ceil, "round toward +inf; integers unchanged", EMBER_FNS((std::is_integral_v<T> ? a[0] : T(std::ceil(a[0]))))},
      {Op::Round, "round half to even; integers unchanged", EMBER_FNS((std::is_integral_v<T> ? a[0] : T(std::nearbyint(a[0]))))},
      {Op::Trunc, "round toward zero; integers unchanged", EMBER_FNS((std::is_integral_v<T> ? a[0] : T(std::trunc(a[0]))))},
      {Op::Sign, "-1, 0 or 1; NaN stays NaN", EMBER_FNS(is_nan(a[0]) ? a[0] : T((a[0] > 0) - (a[0] < 0)))},
      {Op::Reciprocal, "1 / x", EMBER_FLOAT_FNS(T(1) / a[0]), D::FloatResult},
      {Op::LogicalNot, "x == 0", EMBER_FNS(T(a[0] == 0)), D::BoolResult},
      {Op::IsNan, "x is NaN", EMBER_FNS(T(is_nan(a[0]))), D::BoolResult},
      {Op::IsInf, "x is +inf or -inf", EMBER_FNS(T(std::is_floating_point_v<T> && std::abs(double(a[0])) == std::numeric_limits<double>::infinity())), D::BoolResult},
      {Op::Cast, "convert to `dtype`: float to integer truncates toward zero, saturates at int64, wraps to the width; NaN gives 0", EMBER_FNS(a[0])},
      {Op::Add, "a + b", EMBER_FNS((std::is_integral_v<T> ? T(wrap(u(int64_t(a[0])) + u(int64_t(a[1])))) : a[0] + a[1])), D::Commutative},
      {Op::Sub, "a - b", EMBER_FNS((std::is_integral_v<T> ? T(wrap(u(int64_t(a[0])) - u(int64_t(a[1])))) : a[0] - a[1])), D::NoBool},
      {Op::Mul, "a * b", EMBER_FNS((std::is_integral_v<T> ? T(wrap(u(int64_t(a[0])) * u(int64_t(a[1])))) : a[0] * a[1])), D::Commutative},
      {Op::Div, "true division a / b", EMBER_FLOAT_FNS(a[0] / a[1]), D::FloatResult},
      {Op::FloorDivide, "floor(a / b), as Python's //", EMBER_FNS(floor_divide(a[0], a[1]))},
      {Op::Remainder, "a - floor(a / b) * b: the sign of b, as Python's %", EMBER_FNS(remainder(a[0], a[1]))},
      {Op::Pow, "a ^ b", EMBER_FNS(power(a[0], a[1]))},
      {Op::Maximum, "the larger of a and b; NaN if either is NaN", EMBER_FNS((is_nan(a[0]) || a[0] > a[1]) ? a[0] : a[1]), D::Commutative},
      {Op::Minimum, "the smaller of a and b; NaN if either is NaN", EMBER_FNS((is_nan(a[0]) || a[0] < a[1]) ? a[0] : a[1]), D::Commutative},
      {Op::Eq, "a == b", EMBER_FNS(T(a[0] == a[1])), D::BoolResult | D::Commutative},
      {Op::Ne, "a != b", EMBER_FNS(T(a[0] != a[1])), D::BoolResult | D::Commutative},
      {Op::Lt, "a < b", EMBER_FNS(T(a[0] < a[1])), D::BoolResult},
      {Op::Le, "a <= b", EMBER_FNS(T(a[0] <= a[1])), D::BoolResult},
      {Op::Gt, "a > b", EMBER_FNS(T(a[0] > a[1])), D::BoolResult},
      {Op::Ge, "a >= b", EMBER_FNS(T(a[0] >= a[1])), D::BoolResult},
      {Op::LogicalAnd, "a != 0 and b != 0", EMBER_FNS(T(a[0] != 0 && a[1] != 0)), D::BoolResult | D::Commutative},
      {Op::LogicalOr, "a != 0 or b != 0", EMBER_FNS(T(a[0] != 0 || a[1] != 0)), D::BoolResult | D::Commutative},
      {Op::LogicalXor, "(a != 0) != (b != 0)", EMBER_FNS(T((a[0] != 0) != (a[1] != 0))), D::BoolResult | D::Commutative},
      {Op::BitwiseAnd, "a & b (integers and bool)", EMBER_FNS(T(int64_t(a[0]) & int64_t(a[1]))), D::IntegralOnly | D::Commutative},
      {Op::BitwiseOr, "a | b (integers and bool)", EMBER_FNS(T(int64_t(a[0]) | int64_t(a[1]))), D::IntegralOnly | D::Commutative},
      {Op::BitwiseXor, "a ^ b (integers and bool)", EMBER_FNS(T(int64_t(a[0]) ^ int64_t(a[1]))), D::IntegralOnly | D::Commutative},
      {Op::Where, "cond ? a : b; cond must be bool", EMBER_FNS(a[0] != 0 ? a[1] : a[2])},
      {Op::Clamp, "min(max(x, lo), hi): hi wins when lo > hi; NaN stays NaN", EMBER_FNS(clamp(a[0], a[1], a[2]))},
  };
  for (const Def& d : defs) {
    OpInfo& info = table[static_cast<size_t>(d.op)];
    info.doc = d.doc;
    info.scalar = d.fns;
    info.infer = infer_elementwise;
    info.float_result = d.flags & D::FloatResult;
    info.bool_result = d.flags & D::BoolResult;
    info.integral_only = d.flags & D::IntegralOnly;
    info.commutative = d.flags & D::Commutative;
    info.no_bool = d.flags & D::NoBool;
  }
  table[static_cast<size_t>(Op::Cast)].attrs = {{"dtype", AttrType::DType, std::nullopt}};
  OpInfo& gelu_info = table[static_cast<size_t>(Op::Gelu)];
  gelu_info.attrs = {{"approximate", AttrType::String, Attr(std::string("none"))}};
  gelu_info.scalar_variant = [](const Attrs& attrs) {
    const std::string& form = attr_string(attrs, "approximate");
    if (form != "none" && form != "tanh")
      EMBER_THROW(Value, "[gelu] approximate must be \"none\" or \"tanh\", got \"", form, "\"");
    return form == "tanh" ? 1 : 0;
  };
  // Composite elementwise ops: code generators may lower them through these.
  gelu_info.decompose = decompose_gelu;
  table[static_cast<size_t>(Op::Silu)].decompose = decompose_silu;
}

}  // namespace ember::ops

namespace ember {

DType elementwise_compute_dtype(Op op, std::span<const TensorType> inputs, DType out) {
  const OpInfo& info = op_info(op);
  if (op == Op::Cast) return inputs[0].dtype;
  if (info.float_result) return out;
  return promoted_dtype(op == Op::Where ? inputs.subspan(1) : inputs);
}

int scalar_variant(Op op, const Attrs& attrs) {
  const OpInfo& info = op_info(op);
  return info.scalar_variant ? info.scalar_variant(attrs) : 0;
}

}  // namespace ember

// The public op functions: each builds its attributes and goes through apply(), which records a
// node inside a trace or runs the interpreter eagerly.
#include "frontend/ops.h"

#include <cstring>
#include <limits>

#include "frontend/trace.h"
#include "ir/error.h"
#include "runtime/element.h"

namespace ember {

namespace {

Shape dims_of(const SymShape& s) {
  Shape out;
  for (const SymInt& d : s) out.push_back(d.dim());
  return out;
}

using Ints = std::vector<int64_t>;

// The dtype a Python-style number takes next to a tensor of dtype `t` (PyTorch's rules for
// wrapped scalars: they never widen a tensor of their own category).
DType scalar_dtype(DType t, const Scalar& s) {
  if (s.is_float()) return is_floating(t) ? t : kDefaultFloat;
  if (s.is_bool()) return t;
  return is_bool(t) ? DType::Int64 : t;
}

Tensor scalar_like(const Tensor& like, const Scalar& s) { return full({}, s, scalar_dtype(like.dtype(), s)); }

// The extreme values of a dtype, as doubles that store back exactly (int64's saturate).
double lowest_value(DType t) {
  switch (t) {
    case DType::Bool: case DType::UInt8: return 0;
    case DType::Int8: return -128;
    case DType::Int16: return -32768;
    case DType::Int32: return -2147483648.0;
    case DType::Int64: return -9223372036854775808.0;
    default: return -std::numeric_limits<double>::infinity();
  }
}
double highest_value(DType t) {
  switch (t) {
    case DType::Bool: return 1;
    case DType::UInt8: return 255;
    case DType::Int8: return 127;
    case DType::Int16: return 32767;
    case DType::Int32: return 2147483647.0;
    case DType::Int64: return 9223372036854775807.0;  // rounds up to 2^63, saturates to INT64_MAX
    default: return std::numeric_limits<double>::infinity();
  }
}

Tensor unary(Op op, const Tensor& x, Attrs attrs = {}) { return apply(op, {x}, std::move(attrs)); }

Tensor reduction(Op op, const Tensor& x, Ints axes, bool keepdim, Attrs extra = {}) {
  extra["axes"] = std::move(axes);
  extra["keepdim"] = keepdim;
  return apply(op, {x}, std::move(extra));
}

}  // namespace

// ---- creation

Tensor from_vector(const std::vector<double>& values, SymShape shape, DType dtype) {
  Ints dims;
  for (const SymInt& d : shape) dims.push_back(d);
  Array a = Array::empty(dtype, dims);
  if (static_cast<int64_t>(values.size()) != a.numel())
    EMBER_THROW(Value, "[from_vector] ", values.size(), " values do not fill shape ", shape_str(to_shape(dims)));
  size_t size = itemsize(dtype);
  for (size_t i = 0; i < values.size(); ++i)
    element::store<double>(static_cast<char*>(a.data()) + i * size, dtype, values[i]);
  return Tensor(a);
}

Tensor scalar_tensor(Scalar value, std::optional<DType> dtype) { return full({}, value, dtype); }

Tensor full(SymShape shape, Scalar value, std::optional<DType> dtype) {
  DType t = dtype.value_or(value.is_float() ? kDefaultFloat : value.is_bool() ? DType::Bool : DType::Int64);
  return apply(Op::Full, {}, {{"shape", dims_of(shape)}, {"value", value.to_double()}, {"dtype", t}});
}

Tensor zeros(SymShape shape, DType dtype) { return full(std::move(shape), 0.0, dtype); }
Tensor ones(SymShape shape, DType dtype) { return full(std::move(shape), 1.0, dtype); }

Tensor arange(Scalar end) { return arange(0, end, 1); }

Tensor arange(Scalar start, Scalar end, Scalar step, std::optional<DType> dtype) {
  bool any_float = start.is_float() || end.is_float() || step.is_float();
  DType t = dtype.value_or(any_float ? kDefaultFloat : DType::Int64);
  return apply(Op::Arange, {}, {{"start", start.to_double()}, {"end", end.to_double()}, {"step", step.to_double()}, {"dtype", t}});
}

Tensor uniform(SymShape shape, int64_t seed, double low, double high, DType dtype) {
  return apply(Op::Uniform, {}, {{"shape", dims_of(shape)}, {"seed", seed}, {"low", low}, {"high", high}, {"dtype", dtype}});
}

Tensor normal(SymShape shape, int64_t seed, double mean, double std, DType dtype) {
  return apply(Op::Normal, {}, {{"shape", dims_of(shape)}, {"seed", seed}, {"mean", mean}, {"std", std}, {"dtype", dtype}});
}

// ---- elementwise

#define EMBER_UNARY(name, op) \
  Tensor name(const Tensor& x) { return unary(Op::op, x); }
EMBER_UNARY(neg, Neg)
EMBER_UNARY(abs, Abs)
EMBER_UNARY(exp, Exp)
EMBER_UNARY(exp2, Exp2)
EMBER_UNARY(log, Log)
EMBER_UNARY(log2, Log2)
EMBER_UNARY(log1p, Log1p)
EMBER_UNARY(expm1, Expm1)
EMBER_UNARY(sqrt, Sqrt)
EMBER_UNARY(rsqrt, Rsqrt)
EMBER_UNARY(sin, Sin)
EMBER_UNARY(cos, Cos)
EMBER_UNARY(tan, Tan)
EMBER_UNARY(tanh, Tanh)
EMBER_UNARY(sigmoid, Sigmoid)
EMBER_UNARY(relu, Relu)
EMBER_UNARY(silu, Silu)
EMBER_UNARY(erf, Erf)
EMBER_UNARY(floor, Floor)
EMBER_UNARY(ceil, Ceil)
EMBER_UNARY(round, Round)
EMBER_UNARY(trunc, Trunc)
EMBER_UNARY(sign, Sign)
EMBER_UNARY(reciprocal, Reciprocal)
EMBER_UNARY(logical_not, LogicalNot)
EMBER_UNARY(isnan, IsNan)
EMBER_UNARY(isinf, IsInf)
#undef EMBER_UNARY

Tensor gelu(const Tensor& x, const std::string& approximate) {
  return unary(Op::Gelu, x, {{"approximate", approximate}});
}

Tensor cast(const Tensor& x, DType dtype) { return unary(Op::Cast, x, {{"dtype", dtype}}); }

#define EMBER_BINARY(name, op)                                                               \
  Tensor name(const Tensor& a, const Tensor& b) { return apply(Op::op, {a, b}); }            \
  Tensor name(const Tensor& a, Scalar b) { return apply(Op::op, {a, scalar_like(a, b)}); }   \
  Tensor name(Scalar a, const Tensor& b) { return apply(Op::op, {scalar_like(b, a), b}); }
EMBER_BINARY(add, Add)
EMBER_BINARY(sub, Sub)
EMBER_BINARY(mul, Mul)
EMBER_BINARY(div, Div)
EMBER_BINARY(floor_divide, FloorDivide)
EMBER_BINARY(remainder, Remainder)
EMBER_BINARY(pow, Pow)
EMBER_BINARY(maximum, Maximum)
EMBER_BINARY(minimum, Minimum)
EMBER_BINARY(eq, Eq)
EMBER_BINARY(ne, Ne)
EMBER_BINARY(lt, Lt)
EMBER_BINARY(le, Le)
EMBER_BINARY(gt, Gt)
EMBER_BINARY(ge, Ge)
EMBER_BINARY(logical_and, LogicalAnd)
EMBER_BINARY(logical_or, LogicalOr)
EMBER_BINARY(logical_xor, LogicalXor)
EMBER_BINARY(bitwise_and, BitwiseAnd)
EMBER_BINARY(bitwise_or, BitwiseOr)
EMBER_BINARY(bitwise_xor, BitwiseXor)
#undef EMBER_BINARY

Tensor where(const Tensor& c, const Tensor& a, const Tensor& b) { return apply(Op::Where, {c, a, b}); }
Tensor where(const Tensor& c, const Tensor& a, Scalar b) { return apply(Op::Where, {c, a, scalar_like(a, b)}); }
Tensor where(const Tensor& c, Scalar a, const Tensor& b) { return apply(Op::Where, {c, scalar_like(b, a), b}); }

Tensor clamp(const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi) {
  if (!lo && !hi) EMBER_THROW(Value, "[clamp] at least one of min and max must be given");
  // A missing bound is the widest value of the type, so it never changes x.
  auto bound = [&](const std::optional<Scalar>& b, bool low) -> Tensor {
    if (b) return scalar_like(x, *b);
    return full({}, low ? lowest_value(x.dtype()) : highest_value(x.dtype()), x.dtype());
  };
  return apply(Op::Clamp, {x, bound(lo, true), bound(hi, false)});
}

Tensor clamp(const Tensor& x, const Tensor& lo, const Tensor& hi) { return apply(Op::Clamp, {x, lo, hi}); }

Tensor operator-(const Tensor& x) { return neg(x); }
#define EMBER_OPERATOR(sym, fn)                                                   \
  Tensor operator sym(const Tensor& a, const Tensor& b) { return fn(a, b); }      \
  Tensor operator sym(const Tensor& a, Scalar b) { return fn(a, b); }             \
  Tensor operator sym(Scalar a, const Tensor& b) { return fn(a, b); }
EMBER_OPERATOR(+, add)
EMBER_OPERATOR(-, sub)
EMBER_OPERATOR(*, mul)
EMBER_OPERATOR(/, div)
EMBER_OPERATOR(<, lt)
EMBER_OPERATOR(<=, le)
EMBER_OPERATOR(>, gt)
EMBER_OPERATOR(>=, ge)
EMBER_OPERATOR(==, eq)
EMBER_OPERATOR(!=, ne)
#undef EMBER_OPERATOR

// ---- reductions

Tensor sum(const Tensor& x, Ints axes, bool keepdim) { return reduction(Op::Sum, x, std::move(axes), keepdim); }
Tensor mean(const Tensor& x, Ints axes, bool keepdim) { return reduction(Op::Mean, x, std::move(axes), keepdim); }
Tensor prod(const Tensor& x, Ints axes, bool keepdim) { return reduction(Op::Prod, x, std::move(axes), keepdim); }
Tensor max(const Tensor& x, Ints axes, bool keepdim) { return reduction(Op::Max, x, std::move(axes), keepdim); }
Tensor min(const Tensor& x, Ints axes, bool keepdim) { return reduction(Op::Min, x, std::move(axes), keepdim); }
Tensor argmax(const Tensor& x, Ints axes, bool keepdim) { return reduction(Op::ArgMax, x, std::move(axes), keepdim); }
Tensor argmin(const Tensor& x, Ints axes, bool keepdim) { return reduction(Op::ArgMin, x, std::move(axes), keepdim); }
Tensor var(const Tensor& x, Ints axes, double correction, bool keepdim) {
  return reduction(Op::Var, x, std::move(axes), keepdim, {{"correction", correction}});
}
Tensor std(const Tensor& x, Ints axes, double correction, bool keepdim) {
  return reduction(Op::Std, x, std::move(axes), keepdim, {{"correction", correction}});
}
Tensor logsumexp(const Tensor& x, Ints axes, bool keepdim) { return reduction(Op::LogSumExp, x, std::move(axes), keepdim); }

// ---- contractions and pools

Tensor matmul(const Tensor& a, const Tensor& b) { return apply(Op::MatMul, {a, b}); }

Tensor linear(const Tensor& x, const Tensor& w, const std::optional<Tensor>& b) {
  return b ? apply(Op::Linear, {x, w, *b}) : apply(Op::Linear, {x, w});
}

namespace {

Attrs conv_attrs(Ints stride, Ints padding, Ints dilation, int64_t groups) {
  return {{"stride", stride}, {"padding", padding}, {"dilation", dilation}, {"groups", groups}};
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& w, const std::optional<Tensor>& b, Ints stride, Ints padding,
              Ints dilation, int64_t groups) {
  Attrs attrs = conv_attrs(stride, padding, dilation, groups);
  return b ? apply(Op::Conv2d, {x, w, *b}, attrs) : apply(Op::Conv2d, {x, w}, attrs);
}

Tensor conv2d_input_grad(const Tensor& grad_y, const Tensor& w, const Tensor& x, Ints stride, Ints padding,
                         Ints dilation, int64_t groups) {
  return apply(Op::Conv2dInputGrad, {grad_y, w, x}, conv_attrs(stride, padding, dilation, groups));
}

Tensor conv2d_weight_grad(const Tensor& grad_y, const Tensor& x, const Tensor& w, Ints stride, Ints padding,
                          Ints dilation, int64_t groups) {
  return apply(Op::Conv2dWeightGrad, {grad_y, x, w}, conv_attrs(stride, padding, dilation, groups));
}

Tensor max_pool2d(const Tensor& x, Ints kernel, Ints stride, Ints padding, Ints dilation, bool ceil_mode) {
  return apply(Op::MaxPool2d, {x}, {{"kernel", kernel}, {"stride", stride}, {"padding", padding},
                                    {"dilation", dilation}, {"ceil_mode", ceil_mode}});
}

Tensor avg_pool2d(const Tensor& x, Ints kernel, Ints stride, Ints padding, bool ceil_mode, bool count_include_pad) {
  return apply(Op::AvgPool2d, {x}, {{"kernel", kernel}, {"stride", stride}, {"padding", padding},
                                    {"ceil_mode", ceil_mode}, {"count_include_pad", count_include_pad}});
}

Tensor adaptive_avg_pool2d(const Tensor& x, Ints output_size) {
  return apply(Op::AdaptiveAvgPool2d, {x}, {{"output_size", output_size}});
}

// ---- views and movement

Tensor reshape(const Tensor& x, SymShape shape) { return apply(Op::Reshape, {x}, {{"shape", dims_of(shape)}}); }
Tensor permute(const Tensor& x, Ints dims) { return apply(Op::Permute, {x}, {{"dims", dims}}); }
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1) { return apply(Op::Transpose, {x}, {{"dim0", d0}, {"dim1", d1}}); }
Tensor expand(const Tensor& x, SymShape shape) { return apply(Op::Expand, {x}, {{"shape", dims_of(shape)}}); }
Tensor slice(const Tensor& x, int64_t axis, int64_t start, int64_t end, int64_t step) {
  return apply(Op::Slice, {x}, {{"axis", axis}, {"start", start}, {"end", end}, {"step", step}});
}
Tensor squeeze(const Tensor& x, Ints axes) { return apply(Op::Squeeze, {x}, {{"axes", axes}}); }
Tensor unsqueeze(const Tensor& x, int64_t axis) { return apply(Op::Unsqueeze, {x}, {{"axis", axis}}); }
Tensor flatten(const Tensor& x, int64_t start, int64_t end) { return apply(Op::Flatten, {x}, {{"start", start}, {"end", end}}); }
Tensor concat(const std::vector<Tensor>& xs, int64_t axis) {
  if (xs.empty()) EMBER_THROW(Value, "[concat] needs at least one tensor");
  return apply(Op::Concat, xs, {{"axis", axis}});
}
Tensor stack(const std::vector<Tensor>& xs, int64_t axis) {
  if (xs.empty()) EMBER_THROW(Value, "[stack] needs at least one tensor");
  return apply(Op::Stack, xs, {{"axis", axis}});
}
Tensor pad(const Tensor& x, Ints pads, double value) { return apply(Op::Pad, {x}, {{"pads", pads}, {"value", value}}); }
Tensor index_select(const Tensor& x, int64_t axis, const Tensor& index) {
  return apply(Op::IndexSelect, {x, index}, {{"axis", axis}});
}
Tensor gather(const Tensor& x, int64_t axis, const Tensor& index) { return apply(Op::Gather, {x, index}, {{"axis", axis}}); }
Tensor embedding(const Tensor& weight, const Tensor& index) { return apply(Op::Embedding, {weight, index}); }
Tensor index_put(const Tensor& x, int64_t axis, const Tensor& index, const Tensor& src, bool accumulate) {
  return apply(Op::IndexPut, {x, index, src}, {{"axis", axis}, {"accumulate", accumulate}});
}
Tensor scatter(const Tensor& x, int64_t axis, const Tensor& index, const Tensor& src, bool accumulate) {
  return apply(Op::Scatter, {x, index, src}, {{"axis", axis}, {"accumulate", accumulate}});
}
Tensor cumsum(const Tensor& x, int64_t axis) { return apply(Op::Cumsum, {x}, {{"axis", axis}}); }

// ---- composites

Tensor softmax(const Tensor& x, int64_t axis) { return apply(Op::Softmax, {x}, {{"axis", axis}}); }
Tensor log_softmax(const Tensor& x, int64_t axis) { return apply(Op::LogSoftmax, {x}, {{"axis", axis}}); }

Tensor layer_norm(const Tensor& x, SymShape normalized_shape, const std::optional<Tensor>& weight,
                  const std::optional<Tensor>& bias, double eps) {
  Tensor w = weight ? *weight : ones(normalized_shape, x.dtype());
  Tensor b = bias ? *bias : zeros(normalized_shape, x.dtype());
  return apply(Op::LayerNorm, {x, w, b}, {{"ndim", static_cast<int64_t>(normalized_shape.size())}, {"eps", eps}});
}

Tensor rms_norm(const Tensor& x, SymShape normalized_shape, const std::optional<Tensor>& weight, std::optional<double> eps) {
  double machine_eps = x.dtype() == DType::Float64 ? 2.220446049250313e-16
                       : x.dtype() == DType::Float16 ? 0.0009765625
                       : x.dtype() == DType::BFloat16 ? 0.0078125
                                                      : 1.1920928955078125e-07;
  Tensor w = weight ? *weight : ones(normalized_shape, x.dtype());
  return apply(Op::RmsNorm, {x, w},
               {{"ndim", static_cast<int64_t>(normalized_shape.size())}, {"eps", eps.value_or(machine_eps)}});
}

Tensor batch_norm(const Tensor& x, const Tensor& mean, const Tensor& var, const std::optional<Tensor>& weight,
                  const std::optional<Tensor>& bias, double eps) {
  SymShape c{mean.size(0)};
  Tensor w = weight ? *weight : ones(c, x.dtype());
  Tensor b = bias ? *bias : zeros(c, x.dtype());
  return apply(Op::BatchNorm, {x, mean, var, w, b}, {{"eps", eps}});
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const std::optional<Tensor>& mask,
                                    bool causal, std::optional<double> scale) {
  Attrs attrs{{"causal", causal}, {"scale", scale.value_or(0.0)}};
  if (scale && *scale == 0.0) EMBER_THROW(Value, "[scaled_dot_product_attention] scale must be nonzero");
  return mask ? apply(Op::ScaledDotProductAttention, {q, k, v, *mask}, attrs)
              : apply(Op::ScaledDotProductAttention, {q, k, v}, attrs);
}

// ---- several outputs

namespace {

template <size_t... I>
auto as_tuple(const std::vector<Tensor>& v, std::index_sequence<I...>) {
  return std::make_tuple(v.at(I)...);
}

// The outputs of a multi-output op with N outputs, as a tuple.
template <size_t N>
auto apply_n(Op op, const std::vector<Tensor>& inputs, Attrs attrs) {
  return as_tuple(apply_multi(op, inputs, std::move(attrs)), std::make_index_sequence<N>());
}

}  // namespace

std::tuple<Tensor, Tensor> max_dim(const Tensor& x, int64_t axis, bool keepdim) {
  return apply_n<2>(Op::MaxDim, {x}, {{"axis", axis}, {"keepdim", keepdim}});
}

std::tuple<Tensor, Tensor> min_dim(const Tensor& x, int64_t axis, bool keepdim) {
  return apply_n<2>(Op::MinDim, {x}, {{"axis", axis}, {"keepdim", keepdim}});
}

std::tuple<Tensor, Tensor> var_mean(const Tensor& x, Ints axes, double correction, bool keepdim) {
  return apply_n<2>(Op::VarMean, {x},
                    {{"axes", std::move(axes)}, {"correction", correction}, {"keepdim", keepdim}});
}

std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t axis, bool descending, bool stable) {
  return apply_n<2>(Op::Sort, {x},
                    {{"axis", axis}, {"descending", descending}, {"stable", stable}});
}

std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t axis, bool largest,
                                bool sorted) {
  return apply_n<2>(Op::TopK, {x},
                    {{"k", k}, {"axis", axis}, {"largest", largest}, {"sorted", sorted}});
}

std::vector<Tensor> split(const Tensor& x, Ints sizes, int64_t axis) {
  return apply_multi(Op::Split, {x}, {{"sizes", std::move(sizes)}, {"axis", axis}});
}

// torch.chunk: parts of ceil(n / chunks); a zero-size dim still gives `chunks` empty parts.
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t axis) {
  if (chunks <= 0) EMBER_THROW(Value, "[chunk] chunks must be positive, got ", chunks);
  if (x.dim() == 0) EMBER_THROW(Value, "[chunk] cannot chunk a 0-d tensor");
  // The sizes are attributes, so a symbolic dim specialises here.
  int64_t n = x.size(normalize_axis("chunk", axis, x.dim()));
  if (n == 0) return split(x, Ints(chunks, 0), axis);
  int64_t size = ceil_div(n, chunks);
  Ints sizes(ceil_div(n, size), size);
  sizes.back() = n - size * (static_cast<int64_t>(sizes.size()) - 1);
  return split(x, sizes, axis);
}

std::vector<Tensor> unbind(const Tensor& x, int64_t axis) {
  if (x.dim() == 0) EMBER_THROW(Value, "[unbind] cannot unbind a 0-d tensor");
  axis = normalize_axis("unbind", axis, x.dim());
  int64_t n = x.size(axis);  // the number of outputs: specialises
  std::vector<Tensor> parts;
  if (n == 0) return parts;
  for (const Tensor& part : split(x, Ints(n, 1), axis)) parts.push_back(squeeze(part, {axis}));
  return parts;
}

std::tuple<Tensor, Tensor, Tensor> native_layer_norm(const Tensor& x, SymShape normalized_shape,
                                                     const std::optional<Tensor>& weight,
                                                     const std::optional<Tensor>& bias,
                                                     double eps) {
  Tensor w = weight ? *weight : ones(normalized_shape, x.dtype());
  Tensor b = bias ? *bias : zeros(normalized_shape, x.dtype());
  return apply_n<3>(Op::NativeLayerNorm, {x, w, b},
                    {{"ndim", static_cast<int64_t>(normalized_shape.size())}, {"eps", eps}});
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> native_batch_norm(
    const Tensor& x, const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
    const Tensor& running_mean, const Tensor& running_var, double momentum, double eps) {
  SymShape c{running_mean.size(0)};
  Tensor w = weight ? *weight : ones(c, x.dtype());
  Tensor b = bias ? *bias : zeros(c, x.dtype());
  return apply_n<5>(Op::NativeBatchNorm, {x, w, b, running_mean, running_var},
                    {{"momentum", momentum}, {"eps", eps}});
}

}  // namespace ember

// matmul, linear, conv2d and the 2-D pools: the ops that later run as library calls or tiled
// kernels rather than fused loops.
#include <array>

#include "ir/ops/decompositions.h"
#include "ir/ops/registry.h"

namespace ember::ops {

namespace {

void check_same_float(const OpInfo& op, const TensorType& a, const TensorType& b) {
  check_floating(op, a, "input");
  if (a.dtype != b.dtype)
    EMBER_OP_ERROR(Type, op, "expects both operands to have the same dtype, got ",
                   dtype_name(a.dtype), " and ", dtype_name(b.dtype));
}

TensorType infer_matmul(const OpInfo& op, std::span<const TensorType> in, const Attrs&) {
  const TensorType &a = in[0], &b = in[1];
  check_same_float(op, a, b);
  if (a.shape.empty() || b.shape.empty())
    EMBER_OP_ERROR(Value, op, "both operands need at least one dim, got ", a.str(), " @ ", b.str());
  Shape sa = a.shape, sb = b.shape;
  bool vec_a = sa.size() == 1, vec_b = sb.size() == 1;
  if (vec_a) sa.insert(sa.begin(), Dim(1));
  if (vec_b) sb.push_back(Dim(1));
  const Dim &k_a = sa.back(), &k_b = sb[sb.size() - 2];
  require_equal_dims(op.name, k_a, k_b,
                     detail::concat("inner dimensions differ: ", shape_str(a.shape), " @ ", shape_str(b.shape)));
  Shape batch = broadcast_shapes(op.name, Shape(sa.begin(), sa.end() - 2), Shape(sb.begin(), sb.end() - 2));
  if (!vec_a) batch.push_back(sa[sa.size() - 2]);
  if (!vec_b) batch.push_back(sb.back());
  return {a.dtype, batch};
}

TensorType infer_linear(const OpInfo& op, std::span<const TensorType> in, const Attrs&) {
  const TensorType &x = in[0], &w = in[1];
  check_same_float(op, x, w);
  check_rank(op, w, 2, "weight");
  if (x.shape.empty()) EMBER_OP_ERROR(Value, op, "input needs at least one dim");
  require_equal_dims(op.name, x.shape.back(), w.shape[1],
                     detail::concat("input features ", x.shape.back().str(), " differ from weight ", w.str(),
                                    " (expects [out_features, in_features])"));
  if (in.size() == 3) {
    check_same_float(op, x, in[2]);
    if (in[2].shape != Shape{w.shape[0]})
      EMBER_OP_ERROR(Value, op, "bias must be [", w.shape[0].str(), "], got ", in[2].str());
  }
  Shape out = x.shape;
  out.back() = w.shape[0];
  return {x.dtype, out};
}

std::pair<int64_t, int64_t> pair_attr(const OpInfo& op, const Attrs& attrs, const char* name, int64_t min) {
  const auto& v = attr_ints(attrs, name);
  if (v.size() != 2) EMBER_OP_ERROR(Value, op, name, " must have 2 values, got ", v.size());
  if (v[0] < min || v[1] < min) EMBER_OP_ERROR(Value, op, name, " must be >= ", min, ", got [", v[0], ", ", v[1], "]");
  return {v[0], v[1]};
}

// Output length of a strided window over `size` padded by `p` before and `q` after: floor or
// ceil((size + p + q - d(k-1) - 1) / s) + 1.
Dim window_out(const OpInfo& op, const Dim& size, int64_t k, int64_t s, int64_t p, int64_t q, int64_t d,
               bool ceil_mode) {
  Dim span = size + Dim(p + q - d * (k - 1) - 1);
  // In ceil mode a window may pass the end of the input, as long as it starts inside: one
  // window larger than the whole input is fine (EfficientNet pools 1x1 with a kernel of 320).
  bool fits = span.is_static() && (span.value() >= 0 || (ceil_mode && span.value() > -s));
  if (span.is_static() && !fits)
    EMBER_OP_ERROR(Value, op, "input size ", size.str(), " is smaller than the window (kernel ", k,
                   ", dilation ", d, ", padding ", p, " and ", q, ")");
  if (!span.is_static()) {
    assume_nonnegative(span, detail::concat("[", op.name, "] the window fits in the input"));
    return span.floor_div(s) + Dim(1);  // ceil mode with a symbolic size: s == 1, floor == ceil
  }
  if (!ceil_mode) return span.floor_div(s) + Dim(1);
  int64_t out = (span.value() + s - 1) / s + 1;  // span + s - 1 >= 0 here
  if ((out - 1) * s >= size.value() + p) --out;  // the last window must start inside the input
  if (out < 1) EMBER_OP_ERROR(Value, op, "no window starts inside input size ", size.str());
  return Dim(out);
}

// conv2d's padding as [top, left, bottom, right]. [h, w] pads both sides alike, as torch's conv2d;
// four values are what an explicit pad folded into the convolution leaves (TensorFlow's "same"
// padding pads a stride-2 input more after than before).
std::array<int64_t, 4> conv_padding(const OpInfo& op, const Attrs& attrs) {
  const auto& v = attr_ints(attrs, "padding");
  if (v.size() != 2 && v.size() != 4) EMBER_OP_ERROR(Value, op, "padding must have 2 or 4 values, got ", v.size());
  for (int64_t p : v)
    if (p < 0) EMBER_OP_ERROR(Value, op, "padding must be >= 0, got ", p);
  if (v.size() == 2) return {v[0], v[1], v[0], v[1]};
  return {v[0], v[1], v[2], v[3]};
}

TensorType infer_conv2d(const OpInfo& op, std::span<const TensorType> in, const Attrs& attrs) {
  const TensorType &x = in[0], &w = in[1];
  check_same_float(op, x, w);
  check_rank(op, x, 4, "input");
  check_rank(op, w, 4, "weight");
  auto [sh, sw] = pair_attr(op, attrs, "stride", 1);
  auto [ph, pw, ph_end, pw_end] = conv_padding(op, attrs);
  auto [dh, dw] = pair_attr(op, attrs, "dilation", 1);
  int64_t groups = attr_int(attrs, "groups");
  if (groups < 1) EMBER_OP_ERROR(Value, op, "groups must be >= 1, got ", groups);
  if (!w.shape[0].is_static() || !w.shape[1].is_static() || !w.shape[2].is_static() || !w.shape[3].is_static())
    throw SymbolicShapeError("[conv2d] weight shape must be static", numel(w.shape).symbols());
  int64_t out_c = w.shape[0].value(), in_per_group = w.shape[1].value();
  if (out_c % groups != 0)
    EMBER_OP_ERROR(Value, op, "out channels ", out_c, " are not divisible by groups ", groups);
  require_equal_dims(op.name, x.shape[1], Dim(in_per_group * groups),
                     detail::concat("input channels ", x.shape[1].str(), " differ from weight ", w.str(),
                                    " times groups ", groups));
  if (in.size() == 3) {
    check_same_float(op, x, in[2]);
    if (in[2].shape != Shape{Dim(out_c)}) EMBER_OP_ERROR(Value, op, "bias must be [", out_c, "], got ", in[2].str());
  }
  return {x.dtype,
          {x.shape[0], Dim(out_c), window_out(op, x.shape[2], w.shape[2].value(), sh, ph, ph_end, dh, false),
           window_out(op, x.shape[3], w.shape[3].value(), sw, pw, pw_end, dw, false)}};
}

// The gradients of y = conv2d(x, weight) given grad_y: (grad_y, weight, x) give x's, (grad_y, x,
// weight) give weight's; the other operand only lends its shape. grad_y must be y's shape.
TensorType infer_conv2d_grad(const OpInfo& op, std::span<const TensorType> in, const Attrs& attrs) {
  bool of_input = op.op == Op::Conv2dInputGrad;
  const TensorType &grad = in[0], &x = of_input ? in[2] : in[1], &w = of_input ? in[1] : in[2];
  std::array<TensorType, 2> operands{x, w};
  TensorType y = infer_conv2d(op, operands, attrs);
  check_same_float(op, grad, x);
  check_rank(op, grad, 4, "grad");
  for (size_t d = 0; d < 4; ++d)
    require_equal_dims(op.name, grad.shape[d], y.shape[d],
                       detail::concat("grad ", grad.str(), " differs from the convolution's output ", y.str()));
  return of_input ? x : w;
}

TensorType infer_pool(const OpInfo& op, std::span<const TensorType> in, const Attrs& attrs) {
  const TensorType& x = in[0];
  if (x.shape.size() != 4 && x.shape.size() != 3)
    EMBER_OP_ERROR(Value, op, "input must be [N, C, H, W] or [C, H, W], got ", x.str());
  if (op.op != Op::MaxPool2d && !is_floating(x.dtype))
    EMBER_OP_ERROR(Type, op, "input must be floating point, got ", dtype_name(x.dtype));
  if (is_bool(x.dtype)) EMBER_OP_ERROR(Type, op, "is not defined on bool tensors");
  Shape out = x.shape;
  size_t h = out.size() - 2, w = out.size() - 1;
  if (op.op == Op::AdaptiveAvgPool2d) {
    auto [oh, ow] = pair_attr(op, attrs, "output_size", 1);
    out[h] = Dim(oh);
    out[w] = Dim(ow);
    return {x.dtype, out};
  }
  auto [kh, kw] = pair_attr(op, attrs, "kernel", 1);
  auto stride = attr_ints(attrs, "stride");
  auto [sh, sw] = stride.empty() ? std::pair{kh, kw} : pair_attr(op, attrs, "stride", 1);
  auto [ph, pw] = pair_attr(op, attrs, "padding", 0);
  if (ph * 2 > kh || pw * 2 > kw)
    EMBER_OP_ERROR(Value, op, "padding must be at most half the kernel, got padding [", ph, ", ", pw,
                   "] for kernel [", kh, ", ", kw, "]");
  int64_t dh = 1, dw = 1;
  if (op.op == Op::MaxPool2d) std::tie(dh, dw) = pair_attr(op, attrs, "dilation", 1);
  bool ceil_mode = attr_bool(attrs, "ceil_mode");
  out[h] = window_out(op, x.shape[h], kh, sh, ph, ph, dh, ceil_mode);
  out[w] = window_out(op, x.shape[w], kw, sw, pw, pw, dw, ceil_mode);
  return {x.dtype, out};
}

using Ints = std::vector<int64_t>;

}  // namespace

void register_contractions(Table& table) {
  auto at = [&](Op op) -> OpInfo& { return table[static_cast<size_t>(op)]; };
  at(Op::MatMul).doc = "matrix product with numpy broadcasting of batch dims; 1-D operands as in torch.matmul";
  at(Op::MatMul).infer = infer_matmul;
  at(Op::Linear).doc = "x @ weight^T + bias; weight is [out_features, in_features]";
  at(Op::Linear).infer = infer_linear;
  at(Op::Linear).decompose = decompose_linear;  // matmul + add: the epilogue fuses
  at(Op::Conv2d).doc =
      "2-D convolution of [N, C, H, W] by [O, C / groups, kH, kW], optional bias [O]; `padding` is [h, w] or "
      "[top, left, bottom, right]";
  at(Op::Conv2d).infer = infer_conv2d;
  at(Op::Conv2d).attrs = {{"stride", AttrType::Ints, Attr(Ints{1, 1})},
                          {"padding", AttrType::Ints, Attr(Ints{0, 0})},
                          {"dilation", AttrType::Ints, Attr(Ints{1, 1})},
                          {"groups", AttrType::Int, Attr(int64_t{1})}};
  for (Op grad : {Op::Conv2dInputGrad, Op::Conv2dWeightGrad}) {
    at(grad).infer = infer_conv2d_grad;
    at(grad).attrs = at(Op::Conv2d).attrs;
  }
  at(Op::Conv2dInputGrad).doc = "gradient of conv2d(x, weight) with respect to x, given grad_y; x lends its shape";
  at(Op::Conv2dWeightGrad).doc = "gradient of conv2d(x, weight) with respect to weight, given grad_y; weight lends its shape";
  at(Op::MaxPool2d).doc = "max over 2-D windows; padding counts as -inf";
  at(Op::MaxPool2d).infer = infer_pool;
  at(Op::MaxPool2d).attrs = {{"kernel", AttrType::Ints, std::nullopt},
                             {"stride", AttrType::Ints, Attr(Ints{})},
                             {"padding", AttrType::Ints, Attr(Ints{0, 0})},
                             {"dilation", AttrType::Ints, Attr(Ints{1, 1})},
                             {"ceil_mode", AttrType::Bool, Attr(false)}};
  at(Op::AvgPool2d).doc = "mean over 2-D windows";
  at(Op::AvgPool2d).infer = infer_pool;
  at(Op::AvgPool2d).attrs = {{"kernel", AttrType::Ints, std::nullopt},
                             {"stride", AttrType::Ints, Attr(Ints{})},
                             {"padding", AttrType::Ints, Attr(Ints{0, 0})},
                             {"ceil_mode", AttrType::Bool, Attr(false)},
                             {"count_include_pad", AttrType::Bool, Attr(true)}};
  at(Op::AdaptiveAvgPool2d).doc = "mean over windows that split H and W into output_size parts";
  at(Op::AdaptiveAvgPool2d).infer = infer_pool;
  at(Op::AdaptiveAvgPool2d).attrs = {{"output_size", AttrType::Ints, std::nullopt}};
}

}  // namespace ember::ops

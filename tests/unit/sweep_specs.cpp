// The op sweep's table: one entry per op of ir/ops.def but `input`, with its family and dtypes.
#include "tests/unit/sweep.h"

namespace ember::sweep {
namespace {

bool all_dtypes(DType) {
  return true;
}
bool no_bool(DType t) {
  return t != DType::Bool;
}
bool floats_only(DType t) {
  return ref::is_float(t);
}
bool no_floats(DType t) {
  return !ref::is_float(t);
}

}  // namespace

const std::vector<Spec>& specs() {
  static const std::vector<Spec> table = [] {
    std::vector<Spec> t;
    auto add = [&](Op op, const char* family, bool (*supports)(DType), Builder b) {
      t.push_back({op, family, supports, b});
    };
    for (Op op : {Op::Neg,        Op::Abs,        Op::Exp,     Op::Exp2,  Op::Log,   Op::Log2,
                  Op::Log1p,      Op::Expm1,      Op::Sqrt,    Op::Rsqrt, Op::Sin,   Op::Cos,
                  Op::Tan,        Op::Tanh,       Op::Sigmoid, Op::Relu,  Op::Gelu,  Op::Silu,
                  Op::Erf,        Op::Floor,      Op::Ceil,    Op::Round, Op::Trunc, Op::Sign,
                  Op::Reciprocal, Op::LogicalNot, Op::IsNan,   Op::IsInf, Op::Cast})
      add(op, "unary", op == Op::Neg || op == Op::Abs ? no_bool : all_dtypes, elementwise);
    for (Op op : {Op::Add,        Op::Sub,       Op::Mul,        Op::Div,        Op::FloorDivide,
                  Op::Remainder,  Op::Pow,       Op::Maximum,    Op::Minimum,    Op::Eq,
                  Op::Ne,         Op::Lt,        Op::Le,         Op::Gt,         Op::Ge,
                  Op::LogicalAnd, Op::LogicalOr, Op::LogicalXor, Op::BitwiseAnd, Op::BitwiseOr,
                  Op::BitwiseXor, Op::Where,     Op::Clamp}) {
      bool bitwise = op == Op::BitwiseAnd || op == Op::BitwiseOr || op == Op::BitwiseXor;
      add(op, "binary", op == Op::Sub ? no_bool : bitwise ? no_floats : all_dtypes, elementwise);
    }
    for (Op op : {Op::Sum, Op::Mean, Op::Prod, Op::Max, Op::Min, Op::ArgMax, Op::ArgMin, Op::Var,
                  Op::Std, Op::LogSumExp})
      add(op, "reduction", all_dtypes, reduction);
    add(Op::MatMul, "contraction", floats_only, matmul_case);
    add(Op::Linear, "contraction", floats_only, linear_case);
    add(Op::Conv2d, "contraction", floats_only, conv2d_case);
    add(Op::Conv2dInputGrad, "contraction", floats_only, conv2d_grad_case);
    add(Op::Conv2dWeightGrad, "contraction", floats_only, conv2d_grad_case);
    add(Op::MaxPool2d, "contraction", no_bool, pool_case);
    add(Op::AvgPool2d, "contraction", floats_only, pool_case);
    add(Op::AdaptiveAvgPool2d, "contraction", floats_only, pool_case);
    for (Op op : {Op::Reshape, Op::Permute, Op::Transpose, Op::Expand, Op::Slice, Op::Squeeze,
                  Op::Unsqueeze, Op::Flatten})
      add(op, "view", all_dtypes, view_case);
    for (Op op : {Op::Concat, Op::Stack, Op::Pad, Op::IndexSelect, Op::Gather, Op::Embedding, Op::IndexPut, Op::Scatter, Op::Cumsum})
      add(op, "movement", all_dtypes, movement_case);
    add(Op::Softmax, "composite", all_dtypes, softmax_case);
    add(Op::LogSoftmax, "composite", all_dtypes, softmax_case);
    add(Op::LayerNorm, "composite", floats_only, norm_case);
    add(Op::RmsNorm, "composite", floats_only, norm_case);
    add(Op::BatchNorm, "composite", floats_only, batch_norm_case);
    add(Op::ScaledDotProductAttention, "composite", floats_only, attention_case);
    add(Op::Full, "creation", all_dtypes, full_case);
    add(Op::Arange, "creation", all_dtypes, arange_case);
    add(Op::Uniform, "creation", floats_only, random_case);
    add(Op::Normal, "creation", floats_only, random_case);
    add(Op::Constant, "creation", all_dtypes, constant_case);
    add(Op::MaxDim, "multi-output", all_dtypes, extreme_case);
    add(Op::MinDim, "multi-output", all_dtypes, extreme_case);
    add(Op::VarMean, "multi-output", all_dtypes, var_mean_case);
    add(Op::Sort, "multi-output", all_dtypes, sort_case);
    add(Op::TopK, "multi-output", no_bool, sort_case);
    add(Op::Extern, "extern", all_dtypes, extern_case);
    add(Op::Split, "multi-output", all_dtypes, split_case);
    add(Op::NativeLayerNorm, "multi-output", floats_only, native_layer_norm_case);
    add(Op::NativeBatchNorm, "multi-output", floats_only, native_batch_norm_case);
    return t;
  }();
  return table;
}

}  // namespace ember::sweep

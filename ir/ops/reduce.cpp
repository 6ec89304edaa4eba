// Reductions over any set of axes (empty: all axes), with keepdim. The primitive ones declare
// their combiner, identity and accumulator ([Note: reduction semantics]); mean, var, std,
// logsumexp and var_mean decompose into them (ir/ops/decompose_reduce.cpp).
#include <limits>

#include "ir/ops/decompositions.h"
#include "ir/ops/registry.h"

namespace ember::ops {

namespace {

// float16/bfloat16 accumulate in float32; other floats in themselves.
DType float_accumulator(DType t) { return t == DType::Float64 ? t : DType::Float32; }
// sum, prod: integers and bool in wrapping int64, as PyTorch.
DType arithmetic_accumulator(DType t) {
  return is_floating(t) ? float_accumulator(t) : DType::Int64;
}
// max, min, argmax, argmin only pick an element: exact in the input dtype.
DType picking_accumulator(DType t) { return is_floating(t) ? float_accumulator(t) : t; }

Literal one_element(DType t, double v) {
  Literal lit;
  lit.dtype = t;
  if (is_floating(t)) lit.floats = {v};
  else lit.ints = {static_cast<int64_t>(v)};
  return lit;
}

Literal zero(DType t) { return one_element(arithmetic_accumulator(t), 0.0); }
Literal one(DType t) { return one_element(arithmetic_accumulator(t), 1.0); }

// The smallest (largest) value of a dtype: -inf (inf) for floats.
Literal extreme(DType t, bool lowest) {
  DType acc = picking_accumulator(t);
  if (is_floating(t))
    return one_element(acc, lowest ? -std::numeric_limits<double>::infinity()
                                   : std::numeric_limits<double>::infinity());
  Literal lit;
  lit.dtype = acc;
  switch (t) {
    case DType::Bool: lit.ints = {lowest ? 0 : 1}; break;
    case DType::Int8: lit.ints = {lowest ? INT8_MIN : INT8_MAX}; break;
    case DType::Int16: lit.ints = {lowest ? INT16_MIN : INT16_MAX}; break;
    case DType::Int32: lit.ints = {lowest ? INT32_MIN : INT32_MAX}; break;
    case DType::UInt8: lit.ints = {lowest ? 0 : UINT8_MAX}; break;
    default: lit.ints = {lowest ? INT64_MIN : INT64_MAX}; break;
  }
  return lit;
}

Literal lowest(DType t) { return extreme(t, true); }
Literal highest(DType t) { return extreme(t, false); }

TensorType infer_reduction(const OpInfo& op, std::span<const TensorType> in, const Attrs& attrs) {
  const TensorType& x = in[0];
  int64_t rank = static_cast<int64_t>(x.shape.size());
  std::vector<int64_t> axes = normalize_axes(op.name, attr_ints(attrs, "axes"), rank);
  if (axes.empty())
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  bool keepdim = attr_bool(attrs, "keepdim");
  bool needs_elements = op.op == Op::Max || op.op == Op::Min || op.op == Op::ArgMax || op.op == Op::ArgMin;
  Shape shape;
  for (int64_t i = 0; i < rank; ++i) {
    bool reduced = std::find(axes.begin(), axes.end(), i) != axes.end();
    if (reduced && needs_elements && x.shape[i] == Dim(0))
      EMBER_OP_ERROR(Value, op, "cannot reduce over a zero-size dim (axis ", i, " of ", x.str(), ")");
    if (reduced && needs_elements)
      assume_nonnegative(x.shape[i] - Dim(1), detail::concat("[", op.name, "] the reduced dim has elements"));
    if (!reduced) shape.push_back(x.shape[i]);
    else if (keepdim) shape.push_back(Dim(1));
  }
  DType dtype = x.dtype;
  switch (op.op) {
    case Op::Sum: case Op::Prod:
      if (!is_floating(dtype)) dtype = DType::Int64;  // as PyTorch: integer sums accumulate in int64
      break;
    case Op::Mean: case Op::Var: case Op::Std: case Op::LogSumExp: case Op::VarMean:
      if (!is_floating(dtype)) dtype = kDefaultFloat;
      break;
    case Op::ArgMax: case Op::ArgMin:
      dtype = DType::Int64;
      break;
    default:
      break;
  }
  return {dtype, shape};
}

// (variance, mean): both of the float type var gives.
std::vector<TensorType> infer_var_mean(const OpInfo& op, std::span<const TensorType> in,
                                       const Attrs& attrs) {
  TensorType t = infer_reduction(op, in, attrs);
  return {t, t};
}

// (values, int64 indices) along one axis; a 0-d tensor takes axis 0 or -1, as in PyTorch.
std::vector<TensorType> infer_max_dim(const OpInfo& op, std::span<const TensorType> in,
                                      const Attrs& attrs) {
  const TensorType& x = in[0];
  int64_t rank = static_cast<int64_t>(x.shape.size());
  int64_t axis = normalize_axis(op.name, attr_int(attrs, "axis"), rank);
  if (rank == 0) return {{x.dtype, {}}, {DType::Int64, {}}};
  if (x.shape[axis] == Dim(0))
    EMBER_OP_ERROR(Value, op, "cannot reduce over a zero-size dim (axis ", axis, " of ", x.str(),
                   ")");
  Shape shape = x.shape;
  if (attr_bool(attrs, "keepdim")) shape[axis] = Dim(1);
  else shape.erase(shape.begin() + axis);
  return {{x.dtype, shape}, {DType::Int64, shape}};
}

}  // namespace

void register_reductions(Table& table) {
  const std::pair<Op, const char*> docs[] = {
      {Op::Sum, "sum; integers and bool accumulate in int64"},
      {Op::Mean, "arithmetic mean; integers give float32"},
      {Op::Prod, "product; integers and bool accumulate in int64"},
      {Op::Max, "largest element; NaN if any is NaN"},
      {Op::Min, "smallest element; NaN if any is NaN"},
      {Op::ArgMax, "row-major index of the first largest element within the reduced axes"},
      {Op::ArgMin, "row-major index of the first smallest element within the reduced axes"},
      {Op::Var, "variance with `correction` (1: unbiased)"},
      {Op::Std, "standard deviation with `correction` (1: unbiased)"},
      {Op::LogSumExp, "log(sum(exp(x))), computed stably"},
  };
  for (auto [op, doc] : docs) {
    OpInfo& info = table[static_cast<size_t>(op)];
    info.doc = doc;
    info.infer = infer_reduction;
    info.attrs = {{"axes", AttrType::Ints, Attr(std::vector<int64_t>{})},
                  {"keepdim", AttrType::Bool, Attr(false)}};
    if (op == Op::Var || op == Op::Std)
      info.attrs.push_back({"correction", AttrType::Float, Attr(1.0)});
  }
  auto at = [&](Op op) -> OpInfo& { return table[static_cast<size_t>(op)]; };
  at(Op::Sum).reduction = ReductionSemantics{Combiner::Add, arithmetic_accumulator, zero};
  at(Op::Prod).reduction = ReductionSemantics{Combiner::Mul, arithmetic_accumulator, one};
  at(Op::Max).reduction = ReductionSemantics{Combiner::Max, picking_accumulator, lowest};
  at(Op::Min).reduction = ReductionSemantics{Combiner::Min, picking_accumulator, highest};
  at(Op::ArgMax).reduction = ReductionSemantics{Combiner::ArgMax, picking_accumulator, lowest};
  at(Op::ArgMin).reduction = ReductionSemantics{Combiner::ArgMin, picking_accumulator, highest};
  at(Op::MaxDim).reduction = at(Op::ArgMax).reduction;
  at(Op::MinDim).reduction = at(Op::ArgMin).reduction;
  at(Op::Mean).decompose = decompose_mean;
  at(Op::Var).decompose = decompose_var;
  at(Op::Std).decompose = decompose_std;
  at(Op::LogSumExp).decompose = decompose_logsumexp;
  at(Op::VarMean).decompose = decompose_var_mean;
  OpInfo& var_mean = table[static_cast<size_t>(Op::VarMean)];
  var_mean.doc = "(variance with `correction`, mean) over `axes`, as torch.var_mean";
  var_mean.infer_multi = infer_var_mean;
  var_mean.attrs = {{"axes", AttrType::Ints, Attr(std::vector<int64_t>{})},
                    {"keepdim", AttrType::Bool, Attr(false)},
                    {"correction", AttrType::Float, Attr(1.0)}};
  for (Op op : {Op::MaxDim, Op::MinDim}) {
    OpInfo& info = table[static_cast<size_t>(op)];
    info.infer_multi = infer_max_dim;
    info.attrs = {{"axis", AttrType::Int, std::nullopt}, {"keepdim", AttrType::Bool, Attr(false)}};
  }
  table[static_cast<size_t>(Op::MaxDim)].doc =
      "(values, int64 indices) of the largest element along `axis`, the first on ties; "
      "the first NaN wins";
  table[static_cast<size_t>(Op::MinDim)].doc =
      "(values, int64 indices) of the smallest element along `axis`, the first on ties; "
      "the first NaN wins";
}

}  // namespace ember::ops

// Sorting along one axis: sort and topk, each giving (values, int64 indices into the input).
// NaN sorts above every number, as in PyTorch; ties keep their input order.
#include "ir/ops/registry.h"

namespace ember::ops {

namespace {

std::vector<TensorType> infer_sort(const OpInfo& op, std::span<const TensorType> in,
                                   const Attrs& attrs) {
  const TensorType& x = in[0];
  normalize_axis(op.name, attr_int(attrs, "axis"), static_cast<int64_t>(x.shape.size()));
  return {x, {DType::Int64, x.shape}};
}

std::vector<TensorType> infer_topk(const OpInfo& op, std::span<const TensorType> in,
                                   const Attrs& attrs) {
  const TensorType& x = in[0];
  if (x.dtype == DType::Bool)
    EMBER_OP_ERROR(Type, op, "is not defined on bool tensors, as in PyTorch");
  int64_t rank = static_cast<int64_t>(x.shape.size());
  int64_t axis = normalize_axis(op.name, attr_int(attrs, "axis"), rank);
  int64_t k = attr_int(attrs, "k");
  Dim n = rank == 0 ? Dim(1) : x.shape[axis];
  if (k < 0) EMBER_OP_ERROR(Value, op, "k must be >= 0, got ", k);
  if (rank == 0 && k != 1) EMBER_OP_ERROR(Value, op, "k must be 1 for a 0-d tensor, got ", k);
  if (n.is_static() && k > n.value())
    EMBER_OP_ERROR(Value, op, "k = ", k, " is larger than dim ", axis, " of ", x.str());
  if (!n.is_static() && k > 2)  // a symbol is only known to be >= 2
    throw SymbolicShapeError(detail::concat("[topk] cannot prove k = ", k, " <= ", n.str()),
                             n.symbols());
  Shape shape = x.shape;
  if (rank > 0) shape[axis] = Dim(k);
  return {{x.dtype, shape}, {DType::Int64, shape}};
}

}  // namespace

void register_sorting(Table& table) {
  OpInfo& sort = table[static_cast<size_t>(Op::Sort)];
  sort.doc =
      "(values, indices) sorted along `axis`, ascending unless `descending`; NaN last (first if "
      "descending); ties keep their order";
  sort.infer_multi = infer_sort;
  sort.attrs = {{"axis", AttrType::Int, Attr(int64_t{-1})},
                {"descending", AttrType::Bool, Attr(false)},
                {"stable", AttrType::Bool, Attr(false)}};
  OpInfo& topk = table[static_cast<size_t>(Op::TopK)];
  topk.doc =
      "(values, indices) of the k largest (or smallest) along `axis`, in sorted order, or in "
      "input order when not `sorted`; NaN counts as largest";
  topk.infer_multi = infer_topk;
  topk.attrs = {{"k", AttrType::Int, std::nullopt},
                {"axis", AttrType::Int, Attr(int64_t{-1})},
                {"largest", AttrType::Bool, Attr(true)},
                {"sorted", AttrType::Bool, Attr(true)}};
}

}  // namespace ember::ops

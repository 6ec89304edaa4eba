// Views (reshape, permute, transpose, expand, slice, squeeze, unsqueeze, flatten) and data
// movement (concat, stack, pad, index_select, gather, embedding).
#include <algorithm>
#include <limits>

#include "ir/ops/registry.h"

namespace ember::ops {

namespace {

using Ints = std::vector<int64_t>;
constexpr int64_t kToEnd = std::numeric_limits<int64_t>::max();

int64_t rank_of(const TensorType& t) { return static_cast<int64_t>(t.shape.size()); }

TensorType infer_reshape(const OpInfo& op, std::span<const TensorType> in, const Attrs& attrs) {
  const TensorType& x = in[0];
  Shape target = attr_shape(attrs, "shape");
  int infer_at = -1;
  Dim known(1);
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == Dim(-1)) {
      if (infer_at >= 0) EMBER_OP_ERROR(Value, op, "only one dim can be -1, got ", shape_str(target));
      infer_at = static_cast<int>(i);
      continue;
    }
    if (target[i].is_static() && target[i].value() < 0)
      EMBER_OP_ERROR(Value, op, "invalid dim ", target[i].value(), " in ", shape_str(target));
    known = known * target[i];
  }
  Dim total = numel(x.shape);
  if (infer_at >= 0) {
    if (known == Dim(0))
      EMBER_OP_ERROR(Value, op, "cannot infer the -1 dim of ", shape_str(target), " for ", x.str());
    if (known.is_static() && total.is_static() && total.value() % known.value() != 0)
      EMBER_OP_ERROR(Value, op, "shape ", shape_str(target), " is invalid for input ", x.str());
    assume_nonnegative(known - Dim(1), "[reshape] the known dims have elements");
    target[infer_at] = total.exact_div(known);
  } else if (known != total) {
    if (known.is_static() && total.is_static())
      EMBER_OP_ERROR(Value, op, "shape ", shape_str(target), " is invalid for input ", x.str(),
                     " (", total.value(), " elements)");
    assume_equal(known, total, "[reshape] element counts equal");
  }
  return {x.dtype, target};
}

TensorType infer_permute(const OpInfo& op, std::span<const TensorType> in, const Attrs& attrs) {
  const TensorType& x = in[0];
  const Ints& dims = attr_ints(attrs, "dims");
  if (static_cast<int64_t>(dims.size()) != rank_of(x))
    EMBER_OP_ERROR(Value, op, "dims has ", dims.size(), " entries for a tensor of rank ", rank_of(x));
  Ints norm;
  for (int64_t d : dims) norm.push_back(normalize_axis(op.name, d, rank_of(x)));
  Ints sorted = norm;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < rank_of(x); ++i)
    if (sorted[i] != i) EMBER_OP_ERROR(Value, op, "dims must be a permutation of 0..", rank_of(x) - 1);
  Shape out;
  for (int64_t d : norm) out.push_back(x.shape[d]);
  return {x.dtype, out};
}

TensorType infer_transpose(const OpInfo& op, std::span<const TensorType> in, const Attrs& attrs) {
  const TensorType& x = in[0];
  int64_t a = normalize_axis(op.name, attr_int(attrs, "dim0"), rank_of(x));
  int64_t b = normalize_axis(op.name, attr_int(attrs, "dim1"), rank_of(x));
  Shape out = x.shape;
  if (!out.empty()) std::swap(out[a], out[b]);
  return {x.dtype, out};
}

TensorType infer_expand(const OpInfo& op, std::span<const TensorType> in, const Attrs& attrs) {
  const TensorType& x = in[0];
  Shape target = attr_shape(attrs, "shape");
  if (target.size() < x.shape.size())
    EMBER_OP_ERROR(Value, op, "target ", shape_str(target), " has fewer dims than ", x.str());
  size_t lead = target.size() - x.shape.size();
  for (size_t i = 0; i < target.size(); ++i) {
    if (i < lead) {
      if (target[i] == Dim(-1)) EMBER_OP_ERROR(Value, op, "-1 is not allowed in new leading dims");
      continue;
    }
    const Dim& src = x.shape[i - lead];
    if (target[i] == Dim(-1)) { target[i] = src; continue; }
    if (src != target[i] && src != Dim(1)) {
      if (src.is_static() && target[i].is_static())
        EMBER_OP_ERROR(Value, op, "cannot expand ", x.str(), " to ", shape_str(attr_shape(attrs, "shape")),
                       " (dim ", i, ": ", src.str(), " is neither 1 nor ", target[i].str(), ")");
      assume_equal(src, target[i], "[expand] the expanded dim keeps its size");
    }
  }
  return {x.dtype, target};
}

// Python slice semantics on one dim of static size n; returns the output length.
int64_t slice_length(int64_t n, int64_t start, int64_t end, int64_t step) {
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, 0, n);
  return end <= start ? 0 : ceil_div(end - start, step);
}

TensorType infer_slice(const OpInfo& op, std::span<const TensorType> in, const Attrs& attrs) {
  const TensorType& x = in[0];
  if (x.shape.empty()) EMBER_OP_ERROR(Value, op, "cannot slice a 0-d tensor");
  int64_t axis = normalize_axis(op.name, attr_int(attrs, "axis"), rank_of(x));
  int64_t start = attr_int(attrs, "start"), end = attr_int(attrs, "end"), step = attr_int(attrs, "step");
  if (step <= 0) EMBER_OP_ERROR(Value, op, "step must be positive, got ", step);
  Shape out = x.shape;
  const Dim& n = x.shape[axis];
  Shape length = attr_shape(attrs, "length");
  if (!length.empty()) {
    if (length.size() != 1 || start < 0 || end != kToEnd)
      EMBER_OP_ERROR(Value, op, "length must be one dim, with a start >= 0 and no end");
    bool fits = !n.is_static() || !length[0].is_static() || length[0].value() == 0 ||
                start + (length[0].value() - 1) * step < n.value();
    if (!fits) EMBER_OP_ERROR(Value, op, "length ", length[0].str(), " from ", start, " passes the end of ", n.str());
    out[axis] = length[0];
  } else if (n.is_static()) {
    out[axis] = Dim(slice_length(n.value(), start, end, step));
  } else if (step == 1 && end == kToEnd && start >= 0) {
    assume_nonnegative(n - Dim(start), "[slice] start within the dim");
    out[axis] = n - Dim(start);
  } else if (step == 1 && end == kToEnd && start < 0) {
    assume_nonnegative(n + Dim(start), "[slice] negative start within the dim");
    out[axis] = Dim(-start);
  } else if (step == 1 && start >= 0 && end < 0) {
    assume_nonnegative(n + Dim(end - start), "[slice] end after start");
    out[axis] = n + Dim(end - start);
  } else {
    throw SymbolicShapeError(detail::concat("[slice] symbolic dim ", n.str(), " with start ", start,
                                            ", end ", end, ", step ", step), n.symbols());
  }
  return {x.dtype, out};
}

// One output per entry of `sizes`, which must add up to the dim along `axis`.
std::vector<TensorType> infer_split(const OpInfo& op, std::span<const TensorType> in,
                                    const Attrs& attrs) {
  const TensorType& x = in[0];
  if (x.shape.empty()) EMBER_OP_ERROR(Value, op, "cannot split a 0-d tensor");
  int64_t axis = normalize_axis(op.name, attr_int(attrs, "axis"), rank_of(x));
  const Ints& sizes = attr_ints(attrs, "sizes");
  if (sizes.empty()) EMBER_OP_ERROR(Value, op, "sizes must name at least one part");
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) EMBER_OP_ERROR(Value, op, "sizes must be >= 0, got ", shape_str(to_shape(sizes)));
    total += s;
  }
  require_equal_dims(op.name, x.shape[axis], Dim(total),
                     detail::concat("sizes ", shape_str(to_shape(sizes)), " add up to ", total,
                                    ", not to dim ", axis, " of ", x.str()));
  std::vector<TensorType> out;
  for (int64_t s : sizes) {
    out.push_back(x);
    out.back().shape[axis] = Dim(s);
  }
  return out;
}

TensorType infer_squeeze(const OpInfo& op, std::span<const TensorType> in, const Attrs& attrs) {
  const TensorType& x = in[0];
  Ints axes = normalize_axes(op.name, attr_ints(attrs, "axes"), rank_of(x));
  Shape out;
  for (int64_t i = 0; i < rank_of(x); ++i) {
    bool named = axes.empty() || std::find(axes.begin(), axes.end(), i) != axes.end();
    // A symbolic dim that could be 1 (s0 - 1) is kept only while it is not.
    if (named && !x.shape[i].is_static())
      assume_nonnegative(x.shape[i] - Dim(2), "[squeeze] the dim is not 1");
    if (!(named && x.shape[i] == Dim(1))) out.push_back(x.shape[i]);
  }
  return {x.dtype, out};
}

TensorType infer_unsqueeze(const OpInfo& op, std::span<const TensorType> in, const Attrs& attrs) {
  const TensorType& x = in[0];
  int64_t axis = normalize_axis(op.name, attr_int(attrs, "axis"), rank_of(x) + 1);
  Shape out = x.shape;
  out.insert(out.begin() + axis, Dim(1));
  return {x.dtype, out};
}

TensorType infer_flatten(const OpInfo& op, std::span<const TensorType> in, const Attrs& attrs) {
  const TensorType& x = in[0];
  if (x.shape.empty()) return {x.dtype, {Dim(1)}};
  int64_t start = normalize_axis(op.name, attr_int(attrs, "start"), rank_of(x));
  int64_t end = normalize_axis(op.name, attr_int(attrs, "end"), rank_of(x));
  if (start > end) EMBER_OP_ERROR(Value, op, "start ", start, " is after end ", end);
  Shape out(x.shape.begin(), x.shape.begin() + start);
  out.push_back(numel(Shape(x.shape.begin() + start, x.shape.begin() + end + 1)));
  out.insert(out.end(), x.shape.begin() + end + 1, x.shape.end());
  return {x.dtype, out};
}

TensorType infer_concat(const OpInfo& op, std::span<const TensorType> in, const Attrs& attrs) {
  bool stack = op.op == Op::Stack;
  const TensorType& first = in[0];
  int64_t rank = rank_of(first);
  if (!stack && rank == 0) EMBER_OP_ERROR(Value, op, "cannot concatenate 0-d tensors");
  int64_t axis = normalize_axis(op.name, attr_int(attrs, "axis"), stack ? rank + 1 : rank);
  Dim total(0);
  for (size_t i = 0; i < in.size(); ++i) {
    if (rank_of(in[i]) != rank)
      EMBER_OP_ERROR(Value, op, "inputs must have the same rank: input 0 is ", first.str(), ", input ", i, " is ", in[i].str());
    for (int64_t d = 0; d < rank; ++d) {
      if (!stack && d == axis) continue;
      require_equal_dims(op.name, in[i].shape[d], first.shape[d],
                         detail::concat("input ", i, " ", in[i].str(), " differs from input 0 ", first.str(), " in dim ", d));
    }
    if (!stack) total = total + in[i].shape[axis];
  }
  Shape out = first.shape;
  if (stack) out.insert(out.begin() + axis, Dim(static_cast<int64_t>(in.size())));
  else out[axis] = total;
  return {promoted_dtype(in), out};
}

TensorType infer_pad(const OpInfo& op, std::span<const TensorType> in, const Attrs& attrs) {
  const TensorType& x = in[0];
  const Ints& pads = attr_ints(attrs, "pads");
  if (pads.size() % 2 != 0 || static_cast<int64_t>(pads.size() / 2) > rank_of(x))
    EMBER_OP_ERROR(Value, op, "pads must hold (before, after) pairs for at most ", rank_of(x),
                   " dims (last dim first), got ", pads.size(), " values");
  Shape out = x.shape;
  for (size_t i = 0; i < pads.size() / 2; ++i) {
    Dim& d = out[out.size() - 1 - i];
    d = d + Dim(pads[2 * i]) + Dim(pads[2 * i + 1]);
    if (d.is_static() && d.value() < 0)
      EMBER_OP_ERROR(Value, op, "pads ", attr_str(Attr(pads)), " make dim ", out.size() - 1 - i, " negative for ", x.str());
  }
  return {x.dtype, out};
}

void check_index(const OpInfo& op, const TensorType& idx) {
  if (!is_integral(idx.dtype))
    EMBER_OP_ERROR(Type, op, "index must be an integer tensor, got ", dtype_name(idx.dtype));
}

TensorType infer_index_select(const OpInfo& op, std::span<const TensorType> in, const Attrs& attrs) {
  const TensorType &x = in[0], &idx = in[1];
  check_index(op, idx);
  if (rank_of(idx) > 1) EMBER_OP_ERROR(Value, op, "index must be 0-d or 1-d, got ", idx.str());
  int64_t axis = normalize_axis(op.name, attr_int(attrs, "axis"), rank_of(x));
  Shape out = x.shape;
  if (!out.empty()) out[axis] = idx.shape.empty() ? Dim(1) : idx.shape[0];
  return {x.dtype, out};
}

TensorType infer_gather(const OpInfo& op, std::span<const TensorType> in, const Attrs& attrs) {
  const TensorType &x = in[0], &idx = in[1];
  check_index(op, idx);
  if (rank_of(idx) != rank_of(x))
    EMBER_OP_ERROR(Value, op, "index ", idx.str(), " must have the rank of input ", x.str());
  int64_t axis = normalize_axis(op.name, attr_int(attrs, "axis"), rank_of(x));
  for (int64_t d = 0; d < rank_of(x); ++d) {
    if (d == axis) continue;
    if (idx.shape[d].is_static() && x.shape[d].is_static() && idx.shape[d].value() > x.shape[d].value())
      EMBER_OP_ERROR(Value, op, "index ", idx.str(), " is larger than input ", x.str(), " in dim ", d);
    assume_nonnegative(x.shape[d] - idx.shape[d], "[gather] the index fits in the input");
  }
  return {x.dtype, idx.shape};
}

TensorType infer_embedding(const OpInfo& op, std::span<const TensorType> in, const Attrs&) {
  const TensorType &w = in[0], &idx = in[1];
  check_rank(op, w, 2, "weight");
  check_index(op, idx);
  Shape out = idx.shape;
  out.push_back(w.shape[1]);
  return {w.dtype, out};
}

// src must be written into x: x's dtype, since the output is x's.
void check_source(const OpInfo& op, const TensorType& x, const TensorType& src) {
  if (src.dtype != x.dtype)
    EMBER_OP_ERROR(Type, op, "src ", src.str(), " must have the dtype of input ", x.str());
  if (rank_of(src) != rank_of(x)) EMBER_OP_ERROR(Value, op, "src ", src.str(), " must have the rank of input ", x.str());
}

TensorType infer_index_put(const OpInfo& op, std::span<const TensorType> in, const Attrs& attrs) {
  const TensorType &x = in[0], &idx = in[1], &src = in[2];
  check_index(op, idx);
  if (rank_of(idx) != 1) EMBER_OP_ERROR(Value, op, "index must be 1-d, got ", idx.str());
  if (rank_of(x) == 0) EMBER_OP_ERROR(Value, op, "input must have a dim to index, got ", x.str());
  check_source(op, x, src);
  int64_t axis = normalize_axis(op.name, attr_int(attrs, "axis"), rank_of(x));
  for (int64_t d = 0; d < rank_of(x); ++d)
    require_equal_dims(op.name, src.shape[d], d == axis ? idx.shape[0] : x.shape[d],
                       detail::concat("src ", src.str(), " must be input ", x.str(), " with index ", idx.str(),
                                      "'s length along the axis; dim ", d, " differs"));
  return x;
}

// Integers and bool sum into int64, as in PyTorch; floats keep their dtype.
TensorType infer_cumsum(const OpInfo& op, std::span<const TensorType> in, const Attrs& attrs) {
  const TensorType& x = in[0];
  normalize_axis(op.name, attr_int(attrs, "axis"), std::max<int64_t>(rank_of(x), 1));
  return {is_floating(x.dtype) ? x.dtype : DType::Int64, x.shape};
}

TensorType infer_scatter(const OpInfo& op, std::span<const TensorType> in, const Attrs& attrs) {
  const TensorType &x = in[0], &idx = in[1], &src = in[2];
  check_index(op, idx);
  check_source(op, x, src);
  if (rank_of(idx) != rank_of(x)) EMBER_OP_ERROR(Value, op, "index ", idx.str(), " must have the rank of input ", x.str());
  int64_t axis = normalize_axis(op.name, attr_int(attrs, "axis"), std::max<int64_t>(rank_of(x), 1));
  for (int64_t d = 0; d < rank_of(x); ++d) {
    if (idx.shape[d].is_static() && src.shape[d].is_static() && idx.shape[d].value() > src.shape[d].value())
      EMBER_OP_ERROR(Value, op, "index ", idx.str(), " is larger than src ", src.str(), " in dim ", d);
    assume_nonnegative(src.shape[d] - idx.shape[d], "[scatter] the index fits in src");
    if (d == axis) continue;
    if (idx.shape[d].is_static() && x.shape[d].is_static() && idx.shape[d].value() > x.shape[d].value())
      EMBER_OP_ERROR(Value, op, "index ", idx.str(), " is larger than input ", x.str(), " in dim ", d);
    assume_nonnegative(x.shape[d] - idx.shape[d], "[scatter] the index fits in the input");
  }
  return x;
}

}  // namespace

void register_movement(Table& table) {
  auto set = [&](Op op, const char* doc, InferFn infer, std::vector<AttrSpec> attrs) {
    OpInfo& info = table[static_cast<size_t>(op)];
    info.doc = doc;
    info.infer = infer;
    info.attrs = std::move(attrs);
  };
  set(Op::Reshape, "same elements in a new shape; one dim may be -1", infer_reshape,
      {{"shape", AttrType::Shape, std::nullopt}});
  set(Op::Permute, "reorder dims: output dim i is input dim dims[i]", infer_permute,
      {{"dims", AttrType::Ints, std::nullopt}});
  set(Op::Transpose, "swap two dims", infer_transpose,
      {{"dim0", AttrType::Int, std::nullopt}, {"dim1", AttrType::Int, std::nullopt}});
  set(Op::Expand, "broadcast size-1 dims to `shape` without copying; -1 keeps a dim", infer_expand,
      {{"shape", AttrType::Shape, std::nullopt}});
  set(Op::Slice, "elements start, start+step, ... before end along `axis` (Python semantics)", infer_slice,
      {{"axis", AttrType::Int, std::nullopt}, {"start", AttrType::Int, Attr(int64_t{0})},
       {"end", AttrType::Int, Attr(kToEnd)}, {"step", AttrType::Int, Attr(int64_t{1})},
       // The result's length, when it is a size rather than a number (x[:, :seq] with a symbolic
       // seq): then `end` is not given. A plan checks at run time that it stays inside x.
       {"length", AttrType::Shape, Attr(Shape{})}});
  set(Op::Squeeze, "drop size-1 dims among `axes` (all when empty)", infer_squeeze,
      {{"axes", AttrType::Ints, Attr(Ints{})}});
  set(Op::Unsqueeze, "insert a size-1 dim at `axis`", infer_unsqueeze, {{"axis", AttrType::Int, std::nullopt}});
  set(Op::Flatten, "merge dims start..end into one", infer_flatten,
      {{"start", AttrType::Int, Attr(int64_t{0})}, {"end", AttrType::Int, Attr(int64_t{-1})}});
  OpInfo& split = table[static_cast<size_t>(Op::Split)];
  split.doc =
      "one output per entry of `sizes`: consecutive parts along `axis` (torch.split_with_sizes)";
  split.infer_multi = infer_split;
  split.attrs = {{"sizes", AttrType::Ints, std::nullopt},
                 {"axis", AttrType::Int, Attr(int64_t{0})}};
  set(Op::Concat, "join along an existing axis; dtypes promote", infer_concat, {{"axis", AttrType::Int, Attr(int64_t{0})}});
  set(Op::Stack, "join along a new axis; dtypes promote", infer_concat, {{"axis", AttrType::Int, Attr(int64_t{0})}});
  set(Op::Pad, "constant padding; pads are (before, after) pairs, last dim first, negative crops", infer_pad,
      {{"pads", AttrType::Ints, std::nullopt}, {"value", AttrType::Float, Attr(0.0)}});
  // `wrap`: a negative index counts from the end, as in Python; false: it is out of range and
  // raises, as in PyTorch, whose ops the bridge lowers to these.
  const AttrSpec wrap{"wrap", AttrType::Bool, Attr(true)};
  set(Op::IndexSelect, "pick entries along `axis` by a 1-d index", infer_index_select,
      {{"axis", AttrType::Int, std::nullopt}, wrap});
  set(Op::Gather, "out[i][j] = x[index[i][j]][j] along `axis` (torch.gather)", infer_gather,
      {{"axis", AttrType::Int, std::nullopt}, wrap});
  set(Op::Embedding, "rows of weight [num, dim] picked by an integer index of any shape", infer_embedding, {wrap});
  const AttrSpec accumulate{"accumulate", AttrType::Bool, Attr(false)};
  set(Op::IndexPut,
      "x with its entries along `axis` at index[i] replaced by src's i-th, or increased by them when "
      "`accumulate` (torch.index_copy, index_add)",
      infer_index_put, {{"axis", AttrType::Int, std::nullopt}, accumulate, wrap});
  set(Op::Scatter,
      "x with x[..., index[i][j], ...] along `axis` replaced by src[i][j], or increased by it when `accumulate` "
      "(torch.scatter, scatter_add)",
      infer_scatter, {{"axis", AttrType::Int, std::nullopt}, accumulate, wrap});
  set(Op::Cumsum,
      "running sums along `axis`: out[i] = x[0] + ... + x[i]; integers and bool sum into int64 "
      "(torch.cumsum)",
      infer_cumsum, {{"axis", AttrType::Int, std::nullopt}});
}

}  // namespace ember::ops

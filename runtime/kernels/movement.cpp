// Views share storage (new shape, strides and offset); the other movement ops copy.
#include <algorithm>
#include <array>
#include <cstring>
#include <limits>

#include "runtime/kernels/kernel.h"
#include "runtime/thread_pool.h"

namespace ember::kernels {

namespace {

Array view_as(const Array& x, std::vector<int64_t> shape, std::vector<int64_t> strides, int64_t offset) {
  return x.view(std::move(shape), std::move(strides), offset);
}

// Strides for viewing `x` with `shape` without copying, if possible (PyTorch's computeStride:
// walk chunks of dims that are contiguous with each other and split or merge within a chunk).
bool reshape_strides(const Array& x, const std::vector<int64_t>& shape, std::vector<int64_t>& out) {
  if (x.is_contiguous() || x.numel() == 0 || x.rank() == 0) {
    out = Array::contiguous_strides(shape);
    return true;
  }
  const auto &old_shape = x.shape(), &old_strides = x.strides();
  out.assign(shape.size(), 0);
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk_stride = old_strides.back(), tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(old_shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= old_shape[d];
    if (d == 0 || (old_shape[d - 1] != 1 && old_strides[d - 1] != tensor_numel * chunk_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_stride;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (d > 0) {
        chunk_stride = old_strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

Array reshape(const Call& call) {
  const Array& x = call.inputs[0];
  std::vector<int64_t> strides;
  if (reshape_strides(x, call.shape, strides)) return view_as(x, call.shape, strides, x.offset());
  Array c = x.contiguous();
  return view_as(c, call.shape, Array::contiguous_strides(call.shape), c.offset());
}

Array permute_by(const Array& x, const std::vector<int64_t>& dims) {
  std::vector<int64_t> shape, strides;
  for (int64_t d : dims) {
    shape.push_back(x.shape()[d]);
    strides.push_back(x.strides()[d]);
  }
  return view_as(x, shape, strides, x.offset());
}

Array permute(const Call& call) {
  const Array& x = call.inputs[0];
  std::vector<int64_t> dims;
  for (int64_t d : attr_ints(call.attrs, "dims")) dims.push_back(normalize_axis("permute", d, x.rank()));
  return permute_by(x, dims);
}

Array transpose(const Call& call) {
  const Array& x = call.inputs[0];
  if (x.rank() == 0) return x;
  std::vector<int64_t> dims(x.rank());
  for (int64_t i = 0; i < x.rank(); ++i) dims[i] = i;
  std::swap(dims[normalize_axis("transpose", attr_int(call.attrs, "dim0"), x.rank())],
            dims[normalize_axis("transpose", attr_int(call.attrs, "dim1"), x.rank())]);
  return permute_by(x, dims);
}

Array expand(const Call& call) {
  const Array& x = call.inputs[0];
  return view_as(x, call.shape, broadcast_strides(x, call.shape), x.offset());
}

Array slice(const Call& call) {
  const Array& x = call.inputs[0];
  int64_t axis = normalize_axis("slice", attr_int(call.attrs, "axis"), x.rank());
  int64_t n = x.shape()[axis], start = attr_int(call.attrs, "start"), step = attr_int(call.attrs, "step");
  if (start < 0) start += n;
  start = std::clamp<int64_t>(start, 0, n);
  int64_t length = call.shape[axis];
  if (length > 0 && start + (length - 1) * step >= n)  // a symbolic `length` that is too long here
    EMBER_THROW(Value, "[slice] ", length, " elements from ", start, " with step ", step, " pass the end of ", n);
  std::vector<int64_t> strides = x.strides();
  int64_t offset = x.offset() + (call.shape[axis] > 0 ? start * strides[axis] : 0);
  strides[axis] *= step;
  return view_as(x, call.shape, strides, offset);
}

// Consecutive views along the axis, one per entry of `sizes` (an empty part starts nowhere, so
// its offset stays within the storage).
std::vector<Array> split(const Call& call) {
  const Array& x = call.inputs[0];
  int64_t axis = normalize_axis("split", attr_int(call.attrs, "axis"), x.rank()), start = 0;
  std::vector<Array> parts;
  for (const std::vector<int64_t>& shape : call.shapes) {
    int64_t offset = x.offset() + (shape[axis] > 0 ? start * x.strides()[axis] : 0);
    parts.push_back(view_as(x, shape, x.strides(), offset));
    start += shape[axis];
  }
  return parts;
}

Array concat(const Call& call) {
  Array out = output(call);
  int64_t axis = normalize_axis("concat", attr_int(call.attrs, "axis"), static_cast<int64_t>(call.shape.size()));
  int64_t pos = 0;
  for (const Array& in : call.inputs) {
    int64_t len = call.op == Op::Stack ? 1 : in.shape()[axis];
    Array dst = narrow(out, axis, pos, len);
    if (call.op == Op::Stack) {  // view the slot as the input's shape
      std::vector<int64_t> s = dst.strides();
      s.erase(s.begin() + axis);
      dst = out.view(in.shape(), s, dst.offset());
    }
    copy_into(in, dst);
    pos += len;
  }
  return out;
}

// A contiguous x padded without cropping into the contiguous `out` (filled already): each row
// of x (its last dim) is copied to its place, rows split over the pool. The general copy walks
// rows at about 50 ns a row, and the pads before MobileNetV2's convolutions are mostly rows of
// 3 to 25 values.
void pad_rows(const Array& x, const Array& out, const std::vector<int64_t>& pads) {
  const int64_t rank = x.rank(), width = x.shape()[rank - 1], rows = x.numel() / std::max<int64_t>(width, 1);
  std::vector<int64_t> before(rank, 0);
  for (size_t p = 0; p < pads.size() / 2; ++p) before[rank - 1 - p] = pads[2 * p];
  const std::vector<int64_t> strides = Array::contiguous_strides(out.shape());
  const size_t size = itemsize(x.dtype());
  const char* src = static_cast<const char*>(x.data());
  char* dst = static_cast<char*>(out.data());
  parallel_for(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(width, 1)), [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      int64_t at = before[rank - 1], rest = r;
      for (int64_t d = rank - 2; d >= 0; --d) {
        at += (rest % x.shape()[d] + before[d]) * strides[d];
        rest /= x.shape()[d];
      }
      std::memcpy(dst + at * size, src + r * width * size, width * size);
    }
  });
}

Array pad(const Call& call) {
  const Array& x = call.inputs[0];
  Array out = output(call);
  double value = attr_float(call.attrs, "value");
  fill_with(out, value);
  const auto& pads = attr_ints(call.attrs, "pads");
  bool crops = std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p < 0; });
  bool plain = x.is_contiguous() && out.is_contiguous() && x.dtype() == out.dtype();
  if (!crops && plain && x.rank() > 0 && x.numel() > 0) {
    pad_rows(x, out, pads);
    return out;
  }
  // Copy the overlap of input and output regions; negative pads crop.
  Array src = x, dst = out;
  for (size_t p = 0; p < pads.size() / 2; ++p) {
    int64_t axis = x.rank() - 1 - static_cast<int64_t>(p);
    int64_t before = pads[2 * p], after = pads[2 * p + 1];
    int64_t src_start = std::max<int64_t>(0, -before), dst_start = std::max<int64_t>(0, before);
    int64_t len = x.shape()[axis] - src_start - std::max<int64_t>(0, -after);
    if (len <= 0) return out;
    src = narrow(src, axis, src_start, len);
    dst = narrow(dst, axis, dst_start, len);
  }
  copy_into(src, dst);
  return out;
}

// An index array's values as int64, in order: one conversion pass, where reading each through
// Array::get_int (its strides and dtype every time) was most of a gather's time.
std::vector<int64_t> index_values(const Array& idx) {
  Array ids = to_contiguous(idx, DType::Int64);
  const int64_t* p = ids.data_as<int64_t>();
  return std::vector<int64_t>(p, p + ids.numel());
}

// Row by row for a contiguous x: each index copies its slab of x (the dims after the axis) with
// one memcpy, split over the threads. BEiT's relative position bias (a [228, 4] table, 4,225
// indices) took 1.2 ms through a view and a general copy per index; eager takes 14-33 us.
Array index_select(const Call& call) {
  const Array &x = call.inputs[0], &idx = call.inputs[1];
  Array out = output(call);
  if (x.rank() == 0) {
    if (idx.numel()) checked_index("index_select", idx.get_int(0), 1, attr_bool(call.attrs, "wrap"));
    copy_into(x, out);
    return out;
  }
  int64_t axis = normalize_axis("index_select", attr_int(call.attrs, "axis"), x.rank());
  bool wrap = attr_bool(call.attrs, "wrap");
  std::vector<int64_t> rows = index_values(idx);
  for (int64_t& j : rows) j = checked_index("index_select", j, x.shape()[axis], wrap);
  const int64_t n = static_cast<int64_t>(rows.size());
  if (x.is_contiguous() && out.is_contiguous() && x.dtype() == out.dtype()) {
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= x.shape()[d];
    for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.shape()[d];
    const size_t slab = static_cast<size_t>(inner) * itemsize(x.dtype());
    const int64_t size = x.shape()[axis];
    const char* from = static_cast<const char*>(x.data());
    char* to = static_cast<char*>(out.data());
    parallel_for(outer * n, std::max<int64_t>(1, 65536 / std::max<int64_t>(static_cast<int64_t>(slab), 1)),
                 [&](int64_t lo, int64_t hi) {
                   for (int64_t t = lo; t < hi; ++t)
                     std::memcpy(to + t * slab, from + ((t / n) * size + rows[t % n]) * slab, slab);
                 });
    return out;
  }
  for (int64_t i = 0; i < n; ++i) copy_into(narrow(x, axis, rows[i], 1), narrow(out, axis, i, 1));
  return out;
}

namespace {

// out[i] = x at the position of idx's element i, with its coordinate on the axis replaced by
// that element's value; U is the elements' width.
template <class U>
void gather_elements(const Array& x, const Array& idx, const std::vector<int64_t>& ids, int64_t axis, bool wrap,
                     U* out) {
  std::array<std::vector<int64_t>, 1> strides{x.strides()};
  strides[0][axis] = 0;  // the row walk gives the other coordinates' offset; the index adds its own
  const int64_t axis_stride = x.strides()[axis], axis_size = x.shape()[axis];
  const U* base = static_cast<const U*>(x.data());
  int64_t i = 0;
  for_each_row<1>(idx.shape(), strides, [&](auto off, int64_t n, auto inner) {
    for (int64_t j = 0; j < n; ++j, ++i) {
      int64_t k = checked_index("gather", ids[i], axis_size, wrap);
      out[i] = base[off[0] + j * inner[0] + k * axis_stride];
    }
  });
}

}  // namespace

// Along the index's own shape (which may be smaller than x's off the axis), its values read
// once as int64: 30 ns an element through per-element index arithmetic before, DeBERTa's
// relative-position gathers 934 us of a 1.4 ms plan.
Array gather(const Call& call) {
  const Array &x = call.inputs[0], &idx = call.inputs[1];
  Array out = output(call);
  int64_t axis = normalize_axis("gather", attr_int(call.attrs, "axis"), x.rank());
  bool wrap = attr_bool(call.attrs, "wrap");
  if (idx.numel() == 0) return out;
  std::vector<int64_t> ids = index_values(idx);
  if (x.rank() == 0 || idx.rank() == 0) {  // one element: every other coordinate is 0
    int64_t k = checked_index("gather", ids[0], x.rank() ? x.shape()[axis] : 1, wrap);
    std::memcpy(out.data(), byte_ptr(x, x.rank() ? k * x.strides()[axis] : 0), itemsize(x.dtype()));
    return out;
  }
  void* to = out.data();
  switch (itemsize(x.dtype())) {
    case 1: gather_elements(x, idx, ids, axis, wrap, static_cast<uint8_t*>(to)); break;
    case 2: gather_elements(x, idx, ids, axis, wrap, static_cast<uint16_t*>(to)); break;
    case 4: gather_elements(x, idx, ids, axis, wrap, static_cast<uint32_t*>(to)); break;
    default: gather_elements(x, idx, ids, axis, wrap, static_cast<uint64_t*>(to)); break;
  }
  return out;
}

// Rows checked first, then copied on the threads: a batch of tokens is thousands of rows.
Array embedding(const Call& call) {
  const Array &w = call.inputs[0], &idx = call.inputs[1];
  Array out = output(call);
  int64_t dim = w.shape()[1], n = idx.numel();
  bool wrap = attr_bool(call.attrs, "wrap");
  std::vector<int64_t> rows(n);
  for (int64_t i = 0; i < n; ++i) rows[i] = checked_index("embedding", idx.get_int(i), w.shape()[0], wrap);
  std::vector<int64_t> row_shape{dim};
  const size_t row_bytes = static_cast<size_t>(dim) * itemsize(w.dtype());
  parallel_for(n, std::max<int64_t>(1, 16384 / std::max<int64_t>(dim, 1)), [&](int64_t begin, int64_t end) {
    char* to = static_cast<char*>(out.data());
    if (w.strides()[1] == 1) {  // rows of the table are contiguous: a copy each, no views (1 us a row)
      for (int64_t i = begin; i < end; ++i)
        std::memcpy(to + i * row_bytes, byte_ptr(w, rows[i] * w.strides()[0]), row_bytes);
      return;
    }
    for (int64_t i = begin; i < end; ++i) {
      Array src = w.view(row_shape, {w.strides()[1]}, w.offset() + rows[i] * w.strides()[0]);
      copy_into(src, out.view(row_shape, {1}, i * dim));
    }
  });
  return out;
}

}  // namespace

void register_movement(KernelTable& t) {
  auto set = [&](Op op, Kernel k) { t[static_cast<size_t>(op)] = k; };
  set(Op::Reshape, reshape);
  set(Op::Flatten, reshape);
  set(Op::Permute, permute);
  set(Op::Transpose, transpose);
  set(Op::Expand, expand);
  set(Op::Slice, slice);
  set(Op::Squeeze, reshape);  // dropping or adding size-1 dims is a reshape
  set(Op::Unsqueeze, reshape);
  set(Op::Concat, concat);
  set(Op::Stack, concat);
  set(Op::Pad, pad);
  set(Op::IndexSelect, index_select);
  set(Op::Gather, gather);
  set(Op::Embedding, embedding);
}

bool view_copies(Op op, const Array& x, const std::vector<int64_t>& shape) {
  const bool through_reshape = op == Op::Reshape || op == Op::Flatten || op == Op::Squeeze || op == Op::Unsqueeze;
  std::vector<int64_t> strides;
  return through_reshape && !reshape_strides(x, shape, strides);
}

void register_split(MultiKernelTable& t) { t[static_cast<size_t>(Op::Split)] = split; }

}  // namespace ember::kernels

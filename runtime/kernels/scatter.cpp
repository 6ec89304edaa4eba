// Writes at indices: index_put (whole entries along an axis: torch.index_copy, index_add, and
// the embedding's gradient) and scatter (single elements: torch.scatter, scatter_add).
// Both start from a copy of x. Duplicate indices accumulate in index order; without
// `accumulate` the last write wins, as in eager's serial CPU kernels.
#include <cstring>

#include "runtime/element.h"
#include "runtime/kernels/kernel.h"

namespace ember::kernels {

namespace {

// *dst += *src, in the element's own arithmetic: floats through double (exact for one sum of
// two float32 values before the rounding back), integers wrapping at their width, bool as or.
inline void add_element(char* dst, const char* src, DType t) {
  if (t == DType::Float32) {
    *reinterpret_cast<float*>(dst) += *reinterpret_cast<const float*>(src);
  } else if (is_floating(t)) {
    element::store<double>(dst, t, element::load<double>(dst, t) + element::load<double>(src, t));
  } else {
    element::store<int64_t>(dst, t, element::load<int64_t>(dst, t) + element::load<int64_t>(src, t));
  }
}

// dst += src, elementwise over arrays of one shape and dtype.
void add_into(const Array& src, const Array& dst) {
  DType t = dst.dtype();
  std::array<std::vector<int64_t>, 2> strides{src.strides(), dst.strides()};
  for_each_row<2>(dst.shape(), strides, [&](const std::array<int64_t, 2>& at, int64_t n, const std::array<int64_t, 2>& step) {
    if (t == DType::Float32 && step[0] == 1 && step[1] == 1) {  // the embedding gradient's rows
      const float* s = reinterpret_cast<const float*>(byte_ptr(src, at[0]));
      float* d = reinterpret_cast<float*>(byte_ptr(dst, at[1]));
      for (int64_t j = 0; j < n; ++j) d[j] += s[j];
      return;
    }
    for (int64_t j = 0; j < n; ++j) add_element(byte_ptr(dst, at[1] + j * step[1]), byte_ptr(src, at[0] + j * step[0]), t);
  });
}

Array index_put(const Call& call) {
  const Array &x = call.inputs[0], &idx = call.inputs[1], &src = call.inputs[2];
  Array out = output(call);
  copy_into(x, out);
  int64_t axis = normalize_axis("index_put", attr_int(call.attrs, "axis"), x.rank());
  bool wrap = attr_bool(call.attrs, "wrap"), accumulate = attr_bool(call.attrs, "accumulate");
  for (int64_t i = 0; i < idx.numel(); ++i) {
    int64_t j = checked_index("index_put", idx.get_int(i), x.shape()[axis], wrap);
    if (accumulate) add_into(narrow(src, axis, i, 1), narrow(out, axis, j, 1));
    else copy_into(narrow(src, axis, i, 1), narrow(out, axis, j, 1));
  }
  return out;
}

Array scatter(const Call& call) {
  const Array &x = call.inputs[0], &idx = call.inputs[1], &src = call.inputs[2];
  Array out = output(call);
  copy_into(x, out);
  int64_t rank = idx.rank();
  int64_t axis = normalize_axis("scatter", attr_int(call.attrs, "axis"), std::max<int64_t>(rank, 1));
  bool wrap = attr_bool(call.attrs, "wrap"), accumulate = attr_bool(call.attrs, "accumulate");
  size_t size = itemsize(x.dtype());
  int64_t axis_size = rank ? x.shape()[axis] : 1;
  std::vector<int64_t> pos(rank);
  for (int64_t i = 0; i < idx.numel(); ++i) {
    int64_t rem = i;
    for (int64_t d = rank - 1; d >= 0; --d) {
      pos[d] = rem % idx.shape()[d];
      rem /= idx.shape()[d];
    }
    int64_t target = checked_index("scatter", idx.get_int(i), axis_size, wrap);
    int64_t from = 0, to = 0;  // element offsets from each array's first element
    for (int64_t d = 0; d < rank; ++d) {
      from += pos[d] * src.strides()[d];
      to += (d == axis ? target : pos[d]) * out.strides()[d];
    }
    if (accumulate) add_element(byte_ptr(out, to), byte_ptr(src, from), x.dtype());
    else std::memcpy(byte_ptr(out, to), byte_ptr(src, from), size);
  }
  return out;
}

}  // namespace

void register_scatter(KernelTable& t) {
  t[static_cast<size_t>(Op::IndexPut)] = index_put;
  t[static_cast<size_t>(Op::Scatter)] = scatter;
}

}  // namespace ember::kernels

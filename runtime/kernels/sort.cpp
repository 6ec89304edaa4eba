// sort and topk: each row along the axis is ordered by a stable sort of its indices, so ties keep
// their input order. NaN sorts above every number (PyTorch's order). Integers compare exactly.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "runtime/kernels/kernel.h"
#include "runtime/thread_pool.h"

namespace ember::kernels {

namespace {

// One row: n elements at base, base + stride, ... (strides in elements).
struct Rows {
  std::vector<int64_t> outer_shape, outer_strides;
  int64_t n = 1, stride = 0;
};

Rows rows_along(const Array& x, const Attrs& attrs, const char* op) {
  Rows r{x.shape(), x.strides()};
  if (x.rank() == 0) return r;  // a 0-d tensor is one row of one element
  int64_t axis = normalize_axis(op, attr_int(attrs, "axis"), x.rank());
  r.n = x.shape()[axis];
  r.stride = x.strides()[axis];
  r.outer_shape.erase(r.outer_shape.begin() + axis);
  r.outer_strides.erase(r.outer_strides.begin() + axis);
  return r;
}

// True when a sorts before b in ascending order, NaN last; descending puts NaN first.
template <class T>
bool before(T a, T b, bool descending) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) || std::isnan(b))
      return descending ? std::isnan(a) && !std::isnan(b) : !std::isnan(a) && std::isnan(b);
  }
  return descending ? a > b : a < b;
}

// The first k of the order of one row's elements (indices into the row), stable: ties keep their
// input order. Few of many (topk) are picked by a partial sort, which ranks ties by index, so the
// first k are the stable sort's.
template <class T>
std::vector<int64_t> order_row(const char* p, const Rows& r, DType dtype, bool descending, int64_t k) {
  int64_t step = r.stride * static_cast<int64_t>(itemsize(dtype));
  std::vector<T> v(r.n);
  for (int64_t j = 0; j < r.n; ++j) v[j] = element::load<T>(p + j * step, dtype);
  std::vector<int64_t> idx(r.n);
  std::iota(idx.begin(), idx.end(), 0);
  if (k * 8 < r.n) {
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int64_t a, int64_t b) {
      return before(v[a], v[b], descending) || (!before(v[b], v[a], descending) && a < b);
    });
  } else {
    std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return before(v[a], v[b], descending); });
  }
  idx.resize(k);
  return idx;
}

// Writes the first `k` of `order` for every row into (values, indices), which have the row's
// length k along the axis and are contiguous. `keep_input_order` lists the chosen ones by index.
std::vector<Array> select(const Call& call, const char* op, bool descending, int64_t k,
                          bool keep_input_order) {
  const Array& x = call.inputs[0];
  Rows r = rows_along(x, call.attrs, op);
  Array values = output(call, 0);
  Array indices = output(call, 1);
  // Output element (i, j) of row i sits at the row's outer index times k plus j times the inner
  // size, since the outputs are contiguous with the axis dim of size k.
  int64_t inner = 1;
  if (x.rank() > 0) {
    int64_t axis = normalize_axis(op, attr_int(call.attrs, "axis"), x.rank());
    for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.shape()[d];
  }
  size_t size = itemsize(x.dtype());
  int64_t rows = 1;
  for (int64_t d : r.outer_shape) rows *= d;
  parallel_for(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, r.n)), [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const char* p = byte_ptr(x, strided_offset(i, r.outer_shape, r.outer_strides));
      std::vector<int64_t> order = is_floating(x.dtype()) ? order_row<double>(p, r, x.dtype(), descending, k)
                                                          : order_row<int64_t>(p, r, x.dtype(), descending, k);
      if (keep_input_order) std::sort(order.begin(), order.end());
      int64_t base = (i / inner) * k * inner + i % inner;
      for (int64_t j = 0; j < k; ++j) {
        const char* element = p + order[j] * r.stride * static_cast<int64_t>(size);
        std::memcpy(byte_ptr(values, base + j * inner), element, size);
        indices.data_as<int64_t>()[base + j * inner] = order[j];
      }
    }
  });
  return {values, indices};
}

std::vector<Array> sort(const Call& call) {
  int64_t n = call.inputs[0].rank() == 0 ? 1 : rows_along(call.inputs[0], call.attrs, "sort").n;
  return select(call, "sort", attr_bool(call.attrs, "descending"), n, false);
}

std::vector<Array> topk(const Call& call) {
  return select(call, "topk", attr_bool(call.attrs, "largest"), attr_int(call.attrs, "k"),
                !attr_bool(call.attrs, "sorted"));
}

}  // namespace

void register_sorting(MultiKernelTable& t) {
  t[static_cast<size_t>(Op::Sort)] = sort;
  t[static_cast<size_t>(Op::TopK)] = topk;
}

}  // namespace ember::kernels

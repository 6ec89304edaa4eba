// cumsum: running sums along an axis, each line of the axis in order. As PyTorch's CPU kernel
// (its acc_type): float32 and float64 accumulate in double, float16 and bfloat16 in float, and
// each running sum is rounded once into the output; integers and bool sum in int64, wrapping.
#include <algorithm>

#include "runtime/element.h"
#include "runtime/kernels/kernel.h"
#include "runtime/thread_pool.h"

namespace ember::kernels {

namespace {

template <class Acc>
void scan_line(const char* in, int64_t in_step, DType in_t, char* out, int64_t out_step, DType out_t, int64_t n) {
  Acc acc = 0;
  for (int64_t j = 0; j < n; ++j) {
    Acc v = element::load<Acc>(in + j * in_step, in_t);
    if constexpr (std::is_integral_v<Acc>) acc = static_cast<Acc>(static_cast<uint64_t>(acc) + static_cast<uint64_t>(v));
    else acc += v;
    element::store<Acc>(out + j * out_step, out_t, acc);
  }
}

Array cumsum(const Call& call) {
  const Array& x = call.inputs[0];
  Array out = output(call);
  int64_t rank = x.rank();
  int64_t axis = rank ? normalize_axis("cumsum", attr_int(call.attrs, "axis"), rank) : 0;
  int64_t n = rank ? x.shape()[axis] : 1;
  std::vector<int64_t> outer_shape = x.shape(), in_strides = x.strides(), out_strides = out.strides();
  int64_t in_step = rank ? in_strides[axis] : 0, out_step = rank ? out_strides[axis] : 0;
  if (rank) {
    outer_shape.erase(outer_shape.begin() + axis);
    in_strides.erase(in_strides.begin() + axis);
    out_strides.erase(out_strides.begin() + axis);
  }
  int64_t lines = 1;
  for (int64_t d : outer_shape) lines *= d;
  if (lines == 0 || n == 0) return out;
  DType in_t = x.dtype(), out_t = out.dtype();
  int64_t in_bytes = static_cast<int64_t>(itemsize(in_t)), out_bytes = static_cast<int64_t>(itemsize(out_t));
  parallel_for(lines, std::max<int64_t>(1, 16384 / n), [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const char* in = byte_ptr(x, strided_offset(i, outer_shape, in_strides));
      char* o = byte_ptr(out, strided_offset(i, outer_shape, out_strides));
      if (in_t == DType::Float16 || in_t == DType::BFloat16)
        scan_line<float>(in, in_step * in_bytes, in_t, o, out_step * out_bytes, out_t, n);
      else if (is_floating(in_t))
        scan_line<double>(in, in_step * in_bytes, in_t, o, out_step * out_bytes, out_t, n);
      else
        scan_line<int64_t>(in, in_step * in_bytes, in_t, o, out_step * out_bytes, out_t, n);
    }
  });
  return out;
}

}  // namespace

void register_scans(KernelTable& t) { t[static_cast<size_t>(Op::Cumsum)] = cumsum; }

}  // namespace ember::kernels

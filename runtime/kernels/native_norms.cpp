// native_layer_norm and native_batch_norm: the norms with their statistics as extra outputs
// (aten's forms), computed in double and rounded once to the output dtype.
#include <cmath>

#include "runtime/kernels/kernel.h"

namespace ember::kernels {

namespace {

// A contiguous double buffer of `shape`, to fill and then round into `dtype`.
struct Out {
  Array data;
  double* p;
  explicit Out(const std::vector<int64_t>& shape)
      : data(Array::empty(DType::Float64, shape)), p(data.data_as<double>()) {}
};

const double* doubles(const Array& a, Array& keep) {
  keep = to_contiguous(a, DType::Float64);
  return keep.data_as<double>();
}

// Rows of `size` elements: the last `ndim` dims of x. Over zero elements mean and rstd are NaN.
std::vector<Array> native_layer_norm(const Call& call) {
  Array xk, wk, bk;
  const double* x = doubles(call.inputs[0], xk);
  const double* w = doubles(call.inputs[1], wk);
  const double* b = doubles(call.inputs[2], bk);
  double eps = attr_float(call.attrs, "eps");
  Out y(call.shapes[0]), mean(call.shapes[1]), rstd(call.shapes[2]);
  int64_t rows = mean.data.numel(), size = rows == 0 ? 0 : y.data.numel() / rows;
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = x + r * size;
    double m = 0, ss = 0;
    for (int64_t j = 0; j < size; ++j) m += row[j];
    m /= static_cast<double>(size);
    for (int64_t j = 0; j < size; ++j) ss += (row[j] - m) * (row[j] - m);
    double inv = 1.0 / std::sqrt(ss / static_cast<double>(size) + eps);
    for (int64_t j = 0; j < size; ++j) y.p[r * size + j] = (row[j] - m) * inv * w[j] + b[j];
    mean.p[r] = m;
    rstd.p[r] = inv;
  }
  return {deliver(call, y.data, 0), deliver(call, mean.data, 1), deliver(call, rstd.data, 2)};
}

// Per channel c of x [N, C, ...]: the batch statistics over N and the trailing dims, the
// normalised output, and the running statistics moved `momentum` of the way to the batch's.
std::vector<Array> native_batch_norm(const Call& call) {
  const Array& input = call.inputs[0];
  Array xk, pk[4];
  const double* x = doubles(input, xk);
  const double* p[4];
  for (int i = 0; i < 4; ++i) p[i] = doubles(call.inputs[i + 1], pk[i]);
  const double *w = p[0], *b = p[1], *running_mean = p[2], *running_var = p[3];
  double eps = attr_float(call.attrs, "eps"), momentum = attr_float(call.attrs, "momentum");
  int64_t N = input.shape()[0], C = input.shape()[1], inner = 1;
  for (int64_t d = 2; d < input.rank(); ++d) inner *= input.shape()[d];
  double n = static_cast<double>(N * inner);
  Out y(call.shapes[0]), mean(call.shapes[1]), invstd(call.shapes[2]);
  Out new_mean(call.shapes[3]), new_var(call.shapes[4]);
  auto at = [&](int64_t i, int64_t c, int64_t k) { return (i * C + c) * inner + k; };
  for (int64_t c = 0; c < C; ++c) {
    double m = 0, ss = 0;
    for (int64_t i = 0; i < N; ++i)
      for (int64_t k = 0; k < inner; ++k) m += x[at(i, c, k)];
    m /= n;
    for (int64_t i = 0; i < N; ++i)
      for (int64_t k = 0; k < inner; ++k) ss += (x[at(i, c, k)] - m) * (x[at(i, c, k)] - m);
    double inv = 1.0 / std::sqrt(ss / n + eps);
    for (int64_t i = 0; i < N; ++i)
      for (int64_t k = 0; k < inner; ++k)
        y.p[at(i, c, k)] = (x[at(i, c, k)] - m) * inv * w[c] + b[c];
    mean.p[c] = m;
    invstd.p[c] = inv;
    new_mean.p[c] = (1 - momentum) * running_mean[c] + momentum * m;
    new_var.p[c] = (1 - momentum) * running_var[c] + momentum * ss / (n - 1);
  }
  return {deliver(call, y.data, 0), deliver(call, mean.data, 1), deliver(call, invstd.data, 2),
          deliver(call, new_mean.data, 3), deliver(call, new_var.data, 4)};
}

}  // namespace

void register_native_norms(MultiKernelTable& t) {
  t[static_cast<size_t>(Op::NativeLayerNorm)] = native_layer_norm;
  t[static_cast<size_t>(Op::NativeBatchNorm)] = native_batch_norm;
}

}  // namespace ember::kernels

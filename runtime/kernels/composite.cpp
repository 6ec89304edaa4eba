// Composite ops run directly: softmax, log_softmax, the norms (in double) and attention (GEMMs
// through OpenBLAS around a row softmax).
#include <cmath>
#include <limits>

#include "runtime/kernels/attention.h"
#include "runtime/kernels/kernel.h"

namespace ember::kernels {

namespace {

// The input as a contiguous double buffer viewed as [outer, n, inner] around `axis`.
struct Rows {
  Array data;
  int64_t outer = 1, n = 1, inner = 1;
};

Rows around_axis(const Array& x, int64_t axis) {
  Rows r{to_contiguous(x, DType::Float64)};
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (d < axis) r.outer *= x.shape()[d];
    else if (d == axis) r.n = x.shape()[d];
    else r.inner *= x.shape()[d];
  }
  return r;
}

// The float64 result, converted into the op's output.
Array from_double(const Call& call, const Array& d) {
  return deliver(call, d.view(call.shape, Array::contiguous_strides(call.shape), 0));
}

Array softmax(const Call& call) {
  const Array& x = call.inputs[0];
  int64_t axis = x.rank() == 0 ? 0 : normalize_axis("softmax", attr_int(call.attrs, "axis"), x.rank());
  Rows r = around_axis(x, axis);
  double* p = r.data.data_as<double>();
  Array result = Array::empty(DType::Float64, x.shape());
  double* q = result.data_as<double>();
  bool log = call.op == Op::LogSoftmax;
  for (int64_t o = 0; o < r.outer; ++o)
    for (int64_t i = 0; i < r.inner; ++i) {
      auto at = [&](int64_t j) { return (o * r.n + j) * r.inner + i; };
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < r.n; ++j) m = std::isnan(p[at(j)]) || p[at(j)] > m ? p[at(j)] : m;
      if (std::isinf(m) && m < 0) m = 0;  // all -inf: exp gives 0s and the result NaN, as PyTorch
      double s = 0;
      for (int64_t j = 0; j < r.n; ++j) s += std::exp(p[at(j)] - m);
      for (int64_t j = 0; j < r.n; ++j)
        q[at(j)] = log ? p[at(j)] - m - std::log(s) : std::exp(p[at(j)] - m) / s;
    }
  return from_double(call, result);
}

Array norm(const Call& call) {
  const Array& x = call.inputs[0];
  int64_t ndim = attr_int(call.attrs, "ndim");
  double eps = attr_float(call.attrs, "eps");
  Array xd = to_contiguous(x, DType::Float64);
  int64_t size = 1;
  for (int64_t d = x.rank() - ndim; d < x.rank(); ++d) size *= x.shape()[d];
  int64_t rows = size == 0 ? 0 : x.numel() / size;
  Array w = to_contiguous(call.inputs[1], DType::Float64);
  bool layer = call.op == Op::LayerNorm;
  Array b = layer ? to_contiguous(call.inputs[2], DType::Float64) : Array();
  Array result = Array::empty(DType::Float64, x.shape());
  const double* p = xd.data_as<double>();
  double* q = result.data_as<double>();
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = p + r * size;
    double mean = 0, ss = 0;
    if (layer) {
      for (int64_t j = 0; j < size; ++j) mean += row[j];
      mean /= static_cast<double>(size);
    }
    for (int64_t j = 0; j < size; ++j) ss += (row[j] - mean) * (row[j] - mean);
    double inv = 1.0 / std::sqrt(ss / static_cast<double>(size) + eps);
    for (int64_t j = 0; j < size; ++j) {
      double v = (row[j] - mean) * inv * w.data_as<double>()[j];
      q[r * size + j] = layer ? v + b.data_as<double>()[j] : v;
    }
  }
  return from_double(call, result);
}

Array batch_norm(const Call& call) {
  const Array& x = call.inputs[0];
  Array xd = to_contiguous(x, DType::Float64);
  Array p[4];
  for (int i = 0; i < 4; ++i) p[i] = to_contiguous(call.inputs[i + 1], DType::Float64);
  const double *mean = p[0].data_as<double>(), *var = p[1].data_as<double>(), *w = p[2].data_as<double>(),
               *b = p[3].data_as<double>();
  double eps = attr_float(call.attrs, "eps");
  int64_t N = x.shape()[0], C = x.shape()[1], inner = 1;
  for (int64_t d = 2; d < x.rank(); ++d) inner *= x.shape()[d];
  double* q = xd.data_as<double>();
  Array result = Array::empty(DType::Float64, x.shape());
  double* out = result.data_as<double>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      double scale = w[c] / std::sqrt(var[c] + eps);
      for (int64_t i = 0; i < inner; ++i) {
        int64_t at = (n * C + c) * inner + i;
        out[at] = (q[at] - mean[c]) * scale + b[c];
      }
    }
  return from_double(call, result);
}

// The offset of each batch entry of a view over `batch` + [rows, cols], from its index over the
// batch dims and the view's strides.
std::vector<int64_t> entry_offsets(const std::vector<int64_t>& batch, const std::vector<int64_t>& strides) {
  int64_t count = 1;
  for (int64_t d : batch) count *= d;
  std::vector<int64_t> offsets(count);
  for (int64_t bi = 0; bi < count; ++bi) {
    int64_t rem = bi, offset = 0;
    for (size_t d = batch.size(); d-- > 0;) {
      offset += rem % batch[d] * strides[d];
      rem /= batch[d];
    }
    offsets[bi] = offset;
  }
  return offsets;
}

// A float32 q, k, v or mask over `batch` + [rows, cols], for the blocked kernel: read in place
// where each row is contiguous, else copied contiguous into `held`. The copies of q, k and v were
// a sixth of a transformer block's attention. Their rows must not overlap (the GEMM libraries
// refuse a leading dimension below a row); a mask's may (`shared_rows`): a padding mask [B, 1, 1,
// S] is read as it is for every head and query, where expanding it to [B, H, L, S] wrote and read
// L x S floats per head.
AttentionInput attention_input(const Array& a, const std::vector<int64_t>& batch, int64_t rows, int64_t cols,
                               std::vector<Array>& held, bool shared_rows = false) {
  std::vector<int64_t> shape = batch;
  shape.push_back(rows);
  shape.push_back(cols);
  if (a.dtype() != DType::Float32) {  // a bool mask's 0/1 in its own shape, then broadcast as below
    held.push_back(to_contiguous(a, DType::Float32));
    return attention_input(held.back(), batch, rows, cols, held, shared_rows);
  }
  Array view = a.view(shape, broadcast_strides(a, shape), a.offset());
  const std::vector<int64_t>& st = view.strides();
  const size_t r = shape.size();
  AttentionInput in;
  bool in_place = cols >= 1 && (cols == 1 || st[r - 1] == 1) && (rows <= 1 || st[r - 2] >= cols || shared_rows);
  if (!in_place) {
    held.push_back(to_contiguous(view, DType::Float32));
    in.data = held.back().data_as<float>();
    in.row_stride = std::max<int64_t>(cols, 1);
    int64_t count = 1;
    for (int64_t d : batch) count *= d;
    for (int64_t bi = 0; bi < count; ++bi) in.offsets.push_back(bi * rows * cols);
    return in;
  }
  in.data = view.data_as<float>();
  in.row_stride = rows <= 1 && !shared_rows ? cols : st[r - 2];
  in.offsets = entry_offsets(batch, st);
  return in;
}

template <class T>
Array attention_typed(const Call& call) {
  DType gt = call.dtype == DType::Float64 ? DType::Float64 : DType::Float32;
  const Array &q0 = call.inputs[0], &k0 = call.inputs[1], &v0 = call.inputs[2];
  int64_t r = q0.rank(), L = q0.shape()[r - 2], E = q0.shape()[r - 1], S = k0.shape()[r - 2], Ev = v0.shape()[r - 1];
  std::vector<int64_t> batch(call.shape.begin(), call.shape.end() - 2);
  auto expanded = [&](const Array& a, int64_t rows, int64_t cols) {
    std::vector<int64_t> shape = batch;
    shape.push_back(rows);
    shape.push_back(cols);
    return to_contiguous(a.view(shape, broadcast_strides(a, shape), a.offset()), gt);
  };
  const bool has_mask = call.inputs.size() == 4, bool_mask = has_mask && call.inputs[3].dtype() == DType::Bool;
  bool causal = attr_bool(call.attrs, "causal");
  double scale = attr_float(call.attrs, "scale");
  if (scale == 0) scale = 1.0 / std::sqrt(static_cast<double>(E));
  int64_t count = 1;
  for (int64_t d : batch) count *= d;
  Array out = gt == call.dtype ? output(call) : Array::empty(gt, call.shape);
  if constexpr (std::is_same_v<T, float>) {
    if (S > 0) {  // no keys: the GEMM below gives zeros, which the blocked kernel would not
      AttentionShape shape{count, L, S, E, Ev, static_cast<float>(scale), causal, bool_mask};
      std::vector<Array> held;
      held.reserve(6);  // the inputs point into these
      AttentionInput q = attention_input(q0, batch, L, E, held), k = attention_input(k0, batch, S, E, held),
                     v = attention_input(v0, batch, S, Ev, held), mask;
      if (has_mask) mask = attention_input(call.inputs[3], batch, L, S, held, /*shared_rows=*/true);
      blocked_attention(shape, q, k, v, has_mask ? &mask : nullptr, out.data_as<float>());
      return deliver(call, out);
    }
  }
  Array q = expanded(q0, L, E), k = expanded(k0, S, E), v = expanded(v0, S, Ev);
  Array mask;  // bool masks become 0/1 in the GEMM type
  if (has_mask) mask = expanded(call.inputs[3], L, S);
  std::vector<T> scores(static_cast<size_t>(L * S));
  for (int64_t bi = 0; bi < count; ++bi) {
    gemm(q.data_as<T>() + bi * L * E, k.data_as<T>() + bi * S * E, scores.data(), L, S, E, true);
    for (int64_t i = 0; i < L; ++i) {
      T* row = scores.data() + i * S;
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < S; ++j) {
        double s = row[j] * scale;
        if (mask.defined()) {
          T mv = mask.data_as<T>()[(bi * L + i) * S + j];
          if (bool_mask) s = mv != T(0) ? s : -std::numeric_limits<double>::infinity();
          else s += mv;
        }
        if (causal && j > i) s = -std::numeric_limits<double>::infinity();
        row[j] = static_cast<T>(s);
        m = std::max(m, s);
      }
      // A row with nothing visible weighs every key 0 (PyTorch's safe softmax); its NaN scores stay.
      const bool hidden = m == -std::numeric_limits<double>::infinity();
      double sum = 0;
      for (int64_t j = 0; j < S; ++j) sum += hidden ? (std::isnan(row[j]) ? row[j] : 0.0) : std::exp(row[j] - m);
      for (int64_t j = 0; j < S; ++j) row[j] = static_cast<T>(hidden ? sum : std::exp(row[j] - m) / sum);
    }
    gemm(scores.data(), v.data_as<T>() + bi * S * Ev, out.data_as<T>() + bi * L * Ev, L, Ev, S, false);
  }
  return deliver(call, out);
}

Array attention(const Call& call) {
  return call.dtype == DType::Float64 ? attention_typed<double>(call) : attention_typed<float>(call);
}

}  // namespace

void register_composites(KernelTable& t) {
  t[static_cast<size_t>(Op::Softmax)] = softmax;
  t[static_cast<size_t>(Op::LogSoftmax)] = softmax;
  t[static_cast<size_t>(Op::LayerNorm)] = norm;
  t[static_cast<size_t>(Op::RmsNorm)] = norm;
  t[static_cast<size_t>(Op::BatchNorm)] = batch_norm;
  t[static_cast<size_t>(Op::ScaledDotProductAttention)] = attention;
}

}  // namespace ember::kernels

// matmul, linear and conv2d through OpenBLAS (float16/bfloat16 compute in float32), and the 2-D
// pools. Inputs are converted to contiguous buffers of the GEMM type first.
#include <cmath>
#include <limits>

#include "runtime/kernels/kernel.h"

namespace ember::kernels {

namespace {

DType gemm_dtype(DType t) { return t == DType::Float64 ? DType::Float64 : DType::Float32; }

// Strides of a [batch..., k, n] view whose memory is the row-major [batch..., n, k] transpose.
std::vector<int64_t> transposed_strides(const std::vector<int64_t>& batch, int64_t k, int64_t n) {
  std::vector<int64_t> shape = batch;
  shape.push_back(n);
  shape.push_back(k);
  std::vector<int64_t> strides = Array::contiguous_strides(shape);
  std::swap(strides[strides.size() - 1], strides[strides.size() - 2]);
  return strides;
}

// Whether b ([batch..., k, n], rank >= 2) is laid out as its transpose would be contiguously.
bool is_transposed_contiguous(const Array& b, int64_t k, int64_t n) {
  if (b.rank() < 2 || k <= 1 || n <= 1) return false;
  std::vector<int64_t> batch(b.shape().begin(), b.shape().end() - 2);
  return b.strides() == transposed_strides(batch, k, n);
}

template <class T>
Array matmul_typed(const Call& call) {
  DType gt = gemm_dtype(call.dtype);
  Array a = call.inputs[0], b = call.inputs[1];
  // Treat 1-D operands as matrices, as torch.matmul does.
  std::vector<int64_t> sa = a.shape(), sb = b.shape();
  if (sa.size() == 1) sa.insert(sa.begin(), 1);
  if (sb.size() == 1) sb.push_back(1);
  int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
  std::vector<int64_t> batch_a(sa.begin(), sa.end() - 2), batch_b(sb.begin(), sb.end() - 2);
  size_t rank = std::max(batch_a.size(), batch_b.size());
  std::vector<int64_t> batch(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - batch_a.size() ? 1 : batch_a[i - (rank - batch_a.size())];
    int64_t db = i < rank - batch_b.size() ? 1 : batch_b[i - (rank - batch_b.size())];
    batch[i] = da == 1 ? db : da;
  }
  auto full_shape = [&](std::vector<int64_t> bs, int64_t r, int64_t c) { bs.push_back(r); bs.push_back(c); return bs; };
  Array ca = to_contiguous(a, gt);
  // A transposed contiguous b (x @ w.t(), q @ k.transpose(-1, -2)) goes to the GEMM as it is,
  // transposed by the GEMM, instead of being copied into row-major order on every call.
  bool trans_b = b.dtype() == gt && is_transposed_contiguous(b, k, n);
  Array cb = trans_b ? b : to_contiguous(b, gt);
  // Contiguous views keep their storage offset (a row slice of a matrix is contiguous).
  Array va = ca.view(full_shape(batch_a, m, k), Array::contiguous_strides(full_shape(batch_a, m, k)), ca.offset());
  Array vb = trans_b ? b.view(full_shape(batch_b, k, n), transposed_strides(batch_b, k, n), b.offset())
                     : cb.view(full_shape(batch_b, k, n), Array::contiguous_strides(full_shape(batch_b, k, n)), cb.offset());
  std::vector<int64_t> out_shape = full_shape(batch, m, n);
  Array result = Array::empty(gt, out_shape);
  std::vector<int64_t> strides_a = broadcast_strides(va, out_shape), strides_b = broadcast_strides(vb, out_shape);
  int64_t count = 1;
  for (int64_t d : batch) count *= d;
  T* c = result.data_as<T>();
  for (int64_t i = 0; i < count; ++i) {
    int64_t oa = 0, ob = 0, rem = i;
    for (size_t d = rank; d-- > 0;) {
      int64_t idx = rem % batch[d];
      rem /= batch[d];
      oa += idx * strides_a[d];
      ob += idx * strides_b[d];
    }
    gemm(va.data_as<T>() + oa, vb.data_as<T>() + ob, c + i * m * n, m, n, k, trans_b);
  }
  Array shaped = result.view(call.shape, Array::contiguous_strides(call.shape), 0);
  return deliver(call, shaped);
}

Array matmul(const Call& call) {
  return gemm_dtype(call.dtype) == DType::Float64 ? matmul_typed<double>(call) : matmul_typed<float>(call);
}

template <class T>
Array linear_typed(const Call& call) {
  DType gt = gemm_dtype(call.dtype);
  Array x = to_contiguous(call.inputs[0], gt), w = to_contiguous(call.inputs[1], gt);
  int64_t in = w.shape()[1], out_f = w.shape()[0], rows = 1;
  for (size_t i = 0; i + 1 < x.shape().size(); ++i) rows *= x.shape()[i];
  Array result = gt == call.dtype ? output(call) : Array::empty(gt, call.shape);
  T* c = result.data_as<T>();
  if (call.inputs.size() == 3) {
    Array b = to_contiguous(call.inputs[2], gt);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < out_f; ++j) c[r * out_f + j] = b.data_as<T>()[j];
  }
  gemm(x.data_as<T>(), w.data_as<T>(), c, rows, out_f, in, true, call.inputs.size() == 3 ? T(1) : T(0));
  return deliver(call, result);
}

Array linear(const Call& call) {
  return gemm_dtype(call.dtype) == DType::Float64 ? linear_typed<double>(call) : linear_typed<float>(call);
}

std::vector<int64_t> ints(const Call& call, const char* name) { return attr_ints(call.attrs, name); }

// Convolution as im2col + GEMM, per image and group.
template <class T>
Array conv2d_typed(const Call& call) {
  DType gt = gemm_dtype(call.dtype);
  Array x = to_contiguous(call.inputs[0], gt), w = to_contiguous(call.inputs[1], gt);
  auto stride = ints(call, "stride"), pad = ints(call, "padding"), dil = ints(call, "dilation");
  int64_t groups = attr_int(call.attrs, "groups");
  int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  int64_t O = w.shape()[0], Cg = w.shape()[1], KH = w.shape()[2], KW = w.shape()[3];
  int64_t OH = call.shape[2], OW = call.shape[3], Og = O / groups, K = Cg * KH * KW, P = OH * OW;
  Array result = gt == call.dtype ? output(call) : Array::empty(gt, call.shape);
  std::vector<T> col(static_cast<size_t>(K * P));
  const T* xp = x.data_as<T>();
  const T* wp = w.data_as<T>();
  T* yp = result.data_as<T>();
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t g = 0; g < groups; ++g) {
      for (int64_t c = 0; c < Cg; ++c)
        for (int64_t kh = 0; kh < KH; ++kh)
          for (int64_t kw = 0; kw < KW; ++kw) {
            T* row = col.data() + ((c * KH + kh) * KW + kw) * P;
            const T* plane = xp + (n * C + g * Cg + c) * H * W;
            for (int64_t oh = 0; oh < OH; ++oh) {
              int64_t ih = oh * stride[0] - pad[0] + kh * dil[0];
              for (int64_t ow = 0; ow < OW; ++ow) {
                int64_t iw = ow * stride[1] - pad[1] + kw * dil[1];
                row[oh * OW + ow] = (ih >= 0 && ih < H && iw >= 0 && iw < W) ? plane[ih * W + iw] : T(0);
              }
            }
          }
      T* out = yp + (n * O + g * Og) * P;
      if (call.inputs.size() == 3) {
        Array b = to_contiguous(call.inputs[2], gt);
        for (int64_t o = 0; o < Og; ++o)
          for (int64_t p = 0; p < P; ++p) out[o * P + p] = b.data_as<T>()[g * Og + o];
      }
      gemm(wp + g * Og * K, col.data(), out, Og, P, K, false, call.inputs.size() == 3 ? T(1) : T(0));
    }
  }
  return deliver(call, result);
}

Array conv2d(const Call& call) {
  return gemm_dtype(call.dtype) == DType::Float64 ? conv2d_typed<double>(call) : conv2d_typed<float>(call);
}

// Pools over the last two dims; leading dims are flattened into planes.
Array pool(const Call& call) {
  Array x = call.inputs[0];
  bool is_max = call.op == Op::MaxPool2d, adaptive = call.op == Op::AdaptiveAvgPool2d;
  int64_t r = x.rank(), H = x.shape()[r - 2], W = x.shape()[r - 1];
  int64_t OH = call.shape[r - 2], OW = call.shape[r - 1];
  std::vector<int64_t> kernel{1, 1}, stride{1, 1}, pad{0, 0}, dil{1, 1};
  bool include_pad = true;
  if (!adaptive) {
    kernel = ints(call, "kernel");
    stride = ints(call, "stride");
    if (stride.empty()) stride = kernel;
    pad = ints(call, "padding");
    if (is_max) dil = ints(call, "dilation");
    else include_pad = attr_bool(call.attrs, "count_include_pad");
  }
  Array out = output(call);
  int64_t planes = x.numel() / std::max<int64_t>(H * W, 1);
  if (H * W == 0) planes = out.numel() / std::max<int64_t>(OH * OW, 1);
  bool as_int = !is_floating(x.dtype());
  for (int64_t p = 0; p < planes; ++p) {
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        int64_t h0, h1, w0, w1;
        if (adaptive) {
          h0 = (oh * H) / OH; h1 = ((oh + 1) * H + OH - 1) / OH;
          w0 = (ow * W) / OW; w1 = ((ow + 1) * W + OW - 1) / OW;
        } else {
          h0 = oh * stride[0] - pad[0]; w0 = ow * stride[1] - pad[1];
          h1 = h0 + (kernel[0] - 1) * dil[0] + 1; w1 = w0 + (kernel[1] - 1) * dil[1] + 1;
        }
        double acc = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
        int64_t acc_i = std::numeric_limits<int64_t>::min(), count = 0;
        bool nan = false;
        for (int64_t ih = h0; ih < h1; ih += dil[0])
          for (int64_t iw = w0; iw < w1; iw += dil[1]) {
            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
            int64_t off = strided_offset(p * H * W + ih * W + iw, x.shape(), x.strides());
            const void* src = byte_ptr(x, off);
            ++count;
            if (as_int) { acc_i = std::max(acc_i, element::load<int64_t>(src, x.dtype())); continue; }
            double v = element::load<double>(src, x.dtype());
            if (std::isnan(v)) nan = true;
            acc = is_max ? std::max(acc, v) : acc + v;
          }
        if (!is_max) {
          int64_t divisor = count;
          if (!adaptive && include_pad) {
            // Windows are clipped to the padded input, as PyTorch counts them.
            int64_t hend = std::min(h0 + kernel[0], H + pad[0]), wend = std::min(w0 + kernel[1], W + pad[1]);
            divisor = (hend - h0) * (wend - w0);
          }
          acc /= static_cast<double>(divisor);
        }
        if (nan) acc = std::numeric_limits<double>::quiet_NaN();
        void* dst = static_cast<char*>(out.data()) + ((p * OH + oh) * OW + ow) * itemsize(out.dtype());
        if (as_int) element::store<int64_t>(dst, out.dtype(), acc_i);
        else element::store<double>(dst, out.dtype(), acc);
      }
  }
  return out;
}

}  // namespace

void register_contractions(KernelTable& t) {
  t[static_cast<size_t>(Op::MatMul)] = matmul;
  t[static_cast<size_t>(Op::Linear)] = linear;
  t[static_cast<size_t>(Op::Conv2d)] = conv2d;
  t[static_cast<size_t>(Op::MaxPool2d)] = pool;
  t[static_cast<size_t>(Op::AvgPool2d)] = pool;
  t[static_cast<size_t>(Op::AdaptiveAvgPool2d)] = pool;
}

}  // namespace ember::kernels

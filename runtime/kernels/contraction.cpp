// matmul, linear and conv2d through OpenBLAS (float16/bfloat16 compute in float32), and the 2-D
// pools. Inputs are converted to contiguous buffers of the GEMM type first.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ir/symbolic.h"
#include "runtime/kernels/conv_unfold.h"
#include "runtime/kernels/kernel.h"
#include "runtime/kernels/onednn.h"
#include "runtime/step_settings.h"
#include "runtime/thread_pool.h"

namespace ember::kernels {

namespace {

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

// C = A @ B, or C += A @ B when `accumulate`, in T: float and double through gemm(), bfloat16
// (T = uint16_t, its bits) through oneDNN, which accumulates in float32 as eager's bfloat16 GEMM
// does, and which may decline (false, nothing written).
template <class T>
bool gemm_in(const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k, bool trans_b, bool accumulate,
             bool trans_a = false) {
  if constexpr (std::is_same_v<T, uint16_t>) {
    if (m == 0 || n == 0) return true;
    if (k == 0) {  // an empty sum (oneDNN divides by the sizes)
      if (!accumulate) std::memset(c, 0, sizeof(T) * m * n);
      return true;
    }
    return !trans_a && onednn_gemm(DType::BFloat16, a, b, c, m, n, k, trans_b, accumulate ? 1.0f : 0.0f);
  } else {
    gemm(a, b, c, m, n, k, trans_b, accumulate ? T(1) : T(0), trans_a);
    return true;
  }
}

// Whether a GEMM or convolution runs in bfloat16 itself: every operand is bfloat16 (autocast's
// linear layers and convolutions), instead of in float32 on converted copies.
bool in_bfloat16(const Call& call) {
  if (call.dtype != DType::BFloat16) return false;
  for (const Array& a : call.inputs)
    if (a.dtype() != DType::BFloat16) return false;
  return true;
}

// The kernels below compute in gt (float32, float64 or bfloat16) with T its C++ type, and
// return an undefined array when a bfloat16 GEMM or convolution is declined.
template <class T>
Array matmul_typed(const Call& call, DType gt) {
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
  // A transposed contiguous b (x @ w.t(), q @ k.transpose(-1, -2)) goes to the GEMM as it is,
  // transposed by the GEMM, instead of being copied into row-major order on every call; so does
  // a transposed a (a weight gradient's x.t() @ grad).
  bool trans_b = b.dtype() == gt && is_transposed_contiguous(b, k, n);
  bool trans_a = gt != DType::BFloat16 && a.dtype() == gt && is_transposed_contiguous(a, m, k);
  Array ca = trans_a ? a : to_contiguous(a, gt);
  Array cb = trans_b ? b : to_contiguous(b, gt);
  // Contiguous views keep their storage offset (a row slice of a matrix is contiguous).
  Array va = trans_a ? a.view(full_shape(batch_a, m, k), transposed_strides(batch_a, m, k), a.offset())
                     : ca.view(full_shape(batch_a, m, k), Array::contiguous_strides(full_shape(batch_a, m, k)), ca.offset());
  Array vb = trans_b ? b.view(full_shape(batch_b, k, n), transposed_strides(batch_b, k, n), b.offset())
                     : cb.view(full_shape(batch_b, k, n), Array::contiguous_strides(full_shape(batch_b, k, n)), cb.offset());
  std::vector<int64_t> out_shape = full_shape(batch, m, n);
  // The product goes straight into the step's destination where that is of the GEMM's type:
  // an allocation and a copy less per call.
  Array result = gt == call.dtype ? output(call) : Array();
  if (!result.defined() || result.dtype() != gt || !result.is_contiguous()) result = Array::empty(gt, out_shape);
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
    if (!gemm_in(va.data_as<T>() + oa, vb.data_as<T>() + ob, c + i * m * n, m, n, k, trans_b, false, trans_a))
      return Array();  // the first GEMM: every batch has the same geometry
  }
  Array shaped = result.view(call.shape, Array::contiguous_strides(call.shape), result.offset());
  return deliver(call, shaped);
}

Array matmul(const Call& call) {
  if (in_bfloat16(call))
    if (Array r = matmul_typed<uint16_t>(call, DType::BFloat16); r.defined()) return r;
  DType gt = gemm_dtype(call.dtype);
  return gt == DType::Float64 ? matmul_typed<double>(call, gt) : matmul_typed<float>(call, gt);
}

template <class T>
Array linear_typed(const Call& call, DType gt) {
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
  if (!gemm_in(x.data_as<T>(), w.data_as<T>(), c, rows, out_f, in, true, call.inputs.size() == 3)) return Array();
  return deliver(call, result);
}

Array linear(const Call& call) {
  if (in_bfloat16(call))
    if (Array r = linear_typed<uint16_t>(call, DType::BFloat16); r.defined()) return r;
  DType gt = gemm_dtype(call.dtype);
  return gt == DType::Float64 ? linear_typed<double>(call, gt) : linear_typed<float>(call, gt);
}

std::vector<int64_t> ints(const Call& call, const char* name) { return attr_ints(call.attrs, name); }

}  // namespace

DType gemm_dtype(DType t) { return t == DType::Float64 ? DType::Float64 : DType::Float32; }

ConvShape conv_shape(const Call& call, const Array& x, const Array& w, int64_t oh, int64_t ow) {
  std::vector<int64_t> pad = ints(call, "padding");  // [h, w] or [top, left, bottom, right]
  std::vector<int64_t> pad_end(pad.end() - 2, pad.end());
  pad.resize(2);
  const auto &xs = x.shape(), &ws = w.shape();
  int64_t groups = attr_int(call.attrs, "groups");
  return {xs[0], xs[1], xs[2], xs[3], ws[0], ws[1], ws[2], ws[3], oh, ow, groups, ws[0] / groups,
          ints(call, "stride"), pad, ints(call, "dilation"), pad_end};
}

namespace {

// One output plane of a depthwise convolution, accumulated tap by tap onto its bias.
template <class T>
inline __attribute__((always_inline)) void depthwise_plane(const ConvShape& cs, const T* __restrict in,
                                                           const T* __restrict w, T* __restrict out) {
  const int64_t sw = cs.stride[1];
  for (int64_t kh = 0; kh < cs.KH; ++kh)
    for (int64_t kw = 0; kw < cs.KW; ++kw) {
      auto [c0, c1] = cs.valid_columns(kw);
      const T wv = w[kh * cs.KW + kw];
      for (int64_t oh = 0; oh < cs.OH; ++oh) {
        int64_t ih = oh * cs.stride[0] - cs.pad[0] + kh * cs.dil[0];
        if (ih < 0 || ih >= cs.H) continue;
        const T* __restrict row = in + ih * cs.W + kw * cs.dil[1] - cs.pad[1];
        T* __restrict dst = out + oh * cs.OW;
        if (sw == 1)
          for (int64_t ow = c0; ow < c1; ++ow) dst[ow] += wv * row[ow];
        else
          for (int64_t ow = c0; ow < c1; ++ow) dst[ow] += wv * row[ow * sw];
      }
    }
}

// The library is built for baseline x86-64; the direct convolution's loops are also built for
// AVX2 and AVX-512, and the best the CPU runs is chosen when the library loads.
__attribute__((target_clones("avx512f", "avx2", "default"))) void depthwise_plane_f32(const ConvShape& cs,
                                                                                    const float* in,
                                                                                    const float* w,
                                                                                    float* out) {
  depthwise_plane(cs, in, w, out);
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void depthwise_plane_f64(const ConvShape& cs,
                                                                                    const double* in,
                                                                                    const double* w,
                                                                                    double* out) {
  depthwise_plane(cs, in, w, out);
}

void depthwise_plane_any(const ConvShape& cs, const float* in, const float* w, float* out) {
  depthwise_plane_f32(cs, in, w, out);
}
void depthwise_plane_any(const ConvShape& cs, const double* in, const double* w, double* out) {
  depthwise_plane_f64(cs, in, w, out);
}

// Output planes [first, first + count) of y start as their bias (or zero); the convolution
// accumulates onto them.
template <class T>
void fill_bias(const ConvShape& cs, const T* bias, T* y, int64_t first, int64_t count) {
  for (int64_t plane = first; plane < first + count; ++plane)
    std::fill_n(y + plane * cs.P(), cs.P(), bias ? bias[plane % cs.O] : T(0));
}

// Depthwise (one input channel per group): a direct loop per output plane. As im2col + GEMM it
// would be one [1 x KH*KW] by [KH*KW x P] GEMM per channel, all packing and no arithmetic.
template <class T>
void conv_depthwise(const ConvShape& cs, const T* x, const T* w, const T* bias, T* y) {
  parallel_for(cs.N * cs.O, 1, [&](int64_t lo, int64_t hi) {
    fill_bias(cs, bias, y, lo, hi - lo);
    for (int64_t plane = lo; plane < hi; ++plane) {
      int64_t n = plane / cs.O, o = plane % cs.O;
      const T* in = x + (n * cs.C + o / cs.Og) * cs.H * cs.W;
      depthwise_plane_any(cs, in, w + o * cs.KH * cs.KW, y + plane * cs.P());
    }
  });
}

// Images [n0, n0 + images) of group g as one GEMM, weight [Og, K] @ col [K, images * P]. One
// image writes y in place, over the bias, its col being the input itself for a 1x1 convolution
// with unit stride and no padding, else its unfolding; several are unfolded side by side, and the
// product goes through `product` into each image's planes of y.
template <class T>
void conv_gemm(const ConvShape& cs, const T* x, const T* w, const T* bias, T* y, int64_t n0, int64_t images,
               int64_t g, std::vector<T>& col, std::vector<T>& product) {
  const int64_t P = cs.P(), K = cs.K(), ld = images * P;
  const T* weight = w + g * cs.Og * K;
  if (images == 1) {
    const T* rhs = x + (n0 * cs.C + g * cs.Cg) * cs.H * cs.W;
    if (!cs.pointwise()) {
      col.resize(static_cast<size_t>(K * P));
      im2col(cs, x, n0, g, col.data(), P);
      rhs = col.data();
    }
    fill_bias(cs, bias, y, n0 * cs.O + g * cs.Og, cs.Og);
    gemm(weight, rhs, y + (n0 * cs.O + g * cs.Og) * P, cs.Og, P, K, false, T(1));
    return;
  }
  col.resize(static_cast<size_t>(K * ld));
  for (int64_t j = 0; j < images; ++j) im2col(cs, x, n0 + j, g, col.data() + j * P, ld);
  product.resize(static_cast<size_t>(cs.Og * ld));
  gemm(weight, col.data(), product.data(), cs.Og, ld, K, false, T(0));
  for (int64_t j = 0; j < images; ++j)
    for (int64_t o = 0; o < cs.Og; ++o) {
      const T* from = product.data() + o * ld + j * P;
      T* to = y + ((n0 + j) * cs.O + g * cs.Og + o) * P;
      const T b = bias ? bias[g * cs.Og + o] : T(0);
      for (int64_t p = 0; p < P; ++p) to[p] = from[p] + b;
    }
}

// Convolution: depthwise directly, otherwise a GEMM per group of images and group of channels.
// With at least as many of those as threads, each thread takes whole ones (its im2col and GEMM
// then run serially); with fewer, each im2col and GEMM is split over the pool instead.
template <class T>
Array conv2d_typed(const Call& call, DType gt) {
  Array x = to_contiguous(call.inputs[0], gt), w = to_contiguous(call.inputs[1], gt), b;
  if (call.inputs.size() == 3) b = to_contiguous(call.inputs[2], gt);
  ConvShape cs = conv_shape(call, x, w, call.shape[2], call.shape[3]);
  Array result = gt == call.dtype ? output(call) : Array::empty(gt, call.shape);
  const T *xp = x.data_as<T>(), *wp = w.data_as<T>(), *bp = b.defined() ? b.data_as<T>() : nullptr;
  T* yp = result.data_as<T>();
  // A pointwise convolution is a GEMM per image on ember's own layout. oneDNN's convolution
  // reorders the weights (and input and output) into its blocked layouts on every call: in
  // ResNet-50 those reorders took 17 of the 23 ms its convolutions spent in oneDNN.
  const bool pointwise_gemm = cs.pointwise() && cs.groups == 1;
  // max-autotune may choose ember's own algorithms over oneDNN's (im2col and GEMM; depthwise ones
  // directly).
  const bool im2col = current_step_settings().conv == ConvAlgorithm::Im2col;
  if constexpr (std::is_same_v<T, uint16_t>) {  // bfloat16: oneDNN's, every geometry, or none
    if (cs.N * cs.O * cs.P() * cs.C == 0 || !onednn_conv2d(DType::BFloat16, cs, xp, wp, bp, yp)) return Array();
    return deliver(call, result);
  } else {
    if constexpr (std::is_same_v<T, float>) {
      if (!pointwise_gemm && !im2col && cs.N * cs.O * cs.P() > 0 && onednn_conv2d(DType::Float32, cs, xp, wp, bp, yp))
        return deliver(call, result);
    }
    if (cs.depthwise()) {
      conv_depthwise(cs, xp, wp, bp, yp);
      return deliver(call, result);
    }
    // A task is a group of images side by side (at most images_per_gemm, as many in each) in one
    // group of channels.
    const int64_t batches = ceil_div(cs.N, images_per_gemm(cs));
    const int64_t per_gemm = ceil_div(cs.N, std::max<int64_t>(batches, 1));
    const int64_t tasks = batches * cs.groups;
    auto run = [&](int64_t lo, int64_t hi) {
      std::vector<T> col, product;
      for (int64_t t = lo; t < hi; ++t) {
        const int64_t n0 = t / cs.groups * per_gemm;
        conv_gemm(cs, xp, wp, bp, yp, n0, std::min(per_gemm, cs.N - n0), t % cs.groups, col, product);
      }
    };
    if (tasks >= num_threads()) parallel_for(tasks, 1, run);
    else run(0, tasks);
    return deliver(call, result);
  }
}

Array conv2d(const Call& call) {
  if (in_bfloat16(call))
    if (Array r = conv2d_typed<uint16_t>(call, DType::BFloat16); r.defined()) return r;
  DType gt = gemm_dtype(call.dtype);
  return gt == DType::Float64 ? conv2d_typed<double>(call, gt) : conv2d_typed<float>(call, gt);
}

// Max-pool of a contiguous float32 or float64 input, typed and split over planes: the generic
// loop below converts every element through double and took 7 ms for ResNet-18's pool.
template <class T>
void max_pool_planes(const T* x, T* y, int64_t planes, int64_t H, int64_t W, int64_t OH, int64_t OW,
                     const std::vector<int64_t>& kernel, const std::vector<int64_t>& stride,
                     const std::vector<int64_t>& pad, const std::vector<int64_t>& dil) {
  parallel_for(planes, std::max<int64_t>(1, 4096 / std::max<int64_t>(OH * OW, 1)), [&](int64_t lo, int64_t hi) {
    for (int64_t p = lo; p < hi; ++p) {
      const T* in = x + p * H * W;
      T* out = y + p * OH * OW;
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          T acc = -std::numeric_limits<T>::infinity();
          bool nan = false;
          int64_t h0 = oh * stride[0] - pad[0], w0 = ow * stride[1] - pad[1];
          auto [kh0, kh1] = valid_taps(h0, kernel[0], dil[0], H);
          auto [kw0, kw1] = valid_taps(w0, kernel[1], dil[1], W);
          for (int64_t kh = kh0; kh < kh1; ++kh) {
            int64_t ih = h0 + kh * dil[0];
            for (int64_t kw = kw0; kw < kw1; ++kw) {
              T v = in[ih * W + w0 + kw * dil[1]];
              nan = nan || v != v;
              acc = v > acc ? v : acc;
            }
          }
          out[oh * OW + ow] = nan ? std::numeric_limits<T>::quiet_NaN() : acc;
        }
    }
  });
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
  if (is_max && x.is_contiguous() && H * W > 0 && (x.dtype() == DType::Float32 || x.dtype() == DType::Float64)) {
    if (x.dtype() == DType::Float32)
      max_pool_planes(x.data_as<float>(), out.data_as<float>(), planes, H, W, OH, OW, kernel, stride, pad, dil);
    else
      max_pool_planes(x.data_as<double>(), out.data_as<double>(), planes, H, W, OH, OW, kernel, stride, pad, dil);
    return out;
  }
  if (is_max && H * W > 0 && (x.dtype() == DType::Float16 || x.dtype() == DType::BFloat16)) {
    // In float32 (the max picks, so the rounding back is exact).
    Array wide = to_contiguous(x, DType::Float32), wide_out = Array::empty(DType::Float32, out.shape());
    max_pool_planes(wide.data_as<float>(), wide_out.data_as<float>(), planes, H, W, OH, OW, kernel, stride, pad, dil);
    copy_into(wide_out, out);
    return out;
  }
  bool as_int = !is_floating(x.dtype());
  for (int64_t p = 0; p < planes; ++p) {
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        int64_t h0, w0, taps_h = kernel[0], taps_w = kernel[1];  // window start and taps (dil apart)
        if (adaptive) {
          h0 = (oh * H) / OH; taps_h = ((oh + 1) * H + OH - 1) / OH - h0;
          w0 = (ow * W) / OW; taps_w = ((ow + 1) * W + OW - 1) / OW - w0;
        } else {
          h0 = oh * stride[0] - pad[0]; w0 = ow * stride[1] - pad[1];
        }
        double acc = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
        int64_t acc_i = std::numeric_limits<int64_t>::min(), count = 0;
        bool nan = false;
        auto [kh0, kh1] = valid_taps(h0, taps_h, dil[0], H);
        auto [kw0, kw1] = valid_taps(w0, taps_w, dil[1], W);
        for (int64_t ih = h0 + kh0 * dil[0]; ih < h0 + kh1 * dil[0]; ih += dil[0])
          for (int64_t iw = w0 + kw0 * dil[1]; iw < w0 + kw1 * dil[1]; iw += dil[1]) {
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

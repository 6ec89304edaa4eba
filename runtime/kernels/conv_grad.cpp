// The gradients of conv2d with respect to its input and its weight, as GEMMs on the unfolded
// input (runtime/kernels/conv_unfold.h), float16/bfloat16 in float32.
//
// [Note: convolution gradients] For one group of image n, with col = im2col(x) [K, P]:
//   grad_weight [Og, K] += grad_y [Og, P] @ col^T,    col2im(weight^T [K, Og] @ grad_y [Og, P]) -> grad_x.
// With few output pixels (ResNet's 512 channels at 2 x 2), each GEMM would be a handful of
// columns deep, and PyTorch's own convolution_backward took 20 ms for one such layer (its
// forward: 1 ms). So images go side by side, at least 256 columns to a GEMM: the weight and its
// gradient are streamed once per group of images, not once per image.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "runtime/kernels/conv_unfold.h"
#include "runtime/kernels/kernel.h"
#include "runtime/kernels/onednn.h"

namespace ember::kernels {

namespace {

// grad_y's rows of group g for images [n0, n0 + images) side by side, [Og, images * P]: grad_y
// itself for one image, else copied into `buffer`.
template <class T>
const T* grad_rows(const ConvShape& cs, const T* dy, int64_t n0, int64_t images, int64_t g, std::vector<T>& buffer) {
  const int64_t P = cs.P();
  if (images == 1) return dy + (n0 * cs.O + g * cs.Og) * P;
  buffer.resize(static_cast<size_t>(cs.Og * images * P));
  for (int64_t o = 0; o < cs.Og; ++o)
    for (int64_t j = 0; j < images; ++j)
      std::copy_n(dy + ((n0 + j) * cs.O + g * cs.Og + o) * P, P, buffer.data() + (o * images + j) * P);
  return buffer.data();
}

template <class T>
void weight_grad(const ConvShape& cs, const T* x, const T* dy, T* dw) {
  const int64_t P = cs.P(), K = cs.K(), per_gemm = images_per_gemm(cs);
  std::fill_n(dw, cs.O * K, T(0));  // no images, or no pixels: nothing to add
  std::vector<T> col, rows;
  for (int64_t g = 0; g < cs.groups; ++g)
    for (int64_t n0 = 0; n0 < cs.N; n0 += per_gemm) {
      const int64_t images = std::min(per_gemm, cs.N - n0), ld = images * P;
      col.resize(static_cast<size_t>(K * ld));
      for (int64_t j = 0; j < images; ++j) im2col(cs, x, n0 + j, g, col.data() + j * P, ld);
      gemm(grad_rows(cs, dy, n0, images, g, rows), col.data(), dw + g * cs.Og * K, cs.Og, K, ld, true, T(1));
    }
}

template <class T>
void input_grad(const ConvShape& cs, const T* w, const T* dy, T* dx) {
  const int64_t P = cs.P(), K = cs.K(), per_gemm = images_per_gemm(cs);
  std::fill_n(dx, cs.N * cs.C * cs.H * cs.W, T(0));
  std::vector<T> col, rows;
  for (int64_t g = 0; g < cs.groups; ++g)
    for (int64_t n0 = 0; n0 < cs.N; n0 += per_gemm) {
      const int64_t images = std::min(per_gemm, cs.N - n0), ld = images * P;
      col.resize(static_cast<size_t>(K * ld));
      gemm(w + g * cs.Og * K, grad_rows(cs, dy, n0, images, g, rows), col.data(), K, ld, cs.Og, false, T(0), true);
      for (int64_t j = 0; j < images; ++j) col2im_add(cs, col.data() + j * P, ld, n0 + j, g, dx);
    }
}

// The input's gradient of an ungrouped, undilated, unit-stride float32 convolution is itself a
// convolution: of grad_y by the weight flipped in space with its channels swapped, padded by
// KH - 1 - pad (each side). On images of many pixels oneDNN's convolution runs it without the
// unfolding and col2im that the GEMM path writes and reads: [32, 64, 56, 56] took 213 ms that
// way, 131 ms this way (PyTorch 169-191). On few pixels oneDNN's is the slow one ([2, 512, 2, 2]:
// 25 ms against the GEMMs' 3), hence kConvolutionPixels. False when it does not apply.
constexpr int64_t kConvolutionPixels = 1024;

bool input_grad_as_convolution(const ConvShape& cs, const float* w, const float* dy, float* dx) {
  const bool unit = cs.groups == 1 && cs.stride == std::vector<int64_t>{1, 1} && cs.dil == std::vector<int64_t>{1, 1};
  if (!unit || cs.P() < kConvolutionPixels || cs.N * cs.C == 0) return false;
  std::vector<int64_t> pad{cs.KH - 1 - cs.pad[0], cs.KW - 1 - cs.pad[1]};
  std::vector<int64_t> pad_end{cs.KH - 1 - cs.pad_end[0], cs.KW - 1 - cs.pad_end[1]};
  for (int64_t p : {pad[0], pad[1], pad_end[0], pad_end[1]})
    if (p < 0) return false;  // padding wider than the kernel: the GEMM path
  std::vector<float> flipped(static_cast<size_t>(cs.O * cs.C * cs.KH * cs.KW));
  for (int64_t o = 0; o < cs.O; ++o)
    for (int64_t c = 0; c < cs.C; ++c)
      for (int64_t t = 0; t < cs.KH * cs.KW; ++t)
        flipped[(c * cs.O + o) * cs.KH * cs.KW + (cs.KH * cs.KW - 1 - t)] = w[(o * cs.C + c) * cs.KH * cs.KW + t];
  ConvShape back{cs.N, cs.O, cs.OH, cs.OW, cs.C, cs.O, cs.KH, cs.KW, cs.H, cs.W, 1, cs.C, {1, 1}, pad, {1, 1}, pad_end};
  return onednn_conv2d(DType::Float32, back, dy, flipped.data(), nullptr, dx);
}

// Depthwise convolutions (one input channel a group) directly, a channel a task: a GEMM per
// group would multiply a 1 x KH*KW matrix, costing more to call than to compute.
template <class T>
void depthwise_weight_grad(const ConvShape& cs, const T* x, const T* dy, T* dw) {
  parallel_for(cs.O, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t o = lo; o < hi; ++o)
      for (int64_t kh = 0; kh < cs.KH; ++kh)
        for (int64_t kw = 0; kw < cs.KW; ++kw) {
          auto [c0, c1] = cs.valid_columns(kw);
          double acc = 0;  // a sum of N * OH * OW products, in one accumulator: double
          for (int64_t n = 0; n < cs.N; ++n) {
            const T* plane = x + (n * cs.C + o / cs.Og) * cs.H * cs.W;
            const T* grad = dy + (n * cs.O + o) * cs.P();
            for (int64_t oh = 0; oh < cs.OH; ++oh) {
              int64_t ih = oh * cs.stride[0] - cs.pad[0] + kh * cs.dil[0];
              if (ih < 0 || ih >= cs.H) continue;
              const T* row = plane + ih * cs.W + kw * cs.dil[1] - cs.pad[1];
              for (int64_t ow = c0; ow < c1; ++ow) acc += double(grad[oh * cs.OW + ow]) * row[ow * cs.stride[1]];
            }
          }
          dw[(o * cs.KH + kh) * cs.KW + kw] = static_cast<T>(acc);
        }
  });
}

template <class T>
void depthwise_input_grad(const ConvShape& cs, const T* w, const T* dy, T* dx) {
  parallel_for(cs.C, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t c = lo; c < hi; ++c)
      for (int64_t n = 0; n < cs.N; ++n) {
        T* plane = dx + (n * cs.C + c) * cs.H * cs.W;
        std::fill_n(plane, cs.H * cs.W, T(0));
        for (int64_t o = c * cs.Og; o < (c + 1) * cs.Og; ++o)
          for (int64_t kh = 0; kh < cs.KH; ++kh)
            for (int64_t kw = 0; kw < cs.KW; ++kw) {
              auto [c0, c1] = cs.valid_columns(kw);
              const T tap = w[(o * cs.KH + kh) * cs.KW + kw];
              const T* grad = dy + (n * cs.O + o) * cs.P();
              for (int64_t oh = 0; oh < cs.OH; ++oh) {
                int64_t ih = oh * cs.stride[0] - cs.pad[0] + kh * cs.dil[0];
                if (ih < 0 || ih >= cs.H) continue;
                T* row = plane + ih * cs.W + kw * cs.dil[1] - cs.pad[1];
                for (int64_t ow = c0; ow < c1; ++ow) row[ow * cs.stride[1]] += tap * grad[oh * cs.OW + ow];
              }
            }
      }
  });
}

// Operands: (grad_y, weight, x) for the input's gradient, (grad_y, x, weight) for the weight's.
template <class T>
Array conv2d_grad_typed(const Call& call) {
  const bool of_input = call.op == Op::Conv2dInputGrad;
  DType gt = gemm_dtype(call.dtype);
  Array dy = to_contiguous(call.inputs[0], gt);
  Array x = of_input ? call.inputs[2] : to_contiguous(call.inputs[1], gt);
  Array w = of_input ? to_contiguous(call.inputs[1], gt) : call.inputs[2];
  ConvShape cs = conv_shape(call, x, w, dy.shape()[2], dy.shape()[3]);
  Array result = gt == call.dtype ? output(call) : Array::empty(gt, call.shape);
  const T *xp = x.data_as<T>(), *wp = w.data_as<T>(), *dyp = dy.data_as<T>();
  T* out = result.data_as<T>();
  if (of_input) {
    bool as_convolution = false;
    if constexpr (std::is_same_v<T, float>) as_convolution = input_grad_as_convolution(cs, wp, dyp, out);
    if (as_convolution) return deliver(call, result);
    if (cs.depthwise()) depthwise_input_grad(cs, wp, dyp, out);
    else input_grad(cs, wp, dyp, out);
  } else {
    if (cs.depthwise()) depthwise_weight_grad(cs, xp, dyp, out);
    else weight_grad(cs, xp, dyp, out);
  }
  return deliver(call, result);
}

Array conv2d_grad(const Call& call) {
  return gemm_dtype(call.dtype) == DType::Float64 ? conv2d_grad_typed<double>(call) : conv2d_grad_typed<float>(call);
}

}  // namespace

void register_conv_grads(KernelTable& t) {
  t[static_cast<size_t>(Op::Conv2dInputGrad)] = conv2d_grad;
  t[static_cast<size_t>(Op::Conv2dWeightGrad)] = conv2d_grad;
}

}  // namespace ember::kernels

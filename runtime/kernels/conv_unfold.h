// A convolution's unfolding (im2col) and its adjoint (col2im), shared by the forward
// convolution's GEMM path and the gradients (runtime/kernels/conv_grad.cpp).
//
// col has a row per tap (c, kh, kw) of one group's input channels, K = Cg * KH * KW rows, and
// a column per output pixel of image n: P = OH * OW columns, at a row stride `ld` (P for one
// image; a multiple of it when several images sit side by side).
#pragma once

#include <algorithm>
#include <cstdint>

#include "runtime/kernels/conv_shape.h"
#include "runtime/thread_pool.h"

namespace ember::kernels {

// Images side by side in one GEMM: enough for 256 columns of col. A convolution of few output
// pixels (ResNet's 512 channels at 2 x 2) then streams its weight, or its weight's gradient,
// once per group of images rather than once per image ([Note: convolution gradients]).
inline int64_t images_per_gemm(const ConvShape& cs) {
  constexpr int64_t kMinColumns = 256;
  return std::clamp<int64_t>((kMinColumns + cs.P() - 1) / std::max<int64_t>(cs.P(), 1), 1, std::max<int64_t>(cs.N, 1));
}

// Grain of rows per chunk of the pool: about 16K values each.
inline int64_t unfold_grain(const ConvShape& cs) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(cs.P(), 1)); }

// Unfolds image n, group g into col: row (c, kh, kw) holds the input each output pixel sees
// through that tap (zero in the padding).
template <class T>
void im2col(const ConvShape& cs, const T* x, int64_t n, int64_t g, T* col, int64_t ld) {
  parallel_for(cs.K(), unfold_grain(cs), [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      int64_t c = r / (cs.KH * cs.KW), kh = r / cs.KW % cs.KH, kw = r % cs.KW;
      T* dst = col + r * ld;
      const T* plane = x + (n * cs.C + g * cs.Cg + c) * cs.H * cs.W;
      auto [c0, c1] = cs.valid_columns(kw);
      for (int64_t oh = 0; oh < cs.OH; ++oh) {
        int64_t ih = oh * cs.stride[0] - cs.pad[0] + kh * cs.dil[0];
        T* out = dst + oh * cs.OW;
        if (ih < 0 || ih >= cs.H) { std::fill_n(out, cs.OW, T(0)); continue; }
        const T* row = plane + ih * cs.W + kw * cs.dil[1] - cs.pad[1];
        std::fill_n(out, c0, T(0));
        for (int64_t ow = c0; ow < c1; ++ow) out[ow] = row[ow * cs.stride[1]];
        std::fill_n(out + c1, cs.OW - c1, T(0));
      }
    }
  });
}

// The adjoint: adds each value of col to the input pixel its tap saw, into image n, group g of
// dx (taps in the padding saw nothing). Threads split channels: a channel's taps write only its
// own plane.
template <class T>
void col2im_add(const ConvShape& cs, const T* col, int64_t ld, int64_t n, int64_t g, T* dx) {
  const int64_t taps = cs.KH * cs.KW;
  parallel_for(cs.Cg, std::max<int64_t>(1, unfold_grain(cs) / taps), [&](int64_t lo, int64_t hi) {
    for (int64_t c = lo; c < hi; ++c) {
      T* plane = dx + (n * cs.C + g * cs.Cg + c) * cs.H * cs.W;
      for (int64_t t = 0; t < taps; ++t) {
        int64_t kh = t / cs.KW, kw = t % cs.KW;
        const T* src = col + (c * taps + t) * ld;
        auto [c0, c1] = cs.valid_columns(kw);
        for (int64_t oh = 0; oh < cs.OH; ++oh) {
          int64_t ih = oh * cs.stride[0] - cs.pad[0] + kh * cs.dil[0];
          if (ih < 0 || ih >= cs.H) continue;
          T* row = plane + ih * cs.W + kw * cs.dil[1] - cs.pad[1];
          const T* in = src + oh * cs.OW;
          for (int64_t ow = c0; ow < c1; ++ow) row[ow * cs.stride[1]] += in[ow];
        }
      }
    }
  });
}

}  // namespace ember::kernels

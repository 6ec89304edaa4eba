// The geometry of one conv2d call, shared by ember's convolution paths and oneDNN's.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace ember {
class Array;
}

namespace ember::kernels {

// NCHW input, OIHW weights, NCHW output. `pad` is the padding before (top, left), `pad_end` after
// (bottom, right); the output's size already counts both.
struct ConvShape {
  int64_t N, C, H, W, O, Cg, KH, KW, OH, OW, groups, Og;
  std::vector<int64_t> stride, pad, dil, pad_end;
  int64_t K() const { return Cg * KH * KW; }  // the GEMM's inner dim
  int64_t P() const { return OH * OW; }       // output pixels per plane
  bool pointwise() const {
    return KH == 1 && KW == 1 && stride[0] == 1 && stride[1] == 1 && pad[0] == 0 && pad[1] == 0 && pad_end[0] == 0 &&
           pad_end[1] == 0;
  }
  bool depthwise() const { return Cg == 1 && groups > 1; }
  // Output columns [lo, hi) whose input column ow * stride - pad + kw * dil lies inside [0, W).
  std::pair<int64_t, int64_t> valid_columns(int64_t kw) const {
    int64_t shift = kw * dil[1] - pad[1], lo = 0, hi = OW;
    while (lo < OW && lo * stride[1] + shift < 0) ++lo;
    while (hi > lo && (hi - 1) * stride[1] + shift >= W) --hi;
    return {lo, hi};
  }
};

// Taps [lo, hi) of a window of `kernel` taps, `dil` apart from `start`, that land inside
// [0, size). Loops over only these: a pool's window may be far larger than its input (EfficientNet
// pools a 3x3 map with a kernel of 1280: 1.6M taps a window, 9 of them inside).
inline std::pair<int64_t, int64_t> valid_taps(int64_t start, int64_t kernel, int64_t dil, int64_t size) {
  int64_t lo = start < 0 ? (-start + dil - 1) / dil : 0;
  int64_t hi = start >= size ? 0 : std::min(kernel, (size - 1 - start) / dil + 1);
  return {lo, std::max(lo, hi)};
}

struct Call;
// The geometry of a conv2d call's attributes over input x [N, C, H, W], weight [O, C / groups,
// KH, KW] and an output of OH x OW pixels (runtime/kernels/contraction.cpp).
ConvShape conv_shape(const Call& call, const Array& x, const Array& w, int64_t oh, int64_t ow);

}  // namespace ember::kernels

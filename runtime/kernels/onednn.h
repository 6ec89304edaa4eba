// float32 and bfloat16 GEMM and convolution through oneDNN (see docs/dependencies.md). A primitive (a JIT
// compile, 0.1-2 ms) is made once per geometry and kept. Convolution kernels work on blocked
// layouts (nChw8c, nChw16c), so each call reorders the NCHW input and weights into the layouts
// the primitive chose and the output back: measured here, that is still 1.4-6x faster than
// im2col + GEMM on ResNet's and MobileNet's convolutions.
#pragma once

#include <cstdint>

#include "ir/dtype.h"
#include "runtime/kernels/conv_shape.h"

namespace ember::kernels {

// C[m, n] = A[m, k] @ B (B is [k, n], or [n, k] read transposed when trans_b) + beta * C; all
// contiguous, of dtype t (float32 or bfloat16; bfloat16 accumulates in float32 and rounds once).
// Returns false (and writes nothing) when oneDNN has no kernel for it.
bool onednn_gemm(DType t, const void* a, const void* b, void* c, int64_t m, int64_t n, int64_t k, bool trans_b,
                 float beta);

// Whether oneDNN's GEMM kernels for this CPU are AVX-512 ones, which beat OpenBLAS's on row-major
// float32 A @ B (docs/dependencies.md); its AVX2 ones lose to OpenBLAS there.
bool onednn_has_avx512();

// y[N, O, OH, OW] = conv(x[N, C, H, W], w[O, C / groups, KH, KW]) + bias (when not null); all
// contiguous, of dtype t as for onednn_gemm. Returns false (and writes nothing) when oneDNN has
// no kernel for it.
bool onednn_conv2d(DType t, const ConvShape& cs, const void* x, const void* w, const void* bias, void* y);

}  // namespace ember::kernels

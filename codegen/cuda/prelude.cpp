// The device functions every generated CUDA kernel starts with: the interpreter's semantics for
// each elementwise op (codegen/cpu/emit_ops.cpp says the same for the CPU), and the float16 and
// bfloat16 conversions, written with integer operations so that the same text compiles with
// NVRTC and, for the tests, with the host compiler (tests/unit/cuda_emulation.h).
#include "codegen/cuda/emit_cuda.h"

namespace ember::codegen::cuda {

const char* prelude() {
  return R"CUDA(typedef long long i64;
typedef unsigned long long u64;
#ifndef EMBER_CUDA_EMULATION
#define EMBER_INF __int_as_float(0x7f800000)
#else
#define EMBER_INF INFINITY
#endif

// The longest row a warp folds alone ([Note: a warp or a block per row]); the emulated tests
// move it to run a launch both ways.
#ifdef EMBER_CUDA_EMULATION
#define ember_warp_row_limit(n) (ember_emulation::warp_row_limit >= 0 ? ember_emulation::warp_row_limit : (i64)(n))
#else
#define ember_warp_row_limit(n) ((i64)(n))
#endif

// N elements that move as one access of N * sizeof(T) bytes (16 at most: ld.global.v4).
template <class T, int N> struct alignas(sizeof(T) * N) ember_vec { T v[N]; };
// Vector q of an array; a GPU faults on a misaligned one, and the emulation says so too.
template <class V> __device__ __forceinline__ V& ember_vec_at(V* base, i64 q) {
#ifdef EMBER_CUDA_EMULATION
  ember_emulation::require_aligned(base, alignof(V));
#endif
  return base[q];
}

// Integers wrap at 64 bits (then at the dtype's width when stored), never undefined.
__device__ __forceinline__ i64 ember_wrap_add(i64 a, i64 b) { return (i64)((u64)a + (u64)b); }
__device__ __forceinline__ i64 ember_wrap_sub(i64 a, i64 b) { return (i64)((u64)a - (u64)b); }
__device__ __forceinline__ i64 ember_wrap_mul(i64 a, i64 b) { return (i64)((u64)a * (u64)b); }

template <class T> __device__ __forceinline__ bool ember_nan(T x) { return x != x; }
// maximum/minimum: a NaN in either gives NaN; on a tie the second.
template <class T> __device__ __forceinline__ T ember_maximum(T a, T b) { return (a > b || ember_nan(a)) ? a : b; }
template <class T> __device__ __forceinline__ T ember_minimum(T a, T b) { return (a < b || ember_nan(a)) ? a : b; }
template <class T> __device__ __forceinline__ T ember_clamp(T x, T lo, T hi) {
  T r = (x < lo || ember_nan(lo)) ? lo : x;
  r = (r > hi || ember_nan(hi)) ? hi : r;
  return ember_nan(x) ? x : r;
}
template <class T> __device__ __forceinline__ T ember_sign(T a) {
  T s = (T)(a > (T)0) - (T)(a < (T)0);
  return ember_nan(a) ? a : s;
}
// a < 0 ? -a : (a == 0 ? 0 : a): a NaN keeps its sign.
__device__ __forceinline__ float ember_abs(float a) { return a < 0 ? -a : (a == 0 ? 0.0f : a); }
__device__ __forceinline__ double ember_abs(double a) { return a < 0 ? -a : (a == 0 ? 0.0 : a); }
__device__ __forceinline__ i64 ember_abs(i64 a) { return a < 0 ? ember_wrap_sub(0, a) : a; }
__device__ __forceinline__ float ember_neg(float a) { return -a; }
__device__ __forceinline__ double ember_neg(double a) { return -a; }
__device__ __forceinline__ i64 ember_neg(i64 a) { return ember_wrap_sub(0, a); }
template <class T> __device__ __forceinline__ T ember_relu(T a) { return (a > (T)0 || ember_nan(a)) ? a : (T)0; }

// The rounding ops are the identity on integers.
#define EMBER_ROUNDING(name, f32, f64) \
  __device__ __forceinline__ float ember_##name(float x) { return f32(x); } \
  __device__ __forceinline__ double ember_##name(double x) { return f64(x); } \
  __device__ __forceinline__ i64 ember_##name(i64 x) { return x; }
EMBER_ROUNDING(floor, floorf, floor)
EMBER_ROUNDING(ceil, ceilf, ceil)
EMBER_ROUNDING(round, rintf, rint)
EMBER_ROUNDING(trunc, truncf, trunc)
#undef EMBER_ROUNDING

#define EMBER_MATH(name, f32, f64) \
  __device__ __forceinline__ float ember_##name(float x) { return f32(x); } \
  __device__ __forceinline__ double ember_##name(double x) { return f64(x); }
EMBER_MATH(exp, expf, exp)
EMBER_MATH(exp2, exp2f, exp2)
EMBER_MATH(log, logf, log)
EMBER_MATH(log2, log2f, log2)
EMBER_MATH(log1p, log1pf, log1p)
EMBER_MATH(expm1, expm1f, expm1)
EMBER_MATH(sqrt, sqrtf, sqrt)
EMBER_MATH(sin, sinf, sin)
EMBER_MATH(cos, cosf, cos)
EMBER_MATH(tan, tanf, tan)
EMBER_MATH(tanh, tanhf, tanh)
EMBER_MATH(erf, erff, erf)
// CUDA's powf is within 2 ulp where glibc's, which the CPU kernels match, is within 0.52: on an
// H200 a comparison with pow(c, x) that sat on the boundary flipped (benchmarks/results/cuda.md).
// float64 and rounding was tried: it gave the device's answer there, not the CPU's (the emulated
// replay, whose host pow is glibc's, then differed too), so the difference stays, a known one.
__device__ __forceinline__ float ember_pow(float a, float b) { return powf(a, b); }
__device__ __forceinline__ double ember_pow(double a, double b) { return pow(a, b); }
template <class T> __device__ __forceinline__ T ember_sigmoid(T x) { return (T)1 / ((T)1 + ember_exp(-x)); }
template <class T> __device__ __forceinline__ T ember_gelu(T x) { return (T)0.5 * x * ((T)1 + ember_erf(x * (T)0.7071067811865476)); }
template <class T> __device__ __forceinline__ T ember_gelu_tanh(T x) {
  return (T)0.5 * x * ((T)1 + ember_tanh((T)0.7978845608028654 * (x + (T)0.044715 * x * x * x)));
}
template <class T> __device__ __forceinline__ bool ember_isinf(T x) { return x == EMBER_INF || x == -EMBER_INF; }

// A float to int64 as the interpreter does: toward zero, saturating, NaN to 0.
template <class T> __device__ __forceinline__ i64 ember_saturate(T v) {
  if (ember_nan(v)) return 0;
  if (v >= (T)9223372036854775808.0) return (i64)0x7fffffffffffffffLL;
  if (v < (T)-9223372036854775808.0) return (i64)0x8000000000000000ULL;
  return (i64)v;
}

// float16 and bfloat16 bits, and rounding a float32 to them, to nearest even.
#ifndef EMBER_CUDA_EMULATION
__device__ __forceinline__ unsigned ember_bits(float f) { return __float_as_uint(f); }
__device__ __forceinline__ float ember_float(unsigned u) { return __uint_as_float(u); }
__device__ __forceinline__ double ember_double(u64 u) { return __longlong_as_double((i64)u); }
#else
__device__ __forceinline__ unsigned ember_bits(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
__device__ __forceinline__ float ember_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
__device__ __forceinline__ double ember_double(u64 u) { double d; memcpy(&d, &u, 8); return d; }
#endif
__device__ __forceinline__ float ember_bf16_to_f32(unsigned short b) { return ember_float((unsigned)b << 16); }
__device__ __forceinline__ unsigned short ember_f32_to_bf16(float f) {
  unsigned u = ember_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40);  // a quiet NaN
  return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
__device__ __forceinline__ float ember_f16_to_f32(unsigned short h) {
  unsigned sign = (unsigned)(h & 0x8000u) << 16, exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0x1fu) return ember_float(sign | 0x7f800000u | (mantissa << 13));  // inf, NaN
  if (exponent != 0) return ember_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  float magnitude = (float)mantissa * 5.9604644775390625e-08f;  // subnormal: mantissa * 2^-24
  return (sign ? -magnitude : magnitude);
}
__device__ __forceinline__ unsigned short ember_f32_to_f16(float f) {
  unsigned u = ember_bits(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (unsigned short)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN stays NaN
  if (a >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);  // rounds past 65504: inf
  if (a < 0x38800000u) {  // a float16 subnormal (or zero): round a * 2^24 to an integer
    float scaled = ember_float(a) * 16777216.0f;
    return (unsigned short)(sign | (unsigned)rintf(scaled));
  }
  unsigned r = a - 0x38000000u;  // rebias the exponent from 127 to 15
  r = r + 0xfffu + ((r >> 13) & 1u);
  return (unsigned short)(sign | (r >> 13));
}
__device__ __forceinline__ float ember_round_f16(float f) { return ember_f16_to_f32(ember_f32_to_f16(f)); }
__device__ __forceinline__ float ember_round_bf16(float f) { return ember_bf16_to_f32(ember_f32_to_bf16(f)); }
)CUDA";
}

}  // namespace ember::codegen::cuda

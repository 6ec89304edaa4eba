// Blocked attention's own AVX-512 tiles ([Note: attention's own tiles]).
#include "runtime/kernels/attention_tiles.h"

#include <algorithm>
#include <cmath>
#include <limits>

#if defined(__x86_64__)
// GCC 12's intrinsics start some results from a deliberately uninitialised value (`__Y = __Y`),
// and inlined here they warn of it.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#define EMBER_AVX512 __attribute__((target("avx512f")))
#endif

namespace ember::kernels::tiles {

// [Note: attention's own tiles]
// An attention tile's two GEMMs are small and oddly shaped: 64 queries against 256 keys over a
// head width of 64 (q k^T), then 64 x 256 weights times 256 x 64 values (p v). Through a library
// each call packs both operands again and pays its setup; measured on one thread of the AVX-512
// host, the tiles of a [2, 4, 799, 64] attention ran at about a quarter of the FMA peak through
// oneDNN's sgemm, and the softmax of the rows between them, masks and all, took a third of the
// time. Here each tile is a register block of FMAs:
// - scores: the keys are transposed once per batch entry (pack_keys) into panels of 32 keys, each
//   E x 32 floats in a row, so a block of 12 query rows by a panel accumulates in 24 registers,
//   each step one broadcast of q times two vectors of the panel. A panel stays in the L1 cache
//   while every block of rows of the tile reads it (rows outer, reading the panels from L2, ran
//   at a third of the FMA peak). A few queries (a decoding step's one) do not pay for packing:
//   their scores are dot products with each key where it lies (dot_scores);
// - weighted values: a block of 6 query rows by 64 value columns accumulates in 24 registers,
//   each step one broadcast weight times four vectors of a value row (value rows are contiguous
//   where they lie, so nothing is packed);
// - a row's softmax is two vector passes (its mask and max; exponential and sum),
//   with the exponential of attention.cpp's exp_approx in vector form (within two ulps of expf).
// Each GEMM runs at 150-165 GFLOP/s on one thread here (about 70 % of the measured FMA peak), the
// softmax at 0.33 ns an element; a [2, 4, 799, 64] attention takes 11-13 ms on one thread where
// it took 16 through oneDNN (eager PyTorch: 13).
// Partial vectors (a width or a block that is not a multiple of 16) are masked loads and stores,
// so any head width runs here. The accumulation order over the head width is that of a plain
// loop, the same as the libraries' within float32 rounding; tests/unit/test_attention.cpp checks
// both ways against float64.

#if defined(__x86_64__)

bool available() {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  return avx512;
}

int64_t padded_keys(int64_t S) { return (S + kPanel - 1) / kPanel * kPanel; }

void pack_keys(const float* k, int64_t ldk, int64_t S, int64_t E, float* kt) {
  const int64_t padded = padded_keys(S);
  for (int64_t j0 = 0; j0 < padded; j0 += kPanel) {
    float* panel = kt + j0 * E;
    for (int64_t e = 0; e < E; ++e)
      for (int64_t c = 0; c < kPanel; ++c) panel[e * kPanel + c] = j0 + c < S ? k[(j0 + c) * ldk + e] : 0.0f;
  }
}

namespace {

EMBER_AVX512 inline __mmask16 first_lanes(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1);
}

// s[R x 16 NV] = q[R x E] times a panel of keys, kt[E x kPanel], times scale.
template <int R, int NV>
EMBER_AVX512 void score_block(const float* q, int64_t ldq, const float* kt, int64_t E, float scale, float* s,
                              int64_t lds) {
  const __m512 vscale = _mm512_set1_ps(scale);
  __m512 acc[R][NV];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
  #pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
#pragma GCC unroll 4
  for (int64_t e = 0; e < E; ++e) {
    __m512 b[NV];
  #pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) b[v] = _mm512_loadu_ps(kt + e * kPanel + 16 * v);
  #pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      __m512 a = _mm512_set1_ps(q[r * ldq + e]);
    #pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(a, b[v], acc[r][v]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
  #pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(s + r * lds + 16 * v, _mm512_mul_ps(acc[r][v], vscale));
}

constexpr int64_t kScoreRows = 12;

using ScoreFn = void (*)(const float*, int64_t, const float*, int64_t, float, float*, int64_t);

ScoreFn score_fn(int64_t rows) {
  constexpr int NV = kPanel / 16;
  switch (rows) {
    case 1: return score_block<1, NV>;
    case 2: return score_block<2, NV>;
    case 3: return score_block<3, NV>;
    case 4: return score_block<4, NV>;
    case 5: return score_block<5, NV>;
    case 6: return score_block<6, NV>;
    case 7: return score_block<7, NV>;
    case 8: return score_block<8, NV>;
    case 9: return score_block<9, NV>;
    case 10: return score_block<10, NV>;
    case 11: return score_block<11, NV>;
    default: return score_block<12, NV>;
  }
}

// acc[R x cols] += p[R x n] v[n x cols], cols = 16 (NV - 1) + the lanes of `last`.
template <int R, int NV>
EMBER_AVX512 void value_block(const float* p, int64_t ldp, const float* v, int64_t ldv, int64_t n, float* acc,
                              int64_t lda, __mmask16 last) {
  auto lanes = [&](int c) { return c == NV - 1 ? last : static_cast<__mmask16>(0xffff); };
  __m512 sum[R][NV];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
  #pragma GCC unroll 16
    for (int c = 0; c < NV; ++c) sum[r][c] = _mm512_maskz_loadu_ps(lanes(c), acc + r * lda + 16 * c);
  for (int64_t j = 0; j < n; ++j) {
    __m512 b[NV];
  #pragma GCC unroll 16
    for (int c = 0; c < NV; ++c) b[c] = _mm512_maskz_loadu_ps(lanes(c), v + j * ldv + 16 * c);
  #pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      __m512 a = _mm512_set1_ps(p[r * ldp + j]);
    #pragma GCC unroll 16
      for (int c = 0; c < NV; ++c) sum[r][c] = _mm512_fmadd_ps(a, b[c], sum[r][c]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
  #pragma GCC unroll 16
    for (int c = 0; c < NV; ++c) _mm512_mask_storeu_ps(acc + r * lda + 16 * c, lanes(c), sum[r][c]);
}

using ValueFn = void (*)(const float*, int64_t, const float*, int64_t, int64_t, float*, int64_t, __mmask16);

template <int R>
ValueFn value_fn_rows(int64_t vectors) {
  switch (vectors) {
    case 1: return value_block<R, 1>;
    case 2: return value_block<R, 2>;
    case 3: return value_block<R, 3>;
    default: return value_block<R, 4>;
  }
}

ValueFn value_fn(int64_t rows, int64_t vectors) {
  switch (rows) {
    case 1: return value_fn_rows<1>(vectors);
    case 2: return value_fn_rows<2>(vectors);
    case 3: return value_fn_rows<3>(vectors);
    case 4: return value_fn_rows<4>(vectors);
    case 5: return value_fn_rows<5>(vectors);
    default: return value_fn_rows<6>(vectors);
  }
}

// The max and the sum of a vector's lanes, in four halvings (lane by lane, the sum's chain of 16
// dependent adds was a sizeable part of a row's time).
template <typename Op>
EMBER_AVX512 float fold_lanes(__m512 v, Op op) {
  v = op(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(1, 0, 3, 2)));
  v = op(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
  v = op(v, _mm512_permute_ps(v, _MM_SHUFFLE(1, 0, 3, 2)));
  v = op(v, _mm512_permute_ps(v, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm512_cvtss_f32(v);
}

EMBER_AVX512 float lanes_max(__m512 v) {
  return fold_lanes(v, [](__m512 a, __m512 b) __attribute__((target("avx512f"))) { return _mm512_max_ps(a, b); });
}

EMBER_AVX512 float lanes_sum(__m512 v) {
  return fold_lanes(v, [](__m512 a, __m512 b) __attribute__((target("avx512f"))) { return _mm512_add_ps(a, b); });
}

// e^x lane by lane for x <= 0 (a score less the row's max): attention.cpp's exp_approx (x = n ln2
// + r, a degree-7 polynomial in r, times 2^n), 0 below -87.3 (-inf included), NaN kept.
EMBER_AVX512 __m512 exp16(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-87.3f);
  const __m512 xc = x;  // no clamp: below lo the result is replaced by 0, and no x is above 0
  __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), xc);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  __m512 e = _mm512_scalef_ps(p, n);
  return _mm512_mask_mov_ps(e, _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ), _mm512_setzero_ps());
}

}  // namespace

EMBER_AVX512 void scores(const float* q, int64_t ldq, const float* kt, int64_t m, int64_t n, int64_t E, float scale,
                         float* s, int64_t lds) {
  // A panel of keys (E x 32 floats) stays in the L1 cache while every block of rows reads it.
  for (int64_t j = 0; j < n; j += kPanel)
    for (int64_t i = 0; i < m; i += kScoreRows)
      score_fn(std::min(kScoreRows, m - i))(q + i * ldq, ldq, kt + j * E, E, scale, s + i * lds + j, lds);
}

namespace {

// The row's visible scores with its mask applied, written back; returns their max by lanes.
EMBER_AVX512 __m512 masked_max(float* row, int64_t visible, const float* mask, bool bool_mask) {
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 vmax = neg_inf;
  for (int64_t j = 0; j < visible; j += 16) {
    const __mmask16 m = first_lanes(visible - j);
    __m512 s = _mm512_maskz_loadu_ps(m, row + j), w = _mm512_maskz_loadu_ps(m, mask + j);
    s = bool_mask ? _mm512_mask_mov_ps(neg_inf, _mm512_cmp_ps_mask(w, _mm512_setzero_ps(), _CMP_NEQ_UQ), s)
                  : _mm512_add_ps(s, w);
    _mm512_mask_storeu_ps(row + j, m, s);
    vmax = _mm512_mask_max_ps(vmax, m, s, vmax);
  }
  return vmax;
}

}  // namespace

EMBER_AVX512 void dot_scores(const float* q, const float* k, int64_t ldk, int64_t n, int64_t E, float scale,
                             float* s) {
  for (int64_t j = 0; j < n; ++j) {
    const float* key = k + j * ldk;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t e = 0; e < E; e += 16) {
      const __mmask16 m = first_lanes(E - e);
      acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + e), _mm512_maskz_loadu_ps(m, key + e), acc);
    }
    s[j] = scale * lanes_sum(acc);
  }
}

EMBER_AVX512 float softmax_row(float* row, int64_t n, int64_t visible, const float* mask, bool bool_mask,
                               RowState& state) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  visible = std::clamp<int64_t>(visible, 0, n);
  const int64_t whole = visible / 16 * 16;  // columns in whole vectors, then one masked
  __m512 vmax = _mm512_set1_ps(neg_inf);
  // max(s, vmax) keeps vmax where s is NaN: a NaN score leaves the max as it was.
  if (mask) {
    vmax = masked_max(row, visible, mask, bool_mask);
  } else {
    for (int64_t j = 0; j < whole; j += 16) vmax = _mm512_max_ps(_mm512_loadu_ps(row + j), vmax);
    if (whole < visible) {
      const __mmask16 m = first_lanes(visible - whole);
      vmax = _mm512_mask_max_ps(vmax, m, _mm512_maskz_loadu_ps(m, row + whole), vmax);
    }
  }
  const float tile_max = lanes_max(vmax);
  const float new_max = tile_max > state.max ? tile_max : state.max;
  if (new_max == neg_inf) {  // nothing visible yet: the tile adds nothing but its NaN scores
    float nan_sum = 0.0f;
    for (int64_t j = 0; j < n; ++j) {
      row[j] = j < visible && std::isnan(row[j]) ? row[j] : 0.0f;
      nan_sum += row[j];
    }
    state.sum += nan_sum;
    return 1.0f;
  }
  const __m512 vnew = _mm512_set1_ps(new_max);
  __m512 vsum = _mm512_setzero_ps();
#pragma GCC unroll 4
  for (int64_t j = 0; j < whole; j += 16) {
    __m512 p = exp16(_mm512_sub_ps(_mm512_loadu_ps(row + j), vnew));
    _mm512_storeu_ps(row + j, p);
    vsum = _mm512_add_ps(vsum, p);
  }
  for (int64_t j = whole; j < n; j += 16) {  // the last visible columns, then the hidden ones: 0
    const __mmask16 m = first_lanes(n - j), shown = j < visible ? first_lanes(visible - j) : 0;
    __m512 p = _mm512_maskz_mov_ps(shown, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(shown, row + j), vnew)));
    _mm512_mask_storeu_ps(row + j, m, p);
    vsum = _mm512_add_ps(vsum, p);
  }
  const float alpha = new_max == state.max ? 1.0f : _mm512_cvtss_f32(exp16(_mm512_set1_ps(state.max - new_max)));
  state.sum = state.sum * alpha + lanes_sum(vsum);
  state.max = new_max;
  return alpha;
}

EMBER_AVX512 void weighted_values(const float* p, int64_t ldp, const float* v, int64_t ldv, int64_t m, int64_t n,
                                  int64_t Ev, float* acc, int64_t lda) {
  // 64 value rows by 64 columns (16 KiB) stay in the L1 cache while every block of rows reads them.
  constexpr int64_t kKeys = 64;
  for (int64_t c = 0; c < Ev; c += 64) {
    const int64_t cols = std::min<int64_t>(64, Ev - c), vectors = (cols + 15) / 16;
    const __mmask16 last = first_lanes(cols - 16 * (vectors - 1));
    for (int64_t j = 0; j < n; j += kKeys) {
      const int64_t keys = std::min(kKeys, n - j);
      for (int64_t i = 0; i < m; i += 6) {
        const int64_t rows = std::min<int64_t>(6, m - i);
        value_fn(rows, vectors)(p + i * ldp + j, ldp, v + j * ldv + c, ldv, keys, acc + i * lda + c, lda, last);
      }
    }
  }
}

#else  // not x86-64: the library GEMMs run every tile

bool available() { return false; }
int64_t padded_keys(int64_t S) { return S; }
void pack_keys(const float*, int64_t, int64_t, int64_t, float*) {}
void scores(const float*, int64_t, const float*, int64_t, int64_t, int64_t, float, float*, int64_t) {}
void dot_scores(const float*, const float*, int64_t, int64_t, int64_t, float, float*) {}
float softmax_row(float*, int64_t, int64_t, const float*, bool, RowState&) { return 1.0f; }
void weighted_values(const float*, int64_t, const float*, int64_t, int64_t, int64_t, int64_t, float*, int64_t) {}

#endif

}  // namespace ember::kernels::tiles

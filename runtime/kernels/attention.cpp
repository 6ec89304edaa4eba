// Float32 attention, block by block ([Note: blocked attention]).
#include "runtime/kernels/attention.h"

#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "runtime/kernels/attention_tiles.h"
#include "runtime/kernels/kernel.h"
#include "runtime/kernels/mkl.h"
#include "runtime/step_settings.h"
#include "runtime/thread_pool.h"

namespace ember::kernels {

// [Note: blocked attention]
// softmax(q k^T * scale + mask) v for one batch entry runs as blocks of queries against blocks of
// keys. A pair's scores are a tile (64 x 256 floats, 64 KiB) that stays in cache; each
// query row keeps a running max and sum (online softmax): when a tile raises the max, the row's
// partial output and sum are scaled down by exp(old - new) before the tile's share, tile times
// its values, is added on. The scores are never written out whole (the decomposition into two
// matmuls around a row softmax wrote and read L x S of them), and a causal block stops at the
// diagonal, which halves the arithmetic. Blocks of queries are independent: they are split over
// the thread pool, each running single-threaded GEMMs on its tiles. Where the CPU has AVX-512
// those are ember's own ([Note: attention's own tiles] in attention_tiles.cpp, 1.2-1.4x the
// library's at 128-2048 tokens on two threads); elsewhere, or when max-autotune asks for a
// library, oneDNN's sgemm, which runs on one thread inside the pool's OpenMP region. Measured on one thread here, it did 86 GFLOP/s on
// these tiles and OpenBLAS 59-79; 128 x 128 tiles took 6.5 ms for a causal [4, 8, 256, 64]
// and 64 x 256 ones 4.4 (eager: 5.9). Those are the defaults; max-autotune measures other tiles
// and the tiles' GEMM library (PyTorch's MKL, OpenBLAS) per step (runtime/step_settings.h).
// q, k and v are read where they lie when each of their rows is contiguous (AttentionInput): a
// head's transposed view of a fused projection costs no copy (the copies were a fifth of a GPT
// block's attention on one thread). A query row that every key is masked from is 0, as in
// PyTorch's SDPA (its safe softmax), unless one of its scores is NaN: then NaN, as there.

namespace {

constexpr int64_t kQueryBlock = 64, kKeyBlock = 256;

// How a call's tiles run: their sizes and their GEMM's library, read from the step's settings on
// the calling thread (the pool's threads do not see them).
struct Tiling {
  int64_t queries = kQueryBlock, keys = kKeyBlock;
  GemmRoute gemm = GemmRoute::Auto;  // Auto: the own tiles where they run, else oneDNN
};

Tiling tiling_of(const StepSettings& settings) {
  Tiling t;
  if (settings.query_block) t.queries = settings.query_block;
  if (settings.key_block) t.keys = settings.key_block;
  t.gemm = settings.gemm;
  return t;
}

// e^x in float32 for x <= 88, in a form the compiler vectorises: x = n ln2 + r with
// |r| <= ln2 / 2, e^r by a degree-7 polynomial (Cephes' expf coefficients), 2^n through the
// exponent bits. Within two ulps of expf; below -87.3 it gives 0 (no denormal results), NaN
// stays NaN. Attention only takes it of values <= 0.
inline float exp_approx(float x) {
  const float lo = -87.3f, hi = 88.0f;
  float xc = x < lo ? lo : (x > hi ? hi : x);  // NaN compares false and stays
  float n = std::nearbyint(xc * 1.44269504088896341f);
  float r = xc - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  float two_n = std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
  return x < lo ? 0.0f : p * two_n;
}

// C = A op(B) + beta C, row-major, on this thread (inside the pool's region) or on oneDNN's.
void sgemm(GemmRoute route, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (k == 0) {  // an empty sum (a head size of 0), which oneDNN refuses
    if (beta == 0.0f)
      for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
    return;
  }
  if (route == GemmRoute::Mkl && mkl_sgemm(a, b, c, m, n, k, false, trans_b, beta, lda, ldb, ldc)) return;
  if (route == GemmRoute::Blas) {
    use_single_threaded_blas();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(m),
                static_cast<int>(n), static_cast<int>(k), 1.0f, a, static_cast<int>(lda), b, static_cast<int>(ldb),
                beta, c, static_cast<int>(ldc));
    return;
  }
  dnnl_status_t status = dnnl_sgemm('N', trans_b ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
  EMBER_CHECK(status == dnnl_success, "oneDNN's sgemm failed with status ", static_cast<int>(status));
}

using tiles::RowState;

// One query row of a tile: scores scaled and masked (keys from `causal_end` on are hidden),
// then replaced by their exponentials against the row's new running max. Returns the factor
// the row's earlier output and sum must be scaled by.
__attribute__((target_clones("avx512f", "avx2", "default"))) float tile_row(float* row, int64_t n, float scale,
                                                                         const float* mask, bool bool_mask,
                                                                         int64_t causal_end, RowState& state) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  // The max in lanes, each its own chain: GCC does not vectorise a max folded into one value
  // (NaN makes it order-dependent), and the one-value fold, a chain of dependent maxes, was
  // three quarters of this function's time.
  constexpr int64_t kLanes = 16;
  float lane_max[kLanes];
  std::fill(lane_max, lane_max + kLanes, neg_inf);
  auto score = [&](int64_t j) {
    float s = row[j] * scale;
    if (mask) s = bool_mask ? (mask[j] != 0.0f ? s : neg_inf) : s + mask[j];
    s = j < causal_end ? s : neg_inf;
    row[j] = s;
    return s;
  };
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) {
      float s = score(j + l);
      lane_max[l] = s > lane_max[l] ? s : lane_max[l];
    }
  for (; j < n; ++j) {
    float s = score(j);
    lane_max[0] = s > lane_max[0] ? s : lane_max[0];
  }
  float tile_max = neg_inf;
  for (float m : lane_max) tile_max = m > tile_max ? m : tile_max;
  float new_max = tile_max > state.max ? tile_max : state.max;
  if (new_max == neg_inf) {  // nothing visible yet: the tile adds nothing but its NaN scores
    float nan_sum = 0.0f;
    for (int64_t j = 0; j < n; ++j) {
      row[j] = std::isnan(row[j]) ? row[j] : 0.0f;
      nan_sum += row[j];
    }
    state.sum += nan_sum;
    return 1.0f;
  }
  float sum = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    row[j] = exp_approx(row[j] - new_max);
    sum += row[j];
  }
  float alpha = exp_approx(state.max - new_max);
  state.sum = state.sum * alpha + sum;
  state.max = new_max;
  return alpha;
}

// The keys of one batch entry transposed for the own tiles (tiles::pack_keys), packed once per
// entry on each thread; `from` is the keys' data they were packed from.
struct PackedKeys {
  std::vector<float> data;
  int64_t E = 0;
  const float* from = nullptr;

  void pack(const AttentionShape& a, const float* k, int64_t ldk) {
    if (from == k) return;  // entries that share their keys (a broadcast head) pack them once
    data.resize(a.E * tiles::padded_keys(a.S));
    tiles::pack_keys(k, ldk, a.S, a.E, data.data());
    E = a.E;
    from = k;
  }
  const float* panel_of(int64_t key) const { return data.data() + key * E; }  // key: a panel's first
};

// How a call's tiles compute: through the tiling's GEMM library, or ember's own tiles (scores
// from keys packed into panels, or, for a few queries, dot products with the keys where they lie).
enum class TileWay { Library, Panels, Rows };

// Queries [i0, i0 + nq) of one batch entry: q, k, v, mask and out point at that entry.
// q, k and v point at the batch entry's first row, their rows ld* elements apart; `kt` holds the
// entry's keys packed when the way is Panels.
void query_block(const AttentionShape& a, const Tiling& tiling, TileWay way, const float* q, int64_t ldq,
                 const float* k, int64_t ldk, const PackedKeys& kt, const float* v, int64_t ldv, const float* mask,
                 int64_t ldm, float* out, int64_t i0, int64_t nq, std::vector<float>& tile, std::vector<float>& acc) {
  const int64_t keys = tiling.keys, ldt = (keys + tiles::kPanel - 1) / tiles::kPanel * tiles::kPanel;
  const int64_t lda = std::max<int64_t>(a.Ev, 1);
  const bool own = way != TileWay::Library;
  tile.resize(tiling.queries * ldt);
  acc.assign(nq * a.Ev, 0.0f);
  std::vector<RowState> rows(nq, RowState{-std::numeric_limits<float>::infinity(), 0.0f});
  int64_t kv_end = a.causal ? std::min(a.S, i0 + nq) : a.S;
  for (int64_t j0 = 0; j0 < kv_end; j0 += keys) {
    int64_t nk = std::min(keys, kv_end - j0);
    if (way == TileWay::Panels) {
      tiles::scores(q + i0 * ldq, ldq, kt.panel_of(j0), nq, nk, a.E, a.scale, tile.data(), ldt);
    } else if (way == TileWay::Rows) {
      for (int64_t i = 0; i < nq; ++i)
        tiles::dot_scores(q + (i0 + i) * ldq, k + j0 * ldk, ldk, nk, a.E, a.scale, tile.data() + i * ldt);
    } else {
      sgemm(tiling.gemm, true, nq, nk, a.E, q + i0 * ldq, ldq, k + j0 * ldk, ldk, 0.0f, tile.data(), ldt);
    }
    for (int64_t i = 0; i < nq; ++i) {
      float* row = tile.data() + i * ldt;
      const float* mask_row = mask ? mask + (i0 + i) * ldm + j0 : nullptr;
      int64_t causal_end = a.causal ? i0 + i + 1 - j0 : nk;
      // The own tiles' scores come scaled.
      float alpha = own ? tiles::softmax_row(row, nk, causal_end, mask_row, a.bool_mask, rows[i])
                        : tile_row(row, nk, a.scale, mask_row, a.bool_mask, causal_end, rows[i]);
      if (alpha != 1.0f)
        for (int64_t e = 0; e < a.Ev; ++e) acc[i * a.Ev + e] *= alpha;
    }
    if (own)
      tiles::weighted_values(tile.data(), ldt, v + j0 * ldv, ldv, nq, nk, a.Ev, acc.data(), lda);
    else
      sgemm(tiling.gemm, false, nq, a.Ev, nk, tile.data(), ldt, v + j0 * ldv, ldv, 1.0f, acc.data(), lda);
  }
  for (int64_t i = 0; i < nq; ++i)
    for (int64_t e = 0; e < a.Ev; ++e)  // a sum of 0: nothing visible, the row is 0 (as PyTorch's)
      out[(i0 + i) * a.Ev + e] = rows[i].sum == 0.0f ? 0.0f : acc[i * a.Ev + e] / rows[i].sum;
}

// The own tiles where the CPU runs them and no GEMM library was asked for: keys packed into
// panels where key blocks are whole panels and each entry has queries enough to pay for the
// packing; else (a decoding step's one query) dot products with each key where it lies. The
// library's per-call setup dominated the small GEMVs of a decoding step: 32 heads of 150 keys
// took 100 us a layer through oneDNN.
TileWay tile_way(const AttentionShape& a, const Tiling& tiling) {
  if (tiling.gemm != GemmRoute::Auto || !tiles::available()) return TileWay::Library;
  return a.L >= 16 && tiling.keys % tiles::kPanel == 0 ? TileWay::Panels : TileWay::Rows;
}

}  // namespace

void blocked_attention(const AttentionShape& a, const AttentionInput& q, const AttentionInput& k,
                       const AttentionInput& v, const AttentionInput* mask, float* out) {
  OpenMPThreads threads;  // a loop that runs serially calls oneDNN outside ember's region
  const Tiling tiling = tiling_of(current_step_settings());
  const int64_t blocks = (a.L + tiling.queries - 1) / tiling.queries;
  const TileWay way = tile_way(a, tiling);
  parallel_for(a.count * blocks, 1, [&](int64_t lo, int64_t hi) {
    std::vector<float> tile, acc;
    PackedKeys kt;
    for (int64_t item = lo; item < hi; ++item) {
      int64_t bi = item / blocks, i0 = item % blocks * tiling.queries;
      if (way == TileWay::Panels) kt.pack(a, k.entry(bi), k.row_stride);
      query_block(a, tiling, way, q.entry(bi), q.row_stride, k.entry(bi), k.row_stride, kt, v.entry(bi),
                  v.row_stride, mask ? mask->entry(bi) : nullptr, mask ? mask->row_stride : 0,
                  out + bi * a.L * a.Ev, i0, std::min(tiling.queries, a.L - i0), tile, acc);
    }
  });
}

}  // namespace ember::kernels

// ember's own GEMM ([Note: ember's own GEMM], codegen/cpu/gemm.h): its tiles and blocking against
// a float64 reference, at every edge the blocking has (a tile cut by C's rows or columns, a depth
// cut into slices, a block cut by the matrix), in every layout, on one thread and on several.
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "codegen/cpu/gemm.h"
#include "codegen/cpu/jit.h"
#include "ir/error.h"
#include "runtime/kernels/kernel.h"
#include "runtime/thread_pool.h"
#include "tests/catch.h"

using namespace ember;
using codegen::cpu::GemmTiling;

namespace {

struct Case {
  int64_t m, n, k;
  bool trans_a, trans_b;
  float beta;
};

// Checks generated_gemm(tiling) on `c` (row-major, leading dimension ldc >= n) against float64.
void check(const GemmTiling& t, const Case& s, int64_t ldc_pad = 0) {
  std::mt19937 rng(static_cast<unsigned>(s.m * 131 + s.n * 17 + s.k));
  std::normal_distribution<float> normal;
  const int64_t ldc = s.n + ldc_pad;
  std::vector<float> a(s.m * s.k), b(s.k * s.n), c(s.m * ldc);
  for (auto* v : {&a, &b, &c})
    for (float& x : *v) x = normal(rng);
  std::vector<float> before = c;
  const int64_t lda = s.trans_a ? s.m : s.k, ldb = s.trans_b ? s.k : s.n;
  codegen::cpu::generated_gemm(t, a.data(), b.data(), c.data(), s.m, s.n, s.k, s.trans_a, s.trans_b, s.beta, lda,
                               ldb, ldc);
  INFO(t.code_str() << " kc=" << t.kc << " mc=" << t.mc << " nc=" << t.nc << " | " << s.m << "x" << s.n << "x" << s.k
                    << " trans_a " << s.trans_a << " trans_b " << s.trans_b << " beta " << s.beta);
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = 0; j < ldc; ++j) {
      if (j >= s.n) {  // past the row's n columns: untouched
        REQUIRE(c[i * ldc + j] == before[i * ldc + j]);
        continue;
      }
      double want = s.beta != 0 ? double(s.beta) * before[i * ldc + j] : 0.0;
      for (int64_t p = 0; p < s.k; ++p)
        want += double(s.trans_a ? a[p * lda + i] : a[i * lda + p]) * (s.trans_b ? b[j * ldb + p] : b[p * ldb + j]);
      REQUIRE(std::abs(c[i * ldc + j] - want) <= 1e-5 * std::sqrt(s.k + 1.0) * (1 + std::abs(want)) * 4);
    }
}

}  // namespace

TEST_CASE("own gemm: tiles and blocks at every edge, every layout", "[gemm][own_gemm]") {
  if (!codegen::cpu::jit_available()) return;  // a build without the CPU code generator
  // Small blocks and slices, so that these sizes cross every edge the blocking has.
  const GemmTiling tilings[] = {{.kc = 7, .mc = 12, .nc = 64}, {.mr = 4, .nr = 32, .unroll = 3, .kc = 16, .mc = 8, .nc = 32},
                                {.mr = 8, .nr = 16, .unroll = 1, .kc = 5, .mc = 8, .nc = 48}, {.mr = 1, .nr = 32, .unroll = 8},
                                // B read where it lies, but for a last panel cut by n
                                {.kc = 7, .mc = 12, .nc = 64, .in_place_rows = 1000},
                                {.mr = 4, .nr = 32, .unroll = 3, .kc = 16, .mc = 8, .nc = 32, .in_place_rows = 1000},
                                {.in_place_rows = 0}};  // B packed for every m
  const Case cases[] = {{1, 1, 1, false, false, 0},    {6, 64, 4, false, false, 0},  {7, 65, 9, false, true, 1},
                        {13, 100, 23, true, false, 0},  {40, 130, 33, true, true, 1}, {5, 17, 64, false, false, 0.5f},
                        {96, 96, 40, false, true, 0},   {3, 200, 1, true, false, 0}};
  for (const GemmTiling& t : tilings)
    for (const Case& s : cases) {
      check(t, s);
      check(t, s, 5);  // C a view with rows longer than n
    }
}

TEST_CASE("own gemm: the default tiling over the thread pool, blocks split among threads", "[gemm][own_gemm]") {
  if (!codegen::cpu::jit_available()) return;  // a build without the CPU code generator
  for (int threads : {1, 4}) {
    ThreadCountForCall count(threads);
    for (const Case& s : {Case{300, 520, 300, false, false, 0}, Case{257, 129, 1030, true, true, 1}})
      check(GemmTiling{}, s);
  }
}

TEST_CASE("own gemm: NaN and infinity reach only their own rows and columns", "[gemm][own_gemm]") {
  if (!codegen::cpu::jit_available()) return;  // a build without the CPU code generator
  // A's padded rows and B's padded columns are zeros: 0 * inf there must not leak into C.
  const int64_t m = 7, n = 70, k = 5;
  std::vector<float> a(m * k, 1.0f), b(k * n, 1.0f), c(m * n, std::nanf(""));
  a[2 * k + 1] = INFINITY;  // row 2
  b[3 * n + 69] = std::nanf("");  // column 69, the last tile's only live column
  codegen::cpu::generated_gemm(GemmTiling{}, a.data(), b.data(), c.data(), m, n, k, false, false, 0.0f, k, n, n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      INFO(i << ", " << j);
      if (j == 69) REQUIRE(std::isnan(c[i * n + j]));
      else if (i == 2) REQUIRE(c[i * n + j] == INFINITY);
      else REQUIRE(c[i * n + j] == float(k));
    }
}

TEST_CASE("own gemm: each slice of the depth is summed apart and then added to C", "[gemm][own_gemm]") {
  if (!codegen::cpu::jit_available()) return;  // a build without the CPU code generator
  // Bit for bit: each element is a chain of fused multiply-adds from zero over each slice of kc,
  // and C = C + that slice's sum. Started from C, a product was one chain over its whole depth,
  // with 3.7x the float32 error of PyTorch's at a depth of 4096 and 6.9x at 16384.
  const GemmTiling t{.kc = 100};
  for (float beta : {0.0f, 1.0f}) {
    const int64_t m = 7, n = 70, k = 1030;  // edge tiles, and a last slice of 30
    std::mt19937 rng(3);
    std::normal_distribution<float> normal;
    std::vector<float> a(m * k), b(k * n), c(m * n);
    for (auto* v : {&a, &b, &c})
      for (float& x : *v) x = normal(rng);
    std::vector<float> want = c;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        float& w = want[i * n + j];
        if (beta == 0.0f) w = 0.0f;
        for (int64_t depth = 0; depth < k; depth += t.kc) {
          float slice = 0.0f;
          for (int64_t p = depth; p < std::min(k, depth + t.kc); ++p) slice = std::fma(a[i * k + p], b[p * n + j], slice);
          w = depth == 0 && beta == 0.0f ? slice : w + slice;
        }
      }
    codegen::cpu::generated_gemm(t, a.data(), b.data(), c.data(), m, n, k, false, false, beta, k, n, n);
    INFO("beta " << beta);
    REQUIRE(c == want);
  }
}

TEST_CASE("own gemm: a tiling the tile cannot take is a Value error", "[gemm][own_gemm]") {
  for (const GemmTiling& bad : {GemmTiling{.nr = 24}, GemmTiling{.mr = 9, .nr = 64} /* 36 accumulators */,
                                GemmTiling{.mr = 1, .nr = 16} /* one */, GemmTiling{.kc = 0}})
    REQUIRE_THROWS_AS(bad.check(), Error);
  REQUIRE_NOTHROW(GemmTiling{}.check());
}

TEST_CASE("own gemm: installed as the generated GEMM route where the code generator is", "[gemm][own_gemm]") {
  REQUIRE(kernels::has_own_gemm() == codegen::cpu::jit_available());
}

// Every float32 GEMM route a step may choose (runtime/step_settings.h) computes the same product:
// ember's rule, oneDNN, OpenBLAS on the pool, PyTorch's MKL (runtime/kernels/mkl.h) and ember's
// own (codegen/cpu/gemm.h). The MKL
// case runs as its own CTest with EMBER_MKL_LIBRARY naming the virtual environment's
// libtorch_cpu.so; elsewhere the MKL route falls back to OpenBLAS and must still be right.
#include <array>
#include <cmath>
#include <cstdlib>
#include <random>
#include <vector>

#include "ir/error.h"
#include "runtime/kernels/kernel.h"
#include "runtime/kernels/mkl.h"
#include "runtime/step_settings.h"
#include "runtime/thread_pool.h"
#include "tests/catch.h"

using namespace ember;

namespace {

struct Shape {
  int64_t m, n, k;
  bool trans_a, trans_b;
  float beta;
};

// C = op(A) op(B) + beta C in double, row-major.
std::vector<float> reference(const std::vector<float>& a, const std::vector<float>& b, std::vector<float> c,
                             const Shape& s) {
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = 0; j < s.n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < s.k; ++p) {
        double x = s.trans_a ? a[p * s.m + i] : a[i * s.k + p];
        double y = s.trans_b ? b[j * s.k + p] : b[p * s.n + j];
        acc += x * y;
      }
      c[i * s.n + j] = static_cast<float>(acc + (s.beta != 0 ? s.beta * c[i * s.n + j] : 0.0));
    }
  return c;
}

void check_route(GemmRoute route, GemmTile tile = {}) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  const Shape shapes[] = {{1, 1, 1, false, false, 0},     {3, 5, 7, false, true, 0},   {64, 48, 33, true, false, 1},
                          {257, 130, 96, false, false, 0}, {512, 384, 256, false, true, 1}, {31, 700, 64, true, true, 0},
                          {40, 1, 9, false, false, 0},     {0, 8, 8, false, false, 0},  {8, 8, 0, false, false, 0},
                          // Matrix-vector products around ember's rule's limits (OpenBLAS up to a
                          // 2 MiB matrix, split over the threads from 256 KiB): 1 and 2 rows or
                          // columns, either layout, one block and two, and just past 2 MiB.
                          {1, 1024, 256, false, true, 0},  {2, 1000, 96, false, false, 1}, {1, 600, 256, false, false, 0},
                          {1, 1024, 520, false, true, 0},  {700, 2, 300, true, true, 0},   {1100, 1, 480, false, true, 1},
                          {3, 1024, 256, false, true, 0},
                          // One row or one column through gemv ([Note: one row is a matrix-vector
                          // product]), with every layout; and blocks of a split GEMM whose last one is
                          // a single row of a transposed A (lda apart) or a single column of B (ldb apart).
                          {1, 300, 200, true, true, 1},    {300, 1, 200, true, true, 0}, {1, 1, 500, true, false, 0},
                          {33, 512, 256, true, false, 0},  {8, 33, 16384, false, false, 1}};
  for (const Shape& s : shapes) {
    std::vector<float> a(s.m * s.k), b(s.k * s.n), c(s.m * s.n);
    for (auto* v : {&a, &b, &c})
      for (float& x : *v) x = normal(rng);
    std::vector<float> want = reference(a, b, c, s);
    {
      ScopedStepSettings settings(StepSettings{.threads = 0, .gemm = route, .tile = tile});
      kernels::gemm(a.data(), b.data(), c.data(), s.m, s.n, s.k, s.trans_b, s.beta, s.trans_a);
    }
    INFO(route_name(route) << " tile " << tile.str() << " " << s.m << "x" << s.n << "x" << s.k << " trans_a " << s.trans_a << " trans_b "
                           << s.trans_b << " beta " << s.beta);
    for (size_t i = 0; i < c.size(); ++i) REQUIRE(std::abs(c[i] - want[i]) <= 1e-4f * (1 + std::abs(want[i])) * std::sqrt(s.k + 1.0f));
  }
}

}  // namespace

TEST_CASE("gemm routes: every route computes the same product", "[gemm]") {
  for (GemmRoute route : {GemmRoute::Auto, GemmRoute::OneDnn, GemmRoute::Blas, GemmRoute::Mkl, GemmRoute::Generated})
    check_route(route);
}

TEST_CASE("gemm routes: ember's own GEMM computes the same product with every tile it can generate", "[gemm]") {
  // The tuned ones, a tall one, a wide one and the smallest; each tile is compiled once.
  for (GemmTile tile : {GemmTile{12, 32}, GemmTile{8, 48}, GemmTile{16, 16}, GemmTile{2, 256}, GemmTile{1, 32}})
    check_route(GemmRoute::Generated, tile);
}

TEST_CASE("gemm routes: a tile is 'rows x columns' in settings' text, and one that cannot be generated is an error",
          "[gemm]") {
  StepSettings s{.gemm = GemmRoute::Generated, .tile = {12, 32}};
  REQUIRE(s.str() == "gemm=generated tile=12x32");
  REQUIRE(StepSettings::parse(s.str()) == s);
  REQUIRE(GemmTile::of_option(s.tile.option()) == s.tile);
  // Columns not a multiple of 16, too many or too few accumulators, and text of another form.
  for (const char* bad : {"tile=12x33", "tile=40x16", "tile=1x16", "tile=12", "tile=x32", "tile=12x", "tile=12x32x2",
                          "tile=-6x64", "tile=123456789x16", "tile=06x0064"})
    REQUIRE_THROWS_AS(StepSettings::parse(bad), Error);
}

TEST_CASE("gemm routes: a route's name is its settings' text", "[gemm]") {
  for (GemmRoute route : {GemmRoute::OneDnn, GemmRoute::Blas, GemmRoute::Mkl, GemmRoute::Generated}) {
    StepSettings s{.threads = 1, .gemm = route};
    REQUIRE(StepSettings::parse(s.str()) == s);
    REQUIRE(s.str() == std::string("threads=1 gemm=") + route_name(route));
  }
  REQUIRE_THROWS(StepSettings::parse("gemm=cublas"));
}

// Run by CTest as gemm_routes.mkl, with EMBER_MKL_LIBRARY set (tests/CMakeLists.txt).
TEST_CASE("gemm routes: PyTorch's MKL, found and right", "[.mkl]") {
  REQUIRE(std::getenv("EMBER_MKL_LIBRARY"));
  REQUIRE(kernels::mkl_available());
  check_route(GemmRoute::Mkl);
  check_route(GemmRoute::Auto);  // ember's rule with MKL there: small GEMMs go to it ([Note: small GEMMs])
}

TEST_CASE("gemm routes: with beta 0, whatever C held before (NaN, infinities) is not read", "[gemm]") {
  // Outputs are fresh memory that may hold anything: a matrix-vector product on OpenBLAS (ember's
  // rule for small ones), split or not, and the others, must overwrite it.
  const float nan = std::nanf(""), inf = INFINITY;
  for (GemmRoute route : {GemmRoute::Auto, GemmRoute::OneDnn, GemmRoute::Blas, GemmRoute::Generated})
    for (auto [m, n, k] : {std::array<int64_t, 3>{1, 1024, 256}, {2, 96, 1000}, {1, 520, 1024}, {700, 2, 300}, {300, 1, 64}}) {
      std::vector<float> a(m * k, 1.0f), b(k * n, -0.0f), c(m * n);
      for (size_t i = 0; i < c.size(); ++i) c[i] = i % 2 ? nan : -inf;
      {
        ScopedStepSettings settings(StepSettings{.threads = 0, .gemm = route});
        kernels::gemm(a.data(), b.data(), c.data(), m, n, k, false, 0.0f, false);
      }
      INFO(route_name(route) << " " << m << "x" << n << "x" << k);
      for (float x : c) REQUIRE(x == 0.0f);
    }
}

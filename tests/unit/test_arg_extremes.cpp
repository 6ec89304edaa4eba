// argmax, argmin, max_dim and min_dim on the interpreter's kernels ([Note: indexed reductions in
// two steps]): each path of the kernel (chunks of a long line, a line cut among threads, lines
// side by side in lanes, strided lines, several reduced dims, float16 through float32) against a
// plain first-extreme search, on data with ties, NaNs and infinities.
#include <ember/ember.h>

#include <cmath>
#include <limits>
#include <random>

#include "tests/catch.h"
#include "tests/unit/reference_reduce.h"

using namespace ember;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// The first largest (smallest) of `v`, or its first NaN.
int64_t first_extreme(const std::vector<double>& v, bool max) {
  int64_t best = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(v[i])) return static_cast<int64_t>(i);
    if (max ? v[i] > v[best] : v[i] < v[best]) best = static_cast<int64_t>(i);
  }
  return best;
}

// Checks argmax/argmin of x over `axes` (all when empty) against first_extreme, and for one axis
// max_dim/min_dim's values and indices too.
void check_extremes(const Tensor& x, const std::vector<int64_t>& axes) {
  std::vector<double> values = x.to_vector();
  std::vector<ref::Ints> groups = ref::reduce_groups(x.shape(), axes);
  for (bool max : {true, false}) {
    INFO((max ? "argmax" : "argmin") << " of " << dtype_name(x.dtype()) << " over " << axes.size() << " axes");
    std::vector<double> got = (max ? argmax(x, axes) : argmin(x, axes)).to_vector();
    REQUIRE(got.size() == groups.size());
    for (size_t i = 0; i < groups.size(); ++i) {
      std::vector<double> line;
      for (int64_t k : groups[i]) line.push_back(values[k]);
      INFO("line " << i);
      CHECK(got[i] == static_cast<double>(first_extreme(line, max)));
    }
    if (axes.size() != 1) continue;
    auto [v, idx] = max ? max_dim(x, axes[0]) : min_dim(x, axes[0]);
    std::vector<double> gv = v.to_vector(), gi = idx.to_vector();
    CHECK(v.dtype() == x.dtype());
    for (size_t i = 0; i < groups.size(); ++i) {
      CHECK(gi[i] == got[i]);
      double want = values[groups[i][static_cast<size_t>(got[i])]];
      CHECK((gv[i] == want || (std::isnan(gv[i]) && std::isnan(want))));
    }
  }
}

// n values from a few levels, so that ties are common.
std::vector<double> coarse(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<double> v(n);
  for (double& x : v) x = static_cast<double>(static_cast<int>(rng() % 9) - 4);
  return v;
}

}  // namespace

TEST_CASE("argmax: long lines in chunks, ties across chunks, NaNs and infinities", "[kernels][argmax]") {
  const int64_t n = 5000;  // three chunks of the contiguous scan
  std::vector<double> v;
  auto row = [&](auto f) {
    for (int64_t j = 0; j < n; ++j) v.push_back(f(j));
  };
  row([](int64_t j) { return static_cast<double>(j % 700); });         // the max ties in every chunk
  row([](int64_t) { return 1.0; });                                    // all equal: index 0
  row([](int64_t j) { return static_cast<double>(j); });               // rising: the last
  row([](int64_t j) { return j == 4000 ? kNaN : 1.0; });               // a NaN in the last chunk
  row([](int64_t j) { return j == 4500 || j == 3 ? kNaN : 1.0; });    // the first NaN
  row([](int64_t) { return -kInf; });                                  // all -inf: index 0
  row([](int64_t j) { return j == 100 || j == 3000 ? kInf : 0.0; });   // infinite ties
  row([](int64_t j) { return j == n - 1 ? kNaN : static_cast<double>(j); });  // a NaN in the tail
  row([](int64_t j) { return j == 0 ? kNaN : static_cast<double>(j); });      // a NaN first, the max last
  row([](int64_t j) { return j % 3 ? -0.0 : 0.0; });                           // zeros of both signs tie
  row([](int64_t j) { return j == 2047 || j == 2048 ? kInf : j == 2049 ? kNaN : 0.0; });  // at a chunk's edge
  Tensor x = from_vector(v, {11, n}, DType::Float32);
  check_extremes(x, {1});
  check_extremes(x.to(DType::Float64), {1});
  check_extremes(x.to(DType::Float16), {1});
  check_extremes(x, {0});
}

TEST_CASE("argmax: one long line cut among threads keeps the first of equal extremes", "[kernels][argmax]") {
  const int64_t n = 300000;
  std::vector<double> v(n, 0.0);
  v[250000] = 7.0, v[90000] = 7.0, v[299999] = 7.0;  // the max, in three parts
  v[12] = -3.0, v[200000] = -3.0;
  check_extremes(from_vector(v, {1, n}), {1});
  check_extremes(from_vector(v, {n}), {});
  v[150001] = kNaN;
  check_extremes(from_vector(v, {n}), {0});
}

TEST_CASE("argmax: lines side by side in lanes (the reduced dim not the last)", "[kernels][argmax]") {
  // Widths that fill the lanes, and leave some over; past one block of lines (2048) and with a
  // partial block, so that the blocks go to several tasks.
  for (int64_t width : {1, 16, 37, 64, 130, 2048, 4101}) {
    std::vector<double> v = coarse(static_cast<size_t>(3 * 11 * width), static_cast<uint32_t>(width));
    v[static_cast<size_t>(width + 2) % v.size()] = kNaN;
    Tensor x = from_vector(v, {3, 11, width});
    INFO("width " << width);
    check_extremes(x, {1});
    check_extremes(x, {0});
    for (DType dt : {DType::Int8, DType::UInt8, DType::Int16, DType::Int32, DType::Int64, DType::BFloat16, DType::Bool,
                     DType::Float64})
      check_extremes(from_vector(coarse(v.size(), 5), {3, 11, width}).to(dt), {1});
    check_extremes(x.to(DType::Float64), {1});  // 8-byte lanes with a NaN
  }
}

TEST_CASE("argmax: strided lines, several reduced dims and 0-d inputs", "[kernels][argmax]") {
  std::vector<double> v = coarse(37 * 7, 1);
  v[40] = kNaN;
  Tensor x = from_vector(v, {37, 7});
  Tensor t = transpose(x, 0, 1);  // [7, 37], strides [1, 7]
  check_extremes(t, {1});
  check_extremes(t, {0});
  Tensor every_other = slice(x, 0, 0, 37, 2);  // rows at stride 14
  check_extremes(every_other, {0});
  check_extremes(every_other, {1});
  Tensor cube = from_vector(coarse(4 * 3 * 5, 2), {4, 3, 5});
  check_extremes(cube, {0, 2});
  check_extremes(permute(cube, {2, 0, 1}), {1, 2});
  check_extremes(cube, {});
  check_extremes(from_vector({2.0}, {}), {});
}

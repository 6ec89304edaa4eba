// [Note: split row reductions] (codegen/cpu/split_rows.h): rows fewer than the threads split
// their length over them, and give the whole row's results.
#include <ember/ember.h>

#include <atomic>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "codegen/cpu/cpu_kernel.h"
#include "codegen/cpu/split_rows.h"
#include "codegen/kernel_spec.h"
#include "runtime/thread_pool.h"
#include "tests/catch.h"
#include "tests/unit/helpers.h"

using namespace ember;

namespace {

// A row kernel over [*, *] of `dtype` whose body (after %0, the load) is `body`, storing `out`.
bool splits(const std::string& body, const std::string& out, const std::string& dtype = "f32") {
  std::string text = "kernel rank=2 {\n  %0 = load in0 : " + dtype + "[*, *]\n" + body + "  store out0 = " + out + "\n}\n";
  return codegen::cpu::splits_rows(codegen::parse_kernel_spec(text));
}

const char* kSum = "  %1 = sum(%0) {axes=[1], keepdim=true} : f32 compute=f32\n";

// Compiled against eager (the interpreter, folding in float64): the same infinities and NaNs,
// finite values within float32 rounding of the float64 fold.
void check_whole_row(const std::function<Tensor(const Tensor&)>& fn, const Tensor& x, double rtol = 1.3e-5) {
  std::vector<double> want = fn(x).to_vector(), got = compile(fn)(x).to_vector();
  REQUIRE(want.size() == got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("element " << i << ": compiled " << got[i] << ", eager " << want[i]);
    if (!std::isfinite(want[i])) CHECK(((std::isnan(want[i]) && std::isnan(got[i])) || want[i] == got[i]));
    else CHECK(std::abs(got[i] - want[i]) <= 1.5e-5 + rtol * std::abs(want[i]));
  }
}

Tensor halves(double first, double second, int64_t n) {
  std::vector<double> v(n, first);
  for (int64_t i = n / 2; i < n; ++i) v[i] = second;
  return from_vector(v, {1, n});
}

}  // namespace

TEST_CASE("split row reductions: which kernels split a row's length", "[codegen][split]") {
  CHECK(splits(kSum, "%1"));
  CHECK(splits("  %1 = abs(%0) : f32 compute=f32\n  %2 = max(%1) {axes=[1], keepdim=true} : f32 compute=f32\n", "%2"));
  CHECK(splits("  %1 = mean(%0) {axes=[1], keepdim=true} : f64 compute=f64\n", "%1", "f64"));
  CHECK(splits("  %1 = sum(%0) {axes=[1], keepdim=true} : i64 compute=i64\n", "%1", "i64"));
  // A value computed from a fold (a norm's square root) would need the whole row's fold first.
  CHECK_FALSE(splits(std::string(kSum) + "  %2 = sqrt(%1) : f32 compute=f32\n", "%2"));
  // A second level of folds (a variance's squares need the mean).
  CHECK_FALSE(splits("  %1 = mean(%0) {axes=[1], keepdim=true} : f32 compute=f32\n  %2 = sub(%0, %1) : f32 compute=f32\n"
                     "  %3 = sum(%2) {axes=[1], keepdim=true} : f32 compute=f32\n", "%3"));
  // A float16 result rounds each share's partial: kept whole.
  CHECK_FALSE(splits("  %1 = sum(%0) {axes=[1], keepdim=true} : f16 compute=f32\n", "%1", "f16"));
  CHECK_FALSE(splits("  %1 = prod(%0) {axes=[1], keepdim=true} : f32 compute=f32\n", "%1"));
}

TEST_CASE("split row reductions: one long row folded by two threads gives the whole row's result",
          "[codegen][split]") {
  ThreadCountForCall two(2);
  const int64_t n = 3 * 65536 + 17;  // past two grains, not a whole number of shares' alignment
  Tensor x = uniform({1, n}, 7, -1.0, 1.0);
  check_whole_row([](const Tensor& t) { return sum(t, {-1}); }, x);
  check_whole_row([](const Tensor& t) { return mean(t * t, {-1}, true); }, x);
  check_whole_row([](const Tensor& t) { return max(abs(t), {-1}); }, x);
  check_whole_row([](const Tensor& t) { return min(t, {-1}); }, x);
  check_whole_row([](const Tensor& t) { return sum(t); }, reshape(x, {n}));  // the whole tensor
  check_whole_row([](const Tensor& t) { return sum(t, {-1}); }, cast(x, DType::Float64), 1e-12);
  check_whole_row([](const Tensor& t) { return sum(t, {-1}); }, cast(x * 1000.0, DType::Int64), 0);
  // Rows over two dims, fewer than three threads.
  {
    ThreadCountForCall three(3);
    Tensor rows = uniform({2, 1, n}, 8, -1.0, 1.0);
    check_whole_row([](const Tensor& t) { return sum(t, {-1}, true); }, rows);
    check_whole_row([](const Tensor& t) { return max(t, {-1}); }, rows);
  }
  // Several outputs of one kernel.
  check_whole_row([](const Tensor& t) { return sum(t, {-1}) + max(t, {-1}); }, x);
}

TEST_CASE("split row reductions: a share's overflow, infinities and NaN stay as the whole row has them",
          "[codegen][split]") {
  ThreadCountForCall two(2);
  const int64_t n = 4 * 65536;
  auto row_sum = [](const Tensor& t) { return sum(t, {-1}); };
  auto row_mean = [](const Tensor& t) { return mean(t, {-1}); };
  auto row_max = [](const Tensor& t) { return max(t, {-1}); };
  // Each half overflows float32 (as a float64 fold too), the whole row is 0.
  check_whole_row(row_sum, halves(3e38, -3e38, n));
  check_whole_row(row_mean, halves(3e38, -3e38, n));
  double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  check_whole_row(row_sum, halves(1.0, inf, n));
  check_whole_row(row_sum, halves(-inf, inf, n));
  check_whole_row(row_max, halves(nan, 1.0, n));
  check_whole_row(row_max, halves(1.0, nan, n));
  check_whole_row(row_max, halves(-inf, 2.0, n));
}

TEST_CASE("split row reductions: more threads than shares, and calls from several threads at once",
          "[codegen][split]") {
  const int64_t n = 3 * 65536 + 17;
  Tensor x = uniform({1, n}, 9, -1.0, 1.0);
  auto row_sum_max = [](const Tensor& t) { return sum(t, {-1}) + max(t, {-1}); };
  {
    ThreadCountForCall sixteen(16);  // more than the row has shares of a grain
    check_whole_row(row_sum_max, x);
  }
  // Each caller's loop finds the pool busy or free: run on it, or serially on the caller.
  auto f = compile(row_sum_max);
  double want = row_sum_max(x).to_vector()[0];
  std::vector<std::thread> callers;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 16; ++t)
    callers.emplace_back([&] {
      ThreadCountForCall two(2);
      for (int i = 0; i < 5; ++i)
        if (std::abs(f(x).to_vector()[0] - want) > 1.5e-5 + 1.3e-5 * std::abs(want)) ++wrong;
    });
  for (std::thread& c : callers) c.join();
  CHECK(wrong == 0);
}

TEST_CASE("split row reductions: whole rows, max-autotune's other choice, give the same result", "[codegen][split]") {
  // The choice is offered only by kernels that split, runs the same code (a launch field), and
  // folds each row on one thread.
  ThreadCountForCall two(2);
  auto spec = codegen::parse_kernel_spec(std::string("kernel rank=2 {\n  %0 = load in0 : f32[*, *]\n") + kSum +
                                         "  store out0 = %1\n}\n");
  auto split = codegen::cpu::cpu_kernel(spec).kernel;
  bool offered = false;
  for (const Knob& k : split->knobs()) offered = offered || (k.name == "whole_rows" && k.options == std::vector<int64_t>{0, 1});
  REQUIRE(offered);
  auto whole = std::dynamic_pointer_cast<const codegen::cpu::CpuKernel>(split->with("whole_rows=1"));
  REQUIRE(whole->config().whole_rows == 1);
  REQUIRE(whole->fn() == split->fn());
  for (const Knob& k : whole->knobs()) REQUIRE(k.name != "whole_rows");
  {
    ThreadCountForCall one(1);  // on one thread no split is offered, nor the grain
    for (const Knob& k : split->knobs()) REQUIRE((k.name != "whole_rows" && k.name != "grain"));
  }
  REQUIRE_THROWS_AS(split->with("whole_rows=2"), Error);
  const int64_t n = 3 * 65536 + 5;
  Tensor x = uniform({1, n}, 11, -1.0, 1.0);
  std::vector<double> v = x.to_vector();
  double want = 0;
  for (double e : v) want += e;
  for (const auto& kernel : {split, whole}) {
    Array in = x.array(), out = Array::empty(DType::Float32, {1, 1});
    kernel->run(std::vector<Array>{in}, std::vector<Array>{out});
    CHECK(std::abs(out.get(0) - want) <= 1.5e-5 + 1.3e-5 * std::abs(want) + 1e-6 * n);
  }
}

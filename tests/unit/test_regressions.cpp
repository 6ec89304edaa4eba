// Regression tests for bugs found in review; each names what went wrong.
#include <ember/ember.h>

#include <algorithm>
#include <array>

#include "tests/catch.h"

using namespace ember;

TEST_CASE("clamp with one bound keeps integers in range (missing bound was wrapped)", "[regression]") {
  for (DType t : {DType::Int8, DType::UInt8, DType::Int16, DType::Int32, DType::Int64}) {
    INFO(dtype_name(t));
    Tensor x = from_vector({0, 3, 7, 100}, {4}, t);
    CHECK(clamp(x, std::nullopt, 5).to_vector() == std::vector<double>{0, 3, 5, 5});
    CHECK(clamp(x, 3, std::nullopt).to_vector() == std::vector<double>{3, 3, 7, 100});
  }
  Tensor f = from_vector({-1e30, 2, 1e30}, {3});
  CHECK(clamp(f, std::nullopt, 5.0).to_vector() == std::vector<double>{static_cast<float>(-1e30), 2, 5});
}

TEST_CASE("reading an undefined tensor is an error, not a crash", "[regression]") {
  Tensor t;
  CHECK_THROWS_AS(t.item<double>(), Error);
  CHECK_THROWS_AS(t.to_bool(), Error);
  CHECK_THROWS_AS(t.to_vector(), Error);
  CHECK_THROWS_AS(t.str(), Error);
  CHECK_THROWS_AS(static_cast<bool>(t), Error);
}

TEST_CASE("sizes combine with plain integers and stay symbolic", "[regression][dynamic]") {
  int calls = 0;
  auto f = compile(
      [&](const Tensor& x) {
        ++calls;
        return reshape(x, {x.size(0) * 2, x.size(1) / 2});
      },
      Options{.dynamic = true});
  CHECK(f(uniform({3, 4}, 1)).shape() == std::vector<int64_t>{6, 2});
  CHECK(f(uniform({5, 4}, 1)).shape() == std::vector<int64_t>{10, 2});
  // x.size(1) / 2 is not exact for a symbol, so s1 is specialised to 4 (a guard), and the
  // reshape relies on 4*s0 == s0*s1 (a fact, guarded); dim 0 stays symbolic and the second size
  // replays.
  CHECK(calls == 1);
  CHECK(f.report().recompiles.empty());
  CHECK(f.report().guards.at(0) == "input 0: f32[s0, s1], contiguous, cpu");
  std::vector<std::string> guards = f.report().guards;
  CHECK(std::find(guards.begin(), guards.end(), "s1 == 4") != guards.end());
  CHECK(f(uniform({5, 6}, 1)).shape() == std::vector<int64_t>{10, 3});
  CHECK(calls == 2);
}

TEST_CASE("a changed argument count is a guard failure, not an out-of-bounds read", "[regression]") {
  auto f = compile([](auto... xs) { return (xs + ...); });
  Tensor a = uniform({2}, 1);
  f(a, a);
  f(a, a, a);
  REQUIRE(!f.report().recompiles.empty());
  CHECK(f.report().recompiles.back().guard.find("2 -> 3") != std::string::npos);
}

TEST_CASE("pinned dims stay pinned: a break-y function does not re-discover them each call", "[regression][dynamic]") {
  auto f = compile(
      [](const Tensor& x) {
        Tensor y = max_pool2d(x, {2, 2});
        if (y.sum().item<double>() > 1e9) return y;
        return y * 2.0;
      },
      Options{.dynamic = true});
  for (int i = 0; i < 4; ++i) f(uniform({1, 2, 6, 6}, i));
  CHECK(f.report().notes.size() == 1);
}

TEST_CASE("x + 0.0 is not simplified away: it turns -0.0 into +0.0", "[regression][passes]") {
  auto f = compile([](const Tensor& x) { return x + 0.0; });
  auto v = f(from_vector({-0.0}, {1})).to_vector();
  CHECK(!std::signbit(v[0]));
}

TEST_CASE("pass timings reach the report", "[regression][report]") {
  auto f = compile([](const Tensor& x) { return exp(x); });
  f(uniform({2}, 1));
  auto passes = f.report().graphs.at(0).pass_ms;
  REQUIRE(passes.size() == 6);
  CHECK(passes[0].first == "decompose-fusible");
  CHECK(passes[1].first == "split-reductions");
  CHECK(passes[2].first == "constant-fold");
  CHECK(f.report().json().find("\"pass_ms\": {\"decompose-fusible\"") != std::string::npos);
}

TEST_CASE("matmul reads a contiguous operand from its storage offset (a row slice)", "[regression]") {
  Tensor a = reshape(arange(0, 6, 1, DType::Float32), {2, 3});
  Tensor row = slice(a, 0, 1, 2);
  CHECK(matmul(row, ones({3, 1})).to_vector() == std::vector<double>{12});
}

TEST_CASE("matmul reads a transposed left operand as it is (a weight gradient), every dtype and block", "[regression]") {
  // x.t() @ g, batched too, with sizes that split C over the threads by rows and by columns.
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (auto [m, k, n] : std::vector<std::array<int64_t, 3>>{{600, 100, 200}, {5, 200, 8000}, {2, 3, 4}}) {
      for (int64_t batch : {int64_t{0}, int64_t{2}}) {
        std::vector<int64_t> xs = {k, m}, gs = {k, n};
        if (batch) xs.insert(xs.begin(), batch), gs.insert(gs.begin(), batch);
        Tensor x = uniform(SymShape(xs.begin(), xs.end()), 1, -1.0, 1.0, dt);
        Tensor g = uniform(SymShape(gs.begin(), gs.end()), 2, -1.0, 1.0, dt);
        int64_t r = static_cast<int64_t>(xs.size());
        Tensor got = matmul(transpose(x, r - 2, r - 1), g);
        std::vector<double> xv = x.to_vector(), gv = g.to_vector(), out = got.to_vector();
        int64_t wrong = 0;
        for (int64_t b = 0; b < std::max<int64_t>(batch, 1); ++b)
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
              double want = 0;
              for (int64_t l = 0; l < k; ++l) want += xv[b * k * m + l * m + i] * gv[b * k * n + l * n + j];
              wrong += std::abs(out[b * m * n + i * n + j] - want) > 1e-4 * (1 + std::abs(want));
            }
        INFO(dtype_name(dt) << " " << m << "x" << k << "x" << n << " batch " << batch);
        CHECK(wrong == 0);
      }
    }
  }
}

TEST_CASE("clamp with min > max gives max, as min(max(x, lo), hi)", "[regression]") {
  Tensor x = from_vector({0, 5}, {2});
  CHECK(clamp(x, full({}, 3.0), full({}, 1.0)).to_vector() == std::vector<double>{1, 1});
  CHECK(clamp(x, 3.0, 1.0).to_vector() == std::vector<double>{1, 1});
}

TEST_CASE("integer operands convert to the promoted dtype before the op", "[regression]") {
  Tensor u = from_vector({1, 2}, {2}, DType::UInt8);
  Tensor m = from_vector({-2}, {}, DType::Int8);  // as uint8: 254
  CHECK(lt(u, m).to_vector() == std::vector<double>{1, 1});
  CHECK(maximum(u, m).to_vector() == std::vector<double>{254, 254});
  CHECK(floor_divide(u, m).to_vector() == std::vector<double>{0, 0});
}

TEST_CASE("copies and fills past 1 MiB split over threads give every element once", "[regression][threads]") {
  // runtime/kernels/common.cpp splits large copies along the first dim longer than 1, and fills
  // by chunks: a transposed source, a conversion, a pad and a leading dim of 1.
  Tensor x = uniform({1, 600, 700}, 1, -1, 1);
  Tensor t = transpose(x, 1, 2);  // [1, 700, 600], strided
  Array got = t.array().contiguous(), want_src = t.array();
  bool same = true;
  for (int64_t i = 0; i < 700 && same; ++i)
    for (int64_t j = 0; j < 600 && same; ++j) same = got.get(i * 600 + j) == want_src.get(i * 600 + j);
  CHECK(same);
  Array wide = cast(t, DType::Float64).array().contiguous();  // a strided copy with conversion
  bool converted = true;
  for (int64_t i = 0; i < 700 * 600 && converted; ++i) converted = wide.get(i) == got.get(i);
  CHECK(converted);
  Tensor padded = pad(x, {3, 5, 2, 1}, 7.5);  // [1, 603, 708]
  REQUIRE(padded.shape() == std::vector<int64_t>{1, 603, 708});
  Array p = padded.array(), src = x.array();
  bool right = true;
  for (int64_t i = 0; i < 603 && right; ++i)
    for (int64_t j = 0; j < 708 && right; ++j) {
      bool inside = i >= 2 && i < 602 && j >= 3 && j < 703;
      double want = inside ? src.get((i - 2) * 700 + (j - 3)) : 7.5;
      right = p.get(i * 708 + j) == want;
    }
  CHECK(right);
}

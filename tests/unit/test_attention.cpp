// Float32 attention runs the interpreter's blocked kernel ([Note: blocked attention] in
// runtime/kernels/attention.cpp): checked against the float64 kernel (the unblocked reference
// loop) where the op sweep's small shapes do not reach: lengths across block boundaries, the
// running max growing from one key block to the next, masks hiding whole rows and blocks.
#include <ember/ember.h>

#include <cmath>
#include <optional>
#include <tuple>

#include "runtime/kernels/attention.h"
#include "runtime/kernels/mkl.h"
#include "runtime/step_settings.h"
#include "tests/catch.h"
#include "tests/unit/helpers.h"

using namespace ember;
using test::check_close;

namespace {

Tensor f64(const Tensor& t) { return cast(t, DType::Float64); }

void check_attention(const Tensor& q, const Tensor& k, const Tensor& v, const std::optional<Tensor>& mask,
                     bool causal) {
  Tensor got = scaled_dot_product_attention(q, k, v, mask, causal);
  std::optional<Tensor> mask64;
  if (mask) mask64 = mask->dtype() == DType::Bool ? *mask : f64(*mask);
  Tensor want = scaled_dot_product_attention(f64(q), f64(k), f64(v), mask64, causal);
  check_close(got, want, 2e-5, 2e-6);
}

}  // namespace

// The kernel's blocks: 64 queries against 256 keys.
TEST_CASE("blocked attention: lengths across block boundaries, causal or not", "[runtime][attention]") {
  for (auto [L, S] : {std::pair<int64_t, int64_t>{1, 1}, {63, 255}, {64, 256}, {65, 257}, {129, 300}, {300, 129},
                      {5, 513}, {257, 257}}) {
    for (bool causal : {false, true}) {
      INFO("L " << L << ", S " << S << ", causal " << causal);
      Tensor q = uniform({2, L, 16}, 1, -1, 1), k = uniform({2, S, 16}, 2, -1, 1), v = uniform({2, S, 24}, 3, -1, 1);
      check_attention(q, k, v, std::nullopt, causal);
    }
  }
}

TEST_CASE("blocked attention: a head size of 0 gives uniform weights over every key block", "[runtime][attention]") {
  // The scores are empty sums, 0: every query averages the values, across several key blocks.
  Tensor q = uniform({2, 100, 0}, 1), k = uniform({2, 300, 0}, 2), v = uniform({2, 300, 5}, 3, -1, 1);
  check_attention(q, k, v, std::nullopt, false);
  check_attention(q, k, v, std::nullopt, true);
}

TEST_CASE("blocked attention: the running max grows across key blocks", "[runtime][attention]") {
  // Keys grow with their index, so each key block raises every query's max over the previous
  // ones: the partial outputs and sums are rescaled at each block.
  const int64_t S = 700;
  Tensor ramp = reshape(arange(0, S, 1, DType::Float32), {1, S, 1}) * 0.1;
  Tensor k = uniform({1, S, 8}, 4, 0.5, 1) * ramp;
  Tensor q = uniform({1, 70, 8}, 5, 0.5, 1) * 3.0, v = uniform({1, S, 8}, 6, -1, 1);
  check_attention(q, k, v, std::nullopt, false);
  check_attention(q, k, v, std::nullopt, true);
}

TEST_CASE("blocked attention: masks, whole rows hidden (0), -inf scores, float16", "[runtime][attention]") {
  const int64_t L = 150, S = 600;
  Tensor q = uniform({3, L, 8}, 7, -2, 2), k = uniform({3, S, 8}, 8, -2, 2), v = uniform({3, S, 8}, 9, -1, 1);
  // Bool: keep keys with j % 3 == i % 3; rows 10..19 keep nothing (0, as PyTorch's).
  Tensor i = reshape(arange(0, L, 1, DType::Int64), {L, 1}), j = reshape(arange(0, S, 1, DType::Int64), {1, S});
  Tensor rows_hidden = logical_and(i >= 10, i < 20);
  Tensor keep = logical_and(remainder(i, 3) == remainder(j, 3), logical_not(rows_hidden));
  check_attention(q, k, v, keep, false);
  check_attention(q, k, v, keep, true);
  // Additive: -inf over the first 300 keys (a whole key block hidden), finite elsewhere.
  Tensor additive = where(j < 300, -INFINITY, uniform({L, S}, 10, -3, 0));
  check_attention(q, k, v, additive, false);
  // float16 computes in float32 through the same kernel.
  Tensor got = scaled_dot_product_attention(cast(q, DType::Float16), cast(k, DType::Float16), cast(v, DType::Float16));
  Tensor want = scaled_dot_product_attention(f64(cast(q, DType::Float16)), f64(cast(k, DType::Float16)),
                                             f64(cast(v, DType::Float16)));
  check_close(got, want, 2e-3, 2e-3);
}

namespace {

// The kernel's cases under other tiles and another GEMM library, as max-autotune tries them.
void check_tiling(const StepSettings& settings) {
  ScopedStepSettings scoped(settings);
  INFO("settings " << settings.str());
  for (auto [L, S] : {std::pair<int64_t, int64_t>{1, 1}, {15, 63}, {17, 65}, {129, 513}, {300, 129}}) {
    for (bool causal : {false, true}) {
      INFO("L " << L << ", S " << S << ", causal " << causal);
      Tensor q = uniform({2, L, 16}, 1, -1, 1), k = uniform({2, S, 16}, 2, -1, 1), v = uniform({2, S, 24}, 3, -1, 1);
      check_attention(q, k, v, std::nullopt, causal);
    }
  }
  const int64_t L = 70, S = 300;
  Tensor q = uniform({2, L, 8}, 7, -2, 2), k = uniform({2, S, 8}, 8, -2, 2), v = uniform({2, S, 8}, 9, -1, 1);
  Tensor i = reshape(arange(0, L, 1, DType::Int64), {L, 1}), j = reshape(arange(0, S, 1, DType::Int64), {1, S});
  check_attention(q, k, v, logical_and(remainder(i, 3) == remainder(j, 3), i >= 5), true);  // rows 0..4 are 0
  check_attention(q, k, v, where(j < 150, -INFINITY, uniform({L, S}, 10, -3, 0)), false);
}

}  // namespace

TEST_CASE("blocked attention: other tiles and OpenBLAS compute the same", "[runtime][attention]") {
  check_tiling(StepSettings{.query_block = 16, .key_block = 64});
  check_tiling(StepSettings{.query_block = 128, .key_block = 512});
  check_tiling(StepSettings{.gemm = GemmRoute::Blas, .query_block = 32, .key_block = 128});
  check_tiling(StepSettings{.gemm = GemmRoute::OneDnn});
  StepSettings s{.threads = 1, .gemm = GemmRoute::Blas, .query_block = 32, .key_block = 512};
  CHECK(s.str() == "threads=1 gemm=blas query_block=32 key_block=512");
  CHECK(StepSettings::parse(s.str()) == s);
  CHECK_THROWS(StepSettings::parse("query_block=0"));
}

// The own AVX-512 tiles (runtime/kernels/attention_tiles.h), the default where the CPU has them:
// head and value widths across their vectors (masked last vectors, several column groups), key
// blocks that end inside a panel, and the dot products with keys where they lie that take a few
// queries (a decoding step) or key blocks that are not whole panels.
TEST_CASE("blocked attention: the own tiles over widths and blocks", "[runtime][attention]") {
  for (auto [E, Ev] : {std::pair<int64_t, int64_t>{64, 64}, {80, 40}, {17, 72}, {128, 130}, {1, 16}}) {
    for (auto [L, S] : {std::pair<int64_t, int64_t>{16, 33}, {100, 290}, {77, 64}}) {
      for (bool causal : {false, true}) {
        INFO("E " << E << ", Ev " << Ev << ", L " << L << ", S " << S << ", causal " << causal);
        Tensor q = uniform({2, L, E}, 1, -1, 1), k = uniform({2, S, E}, 2, -1, 1), v = uniform({2, S, Ev}, 3, -1, 1);
        check_attention(q, k, v, std::nullopt, causal);
      }
    }
  }
  Tensor q = uniform({2, 40, 64}, 4, -1, 1), k = uniform({2, 200, 64}, 5, -1, 1), v = uniform({2, 200, 64}, 6, -1, 1);
  for (int key_block : {48, 100}) {  // not whole panels: dot products
    ScopedStepSettings scoped(StepSettings{.key_block = key_block});
    check_attention(q, k, v, std::nullopt, true);
  }
  check_attention(slice(q, 1, 0, 15), k, v, std::nullopt, false);  // 15 queries: dot products
  check_attention(slice(q, 1, 0, 1), k, v, std::nullopt, false);     // decoding's one
  check_attention(slice(q, 1, 0, 3), slice(k, 1, 0, 3), slice(v, 1, 0, 3), std::nullopt, true);
}

TEST_CASE("blocked attention: masks read where they lie, one row for every query or transposed",
          "[runtime][attention]") {
  const int64_t B = 2, H = 3, L = 40, S = 300, E = 16;
  Tensor q = uniform({B, H, L, E}, 1, -1, 1), k = uniform({B, H, S, E}, 2, -1, 1), v = uniform({B, H, S, E}, 3, -1, 1);
  Tensor j = reshape(arange(0, S, 1, DType::Int64), {1, 1, 1, S});
  Tensor b = reshape(arange(0, B, 1, DType::Int64), {B, 1, 1, 1});
  // A padding mask [B, 1, 1, S]: batch entry b keeps its first S - 50 b keys, for every head and query.
  Tensor keep = j < (b * -50 + S);
  for (bool causal : {false, true}) {
    check_attention(q, k, v, keep, causal);
    check_attention(q, k, v, where(logical_not(keep), -INFINITY, uniform({B, 1, 1, S}, 5, -1, 0)), causal);
  }
  // A float mask whose rows are not contiguous (transposed [S, L] storage): copied, then read.
  Tensor additive = transpose(uniform({B, 1, S, L}, 4, -2, 0), 2, 3);
  check_attention(q, k, v, additive, false);
}

// Run by CTest as gemm_routes.mkl, with EMBER_MKL_LIBRARY set (tests/CMakeLists.txt).
TEST_CASE("blocked attention: tiles through PyTorch's MKL", "[.mkl]") {
  REQUIRE(kernels::mkl_available());
  check_tiling(StepSettings{.gemm = GemmRoute::Mkl});
  check_tiling(StepSettings{.gemm = GemmRoute::Mkl, .query_block = 16, .key_block = 128});
}

TEST_CASE("blocked attention: heads read in place from a fused projection, broadcast keys, other layouts",
          "[runtime][attention]") {
  const int64_t B = 2, T = 70, H = 3, D = 16;
  Tensor qkv = uniform({B, T, 3 * H * D}, 11, -1, 1);
  // A GPT block's heads: a slice of the projection, split into heads and transposed.
  auto head = [&](int64_t part) {
    return transpose(reshape(slice(qkv, 2, part * H * D, (part + 1) * H * D), {B, T, H, D}), 1, 2);
  };
  for (bool causal : {false, true}) {
    check_attention(head(0), head(1), head(2), std::nullopt, causal);
    // One key and value head for all query heads (multi-query attention): stride 0 over heads.
    Tensor k1 = slice(head(1), 1, 0, 1), v1 = slice(head(2), 1, 0, 1);
    check_attention(head(0), expand(k1, {B, H, T, D}), expand(v1, {B, H, T, D}), std::nullopt, causal);
    // Keys transposed in memory (rows not contiguous): copied, as before.
    Tensor kt = transpose(uniform({B, H, D, T}, 12, -1, 1), 2, 3);
    check_attention(head(0), kt, head(2), std::nullopt, causal);
  }
}

TEST_CASE("blocked attention: the kernel reads rows a stride apart at each entry's offset", "[runtime][attention]") {
  // q, k, v for 3 entries, each row padded to 40 floats and the entries in reverse order: what
  // the in-place path hands the kernel, checked against the contiguous inputs.
  const int64_t count = 3, L = 33, S = 300, E = 24, pad = 40;
  Tensor q = uniform({count, L, E}, 1, -1, 1), k = uniform({count, S, E}, 2, -1, 1), v = uniform({count, S, E}, 3, -1, 1);
  auto strided = [&](const Tensor& t, int64_t rows, std::vector<float>& memory) {
    memory.assign(count * rows * pad, NAN);  // the padding must not be read
    kernels::AttentionInput in;
    in.row_stride = pad;
    Array a = t.array().contiguous();
    for (int64_t bi = 0; bi < count; ++bi) {
      int64_t at = (count - 1 - bi) * rows * pad;
      in.offsets.push_back(at);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t e = 0; e < E; ++e) memory[at + r * pad + e] = a.data_as<float>()[(bi * rows + r) * E + e];
    }
    in.data = memory.data();
    return in;
  };
  std::vector<float> qm, km, vm;
  kernels::AttentionInput qi = strided(q, L, qm), ki = strided(k, S, km), vi = strided(v, S, vm);
  for (bool causal : {false, true}) {
    std::vector<float> out(count * L * E);
    kernels::AttentionShape shape{count, L, S, E, E, 1.0f / std::sqrt(float(E)), causal, false};
    kernels::blocked_attention(shape, qi, ki, vi, nullptr, out.data());
    Tensor want = scaled_dot_product_attention(q, k, v, std::nullopt, causal);
    Array w = want.array().contiguous();
    for (size_t i = 0; i < out.size(); ++i) REQUIRE(std::abs(out[i] - w.data_as<float>()[i]) <= 1e-5f);
  }
}

// PyTorch's SDPA (its safe softmax) gives 0 for a query that attends to nothing, and NaN for a
// row with a NaN score, masked or not: here +inf * (a positive key) + the mask's -inf. Each way
// the tiles compute: dot products for a few queries, packed panels, the GEMM library.
TEST_CASE("blocked attention: a hidden row is 0, and a NaN score in it makes it NaN", "[runtime][attention]") {
  for (auto [L, S, library] : {std::tuple<int64_t, int64_t, bool>{1, 9, false}, {3, 9, false}, {40, 64, false},
                               {40, 64, true}, {70, 300, false}}) {
    INFO("L " << L << ", S " << S << ", library " << library);
    std::optional<ScopedStepSettings> scoped;
    if (library) scoped.emplace(StepSettings{.gemm = GemmRoute::OneDnn});
    const int64_t E = 8;
    Tensor i = reshape(arange(0, L, 1, DType::Int64), {L, 1}), j = reshape(arange(0, S, 1, DType::Int64), {1, S});
    Tensor e = reshape(arange(0, E, 1, DType::Int64), {1, E});
    // Query 0 has +inf in its first element and every key a positive first element: its scores
    // are +inf, and with the mask's -inf, NaN. Query 1 (where there is one) is only hidden.
    Tensor q = where(logical_and(i == 0, e == 0), INFINITY, uniform({L, E}, 11, -1, 1));
    Tensor k = uniform({S, E}, 12, 0.5, 1), v = uniform({S, E}, 13, -1, 1);
    Tensor mask = where(i <= 1, -INFINITY, uniform({L, S}, 14, -2, 0));
    Tensor got = scaled_dot_product_attention(reshape(q, {1, L, E}), reshape(k, {1, S, E}), reshape(v, {1, S, E}),
                                              reshape(mask, {1, L, S}));
    check_attention(reshape(q, {1, L, E}), reshape(k, {1, S, E}), reshape(v, {1, S, E}), reshape(mask, {1, L, S}),
                    false);
    Array out = got.array().contiguous();
    for (int64_t c = 0; c < E; ++c) {
      CHECK(std::isnan(out.get(c)));
      if (L > 1) CHECK(out.get(E + c) == 0.0);
      if (L > 2) CHECK(std::isfinite(out.get(2 * E + c)));
    }
  }
}

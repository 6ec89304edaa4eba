// Views resolved per layout ([Note: views resolved per layout] in runtime/executable.cpp) under
// sizes a decode loop does not make: lengths that shrink and come back, empty and 1-long ones,
// a huge one, many threads at once with different lengths, and arguments that alias.
#include <ember/ember.h>

#include <atomic>
#include <thread>

#include "tests/unit/helpers.h"

using namespace ember;
using ember::test::max_difference;

namespace {

// A key-value cache's steps: its views (reshape, permute, transpose, slice) are of a buffer
// whose length is symbolic, and of a static-sized one.
std::vector<Tensor> attend(const Tensor& cache, const Tensor& token, const Tensor& w) {
  Tensor kv = concat({cache, matmul(token, w)}, 1);  // [2, L + 1, 8]
  Tensor heads = permute(reshape(kv, {2, kv.sizes()[1], 2, 4}), {0, 2, 1, 3});
  Tensor q = permute(reshape(matmul(token, w), {2, 1, 2, 4}), {0, 2, 1, 3});
  Tensor scores = matmul(q, transpose(heads, 2, 3));
  Tensor middle = slice(transpose(kv, 1, 2), 1, 2, 5);
  return {softmax(scores, -1), exp(middle) + sum(middle, {1}, true), sum(heads, {2})};
}

// Within float32's rounding of sums of up to thousands of terms: 1e-5 of the largest value.
bool matches(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  if (got.size() != want.size()) return false;
  for (size_t k = 0; k < got.size(); ++k) {
    Array w = want[k].array().contiguous();
    double scale = 1;
    for (int64_t i = 0; i < w.numel(); ++i) scale = std::max(scale, std::abs(w.get(i)));
    if (!(max_difference(got[k], want[k]) <= 1e-5 * scale)) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("resolved views stay exact when the length shrinks, empties, is 1, is huge and comes back",
          "[codegen][plan][views]") {
  for (const char* mode : {"default", "reduce-overhead"}) {
    INFO(mode);
    auto f = compile(attend, Options{.mode = mode, .dynamic = true});
    Tensor w = uniform({8, 8}, 7);
    for (int64_t length : {5, 6, 3, 0, 1, 2, 1, 4000, 6, 0, 5}) {
      CAPTURE(length);
      Tensor cache = uniform({2, length, 8}, length + 1), token = uniform({2, 1, 8}, 100 + length);
      CHECK(matches(f(cache, token, w), attend(cache, token, w)));
    }
  }
}

TEST_CASE("resolved views under 16 threads calling with different lengths at once", "[codegen][plan][views]") {
  for (const char* mode : {"default", "reduce-overhead"}) {
    INFO(mode);
    auto f = compile(attend, Options{.mode = mode, .dynamic = true});
    Tensor w = uniform({8, 8}, 7);
    (void)f(uniform({2, 3, 8}, 1), uniform({2, 1, 8}, 2), w);  // traced once, before the threads
    std::atomic<int> wrong{0}, failed{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 16; ++t)
      threads.emplace_back([&, t] {
        try {
          for (int i = 0; i < 20; ++i) {
            int64_t length = 1 + (t * 7 + i * 3) % 23;
            Tensor cache = uniform({2, length, 8}, t * 100 + i), token = uniform({2, 1, 8}, t * 100 + i + 50);
            if (!matches(f(cache, token, w), attend(cache, token, w))) ++wrong;
          }
        } catch (const std::exception&) {
          ++failed;
        }
      });
    for (std::thread& t : threads) t.join();
    CHECK(wrong == 0);
    CHECK(failed == 0);
  }
}

TEST_CASE("resolved views of arguments that alias, are strided, or are returned as they are",
          "[codegen][plan][views]") {
  // Both arguments one tensor, a view of an argument returned twice, and an argument that is a
  // transposed view: views assumed contiguous at offset 0 must run as steps for it.
  auto fn = [](const Tensor& a, const Tensor& b) {
    Tensor t = transpose(a, 0, 1);
    Tensor r = reshape(b, {b.sizes()[0] * 4});
    return std::vector<Tensor>{t, t, r * 2.0, matmul(a, t)};
  };
  auto f = compile(fn, Options{.dynamic = true});
  for (int64_t n : {3, 4, 1, 5}) {
    CAPTURE(n);
    Tensor x = uniform({n, 4}, n);
    CHECK(matches(f(x, x), fn(x, x)));
    Tensor wide = uniform({4, n + 2}, n + 9);
    Tensor strided = transpose(slice(wide, 1, 1, n + 1), 0, 1);  // [n, 4], not contiguous
    CHECK(matches(f(strided, x), fn(strided, x)));
    CHECK(matches(f(x, strided), fn(x, strided)));
  }
}

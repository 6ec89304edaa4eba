// One test per entry of docs/footguns.md: each pins a surprising behaviour.
#include <ember/ember.h>

#include "tests/catch.h"

using namespace ember;

TEST_CASE("footgun 1: side effects run only while tracing", "[footguns]") {
  int calls = 0;
  auto f = compile([&](const Tensor& x) { ++calls; return x * 2.0; });
  for (int i = 0; i < 3; ++i) f(uniform({2}, i));
  CHECK(calls == 1);
}

TEST_CASE("footgun 2: a replay uses the captured tensor seen when tracing", "[footguns]") {
  Tensor w = full({2}, 1.0);
  auto f = compile([&](const Tensor& x) { return x * w; });
  Tensor x = full({2}, 3.0);
  CHECK(f(x).to_vector() == std::vector<double>{3, 3});
  w = full({2}, 10.0);
  CHECK(f(x).to_vector() == std::vector<double>{3, 3});  // still the old w
}

TEST_CASE("footgun 3: a function with a break traces on every call", "[footguns]") {
  int calls = 0;
  auto f = compile([&](const Tensor& x) {
    ++calls;
    return x.sum().item<double>() > 0 ? x : -x;
  });
  for (int i = 0; i < 3; ++i) f(uniform({2}, i));
  CHECK(calls == 3);
  CHECK(f.report().graphs[0].cache_hit);  // the segments themselves are reused
}

TEST_CASE("footgun 4: operator bool reports a file:line only with debug info", "[footguns]") {
  auto f = compile([](const Tensor& x) { return x.sum() > 0 ? x : -x; });
  f(full({2}, 1.0));
  // This test binary is built with -g, so the line resolves; without it, file names the binary.
  REQUIRE(f.report().graph_break_count() == 1);
  CHECK(f.report().breaks[0].file.find("test_footguns.cpp") != std::string::npos);
}

TEST_CASE("footgun 5: a size converted to an integer specialises a dynamic trace", "[footguns]") {
  auto f = compile([](const Tensor& x) { int64_t n = x.size(0); return x + static_cast<double>(n); },
                   Options{.dynamic = true});
  f(uniform({3}, 1));
  f(uniform({4}, 1));
  CHECK(f.report().recompiles.size() == 1);
}

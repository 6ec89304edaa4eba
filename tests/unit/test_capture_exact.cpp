// Capture and replay are exact: one test per class of bug that expert users found (issue: a
// sound core). Each compares compiled with eager bit for bit, on every call.
#include <ember/ember.h>

#include <atomic>
#include <bit>
#include <thread>
#include <cmath>
#include <cstring>
#include <limits>

#include "tests/catch.h"
#include "tests/unit/helpers.h"

using namespace ember;
using ember::test::error_of;
using ember::test::same_bits;

namespace {

Tensor floats(std::vector<double> v) { return from_vector(v, {static_cast<int64_t>(v.size())}, DType::Float32); }

// A float32 tensor holding these exact bit patterns (a signalling NaN survives).
Tensor float_bits(std::vector<uint32_t> bits) {
  Array a = Array::empty(DType::Float32, {static_cast<int64_t>(bits.size())});
  std::memcpy(a.data(), bits.data(), bits.size() * 4);
  return Tensor(a);
}

constexpr uint32_t kSignallingNaN = 0x7f800001u, kQuietPayloadNaN = 0x7fc00123u, kMinusZero = 0x80000000u;

}  // namespace

TEST_CASE("aliased arguments: f(a, a) then f(b, c)", "[compile][identity]") {
  // Bit for bit needs the interpreter: a generated softmax sums its row in another order.
  test::ScopedEnv interpreter("EMBER_CODEGEN", "0");
  auto attn = [](const Tensor& q, const Tensor& k, const Tensor& v) {
    return matmul(softmax(matmul(q, k.t()), -1), v) + q;
  };
  auto f = compile(attn);
  Tensor x = uniform({4, 8}, 1), q = uniform({4, 8}, 2), k = uniform({4, 8}, 3), v = uniform({4, 8}, 4);
  CHECK(same_bits(f(x, x, x), attn(x, x, x)));
  CHECK(same_bits(f(q, k, v), attn(q, k, v)));
  CHECK(same_bits(f(q, q, v), attn(q, q, v)));
  CHECK(same_bits(f(x, x, x), attn(x, x, x)));
  auto two = compile([](const Tensor& a, const Tensor& b) { return a - b; });
  CHECK(same_bits(two(q, q), q - q));
  CHECK(same_bits(two(q, k), q - k));
}

TEST_CASE("a captured tensor also passed as an argument stays the captured one", "[compile][identity]") {
  Tensor w = uniform({3, 3}, 7);
  auto fn = [&](const Tensor& x) { return x * w + x; };
  auto f = compile(fn);
  Tensor y = uniform({3, 3}, 8);
  CHECK(same_bits(f(w), fn(w)));
  CHECK(same_bits(f(y), fn(y)));
  CHECK(same_bits(f(w), fn(w)));
  // the same with dynamic shapes and a break in the middle
  auto g = compile([&](const Tensor& x) {
    Tensor s = x.sum();
    return x * w * s.item<double>();
  }, Options{.dynamic = true});
  CHECK(same_bits(g(w), w * w * w.sum().item<double>()));
  CHECK(same_bits(g(y), y * w * y.sum().item<double>()));
}

TEST_CASE("outputs by position: duplicates, arguments, captured, views, undefined", "[compile][identity]") {
  Tensor w = uniform({2, 3}, 9);
  auto fn = [&](const Tensor& x, const Tensor& v) -> std::vector<Tensor> {
    Tensor t = v * 2.0;
    return {t, t, x + 1.0, v, x, w, reshape(x, {6}), t, Tensor(), x.t()};
  };
  auto f = compile(fn);
  for (int call = 0; call < 3; ++call) {
    Tensor x = uniform({2, 3}, 10 + call), v = uniform({2, 3}, 20 + call);
    std::vector<Tensor> got = f(x, v), want = fn(x, v);
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      INFO("output " << i << " call " << call);
      CHECK(same_bits(got[i], want[i]));
    }
    // an argument returned as-is is the caller's own tensor, as in eager
    CHECK(got[3].impl() == v.impl());
    CHECK(got[4].impl() == x.impl());
    CHECK(!got[8].defined());
  }
  // the same tensor as two arguments and returned twice
  auto g = compile([](const Tensor& a, const Tensor& b) { return std::vector<Tensor>{b, a, a + b, b}; });
  Tensor a = uniform({2}, 1), b = uniform({2}, 2);
  auto r1 = g(a, a);
  CHECK(same_bits(r1[2], a + a));
  auto r2 = g(a, b);
  CHECK(r2[0].impl() == b.impl());
  CHECK(r2[1].impl() == a.impl());
  CHECK(same_bits(r2[2], a + b));
  CHECK(r2[3].impl() == b.impl());
}

TEST_CASE("symbolic ranges: slices and windows hold eager semantics at every size", "[compile][dynamic]") {
  auto tail = [](const Tensor& x) { return slice(x, 0, -3) * 2.0; };
  auto head = [](const Tensor& x) { return slice(x, 0, 3) + 1.0; };
  auto trim = [](const Tensor& x) { return slice(x, 0, 1, -2) - 1.0; };
  for (std::optional<bool> dynamic : {std::optional<bool>(), std::optional<bool>(true), std::optional<bool>(false)}) {
    auto ft = compile(tail, Options{.dynamic = dynamic});
    auto fh = compile(head, Options{.dynamic = dynamic});
    auto fm = compile(trim, Options{.dynamic = dynamic});
    for (int64_t n : {8, 9, 3, 2, 8, 4, 5, 2, 9}) {
      Tensor x = uniform({n, 2}, n);
      INFO("size " << n);
      CHECK(same_bits(ft(x), tail(x)));
      CHECK(same_bits(fh(x), head(x)));
      CHECK(same_bits(fm(x), trim(x)));
    }
  }
  // pooling: the window must fit; below that, eager's own error
  auto pool = [](const Tensor& x) { return max_pool2d(x, {3, 3}, {1, 1}); };
  auto fp = compile(pool, Options{.dynamic = true});
  CHECK(same_bits(fp(uniform({1, 1, 6, 6}, 1)), pool(uniform({1, 1, 6, 6}, 1))));
  CHECK(same_bits(fp(uniform({1, 1, 3, 3}, 2)), pool(uniform({1, 1, 3, 3}, 2))));
  std::string eager_msg, compiled_msg;
  try { pool(uniform({1, 1, 2, 2}, 3)); } catch (const Error& e) { eager_msg = e.what(); }
  try { fp(uniform({1, 1, 2, 2}, 3)); } catch (const Error& e) { compiled_msg = e.what(); }
  CHECK(!eager_msg.empty());
  CHECK(compiled_msg == eager_msg);
  // a derived dim (s0 - 3) that reaches zero: max over it is eager's error, sum is empty
  auto reduce = [](const Tensor& x) { return slice(x, 1, 3).sum({1}); };
  auto fr = compile(reduce, Options{.dynamic = true});
  for (int64_t n : {6, 4, 3, 2, 7}) CHECK(same_bits(fr(uniform({2, n}, n)), reduce(uniform({2, n}, n))));
  auto rmax = [](const Tensor& x) { return slice(x, 1, 3).max({1}); };
  auto fx = compile(rmax, Options{.dynamic = true});
  CHECK(same_bits(fx(uniform({2, 6}, 1)), rmax(uniform({2, 6}, 1))));
  CHECK_THROWS_AS(rmax(uniform({2, 3}, 1)), Error);
  CHECK_THROWS_AS(fx(uniform({2, 3}, 1)), Error);
  CHECK(same_bits(fx(uniform({2, 5}, 1)), rmax(uniform({2, 5}, 1))));
}

TEST_CASE("symbolic facts are guards named in the report", "[compile][dynamic][guards]") {
  auto f = compile([](const Tensor& x) { return slice(x, 0, 3); }, Options{.dynamic = true});
  f(uniform({8}, 1));
  std::vector<std::string> guards = f.report().guards;
  CHECK(std::find(guards.begin(), guards.end(), "s0 - 3 >= 0 ([slice] start within the dim)") != guards.end());
  f(uniform({2}, 1));  // breaks the fact: a recompile, specialised
  REQUIRE(f.report().recompiles.size() == 1);
  CHECK(f.report().recompiles[0].guard.find("s0 - 3 >= 0") != std::string::npos);
}

TEST_CASE("a symbolic size that must equal a static one becomes static", "[compile][dynamic][guards]") {
  Tensor w = uniform({8}, 2);
  auto f = compile([&](const Tensor& x) { return x + w; }, Options{.dynamic = true});
  Tensor x = uniform({8}, 1);
  CHECK(same_bits(f(x), x + w));
  const Report& r = f.report();
  REQUIRE(r.graph_count() == 1);
  CHECK(r.graphs[0].ir.find("s0") == std::string::npos);  // specialised: a known size
  for (const std::string& g : r.guards) CHECK(g.find("s0 - 8") == std::string::npos);
  CHECK(error_of([&] { f(uniform({5}, 3)); }) == error_of([&] { (void)(uniform({5}, 3) + w); }));
}

TEST_CASE("scalar arguments are guarded by bit pattern and C++ type", "[compile][guards]") {
  int traces = 0;
  auto f = compile([&](const Tensor& x, double s) {
    ++traces;
    return x * s;
  });
  Tensor x = floats({1.0, -2.0});
  CHECK(same_bits(f(x, 0.0), x * 0.0));
  CHECK(same_bits(f(x, -0.0), x * -0.0));
  CHECK(traces == 2);
  double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK(same_bits(f(x, nan), x * nan));
  CHECK(same_bits(f(x, nan), x * nan));
  CHECK(traces == 3);  // the same NaN replays
  double other_nan = std::bit_cast<double>(std::bit_cast<uint64_t>(nan) | 1);
  CHECK(same_bits(f(x, other_nan), x * other_nan));
  CHECK(traces == 4);

  auto generic = [](const Tensor& t, auto s) {
    if constexpr (std::is_same_v<decltype(s), float>) return t + 100.0;
    else return t + s;
  };
  auto g = compile(generic);
  CHECK(same_bits(g(x, 0.5f), generic(x, 0.5f)));
  CHECK(same_bits(g(x, 0.5), generic(x, 0.5)));
  CHECK(same_bits(g(x, 0.5f), generic(x, 0.5f)));
  CHECK(same_bits(g(x, 1), generic(x, 1)));
  CHECK(same_bits(g(x, int64_t(1)), generic(x, int64_t(1))));
}

TEST_CASE("spellings of one scalar value share a trace where the function sees one type",
          "[compile][guards]") {
  int traces = 0;
  auto f = compile([&](const Tensor& x, const std::string& how) {
    ++traces;
    return how == "double" ? x * 2.0 : x + 1.0;
  });
  Tensor x = floats({1.0, -2.0});
  std::string name = "double";
  CHECK(same_bits(f(x, "double"), x * 2.0));
  CHECK(same_bits(f(x, name), x * 2.0));
  CHECK(same_bits(f(x, name.c_str()), x * 2.0));
  CHECK(traces == 1);
  CHECK(same_bits(f(x, "add"), x + 1.0));  // another value still retraces
  CHECK(traces == 2);

  int count = 0;
  auto g = compile([&](const Tensor& t, int64_t n) {
    ++count;
    return t * static_cast<double>(n);
  });
  CHECK(same_bits(g(x, 3), x * 3.0));
  CHECK(same_bits(g(x, int64_t{3}), x * 3.0));
  CHECK(same_bits(g(x, short{3}), x * 3.0));
  CHECK(same_bits(g(x, 3u), x * 3.0));
  CHECK(count == 1);

  // A function pointer's parameters are known too.
  static int pointer_traces = 0;
  Tensor (*scale)(const Tensor&, double) = [](const Tensor& t, double s) {
    ++pointer_traces;
    return t * s;
  };
  auto h = compile(scale);
  CHECK(same_bits(h(x, 2.0), x * 2.0));
  CHECK(same_bits(h(x, 2.0f), x * 2.0));
  CHECK(same_bits(h(x, 2), x * 2.0));
  CHECK(pointer_traces == 1);

  // A parameter of another type (ember::Scalar) is guarded as the argument came.
  auto by_scalar = compile([](const Tensor& t, Scalar s) { return t * s; });
  CHECK(same_bits(by_scalar(x, 2.5), x * 2.5));
  CHECK(same_bits(by_scalar(x, 2), x * 2));

  // A generic lambda sees each argument's own type and may act on it: one trace per type.
  int generic_traces = 0;
  auto k = compile([&](auto n) {
    ++generic_traces;
    return scalar_tensor(n, std::is_same_v<decltype(n), int32_t> ? DType::Int32 : DType::Int64);
  });
  CHECK(k(int64_t{-1}).dtype() == DType::Int64);
  CHECK(k(int32_t{-1}).dtype() == DType::Int32);
  CHECK(k(int64_t{-1}).dtype() == DType::Int64);
  CHECK(generic_traces == 2);
}

TEST_CASE("a Tensor& argument the function rebinds is rebound on every call, as in eager",
          "[compile][identity]") {
  auto fn = [](Tensor& x) {
    x = x * 2.0;
    return x + 1.0;
  };
  for (auto dynamic : {std::optional<bool>(), std::optional<bool>(false), std::optional<bool>(true)}) {
    auto f = compile(fn, Options{.dynamic = dynamic});
    Tensor a = ones({2}), b = ones({2});
    for (int call = 0; call < 4; ++call) {
      INFO("call " << call);
      Tensor want = fn(b), got = f(a);
      CHECK(same_bits(got, want));
      CHECK(same_bits(a, b));  // 2, 4, 8, 16: the caller sees every rebinding
    }
  }
}

TEST_CASE("rebinding to another argument, a captured tensor, an undefined one, across a break",
          "[compile][identity]") {
  Tensor w = floats({10.0, 20.0});
  auto fn = [&](Tensor& x, Tensor& y, Tensor& z, const Tensor& keep) {
    Tensor old_x = x;
    x = y;                           // another argument
    y = w;                           // a captured tensor
    if (keep.sum().item<double>() > 0) z = old_x * keep;  // a graph break decides
    else z = Tensor();
    return old_x + 1.0;
  };
  auto f = compile(fn);
  for (double sign : {1.0, -1.0, 1.0}) {
    INFO("sign " << sign);
    Tensor x1 = floats({1.0, 2.0}), y1 = floats({3.0, 4.0}), z1 = floats({5.0, 6.0});
    Tensor x2 = x1, y2 = y1, z2 = z1, keep = floats({sign, sign});
    const Tensor y1_before = y1, y2_before = y2;
    CHECK(same_bits(f(x1, y1, z1, keep), fn(x2, y2, z2, keep)));
    CHECK(x2.impl() == y2_before.impl());
    CHECK(x1.impl() == y1_before.impl());  // the caller's own y, as eager binds it
    CHECK(y1.impl() == w.impl());          // the captured tensor itself
    CHECK(z1.defined() == (sign > 0));
    CHECK(same_bits(z1, z2));
  }
  // A temporary cannot show a rebinding, and a compiled function called inside another joins
  // its trace and still rebinds.
  auto inner = compile([](Tensor& x) {
    x = x + 1.0;
    return x;
  });
  CHECK(same_bits(inner(ones({1})), floats({2.0})));
  auto outer = compile([&](const Tensor& x) {
    Tensor y = x * 3.0;
    inner(y);
    return y;
  });
  CHECK(same_bits(outer(ones({1})), floats({4.0})));
  CHECK(same_bits(outer(ones({1})), floats({4.0})));
}

TEST_CASE("one variable passed to two Tensor& parameters is one variable, as in eager code",
          "[compile][identity]") {
  auto fn = [](Tensor& x, const Tensor& y) {
    x = x * 2.0;
    return y + 1.0;  // y names x's variable when f(a, a): eager sees the rebinding through it
  };
  auto f = compile(fn);
  for (int round = 0; round < 2; ++round) {  // traced, then replayed
    Tensor a = ones({2}), b = ones({2}), c = ones({2}), d = ones({2});
    CHECK(same_bits(f(a, a), fn(b, b)));  // 3, where separate stand-ins would give 2
    CHECK(same_bits(a, b));
    CHECK(same_bits(f(a, c), fn(b, d)));  // two variables: y is c
    CHECK(same_bits(a, b));
  }
  // The sharing is a guard: one trace each way, then replays.
  CHECK(f.report().recompiles.size() == 1);
  CHECK(f.report().recompiles[0].guard.find("one variable") != std::string::npos);
  // Where nothing may rebind, f(a, a) and f(b, c) share their trace.
  auto g = compile([](const Tensor& x, const Tensor& y) { return x * y; });
  Tensor a = ones({2}) * 3.0, c = ones({2});
  CHECK(same_bits(g(a, a), a * a));
  CHECK(same_bits(g(a, c), a * c));
  CHECK(g.report().recompiles.empty());
  // A generic lambda's parameters are unknown: a non-const variable passed twice is one.
  auto h = compile([](auto& x, auto& y) {
    x = x + 1.0;
    return x + y;
  });
  Tensor e = ones({1});
  CHECK(same_bits(h(e, e), full({1}, 4.0)));  // x and y are e, now 2
  CHECK(same_bits(e, full({1}, 2.0)));
}

TEST_CASE("past the recompile limit, the eager fallback still rebinds arguments",
          "[compile][identity]") {
  auto fn = [](Tensor& x, int64_t k) {
    x = x + static_cast<double>(k);
    return x;
  };
  auto f = compile(fn, Options{.recompile_limit = 1});
  Tensor a = ones({1}), b = ones({1});
  for (int64_t k = 0; k < 4; ++k) {
    CHECK(same_bits(f(a, k), fn(b, k)));
    CHECK(same_bits(a, b));
  }
}

TEST_CASE("passes are bit-exact on -0.0 and NaN payloads", "[compile][passes]") {
  // The passes, on the interpreter: which NaN a generated sum's lanes keep is not specified
  // (generated code gives NaN where eager does; tests/unit/test_codegen.cpp checks its bits
  // where they are).
  test::ScopedEnv interpreter("EMBER_CODEGEN", "0");
  Tensor x = float_bits({kMinusZero, kSignallingNaN, kQuietPayloadNaN, 0x3f800000u});
  auto check = [&](auto fn) {
    auto f = compile(fn);
    CHECK(same_bits(f(x), fn(x)));
    CHECK(same_bits(f(x), fn(x)));
  };
  check([](const Tensor& t) { return t + zeros({}, DType::Int64); });
  check([](const Tensor& t) { return t + zeros({}, DType::Float32); });
  check([](const Tensor& t) { return t - zeros({}, DType::Float32); });
  check([](const Tensor& t) { return t + full({}, -0.0, DType::Float32); });
  check([](const Tensor& t) { return pow(t, 1.0); });
  check([](const Tensor& t) { return t * 1.0; });
  check([](const Tensor& t) { return 1.0 * t; });
  check([](const Tensor& t) { return t / 1.0; });
  check([](const Tensor& t) { return neg(neg(t)); });
  // CSE must keep constants that differ only in sign or NaN payload
  check([](const Tensor& t) {
    return std::vector<Tensor>{t * full({4}, -0.0), t.sum() * full({4}, 0.0), t * full({4}, 0.0)};
  });
  check([](const Tensor& t) {
    Tensor a = float_bits({kQuietPayloadNaN}), b = float_bits({0x7fc00000u});
    return std::vector<Tensor>{a + t, b + t};
  });
  double payload = std::bit_cast<double>(uint64_t{0x7ff8000000000123});
  check([&](const Tensor& t) {
    return std::vector<Tensor>{full({4}, payload) + 1.0, full({4}, std::numeric_limits<double>::quiet_NaN()) + 1.0};
  });
}

TEST_CASE("ember's internal shape signal never reaches a user's catch of ember::Error", "[compile][dynamic]") {
  auto fn = [](const Tensor& x) {
    try {
      return slice(x, 0, 3) * 2.0;
    } catch (const Error&) {
      return x * 100.0;  // a user's fallback: must not run when eager would not
    }
  };
  auto f = compile(fn, Options{.dynamic = true});
  for (int64_t n : {8, 2, 5, 2}) CHECK(same_bits(f(uniform({n}, n)), fn(uniform({n}, n))));
}

TEST_CASE("sizes that overflow int64 are a clear error, eager and compiled", "[compile][errors]") {
  auto fn = [](const Tensor& x) { return expand(x, {int64_t(1) << 32, int64_t(1) << 32}).sum(); };
  Tensor one = ones({1, 1});
  std::string eager_msg;
  try { fn(one); } catch (const Error& e) { eager_msg = e.what(); }
  CHECK(eager_msg.find("more elements than fit in int64") != std::string::npos);
  auto f = compile(fn);
  CHECK_THROWS_WITH(f(one), Catch::Contains("more elements than fit in int64"));
  CHECK_THROWS_AS(ones({int64_t(1) << 40, int64_t(1) << 40}), Error);
}

TEST_CASE("errors under dynamic shapes name this call's sizes, as eager does", "[compile][errors][dynamic]") {
  auto fn = [](const Tensor& a, const Tensor& b) { return matmul(a, b); };
  auto f = compile(fn, Options{.dynamic = true});
  f(uniform({6, 4}, 1), uniform({4, 5}, 2));
  std::string eager_msg, compiled_msg;
  try { fn(uniform({6, 4}, 1), uniform({3, 5}, 2)); } catch (const Error& e) { eager_msg = e.what(); }
  try { f(uniform({6, 4}, 1), uniform({3, 5}, 2)); } catch (const Error& e) { compiled_msg = e.what(); }
  CHECK(eager_msg.find("[6, 4] @ [3, 5]") != std::string::npos);
  CHECK(compiled_msg == eager_msg);
  // each op raises its own message, never one from an internal allocation
  auto g = compile([](const Tensor& x) { return avg_pool2d(x, {4, 4}); }, Options{.dynamic = true});
  g(uniform({1, 1, 8, 8}, 1));
  CHECK_THROWS_WITH(g(uniform({1, 1, 3, 3}, 1)), Catch::StartsWith("[avg_pool2d]"));
}

TEST_CASE("a moved-from compiled function raises a clear error", "[compile][errors]") {
  auto f = compile([](const Tensor& x) { return x + 1.0; });
  auto g = std::move(f);
  CHECK(same_bits(g(ones({2})), ones({2}) + 1.0));
  CHECK_THROWS_WITH(f(ones({2})), Catch::Contains("moved from"));  // NOLINT: use after move is the test
  CHECK_THROWS_AS(f.report(), Error);
}

TEST_CASE("break-y functions reuse segments: item() values enter as inputs", "[compile][breaks]") {
  auto fn = [](const Tensor& x) {
    double m = x.max().item<double>();
    int64_t n = argmax(x).item<int64_t>();
    return (x - m) * n + m;
  };
  auto f = compile(fn);
  for (int call = 0; call < 20; ++call) {
    Tensor x = uniform({16}, 100 + call);
    CHECK(same_bits(f(x), fn(x)));
  }
  Report r = f.report();
  REQUIRE(r.graph_count() >= 2);
  for (const GraphInfo& g : r.graphs) CHECK(g.cache_hit);
  CHECK(r.segment_evictions == 0);
}

TEST_CASE("the segment cache is bounded and counts evictions", "[compile][breaks]") {
  auto fn = [](const Tensor& x) {
    double m = x.max().item<double>();
    return x * (m * 3.0);  // a value made from the read: a new constant, so a new graph, each call
  };
  auto f = compile(fn, Options{.segment_cache_limit = 4});
  for (int call = 0; call < 12; ++call) {
    Tensor x = uniform({8}, 200 + call);
    CHECK(same_bits(f(x), fn(x)));
  }
  Report r = f.report();
  CHECK(r.segment_evictions >= 7);
  CHECK(r.text().find("evicted") != std::string::npos);
  CHECK(r.json().find("\"segment_evictions\": ") != std::string::npos);
  CHECK_THROWS_AS(compile(fn, Options{.segment_cache_limit = 0}), Error);
}

TEST_CASE("plans: buffers reused by liveness, allocations per call counted", "[compile][plan]") {
  // On the interpreter (generated code fuses the chain into one kernel: test_codegen.cpp).
  // A chain of 10 elementwise ops: two buffers in turn (each step's input dies as it is read),
  // constants made once, so a call allocates exactly two storages.
  test::ScopedEnv interpreter("EMBER_CODEGEN", "0");
  auto chain = [](const Tensor& x) {
    Tensor y = x;
    for (int i = 0; i < 10; ++i) y = i % 2 ? tanh(y) : y * 1.5 + 0.25;
    return y;
  };
  auto f = compile(chain);
  Tensor x = uniform({1000}, 1);
  CHECK(same_bits(f(x), chain(x)));
  GraphInfo g = f.report().graphs.at(0);
  CHECK(g.steps == 15);
  CHECK(g.buffers == 2);
  CHECK(g.allocations == 2);
  int64_t before = storage_allocations();
  Tensor y = f(x);  // a replay: the same two, and no more
  CHECK(storage_allocations() - before == 2);
  CHECK(same_bits(y, chain(x)));
  CHECK(f.report().text().find("15 steps, 2 buffers, 2 allocations per call") != std::string::npos);
  CHECK(f.report().json().find("\"allocations\": 2") != std::string::npos);
  // A view returned as an output keeps its buffer: later steps must not overwrite it.
  auto views = [](const Tensor& x) {
    Tensor a = x * 2.0;
    Tensor v = reshape(a, {2, 500});
    Tensor b = exp(x) + 1.0;
    return std::vector<Tensor>{v, b * 3.0, slice(b, 0, 10)};
  };
  auto fv = compile(views);
  for (int call = 0; call < 3; ++call) CHECK(same_bits(fv(x), views(x)));
  // Dynamic sizes: buffer sizes are evaluated per call.
  auto fd = compile(chain, Options{.dynamic = true});
  for (int64_t n : {1000, 10, 5000, 3})
    CHECK(same_bits(fd(uniform({n}, n)), chain(uniform({n}, n))));
}

TEST_CASE("adversarial: an exception mid-trace, then normal calls", "[compile][errors]") {
  bool fail = true;
  auto fn = [&](const Tensor& x, const Tensor& y) {
    Tensor z = x * y + 1.0;
    if (fail) throw std::runtime_error("user code failed");
    return z - x;
  };
  auto f = compile(fn);
  Tensor a = uniform({3}, 1), b = uniform({3}, 2);
  CHECK_THROWS_AS(f(a, b), std::runtime_error);
  fail = false;
  CHECK(same_bits(f(a, b), fn(a, b)));
  CHECK(same_bits(f(a, a), fn(a, a)));
  fail = true;
  CHECK(same_bits(f(a, b), a * b + 1.0 - a));  // replayed: fn is not called, so nothing throws
}

TEST_CASE("adversarial: 16 threads with aliased arguments, captured tensors and changing sizes",
          "[compile][threads]") {
  Tensor w = uniform({1}, 99);
  auto fn = [&](const Tensor& x, const Tensor& y) {
    return std::vector<Tensor>{x * w - y, x, slice(y, 0, 2) * 2.0, x};
  };
  auto f = compile(fn);
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 16; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        int64_t n = 1 + (t + i) % 5;
        Tensor a = uniform({n}, t * 100 + i), b = uniform({n}, t * 100 + i + 50);
        int form = (t + i) % 3;  // aliased, the captured tensor as an argument, distinct
        Tensor y = form == 0 ? a : form == 1 ? w : b;
        auto got = f(a, y);
        auto want = fn(a, y);
        if (!same_bits(got, want)) ++mismatches;
      }
    });
  for (auto& th : threads) th.join();
  CHECK(mismatches == 0);
}

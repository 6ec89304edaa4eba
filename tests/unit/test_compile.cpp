// compile(): results equal eager, graph breaks and the report, fullgraph, guards and recompiles,
// the recompile limit, dynamic shapes, bad input, options, and threads.
#include <atomic>
#include <cstdlib>
#include <thread>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include <ember/ember.h>

#include "tests/catch.h"
#include "tests/unit/helpers.h"

using namespace ember;
using ember::test::error_of;

namespace {

void require_close(const Tensor& a, const Tensor& b, double tol = 1e-6) {
  REQUIRE(a.shape() == b.shape());
  REQUIRE(a.dtype() == b.dtype());
  auto x = a.to_vector(), y = b.to_vector();
  for (size_t i = 0; i < x.size(); ++i) {
    INFO("element " << i << ": " << x[i] << " vs " << y[i]);
    if (std::isnan(y[i])) REQUIRE(std::isnan(x[i]));
    else REQUIRE(std::abs(x[i] - y[i]) <= tol * (1 + std::abs(y[i])));
  }
}

struct Mlp {
  Tensor w1 = normal({32, 16}, 1, 0.0, 0.25), b1 = normal({32}, 2, 0.0, 0.1);
  Tensor w2 = normal({8, 32}, 3, 0.0, 0.25), b2 = normal({8}, 4, 0.0, 0.1);
  Tensor operator()(const Tensor& x) const { return softmax(linear(gelu(linear(x, w1, b1)), w2, b2), -1); }
};


}  // namespace

TEST_CASE("a compiled MLP equals eager in every mode, and replays without tracing", "[compile]") {
  Mlp mlp;
  for (const char* mode : {"default", "reduce-overhead", "max-autotune"}) {
    INFO("mode " << mode);
    int calls = 0;
    auto f = compile([&](const Tensor& x) { ++calls; return mlp(x); }, Options{.mode = mode});
    Tensor x = uniform({4, 16}, 5, -1, 1);
    require_close(f(x), mlp(x));
    Tensor x2 = uniform({4, 16}, 6, -1, 1);
    require_close(f(x2), mlp(x2));
    CHECK(calls == 1);  // the second call replayed the graph
    Report r = f.report();
    CHECK(r.graph_count() == 1);
    CHECK(r.graph_break_count() == 0);
    CHECK(r.recompiles.empty());
    CHECK(r.graphs[0].ops.at("linear") == 2);
  }
}

TEST_CASE("a data-dependent branch breaks the graph, the report names the line", "[compile][breaks]") {
  int line = 0;
  auto body = [&](const Tensor& x) {
    Tensor s = sum(x);
    line = __LINE__ + 1;
    if (s.item<double>() > 0) return relu(x) * 2.0;
    return neg(x) + 1.0;
  };
  auto f = compile(body);
  Tensor pos = uniform({3, 5}, 1, 0.5, 1.0), negative = uniform({3, 5}, 2, -1.0, -0.5);
  require_close(f(pos), relu(pos) * 2.0);
  require_close(f(negative), neg(negative) + 1.0);
  require_close(f(pos), relu(pos) * 2.0);
  Report r = f.report();
  REQUIRE(r.graph_break_count() == 1);
  CHECK(r.breaks[0].category == "item");
  CHECK(r.breaks[0].line == line);
  CHECK(r.breaks[0].file.find("test_compile.cpp") != std::string::npos);
  CHECK(!r.breaks[0].hint.empty());
  CHECK(r.graph_count() == 2);
  CHECK(r.graphs[0].cache_hit);  // the segment before the break was compiled on the first call
  CHECK(r.recompiles.empty());
  CHECK(r.text().find("test_compile.cpp:" + std::to_string(line)) != std::string::npos);
  CHECK(r.json().find("\"line\": " + std::to_string(line)) != std::string::npos);
}

TEST_CASE("each kind of data access is a break with its category", "[compile][breaks]") {
  auto f = compile([](const Tensor& x) {
    Tensor y = exp(x);
    bool big = (y.sum() > 100.0).to_bool();
    std::vector<double> v = y.to_vector();
    std::string s = (y * 2.0).str();
    (void)s;
    return big ? y : y + v.size();
  });
  Tensor x = uniform({2, 2}, 3);
  require_close(f(x), exp(x) + 4);
  Report r = f.report();
  REQUIRE(r.graph_break_count() == 3);
  CHECK(r.breaks[0].category == "bool");
  CHECK(r.breaks[1].category == "data");
  CHECK(r.breaks[2].category == "print");
}

TEST_CASE("reading an argument's data is a break too, so replays stay correct", "[compile][breaks]") {
  auto f = compile([](const Tensor& x) { return x.item<double>() > 0 ? x * 2.0 : x * 3.0; });
  require_close(f(full({}, 1.0)), full({}, 2.0));
  require_close(f(full({}, -1.0)), full({}, -3.0));
  CHECK(f.report().graph_break_count() == 1);
}

TEST_CASE("operator bool finds the caller's line from the call stack", "[compile][breaks]") {
  int line = 0;
  auto f = compile([&](const Tensor& x) {
    line = __LINE__ + 1;
    if (x.sum() > 0) return x;
    return -x;
  });
  f(full({2}, 1.0));
  Report r = f.report();
  REQUIRE(r.graph_break_count() == 1);
  CHECK(r.breaks[0].category == "bool");
  // addr2line resolves the return address when the test is built with -g.
  CHECK(r.breaks[0].line == line);
}

TEST_CASE("fullgraph raises at the first break with the reason and the line", "[compile][breaks]") {
  int line = 0;
  auto f = compile(
      [&](const Tensor& x) {
        line = __LINE__ + 1;
        double v = x.sum().item<double>();
        return x * v;
      },
      Options{.fullgraph = true});
  ErrorKind kind;
  std::string msg = error_of([&] { f(full({2}, 1.0)); }, &kind);
  CHECK(kind == ErrorKind::Runtime);
  CHECK(msg.find("fullgraph") != std::string::npos);
  CHECK(msg.find("[item]") != std::string::npos);
  CHECK(msg.find("test_compile.cpp:" + std::to_string(line)) != std::string::npos);
  // Eager code after the failure is unaffected.
  require_close(full({2}, 1.0) * 2.0, full({2}, 2.0));
}

TEST_CASE("guards: a changed dim recompiles once, then the dim is dynamic", "[compile][guards]") {
  int calls = 0;
  auto f = compile([&](const Tensor& x) { ++calls; return sum(x * 2.0, {1}); });
  for (int64_t n : {4, 5, 6, 7, 8}) {
    Tensor x = uniform({n, 3}, n);
    require_close(f(x), sum(x * 2.0, {1}));
  }
  Report r = f.report();
  REQUIRE(r.recompiles.size() == 1);
  CHECK(r.recompiles[0].guard == "input 0 dim 0: 4 -> 5");
  CHECK(r.recompiles[0].action.find("dynamic dims: input 0 dim 0") != std::string::npos);
  CHECK(calls == 2);
  // A change in the static dim still recompiles, naming it.
  f(uniform({4, 9}, 1));
  CHECK(f.report().recompiles.back().guard == "input 0 dim 1: 3 -> 9");
}

TEST_CASE("guards: dtype, rank, layout and non-tensor arguments", "[compile][guards]") {
  auto f = compile([](const Tensor& x, int64_t k) { return x * static_cast<double>(k); });
  Tensor x = uniform({3, 4}, 1);
  f(x, 2);
  f(x.to(DType::Float64), 2);
  CHECK(f.report().recompiles.back().guard == "input 0 dtype: f32 -> f64");
  f(x, 3);
  CHECK(f.report().recompiles.back().guard == "argument 1: 2 -> 3");
  require_close(f(transpose(uniform({4, 3}, 2), 0, 1), 3), transpose(uniform({4, 3}, 2), 0, 1) * 3.0);
  CHECK(f.report().recompiles.back().guard == "input 0 layout: contiguous -> strided");
  f(uniform({3, 4, 1}, 1), 3);
  CHECK(f.report().recompiles.back().guard == "input 0 rank: 2 -> 3");
}

TEST_CASE("dynamic=true: one trace serves every size, sizes stay symbolic", "[compile][dynamic]") {
  int calls = 0;
  auto f = compile(
      [&](const Tensor& x) {
        ++calls;
        // A size used in arithmetic stays symbolic: no specialisation.
        Tensor y = reshape(x, {x.size(0) * x.size(1)});
        return softmax(y, 0);
      },
      Options{.dynamic = true});
  for (int64_t n : {2, 3, 17}) {
    Tensor x = uniform({n, 5}, n);
    require_close(f(x), softmax(reshape(x, {n * 5}), 0));
  }
  CHECK(calls == 1);
  Report r = f.report();
  CHECK(r.recompiles.empty());
  CHECK(r.graphs[0].ir.find("s0") != std::string::npos);
  // Sizes 0 and 1 are never symbolic: they are specialised and guarded.
  f(uniform({1, 5}, 1));
  CHECK(f.report().recompiles.back().guard.find("input 0 dim 0: 1 is outside s0's range") != std::string::npos);
}

TEST_CASE("dynamic: sizes that alternate call after call get their own shapes each call", "[compile][dynamic]") {
  // A plan keeps the latest call's evaluated shapes for the next call of the same sizes
  // (Executable::layout_for): a call of other sizes must not run on them.
  for (const char* mode : {"default", "reduce-overhead"}) {
    auto f = compile([](const Tensor& x) { return softmax(x * 2.0, 1) + sum(x, {1}, true); },
                     Options{.mode = mode, .dynamic = true});
    for (int64_t n : {3, 5, 3, 3, 7, 5, 2, 7}) {
      Tensor x = uniform({n, n + 1}, n);
      require_close(f(x), softmax(x * 2.0, 1) + sum(x, {1}, true));
    }
  }
}

TEST_CASE("dynamic: a size converted to an integer specialises the trace", "[compile][dynamic]") {
  auto f = compile(
      [](const Tensor& x) {
        int64_t n = x.size(0);  // a guard: s0 == n
        return x * static_cast<double>(n);
      },
      Options{.dynamic = true});
  Tensor a = uniform({3, 2}, 1), b = uniform({4, 2}, 1);
  require_close(f(a), a * 3.0);
  require_close(f(b), b * 4.0);
  REQUIRE(f.report().recompiles.size() == 1);
  CHECK(f.report().recompiles[0].guard.find("s0 == 3") != std::string::npos);
}

TEST_CASE("dynamic=false specialises every size and honours recompile_limit", "[compile][guards]") {
  auto f = compile([](const Tensor& x) { return x + 1.0; }, Options{.dynamic = false, .recompile_limit = 2});
  for (int64_t n = 2; n < 8; ++n) {
    Tensor x = uniform({n}, n);
    require_close(f(x), x + 1.0);  // past the limit: eager, still correct
  }
  Report r = f.report();
  REQUIRE(r.recompiles.size() == 3);
  CHECK(r.recompiles[0].guard == "input 0 dim 0: 2 -> 3");
  CHECK(r.recompiles[2].action.find("fell back to eager") != std::string::npos);
  CHECK(r.recompiles[2].guard == "input 0 dim 0: 4 -> 5");
  require_close(f(uniform({3}, 3)), uniform({3}, 3) + 1.0);  // an old entry still replays
}

TEST_CASE("symbolic dims that cannot flow through an op are pinned to static", "[compile][dynamic]") {
  int calls = 0;
  auto f = compile([&](const Tensor& x) { ++calls; return max_pool2d(x, {2, 2}); }, Options{.dynamic = true});
  Tensor x = uniform({1, 2, 6, 6}, 1);
  require_close(f(x), max_pool2d(x, {2, 2}));
  Report r = f.report();
  REQUIRE(!r.notes.empty());
  // The strided window needs static H and W; the channel dim stays symbolic.
  CHECK(r.notes[0].find("specialised input 0 dim 2, input 0 dim 3 to static") == 0);
  Tensor more_channels = uniform({1, 5, 6, 6}, 2);
  require_close(f(more_channels), max_pool2d(more_channels, {2, 2}));
  CHECK(f.report().recompiles.empty());
  Tensor bigger = uniform({1, 2, 8, 8}, 3);
  require_close(f(bigger), max_pool2d(bigger, {2, 2}));
  CHECK(f.report().recompiles.back().guard == "input 0 dim 2: 6 -> 8");
}

TEST_CASE("returns: tuples, inputs, captured tensors, the same value twice", "[compile]") {
  Tensor w = uniform({3}, 9);
  auto f = compile([&](const Tensor& x) { Tensor y = x + w; return std::tuple{y, x, w, y}; });
  Tensor x = uniform({3}, 1);
  for (int i = 0; i < 2; ++i) {
    auto [a, b, c, d] = f(x);
    require_close(a, x + w);
    CHECK(b.impl() == x.impl());
    require_close(c, w);
    require_close(d, x + w);
  }
  auto g = compile([](const Tensor& x) { return std::vector<Tensor>{x * 2.0, x * 3.0}; });
  auto outs = g(x);
  REQUIRE(outs.size() == 2);
  require_close(outs[1], x * 3.0);
}

TEST_CASE("errors inside a compiled function are the errors eager raises", "[compile][errors]") {
  auto f = compile([](const Tensor& a, const Tensor& b) { return matmul(a, b); });
  Tensor a = uniform({8, 3}, 1), b = uniform({4, 5}, 2);
  std::string eager = error_of([&] { matmul(a, b); });
  std::string compiled = error_of([&] { f(a, b); });
  CHECK(eager == "[matmul] inner dimensions differ: [8, 3] @ [4, 5]");
  CHECK(compiled == eager);
  ErrorKind kind;
  error_of([&] { f(a.to(DType::Int32), b); }, &kind);
  CHECK(kind == ErrorKind::Type);
  // The function still works afterwards.
  require_close(f(a, uniform({3, 2}, 3)), matmul(a, uniform({3, 2}, 3)));
}

TEST_CASE("unknown modes and options are clear errors listing the valid ones", "[compile][errors]") {
  auto id = [](const Tensor& x) { return x; };
  std::string msg = error_of([&] { compile(id, Options{.mode = "fast"}); });
  CHECK(msg == "[compile] unknown mode 'fast' (valid: default, reduce-overhead, max-autotune)");
  msg = error_of([] { Options::from_map({{"mode", "default"}, {"fulgraph", "true"}}); });
  CHECK(msg.find("unknown option 'fulgraph' (valid: mode, fullgraph, dynamic, recompile_limit, segment_cache_limit, strict, "
                   "autotune_budget_s, autotune_search, static_plan_mb)") != std::string::npos);
  msg = error_of([] { Options::from_map({{"fullgraph", "maybe"}}); });
  CHECK(msg.find("must be true or false") != std::string::npos);
  Options o = Options::from_map({{"mode", "max-autotune"}, {"dynamic", "true"}, {"recompile_limit", "3"}});
  CHECK(o.mode == "max-autotune");
  CHECK(o.dynamic == true);
  CHECK(o.recompile_limit == 3);
  CHECK(!error_of([] { compile([](const Tensor& x) { return x; }, Options{.recompile_limit = -1}); }).empty());
}

TEST_CASE("bad input raises a clear error of the right kind", "[errors]") {
  ErrorKind kind;
  CHECK(error_of([] { uniform({2, 3}, 1) + uniform({4}, 1); }, &kind).find("[add]") == 0);
  CHECK(kind == ErrorKind::Value);
  error_of([] { bitwise_and(uniform({2}, 1), uniform({2}, 1)); }, &kind);
  CHECK(kind == ErrorKind::Type);
  error_of([] { zeros({-1}); }, &kind);
  CHECK(kind == ErrorKind::Value);
  error_of([] { zeros({1 << 30, 1 << 30, 1 << 30}); }, &kind);  // absurd size: an error, not a crash
  CHECK(kind == ErrorKind::Value);
  error_of([] { embedding(uniform({4, 2}, 1), full({1}, 7, DType::Int64)); }, &kind);
  CHECK(kind == ErrorKind::Index);  // data-dependent: PyTorch's IndexError
  error_of([] { floor_divide(full({1}, 3, DType::Int32), full({1}, 0, DType::Int32)); }, &kind);
  CHECK(kind == ErrorKind::Runtime);  // data-dependent, as eager's RuntimeError
  error_of([] { full({2}, 1.0).item<double>(); }, &kind);
  CHECK(kind == ErrorKind::Value);
  error_of([] { Tensor().dtype(); }, &kind);
  CHECK(kind == ErrorKind::Value);
}

TEST_CASE("explain returns graphs, breaks and guards in text and JSON", "[compile][report]") {
  Report r = explain(
      [](const Tensor& x) {
        Tensor y = relu(x);
        if (y.sum().item<double>() > 1e9) return y;
        return y * 2.0;
      },
      uniform({2, 2}, 1));
  CHECK(r.graph_count() == 2);
  CHECK(r.graph_break_count() == 1);
  CHECK(!r.guards.empty());
  std::string json = r.json();
  for (const char* key : {"\"graph_count\": 2", "\"graph_break_count\": 1", "\"breaks\"", "\"guards\"",
                          "\"recompiles\"", "\"compile_ms\"", "\"ops\""})
    CHECK(json.find(key) != std::string::npos);
  CHECK(r.text().find("graphs: 2, graph breaks: 1") == 0);
}

TEST_CASE("a compiled function called inside another joins its trace", "[compile]") {
  auto inner = compile([](const Tensor& x) { return exp(x); });
  auto outer = compile([&](const Tensor& x) { return inner(x) + 1.0; });
  Tensor x = uniform({3}, 1);
  require_close(outer(x), exp(x) + 1.0);
  CHECK(outer.report().graph_count() == 1);
  CHECK(outer.report().graphs[0].ops.count("exp") == 1);
}

TEST_CASE("8 threads calling one compiled function with mixed shapes match eager", "[compile][threads]") {
  Mlp mlp;
  auto f = compile([&](const Tensor& x) {
    Tensor y = mlp(x);
    if (y.sum().item<double>() < 0) return y;  // never: a break, so traces re-run concurrently
    return y * 2.0;
  });
  auto g = compile([&](const Tensor& x) { return mlp(x); });
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 12; ++i) {
        int64_t rows = 1 + (t + i) % 5;
        Tensor x = uniform({rows, 16}, t * 100 + i, -1, 1);
        Tensor expected = mlp(x);
        auto a = f(x).to_vector(), b = (expected * 2.0).to_vector();
        auto c = g(x).to_vector(), d = expected.to_vector();
        for (size_t k = 0; k < a.size(); ++k)
          if (std::abs(a[k] - b[k]) > 1e-6 || std::abs(c[k] - d[k]) > 1e-6) ++failures;
      }
    });
  for (auto& th : threads) th.join();
  CHECK(failures == 0);
  CHECK(g.report().recompiles.size() <= 2);  // sizes 1 and 2.., then dynamic
}

TEST_CASE("EMBER_DISABLE_PASSES skips passes, unknown pass names are errors", "[passes]") {
  Tensor x = arange(3).to(DType::Int32);
  {
    test::ScopedEnv disable("EMBER_DISABLE_PASSES", "constant-fold,simplify");
    auto f = compile([](const Tensor& x) { return x * 1 + zeros({3}, DType::Int32); });
    require_close(f(x), x);
    CHECK(f.report().graphs[0].ops.count("mul") == 1);  // x * 1 was not simplified
  }
  auto g = compile([](const Tensor& x) { return x * 1; });
  g(x);
  CHECK(g.report().graphs[0].ops.count("mul") == 0);
}

TEST_CASE("EMBER_DUMP_AFTER writes the IR after a pass, or (unchanged)", "[passes]") {
  std::string dir = "/tmp/ember-dump-test-" + std::to_string(getpid());
  std::system(("mkdir -p " + dir).c_str());
  {
    test::ScopedEnv to_dir("EMBER_DUMP_DIR", dir.c_str());
    test::ScopedEnv after("EMBER_DUMP_AFTER", "simplify,cse");
    auto f = compile([](const Tensor& x) { return x * 1; });
    f(arange(3));
  }
  auto read = [&](const std::string& name) {
    std::ifstream in(dir + "/" + name);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  };
  CHECK(read("after-simplify.ir").find("graph(") == 0);
  CHECK(read("after-cse.ir") == "(unchanged)\n");
  std::system(("rm -rf " + dir).c_str());
}

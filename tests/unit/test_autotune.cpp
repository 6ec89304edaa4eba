// max-autotune ([Note: max-autotune] in codegen/autotune.cpp): the search strategies, the tuning
// database's integrity, the rejection of a candidate that computes another value, the budget,
// a warm start that times nothing, and what the report says each mode did.
#include <ember/ember.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <set>
#include <thread>

#include "codegen/autotune.h"
#include "codegen/autotune_measure.h"
#include "codegen/cpu/jit.h"
#include "codegen/search.h"
#include "frontend/graph_compile.h"
#include "ir/builder.h"
#include "ir/sha256.h"
#include "modes/mode.h"
#include "runtime/kernels/kernel.h"
#include "runtime/kernels/mkl.h"
#include "runtime/thread_pool.h"
#include "runtime/tuning_db.h"
#include "tests/catch.h"
#include "tests/unit/helpers.h"

using namespace ember;
using namespace ember::codegen;

namespace {

Space space_of(std::vector<int> sizes) {
  Space s;
  for (size_t k = 0; k < sizes.size(); ++k) {
    Knob knob{"k" + std::to_string(k), {}};
    for (int i = 0; i < sizes[k]; ++i) knob.options.push_back(i);
    s.push_back(knob);
  }
  return s;
}

// Every point a strategy proposes, telling it `time(p)`.
std::vector<Point> walk(Search& search, const std::function<double(const Point&)>& time, size_t limit = 10000) {
  std::vector<Point> points;
  while (points.size() < limit) {
    std::optional<Point> p = search.next();
    if (!p) break;
    points.push_back(*p);
    search.tell(*p, time(*p));
  }
  return points;
}

// A test-local cache directory, so that each test starts with an empty tuning database.
struct FreshCache {
  std::string dir = std::filesystem::temp_directory_path() / ("ember-autotune-" + std::to_string(getpid()) + "-" +
                                                              std::to_string(counter()++));
  test::ScopedEnv env{"EMBER_CACHE_DIR", dir.c_str()};
  ~FreshCache() { std::filesystem::remove_all(dir); }
  static int& counter() {
    static int n = 0;
    return n;
  }
};

// y = x * 2 + 1 as one kernel step that, with its knob "variant" at 1, adds 1.5 instead: a
// candidate that computes another value, which the tuner must reject.
class WrongWhenTuned : public KernelStep {
 public:
  explicit WrongWhenTuned(bool wrong = false) : wrong_(wrong) {}
  void run(std::span<const Array> in, std::span<const Array> out) const override {
    Array x = in[0].contiguous();
    for (int64_t i = 0; i < x.numel(); ++i) out[0].data_as<float>()[i] = x.data_as<float>()[i] * 2 + (wrong_ ? 1.5f : 1);
  }
  std::string name() const override { return wrong_ ? "wrong" : "right"; }
  std::vector<Knob> knobs() const override { return {{"variant", {0, 1}}}; }
  std::shared_ptr<const KernelStep> with(const std::string& choice) const override {
    return std::make_shared<WrongWhenTuned>(choice == "variant=1");
  }

 private:
  bool wrong_;
};

}  // namespace

TEST_CASE("search: exhaustive proposes every point but the default, once", "[autotune][search]") {
  Space space = space_of({3, 2, 4});
  auto search = make_search("exhaustive", space, 1000, 1);
  std::vector<Point> points = walk(*search, [](const Point&) { return 1.0; });
  CHECK(points.size() == 23);
  std::set<Point> unique(points.begin(), points.end());
  CHECK(unique.size() == 23);
  CHECK(!unique.count(Point{0, 0, 0}));
}

TEST_CASE("search: random and bayes never repeat a point, are deterministic, and end", "[autotune][search]") {
  Space space = space_of({4, 3, 3, 2});
  for (const char* strategy : {"random", "bayes"}) {
    INFO(strategy);
    auto time = [](const Point& p) { return 1.0 + p[0] + p[1] * p[2]; };
    std::vector<Point> a = walk(*make_search(strategy, space, 10, 7), time);
    std::vector<Point> b = walk(*make_search(strategy, space, 10, 7), time);
    CHECK(a == b);
    CHECK(a.size() == 71);  // every point but the default, then nothing
    CHECK(std::set<Point>(a.begin(), a.end()).size() == a.size());
  }
  CHECK_THROWS_AS(make_search("annealing", space, 10, 1), Error);
}

TEST_CASE("search: bayes finds the fastest point sooner than chance", "[autotune][search]") {
  // Six knobs of five options: 15,625 points, one fastest, each knob nearer its best option
  // faster. Over 20 seeds, the estimator needs far fewer evaluations than random search.
  Space space = space_of({5, 5, 5, 5, 5, 5});
  Point best{3, 1, 4, 1, 2, 3};
  auto time = [&](const Point& p) {
    double t = 1;
    for (size_t k = 0; k < p.size(); ++k) t += std::abs(p[k] - best[k]);
    return t;
  };
  auto evaluations_to_best = [&](const char* strategy, uint64_t seed) {
    auto search = make_search(strategy, space, 100, seed);
    for (int n = 1; n <= 3000; ++n) {
      std::optional<Point> p = search->next();
      if (!p) return n;
      if (*p == best) return n;
      search->tell(*p, time(*p));
    }
    return 3000;
  };
  double bayes = 0, random = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    bayes += evaluations_to_best("bayes", seed);
    random += evaluations_to_best("random", seed);
  }
  INFO("mean evaluations: bayes " << bayes / 20 << ", random " << random / 20);
  CHECK(bayes * 4 < random);
}

TEST_CASE("search: a knob that depends on another is tried only beside that one's option", "[autotune][search]") {
  // A route (4 options) whose option 3 has tiles (3 options), and threads (2 options): 3 + 3
  // route and tile points, by 2 thread counts, 12 in all, of which every strategy proposes the
  // 11 that are not the default, each once and never a tile beside another route.
  Space space = space_of({4, 3, 2});
  space[1].only_with = "k0", space[1].only_value = 3;
  CHECK(space_size(space) == 12);
  CHECK(canonical(space, {1, 2, 1}) == Point{1, 0, 1});
  CHECK(canonical(space, {3, 2, 1}) == Point{3, 2, 1});
  for (const char* strategy : {"exhaustive", "random", "bayes"}) {
    INFO(strategy);
    std::vector<Point> points = walk(*make_search(strategy, space, 100, 5), [](const Point& p) { return 1.0 + p[1]; });
    CHECK(points.size() == 11);
    CHECK(std::set<Point>(points.begin(), points.end()).size() == 11);
    for (const Point& p : points) CHECK((p[1] == 0 || p[0] == 3));
  }
  Space orphan = space;
  orphan[1].only_with = "k9";  // a knob the space does not have
  CHECK_THROWS_AS(make_search("auto", orphan, 10, 1), Error);
  Space chain = space;
  chain[2].only_with = "k1", chain[2].only_value = 1;  // on a knob that depends on another
  CHECK_THROWS_AS(space_size(chain), Error);
}

TEST_CASE("search: auto is exhaustive when the budget covers the space, else bayes", "[autotune][search]") {
  Space space = space_of({3, 3});
  auto count = [&](int evaluations) { return walk(*make_search("auto", space, evaluations, 3), [](const Point& p) { return 1.0 + p[0]; }).size(); };
  CHECK(count(8) == 8);
  std::vector<Point> ordered = walk(*make_search("auto", space, 8, 3), [](const Point&) { return 1.0; });
  CHECK(ordered.front() == Point{1, 0});  // exhaustive's order
}

TEST_CASE("tuning database: entries read back, and anything else is a miss", "[autotune][cache]") {
  FreshCache cache;
  CHECK(!tuning_db::load("step a"));
  tuning_db::store("step a", "lanes=32");
  tuning_db::store("step b", "default");
  CHECK(tuning_db::load("step a") == std::optional<std::string>("lanes=32"));
  CHECK(tuning_db::load("step b") == std::optional<std::string>("default"));
  std::vector<tuning_db::Entry> all = tuning_db::list();
  REQUIRE(all.size() == 2);
  CHECK(all[0].signature.find("\nmachine ") != std::string::npos);

  std::string dir = cache.dir + "/tuning/";
  std::string key_a = sha256_hex("step a\nmachine " + tuning_db::machine());
  std::string key_b = sha256_hex("step b\nmachine " + tuning_db::machine());
  REQUIRE(std::filesystem::exists(dir + key_a));
  SECTION("bit-flipped") {
    std::fstream f(dir + key_a, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.put('#');
    f.close();
    CHECK(!tuning_db::load("step a"));
  }
  SECTION("truncated") {
    std::filesystem::resize_file(dir + key_a, std::filesystem::file_size(dir + key_a) / 2);
    CHECK(!tuning_db::load("step a"));
  }
  SECTION("another step's entry under this key") {
    std::filesystem::copy_file(dir + key_b, dir + key_a, std::filesystem::copy_options::overwrite_existing);
    CHECK(!tuning_db::load("step a"));
  }
  SECTION("another machine's entry") {
    // Stored for another machine: the same step here is a miss.
    CHECK(!tuning_db::load("step a\nmachine elsewhere"));
  }
  SECTION("cleared") {
    CHECK(tuning_db::clear() == 2);
    CHECK(tuning_db::list().empty());
    CHECK(!tuning_db::load("step b"));
  }
}

TEST_CASE("tuning database: 8 processes writing at once leave whole entries", "[autotune][cache]") {
  FreshCache cache;
  std::vector<pid_t> children;
  for (int p = 0; p < 8; ++p) {
    pid_t pid = fork();
    if (pid == 0) {
      for (int i = 0; i < 40; ++i) tuning_db::store("shared step " + std::to_string(i % 5), "lanes=" + std::to_string(16 * (1 + i % 5)));
      _exit(0);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status));
  }
  for (int i = 0; i < 5; ++i)
    CHECK(tuning_db::load("shared step " + std::to_string(i)) == std::optional<std::string>("lanes=" + std::to_string(16 * (1 + i))));
}

TEST_CASE("max-autotune rejects a candidate that computes another value", "[autotune]") {
  FreshCache cache;
  auto g = std::make_unique<Graph>();
  Node* x = g->add_input({DType::Float32, {Dim(64)}});
  Builder b(*g);
  Value y = b.add(b.mul(Value(x), b.scalar(2.0, DType::Float32)), b.scalar(1.0, DType::Float32));
  g->add_output(y);
  FusedStep step;
  for (const Node* n : g->nodes())
    if (n->op != Op::Input) step.nodes.push_back(n);
  step.inputs = {Value(x)};
  step.outputs = {y};
  step.kernel = std::make_shared<WrongWhenTuned>();
  Executable exec(std::move(g), {step});
  Tensor in = uniform({64}, 3);
  std::vector<Array> inputs{in.array()};
  AutotuneResult r = autotune(exec, inputs, {}, AutotuneOptions{.budget_s = 5, .search = "exhaustive"});
  REQUIRE(r.steps.size() == 1);
  CHECK(r.steps[0].rejected >= 1);  // variant=1, with each thread count
  CHECK(r.steps[0].winner.find("variant") == std::string::npos);
  CHECK(exec.step_kernel(exec.steps() - 1)->name() == "right");
  std::vector<Array> out = exec.run(inputs, {});
  CHECK(test::same_bits(Tensor(out[0]), in * 2.0 + 1.0));
}

TEST_CASE("max-autotune: the budget bounds the search, and a warm start times nothing", "[autotune]") {
  FreshCache cache;
  Tensor w = uniform({64, 48}, 1), x = uniform({32, 48}, 2);
  auto fn = [&](const Tensor& t) { return softmax(linear(t, w), -1) * 3.0; };
  Tensor want = fn(x);
  {
    // No budget: each step's default is timed and nothing else.
    auto f = compile(fn, Options{.mode = "max-autotune", .autotune_budget_s = 0.0});
    test::check_close(f(x), want, 1e-4, 1e-5);
    const GraphInfo g = f.report().graphs.at(0);
    CHECK(g.autotuned);
    REQUIRE(!g.tuning.empty());
    CHECK(g.autotune_timed == static_cast<int>(g.tuning.size()));
    for (const TuningRecord& t : g.tuning) CHECK(t.winner == "default");
    tuning_db::clear();
  }
  auto f = compile(fn, Options{.mode = "max-autotune", .autotune_budget_s = 2.0, .autotune_search = "exhaustive"});
  test::check_close(f(x), want, 1e-4, 1e-5);
  const GraphInfo cold = f.report().graphs.at(0);
  CHECK(cold.autotune_timed > static_cast<int>(cold.tuning.size()));
  for (const TuningRecord& t : cold.tuning) CHECK(!t.from_database);
  // A second compile (a second process would do the same) finds every choice in the database.
  auto again = compile(fn, Options{.mode = "max-autotune"});
  test::check_close(again(x), want, 1e-4, 1e-5);
  const GraphInfo warm = again.report().graphs.at(0);
  CHECK(warm.autotune_timed == 0);
  REQUIRE(warm.tuning.size() == cold.tuning.size());
  for (size_t i = 0; i < warm.tuning.size(); ++i) {
    CHECK(warm.tuning[i].from_database);
    CHECK(warm.tuning[i].winner == cold.tuning[i].winner);
  }
}

TEST_CASE("modes: the report says what each mode did", "[autotune][modes]") {
  FreshCache cache;
  auto fn = [](const Tensor& t) { return sum(exp(t) * 2.0, {-1}); };
  Tensor x = uniform({16, 100}, 5);
  std::map<std::string, std::string> said;
  for (const std::string& mode : mode_names()) {
    auto f = compile(fn, Options{.mode = mode, .autotune_budget_s = 0.2});
    f(x);
    said[mode] = f.report().text();
  }
  CHECK(said["default"].find("mode default: buffers per call\n") != std::string::npos);
  CHECK(said["reduce-overhead"].find("mode reduce-overhead: static plan holding 64 B between calls\n") !=
        std::string::npos);  // the output's buffer, [16] float32, kept for the next call
  CHECK(said["max-autotune"].find("mode max-autotune: static plan holding 64 B between calls; tuned ") !=
        std::string::npos);
  CHECK(compile(fn).report().graphs.empty());
  CHECK_THROWS_WITH(compile(fn, Options{.mode = "fast"}), Catch::Contains("valid: default, reduce-overhead, max-autotune"));
  CHECK_THROWS_WITH(compile(fn, Options{.mode = "max-autotune", .autotune_search = "annealing"}),
                    Catch::Contains("unknown autotune_search"));
  CHECK_THROWS_AS(compile(fn, Options{.autotune_budget_s = -1.0}), Error);
}

TEST_CASE("max-autotune: dynamic sizes tune once per power-of-two bucket, bounded", "[autotune]") {
  FreshCache cache;
  Tensor w = uniform({64, 48}, 1);
  auto fn = [&](const Tensor& t) { return softmax(linear(t, w), -1) * 3.0; };
  Options options{.mode = "max-autotune", .dynamic = true, .autotune_budget_s = 0.0};
  auto f = compile(fn, options);
  auto buckets_of = [](const GraphInfo& g) {
    std::set<std::string> sizes;
    for (const TuningRecord& t : g.tuning) sizes.insert(t.sizes);
    return sizes;
  };
  for (int64_t rows : {8, 12, 200, 6, 16}) {  // 6 shares 8's bucket, 16 shares 12's
    Tensor x = uniform({rows, 48}, static_cast<uint64_t>(rows));
    test::check_close(f(x), fn(x), 1e-4, 1e-5);
  }
  GraphInfo g = f.report().graphs.at(0);
  CHECK(buckets_of(g) == std::set<std::string>{"s0 in 5..8", "s0 in 9..16", "s0 in 129..256"});
  CHECK(f.report().text().find("over 3 buckets of sizes") != std::string::npos);
  CHECK(f.report().json().find("\"sizes\": \"s0 in 129..256\"") != std::string::npos);
  CHECK(g.autotune_timed == static_cast<int>(g.tuning.size()));  // no budget: each bucket's defaults only

  // Past kTunedBuckets, new buckets run an existing plan: correct, and nothing more is tuned.
  for (int64_t rows : {3, 17, 33, 65, 300, 600, 1100, 2100}) {
    Tensor x = uniform({rows, 48}, static_cast<uint64_t>(rows));
    test::check_close(f(x), fn(x), 1e-4, 1e-5);
  }
  g = f.report().graphs.at(0);
  CHECK(buckets_of(g).size() == GraphPlan::kTunedBuckets);

  // A second compile (as a second process) takes every bucket's choices from the database.
  auto again = compile(fn, options);
  for (int64_t rows : {8, 12, 200}) {
    Tensor x = uniform({rows, 48}, static_cast<uint64_t>(rows));
    test::check_close(again(x), fn(x), 1e-4, 1e-5);
  }
  GraphInfo warm = again.report().graphs.at(0);
  CHECK(buckets_of(warm).size() == 3);
  CHECK(warm.autotune_timed == 0);
  for (const TuningRecord& t : warm.tuning) CHECK(t.from_database);
}

TEST_CASE("max-autotune: ember's own GEMM's tiles are measured, only beside its route", "[autotune][gemm]") {
  if (!codegen::cpu::jit_available() || !kernels::has_own_gemm()) return;  // a build without the code generator
  FreshCache cache;
  ThreadCountForCall one(1);  // no threads knob: the GEMM's routes and tiles alone
  Tensor a = uniform({100, 64}, 1), b = uniform({64, 96}, 2);
  auto fn = [](const Tensor& x, const Tensor& y) { return matmul(x, y); };
  auto f = compile(fn, Options{.mode = "max-autotune", .autotune_budget_s = 5.0, .autotune_search = "exhaustive"});
  test::check_close(f(a, b), fn(a, b), 1e-4, 1e-5);
  const GraphInfo g = f.report().graphs.at(0);
  REQUIRE(g.tuning.size() == 1);
  const TuningRecord& t = g.tuning[0];
  // oneDNN, OpenBLAS, ember's own with its default tile and with 12 x 32 and 8 x 48, and MKL where
  // the process has it: never a tile beside a library, which would time the library again.
  const int candidates = 3 + 2 + (kernels::mkl_available() ? 1 : 0);
  CHECK(t.timed + t.rejected == candidates);
  CHECK(t.rejected == 0);
  const StepSettings won = StepSettings::parse(t.winner);
  CHECK((won.tile.is_default() || won.gemm == GemmRoute::Generated));
  test::check_close(f(a, b), fn(a, b), 1e-4, 1e-5);  // the tuned plan
}

TEST_CASE("max-autotune: a step the same as an earlier one takes its choice without timing", "[autotune]") {
  FreshCache cache;
  Tensor w1 = uniform({48, 48}, 1), w2 = uniform({48, 48}, 2), x = uniform({32, 48}, 3);
  // Two layers of the same shapes: their GEMMs and their kernels have one signature each.
  auto fn = [&](const Tensor& t) { return relu(linear(relu(linear(t, w1)), w2)); };
  auto f = compile(fn, Options{.mode = "max-autotune", .autotune_budget_s = 1.0, .autotune_search = "exhaustive"});
  test::check_close(f(x), fn(x), 1e-4, 1e-5);
  const GraphInfo g = f.report().graphs.at(0);
  std::map<int, const TuningRecord*> by_step;
  for (const TuningRecord& t : g.tuning) by_step[t.step] = &t;
  int twins = 0, searched = 0;
  for (const TuningRecord& t : g.tuning) {
    if (t.same_as < 0) {
      ++searched;
      CHECK(t.default_us > 0);
      continue;
    }
    ++twins;
    REQUIRE(by_step.count(t.same_as));
    const TuningRecord& first = *by_step[t.same_as];
    CHECK(first.same_as < 0);
    CHECK(first.step < t.step);
    CHECK(first.name == t.name);
    CHECK(t.winner == first.winner);
    CHECK(t.timed == 0);
    CHECK(t.default_us == 0);
  }
  CHECK(twins >= 1);  // the second GEMM at least
  CHECK(searched >= 1);
  std::string text = f.report().text();
  CHECK(text.find(std::to_string(twins) + " as an identical earlier step") != std::string::npos);
  CHECK(f.report().json().find("\"same_as\": ") != std::string::npos);
}

TEST_CASE("max-autotune: a candidate that cannot win is not timed further", "[autotune]") {
  int runs = 0;
  auto slow = [&] {
    ++runs;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  };
  Timing t = measure(slow, 1.0, 0.001);  // its fastest run takes twice what would still win
  CHECK(runs == 1 + 3);                   // the warm-up and 3
  CHECK(t.median >= 0.002);
  runs = 0;
  measure(slow, 1.0);
  CHECK(runs >= 1 + 5);  // no bound: at least 5 and 10 ms
}

TEST_CASE("max-autotune: attention's tiles and their GEMM library are measured", "[autotune]") {
  FreshCache cache;
  Tensor q = uniform({2, 4, 96, 32}, 1, -1, 1), k = uniform({2, 4, 96, 32}, 2, -1, 1), v = uniform({2, 4, 96, 32}, 3);
  auto fn = [](const Tensor& a, const Tensor& b, const Tensor& c) {
    return scaled_dot_product_attention(a, b, c, std::nullopt, true);
  };
  auto f = compile(fn, Options{.mode = "max-autotune", .autotune_budget_s = 1.0, .autotune_search = "random"});
  test::check_close(f(q, k, v), fn(q, k, v), 1e-5, 1e-6);
  const GraphInfo g = f.report().graphs.at(0);
  auto attention = std::find_if(g.tuning.begin(), g.tuning.end(),
                                [](const TuningRecord& t) { return t.name == "scaled_dot_product_attention"; });
  REQUIRE(attention != g.tuning.end());
  CHECK(attention->timed + attention->rejected > 1);  // candidates besides the default
  CHECK(attention->rejected == 0);                    // every tiling computes the same
  CHECK(StepSettings::parse(attention->winner).str() == attention->winner);  // settings only, or "default"
  test::check_close(f(q, k, v), fn(q, k, v), 1e-5, 1e-6);  // the tuned plan
}

TEST_CASE("max-autotune: a convolution's GEMM library is measured only beside ember's own algorithm",
          "[autotune][conv]") {
  FreshCache cache;
  ThreadCountForCall one(1);  // no threads knob: the algorithms and routes alone
  Tensor x = uniform({2, 16, 4, 4}, 1, -1, 1), w = uniform({32, 16, 3, 3}, 2, -1, 1), dw = uniform({16, 1, 3, 3}, 3);
  auto fn = [&](const Tensor& t) {
    return conv2d(conv2d(t, dw, std::nullopt, {1, 1}, {1, 1}, {1, 1}, 16), w, std::nullopt, {1, 1}, {1, 1});
  };
  auto f = compile(fn, Options{.mode = "max-autotune", .autotune_budget_s = 5.0, .autotune_search = "exhaustive"});
  test::check_close(f(x), fn(x), 1e-4, 1e-5);
  const GraphInfo g = f.report().graphs.at(0);
  REQUIRE(g.tuning.size() == 2);
  const int routes = 2 + (kernels::mkl_available() ? 1 : 0);  // oneDNN, OpenBLAS, MKL
  // The depthwise one: brgemm and ember's own loop; no GEMM to route.
  CHECK(g.tuning[0].timed + g.tuning[0].rejected == 2);
  // The other: brgemm, ember's own with its GEMM's default route and with each library.
  CHECK(g.tuning[1].timed + g.tuning[1].rejected == 2 + routes);
  for (const TuningRecord& t : g.tuning) {  // (a candidate may be rejected as less accurate)
    const StepSettings won = StepSettings::parse(t.winner);
    CHECK((won.gemm == GemmRoute::Auto || won.conv == ConvAlgorithm::Im2col));
  }
  test::check_close(f(x), fn(x), 1e-4, 1e-5);  // the tuned plan
}

namespace {

// `exact` plus noise of root mean square `rms`, in float32.
Array noisy(const Array& exact, double rms, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, rms > 0 ? rms : 1.0);
  Array out = Array::empty(DType::Float32, exact.shape());
  for (int64_t i = 0; i < exact.numel(); ++i)
    out.data_as<float>()[i] = float(exact.data_as<double>()[i] + (rms > 0 ? normal(rng) : 0.0));
  return out;
}

}  // namespace

TEST_CASE("max-autotune: a candidate twice as far from float64 as the default is rejected", "[autotune]") {
  // [Note: no less accurate than the default] in codegen/autotune_measure.h.
  Array exact = Array::empty(DType::Float64, {4000});
  std::mt19937 rng(1);
  std::normal_distribution<double> normal(0.0, 10.0);
  for (int64_t i = 0; i < exact.numel(); ++i) exact.data_as<double>()[i] = normal(rng);
  const double default_error = rms_error({noisy(exact, 1e-4, 2)}, {exact});
  CHECK(std::abs(default_error - 1e-4) < 5e-6);
  std::string why;
  CHECK(as_accurate({noisy(exact, 1.5e-4, 3)}, {exact}, default_error, why));
  CHECK_FALSE(as_accurate({noisy(exact, 3e-4, 4)}, {exact}, default_error, why));
  CHECK(why.find("less accurate") != std::string::npos);
  // A default that rounds exactly leaves a rounding or two to the candidates.
  Array rounded = noisy(exact, 0.0, 5);
  const double rounding = rms_error({rounded}, {exact});
  CHECK(as_accurate({noisy(exact, 1e-6, 6)}, {exact}, rounding, why));  // a rounding or two at 10
  CHECK_FALSE(as_accurate({noisy(exact, 1e-4, 7)}, {exact}, rounding, why));
  // Where float64 is infinite or NaN, the values are same_values's to compare; integers too.
  exact.data_as<double>()[7] = std::numeric_limits<double>::infinity();
  Array far = noisy(exact, 1.5e-4, 8);
  far.data_as<float>()[7] = 0.0f;
  CHECK(as_accurate({far}, {exact}, default_error, why));
  Array ints = Array::empty(DType::Int64, {3});
  CHECK(rms_error({ints}, {ints}) == 0.0);
}

TEST_CASE("max-autotune: a convolution over non-negative inputs keeps at most twice the default's error",
          "[autotune][conv]") {
  FreshCache cache;
  ThreadCountForCall one(1);
  Tensor x = relu(uniform({2, 64, 6, 6}, 1, -1, 1)), w = uniform({64, 64, 3, 3}, 2, -1, 1);
  auto fn = [&](const Tensor& t) { return conv2d(relu(t), w, std::nullopt, {1, 1}, {1, 1}); };
  Tensor want = conv2d(cast(relu(x), DType::Float64), cast(w, DType::Float64), std::nullopt, {1, 1}, {1, 1});
  const std::vector<double> exact = want.to_vector();
  auto rms = [&](const Tensor& got) {  // of got - want, and of want itself for none
    std::vector<double> g = got.defined() ? got.to_vector() : std::vector<double>(exact.size(), 0.0);
    double squares = 0;
    for (size_t i = 0; i < exact.size(); ++i) squares += (g[i] - exact[i]) * (g[i] - exact[i]);
    return std::sqrt(squares / exact.size());
  };
  const double default_error = rms(fn(x));
  auto f = compile(fn, Options{.mode = "max-autotune", .autotune_budget_s = 5.0, .autotune_search = "exhaustive"});
  f(x);
  const double tuned_error = rms(f(x));
  INFO("winner " << f.report().graphs.at(0).tuning.at(0).winner);
  CHECK(tuned_error <= 2 * default_error + std::ldexp(rms(Tensor()), -23));
}

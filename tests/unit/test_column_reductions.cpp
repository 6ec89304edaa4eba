// Reductions over any dims on generated code: column kernels (the dim before the last), and
// split-reductions, which turns every other set of dims into row and column reductions. Each
// case runs compiled and on the interpreter (eager), which folds in double.
#include <ember/ember.h>

#include <cmath>
#include <functional>
#include <limits>

#include "codegen/kernel_spec.h"
#include "codegen/plan.h"
#include "ir/graph.h"
#include "passes/fuse.h"
#include "passes/pass.h"
#include "tests/catch.h"
#include "tests/unit/helpers.h"

using namespace ember;
using ember::test::check_close;

namespace {

using Reduce = std::function<Tensor(const Tensor&, std::vector<int64_t>, bool)>;

const std::vector<std::pair<const char*, Reduce>>& reductions() {
  static const std::vector<std::pair<const char*, Reduce>> all = {
      {"sum", [](const Tensor& x, std::vector<int64_t> a, bool k) { return sum(x, a, k); }},
      {"mean", [](const Tensor& x, std::vector<int64_t> a, bool k) { return mean(x, a, k); }},
      {"max", [](const Tensor& x, std::vector<int64_t> a, bool k) { return max(x, a, k); }},
      {"min", [](const Tensor& x, std::vector<int64_t> a, bool k) { return min(x, a, k); }},
  };
  return all;
}

// The kernels (fusion groups) of var_mean over `axes` of x, after the default mode's passes, that
// iterate over as many elements as x has: how many kernels read all of it. (A row kernel's two
// passes over a row in cache count once: they read the row from memory once.)
int passes_over_input(const std::vector<int64_t>& shape, const std::vector<int64_t>& axes) {
  Graph g;
  Node* x = g.add_input({DType::Float32, to_shape(shape)});
  Node* vm = g.add(Op::VarMean, {Value(x)}, {{"axes", axes}, {"correction", 1.0}, {"keepdim", false}});
  g.set_outputs({vm->out(0), vm->out(1)});
  for (const char* pass : {"decompose-fusible", "split-reductions", "cse", "dce"}) make_pass(pass)->run(g);
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  int passes = 0;
  for (const FusionGroup& group : find_fusion_groups(g, codegen::cpu_can_compute)) {
    int64_t n = 1;
    for (const Dim& d : group.domain) n *= d.value();
    passes += n == numel;
  }
  return passes;
}

}  // namespace

TEST_CASE("KernelSpec: a column kernel's header round-trips, a column kernel has rank 2 or more", "[codegen][spec]") {
  const char* text = R"(kernel rank=2 columns {
  %0 = load in0 : f32[*, *]
  %1 = sum(%0) {axes=[0], keepdim=true} : f32 compute=f32
  store out0 = %1
}
)";
  codegen::KernelSpec spec = codegen::parse_kernel_spec(text);
  CHECK(spec.columns);
  CHECK(spec.reduced_dim() == 0);
  CHECK(spec.str() == text);
  CHECK(spec.line_values() == std::vector<bool>{false, true});
  CHECK(test::error_of([] { codegen::parse_kernel_spec("kernel rank=1 columns {\n}\n"); })
            .find("rank 2 or more") != std::string::npos);
}

TEST_CASE("column and split reductions: every op and set of dims, keepdim or not, against the interpreter",
          "[codegen][reductions]") {
  // Shapes around the steps (64 float32 columns, then 16, then one: 300 takes all three), with tails, a size-1 dim, and
  // sizes past the pool's grain (rows split over threads, or columns when rows are few).
  const std::vector<std::pair<std::vector<int64_t>, std::vector<std::vector<int64_t>>>> cases = {
      {{37, 45}, {{0}, {1}, {}}},
      {{5, 1}, {{0}}},
      {{300, 70}, {{0}}},
      {{4096, 40}, {{0}}},
      {{6, 7, 33}, {{0}, {1}, {2}, {0, 1}, {0, 2}, {1, 2}, {}}},
      {{3, 4, 5, 6}, {{0, 2, 3}, {1, 3}, {0, 1, 3}, {0, 2}}},
      {{2, 64, 300, 3}, {{0, 2}, {1, 2}}},
  };
  for (const auto& [name, reduce] : reductions()) {
    for (const auto& [shape, axes_list] : cases) {
      Tensor x = uniform(SymShape(shape.begin(), shape.end()), 11, -2.0, 2.0);
      for (const auto& axes : axes_list) {
        for (bool keepdim : {true, false}) {
          INFO(name << " over " << axes.size() << " dims of a rank-" << shape.size() << " input, first "
                    << (axes.empty() ? -1 : axes[0]) << ", keepdim " << keepdim);
          auto fn = [&](const Tensor& t) { return reduce(t * 1.5 + 0.25, axes, keepdim); };
          auto f = compile(fn);
          check_close(f(x), fn(x), 1e-5, 1e-5);
          const GraphInfo g = f.report().graphs.at(0);
          CHECK(g.interpreter_ops.empty());
          CHECK(g.kernels >= 1);
        }
      }
    }
  }
}

TEST_CASE("column reductions: strided inputs, float64, float16, NaN, and empty columns", "[codegen][reductions]") {
  auto column_sum = [](const Tensor& x) { return sum(x, {0}, true); };
  auto f = compile(column_sum);
  // A transposed input: the column kernel walks it through its strides (stride 1 along the rows).
  Tensor t = transpose(uniform({50, 70}, 3), 0, 1);
  check_close(f(t), column_sum(t), 1e-5, 1e-5);
  // float64 sums in float64.
  Tensor d = uniform({300, 41}, 4, -1.0, 1.0, DType::Float64);
  check_close(f(d), column_sum(d), 1e-12, 1e-12);
  // float16 sums in float32 and rounds once, as eager does.
  Tensor h = uniform({500, 33}, 5, 0.0, 1.0, DType::Float16);
  check_close(f(h).to(DType::Float32), column_sum(h).to(DType::Float32), 2e-3, 1e-2);
  // max and min propagate NaN, per column.
  std::vector<double> values(8 * 40, 1.0);
  values[3 * 40 + 17] = std::numeric_limits<double>::quiet_NaN();
  Tensor n = from_vector(values, {8, 40});
  auto g = compile([](const Tensor& x) { return max(x, {0}, true); });
  auto m = g(n).to_vector();
  for (int j = 0; j < 40; ++j) CHECK(std::isnan(m[j]) == (j == 17));
  // No rows: sums are 0, means NaN, as eager.
  auto e = compile([](const Tensor& x) { return std::vector<Tensor>{sum(x, {0}, true), mean(x, {0}, true)}; },
                   Options{.dynamic = true});
  for (int64_t rows : {0, 1, 5}) {
    Tensor z = uniform({rows, 9}, 6);
    auto got = e(z);
    check_close(got[0], sum(z, {0}, true), 1e-5, 1e-5);
    check_close(got[1], mean(z, {0}, true), 1e-5, 1e-5);
  }
}

TEST_CASE("column groups: prologue and epilogue fuse, a batch norm's statistics are two kernels",
          "[codegen][reductions][fusion]") {
  // A bias gradient after an elementwise prologue: one kernel.
  auto bias_grad = [](const Tensor& g, const Tensor& x) { return sum(g * (x > 0.5).to(DType::Float32), {0}); };
  auto f = compile(bias_grad);
  Tensor g = uniform({512, 96}, 1), x = uniform({512, 96}, 2);
  check_close(f(g, x), bias_grad(g, x), 1e-5, 1e-5);
  CHECK(f.report().graphs.at(0).kernels == 1);
  // Centering over the columns: the mean, then x - mean stored over the domain, in one kernel;
  // a variance over the columns (two levels) likewise.
  auto center = [](const Tensor& x) {
    Tensor m = mean(x, {0}, true);
    Tensor d = x - m;
    return std::vector<Tensor>{d, mean(d * d, {0}, true)};
  };
  auto c = compile(center);
  auto got = c(x);
  auto want = center(x);
  check_close(got[0], want[0], 1e-5, 1e-5);
  check_close(got[1], want[1], 1e-5, 1e-5);
  CHECK(c.report().graphs.at(0).kernels == 1);
  // Statistics over (0, 2, 3) of [N, C, H, W]: a row kernel over H * W, a column kernel over N.
  auto stats = [](const Tensor& x) { return sum(x, {0, 2, 3}); };
  auto s = compile(stats);
  Tensor img = uniform({4, 8, 5, 6}, 3);
  check_close(s(img), stats(img), 1e-5, 1e-5);
  CHECK(s.report().graphs.at(0).kernels == 2);
}

TEST_CASE("split-reductions: row and column reductions between reshapes, nothing without code generation",
          "[passes][reductions]") {
  auto build = [](Graph& g) {
    Node* x = g.add_input({DType::Float32, {Dim(4), Dim(8), Dim(5), Dim(6)}});
    Node* s = g.add(Op::Sum, {Value(x)}, {{"axes", std::vector<int64_t>{0, 2, 3}}, {"keepdim", false}});
    g.set_outputs({Value(s)});
  };
  Graph g;
  build(g);
  CHECK(make_pass("split-reductions")->run(g));
  std::string text = print(g);
  INFO(text);
  CHECK(text.find("reshape(%0) {shape=[4, 8, 30]}") != std::string::npos);
  CHECK(text.find("sum(%1) {axes=[2], keepdim=true}") != std::string::npos);  // rows: H * W
  CHECK(text.find("{axes=[0], keepdim=true}") != std::string::npos);          // columns: N
  CHECK(g.outputs()[0].type() == TensorType{DType::Float32, {Dim(8)}});
  test::ScopedEnv off("EMBER_CODEGEN", "0");
  Graph h;
  build(h);
  CHECK(!make_pass("split-reductions")->run(h));
}

TEST_CASE("long rows and columns fold in blocks: a variance over a million values stays accurate",
          "[codegen][reductions]") {
  // Summed one by one into one float32 total, a column of 2^20 squares drifted by 4.5e-4.
  Tensor x = uniform({int64_t{1} << 20, 2}, 7, 2.0, 4.0);
  auto columns = compile([](const Tensor& t) { return var(t, {0}); });
  auto rows = compile([](const Tensor& t) { return var(t, {1}); });
  Tensor xt = uniform({2, int64_t{1} << 20}, 8, 2.0, 4.0);
  check_close(columns(x), var(x, {0}), 2e-6, 0.0);
  check_close(rows(xt), var(xt, {1}), 2e-6, 0.0);
  Tensor strided = transpose(x, 0, 1);  // rows at stride 2: the scalar path, in blocks too
  check_close(rows(strided), var(strided, {1}), 2e-6, 0.0);
  CHECK(columns.report().graphs.at(0).interpreter_ops.empty());
  CHECK(rows.report().graphs.at(0).interpreter_ops.empty());
}

TEST_CASE("column max and min keep the first of -0.0 and 0.0, as the interpreter and eager do",
          "[codegen][reductions]") {
  // arith.maximumf would give 0.0 for max(-0.0, 0.0) whichever came first.
  std::vector<double> values;
  for (int r = 0; r < 3; ++r)
    for (int j = 0; j < 40; ++j) values.push_back((r + j) % 2 ? 0.0 : -0.0);
  Tensor z = from_vector(values, {3, 40});
  for (auto [name, reduce] : reductions()) {
    if (std::string(name) == "sum" || std::string(name) == "mean") continue;
    INFO(name);
    auto f = compile([reduce](const Tensor& t) { return reduce(t, {0}, true); });
    CHECK(test::same_bits(f(z), reduce(z, {0}, true)));
    CHECK(f.report().graphs.at(0).kernels == 1);
  }
}

TEST_CASE("grouped moments: a variance over dims that are not one run, or over one long run, reads its input once",
          "[codegen][reductions][fusion]") {
  // Per group of the last reduced run, two passes while the group is in cache; then the groups
  // combine ([Note: grouped moments]). Plain two-pass read x twice in each of these.
  CHECK(passes_over_input({4, 8, 5, 6}, {0, 2, 3}) == 1);  // batch norm's statistics
  CHECK(passes_over_input({3, 4, 5, 6}, {1, 3}) == 1);
  CHECK(passes_over_input({8192, 40}, {0}) == 1);          // a long column, in columns of 512
  CHECK(passes_over_input({3, 131072}, {1}) == 1);         // a long row, in rows of 16384
  CHECK(passes_over_input({2, 1 << 20}, {}) == 1);         // everything
  // A run that fits in cache: one row kernel, two passes over each row while it is in cache.
  CHECK(passes_over_input({16, 1024}, {1}) == 1);
}

TEST_CASE("grouped moments: var_mean and batch norm against the interpreter, offset, constant and dynamic",
          "[codegen][reductions]") {
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{4, 8, 5, 6}, {0, 2, 3}}, {{3, 4, 5, 6}, {1, 3}}, {{2, 3, 4, 5}, {0, 2}}, {{5, 1, 7, 1}, {0, 2, 3}},
      {{8192, 3}, {0}},          {{3, 65536}, {1}},      {{3, 65537}, {1}},      {{2, 3, 70000}, {0, 2}},
  };
  auto fn = [](const std::vector<int64_t>& axes) {
    return [axes](const Tensor& x) {
      auto [v, m] = var_mean(x * 1.5 + 100.0, axes);
      return std::vector<Tensor>{v, m};
    };
  };
  for (const auto& [shape, axes] : cases) {
    INFO("rank " << shape.size() << ", last dim " << shape.back() << ", first axis " << axes[0]);
    Tensor x = uniform(SymShape(shape.begin(), shape.end()), 21, -2.0, 2.0);
    auto f = compile(fn(axes));
    auto got = f(x);
    auto want = fn(axes)(x);
    check_close(got[0], want[0], 2e-5, 0.0);
    check_close(got[1], want[1], 1e-6, 0.0);
    CHECK(f.report().graphs.at(0).interpreter_ops.empty());
    // A constant set has a variance of exactly 0, and batch norm gives exactly its bias.
    Tensor c = full(SymShape(shape.begin(), shape.end()), 0.1);
    CHECK(compile(fn(axes))(c)[0].to_vector() == std::vector<double>(got[0].numel(), 0.0));
  }
  auto bn = [](const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& rm, const Tensor& rv) {
    auto [y, mean, invstd, new_mean, new_var] = native_batch_norm(x, w, b, rm, rv);
    return std::vector<Tensor>{y, mean, invstd, new_mean, new_var};
  };
  Tensor w = uniform({8}, 1, 0.5, 1.5), b = uniform({8}, 2), rm = uniform({8}, 3), rv = uniform({8}, 4, 1.0, 2.0);
  auto f = compile(bn, Options{.dynamic = true});
  for (int64_t n : {1, 3, 6}) {
    INFO("batch " << n);
    Tensor x = uniform({n, 8, 5, 7}, 5, 10.0, 12.0);
    auto got = f(x, w, b, rm, rv);
    auto want = bn(x, w, b, rm, rv);
    for (size_t i = 0; i < got.size(); ++i) check_close(got[i], want[i], 5e-5, 5e-5);
    auto constant = f(full({n, 8, 5, 7}, 0.3), w, b, rm, rv);
    std::vector<double> y = constant[0].to_vector(), bias = b.to_vector();
    for (size_t i = 0; i < y.size(); ++i) CHECK(y[i] == static_cast<double>(static_cast<float>(bias[(i / 35) % 8])));
  }
  const GraphInfo g = f.report().graphs.at(0);
  for (const std::string& op : g.interpreter_ops) UNSCOPED_INFO(op);
  CHECK(g.interpreter_ops.empty());
}

TEST_CASE("integer and bool sums, products, max and min, and float products, run on generated code as the interpreter folds them",
          "[codegen][reductions]") {
  // Values in [-40, 40) (the bool input: nonzero ones), so products overflow int64 and wrap, as
  // in eager; max and min of unsigned bytes compare their values, not their bits.
  const std::vector<int64_t> shape{5, 6, 70};
  std::vector<double> values;
  for (int64_t i = 0; i < 5 * 6 * 70; ++i) values.push_back(static_cast<double>((i * 37 + 11) % 80 - 40));
  Tensor base = from_vector(values, SymShape(shape.begin(), shape.end()));
  const std::vector<std::vector<int64_t>> axes_list = {{2}, {1}, {0}, {0, 2}, {}};
  for (DType dtype : {DType::Int64, DType::Int32, DType::Int8, DType::UInt8, DType::Bool}) {
    // Negative only, too: a max is not 0 for want of a value above it.
    for (double shift : {0.0, -50.0}) {
      Tensor x = dtype == DType::UInt8 ? (base + 40.0).to(dtype) : (base + shift).to(dtype);
      for (auto [name, reduce] : reductions()) {
        if (std::string(name) == "mean") continue;  // no mean of integers, in eager either
        for (const auto& axes : axes_list) {
          INFO(name << " of " << dtype_name(dtype) << " over " << axes.size() << " dims, first "
                    << (axes.empty() ? -1 : axes[0]));
          auto fn = [&](const Tensor& t) { return reduce(t, axes, true); };
          auto f = compile(fn);
          CHECK(test::same_bits(f(x), fn(x)));
          const GraphInfo g = f.report().graphs.at(0);
          CHECK(g.interpreter_ops.empty());
        }
      }
      for (const auto& axes : axes_list) {
        auto fn = [&](const Tensor& t) { return prod(t, axes, false); };
        auto f = compile(fn);
        CHECK(test::same_bits(f(x), fn(x)));
      }
    }
  }
  // Float products fold in float32 (the interpreter in double): within rounding.
  Tensor u = uniform(SymShape(shape.begin(), shape.end()), 3, 0.9, 1.1);
  for (const auto& axes : axes_list) {
    auto fn = [&](const Tensor& t) { return prod(t * 1.0, axes, false); };
    auto f = compile(fn);
    check_close(f(u), fn(u), 1e-5, 0.0);
    const GraphInfo g = f.report().graphs.at(0);
    CHECK(g.interpreter_ops.empty());
  }
}

TEST_CASE("split-reductions rebuild a single-use elementwise producer over the runs: it fuses into the reduction",
          "[codegen][reductions][fusion]") {
  // Batch norm's backward: sum(grad * (x - mean)) over (0, 2, 3), one row kernel over H * W and a
  // column kernel over N. Without the rebuild, grad * (x - mean) was a kernel of its own whose
  // output the reshape viewed.
  Tensor g = uniform({4, 8, 5, 6}, 1), x = uniform({4, 8, 5, 6}, 2), m = uniform({1, 8, 1, 1}, 3);
  auto bn_grad = [](const Tensor& g, const Tensor& x, const Tensor& m) { return sum(g * (x - m), {0, 2, 3}); };
  auto f = compile(bn_grad);
  check_close(f(g, x, m), bn_grad(g, x, m), 1e-5, 1e-5);
  CHECK(f.report().graphs.at(0).kernels == 2);
  // The producer is also returned: it is computed again in the reduction's kernel, and returned.
  auto both = [](const Tensor& g, const Tensor& x) {
    Tensor p = g * x;
    return std::vector<Tensor>{p, sum(p, {0, 2})};
  };
  auto fb = compile(both);
  auto got = fb(g, x);
  auto want = both(g, x);
  check_close(got[0], want[0], 1e-6, 0.0);
  check_close(got[1], want[1], 1e-5, 1e-5);
  // Read by another node too, the producer is kept and read, not computed twice: one exp.
  auto shared = [](const Tensor& x) {
    Tensor p = exp(x);
    return std::vector<Tensor>{sum(p, {0, 2, 3}), p * 2.0};
  };
  auto fs = compile(shared);
  auto got_s = fs(x);
  auto want_s = shared(x);
  check_close(got_s[0], want_s[0], 1e-5, 1e-5);
  check_close(got_s[1], want_s[1], 1e-6, 0.0);
  const std::string ir = fs.report().graphs.at(0).ir;
  CHECK(ir.find("exp(") == ir.rfind("exp("));
  // An operand that mixes full and broadcast dims within a run ([1, 1, 5, 1] against the run of
  // H and W) cannot be put in the runs' shape: the producer stays a kernel, and the sum is right.
  Tensor h = uniform({1, 1, 5, 1}, 4);
  auto mixed = [](const Tensor& x, const Tensor& h) { return sum(x * h, {0, 2, 3}); };
  auto fm = compile(mixed);
  check_close(fm(x, h), mixed(x, h), 1e-5, 1e-5);
  CHECK(fm.report().graphs.at(0).kernels == 3);
  // float16 in, through the cast to float32 partial sums: the cast fuses too.
  Tensor xh = x.to(DType::Float16);
  auto half = [](const Tensor& x) { return sum(x * 2.0, {0, 2, 3}); };
  auto fh = compile(half);
  check_close(fh(xh).to(DType::Float32), half(xh).to(DType::Float32), 2e-3, 1e-2);
  CHECK(fh.report().graphs.at(0).kernels == 2);
}

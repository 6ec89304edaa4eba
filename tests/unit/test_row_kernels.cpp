// Row kernels ([Note: row kernels] in codegen/cpu/emit_kernel.cpp): softmax, log_softmax, the
// norms and reductions along the last dim fused with what feeds and reads them, one kernel each,
// against the float64 reference within docs/testing.md's tolerances, on the shapes that stress them.
#include <ember/ember.h>

#include <cmath>
#include <functional>

#include "codegen/cpu/emit_kernel.h"
#include "codegen/kernel_spec.h"
#include "tests/catch.h"
#include "tests/unit/helpers.h"

using namespace ember;

using test::check_close;

namespace {

using Fn = std::function<Tensor(const Tensor&)>;

struct Case {
  const char* name;
  Fn fn;
  int interpreter_ops;  // what stays outside the kernel (0: everything is one kernel)
};

std::vector<Case> cases() {
  Tensor w = uniform({37}, 11, 0.5, 1.5), b = uniform({37}, 12);
  return {
      {"softmax", [](const Tensor& x) { return softmax(x, -1); }, 0},
      {"log_softmax", [](const Tensor& x) { return log_softmax(x, -1); }, 0},
      {"layer_norm", [w, b](const Tensor& x) { return layer_norm(x, {37}, cast(w, x.dtype()), cast(b, x.dtype())); }, 0},
      {"rms_norm", [w](const Tensor& x) { return rms_norm(x, {37}, cast(w, x.dtype()), 1e-6); }, 0},
      {"sum, max and mean along the row, then elementwise",
       [](const Tensor& x) { return exp(x - max(x, {-1}, true)) * mean(x, {-1}, true) + sum(x * x, {-1}, true); }, 0},
      {"logsumexp and var", [](const Tensor& x) { return logsumexp(x, {-1}, true) + var(x, {-1}, 1.0, true); }, 0},
  };
}

}  // namespace

TEST_CASE("row kernels: softmax, log_softmax, layer_norm and rms_norm are one kernel each", "[codegen][rows]") {
  Tensor x = uniform({8, 37}, 1, -3, 3);
  for (const Case& c : cases()) {
    INFO(c.name);
    auto f = compile(c.fn);
    check_close(f(x), c.fn(cast(x, DType::Float64)), 1.3e-5 * 4, 1.5e-5 * 4);
    const GraphInfo g = f.report().graphs.at(0);  // a copy: report() returns by value
    CHECK(g.kernels == 1);
    CHECK(static_cast<int>(g.interpreter_ops.size()) == c.interpreter_ops);
  }
  // native_layer_norm's mean and rstd are row outputs of the same kernel.
  auto nln = [](const Tensor& x) {
    auto [y, m, r] = native_layer_norm(x, {37});
    return std::vector<Tensor>{y, m, r};
  };
  auto f = compile(nln);
  std::vector<Tensor> got = f(x), want = nln(cast(x, DType::Float64));
  for (size_t i = 0; i < 3; ++i) check_close(got[i], want[i], 1e-4, 1e-4);
  CHECK(f.report().graphs.at(0).kernels == 1);
  CHECK(f.report().graphs.at(0).interpreter_ops.empty());
}

TEST_CASE("row kernels: rows of every length, strided and broadcast inputs, dtypes, threads", "[codegen][rows]") {
  auto softmax_last = [](const Tensor& x) { return softmax(x, -1); };
  auto norm = [](const Tensor& x) { return layer_norm(x, {x.sizes().back()}); };
  for (auto fn : {Fn(softmax_last), Fn(norm)}) {
    auto f = compile(fn, Options{.dynamic = true});  // one kernel serves every length
    for (int64_t n : {2, 3, 15, 16, 17, 33, 1000, 4099}) {
      INFO("row length " << n);
      Tensor x = uniform({5, n}, n, -4, 4);
      check_close(f(x), fn(cast(x, DType::Float64)), 1e-4, 1e-5);
    }
    // Transposed (rows not contiguous: the scalar path), and a row view with an offset.
    Tensor t = transpose(uniform({40, 6}, 2, -2, 2), 0, 1);
    check_close(f(t), fn(cast(t, DType::Float64)), 1e-4, 1e-5);
    // Large enough to split over threads by rows.
    Tensor big = uniform({512, 300}, 3, -2, 2);
    check_close(f(big), fn(cast(big, DType::Float64)), 1e-4, 1e-5);
  }
  // float64 rows stay float64; float16 and bfloat16 compute in float32 and round once.
  for (DType dt : {DType::Float64, DType::Float16, DType::BFloat16}) {
    INFO(dtype_name(dt));
    Tensor x = cast(uniform({4, 70}, 4, -3, 3), dt);
    auto f = compile(softmax_last);
    double tol = dt == DType::Float64 ? 1e-12 : 1e-2;
    check_close(f(x), softmax_last(cast(x, DType::Float64)), tol, tol);
    CHECK(f(x).dtype() == dt);
  }
}

TEST_CASE("row kernels: edge values and empty rows", "[codegen][rows]") {
  double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  // A row with NaN is NaN; a row of -inf is NaN (as eager); +inf dominates.
  Tensor x = from_vector({1, nan, 2, -inf, -inf, -inf, 1, inf, 2, 0, 0, 0}, {4, 3});
  auto sm = compile([](const Tensor& t) { return softmax(t, -1); });
  check_close(sm(x), softmax(x, -1), 1e-6, 1e-7);
  auto mx = compile([](const Tensor& t) { return max(t, {-1}, true) + min(t, {-1}, true); });
  check_close(mx(x), max(x, {-1}, true) + min(x, {-1}, true), 1e-6, 1e-7);
  // Empty rows: a sum is 0, a mean NaN, a softmax empty; max over nothing stays an error.
  Tensor e = full({3, 0}, 1.0);
  auto s = compile([](const Tensor& t) { return sum(t, {-1}, true) + 1.0; });
  check_close(s(e), full({3, 1}, 1.0), 0, 0);
  auto m = compile([](const Tensor& t) { return mean(t, {-1}, true); });
  CHECK(std::isnan(m(e).array().get(0)));
  CHECK(compile([](const Tensor& t) { return softmax(t, -1); })(e).shape() == std::vector<int64_t>{3, 0});
  auto bad = compile([](const Tensor& t) { return max(t, {-1}, true); });
  CHECK_FALSE(test::error_of([&] { bad(e); }).empty());
}

TEST_CASE("one-element constants are in the kernel's text, pow to 2, 3 or 4 multiplies", "[codegen][constants]") {
  double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  Tensor x = from_vector({-2.5, -0.0, 0.0, 1e-20, 3.0, 1e12, -inf, inf, nan, 0.7}, {10});
  for (double p : {2.0, 3.0, 4.0, 2.5, -1.0}) {
    INFO("exponent " << p);
    auto fn = [p](const Tensor& t) { return pow(t, p) * 0.5; };
    auto f = compile(fn);
    Tensor got = f(x), want = fn(cast(x, DType::Float64));
    check_close(got, cast(want, DType::Float32), 2.4e-7, 0);  // within an ulp or two of float32
    CHECK(f.report().graphs.at(0).kernels == 1);
  }
  // The constant is part of the spec (and so of the kernel's cache key).
  std::vector<Value> inputs;
  Graph g;
  Node* in = g.add_input({DType::Float32, {Dim(4)}});
  Node* c = g.add_constant(Literal{DType::Float64, {3.0}, {}}, {});
  Node* p = g.add(Op::Pow, {Value(in), Value(c)});
  codegen::KernelSpec spec = codegen::spec_of_group({p}, p->type().shape, {Value(p)}, inputs);
  CHECK(spec.str().find("constant() {value=f64[3.0]}") != std::string::npos);
  CHECK(inputs.size() == 1);
  CHECK(codegen::parse_kernel_spec(spec.str()).str() == spec.str());
}

namespace {

// The MLIR text of softmax's row kernel over a [4, 100] input of `dtype`.
std::string softmax_kernel_text(DType dtype) {
  Graph g;
  Node* x = g.add_input({dtype, {Dim(4), Dim(100)}});
  Attrs keep{{"axes", std::vector<int64_t>{-1}}, {"keepdim", true}};
  Node* m = g.add(Op::Max, {Value(x)}, keep);
  Node* e = g.add(Op::Exp, {Value(g.add(Op::Sub, {Value(x), Value(m)}))});
  Node* s = g.add(Op::Sum, {Value(e)}, keep);
  Node* y = g.add(Op::Div, {Value(e), Value(s)});
  std::vector<Value> inputs;
  std::vector<Node*> nodes{m, e->inputs()[0].node, e, s, y};
  return codegen::cpu::emit_kernel(codegen::spec_of_group(nodes, x->type().shape, {Value(y)}, inputs), "k");
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("row kernels: softmax stores its exponentials once and scales them", "[codegen][rows]") {
  // One exp in each vector loop of the sum's pass (four registers' lanes, then one register's)
  // and one in its scalar loop; the store pass reads the stored values back instead of
  // computing them again. A float32 sum also has its second fold in float64 ([Note:
  // overflow-safe folds]), one scalar loop that runs only for a row whose float32 sum is not
  // finite. A float32 exp is ember's own (emit_ops.cpp), with one math.roundeven
  // (n = round(x / ln 2)); a float64 one is math.exp.
  auto exps = [](const std::string& text) { return count_of(text, "math.exp") + count_of(text, "math.roundeven"); };
  CHECK(exps(softmax_kernel_text(DType::Float32)) == 4);
  CHECK(exps(softmax_kernel_text(DType::Float64)) == 3);
  // float16 outputs would round the stored exponentials before the division: computed again
  // (in the store pass's three loops).
  CHECK(exps(softmax_kernel_text(DType::Float16)) == 7);
  // The results match the float64 reference at row lengths around the vector width.
  for (int64_t n : {1, 7, 16, 17, 100, 1025}) {
    Tensor x = uniform({3, n}, 5, -30, 30);
    auto f = compile([](const Tensor& t) { return softmax(t, -1); });
    check_close(f(x), softmax(cast(x, DType::Float64), -1), 1.3e-5 * 4, 1.5e-5 * 4);
  }
}

TEST_CASE("row kernels: a division by a row value multiplies by its reciprocal only where that is normal",
          "[codegen][rows]") {
  // [Note: reciprocals of row divisors]: the store pass has a multiplying loop and a dividing one.
  std::string text = softmax_kernel_text(DType::Float32);
  // The reciprocal's check, the sum's overflow check and the max's ([Note: fast max folds]).
  CHECK(count_of(text, "math.absf") == 3);
  CHECK(count_of(text, "arith.mulf") > 0);
  // Divisors whose reciprocal would overflow (1e-39 is subnormal in float32), go subnormal
  // (1e38) or is infinite or NaN take the dividing loop: the quotients are the reference's.
  double inf = std::numeric_limits<double>::infinity();
  auto f = compile([](const Tensor& t) { return t / max(t, {-1}, true); });
  for (double scale : {1.0, 1e-39, 3e-38, 1e38, 3.3e38, inf}) {
    INFO(scale);
    Tensor x = uniform({4, 40}, 9, 0.25, 1.0) * scale;
    check_close(f(x), x / max(cast(x, DType::Float64), {-1}, true), 1.3e-5 * 4, 1.5e-5 * 4);
  }
  Tensor tiny = full({2, 33}, 1e-40, DType::Float32);  // the sum is subnormal
  auto g = compile([](const Tensor& t) { return t / sum(t, {-1}, true); });
  check_close(g(tiny), full({2, 33}, 1.0 / 33), 1e-6, 1e-7);
}

TEST_CASE("row kernels: a quotient that a reduction reads is divided in every pass", "[codegen][rows]") {
  // [Note: reciprocals of row divisors]: (x / t).softmax(-1) computed x / t by dividing for the
  // max and by multiplying with 1 / t when storing; 9 / 0.001f came out 9000 in one and
  // 8999.999 in the other, and the row's largest probability 0.99902 instead of 1.
  auto fn = [](const Tensor& x, const Tensor& t) { return softmax(x / t, -1) + x; };
  Tensor x = from_vector({3, 250, 100, 7, 1, -2, 0.5, 9}, {2, 4});
  Tensor t = full({}, 0.001, DType::Float32);
  auto f = compile(fn);
  check_close(f(x, t), fn(x, t), 1e-6, 1e-6);
  // By a value broadcast along the row (an input, not a reduction's), PyTorch divides: so does
  // the store pass, bit for bit.
  auto scaled = [](const Tensor& x, const Tensor& t) { return x / t + max(x, {-1}, true); };
  Tensor rows = uniform({8, 37}, 3, -3, 3), per_row = uniform({8, 1}, 4, 0.1, 3);
  auto g = compile(scaled);
  CHECK(test::same_bits(g(rows, per_row), scaled(rows, per_row)));
}

TEST_CASE("fusion: a node does not join a group that waits, through another group, for its value", "[codegen][fusion]") {
  // k = c * c is a scalar group; the row group over x reads k (x - sum(x) / k), and
  // reshape(sum(x)) / k would join k's group through k. No node path leads from sum(x) back to
  // k, but the row group runs as one step that waits for k: the two steps waited for each other
  // ("the plan's steps have a cycle").
  auto f = [](const Tensor& x, const Tensor& c) {
    Tensor k = c * c;
    Tensor s = sum(x, {0}, true);
    Tensor centred = x - s / k;
    Tensor spread = sum(centred * centred, {0}, true);
    Tensor ratio = reshape(s, {}) / k;
    return std::vector<Tensor>{ratio, spread};
  };
  Tensor x = uniform({5}, 1), c = full({}, 1.5);
  auto compiled = compile(f);
  std::vector<Tensor> got = compiled(x, c), want = f(x, c);
  check_close(got[0], want[0], 1e-6, 1e-6);
  check_close(got[1], want[1], 1e-5, 1e-5);
}

TEST_CASE("fusion: a reshape moves above elementwise nodes of inputs, so they fuse with what reads it",
          "[codegen][fusion]") {
  // [Note: reshapes above elementwise ops] in passes/simplify.cpp. Each was two kernels, the
  // elementwise values written between them.
  Tensor x = uniform({6, 4, 5}, 1);
  auto row_sums = [](const Tensor& x) { return sum(reshape(exp(x) * 2.0, {6, 20}), {1}, true); };
  auto softmax_flat = [](const Tensor& x) { return softmax(flatten(x + 1.0, 1), -1); };
  for (auto fn : {std::function<Tensor(const Tensor&)>(row_sums), std::function<Tensor(const Tensor&)>(softmax_flat)}) {
    auto f = compile(fn);
    check_close(f(x), fn(x), 1e-5, 1e-6);
    CHECK(f.report().graphs.at(0).kernels == 1);
  }
  // Read by another node too, the value stays where it is (moving the reshape would compute it twice).
  auto shared = [](const Tensor& x) {
    Tensor e = exp(x);
    return std::vector<Tensor>{sum(reshape(e, {6, 20}), {1}, true), e * 3.0};
  };
  auto fs = compile(shared);
  std::vector<Tensor> got = fs(x), want = shared(x);
  check_close(got[0], want[0], 1e-5, 1e-6);
  check_close(got[1], want[1], 1e-6, 1e-6);
  const std::string ir = fs.report().graphs.at(0).ir;
  CHECK(ir.find("exp(") == ir.rfind("exp("));
}

TEST_CASE("fusion: moving a reshape above a chain that reads each value twice visits each node once",
          "[codegen][fusion]") {
  // x * x forty times, then a reshape: the chain's nodes were visited, and rebuilt, once per
  // path through it, 2^40 times.
  auto squarings = [](const Tensor& x) {
    Tensor t = x;
    for (int i = 0; i < 40; ++i) t = t * t;
    return sum(reshape(t, {12}), {0}, true);
  };
  Tensor x = uniform({3, 4}, 1, 0.999, 1.0);
  auto f = compile(squarings);
  check_close(f(x), squarings(x), 1e-4, 1e-6);
  CHECK(f.report().graphs.at(0).kernels == 1);
}

TEST_CASE("fusion: a norm or variance of a value computed in the kernel is one kernel", "[codegen][fusion]") {
  // [Note: slices sunk below elementwise ops] in passes/simplify.cpp. The shifted variance reads
  // each row's last element; when the row was a residual add, that element was a second kernel
  // and the sum was written between the two.
  Tensor w = uniform({37}, 11, 0.5, 1.5), b = uniform({37}, 12), bias = uniform({37}, 13);
  std::vector<std::pair<const char*, std::function<Tensor(const Tensor&, const Tensor&)>>> fns = {
      {"layer_norm(x + r)", [&](const Tensor& x, const Tensor& r) { return layer_norm(x + r, {37}, w, b); }},
      {"layer_norm(x * r + bias), bias broadcast",
       [&](const Tensor& x, const Tensor& r) { return layer_norm(x * r + bias, {37}, w, b); }},
      {"var(exp(x) - r)", [](const Tensor& x, const Tensor& r) { return var(exp(x) - r, {-1}, 1.0, true); }},
      {"the sum is an output too",
       [&](const Tensor& x, const Tensor& r) { Tensor h = x + r; return layer_norm(h, {37}, w, b) + h; }},
  };
  Tensor x = uniform({9, 37}, 1, -3, 3), r = uniform({9, 37}, 2, -3, 3);
  for (auto& [name, fn] : fns) {
    INFO(name);
    auto f = compile(fn);
    check_close(f(x, r), fn(x, r), 1.3e-5 * 4, 1.5e-5 * 4);
    CHECK(f.report().graphs.at(0).kernels == 1);
    CHECK(f.report().graphs.at(0).interpreter_ops.empty());
  }
  // A row that is constant after the add still centres to exact zeros: the shift recomputed
  // from the slices is the same value as the row's own last element.
  Tensor ones = full({2, 37}, 0.3), twos = full({2, 37}, 1.7);
  auto norm = compile([](const Tensor& x, const Tensor& r) { return layer_norm(x * r + 0.1, {37}); });
  for (double v : norm(ones, twos).to_vector()) CHECK(v == 0.0);
}

TEST_CASE("fusion: a slice sunk below a chain that reads each value twice visits each node once",
          "[codegen][fusion]") {
  auto squarings = [](const Tensor& x) {
    Tensor t = x;
    for (int i = 0; i < 40; ++i) t = t * t;
    return var(t, {-1}, 1.0, true);
  };
  Tensor x = uniform({3, 4}, 1, 0.999, 1.0);
  auto f = compile(squarings);
  check_close(f(x), squarings(x), 1e-4, 1e-6);
  CHECK(f.report().graphs.at(0).kernels == 1);
}

TEST_CASE("fusion: a linear layer's bias add, the residual add and the layer norm after it are one kernel",
          "[codegen][fusion]") {
  // The GEMM's [batch * seq, n] output is viewed as [batch, seq, n]: the reshape moves above the
  // bias add onto the GEMM's output ([Note: reshapes above elementwise ops]), and the layer
  // norm's shift is recomputed from the slices of its operands ([Note: slices sunk below
  // elementwise ops]). Two such layers on one residual stream: one kernel each, the second
  // reading the stream the first stored, not recomputing its last element through both.
  Tensor w1 = uniform({16, 16}, 1, -0.3, 0.3), w2 = uniform({16, 16}, 2, -0.3, 0.3);
  Tensor b1 = uniform({16}, 3), b2 = uniform({16}, 4), g = uniform({16}, 5, 0.5, 1.5), beta = uniform({16}, 6);
  auto layer = [&](const Tensor& h, const Tensor& w, const Tensor& b) {
    Tensor y = reshape(matmul(reshape(h, {6, 16}), w) + b, {2, 3, 16});
    Tensor stream = h + y;
    return std::pair{stream, layer_norm(stream, {16}, g, beta)};
  };
  auto two_layers = [&](const Tensor& x) {
    auto [h1, n1] = layer(x, w1, b1);
    auto [h2, n2] = layer(h1, w2, b2);
    return std::vector<Tensor>{n1, n2, h2};
  };
  Tensor x = uniform({2, 3, 16}, 7, -2, 2);
  auto f = compile(two_layers);
  std::vector<Tensor> got = f(x), want = two_layers(x);
  for (size_t i = 0; i < got.size(); ++i) check_close(got[i], want[i], 1e-4, 1e-5);
  CHECK(f.report().graphs.at(0).kernels == 2);
}

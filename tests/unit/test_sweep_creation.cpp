// The op sweep of creation ops: full, zeros, ones, arange, uniform, normal and constants.
#include <cmath>
#include <string>
#include <vector>

#include "frontend/ops.h"
#include "ir/graph.h"
#include "runtime/interpreter.h"
#include "tests/catch.h"
#include "tests/unit/sweep.h"

namespace ember::sweep {

Case full_case(Op, DType dt, Gen& g) {
  Case c;
  Ints shape = g.case_shape();
  int form = g.index() % 3;  // full, zeros, ones
  double value = form == 1 ? 0.0 : form == 2 ? 1.0 : g.value(dt, dom(-3, 3, -100, 100));
  Scalar s = ref::is_float(dt)   ? Scalar(value)
             : dt == DType::Bool ? Scalar(value != 0)
                                 : Scalar(static_cast<int64_t>(value));
  c.note = std::string(form == 0   ? "full value=" + num(value)
                       : form == 1 ? "zeros"
                                   : "ones") +
           " shape=" + ref::shape_text(shape);
  c.call = [=](const std::vector<Tensor>&) {
    SymShape ss(shape.begin(), shape.end());
    return form == 1 ? zeros(ss, dt) : form == 2 ? ones(ss, dt) : full(ss, s, dt);
  };
  c.expect = [=] { return result(dt, {shape, std::vector<double>(ref::numel(shape), value)}); };
  return c;
}

Case arange_case(Op, DType dt, Gen& g) {
  Case c;
  int64_t len = g.index() == 1 ? 0 : g.integer(1, 20);
  double start, step;
  if (ref::is_float(dt)) {
    start = g.integer(-12, 12) * 0.25;
    step = g.pick<double>({0.25, 0.5, -0.75, 1.5, 1.0});
  } else {
    bool non_negative = dt == DType::UInt8 || dt == DType::Bool;
    step = static_cast<double>(g.pick<int64_t>({1, 2, 3, -1, -2}));
    start = static_cast<double>(g.integer(-5, 5));
    if (non_negative) step = std::fabs(step), start = std::fabs(start);
  }
  // An end inside the last step, so the length is a true ceil.
  double end =
      start + step * static_cast<double>(len) - (len ? step * g.pick<double>({0.0, 0.5}) : 0.0);
  c.note = "start=" + num(start) + " end=" + num(end) + " step=" + num(step);
  c.call = [=](const std::vector<Tensor>&) { return arange(start, end, step, dt); };
  c.expect = [=] {
    int64_t n = static_cast<int64_t>(std::ceil((end - start) / step));
    Ref out{{n}, {}};
    for (int64_t i = 0; i < n; ++i) out.v.push_back(start + static_cast<double>(i) * step);
    return result(dt, out);
  };
  return c;
}

// The `constant` op has no function in frontend/ops.h (it comes from passes): run it as a graph
// through the interpreter.
Case constant_case(Op, DType dt, Gen& g) {
  Case c;
  Ints shape = g.case_shape();
  Ref values = g.values(dt, shape, Domain());
  c.note = "shape=" + ref::shape_text(shape);
  c.call = [=](const std::vector<Tensor>&) {
    Literal lit;
    lit.dtype = dt;
    for (double v : values.v) {
      if (ref::is_float(dt))
        lit.floats.push_back(v);
      else
        lit.ints.push_back(static_cast<int64_t>(v));
    }
    Graph graph;
    graph.add_output(graph.add_constant(lit, to_shape(shape)));
    std::vector<Array> outs = run_graph(graph, {}, {});
    return Tensor(outs.at(0));
  };
  c.expect = [=] { return result(dt, values); };
  c.not_compiled = "no public function makes a constant node: constant folding does (the pass fuzzer covers it)";
  return c;
}

// uniform / normal: random values checked statistically, plus determinism by seed.
Case random_case(Op op, DType dt, Gen& g) {
  Case c;
  bool is_uniform = op == Op::Uniform;
  Ints shape = g.index() < 2 ? g.case_shape() : Ints{40, 100};
  int64_t seed = g.integer(0, 1 << 20);
  double a = g.pick<double>({0.0, -2.0, 1.5}), b = a + g.pick<double>({1.0, 4.0, 0.5});
  c.note =
      (is_uniform ? "low=" + num(a) + " high=" + num(b) : "mean=" + num(a) + " std=" + num(b - a)) +
      " seed=" + std::to_string(seed) + " shape=" + ref::shape_text(shape);
  auto make = [=](int64_t s) {
    SymShape ss(shape.begin(), shape.end());
    return is_uniform ? uniform(ss, s, a, b, dt) : normal(ss, s, a, b - a, dt);
  };
  c.traced = [=](const std::vector<Tensor>&) { return make(seed); };
  c.call = [=](const std::vector<Tensor>&) {
    Tensor t = make(seed);
    std::vector<double> v = read(t.array());
    auto fail = [&](const std::string& what) -> Tensor { EMBER_THROW(Runtime, "[sweep] ", what); };
    if (v != read(make(seed).array())) return fail("the same seed gave different values");
    if (v.size() > 1 && v == read(make(seed + 1).array()))
      return fail("different seeds gave the same values");
    double total = 0, sq = 0;
    for (double x : v) {
      if (!std::isfinite(x)) return fail("a non-finite value " + num(x));
      if (is_uniform && (x < a || x > b || (dt == DType::Float64 && x == b)))
        return fail("value " + num(x) + " out of range");
      total += x;
    }
    if (v.size() >= 1000) {
      double n = static_cast<double>(v.size()), m = total / n;
      for (double x : v) sq += (x - m) * (x - m);
      double sd = std::sqrt(sq / (n - 1));
      double want_m = is_uniform ? (a + b) / 2 : a,
             want_sd = is_uniform ? (b - a) / std::sqrt(12.0) : b - a;
      // 4000 draws: the sample mean within 6 standard errors (a fair generator misses once in
      // 5e8), the sd within 8% (7 standard errors for normal, 11 for uniform).
      if (std::fabs(m - want_m) > 6 * want_sd / std::sqrt(n))
        return fail("mean " + num(m) + ", expected " + num(want_m));
      if (std::fabs(sd - want_sd) > 0.08 * want_sd)
        return fail("std " + num(sd) + ", expected " + num(want_sd));
    }
    return t;
  };
  c.expect = [=] {
    Expected e = result(dt, {shape, {}});
    e.check_values = false;  // checked statistically in the call
    return e;
  };
  return c;
}

TEST_CASE("op sweep: creation, random and constants", "[sweep]") {
  sweep_family("creation");
}

TEST_CASE("op sweep: the creation functions infer PyTorch's default dtypes", "[sweep]") {
  CHECK(full({2}, 1.5).dtype() == DType::Float32);
  CHECK(full({2}, 3).dtype() == DType::Int64);
  CHECK(full({2}, true).dtype() == DType::Bool);
  CHECK(zeros({2}).dtype() == DType::Float32);
  CHECK(ones({2}).dtype() == DType::Float32);
  CHECK(arange(5).dtype() == DType::Int64);
  CHECK(arange(5).shape() == std::vector<int64_t>{5});
  CHECK(arange(0, 2.5, 0.5).dtype() == DType::Float32);
  CHECK(arange(0, 2.5, 0.5).to_vector() == std::vector<double>{0, 0.5, 1, 1.5, 2});
  CHECK(uniform({2}, 0).dtype() == DType::Float32);
  CHECK(normal({2}, 0).dtype() == DType::Float32);
}

}  // namespace ember::sweep

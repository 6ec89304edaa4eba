// The op sweep of elementwise ops: unary, cast, binary, where and clamp, over every dtype.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "frontend/ops.h"
#include "tests/catch.h"
#include "tests/unit/sweep.h"
#include "tests/unit/sweep_elementwise.h"

namespace ember::sweep {
namespace {

// Input domains that keep each op well conditioned and inside its domain.
Domain ew_domain(Op op, int operand) {
  switch (op) {
    case Op::Exp:
    case Op::Exp2:
    case Op::Expm1:
      return dom(-4, 4, -5, 5);
    case Op::Log:
    case Op::Log2:
    case Op::Sqrt:
    case Op::Rsqrt:
      return dom(0.05, 6, 1, 30);
    case Op::Log1p:
      return dom(-0.9, 6, 0, 30);
    case Op::Sin:
    case Op::Cos:
      return dom(-6, 6, -6, 6);
    case Op::Tan:
      return dom(-1.4, 1.4, -3, 3);  // away from the poles at +-pi/2
    case Op::Tanh:
    case Op::Sigmoid:
    case Op::Gelu:
    case Op::Silu:
    case Op::Erf:
      return dom(-4, 4, -5, 5);
    case Op::Reciprocal:
      return nonzero(Domain());
    case Op::Div:
      return operand == 1 ? nonzero(Domain()) : Domain();
    case Op::FloorDivide:
    case Op::Remainder:
      return operand == 1 ? nonzero(dom(-3, 3, -7, 7)) : dom(-3, 3, -30, 30);
    case Op::Pow:
      return operand == 0 ? dom(0.1, 3, -4, 4) : dom(-2, 2, 0, 4);
    case Op::Floor:
    case Op::Ceil:
    case Op::Round:
    case Op::Trunc: {
      Domain d = dom(-4, 4, -20, 20);
      d.quantum = 0.125;  // hits the .5 ties of round
      return d;
    }
    case Op::IsNan:
    case Op::IsInf: {
      Domain d;
      d.specials = 0.25;
      return d;
    }
    case Op::Abs:
    case Op::Neg:
    case Op::Sign:
    case Op::Relu:
    case Op::LogicalNot:
    case Op::Maximum:
    case Op::Minimum:
    case Op::Eq:
    case Op::Ne:
    case Op::Lt:
    case Op::Le:
    case Op::Gt:
    case Op::Ge:
    case Op::LogicalAnd:
    case Op::LogicalOr:
    case Op::LogicalXor:
      return coarse();  // zeros and ties
    case Op::Cast:
      return dom(-300, 300, -300, 300);
    default:
      return Domain();
  }
}

// Operand shapes of an n-ary elementwise case: case 2 broadcasts a 0-d operand, case 3 size-1
// dims on both sides.
std::vector<Ints> ew_shapes(Gen& g, int n) {
  Ints out = g.case_shape();
  std::vector<Ints> shapes(n, out);
  if (n == 1) return shapes;
  if (g.index() == 2) {
    shapes[n - 1] = {};
    return shapes;
  }
  if (g.index() == 3 && !out.empty()) {
    shapes[0][g.integer(0, static_cast<int64_t>(out.size()) - 1)] = 1;
    for (int k = 1; k < n; ++k) shapes[k] = g.broadcast_operand(out);
    return shapes;
  }
  for (int k = 0; k < n; ++k)
    if (g.coin(0.4)) shapes[k] = g.broadcast_operand(out);
  return shapes;
}

// A Python number of the tensor's own kind inside `d`, exact in every dtype of that kind.
Scalar number_in(Gen& g, DType dt, const Domain& d) {
  if (dt == DType::Bool) return Scalar(g.value(DType::Bool, d) != 0);
  if (!ref::is_float(dt)) return Scalar(static_cast<int64_t>(g.value(dt, d)));
  while (true) {
    double v = std::round(g.real(d.lo, d.hi) * 4) / 4 + 0.0;
    if (v >= d.lo && v <= d.hi && std::fabs(v) >= d.min_abs && (v != 0 || d.min_abs == 0))
      return Scalar(v);
  }
}

}  // namespace

Case elementwise(Op op, DType dt, Gen& g) {
  Case c;
  int n = arity(op);
  std::vector<Ints> shapes = ew_shapes(g, n);
  int variant = op == Op::Gelu ? g.index() % 2 : 0;
  DType cast_to = kAllDTypes[g.index() % kNumDTypes];
  std::vector<DType> dts(n, dt);
  if (op == Op::Where) dts[0] = DType::Bool;
  // Cases 4 and 5 of binary ops pass a Python number on one side.
  if (n == 2 && (g.index() == 4 || g.index() == 5)) {
    bool first = g.index() == 5;
    Scalar s = number_in(g, dt, ew_domain(op, first ? 0 : 1));
    DType sdt = scalar_dtype(dt, s);
    Ref sref{{}, {ref::cast_value(s.to_double(), sdt)}};
    c.inputs.push_back(g.input(dt, shapes[0], ew_domain(op, first ? 1 : 0)));
    Ref tref = c.inputs[0].ref;
    c.note = std::string("number ") + (first ? "first: " : "second: ") + num(s.to_double());
    c.call = [op, s, first](const std::vector<Tensor>& t) {
      return first ? call_binary(op, s, t[0]) : call_binary(op, t[0], s);
    };
    c.expect = [=] {
      std::vector<Ref> refs = first ? std::vector<Ref>{sref, tref} : std::vector<Ref>{tref, sref};
      std::vector<DType> types = first ? std::vector<DType>{sdt, dt} : std::vector<DType>{dt, sdt};
      return ew_expect(op, refs, types, variant, cast_to);
    };
    return c;
  }
  // Cases 4 and 5 of where pass a Python number as one of the values.
  if (op == Op::Where && (g.index() == 4 || g.index() == 5)) {
    bool first = g.index() == 5;
    Scalar s = number_in(g, dt, Domain());
    DType sdt = scalar_dtype(dt, s);
    Ref sref{{}, {ref::cast_value(s.to_double(), sdt)}};
    c.inputs.push_back(g.input(DType::Bool, shapes[0], Domain()));
    c.inputs.push_back(g.input(dt, shapes[1], Domain()));
    Ref cond = c.inputs[0].ref, tref = c.inputs[1].ref;
    c.note = std::string("number ") + (first ? "a: " : "b: ") + num(s.to_double());
    c.call = [s, first](const std::vector<Tensor>& t) {
      return first ? where(t[0], s, t[1]) : where(t[0], t[1], s);
    };
    c.expect = [=] {
      std::vector<Ref> refs =
          first ? std::vector<Ref>{cond, sref, tref} : std::vector<Ref>{cond, tref, sref};
      std::vector<DType> types = first ? std::vector<DType>{DType::Bool, sdt, dt}
                                       : std::vector<DType>{DType::Bool, dt, sdt};
      return ew_expect(op, refs, types, 0, dt);
    };
    return c;
  }
  // Cases 16-19 of clamp give one or both bounds as numbers; a missing bound never changes x.
  if (op == Op::Clamp && g.index() >= 16) {
    std::optional<Scalar> lo, hi;
    if (g.index() != 17)
      lo = dt == DType::Bool   ? Scalar(false)
           : ref::is_float(dt) ? Scalar(-0.5)
                               : Scalar(int64_t{1});
    if (g.index() != 16)
      hi = dt == DType::Bool ? Scalar(true) : ref::is_float(dt) ? Scalar(1.5) : Scalar(int64_t{7});
    c.inputs.push_back(g.input(dt, shapes[0], Domain()));
    Ref x = c.inputs[0].ref;
    c.note = "min=" + (lo ? num(lo->to_double()) : "none") +
             " max=" + (hi ? num(hi->to_double()) : "none");
    c.call = [lo, hi](const std::vector<Tensor>& t) { return clamp(t[0], lo, hi); };
    c.expect = [=] {
      Expected e = result(dt, x);
      for (double& v : e.out.v)
        v = std::min(std::max(v, lo ? lo->to_double() : -ref::kInf),
                     hi ? hi->to_double() : ref::kInf);
      return e;
    };
    return c;
  }
  // Clamp's tensor bounds do not cross, but for cases 14 and 15 of two dtypes, which cross them
  // on purpose (sub-case clamp[min>max]).
  bool cross = op == Op::Clamp && (g.index() == 14 || g.index() == 15) &&
               (dt == DType::Float32 || dt == DType::Int64);
  for (int k = 0; k < n; ++k) {
    Domain d = ew_domain(op, k);
    if (op == Op::Clamp && k > 0)
      d = (k == 1) != cross ? dom(-3, 0.5, -20, 3) : dom(0.75, 3, 4, 20);
    if (op == Op::Clamp && k == 1 && dt == DType::Bool) {  // min false: bool bounds cannot cross
      c.inputs.push_back(
          g.input_of(dt, Ref{shapes[k], std::vector<double>(ref::numel(shapes[k]), 0.0)}));
      continue;
    }
    c.inputs.push_back(g.input(dts[k], shapes[k], d));
  }
  if (op == Op::Gelu) c.note = variant ? "approximate=tanh" : "approximate=none";
  if (op == Op::Cast) c.note = "dtype=" + dname(cast_to);
  if (op == Op::Clamp) {
    // Tensor bounds may cross (min > max): PyTorch then gives max.
    bool crossed = false;
    Ints shape = c.inputs[0].ref.shape;
    for (size_t k = 1; k < 3; ++k) shape = *ref::broadcast(shape, c.inputs[k].ref.shape);
    for (int64_t i = 0; i < ref::numel(shape); ++i) {
      Ints idx = ref::unravel(i, shape);
      crossed = crossed ||
                ref::at_broadcast(c.inputs[1].ref, idx) > ref::at_broadcast(c.inputs[2].ref, idx);
    }
    if (crossed) c.variant = "clamp[min>max]";
  }
  std::vector<Ref> refs;
  for (const Input& in : c.inputs) refs.push_back(in.ref);
  c.call = [op, variant, cast_to](const std::vector<Tensor>& t) -> Tensor {
    if (t.size() == 1) return call_unary(op, t[0], variant, cast_to);
    if (t.size() == 2) return call_binary(op, t[0], t[1]);
    if (op == Op::Where) return where(t[0], t[1], t[2]);
    return clamp(t[0], t[1], t[2]);
  };
  c.expect = [=] { return ew_expect(op, refs, dts, variant, cast_to); };
  return c;
}

TEST_CASE("op sweep: unary elementwise and cast", "[sweep]") {
  sweep_family("unary");
}
TEST_CASE("op sweep: binary and ternary elementwise", "[sweep]") {
  sweep_family("binary");
}

}  // namespace ember::sweep

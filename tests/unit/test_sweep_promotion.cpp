// The op sweep of type promotion: mixed dtypes, 0-d tensors and Python numbers vs result_type.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "frontend/ops.h"
#include "tests/catch.h"
#include "tests/unit/reference_movement.h"
#include "tests/unit/sweep.h"
#include "tests/unit/sweep_elementwise.h"

namespace ember::sweep {
namespace {

// Mixed dtypes: an op on (a, b) of every pair of dtypes, b dimensioned or 0-d, and Python numbers
// of each kind, against PyTorch's result_type.
Case mixed_case(Op op, DType a, DType b, int form, Gen& g) {
  Case c;
  Domain d = coarse();
  Ints sa = {3, 4}, sb = form == 1 ? Ints{} : Ints{4};
  if (op == Op::Concat) {
    c.inputs.push_back(g.input(a, sa, d));
    c.inputs.push_back(g.input(b, {form == 1 ? 1 : 2, 4}, d));
    std::vector<Ref> r{c.inputs[0].ref, c.inputs[1].ref};
    c.call = [](const std::vector<Tensor>& t) { return concat(t, 0); };
    c.expect = [=] {
      DType out = ref::promote(a, b);
      std::vector<Ref> cast = r;
      for (Ref& x : cast)
        for (double& v : x.v) v = ref::cast_value(v, out);
      return result(out, ref::concat(cast, 0));
    };
    return c;
  }
  if (op == Op::Where) c.inputs.push_back(g.input(DType::Bool, sa, d));
  c.inputs.push_back(g.input(a, sa, d));
  // A negative 0-d signed integer next to a uint8 tensor converts to the uint8 result dtype
  // (-2 -> 254) before the op runs.
  bool narrowing = a == DType::UInt8 && ref::is_int(b) && b != DType::UInt8 && form == 1;
  if (narrowing) c.variant = "promotion[negative 0-d int with uint8]";
  if (narrowing) {
    c.inputs.push_back(g.input_of(b, Ref{{}, {-2.0}}));
    if (op == Op::Clamp) c.inputs.push_back(g.input(b, sb, dom(0, 2, 0, 3)));
  } else if (op == Op::Clamp &&
             b == DType::Bool) {  // false <= x <= random: bounds that never cross
    c.inputs.push_back(g.input_of(b, Ref{sb, std::vector<double>(ref::numel(sb), 0.0)}));
    c.inputs.push_back(g.input(b, sb, d));
  } else if (op == Op::Clamp) {
    c.inputs.push_back(g.input(b, sb, dom(-2, 0, -3, 0)));
    c.inputs.push_back(g.input(b, sb, dom(0, 2, 0, 3)));
  } else {
    c.inputs.push_back(g.input(b, sb, op == Op::Div ? nonzero(d) : d));
  }
  std::vector<Ref> refs;
  std::vector<DType> dts;
  for (const Input& in : c.inputs) refs.push_back(in.ref), dts.push_back(in.dtype);
  c.call = [op](const std::vector<Tensor>& t) -> Tensor {
    if (op == Op::Where) return where(t[0], t[1], t[2]);
    if (op == Op::Clamp) return clamp(t[0], t[1], t[2]);
    return call_binary(op, t[0], t[1]);
  };
  c.expect = [=] { return ew_expect(op, refs, dts, 0, DType::Float32); };
  return c;
}

Case number_case(Op op, DType a, const Scalar& s, bool first, Gen& g) {
  Case c;
  c.inputs.push_back(g.input(a, {2, 3}, coarse()));
  Ref x = c.inputs[0].ref;
  DType sdt = scalar_dtype(a, s);
  Ref sref{{}, {ref::cast_value(s.to_double(), sdt)}};
  c.note = std::string("number ") +
           (s.is_float()  ? "float "
            : s.is_bool() ? "bool "
                          : "int ") +
           num(s.to_double()) + (first ? " first" : " second");
  c.call = [=](const std::vector<Tensor>& t) {
    return first ? call_binary(op, s, t[0]) : call_binary(op, t[0], s);
  };
  c.expect = [=] {
    return first ? ew_expect(op, {sref, x}, {sdt, a}, 0, DType::Float32)
                 : ew_expect(op, {x, sref}, {a, sdt}, 0, DType::Float32);
  };
  return c;
}

}  // namespace

TEST_CASE("op sweep: type promotion of mixed dtypes and Python numbers", "[sweep]") {
  std::map<std::pair<std::string, DType>, Outcome> outcomes;
  for (Op op : {Op::Add, Op::Mul, Op::Div, Op::Maximum, Op::Lt, Op::Where, Op::Clamp, Op::Concat}) {
    std::string name = op_text(op) + "[mixed]";
    for (DType a : kAllDTypes) {
      outcomes[{name, a}];
      for (DType b : kAllDTypes)
        for (int form = 0; form < 2; ++form) {
          uint64_t seed = case_seed(name + dname(b), a, form);
          Gen g(seed, form + 6);
          Case c = mixed_case(op, a, b, form, g);
          std::string variant = c.variant.empty() ? name : c.variant;
          run_case(c, header(name, a, form, seed) + " with " + dname(b) + (form ? " 0-d" : ""),
                   outcomes[{variant, a}]);
        }
    }
  }
  for (const auto& [key, outcome] : outcomes) report(key.first, key.second, outcome, 1);
  for (Op op : {Op::Add, Op::Mul, Op::Div, Op::Maximum, Op::Lt}) {
    std::string name = op_text(op) + "[number]";
    for (DType a : kAllDTypes) {
      Outcome o;
      int i = 0;
      for (const Scalar& s : {Scalar(int64_t{2}), Scalar(0.5), Scalar(true), Scalar(int64_t{-1})})
        for (bool first : {false, true}) {
          uint64_t seed = case_seed(name, a, i);
          Gen g(seed, i++);
          if (op == Op::Div && s.to_double() == 0) continue;
          run_case(number_case(op, a, s, first, g), header(name, a, i, seed), o);
        }
      report(name, a, o, 8);
    }
  }
}

}  // namespace ember::sweep

// The op sweep of reductions: sum, mean, prod, max, min, argmax, argmin, var, std, logsumexp.
#include <algorithm>
#include <string>
#include <vector>

#include "frontend/ops.h"
#include "tests/catch.h"
#include "tests/unit/reference_reduce.h"
#include "tests/unit/sweep.h"

namespace ember::sweep {
namespace {

ref::Reduce reduce_kind(Op op) {
  switch (op) {
    case Op::Sum:
      return ref::Reduce::Sum;
    case Op::Mean:
      return ref::Reduce::Mean;
    case Op::Prod:
      return ref::Reduce::Prod;
    case Op::Max:
      return ref::Reduce::Max;
    case Op::Min:
      return ref::Reduce::Min;
    case Op::ArgMax:
      return ref::Reduce::ArgMax;
    case Op::ArgMin:
      return ref::Reduce::ArgMin;
    case Op::Var:
      return ref::Reduce::Var;
    case Op::Std:
      return ref::Reduce::Std;
    case Op::LogSumExp:
      return ref::Reduce::LogSumExp;
    default:
      unlisted(op, "reduction kinds");
  }
}

}  // namespace

Case reduction(Op op, DType dt, Gen& g) {
  Case c;
  Ints shape = g.case_shape();
  bool big = g.index() == kCases;  // the one > 4096-element case (float16/bfloat16 sum and mean)
  if (big) shape = {5000};
  Domain d = Domain();
  if (op == Op::Prod) d = dom(0.5, 1.5, -2, 2);
  if (op == Op::Max || op == Op::Min || op == Op::ArgMax || op == Op::ArgMin) d = coarse();
  if (op == Op::LogSumExp) d = dom(-4, 4, -5, 5);
  if (big) d = dom(0, 1, 0, 1);
  c.inputs.push_back(g.input(dt, shape, d));
  int64_t rank = static_cast<int64_t>(shape.size());
  Ints axes;
  if (rank == 0 && g.coin()) axes = {g.coin() ? 0 : -1};  // a 0-d tensor accepts axis 0 and -1
  for (int64_t i = 0; i < rank && !big; ++i)
    if (g.coin(0.4)) axes.push_back(g.coin() ? i : i - rank);
  std::shuffle(axes.begin(), axes.end(), g.rng());
  bool keepdim = g.coin();
  double correction = g.pick<double>({0.0, 1.0, 2.0});  // 2 can leave no degree of freedom
  c.note = "axes=" + ref::shape_text(axes) + " keepdim=" + std::to_string(keepdim);
  if (op == Op::Var || op == Op::Std) c.note += " correction=" + num(correction);
  Ref x = c.inputs[0].ref;
  c.call = [=](const std::vector<Tensor>& t) {
    switch (op) {
      case Op::Sum:
        return sum(t[0], axes, keepdim);
      case Op::Mean:
        return mean(t[0], axes, keepdim);
      case Op::Prod:
        return prod(t[0], axes, keepdim);
      case Op::Max:
        return max(t[0], axes, keepdim);
      case Op::Min:
        return min(t[0], axes, keepdim);
      case Op::ArgMax:
        return argmax(t[0], axes, keepdim);
      case Op::ArgMin:
        return argmin(t[0], axes, keepdim);
      case Op::Var:
        return var(t[0], axes, correction, keepdim);
      case Op::Std:
        return ember::std(t[0], axes, correction, keepdim);
      case Op::LogSumExp:
        return logsumexp(t[0], axes, keepdim);
      default:
        unlisted(op, "reduction calls");
    }
  };
  c.expect = [=] {
    Expected e;
    Ints norm;
    for (int64_t a : axes) norm.push_back(ref::norm_axis(a, rank));
    bool is_int = !ref::is_float(dt);
    switch (op) {
      case Op::Sum:
      case Op::Prod:
        e.dtype = is_int ? DType::Int64 : dt;
        break;
      case Op::ArgMax:
      case Op::ArgMin:
        e.dtype = DType::Int64;
        break;
      case Op::Max:
      case Op::Min:
        e.dtype = dt;
        break;
      case Op::Mean:
      case Op::Var:
      case Op::Std:
      case Op::LogSumExp:
        e.dtype = is_int ? DType::Float32 : dt;
        break;
      default:
        unlisted(op, "reduction dtypes");
    }
    bool needs_elements = op == Op::Max || op == Op::Min || op == Op::ArgMax || op == Op::ArgMin;
    for (int64_t a = 0; a < rank; ++a) {
      bool reduced = norm.empty() || std::find(norm.begin(), norm.end(), a) != norm.end();
      if (needs_elements && reduced && shape[a] == 0) e.error = ErrorKind::Value;
    }
    if (e.error) return e;
    e.out = ref::reduce(reduce_kind(op), x, norm, keepdim, is_int, correction);
    e.big_reduction = big;
    return e;
  };
  return c;
}

TEST_CASE("op sweep: reductions", "[sweep]") {
  sweep_family("reduction");
}

}  // namespace ember::sweep

// The op sweep of the ops with several outputs: max_dim, min_dim, var_mean, sort, topk, split and
// the native norms. Every output is checked (dtype, shape, values) against reference_multi.h.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "frontend/ops.h"
#include "tests/catch.h"
#include "tests/unit/reference_multi.h"
#include "tests/unit/reference_reduce.h"
#include "tests/unit/sweep.h"

namespace ember::sweep {
namespace {

// Small values on a grid (ties) and, for floats, some NaN and infinities.
Domain with_ties(DType dt) {
  Domain d = coarse();
  if (ref::is_float(dt)) d.specials = 0.1;
  return d;
}

// An axis of a rank-r tensor (0 or -1 for 0-d), sometimes negative.
int64_t random_axis(Gen& g, int64_t rank) {
  int64_t r = std::max<int64_t>(rank, 1);
  int64_t a = g.integer(0, r - 1);
  return g.coin(0.3) ? a - r : a;
}

template <class... T>
std::vector<Tensor> list(const std::tuple<T...>& t) {
  return std::apply([](const auto&... x) { return std::vector<Tensor>{x...}; }, t);
}

}  // namespace

Case extreme_case(Op op, DType dt, Gen& g) {
  Case c;
  Ints shape = g.case_shape();
  int64_t rank = static_cast<int64_t>(shape.size()), axis = random_axis(g, rank);
  bool keepdim = g.coin(), largest = op == Op::MaxDim;
  c.inputs.push_back(g.input(dt, shape, with_ties(dt)));
  Ref x = c.inputs[0].ref;
  c.note = "axis=" + std::to_string(axis) + " keepdim=" + std::to_string(keepdim);
  c.call_multi = [=](const std::vector<Tensor>& t) {
    return list(largest ? max_dim(t[0], axis, keepdim) : min_dim(t[0], axis, keepdim));
  };
  c.expect = [=] {
    int64_t a = ref::norm_axis(axis, rank);
    if (rank > 0 && shape[a] == 0) return raises(ErrorKind::Value);
    return results({dt, DType::Int64}, ref::extreme_along(x, a, keepdim, largest));
  };
  return c;
}

Case var_mean_case(Op, DType dt, Gen& g) {
  Case c;
  Ints shape = g.case_shape();
  int64_t rank = static_cast<int64_t>(shape.size());
  Ints axes;
  for (int64_t i = 0; i < rank; ++i)
    if (g.coin(0.4)) axes.push_back(g.coin() ? i : i - rank);
  bool keepdim = g.coin();
  double correction = g.pick<double>({0.0, 1.0, 2.0});
  c.inputs.push_back(g.input(dt, shape, Domain()));
  Ref x = c.inputs[0].ref;
  c.note = "axes=" + ref::shape_text(axes) + " keepdim=" + std::to_string(keepdim) +
           " correction=" + num(correction);
  c.call_multi = [=](const std::vector<Tensor>& t) {
    return list(var_mean(t[0], axes, correction, keepdim));
  };
  c.expect = [=] {
    Ints norm;
    for (int64_t a : axes) norm.push_back(ref::norm_axis(a, rank));
    std::sort(norm.begin(), norm.end());
    DType out = ref::is_float(dt) ? dt : DType::Float32;
    return results({out, out},
                   {ref::reduce(ref::Reduce::Var, x, norm, keepdim, false, correction),
                    ref::reduce(ref::Reduce::Mean, x, norm, keepdim, false, correction)});
  };
  return c;
}

Case sort_case(Op op, DType dt, Gen& g) {
  Case c;
  Ints shape = g.case_shape();
  int64_t rank = static_cast<int64_t>(shape.size()), axis = random_axis(g, rank);
  int64_t n = rank ? shape[ref::norm_axis(axis, rank)] : 1;
  bool flag = g.coin(), order = g.coin();  // sort: descending, stable; topk: largest, sorted
  int64_t k = rank ? g.integer(0, n) : 1;
  c.inputs.push_back(g.input(dt, shape, with_ties(dt)));
  Ref x = c.inputs[0].ref;
  bool is_sort = op == Op::Sort;
  c.note = "axis=" + std::to_string(axis);
  if (is_sort)
    c.note += " descending=" + std::to_string(flag) + " stable=" + std::to_string(order);
  else
    c.note += " k=" + std::to_string(k) + " largest=" + std::to_string(flag) +
              " sorted=" + std::to_string(order);
  c.call_multi = [=](const std::vector<Tensor>& t) {
    return list(is_sort ? sort(t[0], axis, flag, order) : topk(t[0], k, axis, flag, order));
  };
  c.expect = [=] {
    int64_t a = ref::norm_axis(axis, rank);
    return results({dt, DType::Int64},
                   is_sort ? ref::sort(x, a, flag) : ref::topk(x, k, a, flag, order));
  };
  return c;
}

Case split_case(Op, DType dt, Gen& g) {
  Case c;
  Ints shape = g.case_shape();
  int64_t rank = static_cast<int64_t>(shape.size()), axis = random_axis(g, rank);
  int64_t n = rank ? shape[ref::norm_axis(axis, rank)] : 0;
  Ints sizes;  // a random partition of n into 1 to 4 parts, zeros allowed
  for (int64_t parts = g.integer(1, 4), left = n; parts > 0; --parts) {
    int64_t s = parts == 1 ? left : g.integer(0, left);
    sizes.push_back(s);
    left -= s;
  }
  c.inputs.push_back(g.input(dt, shape, Domain()));
  c.shares_storage = true;
  Ref x = c.inputs[0].ref;
  c.note = "sizes=" + ref::shape_text(sizes) + " axis=" + std::to_string(axis);
  c.call_multi = [=](const std::vector<Tensor>& t) { return split(t[0], sizes, axis); };
  c.expect = [=] {
    if (rank == 0) return raises(ErrorKind::Value);
    return results(std::vector<DType>(sizes.size(), dt),
                   ref::split(x, sizes, ref::norm_axis(axis, rank)));
  };
  return c;
}

Case native_layer_norm_case(Op, DType dt, Gen& g) {
  Case c;
  Ints shape = g.case_shape();
  int64_t rank = static_cast<int64_t>(shape.size());
  int64_t ndim = rank ? g.integer(1, std::min<int64_t>(rank, 3)) : 0;
  Ints normalized(shape.end() - ndim, shape.end());
  bool weight = g.coin(0.7), bias = g.coin(0.7);
  double eps = g.pick<double>({1e-5, 1e-3, 0.1});
  c.inputs.push_back(g.input(dt, shape, Domain()));
  if (weight) c.inputs.push_back(g.input(dt, normalized, dom(-2, 2, -2, 2)));
  if (bias) c.inputs.push_back(g.input(dt, normalized, dom(-1, 1, -2, 2)));
  std::vector<Ref> r;
  for (const Input& in : c.inputs) r.push_back(in.ref);
  c.note = "normalized_shape=" + ref::shape_text(normalized) + (weight ? " weight" : "") +
           (bias ? " bias" : "") + " eps=" + num(eps);
  c.call_multi = [=](const std::vector<Tensor>& t) {
    std::optional<Tensor> w, b;
    if (weight) w = t[1];
    if (bias) b = t[weight ? 2 : 1];
    SymShape ns(normalized.begin(), normalized.end());
    return list(native_layer_norm(t[0], ns, w, b, eps));
  };
  c.expect = [=] {
    if (rank == 0) return raises(ErrorKind::Value);  // normalized_shape must name >= 1 dim
    int64_t count = ref::numel(normalized);
    Ref w = weight ? r[1] : Ref{normalized, std::vector<double>(count, 1.0)};
    Ref b = bias ? r[weight ? 2 : 1] : Ref{normalized, std::vector<double>(count, 0.0)};
    return results({dt, dt, dt}, ref::native_layer_norm(r[0], ndim, w, b, eps));
  };
  return c;
}

Case native_batch_norm_case(Op, DType dt, Gen& g) {
  Case c;
  Ints shape = g.shape(2, 4, 4);
  if (g.index() == 0) shape = {3};          // rank < 2
  if (g.index() == 1) shape[0] = 0;         // no values per channel
  if (g.index() == 2) shape = {1, 3, 1};    // one value per channel
  int64_t C = shape.size() > 1 ? shape[1] : shape[0];
  bool weight = g.coin(0.7), bias = g.coin(0.7);
  double eps = g.pick<double>({1e-5, 1e-3}), momentum = g.pick<double>({0.1, 0.5, 0.0});
  c.inputs.push_back(g.input(dt, shape, Domain()));
  c.inputs.push_back(g.input(dt, {C}, dom(-1, 1, -2, 2)));   // running_mean
  c.inputs.push_back(g.input(dt, {C}, dom(0.25, 2, 1, 4)));  // running_var
  if (weight) c.inputs.push_back(g.input(dt, {C}, dom(-2, 2, -2, 2)));
  if (bias) c.inputs.push_back(g.input(dt, {C}, dom(-1, 1, -2, 2)));
  std::vector<Ref> r;
  for (const Input& in : c.inputs) r.push_back(in.ref);
  c.note = std::string(weight ? "weight " : "") + (bias ? "bias " : "") + "eps=" + num(eps) +
           " momentum=" + num(momentum);
  c.call_multi = [=](const std::vector<Tensor>& t) {
    std::optional<Tensor> w, b;
    if (weight) w = t[3];
    if (bias) b = t[weight ? 4 : 3];
    return list(native_batch_norm(t[0], w, b, t[1], t[2], momentum, eps));
  };
  c.expect = [=] {
    if (shape.size() < 2 || ref::numel(shape) / C < 2) return raises(ErrorKind::Value);
    Ref w = weight ? r[3] : Ref{{C}, std::vector<double>(C, 1.0)};
    Ref b = bias ? r[weight ? 4 : 3] : Ref{{C}, std::vector<double>(C, 0.0)};
    return results({dt, dt, dt, dt, dt},
                   ref::native_batch_norm(r[0], w, b, r[1], r[2], momentum, eps));
  };
  return c;
}

TEST_CASE("op sweep: multi-output ops", "[sweep]") {
  sweep_family("multi-output");
}

}  // namespace ember::sweep

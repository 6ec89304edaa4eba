// The op sweep of composites: softmax, log_softmax, layer/rms/batch norm and attention.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "frontend/ops.h"
#include "tests/catch.h"
#include "tests/unit/reference_composites.h"
#include "tests/unit/sweep.h"

namespace ember::sweep {
namespace {

// torch.finfo(dtype).eps, the default eps of rms_norm.
double machine_eps(DType t) {
  switch (t) {
    case DType::Float16:
      return 0x1p-10;
    case DType::BFloat16:
      return 0x1p-7;
    case DType::Float64:
      return 0x1p-52;
    default:
      return 0x1p-23;
  }
}

}  // namespace

Case softmax_case(Op op, DType dt, Gen& g) {
  if (op != Op::Softmax && op != Op::LogSoftmax) unlisted(op, "softmax cases");
  Case c;
  Ints shape = g.case_shape();
  int64_t rank = static_cast<int64_t>(shape.size());
  int64_t axis = rank ? g.integer(-rank, rank - 1) : g.pick<int64_t>({0, -1});
  bool log = op == Op::LogSoftmax;
  c.inputs.push_back(g.input(dt, shape, dom(-4, 4, -5, 5)));
  Ref x = c.inputs[0].ref;
  c.note = "axis=" + std::to_string(axis);
  c.call = [=](const std::vector<Tensor>& t) {
    return log ? log_softmax(t[0], axis) : softmax(t[0], axis);
  };
  c.expect = [=] {
    return result(ref::is_float(dt) ? dt : DType::Float32,
                  ref::softmax(x, ref::norm_axis(axis, rank), log));
  };
  return c;
}

Case norm_case(Op op, DType dt, Gen& g) {
  if (op != Op::LayerNorm && op != Op::RmsNorm) unlisted(op, "norm cases");
  Case c;
  bool rms = op == Op::RmsNorm;
  Ints shape = g.case_shape();
  int64_t rank = static_cast<int64_t>(shape.size());
  int64_t ndim = rank ? g.integer(1, std::min<int64_t>(rank, 3)) : 0;
  Ints normalized(shape.end() - ndim, shape.end());
  bool weight = g.coin(0.7), bias = !rms && g.coin(0.7);
  std::optional<double> eps;
  if (!rms || g.coin()) eps = g.pick<double>({1e-5, 1e-3, 0.1});
  c.inputs.push_back(g.input(dt, shape, Domain()));
  if (weight) c.inputs.push_back(g.input(dt, normalized, dom(-2, 2, -2, 2)));
  if (bias) c.inputs.push_back(g.input(dt, normalized, dom(-1, 1, -2, 2)));
  std::vector<Ref> r;
  for (const Input& x : c.inputs) r.push_back(x.ref);
  c.note = "normalized_shape=" + ref::shape_text(normalized) + (weight ? " weight" : "") +
           (bias ? " bias" : "") + " eps=" + (eps ? num(*eps) : "default");
  c.call = [=](const std::vector<Tensor>& t) {
    std::optional<Tensor> w, b;
    if (weight) w = t[1];
    if (bias) b = t[weight ? 2 : 1];
    SymShape ns(normalized.begin(), normalized.end());
    return rms ? rms_norm(t[0], ns, w, eps) : layer_norm(t[0], ns, w, b, *eps);
  };
  c.expect = [=] {
    if (rank == 0) return raises(ErrorKind::Value);  // normalized_shape must name >= 1 dim
    Ref w = weight ? r[1] : Ref{normalized, std::vector<double>(ref::numel(normalized), 1.0)};
    const Ref* b = bias ? &r[weight ? 2 : 1] : nullptr;
    return result(dt, ref::norm(r[0], ndim, w, b, eps.value_or(machine_eps(dt)), rms));
  };
  return c;
}

Case batch_norm_case(Op, DType dt, Gen& g) {
  Case c;
  Ints shape = g.shape(2, 4, 4);
  if (g.index() == 1) shape[0] = 0;
  if (g.index() == 0) shape = {3};  // rank < 2: a Value error
  int64_t C = shape.size() > 1 ? shape[1] : shape[0];
  bool weight = g.coin(0.7), bias = g.coin(0.7);
  double eps = g.pick<double>({1e-5, 1e-3});
  c.inputs.push_back(g.input(dt, shape, Domain()));
  c.inputs.push_back(g.input(dt, {C}, dom(-1, 1, -2, 2)));
  c.inputs.push_back(g.input(dt, {C}, dom(0.25, 2, 1, 4)));
  if (weight) c.inputs.push_back(g.input(dt, {C}, dom(-2, 2, -2, 2)));
  if (bias) c.inputs.push_back(g.input(dt, {C}, dom(-1, 1, -2, 2)));
  std::vector<Ref> r;
  for (const Input& x : c.inputs) r.push_back(x.ref);
  c.note = std::string(weight ? "weight " : "") + (bias ? "bias " : "") + "eps=" + num(eps);
  c.call = [=](const std::vector<Tensor>& t) {
    std::optional<Tensor> w, b;
    if (weight) w = t[3];
    if (bias) b = t[weight ? 4 : 3];
    return batch_norm(t[0], t[1], t[2], w, b, eps);
  };
  c.expect = [=] {
    if (shape.size() < 2) return raises(ErrorKind::Value);
    Ref w = weight ? r[3] : Ref{{C}, std::vector<double>(C, 1.0)};
    Ref b = bias ? r[weight ? 4 : 3] : Ref{{C}, std::vector<double>(C, 0.0)};
    return result(dt, ref::batch_norm(r[0], r[1], r[2], w, b, eps));
  };
  return c;
}

Case attention_case(Op, DType dt, Gen& g) {
  Case c;
  Ints batch = g.shape(0, 2, 3);
  int64_t L = g.integer(1, 5), S = g.integer(1, 5), E = g.integer(1, 6), Ev = g.integer(1, 6);
  if (g.index() == 1) L = 0;
  if (g.index() == 2) S = 0;
  auto with = [](Ints b, int64_t r, int64_t k) {
    b.push_back(r);
    b.push_back(k);
    return b;
  };
  Domain d = dom(-1, 1, -2, 2);
  c.inputs.push_back(g.input(dt, with(g.coin(0.3) ? g.broadcast_operand(batch) : batch, L, E), d));
  Ints kb = g.coin(0.3) ? g.broadcast_operand(batch) : batch;
  while (kb.size() < c.inputs[0].ref.shape.size() - 2) kb.insert(kb.begin(), 1);
  while (kb.size() > c.inputs[0].ref.shape.size() - 2) kb.erase(kb.begin());
  c.inputs.push_back(g.input(dt, with(kb, S, E), d));
  c.inputs.push_back(g.input(dt, with(kb, S, Ev), d));
  int mask_kind = g.index() % 3;  // 0: none, 1: bool, 2: additive
  bool causal = g.coin(0.4);
  std::optional<double> scale;
  if (g.coin(0.3)) scale = 0.5;
  const Ints qs = c.inputs[0].ref.shape;  // a copy: the mask is pushed below
  Ints scores = with(*ref::broadcast(Ints(qs.begin(), qs.end() - 2), kb), L, S);
  if (mask_kind) {
    Ints ms = g.coin() ? Ints{L, S} : g.coin() ? Ints{1, S} : scores;
    if (mask_kind == 1) {
      Ref m = g.values(DType::Bool, ms, Domain());
      for (int64_t i = 0; i < ref::numel(ms); ++i)
        if (ms.back() && i % ms.back() == 0) m.v[i] = 1;  // every row attends to key 0
      c.inputs.push_back(g.input_of(DType::Bool, m));
    } else {
      c.inputs.push_back(g.input(dt, ms, dom(-2, 0, -2, 0)));
    }
  }
  std::vector<Ref> r;
  for (const Input& x : c.inputs) r.push_back(x.ref);
  c.note = std::string("mask=") +
           (mask_kind == 0   ? "none"
            : mask_kind == 1 ? "bool"
                             : "additive") +
           " causal=" + std::to_string(causal) + " scale=" + (scale ? num(*scale) : "default");
  c.call = [=](const std::vector<Tensor>& t) {
    std::optional<Tensor> m;
    if (mask_kind) m = t[3];
    return scaled_dot_product_attention(t[0], t[1], t[2], m, causal, scale);
  };
  c.expect = [=] {
    double s = scale.value_or(1.0 / std::sqrt(static_cast<double>(E)));
    return result(dt, ref::attention(r[0], r[1], r[2], mask_kind ? &r[3] : nullptr, mask_kind == 1,
                                     causal, s));
  };
  return c;
}

TEST_CASE("op sweep: composites", "[sweep]") {
  sweep_family("composite");
}

}  // namespace ember::sweep

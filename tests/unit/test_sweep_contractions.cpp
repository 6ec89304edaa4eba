// The op sweep of contractions and pools: matmul, linear, conv2d, max/avg/adaptive pools.
#include <ember/ember.h>

#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "frontend/ops.h"
#include "tests/catch.h"
#include "tests/unit/helpers.h"
#include "tests/unit/reference_contractions.h"
#include "tests/unit/sweep.h"

namespace ember::sweep {

Case matmul_case(Op, DType dt, Gen& g) {
  Case c;
  int i = g.index();
  int64_t m = g.integer(1, 5), k = g.integer(1, 8), n = g.integer(1, 5);
  Ints sa, sb;
  switch (i) {
    case 0:
      sa = {k};
      sb = {k};
      break;  // dot product: 0-d
    case 1:
      sa = {2, 0, k};
      sb = {k, n};
      break;  // zero-size
    case 2:
      sa = {m, 0};
      sb = {0, n};
      break;  // k = 0: zeros
    case 3:
      sa = {k};
      sb = {3, k, n};
      break;  // vector @ batch
    case 4:
      sa = {2, m, k};
      sb = {k};
      break;  // batch @ vector
    case 5:
      sa = {2, 1, m, k};
      sb = {3, k, n};
      break;  // broadcast batch
    case 6:
      sa = {1, m, k};
      sb = {4, k, n};
      break;
    case 7:
      sa = {m, k};
      sb = {k, n};
      break;
    default: {
      Ints batch = g.shape(0, 2, 3);
      sa = g.coin(0.2) ? Ints{} : g.broadcast_operand(batch);
      sb = g.coin(0.2) ? Ints{} : g.broadcast_operand(batch);
      // A missing m or n makes that operand 1-D, which then has no batch dims.
      if (g.coin(0.85))
        sa.push_back(m);
      else
        sa.clear();
      sa.push_back(k);
      if (g.coin(0.85))
        sb.insert(sb.end(), {k, n});
      else
        sb = {k};
    }
  }
  Domain d = dom(-1, 1, -3, 3);
  c.inputs.push_back(g.input(dt, sa, d));
  c.inputs.push_back(g.input(dt, sb, d));
  Ref a = c.inputs[0].ref, b = c.inputs[1].ref;
  c.call = [](const std::vector<Tensor>& t) { return matmul(t[0], t[1]); };
  c.expect = [=] { return result(dt, ref::matmul(a, b)); };
  return c;
}

Case linear_case(Op, DType dt, Gen& g) {
  Case c;
  int64_t in = g.integer(1, 8), out = g.integer(1, 6);
  Ints xs = g.shape(0, 3, 4);
  if (g.index() == 1) xs = {0};
  if (g.index() == 2) out = 0;
  if (g.index() == 3) in = 0;
  xs.push_back(in);
  bool bias = g.index() % 2 == 0;
  Domain d = dom(-1, 1, -3, 3);
  c.inputs.push_back(g.input(dt, xs, d));
  c.inputs.push_back(g.input(dt, {out, in}, d));
  if (bias) c.inputs.push_back(g.input(dt, {out}, d));
  c.note = bias ? "bias" : "no bias";
  std::vector<Ref> r;
  for (const Input& x : c.inputs) r.push_back(x.ref);
  c.call = [bias](const std::vector<Tensor>& t) {
    return bias ? linear(t[0], t[1], t[2]) : linear(t[0], t[1]);
  };
  c.expect = [=] { return result(dt, ref::linear(r[0], r[1], bias ? &r[2] : nullptr)); };
  return c;
}

Case conv2d_case(Op, DType dt, Gen& g) {
  Case c;
  int64_t groups, cg, og, N, H, W, KH, KW;
  ref::Window win;
  while (true) {
    groups = g.pick<int64_t>({1, 1, 2, 3});
    cg = g.integer(1, 3);
    og = g.integer(1, 3);
    N = g.index() == 1 ? 0 : g.integer(1, 2);
    H = g.integer(1, 7), W = g.integer(1, 7), KH = g.integer(1, 3), KW = g.integer(1, 3);
    win = {g.integer(1, 3), g.integer(1, 3), g.integer(0, 2),
           g.integer(0, 2), g.integer(1, 2), g.integer(1, 2)};
    if (H + 2 * win.pad_h >= win.dil_h * (KH - 1) + 1 &&
        W + 2 * win.pad_w >= win.dil_w * (KW - 1) + 1)
      break;
  }
  if (g.index() == 2) og = 0;  // no output channels
  bool bias = g.coin();
  Domain d = dom(-1, 1, -3, 3);
  c.inputs.push_back(g.input(dt, {N, groups * cg, H, W}, d));
  c.inputs.push_back(g.input(dt, {groups * og, cg, KH, KW}, d));
  if (bias) c.inputs.push_back(g.input(dt, {groups * og}, d));
  std::ostringstream note;
  note << "stride=[" << win.stride_h << "," << win.stride_w << "] padding=[" << win.pad_h << ","
       << win.pad_w << "] dilation=[" << win.dil_h << "," << win.dil_w << "] groups=" << groups
       << (bias ? " bias" : "");
  c.note = note.str();
  std::vector<Ref> r;
  for (const Input& x : c.inputs) r.push_back(x.ref);
  c.call = [=](const std::vector<Tensor>& t) {
    std::optional<Tensor> b;
    if (bias) b = t[2];
    return conv2d(t[0], t[1], b, {win.stride_h, win.stride_w}, {win.pad_h, win.pad_w},
                  {win.dil_h, win.dil_w}, groups);
  };
  c.expect = [=] {
    return result(dt, ref::conv2d(r[0], r[1], bias ? &r[2] : nullptr, win, groups));
  };
  return c;
}

Case pool_case(Op op, DType dt, Gen& g) {
  if (op != Op::MaxPool2d && op != Op::AvgPool2d && op != Op::AdaptiveAvgPool2d) unlisted(op, "pool cases");
  Case c;
  bool is_max = op == Op::MaxPool2d, adaptive = op == Op::AdaptiveAvgPool2d;
  ref::Pool p{};
  Ints shape;
  bool stride_default = false;
  Ref x;
  Domain d = is_max ? coarse() : Domain();
  int64_t oh = g.integer(1, 5), ow = g.integer(1, 5);
  while (true) {
    shape = g.coin() && g.index() != 1 ? Ints{g.integer(1, 3), g.integer(1, 8), g.integer(1, 8)}
                                       : Ints{g.index() == 1 ? 0 : g.integer(1, 2), g.integer(1, 3),
                                              g.integer(1, 8), g.integer(1, 8)};
    if (adaptive) break;
    p.kh = g.integer(1, 3), p.kw = g.integer(1, 3);
    stride_default = g.coin(0.3);
    p.win.stride_h = stride_default ? p.kh : g.integer(1, 3);
    p.win.stride_w = stride_default ? p.kw : g.integer(1, 3);
    p.win.pad_h = g.integer(0, p.kh / 2), p.win.pad_w = g.integer(0, p.kw / 2);
    p.win.dil_h = is_max ? g.integer(1, 2) : 1, p.win.dil_w = is_max ? g.integer(1, 2) : 1;
    p.ceil_mode = g.coin(), p.count_include_pad = g.coin();
    size_t r = shape.size();
    if (shape[r - 2] + 2 * p.win.pad_h < p.win.dil_h * (p.kh - 1) + 1) continue;
    if (shape[r - 1] + 2 * p.win.pad_w < p.win.dil_w * (p.kw - 1) + 1) continue;
    bool empty = false;
    Ref probe{shape, std::vector<double>(ref::numel(shape), 0.0)};
    if (ref::numel(shape) == 0) break;
    ref::pool2d(probe, is_max, p, &empty);
    if (!empty) break;
  }
  c.inputs.push_back(g.input(dt, shape, d));
  x = c.inputs[0].ref;
  std::ostringstream note;
  if (adaptive)
    note << "output_size=[" << oh << "," << ow << "]";
  else
    note << "kernel=[" << p.kh << "," << p.kw << "] stride="
         << (stride_default ? "default"
                            : "[" + std::to_string(p.win.stride_h) + "," +
                                  std::to_string(p.win.stride_w) + "]")
         << " padding=[" << p.win.pad_h << "," << p.win.pad_w << "] dilation=[" << p.win.dil_h
         << "," << p.win.dil_w << "] ceil_mode=" << p.ceil_mode
         << " count_include_pad=" << p.count_include_pad;
  c.note = note.str();
  c.call = [=](const std::vector<Tensor>& t) {
    if (adaptive) return adaptive_avg_pool2d(t[0], {oh, ow});
    Ints stride = stride_default ? Ints{} : Ints{p.win.stride_h, p.win.stride_w};
    if (is_max)
      return max_pool2d(t[0], {p.kh, p.kw}, stride, {p.win.pad_h, p.win.pad_w},
                        {p.win.dil_h, p.win.dil_w}, p.ceil_mode);
    return avg_pool2d(t[0], {p.kh, p.kw}, stride, {p.win.pad_h, p.win.pad_w}, p.ceil_mode,
                      p.count_include_pad);
  };
  c.expect = [=] {
    if (adaptive) return result(dt, ref::adaptive_avg_pool2d(x, oh, ow));
    return result(dt, ref::pool2d(x, is_max, p, nullptr));
  };
  return c;
}

TEST_CASE("op sweep: matmul, linear, conv2d and pools", "[sweep]") {
  sweep_family("contraction");
}

TEST_CASE("conv2d of a zero pad: the pad folds into the convolution's padding, four-sided if need be",
          "[passes][contraction]") {
  struct Conv {
    Ints pads;  // F.pad's: (left, right, top, bottom)
    Ints stride, padding, dilation;
    int64_t groups;
  };
  const std::vector<Conv> convs = {
      {{0, 1, 0, 1}, {2, 2}, {0, 0}, {1, 1}, 1},  // TensorFlow's "same" at stride 2
      {{1, 1, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 6},  // depthwise
      {{2, 0, 1, 3}, {1, 2}, {1, 0}, {2, 1}, 3},  // on top of the conv's own padding, dilated
      {{0, 0, 0, 0}, {1, 1}, {0, 0}, {1, 1}, 1},
  };
  for (DType dt : {DType::Float32, DType::Float64}) {
    Tensor x = uniform({2, 6, 9, 11}, 1, -1.0, 1.0, dt), b = uniform({6}, 3, -1.0, 1.0, dt);
    for (const Conv& c : convs) {
      INFO(dtype_name(dt) << ", groups " << c.groups << ", pads " << c.pads[0] << c.pads[1] << c.pads[2] << c.pads[3]);
      Tensor w = uniform({6, 6 / c.groups, 3, 3}, 2, -1.0, 1.0, dt);
      auto fn = [&](const Tensor& t) { return conv2d(pad(t, c.pads), w, b, c.stride, c.padding, c.dilation, c.groups); };
      auto f = compile(fn);
      Tensor got = f(x), want = fn(x);
      CHECK(got.shape() == want.shape());
      test::check_close(got, want, 1e-5, 1e-5);
      const GraphInfo g = f.report().graphs.at(0);
      CHECK(g.ir.find("pad(") == std::string::npos);
      // The four-sided padding itself, eager, as the pad and the convolution give it.
      Ints four{c.padding[0] + c.pads[2], c.padding[1] + c.pads[0], c.padding[0] + c.pads[3], c.padding[1] + c.pads[1]};
      test::check_close(conv2d(x, w, b, c.stride, four, c.dilation, c.groups), want, 1e-5, 1e-5);
    }
  }
  // A pad that crops, or pads with something other than zeros, or pads the channels, stays.
  Tensor x = uniform({1, 2, 5, 5}, 4), w = uniform({2, 2, 3, 3}, 5), w3 = uniform({2, 3, 3, 3}, 6);
  const std::vector<std::pair<Ints, double>> kept = {{{1, -1, 1, 1}, 0.0}, {{1, 1, 1, 1}, 0.5}, {{0, 0, 0, 0, 1, 0}, 0.0}};
  for (const auto& [pads, value] : kept) {
    auto fn = [&](const Tensor& t) { return conv2d(pad(t, pads, value), pads.size() > 4 ? w3 : w); };
    auto f = compile(fn);
    test::check_close(f(x), fn(x), 1e-5, 1e-5);
    CHECK(f.report().graphs.at(0).ir.find("pad(") != std::string::npos);
  }
  CHECK(test::error_of([&] { conv2d(x, w, std::nullopt, {1, 1}, {1, 1, 1}); }).find("2 or 4 values") != std::string::npos);
}

}  // namespace ember::sweep

// The op sweep of contractions and pools: matmul, linear, conv2d, max/avg/adaptive pools.
#include <ember/ember.h>

#include <cmath>
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

// A convolution's geometry, drawn so that its window fits the padded input.
struct ConvDraw {
  int64_t groups, cg, og, N, H, W, KH, KW;
  ref::Window win;
  std::string note() const {
    std::ostringstream s;
    s << "stride=[" << win.stride_h << "," << win.stride_w << "] padding=[" << win.pad_h << "," << win.pad_w
      << "] dilation=[" << win.dil_h << "," << win.dil_w << "] groups=" << groups;
    return s.str();
  }
};

ConvDraw draw_conv(Gen& g) {
  ConvDraw c;
  while (true) {
    c.groups = g.pick<int64_t>({1, 1, 2, 3});
    c.cg = g.integer(1, 3);
    c.og = g.integer(1, 3);
    c.N = g.index() == 1 ? 0 : g.integer(1, 2);
    c.H = g.integer(1, 7), c.W = g.integer(1, 7), c.KH = g.integer(1, 3), c.KW = g.integer(1, 3);
    c.win = {g.integer(1, 3), g.integer(1, 3), g.integer(0, 2), g.integer(0, 2), g.integer(1, 2), g.integer(1, 2)};
    if (c.H + 2 * c.win.pad_h >= c.win.dil_h * (c.KH - 1) + 1 && c.W + 2 * c.win.pad_w >= c.win.dil_w * (c.KW - 1) + 1)
      break;
  }
  if (g.index() == 2) c.og = 0;  // no output channels
  return c;
}

Case conv2d_case(Op, DType dt, Gen& g) {
  Case c;
  ConvDraw cv = draw_conv(g);
  ref::Window win = cv.win;
  int64_t groups = cv.groups;
  bool bias = g.coin();
  Domain d = dom(-1, 1, -3, 3);
  c.inputs.push_back(g.input(dt, {cv.N, groups * cv.cg, cv.H, cv.W}, d));
  c.inputs.push_back(g.input(dt, {groups * cv.og, cv.cg, cv.KH, cv.KW}, d));
  if (bias) c.inputs.push_back(g.input(dt, {groups * cv.og}, d));
  c.note = cv.note() + (bias ? " bias" : "");
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

// conv2d_input_grad (grad_y, weight, x) and conv2d_weight_grad (grad_y, x, weight).
Case conv2d_grad_case(Op op, DType dt, Gen& g) {
  if (op != Op::Conv2dInputGrad && op != Op::Conv2dWeightGrad) unlisted(op, "convolution gradient cases");
  Case c;
  ConvDraw cv = draw_conv(g);
  ref::Window win = cv.win;
  int64_t groups = cv.groups;
  bool of_input = op == Op::Conv2dInputGrad;
  Domain d = dom(-1, 1, -3, 3);
  Input x = g.input(dt, {cv.N, groups * cv.cg, cv.H, cv.W}, d);
  Input w = g.input(dt, {groups * cv.og, cv.cg, cv.KH, cv.KW}, d);
  Ints y = ref::conv2d(x.ref, w.ref, nullptr, win, groups).shape;
  c.inputs.push_back(g.input(dt, y, d));
  c.inputs.push_back(of_input ? w : x);
  c.inputs.push_back(of_input ? x : w);
  c.note = cv.note();
  Ref xr = x.ref, wr = w.ref, gr = c.inputs[0].ref;
  Ints stride{win.stride_h, win.stride_w}, padding{win.pad_h, win.pad_w}, dilation{win.dil_h, win.dil_w};
  c.call = [=](const std::vector<Tensor>& t) {
    return of_input ? conv2d_input_grad(t[0], t[1], t[2], stride, padding, dilation, groups)
                    : conv2d_weight_grad(t[0], t[1], t[2], stride, padding, dilation, groups);
  };
  c.expect = [=] {
    auto [dx, dw] = ref::conv2d_grads(xr, wr, gr, win, groups);
    return result(dt, of_input ? dx : dw);
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
    // A window may be larger than the input in ceil mode, as long as it starts inside it.
    auto fits = [&](int64_t size, int64_t k, int64_t s, int64_t pad, int64_t dil) {
      int64_t span = size + 2 * pad - dil * (k - 1) - 1;
      return span >= 0 || (p.ceil_mode && span > -s);
    };
    if (!fits(shape[r - 2], p.kh, p.win.stride_h, p.win.pad_h, p.win.dil_h)) continue;
    if (!fits(shape[r - 1], p.kw, p.win.stride_w, p.win.pad_w, p.win.dil_w)) continue;
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
      {{0, 1, 0, 1}, {2, 2}, {0, 0}, {1, 1}, 6},  // depthwise, stride 2, four-sided (MobileNetV2's)
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

TEST_CASE("conv2d's gradients are its adjoints: <conv2d(x, w), g> = <x, input grad> = <w, weight grad>",
          "[contraction][autograd]") {
  // The identity holds for any x, w and g, so it checks the gradients against the convolution
  // itself, across strides, four-sided padding, dilation, groups, images side by side in one
  // GEMM (few pixels) or not, and float64, float32 and float16.
  struct Geometry {
    Ints x, w, stride, padding, dilation;
    int64_t groups;
  };
  const std::vector<Geometry> cases = {
      {{2, 8, 2, 2}, {8, 8, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},         // ResNet's last stage, 2 x 2
      {{3, 4, 9, 11}, {6, 4, 3, 3}, {2, 2}, {1, 0, 2, 1}, {1, 1}, 1},  // stride 2, four-sided
      {{2, 6, 10, 10}, {6, 2, 3, 2}, {1, 2}, {2, 1}, {2, 1}, 3},       // dilated, grouped
      {{2, 4, 7, 7}, {4, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 4},         // depthwise
      {{2, 3, 9, 8}, {6, 1, 3, 3}, {2, 2}, {0, 0, 1, 1}, {1, 1}, 3},   // depthwise x 2, four-sided
      {{5, 3, 20, 20}, {4, 3, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1},       // 1 x 1, one image a GEMM
      {{2, 3, 34, 34}, {4, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},       // many pixels: float32 input
      {{1, 2, 33, 40}, {3, 2, 3, 2}, {1, 1}, {0, 1, 2, 0}, {1, 1}, 1},  // gradient as a convolution
      {{0, 3, 5, 5}, {4, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},         // no images
  };
  auto dot = [](const Tensor& a, const Tensor& b) { return sum((a * b).to(DType::Float64)).to_vector()[0]; };
  for (DType dt : {DType::Float64, DType::Float32, DType::Float16}) {
    for (const Geometry& c : cases) {
      INFO(dtype_name(dt) << ", x [" << c.x[0] << ", " << c.x[1] << ", " << c.x[2] << ", " << c.x[3] << "], groups "
                          << c.groups << ", stride " << c.stride[0]);
      Tensor x = uniform(SymShape(c.x.begin(), c.x.end()), 1, -1.0, 1.0, dt);
      Tensor w = uniform(SymShape(c.w.begin(), c.w.end()), 2, -1.0, 1.0, dt);
      Tensor y = conv2d(x, w, std::nullopt, c.stride, c.padding, c.dilation, c.groups);
      Ints ys = y.shape();
      Tensor g = uniform(SymShape(ys.begin(), ys.end()), 3, -1.0, 1.0, dt);
      Tensor gx = conv2d_input_grad(g, w, x, c.stride, c.padding, c.dilation, c.groups);
      Tensor gw = conv2d_weight_grad(g, x, w, c.stride, c.padding, c.dilation, c.groups);
      CHECK(gx.shape() == x.shape());
      CHECK(gw.shape() == w.shape());
      double yg = dot(y, g), tol = dt == DType::Float64 ? 1e-10 : dt == DType::Float32 ? 1e-4 : 0.3;
      CHECK(std::abs(dot(x, gx) - yg) <= tol * (1 + std::abs(yg)));
      CHECK(std::abs(dot(w, gw) - yg) <= tol * (1 + std::abs(yg)));
      // Compiled, the same values (the plan runs the same kernels).
      auto f = compile([&](const Tensor& g, const Tensor& x) {
        return std::vector<Tensor>{conv2d_input_grad(g, w, x, c.stride, c.padding, c.dilation, c.groups),
                                   conv2d_weight_grad(g, x, w, c.stride, c.padding, c.dilation, c.groups)};
      });
      auto got = f(g, x);
      CHECK(test::same_bits(got[0], gx));
      CHECK(test::same_bits(got[1], gw));
    }
  }
  // grad_y must have the convolution's output shape.
  Tensor x = uniform({1, 2, 5, 5}, 4), w = uniform({3, 2, 3, 3}, 5), wrong = uniform({1, 3, 4, 4}, 6);
  CHECK(test::error_of([&] { conv2d_weight_grad(wrong, x, w); }).find("differs from the convolution's output") !=
        std::string::npos);
}

}  // namespace ember::sweep

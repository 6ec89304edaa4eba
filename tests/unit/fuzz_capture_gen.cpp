// Drawing a program: its signature, captured tensors, calls, steps and outputs. Steps are drawn
// against the values of the first call, so that most of them are valid.
#include <algorithm>
#include <cmath>
#include <exception>
#include <utility>
#include <vector>

#include "tests/unit/fuzz_capture.h"

namespace ember::capture_fuzz {
namespace {

const std::vector<int64_t> kLargeSizes = {5, 8};  // a shrinking program's base sizes

struct Generator {
  Rng& rng;
  std::vector<Tensor> T;  // the values on the first call, to draw valid steps
  std::vector<Num> N;
  int first_step_tensor = 0;
  int n_args = 1;  // tensor arguments

  int pick_t() {
    int n = static_cast<int>(T.size());
    if (n > first_step_tensor && rng.chance(0.55)) return static_cast<int>(rng.range(std::max(first_step_tensor, n - 3), n - 1));
    return static_cast<int>(rng.range(0, n - 1));
  }
  int pick_n() { return static_cast<int>(rng.range(0, static_cast<int64_t>(N.size()) - 1)); }
  int64_t rank(int i) { return T[i].dim(); }
  int64_t axis_of(int i) {  // a valid axis (negative half the time), now and then an invalid one
    int64_t r = std::max<int64_t>(rank(i), 1);
    if (rng.chance(0.03)) return r + rng.range(0, 2);
    int64_t a = rng.range(0, r - 1);
    return rng.chance(0.5) ? a - r : a;
  }
  std::vector<int64_t> axes_of(int i) {
    std::vector<int64_t> axes;
    if (rng.chance(0.35) || rank(i) == 0) return axes;
    int64_t count = rng.range(1, std::max<int64_t>(1, rank(i)));
    std::vector<int64_t> all;
    for (int64_t a = 0; a < rank(i); ++a) all.push_back(a);
    std::shuffle(all.begin(), all.end(), rng.g);
    for (int64_t k = 0; k < count; ++k) axes.push_back(rng.chance(0.3) ? all[k] - rank(i) : all[k]);
    if (rng.chance(0.03)) axes.push_back(axes.empty() ? 0 : axes[0]);  // a repeated axis
    return axes;
  }
  Num constant() {
    double u = rng.real(0, 1);
    if (u < 0.65) {
      Num n = draw_num(rng, Slot::Floating);
      if (avoid("nan-sign") && std::isnan(n.f)) n.f = std::abs(n.f);
      return n;
    }
    if (u < 0.92) return draw_num(rng, Slot::Integer);
    return draw_num(rng, Slot::Boolean);
  }

  int binary(double common) {
    for (;;) {
      int op = rng.chance(common) ? static_cast<int>(rng.range(0, 6)) : static_cast<int>(rng.range(0, kBinaryCount - 1));
      if (!(avoid("int-div") && (op == 7 || op == 8))) return op;
    }
  }

  // The kind of the next step, by weight.
  K choose_kind() {
    const bool nums = !N.empty();
    const std::pair<K, double> table[] = {
        {K::Unary, 10},     {K::Binary, 12},     {K::BinaryConst, 8},           {K::BinaryNum, nums ? 8.0 : 0.0},
        {K::Where, 3},      {K::WhereConst, 2},  {K::Clamp, 3},                 {K::ClampTensor, 1},
        {K::Reduce, 7},     {K::Slice, 6},       {K::SliceSized, 3},            {K::SliceNum, nums ? 2.0 : 0.0},
        {K::Reshape, 5},    {K::Permute, 3},     {K::Transpose, 2},             {K::Expand, 3},
        {K::Squeeze, 2},    {K::Unsqueeze, 2},   {K::Concat, 4},                {K::Pool, 4},
        {K::MatMul, 4},     {K::Cast, 3},        {K::Softmax, 2},               {K::Create, 3},
        {K::NumTensor, nums ? 3.0 : 0.0},        {K::Branch, nums ? 2.0 : 0.0}, {K::Gather, 3},
        {K::Pad, 2},        {K::Conv, 2},        {K::Item, 5}};
    double total = 0;
    for (const auto& [kind, w] : table) total += w;
    double u = rng.real(0, total);
    for (const auto& [kind, w] : table) {
      if (u < w) return kind;
      u -= w;
    }
    return K::Item;
  }

  Step random_step() {
    Step s;
    int x = pick_t();
    s.t = {x};
    s.kind = choose_kind();
    switch (s.kind) {
      case K::Unary:
        s.op = static_cast<int>(rng.range(0, kUnaryCount - 1));
        break;
      case K::Binary:
        s.op = binary(0.6);
        s.t.push_back(pick_t());
        break;
      case K::BinaryConst:
        s.op = binary(0.7);
        s.c = {constant()};
        s.flag = rng.chance(0.3);
        break;
      case K::BinaryNum:
        s.op = binary(0.75);
        s.n = {pick_n()};
        s.flag = rng.chance(0.3);
        break;
      case K::Where:
        s.op = static_cast<int>(rng.range(0, 4));
        s.t = {x, pick_t(), pick_t(), pick_t()};
        break;
      case K::WhereConst:
        s.t.push_back(pick_t());
        s.c = {constant()};
        s.flag = rng.chance(0.5);
        break;
      case K::Clamp:
        s.ints = {rng.range(rng.chance(0.05) ? 0 : 1, 3)};
        s.c = {constant(), constant()};
        if (!N.empty() && rng.chance(0.3)) s.n = {pick_n()};
        if (!(s.ints[0] & 1)) s.n.clear();  // the number replaces the lower bound only
        break;
      case K::ClampTensor:
        s.t = {x, pick_t(), pick_t()};
        break;
      case K::Reduce:
        s.op = static_cast<int>(rng.range(0, kReduceCount - 1));
        s.ints = axes_of(x);
        s.flag = rng.chance(0.4);
        break;
      case K::Slice: {
        static const std::vector<int64_t> starts = {0, 1, 2, -1, -2, -3, -10, 10, 3};
        static const std::vector<int64_t> ends = {kToEnd, -1, -2, -3, 3, 1, 100, 0, -100, 2};
        int64_t step = rng.chance(0.7) ? 1 : rng.range(2, 3);
        if (rng.chance(0.02)) step = rng.range(-1, 0);
        s.ints = {axis_of(x), rng.pick(starts), rng.pick(ends), step};
        if (avoid("neg-slice")) s.ints[1] = 0, s.ints[2] = kToEnd;
        break;
      }
      case K::SliceSized:
        s.op = static_cast<int>(rng.range(0, 1));
        s.ints = {axis_of(x), rng.range(0, 1), rng.range(-2, 1)};
        break;
      case K::SliceNum:
        s.ints = {axis_of(x)};
        s.n = {pick_n()};
        break;
      case K::Reshape:
        s.op = static_cast<int>(rng.range(0, 6));
        if (s.op == 1) s.ints = {axis_of(x), axis_of(x)};
        if (s.op == 4) {
          std::vector<int64_t> shape = T[x].shape();
          std::reverse(shape.begin(), shape.end());
          if (!shape.empty() && rng.chance(0.3)) shape[0] = -1;
          s.ints = shape;
        }
        break;
      case K::Permute:
        for (int64_t a = 0; a < rank(x); ++a) s.ints.push_back(a);
        std::shuffle(s.ints.begin(), s.ints.end(), rng.g);
        if (rng.chance(0.3))
          for (auto& a : s.ints) a -= rank(x);
        break;
      case K::Transpose:
        s.ints = {axis_of(x), axis_of(x)};
        break;
      case K::Expand:
        s.op = static_cast<int>(rng.range(0, 2));
        if (s.op == 0) s.t.push_back(pick_t());
        if (s.op == 1) s.ints = {rng.pick(kSizes)};
        if (s.op == 2) {
          s.ints = T[x].shape();
          for (auto& d : s.ints)
            if (d == 1 || rng.chance(0.1)) d = rng.chance(0.2) ? -1 : rng.pick(kSizes);
          if (rng.chance(0.3)) s.ints.insert(s.ints.begin(), rng.pick(kSizes));
        }
        break;
      case K::Squeeze:
        if (rng.chance(0.6) && rank(x) > 0) s.ints = {axis_of(x)};
        break;
      case K::Unsqueeze:
        s.ints = {rng.range(-rank(x) - 1, rank(x))};
        break;
      case K::Concat:
      case K::Stack: {
        s.kind = rng.chance(0.7) ? K::Concat : K::Stack;
        int count = static_cast<int>(rng.range(1, 3));
        for (int k = 1; k < count; ++k) s.t.push_back(rng.chance(0.5) ? x : pick_t());
        s.ints = {s.kind == K::Concat ? axis_of(x) : rng.range(-rank(x) - 1, rank(x))};
        break;
      }
      case K::Pool: {
        s.op = rng.chance(0.45) ? 0 : rng.chance(0.75) ? 1 : 2;
        int64_t kh = rng.range(1, 3), kw = rng.range(1, 3);
        int64_t sh = rng.chance(0.35) ? -1 : rng.range(1, 3), sw = rng.range(1, 3);
        s.ints = {kh, kw, sh, sw, rng.range(0, 2), rng.range(0, 2), rng.chance(0.8) ? 1 : 2};
        if (rng.chance(0.7)) s.ints[4] = std::min(s.ints[4], kh / 2), s.ints[5] = std::min(s.ints[5], kw / 2);
        s.flag = rng.chance(0.4);
        s.flag2 = rng.chance(0.5);
        break;
      }
      case K::MatMul:
        s.op = static_cast<int>(rng.range(0, 3));
        if (s.op != 1) s.t.push_back(pick_t());
        if (s.op == 3) s.t.push_back(pick_t());
        break;
      case K::Cast: {
        static const std::vector<DType> dts = {DType::Float32, DType::Float64, DType::Int32, DType::Int64,
                                               DType::Bool, DType::Float16, DType::BFloat16, DType::Int8};
        s.dtype = rng.pick(dts);
        break;
      }
      case K::Softmax:
        s.op = static_cast<int>(rng.range(0, 2));
        s.ints = {axis_of(x)};
        break;
      case K::Create: {
        static const std::vector<DType> dts = {DType::Float32, DType::Int64, DType::Int32, DType::Float64, DType::Bool};
        s.op = static_cast<int>(rng.range(0, 4));
        s.dtype = s.op == 4 ? rng.pick(dts) : rng.chance(0.5) ? DType::Float32 : DType::Int64;
        s.c = {s.op == 4 && rng.chance(0.5) ? Num::i64(0) : constant()};
        s.ints = {rng.range(0, 1000)};
        if (s.op == 4) s.t.clear();  // full({}, c): no tensor operand
        break;
      }
      case K::NumTensor:
        s.op = static_cast<int>(rng.range(0, 1));
        s.n = {pick_n()};
        if (s.op == 0) s.t.clear();  // scalar_tensor(n): no tensor operand
        break;
      case K::Branch:
        s.n = {pick_n()};
        s.t.push_back(pick_t());
        break;
      case K::Gather:
        s.op = static_cast<int>(rng.range(0, 3));
        s.t.push_back(rng.chance(0.3) ? x : rng.chance(0.5) ? static_cast<int>(rng.range(0, n_args - 1)) : pick_t());
        s.ints = {axis_of(x)};
        break;
      case K::Pad: {
        int64_t pairs = rng.range(1, std::max<int64_t>(1, std::min<int64_t>(2, rank(x))));
        for (int64_t k = 0; k < 2 * pairs; ++k) s.ints.push_back(rng.range(-2, 2));
        s.c = {Num::f64(rng.chance(0.5) ? 0.0 : rng.chance(0.5) ? -0.0 : 1.5)};
        break;
      }
      case K::Conv:
        s.t.push_back(rng.chance(0.4) ? x : pick_t());
        s.ints = {rng.range(1, 2), rng.range(0, 1), rng.range(1, 2)};
        break;
      case K::Item:
        s.op = static_cast<int>(rng.range(0, 6));
        break;
      case K::Copy:
      case K::ConstNum:
        break;
    }
    return s;
  }
};

// Signature: 1-3 tensors and 0-2 scalars, at most 4 arguments, in any order.
std::vector<Slot> draw_signature(Rng& rng) {
  std::vector<Slot> sig;
  int tensors = static_cast<int>(rng.range(1, 3));
  int scalars = static_cast<int>(rng.range(0, std::min(2, 4 - tensors)));
  if (rng.chance(0.3)) scalars = 0;
  for (int i = 0; i < tensors; ++i) sig.push_back(Slot::Tensor);
  for (int i = 0; i < scalars; ++i) {
    double u = rng.real(0, 1);
    sig.push_back(u < 0.6 ? Slot::Floating : u < 0.85 ? Slot::Integer : Slot::Boolean);
  }
  if (rng.chance(0.3)) std::shuffle(sig.begin(), sig.end(), rng.g);
  return sig;
}

// Captured tensors: broadcast-friendly shapes mostly.
void draw_captured(Rng& rng, Program& p, const std::vector<int64_t>& base, DType common) {
  int captured = rng.chance(0.45) ? static_cast<int>(rng.range(1, 2)) : 0;
  for (int k = 0; k < captured; ++k) {
    TensorSpec w;
    double u = rng.real(0, 1);
    if (u < 0.5) w.shape = base;
    else if (u < 0.75) w.shape = std::vector<int64_t>(base.size(), 1);
    else if (u < 0.9) w.shape = {};
    else w.shape = vary_shape(rng, base);
    w.dtype = rng.chance(0.7) ? common : draw_dtype(rng);
    w.data_seed = rng.g();
    p.captured_specs.push_back(w);
    p.captured.push_back(make_tensor(w));
  }
}

// The other large size: 5 <-> 8, so that every dim changes and becomes symbolic.
std::vector<int64_t> swap_large(std::vector<int64_t> shape) {
  for (int64_t& d : shape) d = d == 5 ? 8 : 5;
  return shape;
}

// Small sizes that may break what a trace at large sizes assumed (a symbol of size 0 or 1 is
// never made, so 2 and 3 are the sizes that test the facts of a symbolic trace).
std::vector<int64_t> shrink(Rng& rng, std::vector<int64_t> shape) {
  for (int64_t& d : shape)
    if (rng.chance(0.6)) d = rng.chance(0.5) ? 2 : 3;
  return shape;
}

// Calls: 4-6. Usually the base shape changes now and then; a shrinking program (its base shape
// large) is called at the other large sizes, so that a dynamic trace is made, then at small ones.
std::vector<CallSpec> draw_calls(Rng& rng, const Program& p, const std::vector<DType>& dtypes,
                                 const std::vector<int64_t>& base, bool shrinking) {
  std::vector<CallSpec> calls;
  int ncalls = static_cast<int>(rng.range(4, 6));
  std::vector<int64_t> shape = base;
  for (int i = 0; i < ncalls; ++i) {
    if (shrinking && i == 1) shape = swap_large(base);
    else if (shrinking && i > 1) shape = shrink(rng, rng.chance(0.5) ? base : swap_large(base));
    else if (i > 0 && rng.chance(0.6)) shape = vary_shape(rng, shape);
    calls.push_back(draw_call(rng, p, dtypes, shape, i ? &calls.back() : nullptr));
  }
  return calls;
}

// Steps, drawn so that most of them are valid on the first call (`gen` holds its values). Now
// and then an invalid one is kept (and ends the program) to check that both paths raise the same
// error. Returns whether one did.
bool draw_steps(Rng& rng, Program& p, Generator& gen) {
  int nsteps = static_cast<int>(rng.range(1, 10));
  for (int k = 0; k < nsteps; ++k) {
    for (int attempt = 0; attempt < 10; ++attempt) {
      Step s = gen.random_step();
      try {
        exec_step(s, gen.T, gen.N);
        p.steps.push_back(s);
        break;
      } catch (const std::exception&) {
        if (rng.chance(0.06)) {
          p.steps.push_back(s);
          return true;
        }
      }
    }
  }
  return false;
}

// A view of an argument (transposed, sliced or flattened), to return.
void add_argument_view(Rng& rng, Program& p, Generator& gen) {
  Step v;
  v.t = {static_cast<int>(rng.range(0, p.tensor_args() - 1))};
  int64_t r = gen.T[v.t[0]].dim();
  if (r >= 2 && rng.chance(0.5)) {
    v.kind = K::Transpose;
    v.ints = {0, 1};
  } else if (r >= 1 && rng.chance(0.5)) {
    v.kind = K::Slice;
    v.ints = {0, 1, kToEnd, 1};
  } else {
    v.kind = K::Reshape;
    v.op = 0;
  }
  try {
    exec_step(v, gen.T, gen.N);
    p.steps.push_back(v);
  } catch (const std::exception&) {
  }
}

// Outputs: mostly the last values, also arguments, captured tensors and repeats.
void draw_outputs(Rng& rng, Program& p, int n_tensors) {
  int nout = static_cast<int>(rng.range(1, 4));
  for (int i = 0; i < nout; ++i) {
    double u = rng.real(0, 1);
    int o;
    if (!p.outputs.empty() && u < 0.12) o = rng.pick(p.outputs);
    else if (u < 0.22 && !avoid("arg-outputs")) o = static_cast<int>(rng.range(0, p.tensor_args() - 1));
    else if (u < 0.3 && !p.captured.empty() && !avoid("arg-outputs"))
      o = p.tensor_args() + static_cast<int>(rng.range(0, static_cast<int64_t>(p.captured.size()) - 1));
    else if (u < 0.45) o = static_cast<int>(rng.range(0, n_tensors - 1));
    else o = static_cast<int>(rng.range(std::max(0, n_tensors - 2), n_tensors - 1));
    if (avoid("arg-outputs") && o < p.first_step_tensor()) o = n_tensors - 1;
    if (avoid("arg-outputs") && o < p.first_step_tensor()) continue;
    if (avoid("dup-outputs") && std::count(p.outputs.begin(), p.outputs.end(), o)) continue;
    p.outputs.push_back(o);
  }
  if (p.outputs.empty()) p.outputs.push_back(n_tensors - 1);
}

}  // namespace

Case generate(uint64_t seed) {
  Case cs;
  cs.seed = seed;
  Rng rng(seed);
  Program& p = cs.prog;
  p.sig = draw_signature(rng);

  int64_t rank = std::vector<int64_t>{0, 1, 1, 2, 2, 2, 3, 3, 4, 4}[static_cast<size_t>(rng.range(0, 9))];
  bool shrinking = rank > 0 && rng.chance(0.3);
  std::vector<int64_t> base;
  for (int64_t d = 0; d < rank; ++d) base.push_back(shrinking ? rng.pick(kLargeSizes) : draw_size(rng));

  std::vector<DType> dtypes;
  DType common = draw_dtype(rng);
  for (Slot s : p.sig) dtypes.push_back(s == Slot::Tensor && rng.chance(0.25) ? draw_dtype(rng) : common);

  draw_captured(rng, p, base, common);
  // Mostly the default recompile limit; sometimes one that calls run into (eager fallback).
  p.recompile_limit = rng.chance(0.85) ? 8 : static_cast<int>(rng.range(0, 2));
  cs.calls = draw_calls(rng, p, dtypes, base, shrinking);

  // The steps are drawn against the values of the first call.
  Generator gen{rng, {}, {}, 0};
  std::vector<Arg> first = materialize(p, cs.calls[0]);
  for (const Arg& a : first) {
    if (auto* t = std::get_if<Tensor>(&a)) gen.T.push_back(*t);
    else gen.N.push_back(num_of(a));
  }
  for (const Tensor& w : p.captured) gen.T.push_back(w);
  gen.first_step_tensor = static_cast<int>(gen.T.size());
  gen.n_args = p.tensor_args();
  bool ended = draw_steps(rng, p, gen);
  if (!ended && rng.chance(0.15)) add_argument_view(rng, p, gen);
  draw_outputs(rng, p, static_cast<int>(gen.T.size()));
  return cs;
}

}  // namespace ember::capture_fuzz

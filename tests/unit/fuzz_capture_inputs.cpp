// Random inputs: tensors (values with -0.0, NaN, inf and denormals sprinkled in, in several
// layouts), numbers, and the calls of a program built from them.
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "runtime/array.h"
#include "runtime/element.h"
#include "tests/unit/fuzz_capture.h"

namespace ember::capture_fuzz {
namespace {

// Special float values, as bits: +-0, qNaN, -qNaN, a NaN with a payload, +-inf, +-1, a denormal,
// a signalling NaN (arithmetic quiets it: x * 1 is not x).
constexpr int kSpecials = 11;
const uint32_t kSpecialF32[kSpecials] = {0x00000000u, 0x80000000u, 0x7fc00000u, 0xffc00000u, 0x7fc00123u, 0x7f800000u,
                                         0xff800000u, 0x3f800000u, 0xbf800000u, 0x00000001u, 0x7fa00000u};
const uint64_t kSpecialF64[kSpecials] = {0x0000000000000000ull, 0x8000000000000000ull, 0x7ff8000000000000ull,
                                         0xfff8000000000000ull, 0x7ff8000000000123ull, 0x7ff0000000000000ull,
                                         0xfff0000000000000ull, 0x3ff0000000000000ull, 0xbff0000000000000ull,
                                         0x0000000000000001ull, 0x7ff4000000000000ull};

void fill(Array& a, Rng& rng, double specials) {
  DType dt = a.dtype();
  size_t size = itemsize(dt);
  char* base = static_cast<char*>(a.data());
  bool uniform_values = rng.chance(0.3);
  for (int64_t i = 0; i < a.numel(); ++i) {
    char* p = base + i * size;
    if (is_floating(dt)) {
      if (rng.chance(specials)) {
        size_t k = static_cast<size_t>(rng.range(0, kSpecials - 1));
        if (dt == DType::Float32) std::memcpy(p, &kSpecialF32[k], 4);
        else if (dt == DType::Float64) std::memcpy(p, &kSpecialF64[k], 8);
        else element::store<float>(p, dt, std::bit_cast<float>(kSpecialF32[k]));
        continue;
      }
      double v = uniform_values ? rng.real(-3, 3) : rng.normal();
      if (rng.chance(0.1)) v = static_cast<double>(rng.range(-3, 3));
      element::store<double>(p, dt, v);
    } else if (dt == DType::Bool) {
      element::store<int64_t>(p, dt, rng.range(0, 1));
    } else {
      int64_t v = rng.range(-4, 4);
      if (rng.chance(0.03)) v = rng.chance(0.5) ? std::numeric_limits<int32_t>::max() : std::numeric_limits<int32_t>::min();
      element::store<int64_t>(p, dt, v);
    }
  }
}

}  // namespace

Tensor make_tensor(const TensorSpec& spec) {
  Rng rng(spec.data_seed);
  double specials = rng.chance(0.5) ? 0.15 : 0.0;
  std::vector<int64_t> alloc = spec.shape;
  int layout = spec.layout;
  if (layout == 1 && alloc.size() < 2) layout = 0;
  if ((layout == 2 || layout == 3) && alloc.empty()) layout = 0;
  if (layout == 3 && alloc[0] < 2) layout = 0;
  if (layout == 1) std::swap(alloc[alloc.size() - 1], alloc[alloc.size() - 2]);
  if (layout == 2) alloc[0] *= 2;
  if (layout == 3) alloc[0] = 1;
  Array a = Array::empty(spec.dtype, alloc);
  fill(a, rng, specials);
  Tensor t(a);
  if (layout == 1) return transpose(t, -1, -2);
  if (layout == 2) return slice(t, 0, 0, kToEnd, 2);
  if (layout == 3) return expand(t, SymShape(spec.shape.begin(), spec.shape.end()));
  return t;
}

const std::vector<int64_t> kSizes = {1, 2, 3, 5, 8};

int64_t draw_size(Rng& rng) { return rng.chance(0.04) ? 0 : rng.pick(kSizes); }

DType draw_dtype(Rng& rng) {
  double u = rng.real(0, 1);
  if (u < 0.62) return DType::Float32;
  if (u < 0.72) return DType::Float64;
  if (u < 0.80) return DType::Int64;
  if (u < 0.87) return DType::Int32;
  if (u < 0.91) return DType::Bool;
  if (u < 0.96) return DType::Float16;
  return DType::BFloat16;
}

Num draw_num(Rng& rng, Slot slot) {
  static const std::vector<double> floats = {0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 3.0, 1e-3, -2.5,
                                             std::numeric_limits<double>::quiet_NaN(),
                                             -std::numeric_limits<double>::quiet_NaN(),
                                             std::numeric_limits<double>::infinity(),
                                             -std::numeric_limits<double>::infinity()};
  static const std::vector<int64_t> ints = {0, 1, -1, 2, 3, 7, -5};
  switch (slot) {
    case Slot::Floating: {
      double v = rng.pick(floats);
      return rng.chance(0.35) ? Num::f32(static_cast<float>(v)) : Num::f64(v);
    }
    case Slot::Integer: {
      int64_t v = rng.pick(ints);
      return rng.chance(0.4) ? Num::i32(static_cast<int32_t>(v)) : Num::i64(v);
    }
    default: return Num::boolean(rng.chance(0.5));
  }
}

std::vector<Arg> materialize(const Program& p, const CallSpec& c) {
  std::vector<Arg> args;
  for (size_t i = 0; i < c.args.size(); ++i) {
    if (auto* n = std::get_if<Num>(&c.args[i])) {
      args.push_back(arg_of(*n));
      continue;
    }
    const TensorSpec& t = std::get<TensorSpec>(c.args[i]);
    if (t.source == TensorSpec::Alias) args.push_back(std::get<Tensor>(args.at(static_cast<size_t>(t.ref))));
    else if (t.source == TensorSpec::Captured) args.push_back(p.captured.at(static_cast<size_t>(t.ref)));
    else args.push_back(make_tensor(t));
  }
  return args;
}

std::vector<int64_t> vary_shape(Rng& rng, const std::vector<int64_t>& base) {
  std::vector<int64_t> s = base;
  for (auto& d : s)
    if (rng.chance(0.5)) d = draw_size(rng);
  return s;
}

namespace {

// A number that a guard by value may confuse with `n`: the other zero, another NaN, the same
// value with the other C++ type.
Num twin(Rng& rng, Num n) {
  if (n.kind == Num::Bool) return n;
  if (n.is_float()) {
    if (rng.chance(0.5)) n.f = std::isnan(n.f) ? -n.f : (n.f == 0 ? -n.f : n.f);
    else n.kind = n.kind == Num::F64 ? Num::F32 : Num::F64;
    if (n.kind == Num::F32) n.f = static_cast<float>(n.f);
    return n;
  }
  n.kind = n.kind == Num::I64 ? Num::I32 : Num::I64;
  return n;
}

// A scalar argument; after the first call (`before`), often the same value or its twin.
Num draw_scalar_arg(Rng& rng, Slot slot, const Num* before) {
  Num n = draw_num(rng, slot);
  if (before) {
    double u = rng.real(0, 1);
    if (u < 0.35) n = *before;
    else if (u < 0.6) n = twin(rng, *before);
  }
  if (avoid("scalar-twins")) {
    if (n.kind == Num::F32) n.kind = Num::F64;
    if (n.kind == Num::I32) n.kind = Num::I64;
    if (n.is_float() && (n.f == 0 || std::isnan(n.f))) n.f = std::abs(n.f);
  }
  return n;
}

// The tensor argument at position `i`: now and then the same tensor as an earlier argument or a
// captured tensor, else a fresh one of about the base shape.
TensorSpec draw_tensor_arg(Rng& rng, const Program& p, size_t i, bool after_a_tensor, DType dtype,
                           const std::vector<int64_t>& base) {
  TensorSpec t;
  if (after_a_tensor && rng.chance(0.22) && !avoid("alias")) {
    std::vector<int> earlier;
    for (size_t j = 0; j < i; ++j)
      if (p.sig[j] == Slot::Tensor) earlier.push_back(static_cast<int>(j));
    t.source = TensorSpec::Alias;
    t.ref = rng.pick(earlier);
    return t;
  }
  if (!p.captured.empty() && rng.chance(0.15) && !avoid("captured-arg")) {
    t.source = TensorSpec::Captured;
    t.ref = static_cast<int>(rng.range(0, static_cast<int64_t>(p.captured.size()) - 1));
    return t;
  }
  t.dtype = rng.chance(0.06) ? draw_dtype(rng) : dtype;
  t.shape = base;
  if (rng.chance(0.15)) t.shape = vary_shape(rng, base);
  for (auto& d : t.shape)
    if (rng.chance(0.08)) d = 1;
  double u = rng.real(0, 1);
  t.layout = u < 0.8 ? 0 : u < 0.9 ? 1 : u < 0.96 ? 2 : 3;
  t.data_seed = rng.g();
  return t;
}

}  // namespace

CallSpec draw_call(Rng& rng, const Program& p, const std::vector<DType>& dtypes,
                   const std::vector<int64_t>& base, const CallSpec* previous) {
  CallSpec c;
  bool after_a_tensor = false;
  for (size_t i = 0; i < p.sig.size(); ++i) {
    if (p.sig[i] != Slot::Tensor) {
      const Num* before = previous ? &std::get<Num>(previous->args[i]) : nullptr;
      c.args.emplace_back(draw_scalar_arg(rng, p.sig[i], before));
      continue;
    }
    c.args.emplace_back(draw_tensor_arg(rng, p, i, after_a_tensor, dtypes[i], base));
    after_a_tensor = true;
  }
  return c;
}

}  // namespace ember::capture_fuzz

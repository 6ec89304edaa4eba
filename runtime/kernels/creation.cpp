// Creation kernels and constants.
#include "ir/random.h"
#include "runtime/kernels/kernel.h"

namespace ember::kernels {

namespace {

template <class F>
Array fill(const Call& call, F&& value_at) {
  Array out = output(call);
  size_t size = itemsize(call.dtype);
  char* p = static_cast<char*>(out.data());
  for (int64_t i = 0, n = out.numel(); i < n; ++i) element::store<double>(p + i * size, call.dtype, value_at(i));
  return out;
}

Array full(const Call& call) {
  Array out = output(call);
  fill_with(out, attr_float(call.attrs, "value"));
  return out;
}

Array arange(const Call& call) {
  double start = attr_float(call.attrs, "start"), step = attr_float(call.attrs, "step");
  return fill(call, [&](int64_t i) { return start + static_cast<double>(i) * step; });
}

Array uniform(const Call& call) {
  uint64_t seed = static_cast<uint64_t>(attr_int(call.attrs, "seed"));
  double lo = attr_float(call.attrs, "low"), hi = attr_float(call.attrs, "high");
  return fill(call, [&](int64_t i) { return random::uniform(seed, static_cast<uint64_t>(i), lo, hi); });
}

Array normal(const Call& call) {
  uint64_t seed = static_cast<uint64_t>(attr_int(call.attrs, "seed"));
  double mean = attr_float(call.attrs, "mean"), std = attr_float(call.attrs, "std");
  return fill(call, [&](int64_t i) { return random::normal(seed, static_cast<uint64_t>(i), mean, std); });
}

Array constant(const Call& call) {
  const Literal& lit = attr_literal(call.attrs, "value");
  Array out = output(call);
  size_t size = itemsize(call.dtype);
  char* p = static_cast<char*>(out.data());
  for (size_t i = 0; i < lit.size(); ++i) {
    if (is_floating(lit.dtype)) element::store<double>(p + i * size, call.dtype, lit.floats[i]);
    else element::store<int64_t>(p + i * size, call.dtype, lit.ints[i]);
  }
  return out;
}

}  // namespace

void register_creation(KernelTable& t) {
  t[static_cast<size_t>(Op::Full)] = full;
  t[static_cast<size_t>(Op::Arange)] = arange;
  t[static_cast<size_t>(Op::Uniform)] = uniform;
  t[static_cast<size_t>(Op::Normal)] = normal;
  t[static_cast<size_t>(Op::Constant)] = constant;
}

}  // namespace ember::kernels

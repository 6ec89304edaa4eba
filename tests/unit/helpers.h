// Small helpers the unit tests share.
#pragma once

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <functional>
#include <string>
#include <vector>

#include "frontend/tensor.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "runtime/array.h"
#include "tests/catch.h"

namespace ember::test {

// The message of the ember::Error `f` raises ("" when none), and its kind.
inline std::string error_of(const std::function<void()>& f, ErrorKind* kind = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (kind) *kind = e.kind();
    return e.what();
  }
  return "";
}

// A float32 array of standard normal draws for each of g's inputs (static shapes), seeded.
inline std::vector<Array> normal_inputs(const Graph& g, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<Array> inputs;
  for (Node* in : g.inputs()) {
    std::vector<int64_t> shape;
    for (const Dim& d : in->type().shape) shape.push_back(d.value());
    Array a = Array::empty(DType::Float32, shape);
    for (int64_t i = 0; i < a.numel(); ++i) a.data_as<float>()[i] = normal(rng);
    inputs.push_back(a);
  }
  return inputs;
}

// The largest |a - b| over two float tensors; infinite when their shapes differ. Safe off the
// test's thread (no Catch assertion).
inline double max_difference(const Tensor& a, const Tensor& b) {
  Array x = a.array().contiguous(), y = b.array().contiguous();
  if (x.shape() != y.shape()) return INFINITY;
  double d = 0;
  for (int64_t i = 0; i < x.numel(); ++i) d = std::max(d, std::abs(x.get(i) - y.get(i)));
  return d;
}

// Same dtype, shape and bytes: -0.0 differs from 0.0, and NaNs of another sign or payload differ.
// Every element of `got` within rtol/atol of `want` (computed in float64); NaN where want is,
// the same infinity where want is infinite.
inline void check_close(const Tensor& got, const Tensor& want, double rtol, double atol) {
  Array g = got.array().contiguous(), w = want.array().contiguous();
  REQUIRE(g.shape() == w.shape());
  for (int64_t i = 0; i < g.numel(); ++i) {
    double a = g.get(i), b = w.get(i);
    if (std::isnan(b)) {
      CHECK(std::isnan(a));
      continue;
    }
    if (std::isinf(b)) {
      CHECK(a == b);
      continue;
    }
    INFO("element " << i << ": " << a << " vs " << b);
    CHECK(std::abs(a - b) <= atol + rtol * std::abs(b));
  }
}

inline bool same_bits(const Array& a, const Array& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  Array x = a.contiguous(), y = b.contiguous();
  return std::memcmp(x.data(), y.data(), x.numel() * itemsize(x.dtype())) == 0;
}

inline bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return false;
  return !a.defined() || same_bits(a.array(), b.array());
}

inline bool same_bits(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!same_bits(a[i], b[i])) return false;
  return true;
}

// Generated code against the interpreter over a program of several ops: NaN where it has NaN,
// equal infinities, |got - want| <= 1e-5 + 1e-4 |want| (docs/testing.md's per-op float32 tolerance,
// loosened because a chain's errors compound).
inline bool within_chain_tolerance(double want, double got) {
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got);
  if (std::isinf(want) || std::isinf(got)) return want == got;
  return std::abs(got - want) <= 1e-5 + 1e-4 * std::abs(want);
}

// Sets (or, given nullptr, unsets) an environment variable for the lifetime of a scope,
// restoring what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace ember::test

#include "codegen/autotune_measure.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "runtime/element.h"

namespace ember::codegen {

Timing measure(const std::function<void()>& run, double cap_s, double give_up_s) {
  using Clock = std::chrono::steady_clock;
  run();  // warm-up: caches, page faults, the thread team
  std::vector<double> times;
  double total = 0, fastest = std::numeric_limits<double>::infinity();
  while (times.size() < 200 && (times.size() < 5 || total < 0.01) && (times.size() < 3 || total < cap_s)) {
    if (times.size() == 3 && fastest > give_up_s) break;  // noise only slows a run: it cannot win
    Clock::time_point start = Clock::now();
    run();
    double t = std::chrono::duration<double>(Clock::now() - start).count();
    times.push_back(t);
    total += t;
    fastest = std::min(fastest, t);
  }
  std::sort(times.begin(), times.end());
  size_t n = times.size();
  Timing timing;
  timing.median = times[n / 2];
  if (timing.median > 0) timing.spread = (times[(3 * n) / 4] - times[n / 4]) / timing.median;
  return timing;
}

namespace {

// Element i of contiguous array a, as a double (integers exactly up to 2^53).
double value_at(const Array& a, int64_t i) {
  return element::load<double>(static_cast<const char*>(a.data()) + i * itemsize(a.dtype()), a.dtype());
}

bool same_array(const Array& got, const Array& want, std::string& why) {
  if (got.dtype() != want.dtype() || got.shape() != want.shape()) {
    why = "another dtype or shape";
    return false;
  }
  Array g = got.contiguous(), w = want.contiguous();
  int64_t n = w.numel();
  if (!is_floating(w.dtype())) {
    if (std::memcmp(g.data(), w.data(), n * itemsize(w.dtype())) == 0) return true;
    why = "integers differ";
    return false;
  }
  double largest = 0;
  for (int64_t i = 0; i < n; ++i)
    if (std::isfinite(value_at(w, i))) largest = std::max(largest, std::abs(value_at(w, i)));
  for (int64_t i = 0; i < n; ++i) {
    double a = value_at(g, i), b = value_at(w, i);
    bool same = std::isfinite(b) ? std::abs(a - b) <= 1e-4 * largest + 1e-4 * std::abs(b)
                                 : (std::isnan(a) && std::isnan(b)) || a == b;
    if (!same) {
      why = "element " + std::to_string(i) + " is " + std::to_string(a) + ", the default's " + std::to_string(b);
      return false;
    }
  }
  return true;
}

}  // namespace

bool same_values(const std::vector<Array>& got, const std::vector<Array>& want, std::string& why) {
  for (size_t k = 0; k < want.size(); ++k)
    if (!same_array(got[k], want[k], why)) {
      why = "output " + std::to_string(k) + ": " + why;
      return false;
    }
  return true;
}

double rms_error(const std::vector<Array>& got, const std::vector<Array>& exact, double* scale) {
  double squares = 0, values = 0;
  int64_t count = 0;
  for (size_t k = 0; k < exact.size(); ++k) {
    if (!is_floating(exact[k].dtype())) continue;
    Array g = got[k].contiguous(), e = exact[k].contiguous();
    for (int64_t i = 0; i < e.numel(); ++i) {
      double want = value_at(e, i);
      if (!std::isfinite(want)) continue;
      double d = value_at(g, i) - want;
      squares += std::isfinite(d) ? d * d : std::numeric_limits<double>::infinity();
      values += want * want;
      ++count;
    }
  }
  if (scale) *scale = count ? std::sqrt(values / count) : 0.0;
  return count ? std::sqrt(squares / count) : 0.0;
}

bool as_accurate(const std::vector<Array>& got, const std::vector<Array>& exact, double default_error,
                 std::string& why) {
  double scale = 0;
  const double error = rms_error(got, exact, &scale);
  const double allowed = 2 * default_error + std::ldexp(scale, -23);
  if (error <= allowed) return true;
  char text[128];
  std::snprintf(text, sizeof text, "less accurate: root mean square error %.3g against float64, the default's %.3g",
                error, default_error);
  why = text;
  return false;
}

Array copy_keeping_layout(const Array& a) {
  int64_t extent = 1;  // elements from the first to the last one the view reaches
  for (size_t d = 0; d < a.shape().size(); ++d) {
    if (a.shape()[d] == 0) return Array::empty(a.dtype(), a.shape());
    if (a.strides()[d] < 0) return a.contiguous();  // none of ember's views, but be safe
    extent += (a.shape()[d] - 1) * a.strides()[d];
  }
  auto storage = std::make_shared<Storage>(static_cast<size_t>(extent) * itemsize(a.dtype()));
  std::memcpy(storage->data, a.data(), static_cast<size_t>(extent) * itemsize(a.dtype()));
  return Array(a.dtype(), a.shape(), a.strides(), 0, std::move(storage));
}

std::string layout_signature(const Array& a) {
  std::string s = std::string(dtype_name(a.dtype())) + "[";
  for (size_t d = 0; d < a.shape().size(); ++d) {
    int64_t size = a.shape()[d];
    s += (d ? "," : "") + std::to_string(size <= 1 ? size : static_cast<int64_t>(std::bit_ceil(uint64_t(size))));
  }
  s += "]{";
  for (size_t d = 0; d < a.strides().size(); ++d) {
    int64_t st = a.strides()[d];
    s += (d ? "," : "") + std::string(st == 0 ? "0" : st == 1 ? "1" : "n");
  }
  return s + "}";
}

}  // namespace ember::codegen

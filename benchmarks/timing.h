// Timing helpers for the benchmarks (BENCHMARKS.md protocol): warm-up calls, then interleaved
// repeats of the contenders, medians.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace ember::bench {

inline double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Runs each contender `warmup` times, then `repeats` rounds of A B C ... and returns the median
// microseconds per call of each.
inline std::vector<double> interleaved(const std::vector<std::function<void()>>& fns, int warmup = 3, int repeats = 30) {
  for (int w = 0; w < warmup; ++w)
    for (const auto& f : fns) f();
  std::vector<std::vector<double>> times(fns.size());
  for (int r = 0; r < repeats; ++r)
    for (size_t i = 0; i < fns.size(); ++i) {
      double t0 = now_us();
      fns[i]();
      times[i].push_back(now_us() - t0);
    }
  std::vector<double> out;
  for (auto& t : times) out.push_back(median(t));
  return out;
}

}  // namespace ember::bench

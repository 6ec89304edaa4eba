// The cost of ember's machinery, without kernels: tracing and compiling per op, and the per-call
// cost of a replayed compiled call (guard check and dispatch), for a 1-element program and a
// 50-op program, next to eager (the reference interpreter op by op).
#include <cstdio>

#include <ember/ember.h>

#include "benchmarks/timing.h"

using namespace ember;

namespace {

Tensor chain(const Tensor& x, int ops) {
  Tensor y = x;
  for (int i = 0; i < ops; ++i) {
    switch (i % 5) {
      case 0: y = y * 1.5; break;
      case 1: y = y + 0.25; break;
      case 2: y = relu(y); break;
      case 3: y = tanh(y); break;
      case 4: y = y - 0.5; break;
    }
  }
  return y;
}

void measure(const char* name, int ops, int64_t elements) {
  Tensor x = uniform({elements}, 1);
  // Trace + compile: a fresh compiled function each time, first call minus a replay.
  std::vector<double> first, replay_times;
  for (int r = 0; r < 15; ++r) {
    auto f = compile([&](const Tensor& t) { return chain(t, ops); });
    double t0 = bench::now_us();
    f(x);
    double t1 = bench::now_us();
    f(x);
    double t2 = bench::now_us();
    first.push_back(t1 - t0);
    replay_times.push_back(t2 - t1);
  }
  double trace_per_op = (bench::median(first) - bench::median(replay_times)) / ops;
  auto f = compile([&](const Tensor& t) { return chain(t, ops); });
  auto times = bench::interleaved({[&] { chain(x, ops); }, [&] { f(x); }}, 5, 200);
  std::printf("%-22s %5d %9lld %14.2f %14.2f %16.2f %12.3f\n", name, ops, static_cast<long long>(elements), trace_per_op,
              times[1], times[0], times[0] / times[1]);
}

}  // namespace

int main() {
  std::printf("ember overhead benchmark (backend: reference interpreter; 1 thread of dispatch)\n");
  std::printf("%-22s %5s %9s %14s %14s %16s %12s\n", "program", "ops", "elements", "trace+compile", "compiled call",
              "eager call", "speedup");
  std::printf("%-22s %5s %9s %14s %14s %16s %12s\n", "", "", "", "us per op", "us (median)", "us (median)",
              "eager/comp");
  measure("1-element, 1 op", 1, 1);
  measure("1-element, 50 ops", 50, 1);
  measure("4096 elements, 50 ops", 50, 4096);
  return 0;
}

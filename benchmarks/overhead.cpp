// The cost of ember's machinery, without kernels: tracing and compiling per op, and the per-call
// cost of a replayed compiled call (guard check and dispatch), for a 1-element program and a
// 50-op program, next to eager (the reference interpreter op by op). Then the scaling of trace
// and compile time with graph size: a long chain at 1k, 4k and 16k ops in which every pass has
// work to do; the per-op figures should stay flat.
#include <cstdio>
#include <map>
#include <string>

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

// A chain that records at least `target` nodes and gives every pass work: scalars that
// constant-fold (`full` nodes, and products of them), identities that simplify (x * 1,
// relu(relu(x)), x - 0), duplicates that CSE merges (tanh(y) twice) and the nodes all of them
// leave dead. Returns the output; `recorded` is the number of nodes traced.
Tensor long_chain(const Tensor& x, int target, int& recorded) {
  Tensor y = x;
  recorded = 0;
  for (int i = 0; recorded < target; ++i) {
    switch (i % 8) {
      case 0: y = y * 1.5; recorded += 2; break;                                           // full, mul
      case 1: y = y + scalar_tensor(0.5) * scalar_tensor(0.25); recorded += 4; break;     // folds
      case 2: y = relu(relu(y)); recorded += 2; break;                                    // simplifies
      case 3: y = tanh(y) + tanh(y); recorded += 3; break;                                // CSE
      case 4: y = y * 1.0; recorded += 2; break;                                          // simplifies
      case 5: y = y - 0.0; recorded += 2; break;                                          // simplifies
      case 6: y = sigmoid(y); recorded += 1; break;
      case 7: y = y + y * 0.5; recorded += 3; break;
    }
  }
  return y;
}

// Trace and compile time per recorded node for a chain of about `target` nodes: the medians of
// `repeats` fresh compiles. Compile time is the report's (passes and the executable's plan);
// trace time is the first call less compile time and less a replay (the run itself).
void measure_scaling(int target, int repeats) {
  Tensor x = uniform({1}, 1);
  std::vector<double> trace, compile_time, remaining;
  std::map<std::string, std::vector<double>> pass_times;
  int recorded = 0, kept = 0;
  for (int r = 0; r < repeats; ++r) {
    auto f = compile([&](const Tensor& t) { return long_chain(t, target, recorded); });
    double t0 = bench::now_us();
    f(x);
    double t1 = bench::now_us();
    f(x);
    double t2 = bench::now_us();
    Report report = f.report();
    const GraphInfo& info = report.graphs.at(0);
    double compile_us = info.compile_ms * 1000;
    trace.push_back(t1 - t0 - compile_us - (t2 - t1));
    compile_time.push_back(compile_us);
    for (const auto& [pass, ms] : info.pass_ms) pass_times[pass].push_back(ms * 1000);
    kept = info.op_count;
  }
  std::printf("%8d %8d %12.3f %12.3f", recorded, kept, bench::median(trace) / recorded,
              bench::median(compile_time) / recorded);
  for (const char* pass : {"constant-fold", "simplify", "cse", "dce"})
    std::printf(" %13.3f", bench::median(pass_times[pass]) / recorded);
  std::printf("\n");
}

void per_call_table() {
  std::printf("ember overhead benchmark (backend: reference interpreter; 1 thread of dispatch)\n");
  std::printf("%-22s %5s %9s %14s %14s %16s %12s\n", "program", "ops", "elements", "trace+compile", "compiled call",
              "eager call", "speedup");
  std::printf("%-22s %5s %9s %14s %14s %16s %12s\n", "", "", "", "us per op", "us (median)", "us (median)",
              "eager/comp");
  measure("1-element, 1 op", 1, 1);
  measure("1-element, 50 ops", 50, 1);
  measure("4096 elements, 50 ops", 50, 4096);
}

}  // namespace

// `--scaling` runs only the scaling table (handy under a profiler).
int main(int argc, char** argv) {
  bool scaling_only = argc > 1 && std::string(argv[1]) == "--scaling";
  if (!scaling_only) per_call_table();
  std::printf("\nscaling with graph size (a chain every pass works on; us per recorded node)\n");
  std::printf("%8s %8s %12s %12s %13s %13s %13s %13s\n", "recorded", "kept", "trace", "compile",
              "constant-fold", "simplify", "cse", "dce");
  for (int target : {1000, 4000, 16000}) measure_scaling(target, target >= 16000 ? 3 : 5);
  return 0;
}

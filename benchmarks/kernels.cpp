// Generated CPU kernels against ember's interpreter and the machine's memory bandwidth.
//
// For each elementwise microbenchmark of BENCHMARKS.md (on tensors far larger than the caches):
// the compiled call and the interpreter's, interleaved, medians; GB/s of compulsory traffic and
// its share of the copy bandwidth measured in the same run; the kernel's cold compile time.
// Then the warm start: a second process with the same disk cache loads the kernels instead.
// Usage: ember_bench_kernels [--threads N] [--rows R] (default: all threads, R = 16384 of 8192
// floats, 512 MiB a tensor). PyTorch eager and torch.compile come with the Python bridge.
#include <ember/ember.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "benchmarks/timing.h"
#include "runtime/thread_pool.h"

using namespace ember;

namespace {

struct Bench {
  const char* name;
  int tensors_read;  // full-size tensors read (a broadcast bias counts as none)
  Tensor (*fn)(const Tensor& x, const Tensor& y, const Tensor& bias);
};

const Bench kBenches[] = {
    {"gelu", 1, [](const Tensor& x, const Tensor&, const Tensor&) { return gelu(x); }},
    {"bias + gelu", 1, [](const Tensor& x, const Tensor&, const Tensor& b) { return gelu(x + b); }},
    {"add + relu", 2, [](const Tensor& x, const Tensor& y, const Tensor&) { return relu(x + y); }},
    {"10-op chain", 1,
     [](const Tensor& x, const Tensor&, const Tensor& b) {
       Tensor t = x;
       for (int i = 0; i < 5; ++i) t = t * 0.5 + b;
       return t;
     }},
    {"softmax", 1, [](const Tensor& x, const Tensor&, const Tensor&) { return softmax(x, -1); }},
    {"layer_norm", 1, [](const Tensor& x, const Tensor&, const Tensor& b) { return layer_norm(x, {x.sizes().back()}, b, b); }},
    {"rms_norm", 1, [](const Tensor& x, const Tensor&, const Tensor& b) { return rms_norm(x, {x.sizes().back()}, b, 1e-6); }},
};

// GB/s of a copy (read + write counted), the ceiling the elementwise kernels are measured against.
double copy_bandwidth(int64_t bytes) {
  std::vector<char> a(bytes, 1), b(bytes, 2);
  std::vector<double> t;
  for (int i = 0; i < 5; ++i) {
    double t0 = bench::now_us();
    parallel_for(bytes, 1 << 22, [&](int64_t lo, int64_t hi) { std::memcpy(b.data() + lo, a.data() + lo, hi - lo); });
    t.push_back(bench::now_us() - t0);
  }
  return 2.0 * bytes / bench::median(t) / 1e3;
}

double max_difference(const Tensor& a, const Tensor& b) {
  double d = 0;
  Array x = a.array(), y = b.array();
  for (int64_t i = 0; i < x.numel(); i += 997) d = std::max(d, std::abs(x.get(i) - y.get(i)));
  return d;
}

int warm_start(const char* self, const std::string& cache) {
  // The same kernels in a new process: loaded from the disk cache, not compiled.
  double t0 = bench::now_us();
  pid_t pid = fork();
  if (pid == 0) {
    setenv("EMBER_CACHE_DIR", cache.c_str(), 1);
    execl(self, self, "--compile-only", static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  std::printf("\nwarm start: a new process compiled all %zu graphs in %.1f ms in all (process start included)\n",
              std::size(kBenches), (bench::now_us() - t0) / 1e3);
  return status;
}

// Compiles each benchmark once on small inputs and prints what the kernels cost.
void compile_all(bool quiet) {
  Tensor x = uniform({64, 64}, 1), y = uniform({64, 64}, 2), b = uniform({64}, 3);
  for (const Bench& bench : kBenches) {
    auto f = compile(bench.fn);
    f(x, y, b);
    const GraphInfo g = f.report().graphs.at(0);  // a copy: report() returns by value
    if (!quiet)
      std::printf("  %-14s %d kernel(s): %d compiled in %.1f ms, %d from the disk cache\n", bench.name, g.kernels,
                  g.kernels_compiled, g.kernel_compile_ms, g.kernels_from_disk);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int64_t rows = 16384, cols = 8192;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) setenv("EMBER_NUM_THREADS", argv[++i], 1);
    else if (!std::strcmp(argv[i], "--rows") && i + 1 < argc) rows = std::atoll(argv[++i]);
    else if (!std::strcmp(argv[i], "--compile-only")) {
      compile_all(false);
      return 0;
    }
  }
  std::string cache = "/tmp/ember-bench-cache-" + std::to_string(getpid());
  std::filesystem::remove_all(cache);
  setenv("EMBER_CACHE_DIR", cache.c_str(), 1);
  std::printf("generated kernels, float32 [%lld, %lld] (%.0f MiB a tensor), %d thread(s)\n", static_cast<long long>(rows),
              static_cast<long long>(cols), rows * cols * 4 / 1048576.0, num_threads());
  std::printf("cold compile (empty disk cache):\n");
  compile_all(false);
  double copy = copy_bandwidth(rows * cols * 4);
  std::printf("\ncopy bandwidth, measured now: %.1f GB/s (read + write)\n\n", copy);
  std::printf("| benchmark | interpreter ms | generated ms | speedup | generated GB/s | share of copy |\n");
  std::printf("|---|---|---|---|---|---|\n");
  Tensor x = uniform({rows, cols}, 1), y = uniform({rows, cols}, 2), b = uniform({cols}, 3);
  for (const Bench& bench : kBenches) {
    auto f = compile(bench.fn);
    Tensor want = bench.fn(x, y, b);
    if (max_difference(f(x, y, b), want) > 1e-4) {
      std::printf("| %s | wrong result: no speed |\n", bench.name);
      continue;
    }
    // The interpreter is slow at this size: fewer repeats of it, outside the interleaving.
    double interpreter_us = bench::interleaved({[&] { bench.fn(x, y, b); }}, 1, 3)[0];
    std::vector<double> us = {interpreter_us, bench::interleaved({[&] { f(x, y, b); }}, 3, 15)[0]};
    double bytes = (bench.tensors_read + 1.0) * rows * cols * 4;
    double gbs = bytes / us[1] / 1e3;
    std::printf("| %s | %.1f | %.1f | %.2fx | %.1f | %.0f%% |\n", bench.name, us[0] / 1e3, us[1] / 1e3, us[0] / us[1], gbs,
                100 * gbs / copy);
  }
  int status = warm_start(argv[0], cache);
  std::filesystem::remove_all(cache);
  return status == 0 ? 0 : 1;
}

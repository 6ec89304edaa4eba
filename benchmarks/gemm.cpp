// float32 GEMM by route, outside any plan: oneDNN, OpenBLAS (on ember's pool), ember's own
// ([Note: ember's own GEMM] in codegen/cpu/gemm.h), and PyTorch's MKL where EMBER_MKL_LIBRARY
// names a library that has it. Interleaved medians (timing.h), as milliseconds and GFLOP/s, to
// read against ember_bench_fma_peak's ceiling on the same threads. The arrays are reused from call
// to call, so no call pays for fresh pages (a call through PyTorch does, for its output).
//
//     ember_bench_gemm [threads [MxNxK[t] ...]]
//
// Shapes on the command line replace the default list; a trailing `t` stores B as [N, K].
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include "benchmarks/timing.h"
#include "codegen/cpu/jit.h"
#include "runtime/kernels/kernel.h"
#include "runtime/kernels/mkl.h"
#include "runtime/step_settings.h"
#include "runtime/thread_pool.h"

using namespace ember;

namespace {

struct GemmShape {
  const char* what;
  int64_t m, n, k;
  bool trans_b;
};

void run(const GemmShape& s, const std::vector<GemmRoute>& routes) {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  std::vector<float> a(s.m * s.k), b(s.k * s.n), c(s.m * s.n);
  for (auto* v : {&a, &b})
    for (float& x : *v) x = normal(rng);
  std::vector<std::function<void()>> calls;
  for (GemmRoute route : routes)
    calls.push_back([&, route] {
      ScopedStepSettings settings(StepSettings{.gemm = route});
      kernels::gemm(a.data(), b.data(), c.data(), s.m, s.n, s.k, s.trans_b, 0.0f, false);
    });
  const double flops = 2.0 * s.m * s.n * s.k;
  const int repeats = flops > 1e9 ? 15 : 100;
  std::vector<double> us = bench::interleaved(calls, 3, repeats);
  std::printf("| %s |", s.what);
  for (double t : us) std::printf(" %.3f (%.0f) |", t / 1e3, flops / t / 1e3);
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 0;
  std::unique_ptr<ThreadCountForCall> count;
  if (threads > 0) count = std::make_unique<ThreadCountForCall>(threads);
  std::vector<GemmRoute> routes{GemmRoute::OneDnn, GemmRoute::Blas};
  // (Asking the code generator loads it, and loading it installs ember's own GEMM.)
  if (codegen::cpu::jit_available() && kernels::has_own_gemm()) routes.push_back(GemmRoute::Generated);
  if (kernels::mkl_available()) routes.push_back(GemmRoute::Mkl);
  std::printf("float32 GEMM, %d thread(s); ms per call (GFLOP/s), interleaved medians\n\n| shape |", num_threads());
  for (GemmRoute r : routes) std::printf(" %s |", route_name(r));
  std::printf("\n|---|");
  for (size_t i = 0; i < routes.size(); ++i) std::printf("---|");
  std::printf("\n");
  const GemmShape shapes[] = {{"1024^3", 1024, 1024, 1024, false},
                          {"256x4096x1024, B stored [N, K] (a linear layer)", 256, 4096, 1024, true},
                          {"200x1024x256, B stored [N, K]", 200, 1024, 256, true},
                          {"128x768x768", 128, 768, 768, false},
                          {"32x192x64", 32, 192, 64, false},
                          {"512x8x4608 (a 3x3 convolution at 2 x 2, two images)", 512, 8, 4608, false},
                          {"512x4x4608 (the same, one image)", 512, 4, 4608, false},
                          {"8x4096x1024, B stored [N, K] (a decode step's linear layer)", 8, 4096, 1024, true},
                          {"8x1024x1024, B stored [N, K]", 8, 1024, 1024, true}};
  if (argc > 2) {
    for (int i = 2; i < argc; ++i) {
      GemmShape s{argv[i], 0, 0, 0, false};
      char trans = 0, extra = 0;
      const int read = std::sscanf(argv[i], "%" SCNd64 "x%" SCNd64 "x%" SCNd64 "%c%c", &s.m, &s.n, &s.k, &trans, &extra);
      if (read < 3 || read > 4 || (read == 4 && trans != 't') || s.m < 0 || s.n < 0 || s.k < 0) {
        std::fprintf(stderr, "ember_bench_gemm: a shape is MxNxK or MxNxKt, not %s\n", argv[i]);
        return 2;
      }
      s.trans_b = trans == 't';
      run(s, routes);
    }
    return 0;
  }
  for (const GemmShape& s : shapes) run(s, routes);
}

// The measured FP32 FMA ceiling of this machine, the figure BENCHMARKS.md asks GEMMs to be
// measured against. A nominal ceiling (lanes x FMA pipes x the clock /proc/cpuinfo reports) is
// wrong both ways: AMD's Zen 4 runs a 512-bit FMA as two 256-bit halves (half the nominal
// AVX-512 rate), and cores boost above their nominal clock.
//
// Each thread runs 16 independent chains of vector FMAs, more than the pipes x latency of any
// current core needs to stay busy, over registers only. Prints one line: GFLOP/s over all threads,
// the best of several runs.
//
//     ember_bench_fma_peak [threads]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

constexpr int kChains = 16;
constexpr long kSteps = 20'000'000;

template <int Lanes>
struct Vec {
  typedef float type __attribute__((vector_size(Lanes * 4)));
};

// One thread's work; returns a value that depends on every chain so that none is optimised away.
// Inlined into the callers below, which carry the instruction sets.
template <int Lanes>
__attribute__((always_inline)) inline float chains() {
  using V = typename Vec<Lanes>::type;
  V acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = V{} + 1.0f + c * 1e-3f;
  const V scale = V{} + 0.999999f, shift = V{} + 1e-7f;
  for (long s = 0; s < kSteps; ++s) {
#pragma GCC unroll 16
    for (int c = 0; c < kChains; ++c) acc[c] = acc[c] * scale + shift;  // contracted into an FMA
  }
  float sum = 0;
  for (int c = 0; c < kChains; ++c) sum += acc[c][0];
  return sum;
}

__attribute__((target("avx512f,fma"))) float chains_avx512() { return chains<16>(); }
__attribute__((target("avx2,fma"))) float chains_avx2() { return chains<8>(); }

int lanes() {
  if (__builtin_cpu_supports("avx512f")) return 16;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 8;
  return 0;
}

double run(int threads, int width) {
  std::vector<std::thread> pool;
  std::vector<float> sink(threads);
  auto start = std::chrono::steady_clock::now();
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] { sink[t] = width == 16 ? chains_avx512() : chains_avx2(); });
  for (auto& th : pool) th.join();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (sink[0] == 12345.f) std::puts("");  // keeps the results alive
  return threads * double(kSteps) * kChains * width * 2 / seconds / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = argc > 1 ? std::atoi(argv[1]) : int(std::thread::hardware_concurrency());
  int width = lanes();
  if (threads < 1 || width == 0) {
    std::fprintf(stderr, "usage: ember_bench_fma_peak [threads >= 1]; needs AVX2 and FMA\n");
    return 2;
  }
  double best = 0;
  for (int i = 0; i < 3; ++i) best = std::max(best, run(threads, width));
  std::printf("%.1f\n", best);
  return 0;
}

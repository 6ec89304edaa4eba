#include "tests/unit/cuda_device.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <thread>
#include <atomic>

#include "codegen/cuda/cuda_kernel.h"
#include "codegen/cuda/emit_cuda.h"
#include "ir/error.h"
#include "runtime/cuda_driver.h"

namespace ember::cuda_check {

namespace {

using codegen::LaunchRecord;

// One batch's kernels loaded on the device: the module and each kernel's function.
struct LoadedBatch {
  std::unique_ptr<cuda::Module> module;
  std::vector<void*> functions;  // per kernel of the batch
};

LoadedBatch load_batch(const std::vector<Kernel>& kernels, size_t first, const std::string& arch) {
  LoadedBatch out;
  codegen::cuda::CubinBuild build =
      codegen::cuda::cubin_for(batch_source(kernels, first), "batch" + std::to_string(first / kBatch), arch);
  out.module = std::make_unique<cuda::Module>(*build.image);
  for (size_t i = first; i < std::min(kernels.size(), first + kBatch); ++i)
    out.functions.push_back(out.module->function(kernels[i].name));
  return out;
}

void launch(const Kernel& k, void* function, const std::vector<uint64_t>& addresses, const std::vector<int64_t>& meta) {
  std::vector<uint64_t> param = codegen::cuda::kernel_param(addresses, meta);
  cuda::launch(function, codegen::cuda::grid_of(k.spec, meta.data()), codegen::cuda::kBlockThreads, param.data(),
               param.size() * sizeof(uint64_t));
}

std::string replay(const Kernel& k, void* function, const LaunchRecord& r) {
  std::vector<Guarded> memory;
  for (const auto& op : r.inputs) memory.emplace_back(op.bytes);
  for (const auto& op : r.outputs) memory.emplace_back(std::string(op.bytes.size(), '\0'));
  std::vector<cuda::DeviceBuffer> device;
  std::vector<uint64_t> addresses;
  for (Guarded& m : memory) {
    device.emplace_back(m.whole().size());
    cuda::copy_to_device(device.back().address(), m.whole().data(), m.whole().size());
    addresses.push_back(device.back().address() + Guarded::kGuard);
  }
  launch(k, function, addresses, r.meta);
  cuda::synchronize();
  for (size_t m = 0; m < memory.size(); ++m) cuda::copy_to_host(memory[m].whole().data(), device[m].address(), device[m].bytes());
  return judge(k, r, memory);
}

// Compiles every batch's cubin on all cores first (NVRTC takes about 15 ms a kernel), so that
// the replay finds them in the cubin cache.
void compile_all(const std::vector<Kernel>& kernels, const std::string& arch) {
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t first; (first = kBatch * next++) < kernels.size();) {
      try {
        codegen::cuda::cubin_for(batch_source(kernels, first), "batch" + std::to_string(first / kBatch), arch);
      } catch (const std::exception&) {
        // load_batch compiles it again and reports the error
      }
    }
  };
  std::vector<std::thread> threads(std::max(1u, std::thread::hardware_concurrency()));
  for (std::thread& t : threads) t = std::thread(work);
  for (std::thread& t : threads) t.join();
}

}  // namespace

int replay_on_device(const std::vector<Kernel>& kernels) {
  cuda::DeviceInfo device = cuda::device();
  std::printf("device: %s (%s, %d SMs, %.0f GiB), driver %d\n", device.name.c_str(), device.arch().c_str(),
              device.multiprocessors, device.memory / 1073741824.0, device.driver_version);
  auto start = std::chrono::steady_clock::now();
  compile_all(kernels, device.arch());
  std::printf("NVRTC: %zu kernels compiled for %s in %.1f s on %u threads\n", kernels.size(), device.arch().c_str(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
              std::max(1u, std::thread::hardware_concurrency()));
  int failures = 0, launches = 0, mismatches = 0;
  for (size_t first = 0; first < kernels.size(); first += kBatch) {
    LoadedBatch batch;
    try {
      batch = load_batch(kernels, first, device.arch());
    } catch (const std::exception& e) {
      std::printf("FAIL: kernels %zu.. did not compile or load: %s\n", first, e.what());
      ++failures;
      continue;
    }
    for (size_t i = first; i < std::min(kernels.size(), first + kBatch); ++i) {
      for (const LaunchRecord* r : kernels[i].launches) {
        ++launches;
        std::string why;
        try {
          why = replay(kernels[i], batch.functions[i - first], *r);
        } catch (const std::exception& e) {
          // A fault leaves the context unusable: nothing after it can be trusted.
          std::printf("FAIL %s: %s\n%s\n", kernels[i].name.c_str(), e.what(), r->spec.c_str());
          return failures + 1;
        }
        if (why.empty()) continue;
        if (++mismatches <= 10) std::printf("MISMATCH %s: %s\n%s\n", kernels[i].name.c_str(), why.c_str(), r->spec.c_str());
      }
    }
  }
  std::printf("on the device: %d launches of %zu kernels, %d mismatches\n", launches, kernels.size(), mismatches);
  return failures + mismatches;
}

namespace {

constexpr int64_t kBenchElements = int64_t{1} << 26;

// The device's copy bandwidth, bytes read and written per second, by a 1 GiB device-to-device copy.
double copy_bandwidth() {
  const size_t bytes = size_t{1} << 30;
  cuda::DeviceBuffer a(bytes), b(bytes);
  cuda::fill_bytes(a.address(), 1, bytes);
  cuda::copy_on_device(b.address(), a.address(), bytes);
  cuda::Timer timer;
  timer.start();
  for (int i = 0; i < 10; ++i) cuda::copy_on_device(b.address(), a.address(), bytes);
  double ms = timer.stop();
  return 2.0 * bytes * 10 / (ms / 1e3);
}

// Fills `bytes` of device memory at `dst` with copies of `pattern`, doubling on the device.
void tile(uint64_t dst, const std::string& pattern, size_t bytes) {
  if (pattern.empty() || bytes == 0) return;
  size_t filled = std::min(pattern.size(), bytes);
  cuda::copy_to_device(dst, pattern.data(), filled);
  while (filled < bytes) {
    size_t n = std::min(filled, bytes - filled);
    cuda::copy_on_device(dst + filled, dst, n);
    filled += n;
  }
}

const char* kind_of(const codegen::KernelSpec& spec) {
  return !spec.reduces() ? "elementwise" : spec.columns ? "column" : "row";
}

struct BenchRow {
  std::string name, kind;
  int64_t elements = 0;
  double bytes = 0, ms = 0, fraction = 0;
};

// Times one kernel grown to about kBenchElements; nothing when it cannot be grown (one row).
std::optional<BenchRow> bench_one(const Kernel& k, void* function, double copy_bw) {
  const LaunchRecord& r = *k.launches.front();
  int rank = k.spec.rank;
  std::vector<int64_t> meta = r.meta;
  int64_t elements = 1;
  for (int d = 0; d < rank; ++d) elements *= meta[d];
  bool one_block = k.spec.reduces() && !k.spec.columns && rank == 1;
  if (elements == 0 || one_block) return std::nullopt;
  meta[0] *= std::max<int64_t>(1, kBenchElements / elements);  // strides stay valid: dim 0 only grows
  std::vector<cuda::DeviceBuffer> device;
  std::vector<uint64_t> addresses;
  BenchRow row{k.name, kind_of(k.spec)};
  row.elements = elements * (meta[0] / r.meta[0]);
  size_t operands = r.inputs.size() + r.outputs.size();
  for (size_t m = 0; m < operands; ++m) {
    bool input = m < r.inputs.size();
    DType dt = input ? r.inputs[m].dtype : r.outputs[m - r.inputs.size()].dtype;
    size_t bytes = codegen::operand_extent(meta, rank, static_cast<int>(m)) * itemsize(dt);
    device.emplace_back(bytes);
    if (input) tile(device.back().address(), r.inputs[m].bytes, bytes);
    addresses.push_back(device.back().address());
    row.bytes += bytes;
  }
  for (int i = 0; i < 2; ++i) launch(k, function, addresses, meta);
  cuda::Timer timer;
  timer.start();
  for (int i = 0; i < 10; ++i) launch(k, function, addresses, meta);
  row.ms = timer.stop() / 10;
  row.fraction = row.bytes / (row.ms / 1e3) / copy_bw;
  return row;
}

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * (v.size() - 1))];
}

}  // namespace

void bench_on_device(const std::vector<Kernel>& kernels, size_t count, const std::string& table) {
  cuda::DeviceInfo device = cuda::device();
  double copy_bw = copy_bandwidth();
  std::printf("copy bandwidth: %.0f GB/s (bytes read and written)\n", copy_bw / 1e9);
  size_t step = std::max<size_t>(1, kernels.size() / std::max<size_t>(count, 1));
  std::vector<BenchRow> rows;
  for (size_t first = 0; first < kernels.size(); first += kBatch) {
    bool wanted = false;
    for (size_t i = first; i < std::min(kernels.size(), first + kBatch); ++i) wanted = wanted || i % step == 0;
    if (!wanted) continue;
    LoadedBatch batch = load_batch(kernels, first, device.arch());
    for (size_t i = first; i < std::min(kernels.size(), first + kBatch); ++i)
      if (i % step == 0)
        if (auto row = bench_one(kernels[i], batch.functions[i - first], copy_bw)) rows.push_back(*row);
  }
  std::ofstream out(table);
  out << "| kernel | kind | elements | MB moved | us | of copy bandwidth |\n|---|---|---|---|---|---|\n";
  std::map<std::string, std::vector<double>> by_kind;
  for (const BenchRow& r : rows) {
    char line[256];
    std::snprintf(line, sizeof line, "| %s | %s | %lld | %.0f | %.1f | %.0f %% |\n", r.name.c_str(), r.kind.c_str(),
                  static_cast<long long>(r.elements), r.bytes / 1e6, r.ms * 1e3, 100 * r.fraction);
    out << line;
    by_kind[r.kind].push_back(r.fraction);
  }
  std::printf("%-12s %8s %10s %10s %10s\n", "kernels", "timed", "median", "p10", "p90");
  for (const auto& [kind, f] : by_kind)
    std::printf("%-12s %8zu %9.0f%% %9.0f%% %9.0f%%\n", kind.c_str(), f.size(), 100 * quantile(f, 0.5),
                100 * quantile(f, 0.1), 100 * quantile(f, 0.9));
}

}  // namespace ember::cuda_check

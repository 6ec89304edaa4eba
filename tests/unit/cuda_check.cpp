// ember_cuda_check <dir> [--compile-sample N]: the CUDA code generator against every generated
// CPU kernel that the tests launched, without a GPU (docs/testing.md). The unit tests run with
// EMBER_RECORD_LAUNCHES=<dir> (codegen/launch_record.h); for each kernel spec recorded there:
//   1. its CUDA source (codegen/cuda/emit_cuda.h) compiles with NVRTC for sm_80 and sm_90, in
//      batches of kernels per program, and ptxas (from /usr/local/cuda, when present) accepts
//      the PTX; the compile time per kernel is reported. With --compile-sample N, every N-th
//      spec only (make test, which has minutes; make cuda-check compiles them all);
//   2. the source, compiled by the host compiler with tests/unit/cuda_emulation.h, replays each
//      recorded launch on the CPU (blocks of 256 threads as coroutines, barriers and warp
//      shuffles emulated), and its outputs must be the recorded CPU kernel's within the
//      tolerances below, which the op sweep and the fuzzers held to their references.
// The records stay until the next test run begins (make cuda-check reads them again).
// With --device, on a machine with a GPU (tests/cuda/device_check.sh), the launches replay on
// the device instead (cuda_device.h), and --bench N TABLE times N of the kernels grown large.
// Exit status 0 when every kernel compiled and every launch matched.
#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <mutex>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "codegen/cuda/emit_cuda.h"
#include "codegen/cuda/nvrtc.h"
#include "codegen/launch_record.h"
#include "ir/error.h"
#include "ir/sha256.h"
#include "runtime/element.h"
#include "tests/unit/cuda_check.h"
#include "tests/unit/cuda_device.h"

using namespace ember;
using namespace ember::codegen;
using namespace ember::cuda_check;

namespace {


// Runs f(0) .. f(n - 1) on two threads (NVRTC, the host compiler and the emulation are each
// safe to run twice at once).
void on_two_threads(size_t n, const std::function<void(size_t)>& f) {
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next++) < n;) f(i);
  };
  std::thread other(work);
  work();
  other.join();
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// ---- 1. NVRTC and ptxas

int check_compiles(const std::vector<Kernel>& kernels, const std::string& work) {
  std::string why;
  if (!cuda::nvrtc_available(&why)) {
    std::printf("FAIL: %s\n", why.c_str());
    return 1;
  }
  const std::string ptxas = "/usr/local/cuda/bin/ptxas";
  bool have_ptxas = access(ptxas.c_str(), X_OK) == 0;
  std::atomic<int> failures{0};
  std::mutex print;
  for (const char* arch : {"sm_80", "sm_90"}) {
    std::atomic<int64_t> us{0};
    size_t batches = (kernels.size() + kBatch - 1) / kBatch;
    on_two_threads(batches, [&](size_t batch) {
      size_t first = batch * kBatch;
      std::string source = batch_source(kernels, first);
      std::string base = work + "/" + arch + "-" + std::to_string(batch);
      try {
        cuda::Compiled c = cuda::nvrtc_compile(source, "batch" + std::to_string(batch), arch, false);
        us += static_cast<int64_t>(c.ms * 1e3);
        if (!have_ptxas) return;
        std::ofstream(base + ".ptx") << c.image;
        std::string command = ptxas + " -arch=" + arch + " " + base + ".ptx -o /dev/null 2>" + base + ".log";
        if (std::system(command.c_str()) != 0) {
          std::lock_guard<std::mutex> lock(print);
          std::printf("FAIL: ptxas rejected the PTX of kernels %zu.. for %s:\n%s\n", first, arch, slurp(base + ".log").c_str());
          ++failures;
        }
      } catch (const cuda::NvrtcError& e) {
        std::lock_guard<std::mutex> lock(print);
        std::printf("FAIL: %s\n", e.what());
        ++failures;
      }
    });
    double ms = us / 1e3;
    std::printf("NVRTC %s: %zu kernels for %s in %.1f s of compiling, %.1f ms a kernel%s\n", cuda::nvrtc_version().c_str(),
                kernels.size(), arch, ms / 1e3, kernels.empty() ? 0.0 : ms / kernels.size(),
                have_ptxas ? "; ptxas accepts the PTX" : "; ptxas not found, PTX not assembled");
  }
  return failures.load();
}

// ---- 2. the host compiler and the emulation

using Emulate = void (*)(void* const*, const long long*, long long, int, long long);

// Compiles the batches into shared libraries, two at a time; returns their paths ("" for a
// batch that failed, with its log printed).
std::vector<std::string> compile_emulated(const std::vector<Kernel>& kernels, const std::string& work) {
  std::vector<std::string> libraries;
  std::string header = std::string(EMBER_SOURCE_DIR) + "/tests/unit/cuda_emulation.h";
  for (size_t first = 0, batch = 0; first < kernels.size(); first += kBatch, ++batch) {
    std::string source = batch_source(kernels, first);
    std::string base = work + "/emulated" + std::to_string(batch);
    std::ofstream(base + ".cu") << source;
    libraries.push_back(base + ".so");
  }
  on_two_threads(libraries.size(), [&](size_t batch) {
    std::string base = work + "/emulated" + std::to_string(batch);
    std::string command = "c++ -std=c++17 -O0 -w -x c++ -DEMBER_CUDA_EMULATION -include " + header + " -shared -fPIC " +
                          base + ".cu -o " + base + ".so 2>" + base + ".log";
    if (std::system(command.c_str()) != 0) {
      std::printf("FAIL: the host compiler rejected %s.cu:\n%s\n", base.c_str(), slurp(base + ".log").substr(0, 4000).c_str());
      libraries[batch].clear();
    }
  });
  return libraries;
}

// How a launch is replayed: its operands one element off 16-byte alignment or not, and the
// longest row a warp folds (< 0: the kernel's own).
struct Variant {
  bool shifted = false;
  long long warp_row_limit = -1;
  std::string name() const {
    return shifted ? " (operands off 16-byte alignment)"
           : warp_row_limit == 0 ? " (a block per row)"
           : warp_row_limit > 0  ? " (a warp per row)"
                                 : "";
  }
};

// Replays one launch; returns "" or what differed.
std::string replay(const Kernel& k, const LaunchRecord& r, Emulate emulate, const Variant& v) {
  std::vector<Guarded> memory;  // each operand's bytes
  for (const auto& op : r.inputs) memory.emplace_back(op.bytes, v.shifted ? itemsize(op.dtype) : 0);
  for (const auto& op : r.outputs) memory.emplace_back(std::string(op.bytes.size(), '\0'), v.shifted ? itemsize(op.dtype) : 0);
  std::vector<void*> buffers;
  for (Guarded& m : memory) buffers.push_back(m.data());
  // Few small blocks: two warps each (the block reduction still crosses warps) and at most four of
  // them (the grid-stride loops take the rest), so the coroutines stay few.
  emulate(buffers.data(), reinterpret_cast<const long long*>(r.meta.data()), cuda::grid_of(k.spec, r.meta.data(), 4), 64,
          v.warp_row_limit);
  std::string why = judge(k, r, memory);
  return why.empty() ? why : why + v.name();
}

// Each path of a kernel runs: an elementwise kernel's vectors (aligned) and its scalar loop (not),
// a row kernel's warp per row and block per row.
std::string replay(const Kernel& k, const LaunchRecord& r, Emulate emulate) {
  std::vector<Variant> variants = {Variant{}};
  if (!k.spec.reduces()) variants = {Variant{}, Variant{true, -1}};
  else if (!k.spec.columns) variants = {Variant{false, std::numeric_limits<long long>::max()}, Variant{false, 0}};
  for (const Variant& v : variants)
    if (std::string why = replay(k, r, emulate, v); !why.empty()) return why;
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  size_t sample = 1, bench = 0;
  bool device = false;
  std::string table;
  bool ok = argc >= 2;
  for (int i = 2; ok && i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--compile-sample" && i + 1 < argc) sample = std::max(1, std::atoi(argv[++i]));
    else if (flag == "--device") device = true;
    else if (flag == "--bench" && i + 2 < argc) bench = std::max(1, std::atoi(argv[++i])), table = argv[++i];
    else ok = false;
  }
  if (!ok) {
    std::fprintf(stderr, "usage: ember_cuda_check <launch record dir> [--compile-sample N] [--device [--bench N TABLE]]\n");
    return 2;
  }
  auto start = std::chrono::steady_clock::now();
  std::string dir = argv[1];
  int bad = 0;
  std::vector<LaunchRecord> records = read_records(dir, &bad);
  std::map<std::string, Kernel> by_spec;
  int not_emitted = 0;
  for (const LaunchRecord& r : records) {
    auto it = by_spec.find(r.spec);
    if (it == by_spec.end()) {
      KernelSpec spec = parse_kernel_spec(r.spec);
      if (!cuda::can_emit_cuda(spec)) {
        ++not_emitted;
        continue;
      }
      it = by_spec.emplace(r.spec, Kernel{spec, "k_" + sha256_hex(r.spec).substr(0, 16), {}}).first;
    }
    it->second.launches.push_back(&r);
  }
  std::vector<Kernel> kernels;
  for (auto& [text, k] : by_spec) kernels.push_back(std::move(k));
  std::printf("%zu launches of %zu kernel specs recorded in %s (%d unreadable, %d specs without a CUDA form)\n",
              records.size(), kernels.size(), dir.c_str(), bad, not_emitted);
  if (kernels.empty()) {
    std::printf("FAIL: nothing to check: run the unit tests with EMBER_RECORD_LAUNCHES=%s first\n", dir.c_str());
    return 1;
  }
  if (device) {
    try {
      int failures = replay_on_device(kernels);
      if (bench) bench_on_device(kernels, bench, table);
      return failures == 0 ? 0 : 1;
    } catch (const ember::Error& e) {
      std::printf("FAIL: %s\n", e.what());
      return 1;
    }
  }
  std::string work = dir + "/work";
  std::filesystem::create_directories(work);
  std::vector<Kernel> sampled;
  for (size_t i = 0; i < kernels.size(); i += sample) sampled.push_back(kernels[i]);
  int failures = check_compiles(sampled, work);
  std::printf("compiled and assembled in %.1f s\n", seconds_since(start));

  auto emulation_start = std::chrono::steady_clock::now();
  std::vector<std::string> libraries = compile_emulated(kernels, work);
  double compile_s = seconds_since(emulation_start);
  auto replay_start = std::chrono::steady_clock::now();
  std::atomic<int> launches{0}, mismatches{0}, missing{0};
  std::mutex print;
  std::vector<void*> handles;
  for (const std::string& library : libraries)
    handles.push_back(library.empty() ? nullptr : dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL));
  on_two_threads(kernels.size(), [&](size_t i) {
    void* handle = handles[i / kBatch];
    auto emulate = handle ? reinterpret_cast<Emulate>(dlsym(handle, (kernels[i].name + "_emulate").c_str())) : nullptr;
    if (!emulate) {
      ++missing;
      return;
    }
    for (const LaunchRecord* r : kernels[i].launches) {
      ++launches;
      std::string why = replay(kernels[i], *r, emulate);
      if (why.empty()) continue;
      std::lock_guard<std::mutex> lock(print);
      if (++mismatches <= 10) std::printf("MISMATCH %s: %s\n%s\n", kernels[i].name.c_str(), why.c_str(), r->spec.c_str());
    }
  });
  failures += missing;
  if (missing) std::printf("FAIL: %d kernels have no emulated library\n", missing.load());
  std::printf("emulated: %d launches of %zu kernels, %d mismatches (host compile %.1f s, replays %.1f s, all %.1f s)\n",
              launches.load(), kernels.size(), mismatches.load(), compile_s, seconds_since(replay_start),
              seconds_since(start));
  return failures == 0 && mismatches == 0 ? 0 : 1;
}

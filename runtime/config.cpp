#include "runtime/config.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <string_view>

extern char** environ;

namespace ember::config {

namespace {

std::mutex& output_mutex() {
  static std::mutex m;
  return m;
}

void check_unknown_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (char** e = environ; e && *e; ++e) {
      std::string var(*e);
      // EMBER_FUZZ_* and EMBER_SWEEP_* belong to the test suites, not to the library.
      if (var.rfind("EMBER_", 0) != 0 || var.rfind("EMBER_FUZZ_", 0) == 0 || var.rfind("EMBER_SWEEP_", 0) == 0) continue;
      std::string name = var.substr(0, var.find('='));
      bool known = false;
      for (const Setting& s : settings()) known = known || name == s.name;
      if (!known) {
        std::string valid;
        for (const Setting& s : settings()) valid += std::string(valid.empty() ? "" : ", ") + s.name;
        warn("unknown setting " + name + " is ignored (valid: " + valid + ")");
      }
    }
  });
}

const char* raw(const char* name) {
  check_unknown_once();
  const char* v = std::getenv(name);
  return v ? v : "";
}

// Read on every call of a plan (EMBER_LOG=profile): no string is built.
bool in_list(const char* name, std::string_view item) {
  for (std::string_view list = raw(name); !list.empty();) {
    size_t comma = list.find(',');
    std::string_view entry = list.substr(0, comma);
    if (!entry.empty() && (entry == item || entry == "all")) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace

const std::vector<Setting>& settings() {
  static const std::vector<Setting> table = {
      {"EMBER_LOG", "comma list of: graph_breaks, recompiles, guards, passes, compile, plan, fusion, kernels, cache, autotune, cuda (or all)"},
      {"EMBER_DUMP_AFTER", "a pass name or all: print the IR after it, or (unchanged)"},
      {"EMBER_DUMP_DIR", "directory for dumps (default: stderr)"},
      {"EMBER_DISABLE_PASSES", "comma list of passes to skip"},
      {"EMBER_EXTRA_PASSES", "comma list of passes to run after each pipeline's own, in order"},
      {"EMBER_VERIFY", "1 to run the verifier between passes (default on in debug builds), 0 to skip"},
      {"EMBER_NUM_THREADS", "threads a kernel's loop may use, the caller included (default: the machine's)"},
      {"EMBER_ALLOCATOR_CACHE_MB", "freed large blocks kept for reuse, in MiB (default: a quarter of the memory)"},
      {"EMBER_TORCH_OUTPUT_MAX_MB", "through the PyTorch bridge, outputs up to this size come from PyTorch's allocator, larger ones from ember's (default 32)"},
      {"EMBER_CODEGEN", "0 to run every graph on the reference interpreter instead of generated kernels"},
      {"EMBER_CACHE_DIR", "on-disk cache directory (default ~/.cache/ember), or off"},
      {"EMBER_WARM_START", "0 to stop compiled modules from storing and reusing their traced first call (Python; the disk cache's \"warm\" entries)"},
      {"EMBER_CACHE_MAX_MB", "the disk cache's size limit per kind of entry, in MiB (default 1024)"},
      {"EMBER_PERF_MAP", "1 to name each loaded kernel in /tmp/perf-<pid>.map, for perf report"},
      {"EMBER_RECORD_LAUNCHES", "a directory: the first launch of each generated kernel is written there, to replay on another backend (tests/unit/cuda_check.cpp)"},
      {"EMBER_MKL_LIBRARY", "a library with MKL's sgemm_ (PyTorch's libtorch_cpu.so) to load for max-autotune's MKL GEMM route; by default the route exists only where PyTorch is loaded"},
      {"EMBER_NVRTC_LIBRARY", "the path of libnvrtc, when the CUDA code generator should not search for it"},
      {"EMBER_CUDA_DRIVER_LIBRARY", "the path of the CUDA driver library to load instead of libcuda.so.1"},
      {"EMBER_AUTOTUNE_BUDGET_S", "max-autotune's time per compiled graph, in seconds, when the options do not set it (default 30)"},
      {"EMBER_AUTOTUNE_SEARCH", "max-autotune's search when the options do not set it: auto, exhaustive, random or bayes"},
  };
  return table;
}

std::string get(const char* name) { return raw(name); }

bool log_enabled(std::string_view topic) { return in_list("EMBER_LOG", topic); }
bool pass_disabled(std::string_view pass) { return in_list("EMBER_DISABLE_PASSES", pass); }
bool dump_after(std::string_view pass) { return in_list("EMBER_DUMP_AFTER", pass); }

std::vector<std::string> extra_passes() {
  std::vector<std::string> names;
  std::stringstream ss(get("EMBER_EXTRA_PASSES"));
  for (std::string entry; std::getline(ss, entry, ',');)
    if (!entry.empty()) names.push_back(entry);
  return names;
}

bool verify_enabled() {
  std::string v = get("EMBER_VERIFY");
  if (!v.empty()) return v != "0";
#ifdef NDEBUG
  return false;
#else
  return true;
#endif
}

void log(const std::string& topic, const std::string& message) {
  std::lock_guard<std::mutex> lock(output_mutex());
  std::cerr << "[ember:" << topic << "] " << message << "\n";
}

void warn(const std::string& message) {
  std::lock_guard<std::mutex> lock(output_mutex());
  std::cerr << "[ember] warning: " << message << "\n";
}

void dump(const std::string& name, const std::string& text) {
  std::string dir = get("EMBER_DUMP_DIR");
  if (!dir.empty()) {
    std::error_code ignored;  // a directory that cannot be made fails the write below, which says so
    std::filesystem::create_directories(dir, ignored);
    std::ofstream out(dir + "/" + name);
    if (out << text) return;
    warn("could not write dump " + dir + "/" + name + "; printing it instead");
  }
  std::lock_guard<std::mutex> lock(output_mutex());
  std::cerr << "// ---- " << name << "\n" << text;
}

}  // namespace ember::config

#include "codegen/cpu/cpu_kernel.h"

#include <chrono>
#include <functional>
#include <mutex>
#include <unordered_map>

#include "codegen/cpu/emit_kernel.h"
#include "codegen/cpu/split_rows.h"
#include "codegen/launch_record.h"
#include "ir/sha256.h"
#include "runtime/config.h"
#include "runtime/disk_cache.h"
#include "runtime/thread_pool.h"

namespace ember::codegen::cpu {

namespace {

// Elements a thread should have at least, so that small tensors stay on one thread.
constexpr int64_t kGrainElements = 32768;

}  // namespace

CpuKernel::CpuKernel(KernelSpec spec, KernelFn fn, std::string name, KernelConfig config)
    : spec_(std::move(spec)), fn_(fn), name_(std::move(name)), config_(config),
      grain_(config.grain > 0 ? config.grain : kGrainElements), reduces_(spec_.reduces()),
      columns_(reduces_ && spec_.columns), split_rows_(splits_rows(spec_)), layout_(layout_of(spec_)) {}

void CpuKernel::run(std::span<const Array> inputs, std::span<const Array> outputs) const {
  // In buffers the thread keeps, so that a launch allocates nothing.
  thread_local std::vector<int64_t> meta;
  thread_local std::vector<void*> buffers;
  kernel_args(layout_, inputs, outputs, meta, buffers);
  if (record_settled_.load(std::memory_order_relaxed) || !wants_record(spec_)) {
    record_settled_.store(true, std::memory_order_relaxed);
    return launch(buffers.data(), meta.data());
  }
  LaunchRecord record = begin_record(spec_, meta, inputs);  // EMBER_RECORD_LAUNCHES
  launch(buffers.data(), meta.data());
  finish_record(record, outputs);
}

void CpuKernel::launch(void* const* b, const int64_t* m) const {
  if (columns_) return run_columns(b, m);
  const int rank = spec_.rank;
  KernelFn fn = fn_;
  int64_t inner = m[rank - 1], rows = 1;
  for (int d = 0; d + 1 < rank; ++d) rows *= m[d];
  // An empty row still has its reductions' values (a sum of nothing is 0).
  if (rows == 0 || (inner == 0 && !reduces_)) return;
  if (rows * std::max<int64_t>(inner, 1) < 2 * grain_ || num_threads() == 1) return fn(0, rows, 0, inner, b, m);
  if (split_rows_ && !config_.whole_rows && rows < num_threads()) {  // [Note: split row reductions]
    int64_t shares = std::min<int64_t>(num_threads(), rows * inner / grain_);
    if (shares >= 2) return run_split_rows(spec_, fn, rows, inner, shares, b, m);
  }
  if (rows >= num_threads() || reduces_) {
    parallel_for(rows, std::max<int64_t>(1, grain_ / std::max<int64_t>(inner, 1)),
                 [&](int64_t begin, int64_t end) { fn(begin, end, 0, inner, b, m); });
  } else {
    parallel_for(inner, grain_ / rows + 64,
                 [&](int64_t begin, int64_t end) { fn(0, rows, begin, end, b, m); });
  }
}

std::vector<Knob> CpuKernel::knobs() const {
  int w = vector_width(spec_);
  std::vector<Knob> knobs;
  if (!columns_) {
    Knob lanes{"lanes", {config_.lanes}};
    for (int n : {w / 2, w, 2 * w, 4 * w})
      if (n != default_lanes(spec_)) lanes.options.push_back(n);
    knobs.push_back(lanes);
  }
  // How the work splits over threads, where there are several: on one thread every choice runs
  // the same (a row max's 72 points at one thread were 12 distinct ones, each timed 6 times).
  const bool threads = num_threads() > 1;
  if (threads) knobs.push_back({"grain", {config_.grain, 8192, 131072}});
  if (reduces_) knobs.push_back({"fold_block", {config_.fold_block, 64, 1024}});
  // A reduction split over the threads or whole: splitting pays for combining the shares.
  if (threads && split_rows_ && !config_.whole_rows) knobs.push_back({"whole_rows", {0, 1}});
  if (columns_) knobs.push_back({"column_vectors", {config_.column_vectors, 2, 8}});
  return knobs;
}

std::shared_ptr<const KernelStep> CpuKernel::with(const std::string& choice) const {
  return cpu_kernel(spec_, choice.empty() ? config_ : KernelConfig::parse(choice)).kernel;
}

// A column kernel's launch: rows are the dims before the reduced one, each independent; so are the
// columns, which split over the threads when the rows are too few.
void CpuKernel::run_columns(void* const* b, const int64_t* m) const {
  const int rank = spec_.rank;
  int64_t rows = 1, down = m[rank - 2], inner = m[rank - 1];
  for (int d = 0; d + 2 < rank; ++d) rows *= m[d];
  if (rows == 0 || inner == 0) return;
  int64_t per_row = std::max<int64_t>(down, 1) * inner;
  KernelFn fn = fn_;
  if (rows * per_row < 2 * grain_ || num_threads() == 1) return fn(0, rows, 0, inner, b, m);
  if (rows >= num_threads()) {
    parallel_for(rows, std::max<int64_t>(1, grain_ / per_row), [&](int64_t begin, int64_t end) { fn(begin, end, 0, inner, b, m); });
  } else {
    int64_t grain = std::max<int64_t>(64, grain_ / (rows * std::max<int64_t>(down, 1)));
    parallel_for(inner, grain, [&](int64_t begin, int64_t end) { fn(0, rows, begin, end, b, m); });
  }
}

namespace {

void write_reproducer(const KernelSpec& spec, const std::string& mlir, const CodegenError& e) {
  if (config::get("EMBER_DUMP_DIR").empty()) return;
  std::string name = "failed-kernel-" + spec.hash().substr(0, 16);
  config::dump(name + ".spec", spec.str());
  config::dump(name + ".mlir", mlir);
  config::dump(name + ".error", std::string(e.what()) + "\ntarget: " + host_target() + "\n");
}

// EMBER_DUMP_AFTER=kernel-spec,mlir,mlir-lowered,llvm-ir,asm (or all) writes each stage.
void dump_stages(const std::string& name, const KernelSpec& spec, const std::string& mlir, const Stages& s) {
  if (config::dump_after("kernel-spec")) config::dump(name + ".spec", spec.str());
  if (config::dump_after("mlir")) config::dump(name + ".mlir", mlir);
  if (config::dump_after("mlir-lowered")) config::dump(name + ".lowered.mlir", s.mlir_lowered);
  if (config::dump_after("llvm-ir")) config::dump(name + ".ll", s.llvm_ir);
  if (config::dump_after("asm")) config::dump(name + ".s", s.assembly);
}

bool wants_stages() {
  for (const char* stage : {"mlir-lowered", "llvm-ir", "asm"})
    if (config::dump_after(stage)) return true;
  return false;
}

// A kernel stage is to be dumped: compile afresh, so that the dump is written even for a kernel
// that a cache holds.
bool dumping() {
  for (const char* stage : {"kernel-spec", "mlir", "mlir-lowered", "llvm-ir", "asm"})
    if (config::dump_after(stage)) return true;
  return false;
}

// Bumped whenever the emitter or the lowering changes what a spec compiles to: old entries of the
// disk cache must not be loaded for it.
constexpr const char* kCodegenVersion = "cpu-27";

// The disk cache's key of the code that `what` (a text that decides the MLIR) compiles to here.
std::string object_key(const std::string& what) {
  return sha256_hex(what + "\ntarget " + host_target() + "\nllvm " + llvm_version() + "\nember " + EMBER_VERSION +
                    "\ncodegen " + kCodegenVersion + "\n");
}

std::string disk_key(const KernelSpec& spec, const KernelConfig& config) {
  return object_key(spec.str() + "\nconfig " + config.code_str());
}

// The kernel from its object code on disk, or null (a bad object is a miss too).
KernelFn from_disk(const std::string& key, const std::string& name) {
  std::optional<std::string> object = disk_cache::load("kernels", key);
  if (!object) return nullptr;
  try {
    return load_kernel(*object, name);
  } catch (const CodegenError& e) {
    config::log("cache", std::string("a cached kernel would not load: ") + e.what());
    return nullptr;
  }
}

KernelFn compile_now(const KernelSpec& spec, const KernelConfig& config, const std::string& name,
                     const std::string& key) {
  std::string mlir = emit_kernel(spec, name, config);
  Stages stages;
  stages.keep = wants_stages();
  std::string object;
  KernelFn fn;
  try {
    object = compile_object(mlir, &stages);
    fn = load_kernel(object, name);
  } catch (const CodegenError& e) {
    write_reproducer(spec, mlir, e);
    throw;
  }
  dump_stages(name, spec, mlir, stages);
  if (config::log_enabled("kernels")) {
    std::string line = name + ":";
    for (const auto& [stage, ms] : stages.ms) line += " " + stage + " " + std::to_string(ms).substr(0, 5) + " ms";
    config::log("kernels", line);
  }
  disk_cache::store("kernels", key, object);
  return fn;
}

}  // namespace

const char* codegen_version() { return kCodegenVersion; }

void* jit_function(const std::string& what, const std::string& name, const std::function<std::string()>& emit) {
  static std::mutex mu;
  static std::unordered_map<std::string, void*> made;
  std::lock_guard<std::mutex> lock(mu);  // rare and quick after the first: one lock for all
  if (auto it = made.find(what); it != made.end()) return it->second;
  const std::string key = object_key(what);
  KernelFn fn = from_disk(key, name);
  if (!fn) {
    std::string object = compile_object(emit());
    fn = load_kernel(object, name);
    disk_cache::store("kernels", key, object);
  }
  void* address = reinterpret_cast<void*>(fn);
  made.emplace(what, address);
  return address;
}

KernelBuild cpu_kernel(const KernelSpec& spec, const KernelConfig& config) {
  // Configs that differ only in what is read at launch (the grain, whole rows) share their code:
  // the cache holds one kernel per code, and such a config gets its own kernel object around it.
  std::string code = config.code_str();
  if (config.sets_launch()) {
    KernelConfig same_code = config;
    same_code.grain = 0;
    same_code.whole_rows = 0;
    KernelBuild build = cpu_kernel(spec, same_code);
    build.kernel = std::make_shared<const CpuKernel>(spec, build.kernel->fn(), build.kernel->name(), config);
    return build;
  }
  static std::mutex mu;
  static std::unordered_map<std::string, std::shared_ptr<const CpuKernel>> cache;
  std::string key = code.empty() ? spec.hash() : sha256_hex(spec.hash() + " " + code);
  bool fresh = dumping();
  if (!fresh) {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache.find(key); it != cache.end()) return {it->second, false, false, 0};
  }
  auto start = std::chrono::steady_clock::now();
  std::string name = "ember_k_" + key.substr(0, 24);
  std::string stored_as = disk_key(spec, config);
  KernelBuild build;
  KernelFn fn = fresh ? nullptr : from_disk(stored_as, name);
  build.from_disk = fn != nullptr;
  if (!fn) {
    fn = compile_now(spec, config, name, stored_as);
    build.compiled = true;
  }
  build.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  auto kernel = std::make_shared<const CpuKernel>(spec, fn, name, config);
  std::lock_guard<std::mutex> lock(mu);
  auto [it, added] = cache.emplace(key, kernel);
  build.kernel = it->second;
  if (!added) build.compiled = build.from_disk = false;  // another thread got there first
  return build;
}

}  // namespace ember::codegen::cpu

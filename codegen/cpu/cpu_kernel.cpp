#include "codegen/cpu/cpu_kernel.h"

#include <chrono>
#include <mutex>
#include <unordered_map>

#include "codegen/cpu/emit_kernel.h"
#include "ir/sha256.h"
#include "runtime/config.h"
#include "runtime/disk_cache.h"
#include "runtime/thread_pool.h"

namespace ember::codegen::cpu {

namespace {

// Elements a thread should have at least, so that small tensors stay on one thread.
constexpr int64_t kGrainElements = 32768;

// The kernel's meta array ([Note: the CPU kernel ABI]): the domain's sizes, then each operand's
// strides over it, collapsed: size-1 dims other than the last are dropped (their index is always
// 0), and neighbours that every operand walks as one (stride[d-1] == stride[d] * size[d]) merge.
// The kernel's rank is kept with leading 1s. The last `tail` dims stay as they are: a row
// kernel's reduced last dim, a column kernel's reduced dim and the last. Done in place, in a
// buffer the thread keeps, so a launch allocates nothing.
void collapse(int64_t* meta, int rank, size_t operands, int tail) {
  int64_t* sizes = meta;
  auto stride = [&](size_t k, int d) -> int64_t& { return meta[rank * (1 + k) + d]; };
  int kept = 0;  // dims kept so far, packed at the front
  for (int d = 0; d < rank; ++d) {
    bool fixed = d >= rank - tail;
    if (sizes[d] == 1 && d != rank - 1 && !fixed) continue;
    if (kept > 0 && !fixed) {
      // Merge into the previous kept dim when every operand allows it. An operand that
      // broadcasts along both has stride 0 on both, and still does after the merge.
      bool mergeable = true;
      for (size_t k = 0; k < operands && mergeable; ++k) mergeable = stride(k, kept - 1) == stride(k, d) * sizes[d];
      if (mergeable) {
        sizes[kept - 1] *= sizes[d];
        for (size_t k = 0; k < operands; ++k) stride(k, kept - 1) = stride(k, d);
        continue;
      }
    }
    sizes[kept] = sizes[d];
    for (size_t k = 0; k < operands; ++k) stride(k, kept) = stride(k, d);
    ++kept;
  }
  int pad = rank - kept;  // shift right: leading dims of size 1
  for (int d = rank - 1; d >= 0; --d) {
    bool real = d >= pad;
    sizes[d] = real ? sizes[d - pad] : 1;
    for (size_t k = 0; k < operands; ++k) stride(k, d) = real ? stride(k, d - pad) : 0;
  }
}

}  // namespace

CpuKernel::CpuKernel(KernelSpec spec, KernelFn fn, std::string name, KernelConfig config)
    : spec_(std::move(spec)), fn_(fn), name_(std::move(name)), config_(config),
      grain_(config.grain > 0 ? config.grain : kGrainElements), reduces_(spec_.reduces()),
      columns_(reduces_ && spec_.columns) {
  std::vector<bool> line = spec_.line_values();
  for (int v : spec_.outputs) line_outputs_.push_back(reduces_ && line[v]);
}

void CpuKernel::run(std::span<const Array> inputs, std::span<const Array> outputs) const {
  const int rank = spec_.rank;
  const size_t operands = inputs.size() + outputs.size();
  thread_local std::vector<int64_t> meta_buffer;
  thread_local std::vector<void*> buffer_list;
  meta_buffer.assign(rank * (1 + operands), 0);
  buffer_list.clear();
  int64_t* meta = meta_buffer.data();
  // The domain: every operand broadcasts into it, right-aligned (a row output without its last
  // dim aligns with the rows; a column output keeps its reduced dim, or has rank 1).
  for (int d = 0; d < rank; ++d) meta[d] = 1;
  auto widen = [&](const std::vector<int64_t>& shape, int shift) {
    int lead = rank - shift - static_cast<int>(shape.size());
    for (int d = std::max(lead, 0); d < rank - shift; ++d)
      if (shape[d - lead] != 1) meta[d] = shape[d - lead];
  };
  for (const Array& a : inputs) widen(a.shape(), 0);
  for (size_t o = 0; o < outputs.size(); ++o)
    widen(outputs[o].shape(), line_outputs_[o] && !columns_ && outputs[o].rank() < rank ? 1 : 0);
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Array& a = inputs[k];
    int64_t* st = meta + rank * (1 + k);
    int lead = rank - static_cast<int>(a.rank());
    for (int d = lead; d < rank; ++d)
      if (!spec_.inputs[k].broadcast[d]) st[d] = a.strides()[d - lead];
    buffer_list.push_back(a.data());
  }
  for (size_t o = 0; o < outputs.size(); ++o) {
    int64_t* st = meta + rank * (1 + inputs.size() + o);
    int64_t step = 1;
    const int reduced = spec_.reduced_dim();
    for (int d = rank - 1; d >= 0; --d) {  // contiguous over the domain, or over its lines
      bool along_line = line_outputs_[o] && d == reduced;
      st[d] = along_line ? 0 : step;
      step *= along_line ? 1 : std::max<int64_t>(meta[d], 1);
    }
    buffer_list.push_back(outputs[o].data());
  }
  collapse(meta, rank, operands, columns_ ? 2 : reduces_ ? 1 : 0);

  KernelFn fn = fn_;
  void* const* b = buffer_list.data();
  const int64_t* m = meta;
  if (columns_) return run_columns(b, m);
  int64_t inner = meta[rank - 1], rows = 1;
  for (int d = 0; d + 1 < rank; ++d) rows *= meta[d];
  // An empty row still has its reductions' values (a sum of nothing is 0).
  if (rows == 0 || (inner == 0 && !reduces_)) return;
  if (rows * std::max<int64_t>(inner, 1) < 2 * grain_ || num_threads() == 1) return fn(0, rows, 0, inner, b, m);
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
  if (!columns_) knobs.push_back({"lanes", {config_.lanes, 2 * w, 4 * w, w / 2}});
  knobs.push_back({"grain", {config_.grain, 8192, 131072}});
  if (reduces_) knobs.push_back({"fold_block", {config_.fold_block, 64, 1024}});
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
constexpr const char* kCodegenVersion = "cpu-20";

std::string disk_key(const KernelSpec& spec, const KernelConfig& config) {
  return sha256_hex(spec.str() + "\nconfig " + config.code_str() + "\ntarget " + host_target() + "\nllvm " +
                    llvm_version() + "\nember " + EMBER_VERSION + "\ncodegen " + kCodegenVersion + "\n");
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

KernelBuild cpu_kernel(const KernelSpec& spec, const KernelConfig& config) {
  // Configs that differ only in what is read at launch (the grain) share their code: the cache
  // holds one kernel per code, and such a config gets its own kernel object around that code.
  std::string code = config.code_str();
  if (config.grain) {
    KernelConfig same_code = config;
    same_code.grain = 0;
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

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

// The domain's sizes and each operand's strides over it, collapsed: size-1 dims other than the
// last are dropped (their index is always 0), and neighbours that every operand walks as one
// (stride[d-1] == stride[d] * size[d]) merge. The kernel's rank is kept with leading 1s.
struct Layout {
  std::vector<int64_t> sizes;
  std::vector<std::vector<int64_t>> strides;  // per operand

  void collapse(int rank) {
    std::vector<int> keep;
    for (int d = 0; d < rank; ++d)
      if (sizes[d] != 1 || d == rank - 1) keep.push_back(d);
    std::vector<int64_t> s;
    std::vector<std::vector<int64_t>> st(strides.size());
    for (int d : keep) {
      s.push_back(sizes[d]);
      for (size_t k = 0; k < strides.size(); ++k) st[k].push_back(strides[k][d]);
    }
    // Merge from the inside out: dim i into dim i+1 when every operand allows it. An operand that
    // broadcasts along the last dim has stride 0 on both, so it still does after a merge.
    for (int i = static_cast<int>(s.size()) - 2; i >= 0; --i) {
      bool mergeable = true;
      for (size_t k = 0; k < st.size() && mergeable; ++k) mergeable = st[k][i] == st[k][i + 1] * s[i + 1];
      if (!mergeable) continue;
      s[i + 1] *= s[i];
      s.erase(s.begin() + i);
      for (auto& v : st) v.erase(v.begin() + i);
    }
    size_t pad = rank - s.size();
    sizes.assign(pad, 1);
    sizes.insert(sizes.end(), s.begin(), s.end());
    for (size_t k = 0; k < strides.size(); ++k) {
      strides[k].assign(pad, 0);
      strides[k].insert(strides[k].end(), st[k].begin(), st[k].end());
    }
  }
};

}  // namespace

void CpuKernel::run(std::span<const Array> inputs, std::span<const Array> outputs) const {
  const int rank = spec_.rank;
  std::vector<int64_t> domain = outputs[0].shape();
  if (domain.empty()) domain = {1};
  Layout layout{domain, {}};
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Array& a = inputs[k];
    std::vector<int64_t> st(rank, 0);
    int lead = rank - static_cast<int>(a.rank());
    for (int d = lead; d < rank; ++d)
      if (!spec_.inputs[k].broadcast[d]) st[d] = a.strides()[d - lead];
    layout.strides.push_back(std::move(st));
  }
  for (const Array& out : outputs) {
    std::vector<int64_t> st = Array::contiguous_strides(domain);
    layout.strides.push_back(std::move(st));
  }
  layout.collapse(rank);
  std::vector<int64_t> meta = layout.sizes;
  for (const auto& st : layout.strides) meta.insert(meta.end(), st.begin(), st.end());
  std::vector<void*> buffers;
  for (const Array& a : inputs) buffers.push_back(a.data());
  for (const Array& a : outputs) buffers.push_back(a.data());

  int64_t inner = layout.sizes[rank - 1], rows = 1;
  for (int d = 0; d + 1 < rank; ++d) rows *= layout.sizes[d];
  if (rows == 0 || inner == 0) return;
  KernelFn fn = fn_;
  void* const* b = buffers.data();
  const int64_t* m = meta.data();
  if (rows * inner < 2 * kGrainElements || num_threads() == 1) return fn(0, rows, 0, inner, b, m);
  if (rows >= num_threads()) {
    parallel_for(rows, std::max<int64_t>(1, kGrainElements / inner),
                 [&](int64_t begin, int64_t end) { fn(begin, end, 0, inner, b, m); });
  } else {
    parallel_for(inner, kGrainElements / rows + 64,
                 [&](int64_t begin, int64_t end) { fn(0, rows, begin, end, b, m); });
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

// Bumped whenever the emitter or the lowering changes what a spec compiles to: old entries of the
// disk cache must not be loaded for it.
constexpr const char* kCodegenVersion = "cpu-3";

std::string disk_key(const KernelSpec& spec) {
  return sha256_hex(spec.str() + "\ntarget " + host_target() + "\nllvm " + llvm_version() + "\nember " +
                    EMBER_VERSION + "\ncodegen " + kCodegenVersion + "\n");
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

KernelFn compile_now(const KernelSpec& spec, const std::string& name, const std::string& key) {
  std::string mlir = emit_kernel(spec, name);
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

KernelBuild cpu_kernel(const KernelSpec& spec) {
  static std::mutex mu;
  static std::unordered_map<std::string, std::shared_ptr<const CpuKernel>> cache;
  std::string key = spec.hash();
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache.find(key); it != cache.end()) return {it->second, false, false, 0};
  }
  auto start = std::chrono::steady_clock::now();
  std::string name = "ember_k_" + key.substr(0, 24);
  std::string stored_as = disk_key(spec);
  KernelBuild build;
  KernelFn fn = from_disk(stored_as, name);
  build.from_disk = fn != nullptr;
  if (!fn) {
    fn = compile_now(spec, name, stored_as);
    build.compiled = true;
  }
  build.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  auto kernel = std::make_shared<const CpuKernel>(spec, fn, name);
  std::lock_guard<std::mutex> lock(mu);
  auto [it, added] = cache.emplace(key, kernel);
  build.kernel = it->second;
  if (!added) build.compiled = build.from_disk = false;  // another thread got there first
  return build;
}

}  // namespace ember::codegen::cpu

// A generated CPU kernel as a plan step: compiled once per KernelSpec (the in-memory cache, keyed
// by the spec's hash, so every graph and size with the same structure shares it), launched with
// this call's sizes and strides on the thread pool.
#pragma once

#include <atomic>
#include <functional>
#include <memory>

#include "codegen/cpu/jit.h"
#include "codegen/cpu/kernel_config.h"
#include "codegen/kernel_args.h"
#include "codegen/kernel_spec.h"
#include "runtime/executable.h"

namespace ember::codegen::cpu {

class CpuKernel : public KernelStep {
 public:
  CpuKernel(KernelSpec spec, KernelFn fn, std::string name, KernelConfig config = {});
  CpuKernel(const CpuKernel&) = delete;  // layout_ points into spec_
  CpuKernel& operator=(const CpuKernel&) = delete;
  void run(std::span<const Array> inputs, std::span<const Array> outputs) const override;
  std::string name() const override { return name_; }
  // Elementwise kernels load every operand of a point before they store it (a row kernel stores
  // a row's outputs over several passes, which read its inputs again).
  bool may_overwrite_inputs() const override { return !reduces_; }
  // KernelConfig's fields that apply to this kernel: lanes (not a column kernel's), the grain,
  // a reduction's fold block, a column kernel's vectors per step, whole rows where rows split.
  std::vector<Knob> knobs() const override;
  std::shared_ptr<const KernelStep> with(const std::string& choice) const override;
  const KernelSpec& spec() const { return spec_; }
  // The launch arguments of `inputs` and `outputs` for fn(), for a caller that runs pieces of the
  // domain's rows itself (a GEMM's epilogue, codegen/cpu/gemm_epilogue.h): the last dim is kept.
  void bind(std::span<const Array> inputs, std::span<const Array> outputs, std::vector<int64_t>& meta,
            std::vector<void*>& buffers) const {
    kernel_args(layout_, inputs, outputs, meta, buffers, /*keep_last_dim=*/true);
  }
  const KernelConfig& config() const { return config_; }
  KernelFn fn() const { return fn_; }

 private:
  void launch(void* const* buffers, const int64_t* meta) const;
  void run_columns(void* const* buffers, const int64_t* meta) const;

  KernelSpec spec_;
  KernelFn fn_;
  std::string name_;
  KernelConfig config_;
  int64_t grain_;  // elements a thread's share holds at least
  bool reduces_;                    // a row kernel: threads split rows, each row whole (but see split_rows_)
  bool columns_;                    // a column kernel: reduces the dim before the last
  bool split_rows_;                 // few rows split their length over threads ([Note: split row reductions])
  KernelLayout layout_;             // how a launch's arguments are laid out (of spec_)
  // Whether launch recording (EMBER_RECORD_LAUNCHES) has nothing more to do for this kernel, so
  // that a launch asks it once, not once per launch (it hashes the spec).
  mutable std::atomic<bool> record_settled_{false};
};

struct KernelBuild {
  std::shared_ptr<const CpuKernel> kernel;
  bool compiled = false;   // compiled now
  bool from_disk = false;  // loaded from the on-disk cache
  double ms = 0;           // time to compile or load it
};

// The kernel for `spec`: from the memory cache, the disk cache ([Note: the disk cache], keyed by
// the spec, the target, the LLVM, ember and code generator versions), or compiled now (and
// stored). Throws CodegenError on a failure inside MLIR or LLVM, after writing a reproducer to
// EMBER_DUMP_DIR (when set).
// The code generator's version ("cpu-20"): part of every cache key of what it compiled or chose.
const char* codegen_version();

// A non-default `config` is another kernel, cached under its own key.
KernelBuild cpu_kernel(const KernelSpec& spec, const KernelConfig& config = {});

// The function `name` of MLIR that is not a KernelSpec's (ember's GEMM tiles, codegen/cpu/gemm.h):
// from memory, from the disk cache (keyed by `what`, a text that decides the MLIR, and by what a
// kernel's key holds of the target and versions), or compiled from emit() now and stored. The
// caller casts it to its own signature. Throws CodegenError.
void* jit_function(const std::string& what, const std::string& name, const std::function<std::string()>& emit);

}  // namespace ember::codegen::cpu

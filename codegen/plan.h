// A graph to a runnable plan: fusion groups (passes/fuse.h) become generated kernels, every
// other node an interpreter step of the same plan (no graph break).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/executable.h"

namespace ember::codegen {

struct CodegenStats {
  int kernels = 0;           // kernel steps in the plan
  int compiled = 0;          // kernels compiled now
  int from_disk = 0;         // kernels loaded from the on-disk cache (the rest were in memory)
  double compile_ms = 0;     // time spent compiling or loading them, summed over threads
  std::vector<std::string> failures;  // kernels that failed to compile (their groups run on the interpreter)
};

// Plans `graph` for the CPU. With EMBER_CODEGEN=0 (or nothing to fuse) every node runs on the
// interpreter. A kernel that fails inside MLIR or LLVM leaves its group to the interpreter,
// with a warning; `strict` raises the failure as an ember::Error(Internal) instead.
// `static_buffers`: reduce-overhead's static memory plan (runtime/executable.h).
// `choice_steps`: steps that hold more than one way to run, for max-autotune to measure: a float32
// matmul and the kernel that alone reads its product ([Note: GEMM epilogues] in
// codegen/cpu/gemm_epilogue.h), and a value stored by one kernel for others or recomputed
// in each ([Note: recompute or store] in codegen/cpu/recompute_choice.h).
std::shared_ptr<Executable> build_cpu_executable(std::unique_ptr<Graph> graph, CodegenStats& stats,
                                                 bool strict = false, bool static_buffers = false,
                                                 bool choice_steps = false);

// Whether the CPU backend can compute this node inside a kernel.
bool cpu_can_compute(const Node* n);

}  // namespace ember::codegen

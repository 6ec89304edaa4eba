// MLIR text to machine code for this CPU, and machine code into the process.
//
// compile_object() parses a kernel's MLIR, approximates math functions with polynomials (f32),
// lowers to the LLVM dialect, translates to LLVM IR, optimises it (O3) for the host CPU and its
// features, and returns the object file. load_kernel() links an object into the process-wide
// ORC JIT and returns its function. Keeping the object (not the IR) is what the on-disk cache
// stores, so a warm start runs no MLIR or LLVM passes. This is the one translation unit that
// includes MLIR and LLVM headers.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace ember::codegen::cpu {

// The kernel ABI (see [Note: the CPU kernel ABI] in emit_kernel.h).
using KernelFn = void (*)(int64_t row_begin, int64_t row_end, int64_t inner_begin, int64_t inner_end,
                          void* const* buffers, const int64_t* meta);

// A failure inside MLIR or LLVM, naming the stage ("parse", "lower", "translate", "emit", "load").
struct CodegenError : std::runtime_error {
  CodegenError(std::string stage, const std::string& message)
      : std::runtime_error("[codegen] " + stage + ": " + message), stage(std::move(stage)) {}
  std::string stage;
};

// The texts of each stage, for EMBER_DUMP_AFTER (kernel stages) and reproducers.
struct Stages {
  std::string mlir_lowered, llvm_ir, assembly;
  bool keep = false;  // fill them in (costs a second code generation for the assembly)
  std::vector<std::pair<std::string, double>> ms;  // time in each stage, in order
};

// Whether this build has the CPU code generator (CMake's EMBER_CPU_CODEGEN, on by default). A
// build without it (jit_absent.cpp: GPU machines with no LLVM) plans no CPU kernels: their ops
// run on the interpreter and the library kernels, and the two calls below throw CodegenError.
bool jit_available();

std::string compile_object(const std::string& mlir, Stages* stages = nullptr);
KernelFn load_kernel(const std::string& object, const std::string& name);

// The target triple, CPU name and features that objects are compiled for, and the LLVM version
// (parts of a kernel's cache key).
const std::string& host_target();
const char* llvm_version();

}  // namespace ember::codegen::cpu

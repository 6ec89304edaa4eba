// The CPU code generator's entry points in a build without it (cmake -DEMBER_CPU_CODEGEN=OFF,
// for GPU machines that have no LLVM or MLIR): jit_available() is false, so no plan asks for a
// CPU kernel, and anything that still asks is told why it cannot have one.
#include "codegen/cpu/jit.h"

namespace ember::codegen::cpu {

namespace {

[[noreturn]] void absent() {
  throw CodegenError("configure", "ember was built without the CPU code generator (EMBER_CPU_CODEGEN=OFF)");
}

}  // namespace

bool jit_available() { return false; }

std::string compile_object(const std::string&, Stages*) { absent(); }

KernelFn load_kernel(const std::string&, const std::string&) { absent(); }

const std::string& host_target() {
  static const std::string none = "none";
  return none;
}

const char* llvm_version() { return "none"; }

}  // namespace ember::codegen::cpu

// What tests/unit/cuda_check.cpp (the emulated replay) and cuda_device.cpp (the replay and the
// bandwidth benchmark on a real GPU) share: the kernels recorded, how a replayed launch is judged.
#pragma once

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "codegen/kernel_spec.h"
#include "codegen/launch_record.h"

namespace ember::cuda_check {

constexpr size_t kBatch = 150;  // kernels per NVRTC program and per host-compiled library

struct Kernel {
  codegen::KernelSpec spec;
  std::string name;
  std::vector<const codegen::LaunchRecord*> launches;
};

// The source of kernels [first, first + kBatch): the prelude once, then each kernel.
std::string batch_source(const std::vector<Kernel>& kernels, size_t first);

// An operand's bytes between two guards, so that a kernel that writes outside its operands is
// caught at its launch (a write past the end once corrupted the heap and crashed a later replay).
// `shift` moves the bytes off the 16-byte alignment the guard keeps, so that a replay also runs a
// kernel's path for arrays its vectors cannot load ([Note: flat elementwise kernels]).
class Guarded {
 public:
  static constexpr size_t kGuard = 256;
  static constexpr char kFill = '\xa5';
  explicit Guarded(const std::string& bytes, size_t shift = 0)
      : memory_(kGuard + shift + bytes.size() + kGuard, kFill), lead_(kGuard + shift), size_(bytes.size()) {
    std::memcpy(data(), bytes.data(), bytes.size());
  }
  char* data() { return memory_.data() + lead_; }
  std::string& whole() { return memory_; }  // guards included
  std::string bytes() const { return memory_.substr(lead_, size_); }
  bool guards_intact() const {
    auto kept = [&](size_t from, size_t n) {
      return std::all_of(memory_.begin() + from, memory_.begin() + from + n, [](char c) { return c == kFill; });
    };
    return kept(0, lead_) && kept(lead_ + size_, kGuard);
  }

 private:
  std::string memory_;
  size_t lead_;  // bytes before the operand's
  size_t size_;
};

// Judges a replayed launch of `k` by what its operands hold afterwards (inputs, then outputs):
// nothing written outside an operand or into an input, each output within tolerance of the
// record's. Returns "" or what differed.
std::string judge(const Kernel& k, const codegen::LaunchRecord& r, const std::vector<Guarded>& memory);

}  // namespace ember::cuda_check

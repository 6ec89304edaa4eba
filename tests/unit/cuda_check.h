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
class Guarded {
 public:
  static constexpr size_t kGuard = 256;
  static constexpr char kFill = '\xa5';
  explicit Guarded(const std::string& bytes) : memory_(kGuard + bytes.size() + kGuard, kFill) {
    std::memcpy(data(), bytes.data(), bytes.size());
    size_ = bytes.size();
  }
  char* data() { return memory_.data() + kGuard; }
  std::string& whole() { return memory_; }  // guards included
  std::string bytes() const { return memory_.substr(kGuard, size_); }
  bool guards_intact() const {
    auto kept = [&](size_t from, size_t n) {
      return std::all_of(memory_.begin() + from, memory_.begin() + from + n, [](char c) { return c == kFill; });
    };
    return kept(0, kGuard) && kept(kGuard + size_, kGuard);
  }

 private:
  std::string memory_;
  size_t size_ = 0;
};

// Judges a replayed launch of `k` by what its operands hold afterwards (inputs, then outputs):
// nothing written outside an operand or into an input, each output within tolerance of the
// record's. Returns "" or what differed.
std::string judge(const Kernel& k, const codegen::LaunchRecord& r, const std::vector<Guarded>& memory);

}  // namespace ember::cuda_check

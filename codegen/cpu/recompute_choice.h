// A value one kernel stores for others, or recomputes in each of them: one plan step holding both.
//
// [Note: recompute or store]
// The fuser puts an elementwise node in the group of its producers, and when other groups (of
// another domain, or ones that could not join) read its value too, the first group stores it
// and the others read it back. Where the value is computed (through at most 8 elementwise nodes
// of its group) from what its group reads (graph inputs, constants, an interpreter step's results,
// another kernel's values, stored for the group anyway), each reader could compute it again from those instead: that saves the value's write
// and reads, and a whole kernel where the value was its group's only output, at the cost of its
// arithmetic done once per reader and its inputs read by each. Which is faster depends on the op,
// the shapes, the number of readers and the machine, so under ModeConfig::choice_steps
// (max-autotune) such a producer and its readers (up to 4) are one step holding both ways, each a
// list of kernels:
//   store (the default, what the separate steps ran): the producer's kernel, its value written
//     to the step's scratch (the calling thread's, kept from call to call, so that a
//     steady-state call allocates nothing: one buffer a thread, as large as the largest value it
//     stored), then each reader's kernel reading it;
//   recompute ("recompute=1"): the producer's kernel without the value among its outputs (no
//     kernel at all when it was the only one), then each reader's kernel with the value's node
//     among its own nodes, reading the value's inputs.
// All readers take the same way: once a value is stored for one reader its write is paid, and
// another reader recomputing it saves only a read. max-autotune measures both on the step's inputs, each with its kernels' own knobs
// (lanes, grain, ...), and keeps the fastest (codegen/plan.cpp finds the sites; the value must be
// read by no other step, not be returned, and no reader may read another's values or another
// value of the producer's).
#pragma once

#include <memory>
#include <vector>

#include "codegen/cpu/cpu_kernel.h"

namespace ember::codegen::cpu {

class RecomputeChoice : public KernelStep {
 public:
  // Where a kernel's argument is: an index into the step's inputs (or outputs), or kValue, the
  // stored value (the step's scratch).
  static constexpr int kValue = -1;
  struct Part {
    std::shared_ptr<const CpuKernel> kernel;
    std::vector<int> inputs, outputs;
  };
  struct Ways {
    std::vector<Part> store, recompute;
    DType value_dtype = DType::Float32;
    std::vector<int> value_inputs;  // the step's inputs the value is computed from (its shape is theirs, broadcast)
  };
  RecomputeChoice(Ways ways, bool recompute);

  void run(std::span<const Array> inputs, std::span<const Array> outputs) const override;
  // "store-or-recompute(k1+k2 | k3+k4)": the same whichever way it takes (the tuning database's key).
  std::string name() const override;
  // "recompute", and each kernel's own knobs, named "s0.lanes" (the storing way's first kernel)
  // or "r1.grain" (the recomputing way's second), each tried only beside its way.
  std::vector<Knob> knobs() const override;
  std::shared_ptr<const KernelStep> with(const std::string& choice) const override;
  bool recomputes() const { return recompute_; }
  // The kernels its way runs.
  size_t kernels() const { return (recompute_ ? ways_.recompute : ways_.store).size(); }

 private:
  Ways ways_;
  bool recompute_;
};

}  // namespace ember::codegen::cpu

// A float32 GEMM and the elementwise kernel that reads its product, as one plan step.
//
// [Note: GEMM epilogues]
// Where the mode's record asks for it (ModeConfig::choice_steps: max-autotune), a float32 matmul
// whose product one elementwise kernel alone reads, at every point of that kernel's domain (a
// linear layer's bias and activation, a residual add), is planned as one step with that kernel,
// its epilogue (codegen/plan.cpp; the reshapes between that keep the product's rows go in too).
// The step's GEMM route (StepSettings::gemm, which max-autotune measures) decides how it runs:
//   a library's (ember's rule by default, runtime/kernels/common.cpp): the GEMM into C, then the
//      kernel over all of C, as two steps would run;
//   ember's own (GemmRoute::Generated, [Note: ember's own GEMM] in codegen/cpu/gemm.h): the
//      kernel runs on each piece of C (a block's rows by one panel's columns) as soon as the piece
//      is final, on the thread that computed it, while the piece is in that core's cache: C is
//      read back from L1 or L2, not from memory.
// C is the step's temporary either way, and the kernel reads it as its product input, in the
// shape of its domain (the same rows of N columns).
#pragma once

#include <memory>

#include "codegen/cpu/cpu_kernel.h"

namespace ember::codegen::cpu {

class GemmEpilogue : public KernelStep {
 public:
  // `product`: which of the kernel's inputs is the GEMM's product.
  GemmEpilogue(std::shared_ptr<const CpuKernel> epilogue, int product);
  // inputs: A ([..., M, K]), B ([K, N]), then the kernel's inputs without the product.
  void run(std::span<const Array> inputs, std::span<const Array> outputs) const override;
  // The step with its product computed at float64 and rounded to float32 once, then the kernel:
  // the reference that max-autotune measures its GEMM routes' rounding against ([Note: no less
  // accurate than the default] in codegen/autotune_measure.h). The kernel's own rounding is the
  // same in every route, so what differs from this is the product's.
  void run_exact_product(std::span<const Array> inputs, std::span<const Array> outputs) const;
  std::string name() const override { return "gemm+" + epilogue_->name(); }
  const CpuKernel& epilogue() const { return *epilogue_; }

 private:
  // C as the kernel reads it (its domain: the same rows of n columns), and the kernel's arguments
  // with C in the product's place.
  std::pair<Array, std::vector<Array>> product_and_args(std::span<const Array> inputs,
                                                        std::span<const Array> outputs) const;
  // A view of c in the product's own shape ([..., M, N]), for a matmul to write into.
  static Array as_product(const Array& c, const Array& a, int64_t n);
  // Ember's own GEMM into c, the kernel on each piece of it.
  void run_inside(const Array& a, const Array& b, const Array& c, int64_t m, int64_t n, int64_t k,
                  std::span<const Array> args, std::span<const Array> outputs) const;
  std::shared_ptr<const CpuKernel> epilogue_;
  int product_;
};

}  // namespace ember::codegen::cpu

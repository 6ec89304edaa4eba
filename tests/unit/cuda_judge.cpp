#include <cmath>

#include "codegen/cuda/emit_cuda.h"
#include "runtime/element.h"
#include "tests/unit/cuda_check.h"

namespace ember::cuda_check {

namespace {

// Whether CUDA's value `got` is the CPU kernel's `want`, for a value of dtype dt: integers and
// booleans exact; floats within docs/testing.md's one-op tolerance for the dtype (both backends
// stand within it of the reference, whose math functions each approximates its own way), plus,
// for a kernel that folds, 1e-4 of the largest magnitude of the output (a fold in another order
// differs by that much, relative to the whole); NaN and infinities equal.
bool close(double got, double want, DType dt, bool folds, double largest) {
  if (!is_floating(dt)) return got == want;
  if (std::isnan(want) || std::isinf(want)) return (std::isnan(got) && std::isnan(want)) || got == want;
  double rtol = dt == DType::BFloat16 ? 1e-2 : dt == DType::Float16 ? 2e-3 : 1e-4;
  double atol = dt == DType::Float64 ? 1e-12 : 1.5e-5;
  return std::abs(got - want) <= rtol * std::abs(want) + atol + (folds ? 1e-4 * largest : 0.0);
}

}  // namespace

std::string batch_source(const std::vector<Kernel>& kernels, size_t first) {
  std::string source = codegen::cuda::prelude();
  for (size_t i = first; i < std::min(kernels.size(), first + kBatch); ++i)
    source += codegen::cuda::emit_cuda_kernel(kernels[i].spec, kernels[i].name);
  return source;
}

std::string judge(const Kernel& k, const codegen::LaunchRecord& r, const std::vector<Guarded>& memory) {
  for (size_t m = 0; m < memory.size(); ++m) {
    if (!memory[m].guards_intact()) return "wrote outside operand " + std::to_string(m);
    if (m < r.inputs.size() && memory[m].bytes() != r.inputs[m].bytes) return "wrote input " + std::to_string(m);
  }
  for (size_t o = 0; o < r.outputs.size(); ++o) {
    DType dt = r.outputs[o].dtype;
    const std::string& want = r.outputs[o].bytes;
    const std::string got = memory[r.inputs.size() + o].bytes();
    size_t n = want.size() / itemsize(dt);
    double largest = 0;
    for (size_t i = 0; i < n; ++i) {
      double w = element::load<double>(want.data() + i * itemsize(dt), dt);
      if (std::isfinite(w)) largest = std::max(largest, std::abs(w));
    }
    for (size_t i = 0; i < n; ++i) {
      double g = element::load<double>(got.data() + i * itemsize(dt), dt);
      double w = element::load<double>(want.data() + i * itemsize(dt), dt);
      if (!close(g, w, dt, k.spec.reduces(), largest))
        return "output " + std::to_string(o) + " element " + std::to_string(i) + ": CUDA " + std::to_string(g) +
               ", CPU " + std::to_string(w);
    }
  }
  return "";
}

}  // namespace ember::cuda_check

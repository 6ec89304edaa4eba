#include "codegen/cpu/split_rows.h"

#include <cmath>
#include <type_traits>
#include <vector>

#include "codegen/cpu/mlir_text.h"
#include "ir/op.h"
#include "ir/reduction.h"
#include "runtime/thread_pool.h"

namespace ember::codegen::cpu {

namespace {

// Per value of the spec: whether it is a fold's result or computed from one (in one walk over
// the body, which lists arguments before their users).
std::vector<bool> after_folds(const KernelSpec& spec) {
  const size_t inputs = spec.inputs.size();
  std::vector<bool> after(inputs + spec.body.size(), false);
  for (size_t i = 0; i < spec.body.size(); ++i) {
    bool a = is_row_reduction(spec.body[i].op);
    for (int arg : spec.body[i].args) a = a || after[arg];
    after[inputs + i] = a;
  }
  return after;
}

// Share boundaries at whole cache lines of float32, so that each share's vector loop starts there.
constexpr int64_t kShareAlign = 64;

// The shares' partial results of one output for row r, combined in order by the reduction's
// combiner (ir/reduction.h), a float32 one in float64. Returns false when a float sum's partial
// is not finite: the row is then folded again, whole.
template <class T>
bool combine_shares(Combiner c, const T* partials, int64_t rows, int64_t shares, int64_t r, T* out) {
  using Acc = std::conditional_t<std::is_same_v<T, float>, double, T>;
  Acc total{};
  for (int64_t s = 0; s < shares; ++s) {
    T p = partials[s * rows + r];
    if constexpr (std::is_floating_point_v<T>)
      if (c == Combiner::Add && !std::isfinite(p)) return false;
    total = s == 0 ? static_cast<Acc>(p) : combine(c, total, static_cast<Acc>(p));
  }
  *out = static_cast<T>(total);
  return true;
}

}  // namespace

bool splits_rows(const KernelSpec& spec) {
  if (!spec.reduces() || spec.columns || spec.outputs.empty()) return false;
  const int inputs = static_cast<int>(spec.inputs.size());
  const std::vector<bool> after = after_folds(spec);
  for (int v : spec.outputs) {
    if (v < inputs) return false;
    const KernelInstr& fold = spec.body[v - inputs];
    if (fold.op != Op::Sum && fold.op != Op::Mean && fold.op != Op::Max && fold.op != Op::Min) return false;
    if (fold.dtype != DType::Float32 && fold.dtype != DType::Float64 && fold.dtype != DType::Int64) return false;
    if (register_type(fold.compute) != register_type(fold.dtype)) return false;
    if (after[fold.args[0]]) return false;  // a second level of folds
  }
  return true;
}

void run_split_rows(const KernelSpec& spec, KernelFn fn, int64_t rows, int64_t inner, int64_t shares,
                    void* const* buffers, const int64_t* meta) {
  const int rank = spec.rank;
  const size_t inputs = spec.inputs.size(), outputs = spec.outputs.size(), operands = inputs + outputs;
  const int64_t span = (inner / shares + kShareAlign - 1) / kShareAlign * kShareAlign;
  shares = (inner + span - 1) / span;
  // The shares' outputs: contiguous over the rows, one block of rows per share (8 bytes hold any
  // of the three dtypes).
  std::vector<int64_t> scratch(outputs * shares * rows);
  // Output o's partial of share s for row r: element s * rows + r of its block, in its dtype.
  auto block = [&](size_t o) { return reinterpret_cast<char*>(scratch.data() + o * shares * rows); };
  auto item = [&](size_t o) { return static_cast<int64_t>(itemsize(spec.body[spec.outputs[o] - inputs].dtype)); };
  std::vector<int64_t> scratch_meta(meta, meta + rank * (1 + operands));
  for (size_t k = inputs; k < operands; ++k) {
    int64_t* strides = scratch_meta.data() + rank * (1 + k);
    strides[rank - 1] = 0;
    for (int64_t d = rank - 2, step = 1; d >= 0; step *= meta[d], --d) strides[d] = step;
  }
  std::vector<void*> share_buffers(shares * operands);
  for (int64_t s = 0; s < shares; ++s)
    for (size_t k = 0; k < operands; ++k)
      share_buffers[s * operands + k] =
          k < inputs ? buffers[k] : static_cast<void*>(block(k - inputs) + s * rows * item(k - inputs));
  parallel_for(shares, 1, [&](int64_t first, int64_t last) {
    for (int64_t s = first; s < last; ++s)
      fn(0, rows, s * span, std::min(inner, (s + 1) * span), share_buffers.data() + s * operands, scratch_meta.data());
  });
  for (int64_t r = 0; r < rows; ++r) {
    bool whole = true;
    for (size_t o = 0; o < outputs; ++o) {
      const KernelInstr& fold = spec.body[spec.outputs[o] - inputs];
      // A mean's partials are already divided by the whole row's length: they add up.
      const Combiner c = fold.op == Op::Mean ? Combiner::Add : op_info(fold.op).reduction->combiner;
      const int64_t* strides = meta + rank * (1 + inputs + o);
      int64_t offset = 0;
      for (int64_t d = rank - 2, rest = r; d >= 0; rest /= meta[d], --d)
        offset += rest % meta[d] * strides[d];
      const void* partials = block(o);
      void* out = buffers[inputs + o];
      if (fold.dtype == DType::Float32)
        whole &= combine_shares(c, static_cast<const float*>(partials), rows, shares, r, static_cast<float*>(out) + offset);
      else if (fold.dtype == DType::Float64)
        whole &= combine_shares(c, static_cast<const double*>(partials), rows, shares, r, static_cast<double*>(out) + offset);
      else
        whole &= combine_shares(c, static_cast<const int64_t*>(partials), rows, shares, r, static_cast<int64_t*>(out) + offset);
    }
    if (!whole) fn(r, r + 1, 0, inner, buffers, meta);
  }
}

}  // namespace ember::codegen::cpu

#include "codegen/cpu/split_rows.h"

#include <cmath>
#include <vector>

#include "codegen/cpu/mlir_text.h"
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

// The shares' partial results of one output for row r, combined in order. Returns false when a
// float sum's partial is not finite: the row is then folded again, whole.
template <class T>
bool combine_shares(Op op, const T* partials, int64_t rows, int64_t shares, int64_t r, T* out) {
  if constexpr (std::is_floating_point_v<T>) {
    if (op == Op::Sum || op == Op::Mean) {
      double total = 0;
      for (int64_t s = 0; s < shares; ++s) {
        T p = partials[s * rows + r];
        if (!std::isfinite(p)) return false;
        total += static_cast<double>(p);
      }
      *out = static_cast<T>(total);
      return true;
    }
    T best = partials[r];
    for (int64_t s = 1; s < shares && !std::isnan(best); ++s) {
      T p = partials[s * rows + r];
      if (std::isnan(p) || (op == Op::Max ? p > best : p < best)) best = p;  // an earlier share wins a tie
    }
    *out = best;
  } else {
    uint64_t total = 0;  // an integer sum wraps, as the kernel's does
    T best = partials[r];
    for (int64_t s = 0; s < shares; ++s) {
      T p = partials[s * rows + r];
      total += static_cast<uint64_t>(p);
      if (op == Op::Max ? p > best : p < best) best = p;
    }
    *out = op == Op::Sum ? static_cast<T>(total) : best;
  }
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
    if (fold.op == Op::Mean && fold.dtype == DType::Int64) return false;
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
      const int64_t* strides = meta + rank * (1 + inputs + o);
      int64_t offset = 0;
      for (int64_t d = rank - 2, rest = r; d >= 0; rest /= meta[d], --d)
        offset += rest % meta[d] * strides[d];
      const void* partials = block(o);
      void* out = buffers[inputs + o];
      if (fold.dtype == DType::Float32)
        whole &= combine_shares(fold.op, static_cast<const float*>(partials), rows, shares, r, static_cast<float*>(out) + offset);
      else if (fold.dtype == DType::Float64)
        whole &= combine_shares(fold.op, static_cast<const double*>(partials), rows, shares, r, static_cast<double*>(out) + offset);
      else
        whole &= combine_shares(fold.op, static_cast<const int64_t*>(partials), rows, shares, r, static_cast<int64_t*>(out) + offset);
    }
    if (!whole) fn(r, r + 1, 0, inner, buffers, meta);
  }
}

}  // namespace ember::codegen::cpu

#include "codegen/kernel_args.h"

#include <algorithm>

namespace ember::codegen {

namespace {

// Collapses meta in place ([Note: the CPU kernel ABI]): the last `tail` dims stay as they are.
void collapse(int64_t* meta, int rank, size_t operands, int tail) {
  int64_t* sizes = meta;
  auto stride = [&](size_t k, int d) -> int64_t& { return meta[rank * (1 + k) + d]; };
  int kept = 0;  // dims kept so far, packed at the front
  for (int d = 0; d < rank; ++d) {
    bool fixed = d >= rank - tail;
    if (sizes[d] == 1 && d != rank - 1 && !fixed) continue;
    if (kept > 0 && !fixed) {
      // Merge into the previous kept dim when every operand allows it. An operand that
      // broadcasts along both has stride 0 on both, and still does after the merge.
      bool mergeable = true;
      for (size_t k = 0; k < operands && mergeable; ++k) mergeable = stride(k, kept - 1) == stride(k, d) * sizes[d];
      if (mergeable) {
        sizes[kept - 1] *= sizes[d];
        for (size_t k = 0; k < operands; ++k) stride(k, kept - 1) = stride(k, d);
        continue;
      }
    }
    sizes[kept] = sizes[d];
    for (size_t k = 0; k < operands; ++k) stride(k, kept) = stride(k, d);
    ++kept;
  }
  int pad = rank - kept;  // shift right: leading dims of size 1
  for (int d = rank - 1; d >= 0; --d) {
    bool real = d >= pad;
    sizes[d] = real ? sizes[d - pad] : 1;
    for (size_t k = 0; k < operands; ++k) stride(k, d) = real ? stride(k, d - pad) : 0;
  }
}

}  // namespace

KernelLayout layout_of(const KernelSpec& spec) {
  KernelLayout l;
  l.spec = &spec;
  l.reduces = spec.reduces();
  l.columns = l.reduces && spec.columns;
  std::vector<bool> line = spec.line_values();
  for (int v : spec.outputs) l.line_outputs.push_back(l.reduces && line[v]);
  return l;
}

void kernel_args(const KernelLayout& layout, std::span<const Array> inputs, std::span<const Array> outputs,
                 std::vector<int64_t>& meta_buffer, std::vector<void*>& buffers, bool keep_last_dim) {
  const KernelSpec& spec = *layout.spec;
  const int rank = spec.rank;
  const size_t operands = inputs.size() + outputs.size();
  meta_buffer.assign(rank * (1 + operands), 0);
  buffers.clear();
  int64_t* meta = meta_buffer.data();
  // The domain: every operand broadcasts into it, right-aligned (a row output without its last
  // dim aligns with the rows; a column output keeps its reduced dim, or has rank 1).
  for (int d = 0; d < rank; ++d) meta[d] = 1;
  auto widen = [&](const std::vector<int64_t>& shape, int shift) {
    int lead = rank - shift - static_cast<int>(shape.size());
    for (int d = std::max(lead, 0); d < rank - shift; ++d)
      if (shape[d - lead] != 1) meta[d] = shape[d - lead];
  };
  for (const Array& a : inputs) widen(a.shape(), 0);
  for (size_t o = 0; o < outputs.size(); ++o)
    widen(outputs[o].shape(), layout.line_outputs[o] && !layout.columns && outputs[o].rank() < rank ? 1 : 0);
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Array& a = inputs[k];
    int64_t* st = meta + rank * (1 + k);
    int lead = rank - static_cast<int>(a.rank());
    for (int d = lead; d < rank; ++d)
      if (!spec.inputs[k].broadcast[d]) st[d] = a.strides()[d - lead];
    buffers.push_back(a.data());
  }
  for (size_t o = 0; o < outputs.size(); ++o) {
    int64_t* st = meta + rank * (1 + inputs.size() + o);
    int64_t step = 1;
    const int reduced = spec.reduced_dim();
    for (int d = rank - 1; d >= 0; --d) {  // contiguous over the domain, or over its lines
      bool along_line = layout.line_outputs[o] && d == reduced;
      st[d] = along_line ? 0 : step;
      step *= along_line ? 1 : std::max<int64_t>(meta[d], 1);
    }
    buffers.push_back(outputs[o].data());
  }
  collapse(meta, rank, operands, layout.columns ? 2 : layout.reduces || keep_last_dim ? 1 : 0);
}

}  // namespace ember::codegen

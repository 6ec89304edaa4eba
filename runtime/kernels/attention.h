// Float32 scaled dot-product attention without the whole score matrix ([Note: blocked
// attention] in attention.cpp).
#pragma once

#include <cstdint>
#include <vector>

namespace ember::kernels {

struct AttentionShape {
  int64_t count;  // batch entries (every dim before the last two, flattened)
  int64_t L, S, E, Ev;  // queries, keys, query/key width, value width
  float scale;
  bool causal;     // query i sees keys j <= i
  bool bool_mask;  // the mask holds 0/1 (keep) rather than additive scores
};

// One of q, k, v and the mask as the tiles read it: batch entry bi's rows start at
// data + offsets[bi], `row_stride` elements apart, each row contiguous. A head's view of a fused
// projection ([b, t, 3 * c] split and transposed) is read where it lies, with no copy.
struct AttentionInput {
  const float* data = nullptr;
  int64_t row_stride = 1;        // at least the row's length (and 1)
  std::vector<int64_t> offsets;  // one per batch entry, in elements
  const float* entry(int64_t bi) const { return data + offsets[bi]; }
};

// out[count, L, Ev] = softmax(q k^T * scale + mask) v, with q [count, L, E], k [count, S, E],
// v [count, S, Ev] and the optional mask [count, L, S] as AttentionInputs (a mask's rows may be
// 0 apart: one row for every query), and out contiguous.
void blocked_attention(const AttentionShape& a, const AttentionInput& q, const AttentionInput& k,
                       const AttentionInput& v, const AttentionInput* mask, float* out);

}  // namespace ember::kernels

// Float32 scaled dot-product attention without the whole score matrix ([Note: blocked
// attention] in attention.cpp).
#pragma once

#include <cstdint>

namespace ember::kernels {

struct AttentionShape {
  int64_t count;  // batch entries (every dim before the last two, flattened)
  int64_t L, S, E, Ev;  // queries, keys, query/key width, value width
  float scale;
  bool causal;     // query i sees keys j <= i
  bool bool_mask;  // the mask holds 0/1 (keep) rather than additive scores
};

// out[count, L, Ev] = softmax(q k^T * scale + mask) v, with q [count, L, E], k [count, S, E],
// v [count, S, Ev] and the optional mask [count, L, S], all contiguous float32.
void blocked_attention(const AttentionShape& a, const float* q, const float* k, const float* v, const float* mask,
                       float* out);

}  // namespace ember::kernels

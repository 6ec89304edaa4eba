// Blocked attention's own AVX-512 tiles ([Note: attention's own tiles] in attention_tiles.cpp):
// the scores q k^T, the softmax of a row without a mask, and the weighted values p v, for one
// tile of queries against one block of keys.
#pragma once

#include <cstdint>

namespace ember::kernels::tiles {

// Whether this CPU runs the tiles (AVX-512F); read once. Elsewhere the library GEMMs run them.
bool available();

// The tiles read keys transposed, in panels of kPanel keys: key j's element e is at
// kt[(j / kPanel) * E * kPanel + e * kPanel + j % kPanel], and the last panel's keys past S are 0.
// padded_keys(S) keys (S rounded up to whole panels) take E * padded_keys(S) floats.
constexpr int64_t kPanel = 32;
int64_t padded_keys(int64_t S);
void pack_keys(const float* k, int64_t ldk, int64_t S, int64_t E, float* kt);

// s[i * lds + j] = scale * sum_e q[i * ldq + e] * key j's element e, for i < m and j < n rounded
// up to a panel (the columns past n are written, with what the padded keys give); kt is the
// panel of the first key.
void scores(const float* q, int64_t ldq, const float* kt, int64_t m, int64_t n, int64_t E, float scale, float* s,
            int64_t lds);

// s[j] = scale * sum_e q[e] * k[j * ldk + e] for j < n: one query's scores against keys where
// they lie, for a few queries, whose keys are not worth packing.
void dot_scores(const float* q, const float* k, int64_t ldk, int64_t n, int64_t E, float scale, float* s);

// The running max and sum of one query row's softmax.
struct RowState {
  float max, sum;
};

// One row of scaled scores, columns from `visible` on hidden (a causal row), with the row's
// optional mask (added, or with `bool_mask` 0/1, 0 hiding its column), replaced by their
// exponentials against the row's new running max; the row's n columns all written. Returns the
// factor the row's earlier output and sum must be scaled by. While nothing is visible the row
// is 0 but for its NaN scores, which reach the sum (and so the output: NaN, as PyTorch's).
float softmax_row(float* row, int64_t n, int64_t visible, const float* mask, bool bool_mask, RowState& state);

// acc[i * lda + c] += sum_{j < n} p[i * ldp + j] * v[j * ldv + c] for i < m and c < Ev.
void weighted_values(const float* p, int64_t ldp, const float* v, int64_t ldv, int64_t m, int64_t n, int64_t Ev,
                     float* acc, int64_t lda);

}  // namespace ember::kernels::tiles

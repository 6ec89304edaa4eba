// Internal: the decompositions of the composite ops ([Note: decompositions] in ir/op.h), which
// the families' registry records point to, and the helpers they share. Each function adds
// primitive nodes only and returns one value per output of exactly the op's output types.
//
// [Note: node order] A call never takes two arguments that each add a node (b.add(b.mul(..),
// b.cast(..))): C++ leaves their order unspecified, and the printed IR, a cache key, must not
// depend on the compiler. Name the first in a local; a braced list ({a, b}) is ordered.
#pragma once

#include <vector>

#include "ir/builder.h"

namespace ember::ops {

using Values = std::vector<Value>;

// decompose_reduce.cpp
Values decompose_mean(Builder& b, const Values& in, const Attrs& attrs);
Values decompose_var(Builder& b, const Values& in, const Attrs& attrs);
Values decompose_std(Builder& b, const Values& in, const Attrs& attrs);
Values decompose_var_mean(Builder& b, const Values& in, const Attrs& attrs);
Values decompose_logsumexp(Builder& b, const Values& in, const Attrs& attrs);

// decompose_norm.cpp
Values decompose_layer_norm(Builder& b, const Values& in, const Attrs& attrs);
Values decompose_native_layer_norm(Builder& b, const Values& in, const Attrs& attrs);
Values decompose_rms_norm(Builder& b, const Values& in, const Attrs& attrs);
Values decompose_batch_norm(Builder& b, const Values& in, const Attrs& attrs);
Values decompose_native_batch_norm(Builder& b, const Values& in, const Attrs& attrs);

// decompose_nn.cpp
Values decompose_softmax(Builder& b, const Values& in, const Attrs& attrs);
Values decompose_log_softmax(Builder& b, const Values& in, const Attrs& attrs);
Values decompose_attention(Builder& b, const Values& in, const Attrs& attrs);
Values decompose_gelu(Builder& b, const Values& in, const Attrs& attrs);
Values decompose_silu(Builder& b, const Values& in, const Attrs& attrs);
Values decompose_linear(Builder& b, const Values& in, const Attrs& attrs);

// ---- shared helpers (decompose_common.cpp)

// The dtype a composite computes in: float64 in float64, every other dtype in float32 (so
// float16/bfloat16 round once, when the result is cast back).
DType compute_dtype(DType t);
// The output types of `op` on these values; `attrs` already hold their defaults.
std::vector<TensorType> output_types(Op op, const Values& in, const Attrs& attrs);
// The dims a reduction over `axes` reduces (normalised, sorted; empty `axes`: every dim; a 0-d
// tensor has none), written out so that an empty result means "nothing".
std::vector<int64_t> reduced_axes(std::string_view op, const TensorType& x,
                                  const std::vector<int64_t>& axes);
// Whether one of those dims is statically 0 (max cannot reduce it; the result is known).
bool empty_along(const TensorType& x, const std::vector<int64_t>& axes);

// Centred values of xc over `axes` and their sum of squares (kept as size 1), in xc's dtype.
struct Moments {
  Value count;        // 0-d
  Value centered;     // xc - its mean
  Value sum_squares;  // sum(centered^2)
  // sum(xc) / count, when asked for: the mean as an output, unshifted (infinities as the direct
  // kernels give them, which the shifted form would turn into NaN).
  Value mean;
};
// [Note: shifted two-pass] Two passes (the mean, then the squared deviations) over the data
// shifted by one of its elements, the last along `axes`. Plain two-pass leaves rounding noise in
// x - mean when a group is constant (sum / n need not round back to the value), and a norm
// multiplies it by rsqrt(var + eps), 316 for eps = 1e-5; shifted, a constant group centres to
// exact zeros, and otherwise it is as accurate. NaN and infinities give NaN as unshifted.
// Over dims that are not one run, or one long run, the passes are per group and the groups
// combine ([Note: grouped moments] in decompose_common.cpp). Computed in dtype c: x is cast after
// the views the passes take of it, so that the cast joins their kernels.
Moments moments(Builder& b, Value x, DType c, const std::vector<int64_t>& axes, bool want_mean = false);

// softmax (or log_softmax) of xc along `axis`, subtracting the max; xc is in its compute dtype.
// A statically empty axis gives xc back (there is nothing to normalise).
Value softmax_along(Builder& b, Value xc, int64_t axis, bool log);

}  // namespace ember::ops

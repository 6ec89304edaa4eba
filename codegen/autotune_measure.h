// What max-autotune measures with (autotune.cpp): timing a step, comparing its outputs with the
// default's, copying its inputs with their layouts, and the layout part of its signature.
#pragma once

#include <functional>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "runtime/array.h"

namespace ember::codegen {

struct Timing {
  double median = 0;  // seconds
  double spread = 0;  // the middle half's width over the median: the noise of this measurement
};

// One warm-up run, then repeats until at least 5 of them and 10 ms (at most 200 of them, and
// `cap_s` seconds in all); their median and spread. A candidate whose fastest of its first 3
// runs already takes longer than `give_up_s` cannot win: its timing stops there.
Timing measure(const std::function<void()>& run, double cap_s,
               double give_up_s = std::numeric_limits<double>::infinity());

// Whether a candidate's outputs are the default's: integers and booleans exact, floats within
// 1e-4 of the largest magnitude (different orders of summation differ by that much, relative to
// the whole, where single values may cancel) plus 1e-4 relative, with NaN and infinities where
// the default has them. `why` names the first difference.
bool same_values(const std::vector<Array>& got, const std::vector<Array>& want, std::string& why);

// [Note: no less accurate than the default]
// Within 1e-4 of the largest magnitude, a library's GEMM that sums in another order passes
// same_values whatever its rounding error: OpenBLAS's product of a convolution's 8 x 36 x 2304
// had 2.9x the mean float32 error of the default's against float64, ember's own GEMM 3.7x at a
// depth of 4096 before it summed its slices apart. Over a model such steps add up past
// docs/testing.md's model rule (twice eager's error). So where a step's op runs at float64 on the
// interpreter (matmul, linear, conv2d, attention), the tuner runs it there once, and a candidate
// whose root mean square error against that is more than twice the default's, plus 2^-23 of the
// values' own root mean square (a rounding or two, for products the default rounds exactly), is
// rejected. oneDNN's brgemm convolution is rejected so where it sums over non-negative inputs.
// A GEMM with its epilogue in one step ([Note: GEMM epilogues]) is checked against its product
// at float64, rounded once, then its kernel (the interpreter has no float64 form of the fused
// group, and the kernel rounds alike in every route: the routes differ in the product). Not
// checked: a step whose float64 run would cost more than a quarter of its budget or 256 MiB; its
// candidates pass on same_values alone.
//
// The root mean square, over every float output's elements where `exact` is finite, of
// got - exact; and of exact itself in `scale`.
double rms_error(const std::vector<Array>& got, const std::vector<Array>& exact, double* scale = nullptr);
// Whether `got` is within twice `default_error` of `exact` (see the note); `why` says by how much not.
bool as_accurate(const std::vector<Array>& got, const std::vector<Array>& exact, double default_error,
                 std::string& why);

// A copy of `a` in memory of its own with the same shape and strides (an expanded input stays
// expanded, a transposed one transposed), so that kernels take the same path on it.
Array copy_keeping_layout(const Array& a);

// "f32[1024,512]{1,0}": the dtype, each dim rounded up to a power of two (so sizes of a bucket
// share a tuning), and each stride as 0 (broadcast), 1 or n.
std::string layout_signature(const Array& a);

}  // namespace ember::codegen

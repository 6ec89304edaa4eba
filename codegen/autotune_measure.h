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

// A copy of `a` in memory of its own with the same shape and strides (an expanded input stays
// expanded, a transposed one transposed), so that kernels take the same path on it.
Array copy_keeping_layout(const Array& a);

// "f32[1024,512]{1,0}": the dtype, each dim rounded up to a power of two (so sizes of a bucket
// share a tuning), and each stride as 0 (broadcast), 1 or n.
std::string layout_signature(const Array& a);

}  // namespace ember::codegen

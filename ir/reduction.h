// The semantics of a primitive reduction, as its registry record declares them: a combiner, its
// identity and the dtype it accumulates in. Code generators lower every primitive reduction from
// these facts alone; the interpreter folds with the same combiner and identity.
//
// [Note: reduction semantics]
// A reduction over n elements is acc = identity; acc = combine(acc, x_j) for j in row-major order
// of the reduced dims, then the result converted to the output dtype. combine is associative, so
// a backend may split the fold into a tree (threads, vector lanes, blocks) and combine the partial
// results, earlier part first. The accumulator dtype is what generated code accumulates in:
// float16/bfloat16 in float32 (the IR's rule for every computation on them), float32 in float32
// and float64 in float64 (as PyTorch's kernels do), integer and bool sum/prod in wrapping int64
// (also their output dtype, as in PyTorch); max/min keep the input dtype (they only pick). The
// interpreter is the reference: it folds floats in float64, at least as wide as any declared
// accumulator. A float32 accumulator's partial results can leave float32's range where the
// float64 fold's do not (3e38 + 3e38 - 3e38): a backend must not show that, and folds again in
// float64 any sum whose float32 result is not finite, and any product whose result is not a
// normal number ([Note: overflow-safe folds] in codegen/cpu/emit_kernel.cpp). So a generated
// float32 fold differs from the interpreter's only by rounding, within docs/testing.md's
// tolerances (tests/unit/test_reduction_semantics.cpp folds in the declared accumulator and checks
// that bar, and checks the overflow edge against generated code).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>
#include <type_traits>

#include "ir/attrs.h"
#include "ir/dtype.h"

namespace ember {

enum class Combiner {
  Add,     // a + b (integers wrap)
  Mul,     // a * b (integers wrap)
  Max,     // the larger; NaN if either is NaN (the first NaN stays); a tie keeps a
  Min,     // the smaller; likewise
  ArgMax,  // (value, index) of the larger; NaN counts as largest; a tie keeps the smaller index
  ArgMin,  // (value, index) of the smaller; NaN counts as smallest; likewise
};

std::string_view combiner_name(Combiner c);  // "add", "mul", "max", "min", "argmax", "argmin"
bool is_indexed(Combiner c);                 // argmax, argmin: the combiner carries an index

// The index part of an indexed combiner's identity: larger than any real index, so a real
// element always wins a tie against it.
inline constexpr int64_t kNoIndex = std::numeric_limits<int64_t>::max();

struct ReductionSemantics {
  Combiner combiner;
  // The accumulator dtype for an input dtype (see [Note: reduction semantics]).
  DType (*accumulator)(DType input) = nullptr;
  // The identity for an input dtype: one element of the accumulator dtype. For an indexed
  // combiner it is the value part (the index part is kNoIndex). Max: -inf for floats, the
  // dtype's lowest value for integers, false for bool; min the opposite; add 0; mul 1.
  Literal (*identity)(DType input) = nullptr;
};

// The combiners on scalars, written once for the interpreter, the tests and (as the spec of what
// to emit) the code generators. T is the accumulator's C++ type: float, double or int64_t.
template <class T>
T combine(Combiner c, T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    auto u = [](T v) { return static_cast<uint64_t>(v); };
    switch (c) {
      case Combiner::Add: return static_cast<T>(u(a) + u(b));
      case Combiner::Mul: return static_cast<T>(u(a) * u(b));
      case Combiner::Max: return b > a ? b : a;
      case Combiner::Min: return b < a ? b : a;
      default: break;
    }
  } else {
    switch (c) {
      case Combiner::Add: return a + b;
      case Combiner::Mul: return a * b;
      case Combiner::Max: return std::isnan(a) ? a : (std::isnan(b) || b > a) ? b : a;
      case Combiner::Min: return std::isnan(a) ? a : (std::isnan(b) || b < a) ? b : a;
      default: break;
    }
  }
  return a;  // indexed combiners go through combine_indexed
}

template <class T>
struct Indexed {
  T value;
  int64_t index;
};

// ArgMax/ArgMin on (value, index) pairs. Commutative as well as associative (ties and NaNs go
// to the smaller index), so any order of combining gives the same index.
template <class T>
Indexed<T> combine_indexed(Combiner c, Indexed<T> a, Indexed<T> b) {
  bool a_nan = false, b_nan = false;
  if constexpr (std::is_floating_point_v<T>) {
    a_nan = std::isnan(a.value);
    b_nan = std::isnan(b.value);
  }
  if (a_nan || b_nan) {
    if (a_nan && b_nan) return a.index <= b.index ? a : b;
    return a_nan ? a : b;
  }
  bool b_better = c == Combiner::ArgMax ? b.value > a.value : b.value < a.value;
  bool a_better = c == Combiner::ArgMax ? a.value > b.value : a.value < b.value;
  if (b_better) return b;
  if (a_better) return a;
  return a.index <= b.index ? a : b;
}

}  // namespace ember

// The op sweep's float64 reference: its tensor type, shape helpers, dtype rules and element bytes.
//
// An independent float64 reference for the op sweep (tests/unit/test_sweep_*.cpp): naive loops
// over row-major double buffers, written from PyTorch's documented semantics and the IR rules in
// ir/graph.h. Nothing here calls ember's registry scalar functions, kernels or dtype conversions,
// so a bug there cannot hide in the expected values. The ops themselves are declared by family in
// reference_reduce.h, reference_contractions.h, reference_movement.h and
// reference_composites.h; the definitions live in the matching reference*.cpp files.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "ir/dtype.h"  // the DType enum only

namespace ember::ref {

using Ints = std::vector<int64_t>;
inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A logical tensor: row-major values (already exact in their dtype) and a shape.
struct Ref {
  Ints shape;
  std::vector<double> v;
};

// ---- shapes (reference.cpp)

int64_t numel(const Ints& s);
Ints unravel(int64_t i, const Ints& shape);
int64_t ravel(const Ints& idx, const Ints& shape);
std::string shape_text(const Ints& s);

// numpy broadcasting; nullopt when the shapes do not broadcast.
std::optional<Ints> broadcast(const Ints& a, const Ints& b);

// The element of `x` that lands at output index `idx` when x is broadcast to a larger shape.
double at_broadcast(const Ref& x, const Ints& idx);
Ref broadcast_to(const Ref& x, const Ints& shape);

int64_t norm_axis(int64_t axis, int64_t rank);

// ---- dtypes, PyTorch's rules (reference.cpp)

bool is_float(DType t);
bool is_int(DType t);
double int_min(DType t);
double int_max(DType t);

// torch.promote_types.
DType promote(DType a, DType b);

// torch.result_type over tensors: dimensioned tensors win over 0-d ones of the same or a lower
// category; a 0-d tensor of a higher category promotes.
struct Operand {
  DType dtype;
  bool zero_dim;
};
DType result_type(const std::vector<Operand>& ops);

// Rounds to the nearest value of float dtype `t` (ties to even, overflow to infinity); other
// dtypes return v unchanged.
double round_float(double v, DType t);

// Half the spacing of dtype `t` around v (0 for float64 and non-floats).
double half_ulp(double v, DType t);

// Converts a value to dtype `t` by the IR's cast rules (ir/graph.h): to bool is x != 0; float to
// integer truncates toward zero, saturates at the int64 range, then wraps to the width; NaN -> 0.
double cast_value(double v, DType t);

// ---- element bytes (reference_bytes.cpp: own encoders; values must already be exact in the
// dtype)

void encode(void* p, DType t, double v);
double decode(const void* p, DType t);

}  // namespace ember::ref

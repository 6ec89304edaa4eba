// The op sweep's elementwise semantics: how to call each op, and its expected result by PyTorch.
// Shared by test_sweep_elementwise.cpp and test_sweep_promotion.cpp.
#pragma once

#include <vector>

#include "frontend/ops.h"
#include "ir/error.h"
#include "tests/unit/sweep.h"

namespace ember::sweep {

// 1, 2 or 3: the number of tensor operands of an elementwise op.
int arity(Op op);

// Runs a unary elementwise op; `variant` 1 selects gelu's tanh approximation, `cast_to` is cast's.
Tensor call_unary(Op op, const Tensor& x, int variant, DType cast_to);

// Runs a binary elementwise op on tensors or Python numbers (Scalar) on either side.
template <class A, class B>
Tensor call_binary(Op op, const A& a, const B& b) {
  // clang-format off
#define EMBER_SWEEP_BINARY(X)                                                      \
  X(Add, add) X(Sub, sub) X(Mul, mul) X(Div, div) X(FloorDivide, floor_divide)     \
  X(Remainder, remainder) X(Pow, pow) X(Maximum, maximum) X(Minimum, minimum)      \
  X(Eq, eq) X(Ne, ne) X(Lt, lt) X(Le, le) X(Gt, gt) X(Ge, ge)                      \
  X(LogicalAnd, logical_and) X(LogicalOr, logical_or) X(LogicalXor, logical_xor)   \
  X(BitwiseAnd, bitwise_and) X(BitwiseOr, bitwise_or) X(BitwiseXor, bitwise_xor)
#define EMBER_CASE(E, f) \
  case Op::E:            \
    return ember::f(a, b);
  // clang-format on
  switch (op) {
    EMBER_SWEEP_BINARY(EMBER_CASE)
    default:
      EMBER_THROW(Internal, "not a binary op");
  }
#undef EMBER_CASE
#undef EMBER_SWEEP_BINARY
}

// The dtype a Python number takes next to a tensor (PyTorch's wrapped-number rule): a float with
// an integer or bool tensor is the default float; an int with a bool tensor is int64.
DType scalar_dtype(DType tensor, const Scalar& s);

// Expected output of an elementwise op over operands (values, dtype, 0-d or not).
Expected ew_expect(Op op, const std::vector<Ref>& refs, const std::vector<DType>& dts, int variant,
                   DType cast_to);

}  // namespace ember::sweep

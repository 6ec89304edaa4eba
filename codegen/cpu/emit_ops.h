// The elementwise ops in MLIR, with the interpreter's semantics (ir/ops/elementwise.cpp): each
// operand converted to the op's compute type as the interpreter loads it, the op's scalar
// function, the result converted to the output dtype as the interpreter stores it. A value in a
// kernel is held in its dtype's register type (f32, f64, or i64 for integers and bool) with the
// exact value its dtype holds.
#pragma once

#include <span>

#include "codegen/cpu/mlir_text.h"
#include "codegen/kernel_spec.h"

namespace ember::codegen::cpu {

// Whether the backend computes this op on operands of these dtypes, in `compute`, giving `out`. The rest runs on
// the interpreter: float16/bfloat16, and integer ops that can raise (division, remainder and
// negative powers of integers).
bool can_emit(Op op, std::span<const DType> args, DType compute, DType out);

// The instruction's result in the register type of its dtype.
Val emit_op(MlirText& m, const KernelInstr& instr, std::span<const Val> args, std::span<const DType> arg_dtypes);

// A value of dtype `from`, held in its register type, as a value of dtype `to` (the interpreter's
// store into `to` followed by a load): rounding, saturation and wrapping included.
Val convert_dtype(MlirText& m, const Val& v, DType from, DType to);

}  // namespace ember::codegen::cpu

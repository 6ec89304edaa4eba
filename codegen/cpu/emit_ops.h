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

// Whether the backend computes this op in `compute`.
// Every elementwise op on every dtype (float16 and bfloat16 compute in float32, rounded once when
// stored, as the interpreter does), except the integer ops that can raise: division and
// remainder by zero, negative powers. Those run on the interpreter.
bool can_emit(Op op, DType compute);

// The instruction's result in the register type of its dtype.
Val emit_op(MlirText& m, const KernelInstr& instr, std::span<const Val> args, std::span<const DType> arg_dtypes);

// A `constant` instruction's value, `width` lanes of it (0: a scalar).
Val emit_constant(MlirText& m, const KernelInstr& instr, int width);

// pow(base, exponent) for a float pow whose exponent is the constant 2, 3 or 4: repeated
// multiplication, not exp(log): exact for 2, within an ulp or two otherwise, with pow's answers
// for NaN, infinities and zeros of either sign.
Val emit_integer_power(MlirText& m, const KernelInstr& instr, const Val& base, DType base_dtype, int exponent);

// bfloat16 is stored as its bits and converted here, as ir/dtype.cpp does (round to nearest even,
// NaN kept quiet): LLVM lowers a truncation to bfloat16 to a libm call (__truncsfbf2) that the
// process may not have.
Val bf16_bits(MlirText& m, const Val& f32);  // f32 -> i16
Val bf16_value(MlirText& m, const Val& bits);  // i16 -> f32, exact

// A value held in a register type (f32, f64 or i64) as a value of dtype `to` (the interpreter's
// store into `to` followed by a load): rounding, saturation and wrapping included.
Val convert_dtype(MlirText& m, const Val& v, DType to);

}  // namespace ember::codegen::cpu

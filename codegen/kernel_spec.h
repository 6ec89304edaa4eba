// KernelSpec: the loop-level description of one fused kernel, which every backend reads (the CPU
// backend now, CUDA later) instead of the graph.
//
// [Note: kernel specs]
// A kernel iterates over a domain of `rank` dims. Each input is loaded at every point through an
// index map: a dim marked 1 is broadcast (stride 0), a dim marked * is indexed by the domain's
// (at the array's own stride). The body is a list of scalar instructions over primitive
// elementwise ops, each with its registry semantics (the compute type of
// elementwise_compute_dtype, the conversions of the interpreter's load and store); the outputs
// are stored contiguously over the whole domain.
//
// A constant exponent 2, 3 or 4 of pow is an instruction, `%2 = constant() {value=f64[3.0]}`, not
// a load: the value is part of the kernel (and of its cache key) and the emitter multiplies
// instead of calling pow. Other constants stay loads, so LLVM cannot fold them (x * 1.0 -> x
// would not quiet a signalling NaN as the interpreter does).
//
// A row kernel also reduces over the domain's last dim: a `sum`, `mean`, `max` or `min`
// instruction folds its argument over the row (computing in `compute`, the accumulator) into one
// value per row. A column kernel (`columns` in the header) folds over the dim before the last
// instead, and keeps the last dim, along which it runs in vectors. The lines a kernel folds
// (rows or columns) each have their line values (reductions, inputs broadcast along the reduced
// dim, and elementwise instructions over only those), computed once per line; an output that is a
// line value is stored once per line (its array is the domain with the reduced dim 1; a row
// kernel's may also lack it).
//
// Sizes and strides are not in the spec: they are run-time arguments, so one compiled kernel
// serves every size (symbolic or static) with the same structure, and the spec's text is the
// kernel cache's key. The text form:
//
//   kernel rank=2 {
//     %0 = load in0 : f32[*, *]
//     %1 = load in1 : f32[1, *]
//     %2 = add(%0, %1) : f32 compute=f32
//     %3 = cast(%2) {dtype=i32} : i32 compute=f32
//     store out0 = %3
//   }
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace ember::codegen {

struct KernelInput {
  DType dtype;
  std::vector<bool> broadcast;  // per domain dim: size 1, read at stride 0
};

struct KernelInstr {
  Op op;
  Attrs attrs;
  std::vector<int> args;  // value numbers: inputs first (0 .. inputs-1), then instructions
  DType dtype;            // the node's output dtype
  DType compute;          // the dtype it computes in (elementwise_compute_dtype, with shapes)
};

struct KernelSpec {
  int rank = 1;
  bool columns = false;  // a reducing kernel folds the dim before the last (else the last)
  std::vector<KernelInput> inputs;
  std::vector<KernelInstr> body;
  std::vector<int> outputs;  // value numbers stored, each in its value's dtype

  DType dtype_of(int value) const {
    return value < static_cast<int>(inputs.size()) ? inputs[value].dtype : body[value - inputs.size()].dtype;
  }
  // Whether the kernel reduces (a row or column kernel), the dim it folds, and which values are
  // line values.
  bool reduces() const;
  int reduced_dim() const { return columns ? rank - 2 : rank - 1; }
  std::vector<bool> line_values() const;
  std::string str() const;
  // The hex SHA-256 of str(): the kernel's name and cache key.
  std::string hash() const;
};

// Parses the text form; throws ember::Error(Value) naming the line on malformed text.
KernelSpec parse_kernel_spec(const std::string& text);

// Whether an instruction of this op folds over the kernel's lines.
bool is_row_reduction(Op op);

// The spec of a fusion group: its nodes (in graph order) over `domain`, the values it reads from
// outside (filled in, in the spec's input order) and the values it must store (given).
KernelSpec spec_of_group(const std::vector<Node*>& nodes, const Shape& domain, const std::vector<Value>& outputs,
                         std::vector<Value>& inputs);

}  // namespace ember::codegen

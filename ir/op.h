// Ops: the enum generated from ops.def and the registry record that holds every backend-neutral
// fact about an op (arity, attributes, shape and dtype rule, scalar semantics, traits, doc; for a
// primitive reduction its combiner, identity and accumulator; for a composite its decomposition).
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/attrs.h"
#include "ir/dtype.h"
#include "ir/reduction.h"
#include "ir/symbolic.h"

namespace ember {

enum class Op : uint16_t {
#define EMBER_OP(name, text, min_arity, max_arity, kind) name,
#include "ir/ops.def"
#undef EMBER_OP
};

enum class OpKind { Graph, Elementwise, Reduction, View, Movement, Contraction, Pooling, Composite, Creation, Extern };

inline constexpr int kNumOps = 0
#define EMBER_OP(name, text, min_arity, max_arity, kind) +1
#include "ir/ops.def"
#undef EMBER_OP
    ;

// The type of a value: element type and (possibly symbolic) shape.
struct TensorType {
  DType dtype = DType::Float32;
  Shape shape;
  bool operator==(const TensorType& o) const { return dtype == o.dtype && shape == o.shape; }
  std::string str() const;  // "f32[2, s0]"
};

// "f32[2, 4], i64[2, 4]": the types of a node's outputs, as the text form writes them.
std::string types_str(const std::vector<TensorType>& types);

struct AttrSpec {
  std::string name;
  AttrType type;
  std::optional<Attr> default_value;  // absent: required
};

// Scalar semantics of an elementwise op, instantiated for each compute type. Arguments arrive
// converted to the compute type; the result is converted to the output dtype by the caller.
// `variant` selects a form chosen by an attribute (gelu's tanh approximation); 0 otherwise.
struct ScalarFns {
  float (*f32)(const float* args, int variant) = nullptr;
  double (*f64)(const double* args, int variant) = nullptr;
  int64_t (*i64)(const int64_t* args, int variant) = nullptr;  // null: not defined on integers
};

struct OpInfo;
struct Value;
class Builder;
// Validates inputs and attributes and returns the output type. Throws ember::Error naming the op.
using InferFn = TensorType (*)(const OpInfo& op, std::span<const TensorType> inputs, const Attrs& attrs);
// The same for an op with several outputs (one or more; their number may depend on attributes).
using InferMultiFn = std::vector<TensorType> (*)(const OpInfo& op,
                                                 std::span<const TensorType> inputs,
                                                 const Attrs& attrs);
// [Note: decompositions]
// A composite op's meaning in primitive ops: given a Builder that inserts nodes where the op
// stands (ir/builder.h), the node's inputs and its attributes (defaults filled in), it adds
// primitive nodes only and returns one value per output, each of exactly the node's output type.
// Numerics are the standard stable forms (softmax subtracts the row max), float16/bfloat16
// compute in float32 and round once at the end. It may decline a case it cannot express in
// primitives by returning no values before adding any node (causal attention over a symbolic
// sequence length); the node then stays as it is. The decompose pass applies them.
using DecomposeFn = std::vector<Value> (*)(Builder& b, const std::vector<Value>& inputs,
                                           const Attrs& attrs);

struct OpInfo {
  Op op;
  std::string_view name;
  int min_arity = 0, max_arity = 0;  // max -1: any number
  OpKind kind;
  std::string_view doc;
  std::vector<AttrSpec> attrs;
  InferFn infer = nullptr;             // single-output ops
  InferMultiFn infer_multi = nullptr;  // multi-output ops (exactly one of the two is set)
  ScalarFns scalar;
  // For elementwise ops: the dtype in which inputs are computed, given the promoted input dtype.
  // Comparisons compute in the promoted type and return bool; float-valued ops compute in float.
  bool float_result = false;  // integer inputs give float32 (exp, div, sigmoid, ...)
  bool bool_result = false;   // the output is bool (comparisons, logical ops, isnan)
  bool integral_only = false; // bitwise ops
  bool commutative = false;
  bool no_bool = false;       // bool inputs are an error (neg, sub), as in PyTorch
  int (*scalar_variant)(const Attrs& attrs) = nullptr;
  bool open_attributes = false;  // takes attributes beyond `attrs` (extern: its own op's)
  // A primitive reduction's combiner, identity and accumulator ([Note: reduction semantics]).
  std::optional<ReductionSemantics> reduction;
  // A composite's decomposition into primitives ([Note: decompositions]); null for a primitive.
  DecomposeFn decompose = nullptr;

  bool is_elementwise() const { return kind == OpKind::Elementwise; }
  bool is_reduction() const { return kind == OpKind::Reduction; }
  bool is_view() const { return kind == OpKind::View; }
  bool is_creation() const { return kind == OpKind::Creation; }
  bool is_extern() const { return kind == OpKind::Extern; }
  bool multi_output() const { return infer_multi != nullptr; }
  // Composite in the sense code generators care about: it has a decomposition (this includes
  // ops of other kinds, such as gelu and linear, and the composite reductions).
  bool has_decomposition() const { return decompose != nullptr; }
};

const OpInfo& op_info(Op op);
std::string_view op_name(Op op);
std::optional<Op> parse_op(std::string_view name);

// The output types of `op` on these inputs; fills in attribute defaults in `attrs` first and checks
// arity and attribute types. The single entry point for shape and dtype inference.
std::vector<TensorType> infer_types(Op op, std::span<const TensorType> inputs, Attrs& attrs);
// The same for a single-output op (an internal error for a multi-output one).
TensorType infer_type(Op op, std::span<const TensorType> inputs, Attrs& attrs);

// For an elementwise node: the dtype its inputs are converted to before the scalar function runs.
DType elementwise_compute_dtype(Op op, std::span<const TensorType> inputs, DType out);
int scalar_variant(Op op, const Attrs& attrs);

// Attribute access with the op named in the error.
int64_t attr_int(const Attrs& a, const char* name);
double attr_float(const Attrs& a, const char* name);
bool attr_bool(const Attrs& a, const char* name);
DType attr_dtype(const Attrs& a, const char* name);
const std::vector<int64_t>& attr_ints(const Attrs& a, const char* name);
const Shape& attr_shape(const Attrs& a, const char* name);
const std::string& attr_string(const Attrs& a, const char* name);
const Literal& attr_literal(const Attrs& a, const char* name);

// Shared shape helpers (used by inference, the interpreter and the frontend).
// Normalises a possibly negative axis against rank; throws "[op] axis 3 out of range for rank 2".
int64_t normalize_axis(std::string_view op, int64_t axis, int64_t rank);
std::vector<int64_t> normalize_axes(std::string_view op, const std::vector<int64_t>& axes, int64_t rank);
Shape broadcast_shapes(std::string_view op, const Shape& a, const Shape& b);
// Requires a == b: a Value error naming `what` when both are static, else a SymbolicShapeError
// carrying their symbols (the tracer specialises them and traces again).
void require_equal_dims(std::string_view op, const Dim& a, const Dim& b, const std::string& what);
// The dtype elementwise inputs are promoted to (bool for no inputs).
DType promoted_dtype(std::span<const TensorType> inputs);

// The reductions a loop folds with one combiner and no index (sum, mean, prod, max, min): what
// row and column kernels fold, and what split-reductions splits.
bool is_plain_fold(Op op);

// A shape's dims as runs of neighbours that are all reduced (in `axes`, normalised) or all kept,
// each run one dim of their product: batch norm's (0, 2, 3) of [N, C, H, W] is [N | C | H*W].
struct DimRun {
  Dim size;
  bool reduced;
  int dims;  // how many of the shape's dims it merges
};
std::vector<DimRun> dim_runs(const Shape& shape, const std::vector<int64_t>& axes);

}  // namespace ember

#include "ir/op.h"

#include <algorithm>

#include "ir/error.h"
#include "ir/ops/registry.h"

namespace ember {

namespace {

// A code generator lowers each op from its record: a reduction needs a combiner or a
// decomposition (one, not both), a composite its decomposition, and only reductions combine.
void check_semantics(const OpInfo& info) {
  if (info.is_reduction())
    EMBER_CHECK(info.reduction.has_value() != info.has_decomposition(), "reduction '", info.name,
                "' needs either a combiner (a primitive) or a decomposition in its record");
  else
    EMBER_CHECK(!info.reduction, "op '", info.name, "' declares a combiner but is no reduction");
  if (info.kind == OpKind::Composite)
    EMBER_CHECK(info.has_decomposition(), "composite '", info.name, "' has no decomposition");
  if (info.reduction)
    EMBER_CHECK(info.reduction->accumulator && info.reduction->identity, "reduction '", info.name,
                "' declares no accumulator or identity");
}

ops::Table build_table() {
  ops::Table table;
#define EMBER_OP(name_, text, min_a, max_a, kind_) \
  table.emplace_back();                             \
  table.back().op = Op::name_;                      \
  table.back().name = text;                         \
  table.back().min_arity = min_a;                   \
  table.back().max_arity = max_a;                   \
  table.back().kind = OpKind::kind_;
#include "ir/ops.def"
#undef EMBER_OP
  ops::register_elementwise(table);
  ops::register_reductions(table);
  ops::register_contractions(table);
  ops::register_movement(table);
  ops::register_composites(table);
  ops::register_creation(table);
  ops::register_sorting(table);
  ops::register_extern(table);
  for (const OpInfo& info : table) {
    EMBER_CHECK((info.infer != nullptr) != (info.infer_multi != nullptr), "op '", info.name,
                "' needs exactly one inference function in its registry record");
    EMBER_CHECK(!info.doc.empty(), "op '", info.name, "' has no doc line");
    check_semantics(info);
  }
  return table;
}

const ops::Table& table() {
  static const ops::Table t = build_table();
  return t;
}

template <class T>
const T& get_attr(const Attrs& a, const char* name, AttrType type) {
  auto it = a.find(name);
  EMBER_CHECK(it != a.end(), "attribute '", name, "' missing after inference");
  EMBER_CHECK(attr_type(it->second) == type, "attribute '", name, "' has the wrong type");
  return std::get<T>(it->second);
}

}  // namespace

std::string TensorType::str() const { return std::string(dtype_name(dtype)) + shape_str(shape); }

std::string types_str(const std::vector<TensorType>& types) {
  std::string out;
  for (const TensorType& t : types) out += (out.empty() ? "" : ", ") + t.str();
  return out;
}

const OpInfo& op_info(Op op) { return table()[static_cast<size_t>(op)]; }
std::string_view op_name(Op op) { return op_info(op).name; }

std::optional<Op> parse_op(std::string_view name) {
  for (const OpInfo& info : table())
    if (info.name == name) return info.op;
  return std::nullopt;
}

std::vector<TensorType> infer_types(Op op, std::span<const TensorType> inputs, Attrs& attrs) {
  const OpInfo& info = op_info(op);
  int n = static_cast<int>(inputs.size());
  if (n < info.min_arity || (info.max_arity >= 0 && n > info.max_arity)) {
    std::string expected = info.min_arity == info.max_arity ? std::to_string(info.min_arity)
                           : info.max_arity < 0 ? "at least " + std::to_string(info.min_arity)
                           : std::to_string(info.min_arity) + " to " + std::to_string(info.max_arity);
    EMBER_OP_ERROR(Value, info, "expects ", expected, " inputs, got ", n);
  }
  for (const auto& [name, value] : attrs) {
    auto spec = std::find_if(info.attrs.begin(), info.attrs.end(),
                             [&](const AttrSpec& s) { return s.name == name; });
    if (spec == info.attrs.end() && info.open_attributes) continue;
    if (spec == info.attrs.end()) {
      std::string valid;
      for (const AttrSpec& s : info.attrs) valid += (valid.empty() ? "" : ", ") + s.name;
      EMBER_OP_ERROR(Value, info, "unknown attribute '", name, "' (valid: ",
                     valid.empty() ? "none" : valid, ")");
    }
    if (attr_type(value) != spec->type)
      EMBER_OP_ERROR(Type, info, "attribute '", name, "' must be ", attr_type_name(spec->type),
                     ", got ", attr_type_name(attr_type(value)));
  }
  for (const AttrSpec& spec : info.attrs) {
    if (attrs.count(spec.name)) continue;
    if (!spec.default_value) EMBER_OP_ERROR(Value, info, "missing attribute '", spec.name, "'");
    attrs[spec.name] = *spec.default_value;
  }
  std::vector<TensorType> types;
  if (info.infer) types = {info.infer(info, inputs, attrs)};
  else types = info.infer_multi(info, inputs, attrs);
  EMBER_CHECK(!types.empty(), "op '", info.name, "' inferred no outputs");
  // A derived dim (s0 - 3) can be negative at some sizes: the formula that made it holds only
  // where it is not (see [Note: symbolic facts]).
  for (const TensorType& out : types) {
    for (const Dim& d : out.shape)
      if (!d.is_static()) assume_nonnegative(d, detail::concat("[", info.name, "] output size"));
    if (is_static(out.shape)) checked_numel(info.name, static_shape(out.shape));
  }
  return types;
}

TensorType infer_type(Op op, std::span<const TensorType> inputs, Attrs& attrs) {
  EMBER_CHECK(!op_info(op).multi_output(), "infer_type of the multi-output op '", op_name(op), "'");
  return infer_types(op, inputs, attrs)[0];
}

int64_t attr_int(const Attrs& a, const char* n) { return get_attr<int64_t>(a, n, AttrType::Int); }
double attr_float(const Attrs& a, const char* n) { return get_attr<double>(a, n, AttrType::Float); }
bool attr_bool(const Attrs& a, const char* n) { return get_attr<bool>(a, n, AttrType::Bool); }
DType attr_dtype(const Attrs& a, const char* n) { return get_attr<DType>(a, n, AttrType::DType); }
const std::vector<int64_t>& attr_ints(const Attrs& a, const char* n) {
  return get_attr<std::vector<int64_t>>(a, n, AttrType::Ints);
}
const Shape& attr_shape(const Attrs& a, const char* n) { return get_attr<Shape>(a, n, AttrType::Shape); }
const std::string& attr_string(const Attrs& a, const char* n) {
  return get_attr<std::string>(a, n, AttrType::String);
}
const Literal& attr_literal(const Attrs& a, const char* n) {
  return get_attr<Literal>(a, n, AttrType::Literal);
}

int64_t normalize_axis(std::string_view op, int64_t axis, int64_t rank) {
  int64_t r = std::max<int64_t>(rank, 1);  // a 0-d tensor accepts axis 0 and -1, as in PyTorch
  if (axis < -r || axis >= r)
    EMBER_THROW(Value, "[", op, "] axis ", axis, " is out of range for a tensor of rank ", rank);
  return axis < 0 ? axis + r : axis;
}

std::vector<int64_t> normalize_axes(std::string_view op, const std::vector<int64_t>& axes, int64_t rank) {
  std::vector<int64_t> out;
  for (int64_t a : axes) {
    int64_t n = normalize_axis(op, a, rank);
    if (std::find(out.begin(), out.end(), n) != out.end())
      EMBER_THROW(Value, "[", op, "] axis ", a, " appears more than once");
    out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool is_plain_fold(Op op) {
  return op == Op::Sum || op == Op::Mean || op == Op::Prod || op == Op::Max || op == Op::Min;
}

std::vector<DimRun> dim_runs(const Shape& shape, const std::vector<int64_t>& axes) {
  std::vector<DimRun> runs;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    bool reduced = std::find(axes.begin(), axes.end(), d) != axes.end();
    if (!runs.empty() && runs.back().reduced == reduced) {
      runs.back().size = runs.back().size * shape[d];
      ++runs.back().dims;
    } else {
      runs.push_back({shape[d], reduced, 1});
    }
  }
  return runs;
}

Shape broadcast_shapes(std::string_view op, const Shape& a, const Shape& b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    Dim da = i < rank - a.size() ? Dim(1) : a[i - (rank - a.size())];
    Dim db = i < rank - b.size() ? Dim(1) : b[i - (rank - b.size())];
    if (da == db || db == Dim(1)) {
      out[i] = da;
    } else if (da == Dim(1)) {
      out[i] = db;
    } else if (da.is_static() && db.is_static()) {
      EMBER_THROW(Value, "[", op, "] shapes ", shape_str(a), " and ", shape_str(b),
                  " cannot be broadcast (dim ", i, ": ", da.str(), " vs ", db.str(), ")");
    } else {
      // Symbolic dims that are not provably equal: equal in this call is a fact to guard.
      assume_equal(da, db, detail::concat("[", op, "] broadcast dims equal"));
      out[i] = da;
    }
  }
  return out;
}

void require_equal_dims(std::string_view op, const Dim& a, const Dim& b, const std::string& what) {
  if (a == b) return;
  if (a.is_static() && b.is_static()) EMBER_THROW(Value, "[", op, "] ", what);
  assume_equal(a, b, detail::concat("[", op, "] ", what));
}

DType promoted_dtype(std::span<const TensorType> inputs) {
  if (inputs.empty()) return DType::Bool;
  // PyTorch gives tensors with dims priority over 0-d tensors of the same category: a 0-d
  // float64 does not widen a float32 tensor, but a 0-d float does turn an int tensor float.
  auto category = [](DType t) { return is_bool(t) ? 0 : is_integral(t) ? 1 : 2; };
  std::optional<DType> dimmed, zero_dim;
  for (const TensorType& t : inputs) {
    auto& slot = t.shape.empty() ? zero_dim : dimmed;
    slot = slot ? promote_types(*slot, t.dtype) : t.dtype;
  }
  if (!dimmed) return *zero_dim;
  if (!zero_dim || category(*zero_dim) <= category(*dimmed)) return *dimmed;
  return promote_types(*dimmed, *zero_dim);
}

}  // namespace ember

#include "ir/extern.h"


#include "ir/error.h"
#include "ir/graph.h"
#include "ir/named_registry.h"

namespace ember {

namespace {

NamedRegistry<ExternOpDef>& registry() {
  static NamedRegistry<ExternOpDef> r;
  return r;
}

}  // namespace

void register_extern_op(ExternOpDef def) {
  if (def.name.empty()) EMBER_THROW(Value, "[register_op] the op needs a name");
  if (!def.shape) EMBER_THROW(Value, "[register_op] op '", def.name, "' needs a shape function");
  std::string name = def.name;
  registry().set(name, std::move(def));
}

std::shared_ptr<const ExternOpDef> find_extern_op(std::string_view name) { return registry().find(name); }

namespace {

// True when `v` is a constant or a `full` and every element passes `ok`.
template <class F>
bool known_all(const Value& v, F&& ok) {
  const Node* n = v.node;
  if (n->op == Op::Full) return ok(attr_float(n->attrs, "value"));
  if (n->op != Op::Constant) return false;
  const Literal& lit = attr_literal(n->attrs, "value");
  for (size_t i = 0; i < lit.size(); ++i)
    if (!ok(lit.as_double(i))) return false;
  return true;
}

}  // namespace

bool must_run(const Node* n) {
  DType t = n->types[0].dtype;
  switch (n->op) {
    case Op::FloorDivide:
    case Op::Remainder:  // by zero (false, for bool), unless the divisor is a known non-zero
      return !is_floating(t) && !known_all(n->inputs()[1], [](double d) { return d != 0; });
    case Op::Pow:  // to a negative power (never for bool), unless a known non-negative exponent
      return !is_floating(t) && !is_bool(t) &&
             !known_all(n->inputs()[1], [](double d) { return d >= 0; });
    case Op::IndexSelect:
    case Op::Gather:
    case Op::Embedding:
    case Op::IndexPut:
    case Op::Scatter:
      return true;
    default:
      return has_side_effects(n);
  }
}

bool has_side_effects(const Node* n) {
  if (!n->info().is_extern()) return false;
  auto def = find_extern_op(attr_string(n->attrs, "name"));
  return !def || !def->pure;
}

}  // namespace ember

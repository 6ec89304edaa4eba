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

bool must_run(const Node* n) {
  switch (n->op) {
    case Op::FloorDivide:
    case Op::Remainder:
    case Op::Pow:
      return !is_floating(n->types[0].dtype) && !is_bool(n->types[0].dtype);
    case Op::IndexSelect:
    case Op::Gather:
    case Op::Embedding:
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

#include "ir/extern.h"

#include <map>
#include <memory>
#include <mutex>

#include "ir/error.h"
#include "ir/graph.h"

namespace ember {

namespace {

struct Registry {
  std::mutex mutex;
  // Held by pointer so a definition stays valid while a graph refers to it, even if replaced.
  std::map<std::string, std::shared_ptr<const ExternOpDef>, std::less<>> ops;
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

void register_extern_op(ExternOpDef def) {
  if (def.name.empty()) EMBER_THROW(Value, "[register_op] the op needs a name");
  if (!def.shape) EMBER_THROW(Value, "[register_op] op '", def.name, "' needs a shape function");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::string name = def.name;
  r.ops[name] = std::make_shared<const ExternOpDef>(std::move(def));
}

const ExternOpDef* find_extern_op(std::string_view name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.ops.find(name);
  return it == r.ops.end() ? nullptr : it->second.get();
}

bool has_side_effects(const Node* n) {
  if (!n->info().is_extern()) return false;
  const ExternOpDef* def = find_extern_op(attr_string(n->attrs, "name"));
  return !def || !def->pure;
}

}  // namespace ember

#include "passes/cse.h"

#include <unordered_map>

#include "ir/extern.h"

namespace ember {

namespace {

class CommonSubexpressionElimination : public Pass {
 public:
  std::string_view name() const override { return "cse"; }

  bool run(Graph& g) override {
    // The key names inputs by their node's position in the graph and the output index, so it is
    // deterministic. A node is one unit: a duplicate multi-output node is replaced whole.
    std::vector<size_t> position(g.id_bound());
    std::unordered_map<std::string, Node*> seen;
    size_t next = 0;
    bool changed = false;
    for (Node* n : g.nodes()) {
      position[n->id()] = next++;
      if (n->op == Op::Input || has_side_effects(n)) continue;  // each impure call happens
      std::string key = std::string(n->info().name) + "(";
      for (const Value& in : n->inputs())
        key += std::to_string(position[in.node->id()]) + "#" + std::to_string(in.index) + ",";
      key += ")";
      for (const auto& [name, value] : n->attrs) key += name + "=" + attr_str(value) + ";";
      key += types_str(n->types);
      auto [it, inserted] = seen.emplace(key, n);
      if (inserted) continue;
      g.replace_all_uses(n, it->second);
      position[n->id()] = position[it->second->id()];
      changed = true;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> make_cse() { return std::make_unique<CommonSubexpressionElimination>(); }

}  // namespace ember

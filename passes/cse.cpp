#include "passes/cse.h"

#include <map>
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
    std::unordered_map<const Node*, size_t> position;
    std::map<std::string, Node*> seen;
    bool changed = false;
    for (Node* n : g.nodes()) {
      position[n] = position.size();
      if (n->op == Op::Input || has_side_effects(n)) continue;  // each impure call happens
      std::string key = std::string(n->info().name) + "(";
      for (const Value& in : n->inputs)
        key += std::to_string(position.at(in.node)) + "#" + std::to_string(in.index) + ",";
      key += ")";
      for (const auto& [name, value] : n->attrs) key += name + "=" + attr_str(value) + ";";
      key += types_str(n->types);
      auto [it, inserted] = seen.emplace(key, n);
      if (inserted) continue;
      g.replace_all_uses(n, it->second);
      position[n] = position.at(it->second);
      changed = true;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> make_cse() { return std::make_unique<CommonSubexpressionElimination>(); }

}  // namespace ember

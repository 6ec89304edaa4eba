#include "passes/cse.h"

#include <map>
#include <unordered_map>

namespace ember {

namespace {

class CommonSubexpressionElimination : public Pass {
 public:
  std::string_view name() const override { return "cse"; }

  bool run(Graph& g) override {
    // The key names inputs by their position in the graph, so it is deterministic.
    std::unordered_map<const Node*, size_t> position;
    std::map<std::string, Node*> seen;
    bool changed = false;
    for (Node* n : g.nodes()) {
      position[n] = position.size();
      if (n->op == Op::Input) continue;
      std::string key = std::string(n->info().name) + "(";
      for (Node* in : n->inputs) key += std::to_string(position.at(in)) + ",";
      key += ")";
      for (const auto& [name, value] : n->attrs) key += name + "=" + attr_str(value) + ";";
      key += n->type.str();
      auto [it, inserted] = seen.emplace(key, n);
      if (inserted) continue;
      g.replace_uses(n, it->second);
      position[n] = position.at(it->second);
      changed = true;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> make_cse() { return std::make_unique<CommonSubexpressionElimination>(); }

}  // namespace ember

#include "passes/decompose.h"

#include "ir/builder.h"
#include "ir/error.h"

namespace ember {

namespace {

// The decomposition must give the node's exact types: inference built them, so a difference is
// a bug in the decomposition, not something to paper over here.
void check_replacement(const Node* n, const std::vector<Value>& values) {
  EMBER_CHECK(values.size() == n->types.size(), "the decomposition of '", n->info().name,
              "' gave ", values.size(), " values for ", n->types.size(), " outputs");
  for (size_t i = 0; i < values.size(); ++i)
    EMBER_CHECK(values[i].type() == n->types[i], "the decomposition of '", n->info().name,
                "' gave ", values[i].type().str(), " for output ", i, " of type ",
                n->types[i].str());
}

class Decompose : public Pass {
 public:
  std::string_view name() const override { return "decompose"; }

  bool run(Graph& g) override {
    bool changed = false;
    for (Node* n : g.nodes()) {  // a snapshot: the new nodes are primitives, nothing to revisit
      if (!n->info().has_decomposition()) continue;
      Builder b(g, n);
      std::vector<Value> values = n->info().decompose(b, n->inputs(), n->attrs);
      if (values.empty()) continue;  // declined: the node stays
      check_replacement(n, values);
      for (int i = 0; i < n->num_outputs(); ++i) g.replace_uses(n->out(i), values[i]);
      changed = true;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> make_decompose() { return std::make_unique<Decompose>(); }

}  // namespace ember

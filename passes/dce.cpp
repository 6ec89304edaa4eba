#include "passes/dce.h"

namespace ember {

namespace {

class DeadCodeElimination : public Pass {
 public:
  std::string_view name() const override { return "dce"; }
  bool run(Graph& g) override { return g.remove_dead() > 0; }
};

}  // namespace

std::unique_ptr<Pass> make_dce() { return std::make_unique<DeadCodeElimination>(); }

}  // namespace ember

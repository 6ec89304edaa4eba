// The pass interface: a kebab-case name and run(), which returns whether the graph changed.
// Passes never set types by hand: they build nodes through Graph::add, where inference runs.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"

namespace ember {

class Pass {
 public:
  virtual ~Pass() = default;
  virtual std::string_view name() const = 0;
  virtual bool run(Graph& g) = 0;
};

// Every pass by name; throws ember::Error listing the valid names for an unknown one.
std::unique_ptr<Pass> make_pass(std::string_view name);
std::vector<std::string> pass_names();

std::unique_ptr<Pass> make_dce();
std::unique_ptr<Pass> make_cse();
std::unique_ptr<Pass> make_constant_fold();
std::unique_ptr<Pass> make_simplify();
std::unique_ptr<Pass> make_decompose();
std::unique_ptr<Pass> make_decompose_fusible();
std::unique_ptr<Pass> make_split_reductions();

}  // namespace ember

// A compiled graph, ready to run. In this first version its body is the optimised graph run by
// the reference interpreter; the code generators replace the body with kernels.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "ir/graph.h"
#include "runtime/array.h"

namespace ember {

class Executable {
 public:
  explicit Executable(std::unique_ptr<Graph> graph) : graph_(std::move(graph)) {}
  const Graph& graph() const { return *graph_; }
  // Thread-safe: an executable holds no per-call state.
  std::vector<Array> run(std::span<const Array> inputs, const SymbolValues& symbols) const;

 private:
  std::unique_ptr<Graph> graph_;
};

}  // namespace ember

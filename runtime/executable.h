// A compiled graph, ready to run. In this first version its body is the optimised graph run by
// the reference interpreter over a plan made once: each node reads and writes numbered slots, and
// a value's slot is released after its last use. The code generators replace the body with kernels.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "ir/graph.h"
#include "runtime/array.h"

namespace ember {

class Executable {
 public:
  explicit Executable(std::unique_ptr<Graph> graph);
  const Graph& graph() const { return *graph_; }
  // Thread-safe: an executable holds no per-call state.
  std::vector<Array> run(std::span<const Array> inputs, const SymbolValues& symbols) const;

 private:
  struct Step {
    const Node* node;
    std::vector<int> inputs;   // slots read
    std::vector<int> outputs;  // slots written, one per output
    std::vector<int> release;  // slots whose last use this is
  };
  std::unique_ptr<Graph> graph_;
  std::vector<Step> steps_;
  std::vector<int> outputs_;
  int slots_ = 0;
};

}  // namespace ember

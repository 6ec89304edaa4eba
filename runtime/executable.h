// A compiled graph, ready to run: a plan of steps over numbered buffers.
//
// [Note: plans]
// Each value of the graph lives in one place: a graph input's own array, a constant made once
// when the plan is built, a view of another value (view ops share their input's storage), or one
// of the plan's numbered buffers. Each step (an interpreter kernel today; a generated kernel, a
// library call or an extern later) reads its input values and writes its outputs into the
// buffers it is given. Buffer sizes are polynomials of the symbols, evaluated once per call;
// values whose lifetimes do not overlap share a buffer (a view keeps the buffer it looks into
// alive until its own last use; outputs live to the end). So a call allocates one storage per
// buffer, plus whatever a kernel needs inside, and run() reports the count.
// This is the shape that generated kernels, static arenas (reduce-overhead) and CUDA graphs
// plug into.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/array.h"

namespace ember {

class Executable {
 public:
  explicit Executable(std::unique_ptr<Graph> graph);
  const Graph& graph() const { return *graph_; }
  // Thread-safe: all per-call state lives in the call. `allocations`, when given, receives the
  // storages this call allocated: one per buffer, plus kernel temporaries.
  std::vector<Array> run(std::span<const Array> inputs, const SymbolValues& symbols,
                         int64_t* allocations = nullptr) const;

  int steps() const { return static_cast<int>(steps_.size()); }
  int buffers() const { return static_cast<int>(buffer_slots_.size()); }
  // The plan as text: one line per step with the buffers it reads and writes.
  std::string describe() const;

 private:
  enum class Home : uint8_t { Input, Constant, View, Buffer };
  struct Slot {
    Home home;
    int index = -1;  // the input, constant or buffer number (views: unused)
    Value value;
  };
  struct Step {
    const Node* node;
    std::vector<int> inputs;   // slots read
    std::vector<int> outputs;  // slots written, one per output
    std::vector<int> release;  // slots whose last use this is
  };
  void plan_slots();
  void plan_buffers();

  std::unique_ptr<Graph> graph_;
  std::vector<Slot> slots_;
  std::vector<Array> constants_;
  std::vector<Step> steps_;
  std::vector<std::vector<int>> buffer_slots_;  // the slots each buffer holds, in turn
  std::vector<int> outputs_;
};

}  // namespace ember

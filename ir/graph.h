// The graph IR.
//
// General rules of the IR (every pass, backend and the interpreter rely on them):
// - Values are immutable tensors. There is no mutation and no aliasing in the IR: a view op
//   (reshape, permute, slice, ...) means "the same elements, re-indexed"; whether it shares
//   storage is the runtime's business.
// - Every node has exactly one output. Nodes are kept in topological order.
// - Type promotion is decided once, when a node is built (PyTorch's rules, ir/dtype.h): a node's
//   inputs may have different dtypes and the node's type says what it produces; kernels convert
//   inputs to the op's compute type (elementwise_compute_dtype) and do no promotion of their own.
// - Floats follow IEEE 754: NaN propagates through arithmetic, max/min and clamp; comparisons with
//   NaN are false (ne is true). float16/bfloat16 compute in float32 and round once when stored.
// - Integers wrap around at their width (two's complement); integer division or remainder by zero
//   is an error. Casting a float to an integer truncates toward zero, saturates at the int64
//   range and then wraps to the target width like any integer; NaN gives 0.
//   Casting to bool gives x != 0.
// - Shapes are polynomials over symbols (ir/symbolic.h). A symbol's range is [min, max]; the
//   tracer never makes a dim of size 0 or 1 symbolic, so broadcasting can treat symbols as > 1.
// - Strides are not part of the IR: a graph input is a logical tensor, whatever its layout.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "ir/op.h"

namespace ember {

struct Node {
  Op op;
  std::vector<Node*> inputs;
  Attrs attrs;
  TensorType type;

  const OpInfo& info() const { return op_info(op); }
};

struct SymbolRange {
  int64_t min = 2;
  int64_t max = std::numeric_limits<int64_t>::max();
};

class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  Graph(Graph&&) = default;
  Graph& operator=(Graph&&) = default;

  // Adds a graph input of the given type; inputs are numbered in the order they are added.
  Node* add_input(TensorType type);
  // Adds a node at the end; its type is inferred (and attribute defaults filled) here.
  // Throws ember::Error on bad inputs or attributes.
  Node* add(Op op, std::vector<Node*> inputs, Attrs attrs = {});
  // Adds a constant holding `value`, of the given shape (static), at the end or just before
  // `before` (so a pass can replace a node in place without re-sorting).
  Node* add_constant(Literal value, Shape shape, const Node* before = nullptr);

  // Declares a new symbol and returns its id.
  int add_symbol(SymbolRange range = {});
  const std::vector<SymbolRange>& symbols() const { return symbols_; }
  std::vector<SymbolRange>& symbols() { return symbols_; }

  const std::vector<Node*>& inputs() const { return inputs_; }
  std::vector<Node*>& outputs() { return outputs_; }
  const std::vector<Node*>& outputs() const { return outputs_; }
  // All nodes (inputs included) in topological order.
  std::vector<Node*> nodes() const;
  size_t size() const { return nodes_.size(); }

  // Redirects every use of `from` (node inputs and graph outputs) to `to`.
  void replace_uses(Node* from, Node* to);
  // Removes nodes that no output depends on; graph inputs stay. Returns how many were removed.
  size_t remove_dead();

  std::unique_ptr<Graph> clone() const;

 private:
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<Node*> inputs_;
  std::vector<Node*> outputs_;
  std::vector<SymbolRange> symbols_;
};

// The text form (see docs/ir.md). Names are %0, %1, ... in order; attributes are sorted.
std::string print(const Graph& g);
// Parses the text form. Throws ember::Error with the line number on malformed text.
std::unique_ptr<Graph> parse_graph(const std::string& text);
// Checks the rules above; throws an internal error that names the node and prints the graph.
void verify(const Graph& g);
// A hash of the printed graph, the same in every run and process.
uint64_t structural_hash(const Graph& g);

}  // namespace ember

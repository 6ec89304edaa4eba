// The graph IR.
//
// General rules of the IR (every pass, backend and the interpreter rely on them):
// - Values are immutable tensors. There is no mutation and no aliasing in the IR: a view op
//   (reshape, permute, slice, ...) means "the same elements, re-indexed"; whether it shares
//   storage is the runtime's business.
// - A node has one or more outputs, each with its own type; a value is a node and an output
//   index (text: %3 for a single-output node, %3#1 for output 1 of a multi-output one). A node is
//   one unit: it runs once, CSE merges it whole, DCE keeps it while any output is used. Nodes are
//   kept in topological order. There is no mutation, so an op that would update state (batch
//   norm's running statistics) returns the new state as extra outputs.
// - Type promotion is decided once, when a node is built (PyTorch's rules, ir/dtype.h): a node's
//   inputs may have different dtypes and the node's types say what it produces; kernels convert
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
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "ir/op.h"

namespace ember {

class Graph;
class Node;

// One output of a node. A Node* converts to the value of its only output (a multi-output node
// is an internal error there: name the output with Node::out).
struct Value {
  Node* node = nullptr;
  int index = 0;

  Value() = default;
  Value(Node* n, int i) : node(n), index(i) {}
  Value(Node* n);  // NOLINT: single-output nodes are used as values everywhere
  const TensorType& type() const;
  bool operator==(const Value& o) const { return node == o.node && index == o.index; }
};

struct ValueHash {
  size_t operator()(const Value& v) const {
    return std::hash<const Node*>()(v.node) * 31 + static_cast<size_t>(v.index);
  }
};

// A use of a node's output: operand `operand` of `user`, or graph output `operand` when `user`
// is null. Which output is used is the value stored there.
struct Use {
  Node* user = nullptr;
  int operand = 0;
};

// [Note: use lists] Every node knows its uses (all outputs together, in no particular order), so
// redirecting the uses of a value costs what it touches. Inputs and graph outputs change only
// through Graph (add, set_input, add_output, set_outputs, replace_uses, remove_dead), which keeps
// the lists exact; verify() checks them.
class Node {
 public:
  Node() = default;
  Node(const Node&) = delete;  // a copy would share the graph's links and use lists
  Node& operator=(const Node&) = delete;

  Op op;
  Attrs attrs;
  std::vector<TensorType> types;  // one per output

  const OpInfo& info() const { return op_info(op); }
  int num_outputs() const { return static_cast<int>(types.size()); }
  Value out(int i) { return {this, i}; }
  // The type of a single-output node (an internal error on a multi-output one).
  const TensorType& type() const;
  const std::vector<Value>& inputs() const { return inputs_; }
  const std::vector<Use>& uses() const { return uses_; }
  // The node after this one in topological order, or null.
  Node* next() const { return next_; }
  // Unique within its graph and stable, but not the order: an index for side tables sized by
  // Graph::id_bound() (as LLVM's and XLA's unique ids), cheaper than hashing pointers.
  size_t id() const { return id_; }

 private:
  friend class Graph;
  std::vector<Value> inputs_;
  std::vector<Use> uses_;
  Node* prev_ = nullptr;  // the graph's order: an intrusive list, so inserting is O(1)
  Node* next_ = nullptr;
  size_t slot_ = 0;       // where the graph owns it (swap-and-pop on removal)
  size_t id_ = 0;
};

inline const TensorType& Value::type() const { return node->types[index]; }

struct SymbolRange {
  int64_t min = 2;
  int64_t max = std::numeric_limits<int64_t>::max();
};

// Every edit costs what it touches (see [Note: use lists]): adding or inserting a node is O(its
// inputs), redirecting uses O(the uses moved), remove_dead O(the graph) once for any number of
// dead nodes.
class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  Graph(Graph&& other) noexcept;
  Graph& operator=(Graph&& other) noexcept;

  // Adds a graph input of the given type; inputs are numbered in the order they are added.
  Node* add_input(TensorType type);
  // Adds a node at the end, or just before `before`; its output types are inferred (and
  // attribute defaults filled) here. Throws ember::Error on bad inputs or attributes.
  Node* add(Op op, std::vector<Value> inputs, Attrs attrs = {}, const Node* before = nullptr);
  // Adds a constant holding `value`, of the given shape (static), at the end or just before
  // `before` (so a pass can replace a node in place without re-sorting).
  Node* add_constant(Literal value, Shape shape, const Node* before = nullptr);

  // Declares a new symbol and returns its id.
  int add_symbol(SymbolRange range = {});
  const std::vector<SymbolRange>& symbols() const { return symbols_; }
  std::vector<SymbolRange>& symbols() { return symbols_; }

  const std::vector<Node*>& inputs() const { return inputs_; }
  const std::vector<Value>& outputs() const { return outputs_; }
  void add_output(Value v);
  void set_outputs(std::vector<Value> outputs);
  // All nodes (inputs included) in topological order.
  std::vector<Node*> nodes() const;
  Node* first() const { return head_; }
  size_t size() const { return owned_.size(); }
  // One more than the largest node id given out (ids of removed nodes are not reused).
  size_t id_bound() const { return next_id_; }

  // Sets operand i of `n` (the verifier, not this, checks that the order stays topological).
  // Costs the uses of the old operand's node, which it searches.
  void set_input(Node* n, int i, Value v);
  // Redirects every use of `from` (node inputs and graph outputs) to `to`.
  void replace_uses(Value from, Value to);
  // Redirects every use of each output of `from` to the same output of `to` (same arity).
  void replace_all_uses(Node* from, Node* to);
  // Removes nodes none of whose outputs a graph output depends on; graph inputs stay. Returns how
  // many were removed.
  size_t remove_dead();

  std::unique_ptr<Graph> clone() const;

 private:
  // Links `node` in at the end or before `before`, takes ownership and records its uses.
  Node* insert(std::unique_ptr<Node> node, const Node* before);
  void unlink_and_destroy(Node* n);

  std::vector<std::unique_ptr<Node>> owned_;  // in no particular order
  Node* head_ = nullptr;
  Node* tail_ = nullptr;
  size_t next_id_ = 0;
  std::vector<Node*> inputs_;
  std::vector<Value> outputs_;
  std::vector<SymbolRange> symbols_;
};

// The text form (see docs/ir.md). Names are %0, %1, ... in order; attributes are sorted.
std::string print(const Graph& g);
// Parses the text form. Throws ember::Error with the line number on malformed text.
std::unique_ptr<Graph> parse_graph(const std::string& text);
// A node's attributes as the text form writes them: " {a=1, b=[2, 3]}", or "" for none.
std::string attrs_str(const Attrs& attrs);
// Parses what attrs_str wrote for an op (its attribute types tell how to read each value).
Attrs parse_attrs(std::string_view text, Op op);
// Checks the rules above; throws an internal error that names the node and prints the graph.
void verify(const Graph& g);
// A hash of the printed graph, the same in every run and process.
uint64_t structural_hash(const Graph& g);

}  // namespace ember

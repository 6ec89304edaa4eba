#include "ir/graph.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "ir/error.h"
#include "ir/extern.h"

namespace ember {

Value::Value(Node* n) : node(n), index(0) {
  EMBER_CHECK(n && n->types.size() == 1, "a '", n ? n->info().name : "null", "' node with ",
              n ? n->types.size() : 0, " outputs used as one value; name the output with out(i)");
}

const TensorType& Node::type() const {
  EMBER_CHECK(types.size() == 1, "type() of a '", info().name, "' node with ", types.size(),
              " outputs; use types[i]");
  return types[0];
}

Node* Graph::add_input(TensorType type) {
  auto node = std::make_unique<Node>();
  node->op = Op::Input;
  node->attrs["index"] = static_cast<int64_t>(inputs_.size());
  node->types = {std::move(type)};
  inputs_.push_back(node.get());
  nodes_.push_back(std::move(node));
  return inputs_.back();
}

Node* Graph::add(Op op, std::vector<Value> inputs, Attrs attrs) {
  EMBER_CHECK(op != Op::Input && op != Op::Constant, "use add_input / add_constant");
  std::vector<TensorType> types;
  for (const Value& in : inputs) types.push_back(in.type());
  auto node = std::make_unique<Node>();
  node->types = infer_types(op, types, attrs);
  node->op = op;
  node->inputs = std::move(inputs);
  node->attrs = std::move(attrs);
  nodes_.push_back(std::move(node));
  return nodes_.back().get();
}

Node* Graph::add_constant(Literal value, Shape shape, const Node* before) {
  EMBER_CHECK(is_static(shape), "constants have static shapes");
  EMBER_CHECK(static_cast<int64_t>(value.size()) == numel(shape).value(), "literal size ", value.size(),
              " does not match shape ", shape_str(shape));
  auto node = std::make_unique<Node>();
  node->op = Op::Constant;
  node->types = {{value.dtype, std::move(shape)}};
  node->attrs["value"] = std::move(value);
  Node* raw = node.get();
  auto at = std::find_if(nodes_.begin(), nodes_.end(), [&](const auto& n) { return n.get() == before; });
  nodes_.insert(at, std::move(node));
  return raw;
}

int Graph::add_symbol(SymbolRange range) {
  symbols_.push_back(range);
  return static_cast<int>(symbols_.size()) - 1;
}

std::vector<Node*> Graph::nodes() const {
  std::vector<Node*> out;
  out.reserve(nodes_.size());
  for (const auto& n : nodes_) out.push_back(n.get());
  return out;
}

void Graph::replace_uses(Value from, Value to) {
  for (auto& n : nodes_)
    for (Value& in : n->inputs)
      if (in == from) in = to;
  for (Value& out : outputs_)
    if (out == from) out = to;
}

void Graph::replace_all_uses(Node* from, Node* to) {
  EMBER_CHECK(from->types.size() == to->types.size(), "replace_all_uses between a '",
              from->info().name, "' with ", from->types.size(), " outputs and a '",
              to->info().name, "' with ", to->types.size());
  for (int i = 0; i < from->num_outputs(); ++i) replace_uses(from->out(i), to->out(i));
}

size_t Graph::remove_dead() {
  std::unordered_set<const Node*> live;
  for (const Value& out : outputs_) live.insert(out.node);
  // An impure extern call stays, used or not: its side effects are part of the program.
  for (const auto& n : nodes_)
    if (has_side_effects(n.get())) live.insert(n.get());
  for (auto it = nodes_.rbegin(); it != nodes_.rend(); ++it)
    if (live.count(it->get()))
      for (const Value& in : (*it)->inputs) live.insert(in.node);
  size_t before = nodes_.size();
  std::erase_if(nodes_, [&](const std::unique_ptr<Node>& n) {
    return n->op != Op::Input && !live.count(n.get());
  });
  return before - nodes_.size();
}

std::unique_ptr<Graph> Graph::clone() const {
  auto g = std::make_unique<Graph>();
  g->symbols_ = symbols_;
  std::unordered_map<const Node*, Node*> map;
  auto mapped = [&](const Value& v) { return Value(map.at(v.node), v.index); };
  for (const auto& n : nodes_) {
    auto copy = std::make_unique<Node>(*n);
    for (Value& in : copy->inputs) in = mapped(in);
    map[n.get()] = copy.get();
    if (copy->op == Op::Input) g->inputs_.push_back(copy.get());
    g->nodes_.push_back(std::move(copy));
  }
  // Inputs keep their numbering, even if nodes_ lists them in another order.
  std::sort(g->inputs_.begin(), g->inputs_.end(), [](Node* a, Node* b) {
    return attr_int(a->attrs, "index") < attr_int(b->attrs, "index");
  });
  for (const Value& out : outputs_) g->outputs_.push_back(mapped(out));
  return g;
}

}  // namespace ember

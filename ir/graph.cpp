#include "ir/graph.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "ir/error.h"

namespace ember {

Node* Graph::add_input(TensorType type) {
  auto node = std::make_unique<Node>();
  node->op = Op::Input;
  node->attrs["index"] = static_cast<int64_t>(inputs_.size());
  node->type = std::move(type);
  inputs_.push_back(node.get());
  nodes_.push_back(std::move(node));
  return inputs_.back();
}

Node* Graph::add(Op op, std::vector<Node*> inputs, Attrs attrs) {
  EMBER_CHECK(op != Op::Input && op != Op::Constant, "use add_input / add_constant");
  std::vector<TensorType> types;
  for (Node* in : inputs) types.push_back(in->type);
  auto node = std::make_unique<Node>();
  node->type = infer_type(op, types, attrs);
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
  node->type = {value.dtype, std::move(shape)};
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

void Graph::replace_uses(Node* from, Node* to) {
  for (auto& n : nodes_)
    for (Node*& in : n->inputs)
      if (in == from) in = to;
  for (Node*& out : outputs_)
    if (out == from) out = to;
}

size_t Graph::remove_dead() {
  std::unordered_set<const Node*> live(outputs_.begin(), outputs_.end());
  for (auto it = nodes_.rbegin(); it != nodes_.rend(); ++it)
    if (live.count(it->get()))
      for (Node* in : (*it)->inputs) live.insert(in);
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
  for (const auto& n : nodes_) {
    auto copy = std::make_unique<Node>(*n);
    for (Node*& in : copy->inputs) in = map.at(in);
    map[n.get()] = copy.get();
    if (copy->op == Op::Input) g->inputs_.push_back(copy.get());
    g->nodes_.push_back(std::move(copy));
  }
  // Inputs keep their numbering, even if nodes_ lists them in another order.
  std::sort(g->inputs_.begin(), g->inputs_.end(), [](Node* a, Node* b) {
    return attr_int(a->attrs, "index") < attr_int(b->attrs, "index");
  });
  for (Node* out : outputs_) g->outputs_.push_back(map.at(out));
  return g;
}

void verify(const Graph& g) {
  std::unordered_set<const Node*> seen;
  auto fail = [&](const Node* n, const std::string& why) {
    std::string where = n ? detail::concat(" at a '", n->info().name, "' node") : "";
    EMBER_CHECK(false, "verifier", where, ": ", why, "\n", print(g));
  };
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const Node* in = g.inputs()[i];
    if (in->op != Op::Input || attr_int(in->attrs, "index") != static_cast<int64_t>(i))
      fail(in, detail::concat("graph input ", i, " is not an input node with index ", i));
  }
  for (const Node* n : g.nodes()) {
    for (const Node* in : n->inputs)
      if (!seen.count(in)) fail(n, "uses a value that is not defined before it");
    seen.insert(n);
    if (n->op == Op::Input) continue;
    if (n->op == Op::Constant) {
      const Literal& lit = attr_literal(n->attrs, "value");
      if (lit.dtype != n->type.dtype || !is_static(n->type.shape) ||
          static_cast<int64_t>(lit.size()) != numel(n->type.shape).value())
        fail(n, "constant value does not match its type " + n->type.str());
      continue;
    }
    std::vector<TensorType> types;
    for (const Node* in : n->inputs) types.push_back(in->type);
    Attrs attrs = n->attrs;
    TensorType expected;
    try {
      expected = infer_type(n->op, types, attrs);
    } catch (const Error& e) {
      fail(n, std::string("inference fails: ") + e.what());
    } catch (const SymbolicShapeError& e) {
      fail(n, std::string("inference fails: ") + e.what());
    }
    if (!(expected == n->type)) fail(n, "type " + n->type.str() + " differs from the inferred " + expected.str());
    if (attrs.size() != n->attrs.size()) fail(n, "attribute defaults are not filled in");
  }
  for (const Node* out : g.outputs())
    if (!seen.count(out)) fail(nullptr, "an output is not a node of the graph");
  for (const Node* n : g.nodes())
    for (const Dim& d : n->type.shape)
      for (int s : d.symbols())
        if (s < 0 || static_cast<size_t>(s) >= g.symbols().size())
          fail(n, detail::concat("uses undeclared symbol s", s));
}

}  // namespace ember

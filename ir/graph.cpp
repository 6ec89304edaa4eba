#include "ir/graph.h"

#include <algorithm>
#include <utility>

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

Graph::Graph(Graph&& other) noexcept { *this = std::move(other); }

Graph& Graph::operator=(Graph&& other) noexcept {
  owned_ = std::move(other.owned_);
  head_ = std::exchange(other.head_, nullptr);
  tail_ = std::exchange(other.tail_, nullptr);
  next_id_ = std::exchange(other.next_id_, 0);
  inputs_ = std::move(other.inputs_);
  outputs_ = std::move(other.outputs_);
  symbols_ = std::move(other.symbols_);
  return *this;
}

Node* Graph::insert(std::unique_ptr<Node> node, const Node* before) {
  Node* n = node.get();
  n->id_ = next_id_++;
  n->slot_ = owned_.size();
  owned_.push_back(std::move(node));
  if (before) {
    EMBER_CHECK(before->slot_ < owned_.size() && owned_[before->slot_].get() == before,
                "inserting before a node of another graph");
    Node* at = const_cast<Node*>(before);
    n->prev_ = at->prev_;
    n->next_ = at;
    (at->prev_ ? at->prev_->next_ : head_) = n;
    at->prev_ = n;
  } else {
    n->prev_ = tail_;
    (tail_ ? tail_->next_ : head_) = n;
    tail_ = n;
  }
  for (size_t i = 0; i < n->inputs_.size(); ++i)
    n->inputs_[i].node->uses_.push_back({n, static_cast<int>(i)});
  return n;
}

void Graph::unlink_and_destroy(Node* n) {
  (n->prev_ ? n->prev_->next_ : head_) = n->next_;
  (n->next_ ? n->next_->prev_ : tail_) = n->prev_;
  size_t slot = n->slot_;
  std::swap(owned_[slot], owned_.back());
  owned_[slot]->slot_ = slot;
  owned_.pop_back();  // destroys n
}

Node* Graph::add_input(TensorType type) {
  auto node = std::make_unique<Node>();
  node->op = Op::Input;
  node->attrs["index"] = static_cast<int64_t>(inputs_.size());
  node->types = {std::move(type)};
  inputs_.push_back(insert(std::move(node), nullptr));
  return inputs_.back();
}

Node* Graph::add(Op op, std::vector<Value> inputs, Attrs attrs, const Node* before) {
  EMBER_CHECK(op != Op::Input && op != Op::Constant, "use add_input / add_constant");
  std::vector<TensorType> types;
  for (const Value& in : inputs) types.push_back(in.type());
  auto node = std::make_unique<Node>();
  node->types = infer_types(op, types, attrs);
  node->op = op;
  node->inputs_ = std::move(inputs);
  node->attrs = std::move(attrs);
  return insert(std::move(node), before);
}

Node* Graph::add_constant(Literal value, Shape shape, const Node* before) {
  EMBER_CHECK(is_static(shape), "constants have static shapes");
  EMBER_CHECK(static_cast<int64_t>(value.size()) == numel(shape).value(), "literal size ",
              value.size(), " does not match shape ", shape_str(shape));
  auto node = std::make_unique<Node>();
  node->op = Op::Constant;
  node->types = {{value.dtype, std::move(shape)}};
  node->attrs["value"] = std::move(value);
  return insert(std::move(node), before);
}

int Graph::add_symbol(SymbolRange range) {
  symbols_.push_back(range);
  return static_cast<int>(symbols_.size()) - 1;
}

std::vector<Node*> Graph::nodes() const {
  std::vector<Node*> out;
  out.reserve(owned_.size());
  for (Node* n = head_; n; n = n->next_) out.push_back(n);
  return out;
}

void Graph::add_output(Value v) {
  v.node->uses_.push_back({nullptr, static_cast<int>(outputs_.size())});
  outputs_.push_back(v);
}

void Graph::set_outputs(std::vector<Value> outputs) {
  for (const Value& old : outputs_)
    std::erase_if(old.node->uses_, [](const Use& u) { return u.user == nullptr; });
  outputs_.clear();
  for (const Value& v : outputs) add_output(v);
}

void Graph::set_input(Node* n, int i, Value v) {
  Value& slot = n->inputs_.at(i);
  std::erase_if(slot.node->uses_, [&](const Use& u) { return u.user == n && u.operand == i; });
  slot = v;
  v.node->uses_.push_back({n, i});
}

void Graph::replace_uses(Value from, Value to) {
  if (from == to) return;
  std::vector<Use>& uses = from.node->uses_;
  std::vector<Use> moved;
  size_t kept = 0;
  for (const Use& u : uses) {
    Value& slot = u.user ? u.user->inputs_[u.operand] : outputs_[u.operand];
    if (slot.index != from.index) {
      uses[kept++] = u;
      continue;
    }
    slot = to;
    moved.push_back(u);
  }
  uses.resize(kept);
  // Appended last: `to` may be another output of the same node, whose list is `uses`.
  to.node->uses_.insert(to.node->uses_.end(), moved.begin(), moved.end());
}

void Graph::replace_all_uses(Node* from, Node* to) {
  EMBER_CHECK(from->types.size() == to->types.size(), "replace_all_uses between a '",
              from->info().name, "' with ", from->types.size(), " outputs and a '",
              to->info().name, "' with ", to->types.size());
  if (from == to) return;
  for (const Use& u : from->uses_) {
    Value& slot = u.user ? u.user->inputs_[u.operand] : outputs_[u.operand];
    slot.node = to;
    to->uses_.push_back(u);
  }
  from->uses_.clear();
}

size_t Graph::remove_dead() {
  std::vector<char> live(next_id_, 0);
  for (const Node* in : inputs_) live[in->id_] = 1;
  for (const Value& out : outputs_) live[out.node->id_] = 1;
  // Used or not, a node with side effects or one that can raise stays ([Note: nodes that must run]).
  for (Node* n = head_; n; n = n->next_)
    if (must_run(n)) live[n->id_] = 1;
  for (Node* n = tail_; n; n = n->prev_)
    if (live[n->id_])
      for (const Value& in : n->inputs_) live[in.node->id_] = 1;
  std::vector<Node*> dead;
  for (Node* n = head_; n; n = n->next_)
    if (!live[n->id_]) dead.push_back(n);
  // Live producers forget their dead users, each producer's list filtered once.
  std::vector<Node*> touched;
  for (Node* d : dead)
    for (const Value& in : d->inputs_)
      if (live[in.node->id_] == 1) {
        live[in.node->id_] = 2;  // live and touched
        touched.push_back(in.node);
      }
  for (Node* p : touched)
    std::erase_if(p->uses_, [&](const Use& u) { return u.user && !live[u.user->id_]; });
  for (Node* d : dead) unlink_and_destroy(d);
  return dead.size();
}

std::unique_ptr<Graph> Graph::clone() const {
  auto g = std::make_unique<Graph>();
  g->symbols_ = symbols_;
  std::vector<Node*> map(next_id_, nullptr);
  auto mapped = [&](const Value& v) { return Value(map[v.node->id_], v.index); };
  for (Node* n = head_; n; n = n->next_) {
    auto copy = std::make_unique<Node>();
    copy->op = n->op;
    copy->attrs = n->attrs;
    copy->types = n->types;
    for (const Value& in : n->inputs_) copy->inputs_.push_back(mapped(in));
    Node* added = g->insert(std::move(copy), nullptr);
    map[n->id_] = added;
    if (added->op == Op::Input) g->inputs_.push_back(added);
  }
  // Inputs keep their numbering, even if the order lists them differently.
  std::sort(g->inputs_.begin(), g->inputs_.end(), [](Node* a, Node* b) {
    return attr_int(a->attrs, "index") < attr_int(b->attrs, "index");
  });
  for (const Value& out : outputs_) g->add_output(mapped(out));
  return g;
}

}  // namespace ember

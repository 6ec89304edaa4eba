#include "runtime/executable.h"

#include <algorithm>
#include <unordered_map>

#include "ir/error.h"
#include "runtime/interpreter.h"

namespace ember {

Executable::Executable(std::unique_ptr<Graph> graph) : graph_(std::move(graph)) {
  // A slot per value: inputs first, then each node's outputs in order.
  std::unordered_map<Value, int, ValueHash> slot, last_use;
  for (Node* in : graph_->inputs()) slot[in] = slots_++;
  std::vector<Node*> order;
  for (Node* n : graph_->nodes())
    if (n->op != Op::Input) {
      for (int i = 0; i < n->num_outputs(); ++i) slot[n->out(i)] = slots_++;
      order.push_back(n);
    }
  for (size_t i = 0; i < order.size(); ++i)
    for (const Value& in : order[i]->inputs) last_use[in] = static_cast<int>(i);
  for (const Value& out : graph_->outputs()) {
    outputs_.push_back(slot.at(out));
    last_use[out] = static_cast<int>(order.size());  // outputs live to the end
  }
  for (size_t i = 0; i < order.size(); ++i) {
    Node* n = order[i];
    Step step{n, {}, {}, {}};
    for (int k = 0; k < n->num_outputs(); ++k) {
      step.outputs.push_back(slot.at(n->out(k)));
      // An output nobody reads is released at once (the node runs for its other outputs).
      if (!last_use.count(n->out(k))) step.release.push_back(step.outputs.back());
    }
    for (const Value& in : n->inputs) {
      step.inputs.push_back(slot.at(in));
      bool last = last_use.at(in) == static_cast<int>(i);
      if (last && std::find(step.release.begin(), step.release.end(), slot.at(in)) == step.release.end())
        step.release.push_back(slot.at(in));
    }
    steps_.push_back(std::move(step));
  }
}

std::vector<Array> Executable::run(std::span<const Array> inputs, const SymbolValues& symbols) const {
  EMBER_CHECK(inputs.size() == graph_->inputs().size(), "executable called with ", inputs.size(), " inputs, takes ",
              graph_->inputs().size());
  std::vector<Array> slots(slots_);
  for (size_t i = 0; i < inputs.size(); ++i) slots[i] = inputs[i];
  std::vector<Array> args;
  for (const Step& step : steps_) {
    args.clear();
    for (int s : step.inputs) args.push_back(slots[s]);
    const Node* n = step.node;
    if (n->info().multi_output()) {
      std::vector<Array> results = run_op(n->op, n->attrs, args, n->types, symbols);
      for (size_t k = 0; k < results.size(); ++k) slots[step.outputs[k]] = std::move(results[k]);
    } else {
      slots[step.outputs[0]] = run_op(n->op, n->attrs, args, n->types[0], symbols);
    }
    for (int s : step.release) slots[s] = Array();  // free intermediates early
  }
  std::vector<Array> outputs;
  for (int s : outputs_) outputs.push_back(slots[s]);
  return outputs;
}

}  // namespace ember

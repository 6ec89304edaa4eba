#include "runtime/executable.h"

#include <algorithm>

#include "ir/error.h"
#include "runtime/interpreter.h"

namespace ember {

Executable::Executable(std::unique_ptr<Graph> graph) : graph_(std::move(graph)) {
  // A slot per value: inputs first, then each node's outputs in order. first_slot[id] + index
  // is a value's slot; last_use[slot] the step that reads it last (-1: none).
  std::vector<int> first_slot(graph_->id_bound(), -1);
  auto slot = [&](const Value& v) { return first_slot[v.node->id()] + v.index; };
  for (const Node* in : graph_->inputs()) first_slot[in->id()] = slots_++;
  std::vector<Node*> order;
  for (Node* n : graph_->nodes())
    if (n->op != Op::Input) {
      first_slot[n->id()] = slots_;
      slots_ += n->num_outputs();
      order.push_back(n);
    }
  std::vector<int> last_use(slots_, -1);
  for (size_t i = 0; i < order.size(); ++i)
    for (const Value& in : order[i]->inputs()) last_use[slot(in)] = static_cast<int>(i);
  for (const Value& out : graph_->outputs()) {
    outputs_.push_back(slot(out));
    last_use[slot(out)] = static_cast<int>(order.size());  // outputs live to the end
  }
  for (size_t i = 0; i < order.size(); ++i) {
    Node* n = order[i];
    Step step{n, {}, {}, {}};
    for (int k = 0; k < n->num_outputs(); ++k) {
      step.outputs.push_back(slot(n->out(k)));
      // An output nobody reads is released at once (the node runs for its other outputs).
      if (last_use[step.outputs.back()] < 0) step.release.push_back(step.outputs.back());
    }
    for (const Value& in : n->inputs()) {
      int s = slot(in);
      step.inputs.push_back(s);
      bool last = last_use[s] == static_cast<int>(i);
      if (last && std::find(step.release.begin(), step.release.end(), s) == step.release.end())
        step.release.push_back(s);
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

#include "runtime/executable.h"

#include <algorithm>
#include <unordered_map>

#include "ir/error.h"
#include "runtime/interpreter.h"

namespace ember {

Executable::Executable(std::unique_ptr<Graph> graph) : graph_(std::move(graph)) {
  std::unordered_map<const Node*, int> slot, last_use;
  for (const Node* in : graph_->inputs()) slot[in] = slots_++;
  std::vector<const Node*> order;
  for (const Node* n : graph_->nodes())
    if (n->op != Op::Input) {
      slot[n] = slots_++;
      order.push_back(n);
    }
  for (size_t i = 0; i < order.size(); ++i)
    for (const Node* in : order[i]->inputs) last_use[in] = static_cast<int>(i);
  for (const Node* out : graph_->outputs()) {
    outputs_.push_back(slot.at(out));
    last_use[out] = static_cast<int>(order.size());  // outputs live to the end
  }
  for (size_t i = 0; i < order.size(); ++i) {
    Step step{order[i], {}, slot.at(order[i]), {}};
    for (const Node* in : order[i]->inputs) {
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
    slots[step.output] = run_op(step.node->op, step.node->attrs, args, step.node->type, symbols);
    for (int s : step.release) slots[s] = Array();  // free intermediates early
  }
  std::vector<Array> outputs;
  for (int s : outputs_) outputs.push_back(slots[s]);
  return outputs;
}

}  // namespace ember

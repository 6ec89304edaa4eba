#include "codegen/cpu/recompute_choice.h"

#include <algorithm>

#include "ir/error.h"

namespace ember::codegen::cpu {

namespace {

// The shape the value broadcasts its inputs to (right-aligned; a dim of 1 takes the other's).
std::vector<int64_t> broadcast_of(std::span<const Array> inputs, const std::vector<int>& which) {
  std::vector<int64_t> shape;
  for (int i : which) {
    const std::vector<int64_t>& s = inputs[i].shape();
    if (s.size() > shape.size()) shape.insert(shape.begin(), s.size() - shape.size(), 1);
    for (size_t d = 0; d < s.size(); ++d) {
      int64_t& out = shape[shape.size() - s.size() + d];
      if (out == 1) out = s[d];
    }
  }
  return shape;
}

}  // namespace

RecomputeChoice::RecomputeChoice(std::shared_ptr<const Ways> ways, bool recompute)
    : ways_(std::move(ways)), recompute_(recompute) {}

void RecomputeChoice::run(std::span<const Array> inputs, std::span<const Array> outputs) const {
  Array value;
  if (!recompute_) value = Array::empty(ways_->value_dtype, broadcast_of(inputs, ways_->value_inputs));
  std::vector<Array> in, out;
  for (const Part& part : recompute_ ? ways_->recompute : ways_->store) {
    in.clear(), out.clear();
    for (int i : part.inputs) in.push_back(i == kValue ? value : inputs[i]);
    for (int i : part.outputs) out.push_back(i == kValue ? value : outputs[i]);
    part.kernel->run(in, out);
  }
}

std::string RecomputeChoice::name() const {
  std::string s = recompute_ ? "recompute(" : "store(";
  for (const std::vector<Part>* way : {&ways_->store, &ways_->recompute}) {
    for (const Part& part : *way) s += part.kernel->name() + (&part == &way->back() ? "" : "+");
    s += way == &ways_->store ? " | " : ")";
  }
  return s;
}

std::vector<Knob> RecomputeChoice::knobs() const { return {{"recompute", {recompute_ ? 1 : 0, recompute_ ? 0 : 1}}}; }

std::shared_ptr<const KernelStep> RecomputeChoice::with(const std::string& choice) const {
  if (choice.empty()) return std::make_shared<RecomputeChoice>(ways_, recompute_);
  if (choice != "recompute=0" && choice != "recompute=1")
    EMBER_THROW(Value, "[max-autotune] a value stored or recomputed has no choice '", choice, "' (recompute=0 or 1)");
  return std::make_shared<RecomputeChoice>(ways_, choice == "recompute=1");
}

}  // namespace ember::codegen::cpu

#include "codegen/cpu/recompute_choice.h"

#include <algorithm>

#include "runtime/step_settings.h"

#include "ir/error.h"

namespace ember::codegen::cpu {

namespace {

// The shape the value broadcasts its inputs to (right-aligned; a dim of 1 takes the other's), into
// `shape` (whose capacity a steady-state call reuses).
void broadcast_of(std::span<const Array> inputs, const std::vector<int>& which, std::vector<int64_t>& shape) {
  shape.clear();
  for (int i : which) {
    const std::vector<int64_t>& s = inputs[i].shape();
    if (s.size() > shape.size()) shape.insert(shape.begin(), s.size() - shape.size(), 1);
    for (size_t d = 0; d < s.size(); ++d) {
      int64_t& out = shape[shape.size() - s.size() + d];
      if (out == 1) out = s[d];
    }
  }
}

// The stored value: a view of the calling thread's scratch, grown when too small and kept, as is
// the view while the shape stays (a steady-state call allocates nothing). The pool's threads write
// into it during this call only.
const Array& scratch_value(DType dtype, const std::vector<int64_t>& shape) {
  thread_local Array scratch, value;
  if (value.storage() && value.dtype() == dtype && value.shape() == shape) return value;
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  const size_t bytes = static_cast<size_t>(count) * itemsize(dtype);
  if (!scratch.storage() || scratch.storage()->nbytes < bytes)
    scratch = Array::empty(DType::UInt8, {static_cast<int64_t>(std::max<size_t>(bytes, 64))});
  value = Array(dtype, shape, Array::contiguous_strides(shape), 0, scratch.storage());
  return value;
}

}  // namespace

RecomputeChoice::RecomputeChoice(Ways ways, bool recompute) : ways_(std::move(ways)), recompute_(recompute) {}

void RecomputeChoice::run(std::span<const Array> inputs, std::span<const Array> outputs) const {
  thread_local std::vector<int64_t> shape;
  thread_local std::vector<Array> in, out;
  const Array* value = nullptr;
  if (!recompute_) {
    broadcast_of(inputs, ways_.value_inputs, shape);
    value = &scratch_value(ways_.value_dtype, shape);
  }
  for (const Part& part : recompute_ ? ways_.recompute : ways_.store) {
    in.clear(), out.clear();
    for (int i : part.inputs) in.push_back(i == kValue ? *value : inputs[i]);
    for (int i : part.outputs) out.push_back(i == kValue ? *value : outputs[i]);
    part.kernel->run(in, out);
  }
  in.clear(), out.clear();  // holding no caller's arrays past the call
}

std::string RecomputeChoice::name() const {
  std::string s = "store-or-recompute(";
  for (const std::vector<Part>* way : {&ways_.store, &ways_.recompute}) {
    for (const Part& part : *way) s += part.kernel->name() + (&part == &way->back() ? "" : "+");
    s += way == &ways_.store ? " | " : ")";
  }
  return s;
}

namespace {

// A part's knobs are named "<way><part>.<knob>": s0.lanes, r1.grain.
std::string part_prefix(bool recompute, size_t part) { return (recompute ? "r" : "s") + std::to_string(part) + "."; }

}  // namespace

std::vector<Knob> RecomputeChoice::knobs() const {
  std::vector<Knob> knobs{{"recompute", {recompute_ ? 1 : 0, recompute_ ? 0 : 1}}};
  for (bool way : {false, true}) {
    const std::vector<Part>& parts = way ? ways_.recompute : ways_.store;
    for (size_t k = 0; k < parts.size(); ++k)
      for (Knob knob : parts[k].kernel->knobs()) {
        knob.name = part_prefix(way, k) + knob.name;
        knob.only_with = "recompute", knob.only_value = way ? 1 : 0;
        knobs.push_back(std::move(knob));
      }
  }
  return knobs;
}

std::shared_ptr<const KernelStep> RecomputeChoice::with(const std::string& choice) const {
  bool recompute = recompute_;
  std::vector<std::string> store(ways_.store.size()), again(ways_.recompute.size());  // each part's choice
  for (const auto& [name, value] : choice_fields(choice.empty() ? "default" : choice, "recompute choice")) {
    if (name == "recompute" && (value == "0" || value == "1")) {
      recompute = value == "1";
      continue;
    }
    const size_t dot = name.find('.');
    const bool way = !name.empty() && name[0] == 'r';
    std::vector<std::string>& texts = way ? again : store;
    size_t part = texts.size();
    if (dot != std::string::npos && dot > 1 && (name[0] == 's' || name[0] == 'r') &&
        name.find_first_not_of("0123456789", 1) == dot)
      part = std::stoul(name.substr(1, dot - 1));
    if (part >= texts.size())
      EMBER_THROW(Value, "[max-autotune] a value stored or recomputed has no choice '", name, "=", value,
                  "' (recompute=0 or 1, or a kernel's knob as s0.lanes=32)");
    texts[part] += (texts[part].empty() ? "" : " ") + name.substr(dot + 1) + "=" + value;
  }
  Ways ways = ways_;
  for (bool way : {false, true}) {
    std::vector<Part>& parts = way ? ways.recompute : ways.store;
    const std::vector<std::string>& texts = way ? again : store;
    for (size_t k = 0; k < parts.size(); ++k)
      if (!texts[k].empty())
        parts[k].kernel = std::dynamic_pointer_cast<const CpuKernel>(parts[k].kernel->with(texts[k]));
  }
  return std::make_shared<RecomputeChoice>(std::move(ways), recompute);
}

}  // namespace ember::codegen::cpu

#include "runtime/executable.h"

#include <algorithm>
#include <map>
#include <bit>
#include <chrono>
#include <optional>
#include <limits>
#include <queue>

#include "ir/error.h"
#include "runtime/allocator.h"
#include "runtime/config.h"
#include "runtime/interpreter.h"
#include "runtime/kernels/kernel.h"

namespace ember {

namespace {

// Ops whose results may share their first input's storage instead of getting a buffer.
bool may_alias_input(const Node* n) { return n->info().is_view() || n->op == Op::Split; }

constexpr int kToEnd = std::numeric_limits<int>::max();

thread_local int64_t bindings = 0;
thread_local int64_t destinations_built = 0;
thread_local int64_t views_run = 0;

}  // namespace

int64_t plan_bindings() { return bindings; }
int64_t plan_destinations_built() { return destinations_built; }
int64_t plan_views_run() { return views_run; }

Executable::Executable(std::unique_ptr<Graph> graph, std::vector<FusedStep> fused, bool static_buffers)
    : graph_(std::move(graph)), static_buffers_(static_buffers) {
  plan_slots(fused);
  order_steps();
  plan_buffers();
}

// A slot per value (first_slot[node id] + output index); constants are made here, once. A step
// per node outside the groups, and one per group.
void Executable::plan_slots(const std::vector<FusedStep>& fused) {
  std::vector<int> first_slot(graph_->id_bound(), -1), group_of(graph_->id_bound(), -1);
  for (size_t g = 0; g < fused.size(); ++g)
    for (const Node* n : fused[g].nodes) group_of[n->id()] = static_cast<int>(g);
  auto slot = [&](const Value& v) { return first_slot[v.node->id()] + v.index; };
  for (Node* in : graph_->inputs()) {
    first_slot[in->id()] = static_cast<int>(slots_.size());
    slots_.push_back({Home::Input, static_cast<int>(slots_.size()), Value(in)});
  }
  for (Node* n : graph_->nodes()) {
    if (n->op == Op::Input) continue;
    first_slot[n->id()] = static_cast<int>(slots_.size());
    if (n->op == Op::Constant) {
      slots_.push_back({Home::Constant, static_cast<int>(constants_.size()), Value(n)});
      constants_.push_back(run_op(n->op, n->attrs, {}, n->types[0]));
      continue;
    }
    bool view = group_of[n->id()] < 0 && may_alias_input(n);
    for (int k = 0; k < n->num_outputs(); ++k)
      slots_.push_back({view ? Home::View : Home::Buffer, -1, n->out(k)});
  }
  for (Node* n : graph_->nodes()) {
    if (n->op == Op::Input || n->op == Op::Constant) continue;
    int g = group_of[n->id()];
    if (g >= 0 && fused[g].nodes.front() != n) continue;  // a group is one step, at its first node
    Step step{n, g >= 0 ? fused[g].kernel : nullptr, {}, {}, {}, {}};
    if (g >= 0) {
      for (const Value& in : fused[g].inputs) step.inputs.push_back(slot(in));
      for (const Value& out : fused[g].outputs) step.outputs.push_back(slot(out));
    } else {
      for (const Value& in : n->inputs()) step.inputs.push_back(slot(in));
      for (int k = 0; k < n->num_outputs(); ++k) step.outputs.push_back(slot(n->out(k)));
    }
    steps_.push_back(std::move(step));
  }
  for (const Value& out : graph_->outputs()) outputs_.push_back(slot(out));
}

// Steps in an order that respects their dependencies, as close to the graph's as possible (a
// group's step may have to wait for a value defined between its nodes). Kahn's algorithm with
// the earliest step first.
void Executable::order_steps() {
  std::vector<int> defined_by(slots_.size(), -1);
  for (size_t i = 0; i < steps_.size(); ++i)
    for (int s : steps_[i].outputs) defined_by[s] = static_cast<int>(i);
  std::vector<int> waiting(steps_.size(), 0);
  std::vector<std::vector<int>> dependents(steps_.size());
  for (size_t i = 0; i < steps_.size(); ++i)
    for (int s : steps_[i].inputs)
      if (defined_by[s] >= 0) {
        dependents[defined_by[s]].push_back(static_cast<int>(i));
        ++waiting[i];
      }
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (size_t i = 0; i < steps_.size(); ++i)
    if (waiting[i] == 0) ready.push(static_cast<int>(i));
  std::vector<Step> ordered;
  ordered.reserve(steps_.size());
  while (!ready.empty()) {
    int i = ready.top();
    ready.pop();
    for (int d : dependents[i])
      if (--waiting[d] == 0) ready.push(d);
    ordered.push_back(std::move(steps_[i]));
  }
  EMBER_CHECK(ordered.size() == steps_.size(), "the plan's steps have a cycle: a fused group is not convex");
  steps_ = std::move(ordered);
}

// Buffers by liveness: a linear scan over the steps with a free list.
void Executable::plan_buffers() {
  size_t n = slots_.size();
  std::vector<int> last_use(n, -1), defined_at(n, -1), root(n, -1);
  for (size_t i = 0; i < steps_.size(); ++i) {
    for (int s : steps_[i].inputs) last_use[s] = static_cast<int>(i);
    for (int s : steps_[i].outputs) defined_at[s] = static_cast<int>(i);
  }
  for (int s : outputs_) last_use[s] = kToEnd;
  // The buffer slot a view looks into (through chains of views), if any.
  for (const Step& step : steps_)
    for (int s : step.outputs)
      if (slots_[s].home == Home::View && !step.inputs.empty()) {
        int in = step.inputs[0];
        root[s] = slots_[in].home == Home::Buffer ? in : root[in];
      }
  // A buffer slot ends at the last use of itself or of any view into it.
  std::vector<int> end(n, -1);
  for (size_t s = 0; s < n; ++s) {
    int until = std::max(last_use[s], defined_at[s]);
    if (slots_[s].home == Home::Buffer) end[s] = std::max(end[s], until);
    if (root[s] >= 0) end[root[s]] = std::max(end[root[s]], until);
  }
  // Outputs, and buffers that outputs view, stay with the caller: they only reuse a buffer whose
  // every value had their size, so that the caller never holds more memory than eager would.
  std::vector<bool> output_home(n, false);
  for (int s : outputs_) {
    int home = slots_[s].home == Home::Buffer ? s : root[s];
    if (home >= 0) output_home[home] = true;
  }
  auto same_size = [&](int a, int b) {
    const TensorType &x = slots_[a].value.type(), &y = slots_[b].value.type();
    return x.shape == y.shape && itemsize(x.dtype) == itemsize(y.dtype);
  };
  auto fits_output = [&](int s, int b) {
    return !output_home[s] ||
           std::all_of(buffer_slots_[b].begin(), buffer_slots_[b].end(), [&](int t) { return same_size(s, t); });
  };
  // An input of step i that output s may overwrite: a buffer of s's size that dies at step i,
  // read once by the step and through no view.
  std::vector<bool> taken_over(n, false);
  auto overwritable_input = [&](size_t i, int s) {
    const Step& step = steps_[i];
    if (!step.kernel || !step.kernel->may_overwrite_inputs()) return -1;
    for (int t : step.inputs) {
      if (slots_[t].home != Home::Buffer || end[t] != static_cast<int>(i) || taken_over[t] || !same_size(s, t) ||
          !fits_output(s, slots_[t].index))
        continue;
      bool alone = std::count(step.inputs.begin(), step.inputs.end(), t) == 1 &&
                   std::none_of(step.inputs.begin(), step.inputs.end(), [&](int u) { return root[u] == t; });
      if (alone) return t;
    }
    return -1;
  };
  std::vector<int> free_buffers;
  std::vector<std::vector<int>> ending(steps_.size());  // buffer slots freed after each step
  for (size_t i = 0; i < steps_.size(); ++i) {
    for (int s : steps_[i].outputs) {
      if (slots_[s].home != Home::Buffer) continue;
      if (int t = overwritable_input(i, s); t >= 0) {  // in place
        taken_over[t] = true;
        slots_[s].index = slots_[t].index;
        buffer_slots_[slots_[s].index].push_back(s);
        if (end[s] != kToEnd) ending[std::max<int>(end[s], static_cast<int>(i))].push_back(s);
        continue;
      }
      auto reusable = free_buffers.rbegin();  // the most recently freed buffer (warm in cache)
      if (output_home[s]) reusable = std::find_if(free_buffers.rbegin(), free_buffers.rend(), [&](int b) { return fits_output(s, b); });
      if (reusable == free_buffers.rend()) {
        slots_[s].index = static_cast<int>(buffer_slots_.size());
        buffer_slots_.emplace_back();
      } else {
        slots_[s].index = *reusable;
        free_buffers.erase(std::next(reusable).base());
      }
      buffer_slots_[slots_[s].index].push_back(s);
      if (end[s] != kToEnd) ending[std::max<int>(end[s], static_cast<int>(i))].push_back(s);
    }
    for (int s : ending[i])
      if (!taken_over[s]) free_buffers.push_back(slots_[s].index);
  }
  destination_offset_.assign(1, 0);
  for (const Step& step : steps_) destination_offset_.push_back(destination_offset_.back() + step.outputs.size());
  destination_refs_.assign(buffer_slots_.size(), 0);
  for (const Step& step : steps_)
    for (int s : step.outputs)
      if (slots_[s].home == Home::Buffer) ++destination_refs_[slots_[s].index];
  holds_output_.assign(buffer_slots_.size(), false);
  for (size_t s = 0; s < n; ++s)
    if (output_home[s]) holds_output_[slots_[s].index] = true;
  for (size_t i = 0; i < steps_.size(); ++i)
    for (size_t k = 0; k < steps_[i].outputs.size(); ++k) {
      const Slot& slot = slots_[steps_[i].outputs[k]];
      if (slot.home == Home::Buffer && holds_output_[slot.index])
        output_destinations_.emplace_back(static_cast<int>(i), static_cast<int>(k));
    }
  plan_exact_outputs(root);
  // Drop each value's array after its last use, so memory of views and inputs goes early too.
  for (size_t i = 0; i < steps_.size(); ++i) {
    Step& step = steps_[i];
    for (int s : step.outputs)
      if (last_use[s] < 0) step.release.push_back(s);
    for (int s : step.inputs)
      if (last_use[s] == static_cast<int>(i) && std::find(step.release.begin(), step.release.end(), s) == step.release.end())
        step.release.push_back(s);
  }
}

// A buffer is exactly output k when k's value is the buffer's last, or that value reshaped (a
// reshape of a buffer is contiguous over all of it: a reduction's [n, 1] handed back as [n]),
// the plan returns it once, and no other output is a view into it. (Whether it fills the
// buffer depends on the sizes.)
void Executable::plan_exact_outputs(const std::vector<int>& root) {
  exact_output_.assign(buffer_slots_.size(), -1);
  std::vector<int> outputs_in(buffer_slots_.size(), 0);
  for (int s : outputs_) {
    int home = slots_[s].home == Home::Buffer ? s : root[s];
    if (home >= 0) ++outputs_in[slots_[home].index];
  }
  std::vector<int> reshaped_from(slots_.size(), -1);  // the buffer slot a chain of reshapes views
  for (const Step& step : steps_) {
    if (step.kernel || step.node->op != Op::Reshape || step.inputs.size() != 1) continue;
    int in = step.inputs[0];
    int from = slots_[in].home == Home::Buffer ? in : reshaped_from[in];
    for (int s : step.outputs)
      if (slots_[s].home == Home::View) reshaped_from[s] = from;
  }
  for (size_t k = 0; k < outputs_.size(); ++k) {
    int s = outputs_[k];
    int whole = slots_[s].home == Home::Buffer ? s : reshaped_from[s];
    if (whole < 0) continue;
    int b = slots_[whole].index;
    if (outputs_in[b] == 1 && buffer_slots_[b].back() == whole) exact_output_[b] = static_cast<int>(k);
  }
}

std::shared_ptr<const KernelStep> KernelStep::with(const std::string& choice) const {
  EMBER_THROW(Value, "[max-autotune] kernel ", name(), " has no choice '", choice, "'");
}

void Executable::run_kernel(const Step& step, std::span<const Array> args, std::span<const Array> destinations) {
  std::optional<ScopedStepSettings> settings;
  if (!step.settings.is_default()) settings.emplace(step.settings);
  step.kernel->run(args, destinations);
}

std::vector<Array> Executable::run_one(const Step& step, std::span<const Array> args,
                                       std::span<const Array> destinations, const SymbolValues& symbols) const {
  if (step.kernel) {
    run_kernel(step, args, destinations);
    return {destinations.begin(), destinations.end()};
  }
  std::optional<ScopedStepSettings> settings;
  if (!step.settings.is_default()) settings.emplace(step.settings);
  const Node* n = step.node;
  std::vector<Array> results = run_op(n->op, n->attrs, args, n->types, symbols, destinations);
  for (size_t k = 0; k < results.size(); ++k) {
    if (destinations[k].defined() && results[k].data() != destinations[k].data()) {
      kernels::copy_into(results[k], destinations[k]);  // a kernel that did not use its destination
      results[k] = destinations[k];
    }
  }
  return results;
}

void Executable::run_step(int i, std::span<const Array> inputs, std::span<const Array> outputs,
                          const SymbolValues& symbols) const {
  run_one(steps_[i], inputs, outputs, symbols);
}

void Executable::set_step(int i, std::shared_ptr<const KernelStep> kernel, StepSettings settings) {
  EMBER_CHECK(!kernel || steps_[i].kernel, "step ", i, " is an interpreter step: it takes no kernel");
  // The buffer plan let the old kernel's outputs overwrite its inputs only if it said so.
  EMBER_CHECK(!kernel || !kernel->may_overwrite_inputs() || steps_[i].kernel->may_overwrite_inputs(),
              "step ", i, "'s new kernel would overwrite inputs the plan keeps");
  if (kernel) steps_[i].kernel = std::move(kernel);
  steps_[i].settings = settings;
}

std::vector<Array> Executable::run(std::span<const Array> inputs, const SymbolValues& symbols,
                                   int64_t* allocations, const OutputStorages& output_storages,
                                   const StepObserver& observe) const {
  EMBER_CHECK(inputs.size() == graph_->inputs().size(), "executable called with ", inputs.size(), " inputs, takes ",
              graph_->inputs().size());
  int64_t allocations_before = storage_allocations();
  // EMBER_LOG=profile: the time of each step of this call, slowest first, and of its binding.
  const bool profile = config::log_enabled("profile");
  using Clock = std::chrono::steady_clock;
  const auto call_start = profile ? Clock::now() : Clock::time_point();  // the clock costs when not profiling
  Binding binding = take_binding(symbols, output_storages);
  std::vector<Array> values(slots_.size());
  for (size_t s = 0; s < slots_.size(); ++s) {
    if (slots_[s].home == Home::Input) values[s] = inputs[slots_[s].index];
    if (slots_[s].home == Home::Constant) values[s] = constants_[slots_[s].index];
  }
  const Layout* layout = binding.layout && views_resolved(*binding.layout) ? binding.layout.get() : nullptr;
  const std::vector<char> as_assumed =
      layout && !layout->assumed_inputs.empty() ? inputs_as_assumed(*layout, inputs) : std::vector<char>();
  // The binding's time includes resolving the layout's views, on the call that does.
  const double binding_us =
      profile ? std::chrono::duration<double, std::micro>(Clock::now() - call_start).count() : 0;
  std::vector<Array> args;
  args.reserve(8);  // most steps read fewer: no growth per call
  std::vector<std::pair<double, size_t>> step_us;
  auto step_start = profile ? Clock::now() : Clock::time_point();
  for (const Step& step : steps_) {
    if (profile) {
      auto now = Clock::now();
      if (&step != &steps_.front())
        step_us.emplace_back(std::chrono::duration<double, std::micro>(now - step_start).count(), &step - &steps_.front() - 1);
      step_start = now;
    }
    const int index = static_cast<int>(&step - &steps_.front());
    if (!observe && run_resolved_view(index, layout, as_assumed, values)) {
      for (int s : step.release) values[s] = Array();
      continue;
    }
    if (!step.kernel && may_alias_input(step.node)) ++views_run;
    args.clear();
    for (int s : step.inputs) args.push_back(values[s]);
    const std::span<const Array> destinations = destinations_of(binding, index);
    if (observe) observe(index, args, destinations);
    if (step.kernel) {  // its results are its destinations: no vector of them to return
      run_kernel(step, args, destinations);
      for (size_t k = 0; k < destinations.size(); ++k) values[step.outputs[k]] = destinations[k];
    } else {
      std::vector<Array> results = run_one(step, args, destinations, symbols);
      for (size_t k = 0; k < results.size(); ++k) values[step.outputs[k]] = std::move(results[k]);
    }
    for (int s : step.release) values[s] = Array();
  }
  if (profile && !steps_.empty())
    step_us.emplace_back(std::chrono::duration<double, std::micro>(Clock::now() - step_start).count(),
                         steps_.size() - 1);
  std::vector<Array> outputs;
  outputs.reserve(outputs_.size());
  for (int s : outputs_) outputs.push_back(values[s]);
  values.clear();
  const auto give_back_start = profile ? Clock::now() : Clock::time_point();
  if (output_storages) forget_callers_buffers(binding);
  give_back(std::move(binding));
  if (profile && !steps_.empty())
    log_profile(step_us, binding_us,
                std::chrono::duration<double, std::micro>(Clock::now() - give_back_start).count());
  if (allocations) *allocations = storage_allocations() - allocations_before;
  return outputs;
}

void Executable::log_profile(std::vector<std::pair<double, size_t>> step_us, double binding_us,
                             double give_back_us) const {
  std::sort(step_us.rbegin(), step_us.rend());
  double total = 0;
  for (const auto& [us, i] : step_us) total += us;
  std::string text = std::to_string(steps_.size()) + " steps in " + std::to_string(static_cast<int64_t>(total)) +
                     " us; binding " + std::to_string(static_cast<int64_t>(binding_us)) + " us, giving back " +
                     std::to_string(static_cast<int64_t>(give_back_us)) + " us";
  // Where the time went by kind of step, largest first: the generated kernels together, the
  // others by op.
  std::map<std::string, std::pair<double, int>> kinds;
  for (const auto& [us, i] : step_us) {
    auto& kind = kinds[steps_[i].kernel ? "generated kernels" : std::string(steps_[i].node->info().name)];
    kind.first += us;
    ++kind.second;
  }
  std::vector<std::pair<double, std::string>> by_time;
  for (const auto& [name, kind] : kinds) by_time.push_back({kind.first, name});
  std::sort(by_time.rbegin(), by_time.rend());
  for (size_t k = 0; k < by_time.size(); ++k)
    text += (k ? ", " : " (") + by_time[k].second + " " + std::to_string(static_cast<int64_t>(by_time[k].first)) +
            " us in " + std::to_string(kinds[by_time[k].second].second) + (k + 1 == by_time.size() ? ")" : "");
  text += ":";
  for (size_t k = 0; k < step_us.size() && k < 12; ++k) {
    const Step& step = steps_[step_us[k].second];
    std::string name = step.kernel ? step.kernel->name() : std::string(step.node->info().name);
    if (!step.node->types.empty()) name += " -> " + step.node->types[0].str();
    text += "\n  step " + std::to_string(step_us[k].second) + " " + name + ": " +
            std::to_string(static_cast<int64_t>(step_us[k].first)) + " us";
  }
  config::log("profile", text);
}

std::string Executable::describe() const {
  auto where = [&](int s) {
    const Slot& slot = slots_[s];
    switch (slot.home) {
      case Home::Input: return "in" + std::to_string(slot.index);
      case Home::Constant: return "const" + std::to_string(slot.index);
      case Home::View: return std::string("view");
      case Home::Buffer: return "b" + std::to_string(slot.index);
    }
    return std::string("?");
  };
  std::string out;
  for (size_t i = 0; i < steps_.size(); ++i) {
    const Step& step = steps_[i];
    std::string name = step.kernel ? step.kernel->name() : std::string(step.node->info().name);
    if (!step.node->types.empty()) name += " -> " + step.node->types[0].str();
    out += "step " + std::to_string(i) + ": " + name + "(";
    for (size_t k = 0; k < step.inputs.size(); ++k) out += (k ? ", " : "") + where(step.inputs[k]);
    out += ") -> ";
    for (size_t k = 0; k < step.outputs.size(); ++k) out += (k ? ", " : "") + where(step.outputs[k]);
    out += "\n";
  }
  return out;
}

bool Executable::holds_constant(const Array& a) const {
  return std::any_of(constants_.begin(), constants_.end(),
                     [&](const Array& c) { return c.storage() && c.storage() == a.storage(); });
}

int Executable::kernel_steps() const {
  return static_cast<int>(std::count_if(steps_.begin(), steps_.end(), [](const Step& s) { return s.kernel != nullptr; }));
}

std::vector<std::string> Executable::interpreter_ops() const {
  std::vector<std::string> ops;
  for (const Step& s : steps_)
    if (!s.kernel && !s.node->info().is_view()) ops.emplace_back(s.node->info().name);
  return ops;
}

// A static plan keeps each shape's binding from call to call: its sizes are not evaluated again,
// and a buffer is reused when nothing but the binding holds it any more (an output the caller
// still holds is not), so a steady-state call allocates no buffer. Without one, every call binds
// its sizes and every buffer is fresh.
Executable::Binding Executable::take_binding(const SymbolValues& symbols, const OutputStorages& output_storages) const {
  Binding binding;
  if (static_buffers_) {
    std::lock_guard<std::mutex> lock(bindings_mu_);
    auto it = std::find_if(bindings_.rbegin(), bindings_.rend(), [&](const Binding& b) { return b.layout && b.layout->symbols == symbols; });
    if (it != bindings_.rend()) {
      binding = std::move(*it);
      bindings_.erase(std::next(it).base());
    }
  }
  bool reshaped = false;  // storages adopted from a binding of other sizes: every destination is new
  ++binding.calls;
  if (binding.storages.empty() && !buffer_slots_.empty()) {
    ++bindings;
    binding.layout = layout_for(symbols);
    binding.storages.resize(buffer_slots_.size());
    if (static_buffers_) reshaped = adopt_storages(binding);
  }
  static const std::vector<size_t> kNoBuffers;
  const std::vector<size_t>& sizes = binding.layout ? binding.layout->sizes : kNoBuffers;
  std::vector<size_t> wanted;  // output buffers to take from `output_storages`
  std::vector<OutputBuffer> requests;
  std::vector<bool> fresh(sizes.size(), false);
  for (size_t b = 0; b < sizes.size(); ++b) {
    // A buffer that holds outputs the caller makes ([Note: outputs the caller makes]) is the
    // caller's each call, never kept: the caller may hold it past the next call.
    bool callers = output_storages && holds_output_[b];
    if (!callers && is_free(binding, b)) {
      fresh[b] = reshaped;
      continue;
    }
    fresh[b] = true;
    if (callers && sizes[b] > 0) {
      wanted.push_back(b);
      requests.push_back(output_buffer(binding, b));
    } else {
      binding.storages[b] = std::make_shared<Storage>(static_buffers_ ? bucket_bytes(sizes[b]) : sizes[b]);
    }
  }
  if (!wanted.empty()) {
    std::vector<std::shared_ptr<Storage>> given = output_storages(requests);
    EMBER_CHECK(given.size() == wanted.size(), "output_storages gave ", given.size(), " storages for ", wanted.size());
    for (size_t k = 0; k < wanted.size(); ++k) {
      EMBER_CHECK(given[k] && given[k]->nbytes >= requests[k].bytes, "output_storages gave a storage too small");
      binding.storages[wanted[k]] = std::move(given[k]);
    }
  }
  bind_destinations(binding, fresh);
  return binding;
}

// Evaluated once per set of sizes while the calls repeat them: a plan of buffers per call binds
// new storages every call, but not its shapes. A buffer slot whose shape is the previous
// layout's keeps that layout's array (and so its geometry, which view resolution compares).
std::shared_ptr<const Executable::Layout> Executable::layout_for(const SymbolValues& symbols) const {
  std::shared_ptr<const Layout> previous;
  {
    std::lock_guard<std::mutex> lock(layout_mu_);
    if (last_layout_ && last_layout_->symbols == symbols) return last_layout_;
    previous = last_layout_;
  }
  auto layout = std::make_shared<Layout>();
  layout->symbols = symbols;
  layout->shaped.resize(slots_.size());
  layout->sizes.assign(buffer_slots_.size(), 0);
  // Each buffer holds, in turn, values of several types.
  for (size_t b = 0; b < buffer_slots_.size(); ++b) {
    for (int s : buffer_slots_[b]) {
      const TensorType& t = slots_[s].value.type();
      std::vector<int64_t> shape = evaluate(t.shape, symbols);
      layout->sizes[b] = std::max(layout->sizes[b], checked_nbytes(op_name(slots_[s].value.node->op), shape, t.dtype));
      if (previous && previous->shaped[s].shape() == shape) {
        layout->shaped[s] = previous->shaped[s];
        continue;
      }
      std::vector<int64_t> strides = Array::contiguous_strides(shape);
      layout->shaped[s] = Array(t.dtype, std::move(shape), std::move(strides), 0, nullptr);
    }
  }
  layout->follows = previous != nullptr;
  layout->previous = std::move(previous);
  std::lock_guard<std::mutex> lock(layout_mu_);
  last_layout_ = layout;
  return layout;
}

// Whether this call may use the layout's resolved views. The first layout of a plan resolves on
// its second call: a plan called once runs its views as steps, which costs less than resolving
// them. A layout that follows another (sizes that change from call to call: each step of a
// decode, whose cache length grows) resolves on its first, reusing the previous layout's
// resolution wherever a step's input is laid out as it was there, which costs less than
// running the views (GPT-2's decode step: 50 reshapes, 26 slices, 17 permutes, most of them of
// the new token's values, whose sizes do not change).
bool Executable::views_resolved(const Layout& layout) const {
  if (layout.views_ready.load(std::memory_order_acquire)) return true;
  if (layout.calls.fetch_add(1, std::memory_order_relaxed) == 0 && !layout.follows) return false;
  std::call_once(layout.views_once, [&] {
    resolve_views(layout);
    layout.previous.reset();  // resolved: a chain of layouts is not kept alive
    layout.views_ready.store(true, std::memory_order_release);
  });
  return true;
}

// [Note: views resolved per layout]
// A view step (reshape, permute, slice, split, ...) makes only a shape, strides and an offset,
// and those follow from its input's, which the layout knows for a buffer (contiguous, at offset
// 0), a constant, and a view of either. Through the interpreter each view step cost about 0.6 us
// (evaluating its types, its attributes by name, vectors made and copied): 22 of the 34 steps of
// a small transformer block were views, 15 us of its 82. So each layout runs the view kernels
// once over stand-ins of its roots (arrays of their geometry over one stand-in storage), and a
// call gives each resolved step's outputs the storage of its input, sharing their geometry. A
// view of a graph input is resolved assuming the input contiguous at offset 0 (a parameter, a
// plain tensor), and a call whose input is laid out otherwise runs the step. A view that copies
// (a reshape that cannot view its input) is not resolved, nor anything after it. A step whose
// input is laid out as in the previous layout, with outputs of the same shapes, takes the
// previous layout's outputs without running its kernel.
void Executable::resolve_views(const Layout& layout) const {
  static char stand_in alignas(64)[64];  // the stand-ins' memory: view kernels read no element
  static const auto storage = std::make_shared<Storage>(stand_in, SIZE_MAX / 2, [] {});
  const Layout* previous = layout.previous && layout.previous->views_ready.load(std::memory_order_acquire)
                               ? layout.previous.get() : nullptr;
  std::vector<Array> geometry(slots_.size());
  std::vector<int> root_input(slots_.size(), -1);
  std::vector<int> slot_of_input(graph_->inputs().size(), -1);
  for (size_t s = 0; s < slots_.size(); ++s) {
    if (slots_[s].home == Home::Input) {
      const TensorType& t = slots_[s].value.type();
      std::vector<int64_t> shape;
      try {
        shape = evaluate(t.shape, layout.symbols);
        (void)checked_nbytes("input", shape, t.dtype);
      } catch (const std::exception&) {
        continue;  // a size the call does not bind, or more than memory holds (an input broadcast from a scalar): views of this input run as steps
      }
      std::vector<int64_t> strides = Array::contiguous_strides(shape);
      geometry[s] = Array(t.dtype, std::move(shape), std::move(strides), 0, storage);
      root_input[s] = slots_[s].index;
      slot_of_input[slots_[s].index] = static_cast<int>(s);
    }
    if (slots_[s].home == Home::Constant) geometry[s] = constants_[slots_[s].index];
    if (slots_[s].home == Home::Buffer) geometry[s] = layout.shaped[s].with_storage(storage);
  }
  layout.views.resize(steps_.size());
  layout.view_in.resize(steps_.size());
  layout.view_input.assign(steps_.size(), -1);
  for (size_t i = 0; i < steps_.size(); ++i) {
    const Step& step = steps_[i];
    if (step.kernel || step.inputs.size() != 1 || !may_alias_input(step.node)) continue;
    const Array& x = geometry[step.inputs[0]];
    if (!x.defined()) continue;
    std::vector<Array> out = previous ? resolved_as_before(*previous, i, x, layout.symbols) : std::vector<Array>();
    if (out.empty()) out = resolve_view(i, x, layout.symbols);
    if (out.empty()) continue;
    for (size_t k = 0; k < out.size(); ++k) geometry[step.outputs[k]] = out[k];
    for (int s : step.outputs) root_input[s] = root_input[step.inputs[0]];
    layout.views[i] = std::move(out);
    layout.view_in[i] = x;
    const int assumed = layout.view_input[i] = root_input[step.inputs[0]];
    if (assumed >= 0 && std::find(layout.assumed_inputs.begin(), layout.assumed_inputs.end(), assumed) ==
                            layout.assumed_inputs.end()) {
      layout.assumed_inputs.push_back(assumed);
      layout.assumed_shapes.push_back(geometry[slot_of_input[assumed]].shape());
    }
  }
}

// Step i's outputs over `x` by its view kernel; none when it copies or fails (the call then
// runs the step, and raises its error there).
std::vector<Array> Executable::resolve_view(size_t i, const Array& x, const SymbolValues& symbols) const {
  const Node* n = steps_[i].node;
  if (kernels::view_copies(n->op, x, evaluate(n->types[0].shape, symbols))) return {};
  std::vector<Array> out;
  try {
    out = run_op(n->op, n->attrs, std::span<const Array>(&x, 1), n->types, symbols);
  } catch (const std::exception&) {
    return {};
  }
  if (!std::all_of(out.begin(), out.end(), [&](const Array& a) { return a.storage() == x.storage(); })) return {};
  return out;
}

// Step i's outputs as the previous layout resolved them, when its input is laid out as there
// and its outputs have the same shapes; else none.
std::vector<Array> Executable::resolved_as_before(const Layout& previous, size_t i, const Array& x,
                                                  const SymbolValues& symbols) const {
  const std::vector<Array>& before = previous.views[i];
  const Array& was = previous.view_in[i];
  if (before.empty() || !was.defined() || was.offset() != x.offset()) return {};
  if (was.shape() != x.shape() || was.strides() != x.strides() || was.dtype() != x.dtype()) return {};
  const std::vector<TensorType>& types = steps_[i].node->types;
  for (size_t k = 0; k < before.size(); ++k)
    if (before[k].shape() != evaluate(types[k].shape, symbols)) return {};
  return before;
}

// Per input: whether it is laid out as view resolutions assume (contiguous, offset 0, the
// layout's shape); only the inputs some resolution assumes are looked at.
std::vector<char> Executable::inputs_as_assumed(const Layout& layout, std::span<const Array> inputs) const {
  std::vector<char> as_assumed(inputs.size(), 0);
  for (size_t k = 0; k < layout.assumed_inputs.size(); ++k) {
    const int i = layout.assumed_inputs[k];
    const Array& a = inputs[i];
    as_assumed[i] = a.offset() == 0 && a.shape() == layout.assumed_shapes[k] && a.is_contiguous();
  }
  return as_assumed;
}

// Step `index`'s outputs from its resolution, when it has one that holds for this call.
bool Executable::run_resolved_view(int index, const Layout* layout, const std::vector<char>& as_assumed,
                                   std::vector<Array>& values) const {
  if (!layout || layout->views[index].empty()) return false;
  const int assumed = layout->view_input[index];
  if (assumed >= 0 && !as_assumed[assumed]) return false;
  const Step& step = steps_[index];
  const std::shared_ptr<Storage>& storage = values[step.inputs[0]].storage();
  const std::vector<Array>& resolved = layout->views[index];
  for (size_t k = 0; k < resolved.size(); ++k) values[step.outputs[k]] = resolved[k].with_storage(storage);
  return true;
}

// [Note: size buckets] A static plan's buffers are made a power of two of bytes large, and a
// call of new sizes, when the plan already keeps its kBindings sizes, takes over the buffers of
// a kept size when each is free (only that binding holds it) and large enough: a growing
// sequence length (one more token each decode step) binds its shapes and destinations again,
// cheaply, but finds its memory already there instead of allocating it. Whose buffers: the
// most recently used size's when it was called once (a length that will not come back), for
// its memory is still in the caches, which the oldest's is not (GPT-2 decode at batch 8: the
// step's kernels took 1.95 ms with the oldest's, 1.67 ms with the latest's, 1.62 ms in default
// mode, whose allocator hands out what was just freed); else the least recently used size's, so
// that sizes which come back keep their own.
size_t Executable::bucket_bytes(size_t bytes) {
  return bytes <= 64 ? bytes : std::bit_ceil(bytes);
}

// Free when only the binding holds it: its own pointer and its steps' destinations.
bool Executable::is_free(const Binding& binding, size_t b) const {
  const std::shared_ptr<Storage>& storage = binding.storages[b];
  return storage && storage.use_count() == 1 + (binding.destinations.empty() ? 0 : destination_refs_[b]);
}

// Takes bindings_mu_. A binding is taken over only when the plan keeps as many as it may (one
// would be dropped for the new one anyway). The buffers of outputs are not taken over: the
// caller may hold them.
bool Executable::adopt_storages(Binding& binding) const {
  Binding taken;  // declared before the lock, so destroyed after it ([Note: bindings die unlocked])
  std::lock_guard<std::mutex> lock(bindings_mu_);
  if (bindings_.size() < kBindings) return false;
  auto fits = [&](const Binding& old) {
    for (size_t b = 0; b < old.storages.size(); ++b)
      if (!holds_output_[b] && old.storages[b] && !(is_free(old, b) && old.storages[b]->nbytes >= binding.layout->sizes[b]))
        return false;
    return true;
  };
  auto from = bindings_.end();
  for (auto it = bindings_.rbegin(); it != bindings_.rend(); ++it) {
    if (it->calls != 1) continue;
    if (fits(*it)) from = std::next(it).base();
    break;  // the latest size called once, or none
  }
  if (from == bindings_.end() && fits(bindings_.front())) from = bindings_.begin();
  if (from == bindings_.end()) return false;
  for (size_t b = 0; b < from->storages.size(); ++b)
    if (!holds_output_[b]) binding.storages[b] = std::move(from->storages[b]);
  taken = std::move(*from);  // with its destinations, which the new binding makes again
  bindings_.erase(from);
  return true;
}

OutputBuffer Executable::output_buffer(const Binding& binding, size_t b) const {
  OutputBuffer request;
  request.bytes = binding.layout->sizes[b];
  int k = exact_output_[b];
  if (k < 0) return request;
  int s = outputs_[k];
  // A reshaped buffer's output is a view, whose shape the layout does not keep.
  std::vector<int64_t> shape = slots_[s].home == Home::Buffer ? binding.layout->shaped[s].shape()
                                                               : evaluate(slots_[s].value.type().shape, binding.layout->symbols);
  DType dtype = slots_[s].value.type().dtype;
  size_t bytes = checked_nbytes("output", shape, dtype);
  if (bytes != request.bytes) return request;  // an earlier value in the buffer was larger
  request.output = k;
  request.dtype = dtype;
  request.shape = shape;
  return request;
}

// Each step's destinations in the buffers whose storage is new: for a static plan in its steady
// state, none, so its launches reuse the arrays an earlier call built.
void Executable::bind_destinations(Binding& binding, const std::vector<bool>& fresh) const {
  if (binding.destinations.empty()) binding.destinations.resize(destination_offset_.back());
  for (size_t i = 0; i < steps_.size(); ++i) {
    for (size_t k = 0; k < steps_[i].outputs.size(); ++k) {
      const Slot& slot = slots_[steps_[i].outputs[k]];
      if (slot.home != Home::Buffer || !fresh[slot.index]) continue;
      binding.destinations[destination_offset_[i] + k] = binding.layout->shaped[steps_[i].outputs[k]].with_storage(binding.storages[slot.index]);
      ++destinations_built;
    }
  }
}

// [Note: bounded static plans]
// A static plan keeps the buffers of up to kBindings sizes, which for long sequences or large
// batches may be more memory than the user will give. With a limit (the option
// static_plan_mb), the sizes least recently used are dropped until what is kept fits; a size
// whose buffers alone exceed the limit is not kept at all, and its calls allocate as a plan of
// buffers per call does. What is held includes, for a caller that does not make the outputs
// (the C++ API), the storages of the last call's outputs, which the next call reuses when the
// caller has let go of them; outputs the caller makes are never kept (forget_callers_buffers).
//
// [Note: bindings die unlocked] A binding that is dropped is destroyed after bindings_mu_ is
// released: its storages may be PyTorch's (the outputs the caller makes), whose release takes
// the GIL, and a thread that holds the GIL may be waiting for bindings_mu_ (reading held_bytes
// for the report): destroyed under the lock, the two waited for each other forever.
void Executable::give_back(Binding binding) const {
  if (!static_buffers_ || binding.storages.empty()) return;
  std::vector<Binding> dropped;  // declared before the lock, so destroyed after it
  std::lock_guard<std::mutex> lock(bindings_mu_);
  bindings_.push_back(std::move(binding));
  auto drop_oldest = [&] {
    dropped.push_back(std::move(bindings_.front()));
    bindings_.erase(bindings_.begin());
  };
  if (bindings_.size() > kBindings) drop_oldest();  // the least recently used shape
  if (held_limit_ == SIZE_MAX) return;
  size_t held = kept_bytes();
  while (held > held_limit_ && !bindings_.empty()) {
    held -= binding_bytes(bindings_.front());
    drop_oldest();
  }
}

// The buffers of outputs the caller made are the caller's ([Note: outputs the caller makes]):
// the next call asks for new ones, so a kept binding lets go of them and of the step
// destinations in them, or it would keep the memory of outputs the caller has dropped.
void Executable::forget_callers_buffers(Binding& binding) const {
  if (!static_buffers_) return;
  for (size_t b = 0; b < binding.storages.size(); ++b)
    if (holds_output_[b]) binding.storages[b].reset();
  if (binding.destinations.empty()) return;
  for (const auto& [i, k] : output_destinations_) binding.destinations[destination_offset_[i] + k] = Array();
}

// A binding's storages never appear in another kept binding (adopt_storages moves them), so
// the bytes of the kept bindings add up.
size_t Executable::binding_bytes(const Binding& binding) {
  size_t bytes = 0;
  for (const std::shared_ptr<Storage>& s : binding.storages)
    if (s) bytes += s->nbytes;
  return bytes;
}

// Takes bindings_mu_.
size_t Executable::held_bytes() const {
  std::lock_guard<std::mutex> lock(bindings_mu_);
  return kept_bytes();
}

// The caller holds bindings_mu_.
size_t Executable::kept_bytes() const {
  size_t held = 0;
  for (const Binding& b : bindings_) held += binding_bytes(b);
  return held;
}

}  // namespace ember

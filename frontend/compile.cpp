// The compiled function: its trace cache (entries with guards), the compiled segments keyed by
// structural hash, automatic dynamic dims, recompiles and the recompile limit, and the trace loop.
//
// [Note: stand-in arguments]
// A trace never sees the caller's tensor objects: each tensor argument is replaced by a fresh
// stand-in holding the same data. So `f(a, a)` traces two inputs (a replay with `f(b, c)` is
// right), and a captured tensor that is also passed as an argument (`f(w)` inside which `w` is
// captured) is told apart from the argument: the captured one is the caller's object, the
// argument is the stand-in. Outputs that are stand-ins are mapped back to the caller's tensors.
//
// [Note: rebound arguments]
// A function that takes `Tensor&` may rebind it (`x = x * 2`), which eager code shows to the
// caller. A trace finds the stand-ins so rebound and records their new values as outputs after
// the function's own (Entry::rebound_args says whose), so a replay hands back the same
// rebinding, and CompiledFunction gives it to the caller's variables. One variable passed to
// two parameters, one of which may rebind it, gets one stand-in for both, so the rebinding shows
// through the other name as in eager code; that sharing is guarded (Entry::shared).
#include "frontend/compile.h"

#include <bit>
#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <set>

#include "frontend/trace.h"
#include "ir/error.h"
#include "modes/mode.h"
#include "passes/pipeline.h"
#include "frontend/graph_compile.h"
#include "runtime/config.h"

namespace ember {

namespace {

std::string arg_str(const ArgValue& a) {
  if (auto* i = std::get_if<int64_t>(&a)) return std::to_string(*i);
  if (auto* d = std::get_if<double>(&a)) return std::to_string(*d);
  if (auto* b = std::get_if<bool>(&a)) return *b ? "true" : "false";
  if (auto* s = std::get_if<std::string>(&a)) return "\"" + *s + "\"";
  return "tensor";
}

// Non-tensor arguments match when they are the same bits: -0.0 is not 0.0, and a NaN matches
// the same NaN (so a NaN argument does not retrace on every call).
bool same_scalar(const ArgValue& a, const ArgValue& b) {
  if (a.index() != b.index()) return false;
  if (auto* d = std::get_if<double>(&a)) return std::bit_cast<uint64_t>(*d) == std::bit_cast<uint64_t>(std::get<double>(b));
  return std::visit([&](const auto& v) {
    using V = std::decay_t<decltype(v)>;
    if constexpr (std::is_same_v<V, Tensor>) return true;
    else return v == std::get<V>(b);
  }, a);
}

}  // namespace

namespace detail {

// One trace's cache entry.
struct Entry {
  Guards guards;
  std::vector<ArgValue> scalars;  // the non-tensor arguments, by position (tensors as placeholders)
  std::vector<std::type_index> types;
  std::vector<int> shared;  // tensor arguments that were one variable (shared_variables)
  bool has_breaks = false;
  std::shared_ptr<const GraphPlan> plan;  // no-break traces: replayed directly
  std::vector<InputSource> inputs;
  // A captured output is that tensor itself (the same object, as eager returns it).
  struct Output { enum Kind { Graph, Arg, Captured, Undefined } kind; int index; Tensor captured; };
  std::vector<Output> outputs;  // the function's, then the rebound arguments' new values
  std::vector<int> rebound_args;  // [Note: rebound arguments]
};

// What one call brings: its arguments and the tensors among them.
struct CallArgs {
  const std::vector<ArgValue>& args;
  const std::vector<std::type_index>& types;
  const std::vector<int>& shared;
  std::vector<Tensor> tensors;
  std::vector<Array> arrays;
};

// The result of tracing once.
struct Traced {
  std::shared_ptr<Entry> entry;
  Report report;
  std::vector<Tensor> outputs;  // as Entry::outputs
};

// Splits outputs that end with the new values of `rebound_args` (as Entry::outputs do).
CallResult split_rebound(std::vector<Tensor> outputs, const std::vector<int>& rebound_args) {
  CallResult r;
  size_t own = outputs.size() - rebound_args.size();
  for (size_t k = 0; k < rebound_args.size(); ++k) r.rebound.emplace_back(rebound_args[k], outputs[own + k]);
  outputs.resize(own);
  r.outputs = std::move(outputs);
  return r;
}

// The tensor arguments that `body` rebound, found by comparing them with what they were.
std::vector<int> rebound_since(const std::vector<Tensor>& before, const std::vector<Tensor>& after) {
  std::vector<int> out;
  for (size_t i = 0; i < before.size(); ++i)
    if (after[i].impl() != before[i].impl()) out.push_back(static_cast<int>(i));
  return out;
}

// Runs the user function on the caller's own tensors (eagerly, or inside an enclosing trace).
CallResult run_directly(std::vector<Tensor> tensors, const CompiledCore::Body& body) {
  const std::vector<Tensor> before = tensors;
  CallResult r{body(tensors), {}};
  for (int i : rebound_since(before, tensors)) r.rebound.emplace_back(i, tensors[i]);
  return r;
}

class CompiledState : public SegmentCompiler {
 public:
  explicit CompiledState(Options o) : options(std::move(o)), mode(mode_config(options.mode)), pipeline(mode.passes) {}

  std::shared_ptr<const GraphPlan> compile(const Graph& g, GraphInfo& info, std::span<const Array> inputs,
                                           const SymbolValues& symbols, std::vector<Array>& results) override;
  std::shared_ptr<Entry> lookup(const CallArgs& call, SymbolValues& values, std::string& why) const;
  bool limit_reached(const std::string& why);
  std::string mark_dynamic_dims(const CallArgs& call);
  Traced trace_with_pinning(const CallArgs& call, const CompiledCore::Body& body);
  std::vector<Tensor> remember(std::shared_ptr<Entry> replayed, Traced traced, bool is_recompile,
                               const std::string& why, const std::string& action);

  Options options;
  ModeConfig mode;
  Pipeline pipeline;
  mutable std::mutex mutex;        // guards everything below
  std::mutex trace_mutex;          // one trace at a time per function
  struct Segment {
    std::shared_ptr<const GraphPlan> plan;
    GraphInfo info;  // as reported when it was compiled
  };
  std::map<uint64_t, Segment> segments;  // by structural hash
  std::deque<uint64_t> segment_order;    // oldest first, for eviction
  int segment_evictions = 0;
  std::vector<std::shared_ptr<Entry>> entries;
  // Written only while trace_mutex is held, and read by the trace that holds it:
  std::set<std::pair<int, int>> dynamic_dims;  // (input, dim) marked dynamic after a change
  std::set<std::pair<int, int>> pinned_dims;   // (input, dim) a symbol could not flow through
  int recompiles = 0;
  bool warned_limit = false;
  Report last;                     // the latest trace's report
  std::vector<Recompile> recompile_log;
  std::vector<std::string> notes;

 private:
  struct Attempt;
  Traced trace_once(const CallArgs& call, const CompiledCore::Body& body, bool force_static, Attempt& attempt);
  std::shared_ptr<Entry> make_entry(const CallArgs& call, TraceContext& ctx, const std::vector<Tensor>& stand_ins,
                                    std::vector<Tensor>& outputs, std::vector<int> rebound_args);
};

std::shared_ptr<const GraphPlan> CompiledState::compile(const Graph& g, GraphInfo& info,
                                                       std::span<const Array> inputs, const SymbolValues& symbols,
                                                       std::vector<Array>& results) {
  uint64_t hash = structural_hash(g);
  info.hash = hash;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = segments.find(hash);
    if (it != segments.end()) {
      // The ops and IR were worked out when it was compiled: no printing on this path, which
      // a function with graph breaks takes on every call.
      info.op_count = it->second.info.op_count;
      info.ops = it->second.info.ops;
      info.ir = it->second.info.ir;
      info.steps = it->second.info.steps;
      info.buffers = it->second.info.buffers;
      info.kernels = it->second.info.kernels;
      info.interpreter_ops = it->second.info.interpreter_ops;
      info.mode = it->second.info.mode;
      info.static_plan = it->second.info.static_plan;
      info.autotuned = it->second.info.autotuned;
      info.tuning = it->second.info.tuning;
      info.cache_hit = true;
      std::shared_ptr<const GraphPlan> plan = it->second.plan;
      results = plan->run(inputs, symbols, &info.allocations);
      return plan;
    }
  }
  std::shared_ptr<Executable> exec = compile_graph(g, mode, pipeline, options.strict, info);
  std::optional<codegen::AutotuneOptions> autotune;
  if (mode.autotune) autotune = autotune_options(options.autotune_budget_s, options.autotune_search);
  auto plan = std::make_shared<const GraphPlan>(exec, autotune, options.strict, mode.choice_steps, options.static_plan_mb);
  results = plan->run(inputs, symbols, &info.allocations);  // under max-autotune: tuned around this call
  plan->describe_live(info);
  info.compile_ms += info.autotune_s * 1e3;
  if (config::log_enabled("compile"))
    config::log("compile", "graph " + std::to_string(hash) + ": " + std::to_string(info.op_count) + " ops in " +
                               std::to_string(info.compile_ms) + " ms");
  if (config::log_enabled("plan"))
    config::log("plan", "graph " + std::to_string(hash) + ": " + std::to_string(info.steps) + " steps over " +
                            std::to_string(info.buffers) + " buffers\n" + exec->describe());
  std::lock_guard<std::mutex> lock(mutex);
  // Bounded: a function whose graphs change on every call must not grow without limit. An
  // evicted segment stays alive in the entries that replay it.
  while (!segment_order.empty() && segments.size() >= static_cast<size_t>(std::max(options.segment_cache_limit, 1))) {
    segments.erase(segment_order.front());
    segment_order.pop_front();
    ++segment_evictions;
  }
  auto [it, inserted] = segments.emplace(hash, Segment{plan, info});
  if (inserted) segment_order.push_back(hash);
  return it->second.plan;
}

namespace {

// "none", or "1 = 0, 3 = 2": which tensor arguments were the variable of an earlier one.
std::string shared_str(const std::vector<int>& shared) {
  std::string s;
  for (size_t k = 0; k < shared.size(); ++k)
    if (shared[k] != static_cast<int>(k)) s += (s.empty() ? "" : ", ") + std::to_string(k) + " = " + std::to_string(shared[k]);
  return s.empty() ? "none" : s;
}

bool scalars_match(const Entry& e, const CallArgs& call, std::string& why) {
  const std::vector<ArgValue>& args = call.args;
  if (args.size() != e.scalars.size()) {
    why = "number of arguments: " + std::to_string(e.scalars.size()) + " -> " + std::to_string(args.size());
    return false;
  }
  if (call.shared != e.shared) {
    why = "tensor arguments passed as one variable: " + shared_str(e.shared) + " -> " + shared_str(call.shared);
    return false;
  }
  for (size_t i = 0; i < args.size(); ++i) {
    if (call.types[i] != e.types[i]) {
      why = "argument " + std::to_string(i) + " type: " + e.types[i].name() + " -> " + call.types[i].name();
      return false;
    }
    if (!same_scalar(args[i], e.scalars[i])) {
      why = "argument " + std::to_string(i) + ": " + arg_str(e.scalars[i]) + " -> " + arg_str(args[i]);
      return false;
    }
  }
  return true;
}

std::vector<Tensor> replay(const Entry& e, const CallArgs& call, const SymbolValues& values) {
  std::vector<Array> results;
  if (e.plan) {
    std::vector<Array> inputs;
    inputs.reserve(e.inputs.size());
    for (const InputSource& s : e.inputs) inputs.push_back(s.kind == InputSource::Arg ? call.arrays[s.arg] : s.captured);
    results = e.plan->run(inputs, values);
  }
  std::vector<Tensor> out;
  out.reserve(e.outputs.size());
  for (const Entry::Output& o : e.outputs) {
    switch (o.kind) {
      case Entry::Output::Graph: out.emplace_back(results[o.index]); break;
      case Entry::Output::Arg: out.push_back(call.tensors[o.index]); break;
      case Entry::Output::Captured: out.push_back(o.captured); break;
      case Entry::Output::Undefined: out.emplace_back(); break;
    }
  }
  return out;
}

}  // namespace

std::shared_ptr<Entry> CompiledState::lookup(const CallArgs& call, SymbolValues& values, std::string& why) const {
  std::lock_guard<std::mutex> lock(mutex);
  why.clear();
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
    std::string reason;
    if (scalars_match(**it, call, reason)) reason = (*it)->guards.check(call.arrays, values);
    if (reason.empty()) return *it;
    if (why.empty()) why = reason;  // the newest entry's failing guard
  }
  return nullptr;
}

bool CompiledState::limit_reached(const std::string& why) {
  std::lock_guard<std::mutex> lock(mutex);
  if (recompiles < options.recompile_limit) return false;
  if (!warned_limit) {
    warned_limit = true;
    config::warn("recompile_limit (" + std::to_string(options.recompile_limit) +
                 ") reached; running eagerly from now on for new inputs. Last failing guard: " + why);
    recompile_log.push_back({why, "fell back to eager (recompile_limit reached)"});
  }
  return true;
}

// With `dynamic` unset, the dims whose size changed since the latest trace become symbolic.
std::string CompiledState::mark_dynamic_dims(const CallArgs& call) {
  if (options.dynamic.has_value()) return "recompiled";
  std::lock_guard<std::mutex> lock(mutex);
  const Guards& old = entries.back()->guards;
  std::string marked;
  for (size_t i = 0; i < call.arrays.size() && i < old.tensors.size(); ++i) {
    const Array& a = call.arrays[i];
    if (a.rank() != static_cast<int64_t>(old.tensors[i].shape.size())) continue;
    for (size_t d = 0; d < old.tensors[i].shape.size(); ++d) {
      const Dim& dim = old.tensors[i].shape[d];
      if (dim.is_static() && dim.value() != a.shape()[d] && !dynamic_dims.count({int(i), int(d)})) {
        dynamic_dims.insert({int(i), int(d)});
        marked += (marked.empty() ? "" : ", ") + std::string("input ") + std::to_string(i) + " dim " + std::to_string(d);
      }
    }
  }
  return marked.empty() ? "recompiled" : "recompiled with dynamic dims: " + marked;
}

// What a failed attempt leaves for the next: which (input, dim) pairs each symbol stood for, and
// which symbols the trace had already fixed to a value.
struct CompiledState::Attempt {
  std::vector<std::vector<std::pair<int, int>>> symbol_dims;
  std::set<int> specialised;
};

Traced CompiledState::trace_once(const CallArgs& call, const CompiledCore::Body& body, bool force_static,
                                 Attempt& attempt) {
  attempt.symbol_dims.clear();
  Traced result;
  TraceContext ctx(*this, options.fullgraph, result.report);
  std::vector<TensorGuard> tensor_guards;
  std::vector<Tensor> stand_ins;  // [Note: stand-in arguments]
  std::map<int64_t, int> duck;    // equal sizes share a symbol, as TorchDynamo's duck sizing
  for (size_t i = 0; i < call.arrays.size(); ++i) {
    const Array& a = call.arrays[i];
    TensorType type{a.dtype(), {}};
    for (size_t d = 0; d < a.shape().size(); ++d) {
      int64_t size = a.shape()[d];
      bool dynamic = !force_static && size >= 2 && !pinned_dims.count({int(i), int(d)}) &&
                     (options.dynamic.value_or(false) || dynamic_dims.count({int(i), int(d)}));
      if (!dynamic) { type.shape.push_back(Dim(size)); continue; }
      auto [it, fresh] = duck.emplace(size, -1);
      if (fresh) {
        it->second = ctx.add_symbol({}, size);
        attempt.symbol_dims.emplace_back();
      }
      attempt.symbol_dims[it->second].push_back({int(i), int(d)});
      type.shape.push_back(Dim::symbol(it->second));
    }
    tensor_guards.push_back({type.dtype, type.shape, a.is_contiguous()});
    stand_ins.emplace_back(a);
    ctx.add_arg(stand_ins.back(), static_cast<int>(i), type);
  }
  std::vector<Tensor> passed = stand_ins;  // the function may rebind what it was given
  try {
    result.outputs = body(passed);
  } catch (const SymbolicShapeError&) {
    attempt.specialised.clear();
    for (const auto& [dim, value] : ctx.guards().specialisations)
      if (dim.as_symbol() >= 0) attempt.specialised.insert(dim.as_symbol());
    throw;
  }
  std::vector<int> rebound = rebound_since(stand_ins, passed);
  for (int i : rebound) result.outputs.push_back(passed[i]);
  result.entry = make_entry(call, ctx, stand_ins, result.outputs, std::move(rebound));
  result.entry->guards.tensors = std::move(tensor_guards);
  result.report.guards = result.entry->guards.describe();
  return result;
}

// Finishes the trace and records how a replay rebuilds each output. `outputs` come back with
// stand-ins replaced by the caller's tensors.
std::shared_ptr<Entry> CompiledState::make_entry(const CallArgs& call, TraceContext& ctx,
                                                 const std::vector<Tensor>& stand_ins, std::vector<Tensor>& outputs,
                                                 std::vector<int> rebound_args) {
  std::vector<const TensorImpl*> traced;  // the outputs still traced: graph outputs, in order
  std::vector<bool> was_traced;
  for (const Tensor& t : outputs) {
    bool is_traced = t.impl() && t.impl()->is_traced();
    was_traced.push_back(is_traced);
    if (is_traced && std::find(traced.begin(), traced.end(), t.impl().get()) == traced.end())
      traced.push_back(t.impl().get());
  }
  ctx.finish(outputs);
  auto e = std::make_shared<Entry>();
  e->guards.symbols = ctx.guards().symbols;
  e->guards.specialisations = ctx.guards().specialisations;
  e->guards.facts = ctx.guards().facts;
  e->scalars = call.args;
  e->types = call.types;
  e->shared = call.shared;
  e->has_breaks = ctx.had_breaks();
  e->rebound_args = std::move(rebound_args);
  if (!e->has_breaks) {
    e->plan = ctx.single_plan();
    e->inputs = ctx.single_inputs();
  }
  for (size_t k = 0; k < outputs.size(); ++k) {
    const TensorImpl* impl = outputs[k].impl().get();
    auto arg = std::find_if(stand_ins.begin(), stand_ins.end(), [&](const Tensor& t) { return t.impl().get() == impl; });
    int arg_index = static_cast<int>(arg - stand_ins.begin());
    if (impl && arg != stand_ins.end()) outputs[k] = call.tensors[arg_index];
    if (e->has_breaks) continue;
    if (!impl) e->outputs.push_back({Entry::Output::Undefined, -1, {}});
    else if (was_traced[k])
      e->outputs.push_back({Entry::Output::Graph, int(std::find(traced.begin(), traced.end(), impl) - traced.begin()), {}});
    else if (arg != stand_ins.end()) e->outputs.push_back({Entry::Output::Arg, arg_index, {}});
    else e->outputs.push_back({Entry::Output::Captured, -1, outputs[k]});
  }
  return e;
}

// A symbolic dim that cannot flow through an op (a weight's static size, a strided window, a
// fact that does not hold at this size) is pinned to its value and the trace runs again; after
// a few tries, every dim is static.
Traced CompiledState::trace_with_pinning(const CallArgs& call, const CompiledCore::Body& body) {
  Attempt attempt;
  for (int tries = 0;; ++tries) {
    try {
      return trace_once(call, body, tries == 4, attempt);
    } catch (const SymbolicShapeError& e) {
      if (tries == 4) throw;
      // Symbols already fixed to a value are static in effect: pinning them is enough when the
      // error involves one of them (x.size(1) / 2 then reshape); otherwise pin all involved.
      std::vector<int> to_pin;
      for (int s : e.symbols())
        if (attempt.specialised.count(s)) to_pin.push_back(s);
      if (to_pin.empty()) to_pin = e.symbols();
      std::string pinned_now;
      for (int s : to_pin)
        if (s >= 0 && static_cast<size_t>(s) < attempt.symbol_dims.size())
          for (auto dim : attempt.symbol_dims[s])
            if (pinned_dims.insert(dim).second)
              pinned_now += (pinned_now.empty() ? "" : ", ") + std::string("input ") + std::to_string(dim.first) +
                            " dim " + std::to_string(dim.second);
      if (pinned_now.empty()) tries = 3;  // nothing to pin: the next try is fully static
      std::lock_guard<std::mutex> lock(mutex);
      notes.push_back((pinned_now.empty() ? std::string("specialised to static shapes")
                                          : "specialised " + pinned_now + " to static") + ": " + e.what());
    }
  }
}

std::vector<Tensor> CompiledState::remember(std::shared_ptr<Entry> replayed, Traced traced, bool is_recompile,
                                            const std::string& why, const std::string& action) {
  std::lock_guard<std::mutex> lock(mutex);
  traced.report.segment_evictions = segment_evictions;
  last = traced.report;
  // A break-y trace replayed under existing guards: only the report changes.
  if (replayed) return std::move(traced.outputs);
  if (is_recompile) {
    ++recompiles;
    recompile_log.push_back({why, action});
    if (config::log_enabled("recompiles")) config::log("recompiles", "guard failed: " + why + "; " + action);
  }
  if (config::log_enabled("guards"))
    for (const std::string& g : traced.report.guards) config::log("guards", g);
  entries.push_back(std::move(traced.entry));
  return std::move(traced.outputs);
}

CompiledCore::CompiledCore(Options options) : state_(std::make_unique<CompiledState>(std::move(options))) {}
CompiledCore::~CompiledCore() = default;

const Options& CompiledCore::options() const { return state_->options; }

Report CompiledCore::report() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  Report r = state_->last;
  for (GraphInfo& g : r.graphs)  // tuning done since (later buckets of sizes), memory held now
    if (auto it = state_->segments.find(g.hash); it != state_->segments.end()) it->second.plan->describe_live(g);
  r.recompiles = state_->recompile_log;
  r.segment_evictions = state_->segment_evictions;
  r.notes.insert(r.notes.begin(), state_->notes.begin(), state_->notes.end());
  return r;
}

CallResult CompiledCore::call(const std::vector<ArgValue>& args, const std::vector<std::type_index>& types,
                              const std::vector<int>& shared, const Body& body) {
  CompiledState& st = *state_;
  CallArgs call{args, types, shared, {}, {}};
  call.tensors.reserve(args.size());
  for (const ArgValue& a : args)
    if (auto* t = std::get_if<Tensor>(&a)) {
      if (!t->defined()) EMBER_THROW(Value, "[compile] argument ", call.tensors.size(), " is an undefined tensor");
      call.tensors.push_back(*t);
    }
  // Inside another trace, the ops simply join it.
  if (TraceContext::current()) return run_directly(call.tensors, body);
  call.arrays.reserve(call.tensors.size());
  for (const Tensor& t : call.tensors) call.arrays.push_back(t.array());

  SymbolValues values;
  std::string why;
  std::shared_ptr<Entry> entry = st.lookup(call, values, why);
  if (entry && !entry->has_breaks) return split_rebound(replay(*entry, call, values), entry->rebound_args);

  std::unique_lock<std::mutex> tracing(st.trace_mutex);
  if (!entry) {
    entry = st.lookup(call, values, why);  // another thread may have traced it meanwhile
    if (entry && !entry->has_breaks) {
      tracing.unlock();
      return split_rebound(replay(*entry, call, values), entry->rebound_args);
    }
  }
  bool is_recompile = !entry && !why.empty();
  if (is_recompile && st.limit_reached(why)) {
    tracing.unlock();
    return run_directly(call.tensors, body);  // eager: the user function runs op by op on the interpreter
  }
  std::string action = is_recompile ? st.mark_dynamic_dims(call) : "";
  Traced traced = st.trace_with_pinning(call, body);
  std::vector<int> rebound = traced.entry->rebound_args;
  return split_rebound(st.remember(entry, std::move(traced), is_recompile, why, action), rebound);
}

}  // namespace detail

}  // namespace ember

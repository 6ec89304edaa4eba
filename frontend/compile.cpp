// The compiled function: its trace cache (entries with guards), the compiled segments keyed by
// structural hash, automatic dynamic dims, recompiles and the recompile limit, and the trace loop.
#include "frontend/compile.h"

#include <chrono>
#include <map>
#include <mutex>
#include <set>

#include "frontend/trace.h"
#include "ir/error.h"
#include "modes/mode.h"
#include "passes/pipeline.h"
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

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

namespace detail {

// One trace's cache entry.
struct Entry {
  Guards guards;
  std::vector<ArgValue> scalars;  // the non-tensor arguments, by position (tensors as placeholders)
  bool has_breaks = false;
  std::shared_ptr<const Executable> exec;  // no-break traces: replayed directly
  std::vector<InputSource> inputs;
  struct Output { enum Kind { Graph, Arg, Captured } kind; int index; Array captured; };
  std::vector<Output> outputs;
};

class CompiledState : public SegmentCompiler {
 public:
  explicit CompiledState(Options o) : options(std::move(o)), mode(mode_config(options.mode)), pipeline(mode.passes) {}

  std::shared_ptr<const Executable> compile(const Graph& g, GraphInfo& info) override {
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
        info.cache_hit = true;
        return it->second.exec;
      }
    }
    auto start = std::chrono::steady_clock::now();
    std::unique_ptr<Graph> optimised = g.clone();
    try {
      for (const PassTiming& t : pipeline.run(*optimised))
        if (!t.skipped) info.pass_ms.emplace_back(t.pass, t.ms);
    } catch (const Error& e) {
      if (options.strict) throw;
      config::warn(std::string("compiling a graph failed; it runs unoptimised (eager) instead: ") + e.what());
      optimised = g.clone();
    }
    auto exec = std::make_shared<const Executable>(std::move(optimised));
    info.compile_ms = ms_since(start);
    fill_info(exec->graph(), info);
    if (config::log_enabled("compile"))
      config::log("compile", "graph " + std::to_string(hash) + ": " + std::to_string(info.op_count) + " ops in " +
                                 std::to_string(info.compile_ms) + " ms");
    std::lock_guard<std::mutex> lock(mutex);
    return segments.emplace(hash, Segment{exec, info}).first->second.exec;
  }

  static void fill_info(const Graph& g, GraphInfo& info) {
    info.op_count = 0;
    for (const Node* n : g.nodes()) {
      if (n->op == Op::Input || n->op == Op::Constant) continue;
      ++info.op_count;
      ++info.ops[std::string(n->info().name)];
    }
    info.ir = print(g);
  }

  Options options;
  ModeConfig mode;
  Pipeline pipeline;
  mutable std::mutex mutex;        // guards everything below
  std::mutex trace_mutex;          // one trace at a time per function
  struct Segment {
    std::shared_ptr<const Executable> exec;
    GraphInfo info;  // as reported when it was compiled
  };
  std::map<uint64_t, Segment> segments;  // by structural hash
  std::vector<std::shared_ptr<Entry>> entries;
  // Written only while trace_mutex is held, and read by the trace that holds it:
  std::set<std::pair<int, int>> dynamic_dims;  // (input, dim) marked dynamic after a change
  std::set<std::pair<int, int>> pinned_dims;   // (input, dim) a symbol could not flow through
  int recompiles = 0;
  bool warned_limit = false;
  Report last;                     // the latest trace's report
  std::vector<Recompile> recompile_log;
  std::vector<std::string> notes;
};

CompiledCore::CompiledCore(Options options) : state_(std::make_unique<CompiledState>(std::move(options))) {}
CompiledCore::~CompiledCore() = default;

const Options& CompiledCore::options() const { return state_->options; }

Report CompiledCore::report() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  Report r = state_->last;
  r.recompiles = state_->recompile_log;
  r.notes.insert(r.notes.begin(), state_->notes.begin(), state_->notes.end());
  return r;
}

namespace {

bool scalars_match(const Entry& e, const std::vector<ArgValue>& args, std::string& why) {
  if (args.size() != e.scalars.size()) {
    why = "number of arguments: " + std::to_string(e.scalars.size()) + " -> " + std::to_string(args.size());
    return false;
  }
  for (size_t i = 0; i < args.size(); ++i) {
    if (std::holds_alternative<Tensor>(args[i])) continue;
    bool same = args[i].index() == e.scalars[i].index() &&
                std::visit([&](const auto& v) {
                  using V = std::decay_t<decltype(v)>;
                  if constexpr (std::is_same_v<V, Tensor>) return true;
                  else return v == std::get<V>(e.scalars[i]);
                }, args[i]);
    if (!same) {
      why = "argument " + std::to_string(i) + ": " + arg_str(e.scalars[i]) + " -> " + arg_str(args[i]);
      return false;
    }
  }
  return true;
}

std::vector<Tensor> replay(const Entry& e, const std::vector<Array>& arrays, const std::vector<Tensor>& tensors,
                           const SymbolValues& values) {
  std::vector<Array> results;
  if (e.exec) {
    std::vector<Array> inputs;
    for (const InputSource& s : e.inputs) inputs.push_back(s.kind == InputSource::Arg ? arrays[s.arg] : s.captured);
    results = e.exec->run(inputs, values);
  }
  std::vector<Tensor> out;
  for (const Entry::Output& o : e.outputs) {
    if (o.kind == Entry::Output::Graph) out.emplace_back(results[o.index]);
    else if (o.kind == Entry::Output::Arg) out.push_back(tensors[o.index]);
    else out.emplace_back(o.captured);
  }
  return out;
}

}  // namespace

std::vector<Tensor> CompiledCore::call(const std::vector<ArgValue>& args, const std::function<std::vector<Tensor>()>& body) {
  CompiledState& st = *state_;
  // Inside another trace, the ops simply join it.
  if (TraceContext::current()) return body();
  std::vector<Tensor> tensors;
  std::vector<Array> arrays;
  for (const ArgValue& a : args)
    if (auto* t = std::get_if<Tensor>(&a)) {
      if (!t->defined()) EMBER_THROW(Value, "[compile] argument ", tensors.size(), " is an undefined tensor");
      tensors.push_back(*t);
      arrays.push_back(t->array());
    }

  auto lookup = [&](SymbolValues& values, std::string& why) -> std::shared_ptr<Entry> {
    std::lock_guard<std::mutex> lock(st.mutex);
    why.clear();
    for (auto it = st.entries.rbegin(); it != st.entries.rend(); ++it) {
      std::string reason;
      if (scalars_match(**it, args, reason)) reason = (*it)->guards.check(arrays, values);
      if (reason.empty()) return *it;
      if (why.empty()) why = reason;  // the newest entry's failing guard
    }
    return nullptr;
  };

  SymbolValues values;
  std::string why;
  std::shared_ptr<Entry> entry = lookup(values, why);
  if (entry && !entry->has_breaks) return replay(*entry, arrays, tensors, values);

  std::unique_lock<std::mutex> tracing(st.trace_mutex);
  if (!entry) {
    entry = lookup(values, why);  // another thread may have traced it meanwhile
    if (entry && !entry->has_breaks) {
      tracing.unlock();
      return replay(*entry, arrays, tensors, values);
    }
  }
  bool is_recompile = !entry && !why.empty();
  if (is_recompile) {
    std::lock_guard<std::mutex> lock(st.mutex);
    if (st.recompiles >= st.options.recompile_limit) {
      if (!st.warned_limit) {
        st.warned_limit = true;
        config::warn("recompile_limit (" + std::to_string(st.options.recompile_limit) +
                     ") reached; running eagerly from now on for new inputs. Last failing guard: " + why);
        st.recompile_log.push_back({why, "fell back to eager (recompile_limit reached)"});
      }
      tracing.unlock();
      // Eager: the user function runs op by op on the interpreter.
      return body();
    }
  }

  // Decide which dims are symbolic.
  std::string action = "recompiled";
  if (is_recompile && !st.options.dynamic.has_value()) {
    std::lock_guard<std::mutex> lock(st.mutex);
    const Guards& old = st.entries.back()->guards;
    std::string marked;
    for (size_t i = 0; i < arrays.size() && i < old.tensors.size(); ++i) {
      if (arrays[i].rank() != static_cast<int64_t>(old.tensors[i].shape.size())) continue;
      for (size_t d = 0; d < old.tensors[i].shape.size(); ++d) {
        const Dim& dim = old.tensors[i].shape[d];
        if (dim.is_static() && dim.value() != arrays[i].shape()[d] && !st.dynamic_dims.count({int(i), int(d)})) {
          st.dynamic_dims.insert({int(i), int(d)});
          marked += (marked.empty() ? "" : ", ") + std::string("input ") + std::to_string(i) + " dim " + std::to_string(d);
        }
      }
    }
    if (!marked.empty()) action = "recompiled with dynamic dims: " + marked;
  }

  // Per symbol of the latest trace, the (input, dim) pairs it stands for.
  std::set<std::pair<int, int>>& pinned = st.pinned_dims;
  std::vector<std::vector<std::pair<int, int>>> symbol_dims;
  std::set<int> specialised;  // symbols the failed trace had already fixed to a value
  auto trace = [&](bool force_static) {
    symbol_dims.clear();
    auto e = std::make_shared<Entry>();
    Report report;
    TraceContext ctx(st, st.options.fullgraph, report);
    std::map<int64_t, int> duck;  // equal sizes share a symbol, as TorchDynamo's duck sizing
    for (size_t i = 0; i < tensors.size(); ++i) {
      TensorType type{arrays[i].dtype(), {}};
      for (size_t d = 0; d < arrays[i].shape().size(); ++d) {
        int64_t size = arrays[i].shape()[d];
        bool dynamic = !force_static && size >= 2 && !pinned.count({int(i), int(d)}) &&
                       (st.options.dynamic.value_or(false) || st.dynamic_dims.count({int(i), int(d)}));
        if (!dynamic) { type.shape.push_back(Dim(size)); continue; }
        auto [it, fresh] = duck.emplace(size, -1);
        if (fresh) {
          it->second = ctx.add_symbol({}, size);
          symbol_dims.emplace_back();
        }
        symbol_dims[it->second].push_back({int(i), int(d)});
        type.shape.push_back(Dim::symbol(it->second));
      }
      e->guards.tensors.push_back({type.dtype, type.shape, arrays[i].is_contiguous()});
      ctx.add_arg(tensors[i], static_cast<int>(i), type);
    }
    std::vector<Tensor> outputs;
    try {
      outputs = body();
    } catch (const SymbolicShapeError&) {
      specialised.clear();
      for (const auto& [dim, value] : ctx.guards().specialisations)
        if (dim.as_symbol() >= 0) specialised.insert(dim.as_symbol());
      throw;
    }
    std::vector<const TensorImpl*> traced;  // the outputs still traced: graph outputs, in order
    for (const Tensor& t : outputs)
      if (t.impl() && t.impl()->is_traced() && std::find(traced.begin(), traced.end(), t.impl().get()) == traced.end())
        traced.push_back(t.impl().get());
    std::vector<bool> was_traced;
    for (const Tensor& t : outputs) was_traced.push_back(t.impl() && t.impl()->is_traced());
    ctx.finish(outputs);
    e->guards.symbols = ctx.guards().symbols;
    e->guards.specialisations = ctx.guards().specialisations;
    e->scalars = args;
    e->has_breaks = ctx.had_breaks();
    if (!e->has_breaks) {
      e->exec = ctx.single_executable();
      e->inputs = ctx.single_inputs();
      for (size_t k = 0; k < outputs.size(); ++k) {
        const TensorImpl* impl = outputs[k].impl().get();
        if (was_traced[k]) {
          e->outputs.push_back({Entry::Output::Graph, int(std::find(traced.begin(), traced.end(), impl) - traced.begin()), {}});
          continue;
        }
        auto arg = std::find_if(tensors.begin(), tensors.end(), [&](const Tensor& t) { return t.impl().get() == impl; });
        if (arg != tensors.end()) e->outputs.push_back({Entry::Output::Arg, int(arg - tensors.begin()), {}});
        else e->outputs.push_back({Entry::Output::Captured, -1, outputs[k].array()});
      }
    }
    report.guards = e->guards.describe();
    return std::tuple{e, report, outputs};
  };

  std::shared_ptr<Entry> fresh;
  Report report;
  std::vector<Tensor> outputs;
  // A symbolic dim that cannot flow through an op (a weight's static size, a strided window) is
  // pinned to its value and the trace runs again; after a few tries, every dim is static.
  for (int attempt = 0;; ++attempt) {
    try {
      std::tie(fresh, report, outputs) = trace(attempt == 4);
      break;
    } catch (const SymbolicShapeError& e) {
      if (attempt == 4) throw;
      // Symbols already fixed to a value are static in effect: pinning them is enough when the
      // error involves one of them (x.size(1) / 2 then reshape); otherwise pin all involved.
      std::vector<int> to_pin;
      for (int s : e.symbols())
        if (specialised.count(s)) to_pin.push_back(s);
      if (to_pin.empty()) to_pin = e.symbols();
      std::string pinned_now;
      for (int s : to_pin)
        if (s >= 0 && static_cast<size_t>(s) < symbol_dims.size())
          for (auto dim : symbol_dims[s])
            if (pinned.insert(dim).second)
              pinned_now += (pinned_now.empty() ? "" : ", ") + std::string("input ") + std::to_string(dim.first) +
                            " dim " + std::to_string(dim.second);
      if (pinned_now.empty()) attempt = 3;  // nothing to pin: the next try is fully static
      std::lock_guard<std::mutex> lock(st.mutex);
      st.notes.push_back((pinned_now.empty() ? std::string("specialised to static shapes")
                                             : "specialised " + pinned_now + " to static") + ": " + e.what());
    }
  }

  std::lock_guard<std::mutex> lock(st.mutex);
  if (entry) {
    // A break-y trace replayed under existing guards: only the report changes.
    st.last = report;
    return outputs;
  }
  if (is_recompile) {
    ++st.recompiles;
    st.recompile_log.push_back({why, action});
    if (config::log_enabled("recompiles")) config::log("recompiles", "guard failed: " + why + "; " + action);
  }
  if (config::log_enabled("guards"))
    for (const std::string& g : report.guards) config::log("guards", g);
  st.entries.push_back(fresh);
  st.last = report;
  return outputs;
}

}  // namespace detail

}  // namespace ember

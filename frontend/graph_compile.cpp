#include "frontend/graph_compile.h"

#include <algorithm>
#include <bit>
#include <chrono>

#include "codegen/plan.h"
#include "runtime/config.h"

namespace ember {

namespace {

void describe_ops(const Graph& g, GraphInfo& info) {
  info.op_count = 0;
  info.ops.clear();
  for (const Node* n : g.nodes()) {
    if (n->op == Op::Input || n->op == Op::Constant) continue;
    ++info.op_count;
    ++info.ops[std::string(n->info().name)];
  }
  info.ir = print(g);
}

}  // namespace

std::shared_ptr<Executable> compile_graph(const Graph& g, const ModeConfig& mode, const Pipeline& pipeline,
                                          bool strict, GraphInfo& info) {
  auto start = std::chrono::steady_clock::now();
  std::unique_ptr<Graph> optimised = g.clone();
  try {
    for (const PassTiming& t : pipeline.run(*optimised))
      if (!t.skipped) info.pass_ms.emplace_back(t.pass, t.ms);
  } catch (const std::exception& e) {  // ember::Error, or a SymbolicShapeError from a pass
    if (strict) throw;
    config::warn(std::string("compiling a graph failed; it runs unoptimised (eager) instead: ") + e.what());
    optimised = g.clone();
  }
  codegen::CodegenStats stats;
  std::shared_ptr<Executable> exec =
      codegen::build_cpu_executable(std::move(optimised), stats, strict, mode.static_memory_plan, mode.choice_steps);
  info.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  describe_ops(exec->graph(), info);
  info.steps = exec->steps();
  info.buffers = exec->buffers();
  info.kernels = exec->kernel_steps();
  info.kernels_compiled = stats.compiled;
  info.kernels_from_disk = stats.from_disk;
  info.kernel_compile_ms = stats.compile_ms;
  info.interpreter_ops = exec->interpreter_ops();
  info.mode = mode.name;
  info.static_plan = mode.static_memory_plan;
  return exec;
}

codegen::AutotuneOptions autotune_options(std::optional<double> budget_s, const std::string& search) {
  codegen::AutotuneOptions o;
  if (budget_s) {
    o.budget_s = *budget_s;
  } else if (std::string v = config::get("EMBER_AUTOTUNE_BUDGET_S"); !v.empty()) {
    try {
      o.budget_s = std::stod(v);
    } catch (const std::exception&) {
      o.budget_s = -1;
    }
    if (!(o.budget_s >= 0)) {
      config::warn("EMBER_AUTOTUNE_BUDGET_S=" + v + " is not a number of seconds; using 30");
      o.budget_s = 30;
    }
  }
  o.search = search.empty() ? config::get("EMBER_AUTOTUNE_SEARCH") : search;
  std::vector<std::string> names = codegen::search_names();
  if (o.search.empty() || std::find(names.begin(), names.end(), o.search) == names.end()) {
    if (!o.search.empty()) config::warn("EMBER_AUTOTUNE_SEARCH=" + o.search + " is not a search; using auto");
    o.search = "auto";
  }
  return o;
}

std::vector<Array> run_and_autotune(Executable& exec, std::span<const Array> inputs, const SymbolValues& symbols,
                                    const codegen::AutotuneOptions& options, bool strict, GraphInfo& info,
                                    int64_t* allocations, const OutputStorages& output_storages) {
  codegen::Autotuner tuner(exec);
  std::vector<Array> outputs = exec.run(inputs, symbols, allocations, output_storages, tuner.observer());
  auto start = std::chrono::steady_clock::now();
  try {
    codegen::AutotuneResult r = tuner.tune(symbols, options);
    info.autotuned = true;
    info.autotune_s = r.seconds;
    info.autotune_timed = r.timed;
    info.tuning = std::move(r.steps);
  } catch (const std::exception& e) {
    if (strict) throw;
    config::warn(std::string("max-autotune failed; the graph runs untuned: ") + e.what());
  }
  info.compile_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return outputs;
}

// [Note: tuning per size bucket]
// max-autotune measures a step on the sizes of the call that tunes it, and the best way to run
// a step at 8 rows is not the best at 8,000. A graph with symbols (dynamic sizes) therefore keeps
// one plan per bucket of its symbols' values, a bucket being the power of two each value rounds
// up to (values 0 and 1 are their own): the first call in a bucket builds the bucket's plan from
// the optimised graph (its kernels come from the kernel cache) and tunes it on that call's
// inputs, as the graph's first call tuned the first plan. The tuning database's keys bucket
// sizes the same way (layout_signature), so a second process takes every bucket's choices
// without timing. A graph reaching more than kTunedBuckets buckets runs the rest on the first
// bucket's plan: correct, tuned for other sizes; the memory of the plans (a static plan's
// buffers) stays bounded. The tuning budget is the graph's: a new bucket gets what the earlier
// buckets' tunings left.

namespace {

std::vector<int64_t> bucket_key(const SymbolValues& symbols) {
  std::vector<int64_t> key;
  key.reserve(symbols.size());
  for (int64_t v : symbols) key.push_back(v <= 1 ? v : static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(v))));
  return key;
}

std::string bucket_text(const std::vector<int64_t>& key) {
  std::string s;
  for (size_t i = 0; i < key.size(); ++i) {
    s += (i ? ", s" : "s") + std::to_string(i) + " in ";
    s += key[i] <= 2 ? std::to_string(key[i]) : std::to_string(key[i] / 2 + 1) + ".." + std::to_string(key[i]);
  }
  return s;
}

}  // namespace

GraphPlan::GraphPlan(std::shared_ptr<Executable> exec, std::optional<codegen::AutotuneOptions> autotune, bool strict,
                     bool choice_steps, std::optional<double> static_plan_mb)
    : first_(std::move(exec)), autotune_(std::move(autotune)), strict_(strict), choice_steps_(choice_steps) {
  if (static_plan_mb) first_->set_held_limit(static_cast<size_t>(*static_plan_mb * 1024.0 * 1024.0));
}

std::shared_ptr<GraphPlan::Bucket> GraphPlan::bucket_for(const SymbolValues& symbols) const {
  std::vector<int64_t> key = bucket_key(symbols);
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = buckets_.find(key); it != buckets_.end()) return it->second;
  if (buckets_.size() >= kTunedBuckets) return bucket_order_.front();
  auto b = std::make_shared<Bucket>();
  b->sizes = bucket_text(key);
  if (buckets_.empty()) {
    b->exec = first_;
  } else {
    codegen::CodegenStats stats;
    b->exec = codegen::build_cpu_executable(first_->graph().clone(), stats, strict_, first_->static_plan(), choice_steps_);
    b->exec->set_held_limit(first_->held_limit());
  }
  buckets_.emplace(std::move(key), b);
  bucket_order_.push_back(b);
  return b;
}

std::vector<Array> GraphPlan::run(std::span<const Array> inputs, const SymbolValues& symbols, int64_t* allocations,
                                  const OutputStorages& output_storages) const {
  if (!autotune_) return first_->run(inputs, symbols, allocations, output_storages);
  std::shared_ptr<Bucket> b = bucket_for(symbols);
  std::vector<Array> outputs;
  bool ran = false;
  std::call_once(b->tuned, [&] {
    GraphInfo tuned;
    codegen::AutotuneOptions options = *autotune_;
    options.budget_s = std::max(0.0, options.budget_s - tuning_seconds());  // the graph's budget, over its buckets
    outputs = run_and_autotune(*b->exec, inputs, symbols, options, strict_, tuned, allocations, output_storages);
    for (TuningRecord& t : tuned.tuning) t.sizes = symbols.empty() ? "" : b->sizes;
    ran = true;
    std::lock_guard<std::mutex> lock(mu_);  // describe_live reads it
    b->info = std::move(tuned);
  });
  if (!ran) outputs = b->exec->run(inputs, symbols, allocations, output_storages);
  return outputs;
}

// Time spent tuning the buckets so far (one tuning at a time may still be under way).
double GraphPlan::tuning_seconds() const {
  std::lock_guard<std::mutex> lock(mu_);
  double seconds = 0;
  for (const std::shared_ptr<Bucket>& b : bucket_order_) seconds += b->info.autotune_s;
  return seconds;
}

bool GraphPlan::holds_constant(const Array& a) const {
  if (first_->holds_constant(a)) return true;
  std::lock_guard<std::mutex> lock(mu_);
  for (const std::shared_ptr<Bucket>& b : bucket_order_)
    if (b->exec->holds_constant(a)) return true;
  return false;
}

void GraphPlan::describe_live(GraphInfo& info) const {
  info.static_plans = 1;
  info.held_limit = first_->held_limit();
  if (!autotune_) {
    info.held_bytes = first_->held_bytes();
    return;
  }
  info.autotuned = false;
  info.autotune_s = 0;
  info.autotune_timed = 0;
  info.tuning.clear();
  info.held_bytes = 0;
  std::lock_guard<std::mutex> lock(mu_);
  if (bucket_order_.empty()) info.held_bytes = first_->held_bytes();
  info.static_plans = std::max<int>(1, static_cast<int>(bucket_order_.size()));
  if (info.held_limit != SIZE_MAX) info.held_limit *= static_cast<size_t>(info.static_plans);  // each plan's bound
  for (const std::shared_ptr<Bucket>& b : bucket_order_) {
    info.held_bytes += b->exec->held_bytes();
    if (!b->info.autotuned) continue;  // still tuning, or its tuning failed
    info.autotuned = true;
    info.autotune_s += b->info.autotune_s;
    info.autotune_timed += b->info.autotune_timed;
    info.tuning.insert(info.tuning.end(), b->info.tuning.begin(), b->info.tuning.end());
  }
}

}  // namespace ember

#include "frontend/graph_compile.h"

#include <algorithm>
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
      codegen::build_cpu_executable(std::move(optimised), stats, strict, mode.static_memory_plan);
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

}  // namespace ember

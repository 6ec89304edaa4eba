#include "frontend/graph_compile.h"

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

std::shared_ptr<const Executable> compile_graph(const Graph& g, const ModeConfig& mode, const Pipeline& pipeline,
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
  std::shared_ptr<const Executable> exec =
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
  return exec;
}

}  // namespace ember

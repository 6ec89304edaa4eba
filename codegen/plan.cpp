#include "codegen/plan.h"

#include <unordered_set>

#include "codegen/cpu/cpu_kernel.h"
#include "codegen/cpu/emit_kernel.h"
#include "codegen/cpu/emit_ops.h"
#include "codegen/cpu/jit.h"
#include "ir/error.h"
#include "passes/fuse.h"
#include "runtime/config.h"
#include "runtime/thread_pool.h"

namespace ember::codegen {

bool cpu_can_compute(const Node* n) {
  if (folded_dim(n) >= 0) return cpu::can_emit_reduction(n);
  if (!n->info().is_elementwise() || n->num_outputs() != 1) return false;
  std::vector<TensorType> types;
  for (const Value& in : n->inputs()) types.push_back(in.type());
  return cpu::can_emit(n->op, elementwise_compute_dtype(n->op, types, n->type().dtype));
}

namespace {

// The group's values that something outside it reads: a node outside, or the graph's outputs.
std::vector<Value> group_outputs(const FusionGroup& group, const std::unordered_set<const Node*>& returned) {
  std::unordered_set<const Node*> members(group.nodes.begin(), group.nodes.end());
  std::vector<Value> outputs;
  for (Node* n : group.nodes) {
    bool escapes = returned.count(n) > 0;
    for (const Use& u : n->uses()) escapes = escapes || !members.count(u.user);
    if (escapes) outputs.push_back(Value(n));
  }
  return outputs;
}

}  // namespace

std::shared_ptr<Executable> build_cpu_executable(std::unique_ptr<Graph> graph, CodegenStats& stats,
                                                 bool strict, bool static_buffers) {
  if (config::dump_after("graph"))  // the graph code generation starts from
    config::dump("graph-" + std::to_string(structural_hash(*graph)) + ".ir", print(*graph));
  std::vector<FusedStep> steps;
  std::vector<KernelSpec> specs;
  if (config::get("EMBER_CODEGEN") != "0" && cpu::jit_available()) {
    std::unordered_set<const Node*> returned;
    for (const Value& v : graph->outputs()) returned.insert(v.node);
    for (FusionGroup& group : find_fusion_groups(*graph, cpu_can_compute)) {
      FusedStep step;
      step.outputs = group_outputs(group, returned);
      if (step.outputs.empty()) continue;  // dead: nothing reads it (DCE keeps only nodes that must run)
      specs.push_back(spec_of_group(group.nodes, group.domain, step.outputs, step.inputs));
      specs.back().columns = group.folds >= 0 && group.folds == static_cast<int>(group.domain.size()) - 2;
      step.nodes.assign(group.nodes.begin(), group.nodes.end());
      steps.push_back(std::move(step));
    }
  }
  // The kernels of one graph compile in parallel, each thread with its own MLIR context.
  std::vector<cpu::KernelBuild> builds(specs.size());
  std::vector<std::string> errors(specs.size());
  parallel_for(static_cast<int64_t>(specs.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      try {
        builds[i] = cpu::cpu_kernel(specs[i]);
      } catch (const cpu::CodegenError& e) {
        errors[i] = e.what();
      }
    }
  });
  std::vector<FusedStep> fused;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (!errors[i].empty()) {
      if (strict) EMBER_THROW(Internal, errors[i]);
      stats.failures.push_back(errors[i]);
      config::warn("generating a kernel failed; its ops run on the interpreter: " + errors[i]);
      continue;
    }
    steps[i].kernel = builds[i].kernel;
    stats.compiled += builds[i].compiled;
    stats.from_disk += builds[i].from_disk;
    stats.compile_ms += builds[i].ms;
    fused.push_back(std::move(steps[i]));
  }
  stats.kernels = static_cast<int>(fused.size());
  return std::make_shared<Executable>(std::move(graph), std::move(fused), static_buffers);
}

}  // namespace ember::codegen

#include "codegen/plan.h"

#include <unordered_set>

#include "codegen/cpu/cpu_kernel.h"
#include "codegen/cpu/emit_ops.h"
#include "ir/error.h"
#include "passes/fuse.h"
#include "runtime/config.h"

namespace ember::codegen {

bool cpu_can_compute(const Node* n) {
  if (!n->info().is_elementwise() || n->num_outputs() != 1) return false;
  std::vector<DType> args;
  std::vector<TensorType> types;
  for (const Value& in : n->inputs()) {
    args.push_back(in.type().dtype);
    types.push_back(in.type());
  }
  DType compute = elementwise_compute_dtype(n->op, types, n->type().dtype);
  return cpu::can_emit(n->op, args, compute, n->type().dtype);
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

std::shared_ptr<const Executable> build_cpu_executable(std::unique_ptr<Graph> graph, CodegenStats& stats,
                                                       bool strict) {
  std::vector<FusedStep> fused;
  if (config::get("EMBER_CODEGEN") != "0") {
    std::unordered_set<const Node*> returned;
    for (const Value& v : graph->outputs()) returned.insert(v.node);
    for (FusionGroup& group : find_fusion_groups(*graph, cpu_can_compute)) {
      FusedStep step;
      step.outputs = group_outputs(group, returned);
      if (step.outputs.empty()) continue;  // dead: nothing reads it (DCE keeps only nodes that must run)
      KernelSpec spec = spec_of_group(group.nodes, step.outputs, step.inputs);
      try {
        cpu::KernelBuild build = cpu::cpu_kernel(spec);
        step.kernel = build.kernel;
        stats.compiled += build.compiled;
        stats.from_disk += build.from_disk;
        stats.compile_ms += build.ms;
      } catch (const cpu::CodegenError& e) {
        if (strict) EMBER_THROW(Internal, e.what());
        stats.failures.push_back(e.what());
        config::warn(std::string("generating a kernel failed; its ops run on the interpreter: ") + e.what());
        continue;
      }
      step.nodes.assign(group.nodes.begin(), group.nodes.end());
      fused.push_back(std::move(step));
    }
  }
  stats.kernels = static_cast<int>(fused.size());
  return std::make_shared<const Executable>(std::move(graph), std::move(fused));
}

}  // namespace ember::codegen

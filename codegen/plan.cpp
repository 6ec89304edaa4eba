#include "codegen/plan.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "codegen/cpu/cpu_kernel.h"
#include "codegen/cpu/emit_kernel.h"
#include "codegen/cpu/emit_ops.h"
#include "codegen/cpu/gemm_epilogue.h"
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

// A float32 matmul of [..., M, K] by [K, N]: the GEMMs a step of ember's can run.
bool is_plain_gemm(const Node* n) {
  if (n->op != Op::MatMul || n->num_outputs() != 1 || n->type().dtype != DType::Float32) return false;
  const TensorType &a = n->inputs()[0].type(), &b = n->inputs()[1].type();
  return a.dtype == DType::Float32 && b.dtype == DType::Float32 && a.shape.size() >= 2 && b.shape.size() == 2;
}

// A kernel's input that is a GEMM's product: which input, and the nodes between (the matmul,
// and the reshapes its product went through).
struct GemmProduct {
  int input = -1;
  std::vector<const Node*> nodes;
};

// The matmul whose product `v` is, through reshapes that keep the product's rows (its last dim),
// each read by nothing else; with those nodes. Null when there is none.
const Node* product_source(Value v, const std::unordered_set<const Node*>& returned, std::vector<const Node*>& nodes) {
  const Dim columns = v.type().shape.empty() ? Dim(0) : v.type().shape.back();
  const Node* n = v.node;
  while (n->op == Op::Reshape && !n->type().shape.empty() && n->type().shape.back() == columns) {
    if (returned.count(n) || n->uses().size() != 1) return nullptr;
    nodes.push_back(n);
    n = n->inputs()[0].node;
  }
  if (!is_plain_gemm(n) || returned.count(n) || n->type().shape.empty() || n->type().shape.back() != columns) return nullptr;
  nodes.push_back(n);
  return n;
}

// Which of an elementwise kernel's inputs is the product of a matmul it can take as its GEMM
// ([Note: GEMM epilogues]): a plain GEMM's, read at every point of the domain (never broadcast),
// and by nothing outside the step (no other node, not a graph output).
GemmProduct gemm_product(const FusedStep& step, const KernelSpec& spec, const std::unordered_set<const Node*>& returned) {
  if (spec.reduces()) return {};
  std::unordered_set<const Node*> members(step.nodes.begin(), step.nodes.end());
  for (size_t i = 0; i < step.inputs.size(); ++i) {
    const std::vector<bool>& broadcast = spec.inputs[i].broadcast;
    if (std::count(broadcast.begin(), broadcast.end(), true) || step.inputs[i].type().shape.empty()) continue;
    GemmProduct found{static_cast<int>(i), {}};
    const Node* gemm = product_source(step.inputs[i], returned, found.nodes);
    if (!gemm) continue;
    members.insert(found.nodes.begin(), found.nodes.end());
    bool alone = true;
    for (const Node* n : found.nodes)
      for (const Use& u : n->uses()) alone = alone && members.count(u.user);
    if (alone) return found;
    for (const Node* n : found.nodes) members.erase(n);
  }
  return {};
}

// The step with the GEMM of `product` taken in: its nodes (in graph order, `position` each node's
// place in the graph), A and B first among its inputs, the kernel a GemmEpilogue.
FusedStep with_gemm(FusedStep step, const GemmProduct& product, const std::unordered_map<const Node*, int>& position) {
  const Node* gemm = product.nodes.back();
  step.nodes.insert(step.nodes.end(), product.nodes.begin(), product.nodes.end());
  std::sort(step.nodes.begin(), step.nodes.end(),
            [&](const Node* x, const Node* y) { return position.at(x) < position.at(y); });
  step.inputs.erase(step.inputs.begin() + product.input);
  step.inputs.insert(step.inputs.begin(), {gemm->inputs()[0], gemm->inputs()[1]});
  auto kernel = std::dynamic_pointer_cast<const cpu::CpuKernel>(step.kernel);
  step.kernel = std::make_shared<const cpu::GemmEpilogue>(std::move(kernel), product.input);
  return step;
}

}  // namespace

std::shared_ptr<Executable> build_cpu_executable(std::unique_ptr<Graph> graph, CodegenStats& stats,
                                                 bool strict, bool static_buffers, bool gemm_epilogues) {
  if (config::dump_after("graph"))  // the graph code generation starts from
    config::dump("graph-" + std::to_string(structural_hash(*graph)) + ".ir", print(*graph));
  std::vector<FusedStep> steps;
  std::vector<KernelSpec> specs;
  std::unordered_set<const Node*> returned;
  for (const Value& v : graph->outputs()) returned.insert(v.node);
  if (config::get("EMBER_CODEGEN") != "0" && cpu::jit_available()) {
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
  std::unordered_map<const Node*, int> position;  // each node's place in the graph, for with_gemm
  if (gemm_epilogues)
    for (const Node* n : graph->nodes()) position.emplace(n, static_cast<int>(position.size()));
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
    const GemmProduct product = gemm_epilogues ? gemm_product(steps[i], specs[i], returned) : GemmProduct{};
    fused.push_back(product.input >= 0 ? with_gemm(std::move(steps[i]), product, position) : std::move(steps[i]));
  }
  stats.kernels = static_cast<int>(fused.size());
  return std::make_shared<Executable>(std::move(graph), std::move(fused), static_buffers);
}

}  // namespace ember::codegen

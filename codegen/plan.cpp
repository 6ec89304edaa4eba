#include "codegen/plan.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "codegen/cpu/cpu_kernel.h"
#include "codegen/cpu/emit_kernel.h"
#include "codegen/cpu/emit_ops.h"
#include "codegen/cpu/gemm_epilogue.h"
#include "codegen/cpu/jit.h"
#include "codegen/cpu/recompute_choice.h"
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

// `nodes` sorted by their place in the graph (`position`).
template <class N>
void in_graph_order(std::vector<N*>& nodes, const std::unordered_map<const Node*, int>& position) {
  std::sort(nodes.begin(), nodes.end(), [&](const Node* x, const Node* y) { return position.at(x) < position.at(y); });
}

// The step with the GEMM of `product` taken in: its nodes (in graph order, `position` each node's
// place in the graph), A and B first among its inputs, the kernel a GemmEpilogue.
FusedStep with_gemm(FusedStep step, const GemmProduct& product, const std::unordered_map<const Node*, int>& position) {
  const Node* gemm = product.nodes.back();
  step.nodes.insert(step.nodes.end(), product.nodes.begin(), product.nodes.end());
  in_graph_order(step.nodes, position);
  step.inputs.erase(step.inputs.begin() + product.input);
  step.inputs.insert(step.inputs.begin(), {gemm->inputs()[0], gemm->inputs()[1]});
  auto kernel = std::dynamic_pointer_cast<const cpu::CpuKernel>(step.kernel);
  step.kernel = std::make_shared<const cpu::GemmEpilogue>(std::move(kernel), product.input);
  return step;
}

// A value that one step stores for other steps to read, each of which could compute it again
// instead ([Note: recompute or store] in codegen/cpu/recompute_choice.h): step `producer`, steps
// `readers`, and the value.
struct RecomputeSite {
  int producer = -1;
  std::vector<int> readers;  // in step order
  Value value;
  std::vector<Node*> cone;  // the nodes each reader computes again: the value's, and those of the
                            // producer's it is computed from
  std::vector<Value> leaves;  // what the cone reads: the producer's inputs
  int producer_spec = -1;  // the producer's kernel in the recomputing way (-1: none)
  std::vector<int> reader_specs;  // each reader's kernel in the recomputing way
  std::vector<Value> producer_inputs;  // what those kernels read
  std::vector<std::vector<Value>> reader_inputs;
};

constexpr size_t kMaxCone = 8;
constexpr size_t kMaxReaders = 4;  // each one more kernel to compile, and the value computed once more

// Whether v is a constant that some pow reads as its exponent: a kernel specialises on those
// ("immediates", spec_of_group), so one kernel that reads it as an input and another that holds
// it in its text would compute pow differently.
bool is_exponent(const Value& v) {
  if (v.node->op != Op::Constant) return false;
  for (const Use& u : v.node->uses())
    if (u.user && u.user->op == Op::Pow && u.operand == 1) return true;
  return false;
}

// The value's node and the nodes of its step it is computed from, when all are elementwise and
// at most kMaxCone, and what they read is inputs of the step; with those inputs. Empty otherwise.
std::pair<std::vector<Node*>, std::vector<Value>> recomputable_cone(Node* value, const FusedStep& step, int self,
                                                                    const std::vector<int>& step_of) {
  std::vector<Node*> cone, stack{value};
  std::vector<Value> leaves;
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    if (std::find(cone.begin(), cone.end(), n) != cone.end()) continue;
    if (!n->info().is_elementwise() || n->num_outputs() != 1 || n->inputs().empty() || cone.size() == kMaxCone)
      return {};
    cone.push_back(n);
    for (const Value& in : n->inputs()) {
      if (step_of[in.node->id()] == self) {
        stack.push_back(in.node);
      } else if (!is_exponent(in) && std::find(step.inputs.begin(), step.inputs.end(), in) != step.inputs.end()) {
        // An input of the step: a graph input, a constant, an interpreter step's result, or
        // another kernel's value, which its step stores for this one anyway.
        if (std::find(leaves.begin(), leaves.end(), in) == leaves.end()) leaves.push_back(in);
      } else {
        return {};  // a constant the kernel holds in its text
      }
    }
  }
  return {cone, leaves};
}

// Whether `units` can run as one step: no value leaves them and comes back through another unit.
// A unit is a step with the steps joined into it (`members`; step_of maps a node to its unit), or
// a node outside the steps. Sets joined before count as one: two pairs each joinable alone made a
// cycle together in ResNet-50.
bool joinable(const std::vector<FusedStep>& steps, const std::vector<std::vector<int>>& members, const std::vector<int>& units,
              const std::vector<int>& step_of, const Graph& g) {
  auto inside = [&](int unit) { return std::find(units.begin(), units.end(), unit) != units.end(); };
  auto step_inputs = [&](int unit, const Node* single) -> std::vector<const Node*> {
    std::vector<const Node*> nodes;
    if (unit >= 0) {
      for (int member : members[unit])
        for (const Value& v : steps[member].inputs) nodes.push_back(v.node);
    } else {
      for (const Value& v : single->inputs()) nodes.push_back(v.node);
    }
    return nodes;
  };
  std::vector<char> seen(g.id_bound(), 0);
  std::vector<int> seen_step(steps.size(), 0);
  std::vector<const Node*> stack;
  for (int s : units)
    for (const Node* n : step_inputs(s, nullptr))
      if (!inside(step_of[n->id()])) stack.push_back(n);
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    const int unit = step_of[n->id()];
    if (unit >= 0 && inside(unit)) return false;  // out of the set and back in
    if (seen[n->id()] || (unit >= 0 && seen_step[unit])) continue;
    seen[n->id()] = 1;
    if (unit >= 0) seen_step[unit] = 1;
    for (const Node* m : step_inputs(unit, n)) stack.push_back(m);
  }
  return true;
}

// The steps other than `self` that read v (at most kMaxReaders, in step order), when nothing else
// does and each reads nothing else of self's or of another reader's (joined, the step would read
// its own output); else none.
std::vector<int> readers_of(const Value& v, int self, const std::vector<FusedStep>& steps, const std::vector<int>& step_of) {
  std::vector<int> readers;
  for (const Use& u : v.node->uses()) {
    const int r = u.user ? step_of[u.user->id()] : -1;
    if (r == self) continue;
    if (r < 0) return {};
    if (std::find(readers.begin(), readers.end(), r) == readers.end()) readers.push_back(r);
  }
  if (readers.size() > kMaxReaders) return {};
  std::sort(readers.begin(), readers.end());
  for (int r : readers)
    for (const Value& w : steps[r].inputs) {
      const int from = step_of[w.node->id()];
      if (w != v && (from == self || std::find(readers.begin(), readers.end(), from) != readers.end())) return {};
    }
  return readers;
}

// Where a value could be recomputed: an elementwise node's value, not returned, computed (through
// at most kMaxCone elementwise nodes of its step) from inputs of its step, read outside its step
// by other steps alone; steps whose product is a GEMM's (`taken`) and steps
// in a site already are left alone.
std::vector<RecomputeSite> recompute_sites(const std::vector<FusedStep>& steps, const std::unordered_set<const Node*>& returned,
                                           std::vector<bool> taken, const Graph& g) {
  std::vector<int> step_of(g.id_bound(), -1);
  for (size_t i = 0; i < steps.size(); ++i)
    for (const Node* n : steps[i].nodes) step_of[n->id()] = static_cast<int>(i);
  std::vector<std::vector<int>> members(steps.size());
  for (size_t i = 0; i < steps.size(); ++i) members[i] = {static_cast<int>(i)};
  std::vector<RecomputeSite> sites;
  for (size_t i = 0; i < steps.size(); ++i) {
    const int self = static_cast<int>(i);
    for (const Value& v : steps[i].outputs) {
      Node* n = v.node;
      if (taken[i] || returned.count(n)) continue;
      std::vector<int> readers = readers_of(v, self, steps, step_of);
      if (readers.empty() || std::any_of(readers.begin(), readers.end(), [&](int r) { return bool(taken[r]); })) continue;
      auto [cone, leaves] = recomputable_cone(n, steps[i], self, step_of);
      std::vector<int> units = readers;
      units.push_back(self);
      if (cone.empty() || !joinable(steps, members, units, step_of, g)) continue;
      if (config::log_enabled("fusion")) {
        std::string by;
        for (int r : readers) by += (by.empty() ? "" : ", ") + std::to_string(r);
        config::log("fusion", "%" + std::to_string(n->id()) + " (" + std::string(n->info().name) + ") is stored by step " +
                                  std::to_string(i) + " or recomputed by step" + (readers.size() > 1 ? "s " : " ") + by +
                                  ": one step with both ways");
      }
      taken[i] = true;
      for (int r : readers) {
        taken[r] = true;
        for (const Node* m : steps[r].nodes) step_of[m->id()] = self;  // one unit from now on
        members[i].push_back(r);
      }
      RecomputeSite& site = sites.emplace_back();
      site.producer = self, site.readers = std::move(readers), site.value = v;
      site.cone = std::move(cone), site.leaves = std::move(leaves);
    }
  }
  return sites;
}

// Where each of `values` is among `all` (RecomputeChoice::kValue for `value`).
std::vector<int> places(const std::vector<Value>& values, const std::vector<Value>& all, const Value& value) {
  std::vector<int> at;
  for (const Value& v : values) {
    if (v == value) {
      at.push_back(cpu::RecomputeChoice::kValue);
      continue;
    }
    auto it = std::find(all.begin(), all.end(), v);
    EMBER_CHECK(it != all.end(), "a kernel of a recompute choice reads a value its step does not have");
    at.push_back(static_cast<int>(it - all.begin()));
  }
  return at;
}

// The spec of group `nodes` over `domain` storing `outputs`, its inputs into `inputs`; a column
// kernel where the group folds the dim before the last.
KernelSpec group_spec(const std::vector<Node*>& nodes, const FusionGroup& group, const std::vector<Value>& outputs,
                      std::vector<Value>& inputs) {
  KernelSpec spec = spec_of_group(nodes, group.domain, outputs, inputs);
  spec.columns = group.folds >= 0 && group.folds == static_cast<int>(group.domain.size()) - 2;
  return spec;
}

// The step's outputs but `value`.
std::vector<Value> outputs_but(const FusedStep& step, const Value& value) {
  std::vector<Value> kept;
  for (const Value& v : step.outputs)
    if (v != value) kept.push_back(v);
  return kept;
}

// The kernels of the recomputing way of `site`, appended to `specs`.
void add_recompute_specs(RecomputeSite& site, const std::vector<FusionGroup>& groups, const std::vector<FusedStep>& steps,
                         const std::unordered_map<const Node*, int>& position, std::vector<KernelSpec>& specs) {
  const std::vector<Value> kept = outputs_but(steps[site.producer], site.value);
  if (!kept.empty()) {
    site.producer_spec = static_cast<int>(specs.size());
    specs.push_back(group_spec(groups[site.producer].nodes, groups[site.producer], kept, site.producer_inputs));
  }
  site.reader_inputs.resize(site.readers.size());
  for (size_t k = 0; k < site.readers.size(); ++k) {
    const int r = site.readers[k];
    std::vector<Node*> nodes = groups[r].nodes;
    nodes.insert(nodes.end(), site.cone.begin(), site.cone.end());
    in_graph_order(nodes, position);
    site.reader_specs.push_back(static_cast<int>(specs.size()));
    specs.push_back(group_spec(nodes, groups[r], steps[r].outputs, site.reader_inputs[k]));
  }
}

// The producer and readers of `site` as one step holding both ways ([Note: recompute or store]).
FusedStep recompute_choice(const RecomputeSite& site, const std::vector<FusedStep>& steps,
                           const std::vector<cpu::KernelBuild>& builds,
                           const std::unordered_map<const Node*, int>& position) {
  const FusedStep& p = steps[site.producer];
  FusedStep step;
  step.nodes = p.nodes;
  step.inputs = p.inputs;
  step.outputs = outputs_but(p, site.value);
  for (int r : site.readers) {
    step.nodes.insert(step.nodes.end(), steps[r].nodes.begin(), steps[r].nodes.end());
    for (const Value& v : steps[r].inputs)
      if (v != site.value && std::find(step.inputs.begin(), step.inputs.end(), v) == step.inputs.end())
        step.inputs.push_back(v);
    step.outputs.insert(step.outputs.end(), steps[r].outputs.begin(), steps[r].outputs.end());
  }
  in_graph_order(step.nodes, position);
  auto part = [&](int spec, const std::vector<Value>& ins, const std::vector<Value>& outs) {
    return cpu::RecomputeChoice::Part{builds[spec].kernel, places(ins, step.inputs, site.value), places(outs, step.outputs, site.value)};
  };
  cpu::RecomputeChoice::Ways ways;
  ways.store.push_back(part(site.producer, p.inputs, p.outputs));
  if (site.producer_spec >= 0)
    ways.recompute.push_back(part(site.producer_spec, site.producer_inputs, outputs_but(p, site.value)));
  for (size_t k = 0; k < site.readers.size(); ++k) {
    const FusedStep& r = steps[site.readers[k]];
    ways.store.push_back(part(site.readers[k], r.inputs, r.outputs));
    ways.recompute.push_back(part(site.reader_specs[k], site.reader_inputs[k], r.outputs));
  }
  ways.value_dtype = site.value.type().dtype;
  for (const Value& in : site.leaves) ways.value_inputs.push_back(places({in}, step.inputs, site.value)[0]);
  step.kernel = std::make_shared<const cpu::RecomputeChoice>(std::move(ways), false);
  return step;
}

}  // namespace

std::shared_ptr<Executable> build_cpu_executable(std::unique_ptr<Graph> graph, CodegenStats& stats,
                                                 bool strict, bool static_buffers, bool choice_steps) {
  if (config::dump_after("graph"))  // the graph code generation starts from
    config::dump("graph-" + std::to_string(structural_hash(*graph)) + ".ir", print(*graph));
  std::vector<FusedStep> steps;
  std::vector<FusionGroup> groups;
  std::vector<KernelSpec> specs;
  std::unordered_set<const Node*> returned;
  for (const Value& v : graph->outputs()) returned.insert(v.node);
  if (config::get("EMBER_CODEGEN") != "0" && cpu::jit_available()) {
    for (FusionGroup& group : find_fusion_groups(*graph, cpu_can_compute)) {
      FusedStep step;
      step.outputs = group_outputs(group, returned);
      if (step.outputs.empty()) continue;  // dead: nothing reads it (DCE keeps only nodes that must run)
      specs.push_back(group_spec(group.nodes, group, step.outputs, step.inputs));
      step.nodes.assign(group.nodes.begin(), group.nodes.end());
      steps.push_back(std::move(step));
      groups.push_back(std::move(group));
    }
  }
  std::unordered_map<const Node*, int> position;  // each node's place in the graph
  if (choice_steps)
    for (const Node* n : graph->nodes()) position.emplace(n, static_cast<int>(position.size()));
  std::vector<GemmProduct> products(steps.size());
  std::vector<RecomputeSite> sites;
  if (choice_steps) {
    std::vector<bool> taken(steps.size());
    for (size_t i = 0; i < steps.size(); ++i) taken[i] = (products[i] = gemm_product(steps[i], specs[i], returned)).input >= 0;
    sites = recompute_sites(steps, returned, taken, *graph);
    for (RecomputeSite& site : sites) add_recompute_specs(site, groups, steps, position, specs);
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
  for (size_t i = 0; i < specs.size(); ++i) {
    if (!errors[i].empty() && i >= steps.size()) {  // a recomputing way's: its site runs apart
      if (config::log_enabled("fusion")) config::log("fusion", "a recomputing kernel failed: " + errors[i]);
      continue;
    }
    if (!errors[i].empty()) {
      if (strict) EMBER_THROW(Internal, errors[i]);
      stats.failures.push_back(errors[i]);
      config::warn("generating a kernel failed; its ops run on the interpreter: " + errors[i]);
      continue;
    }
    stats.compiled += builds[i].compiled;
    stats.from_disk += builds[i].from_disk;
    stats.compile_ms += builds[i].ms;
  }
  std::vector<FusedStep> fused;
  std::vector<bool> joined(steps.size(), false);
  for (const RecomputeSite& site : sites) {
    std::vector<int> used = site.readers;  // the site's kernels, both ways
    used.insert(used.end(), site.reader_specs.begin(), site.reader_specs.end());
    used.insert(used.end(), {site.producer, site.producer_spec});
    if (std::any_of(used.begin(), used.end(), [&](int spec) { return spec >= 0 && !errors[spec].empty(); }))
      continue;  // its steps run apart, as without the choice
    joined[site.producer] = true;
    for (int r : site.readers) joined[r] = true;
    fused.push_back(recompute_choice(site, steps, builds, position));
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    if (!errors[i].empty() || joined[i]) continue;
    steps[i].kernel = builds[i].kernel;
    fused.push_back(products[i].input >= 0 ? with_gemm(std::move(steps[i]), products[i], position) : std::move(steps[i]));
  }
  stats.kernels = static_cast<int>(fused.size());
  return std::make_shared<Executable>(std::move(graph), std::move(fused), static_buffers);
}

}  // namespace ember::codegen

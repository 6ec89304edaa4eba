// One captured graph to a runnable plan under a mode: the mode's passes, then the CPU plan
// (generated kernels and interpreter steps), with what the report says about it. The C++
// tracer's compiled functions and the PyTorch bridge (which captures graphs through Dynamo)
// both compile graphs through here.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>

#include "codegen/autotune.h"
#include "frontend/report.h"
#include "ir/graph.h"
#include "modes/mode.h"
#include "passes/pipeline.h"
#include "runtime/executable.h"

namespace ember {

// Fills `info` (except id and hash). A pass that fails leaves the graph unoptimised with a
// warning, and `strict` raises instead; so does a kernel that fails to compile.
std::shared_ptr<Executable> compile_graph(const Graph& g, const ModeConfig& mode, const Pipeline& pipeline,
                                          bool strict, GraphInfo& info);

// max-autotune's settings: those given, else EMBER_AUTOTUNE_BUDGET_S and EMBER_AUTOTUNE_SEARCH,
// else 30 s and auto. A bad environment value is a warning and the default.
codegen::AutotuneOptions autotune_options(std::optional<double> budget_s, const std::string& search);

// The first call of a plan that compile_graph built under max-autotune, which nothing else runs
// yet: the call runs once, observed, and the plan is then tuned on what its steps read
// (codegen/autotune.h); `info` says what was chosen. A failure to tune leaves the plan as built,
// with a warning; `strict` raises it instead. Returns the call's outputs, as run() would.
std::vector<Array> run_and_autotune(Executable& exec, std::span<const Array> inputs, const SymbolValues& symbols,
                                    const codegen::AutotuneOptions& options, bool strict, GraphInfo& info,
                                    int64_t* allocations = nullptr, const OutputStorages& output_storages = {});

// A compiled graph as its callers run it: the plan compile_graph built, or under max-autotune one
// tuned plan per power-of-two bucket of the symbols' values ([Note: tuning per size bucket]).
// Thread-safe: calls in a new bucket tune its plan once, while calls in other buckets run.
class GraphPlan {
 public:
  // `exec` as compile_graph built it; `autotune` under max-autotune; `choice_steps` the mode's
  // (ModeConfig), for the plans of other buckets; `static_plan_mb`: the most memory, in MiB, each
  // static plan keeps between calls (Options::static_plan_mb).
  GraphPlan(std::shared_ptr<Executable> exec, std::optional<codegen::AutotuneOptions> autotune, bool strict,
            bool choice_steps = false, std::optional<double> static_plan_mb = std::nullopt);
  std::vector<Array> run(std::span<const Array> inputs, const SymbolValues& symbols, int64_t* allocations = nullptr,
                         const OutputStorages& output_storages = {}) const;
  // The first bucket's plan: every bucket's has the same graph, steps and buffers.
  const Executable& plan() const { return *first_; }
  // Whether `a` views a constant of any bucket's plan.
  bool holds_constant(const Array& a) const;
  // What the plans did since the compile, into `info`: the tuning so far over every bucket (its
  // autotune fields), and the memory their static buffers hold now.
  void describe_live(GraphInfo& info) const;
  static constexpr size_t kTunedBuckets = 8;  // past these, a new bucket runs the first's plan

 private:
  struct Bucket {
    std::once_flag tuned;
    std::shared_ptr<Executable> exec;
    std::string sizes;  // "s0 in 33..64", for the report
    GraphInfo info;     // its tuning
  };
  std::shared_ptr<Bucket> bucket_for(const SymbolValues& symbols) const;
  double tuning_seconds() const;

  std::shared_ptr<Executable> first_;
  std::optional<codegen::AutotuneOptions> autotune_;
  bool strict_;
  bool choice_steps_;
  mutable std::mutex mu_;
  mutable std::map<std::vector<int64_t>, std::shared_ptr<Bucket>> buckets_;  // by bucket_key
  mutable std::vector<std::shared_ptr<Bucket>> bucket_order_;                 // as reached
};

}  // namespace ember

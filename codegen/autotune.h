// max-autotune: for every step of a plan that can run more than one way, measure the ways on the
// call's own inputs and keep the fastest ([Note: max-autotune] in autotune.cpp).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "codegen/search.h"
#include "runtime/executable.h"
#include "runtime/tuning_db.h"

namespace ember::codegen {

struct AutotuneOptions {
  double budget_s = 30;         // for the whole plan, split over its steps by their share of its time
  std::string search = "auto";  // search.h's strategies
};

struct AutotuneResult {
  std::vector<TuningRecord> steps;  // one per step that has a choice, in plan order
  double seconds = 0;               // spent tuning
  int timed = 0;                    // timings: defaults and candidates (0: all from the database or twins)
};

// max-autotune in two halves around a plan's first call, so the call runs once, as it would
// untuned (a torch call inside it with effects, a random draw, runs once too): the call runs
// with observer(), which keeps a copy of what each step with a choice reads (with its strides)
// and how long the step took; then tune() measures and chooses, replacing the steps' kernels or
// settings in place. The plan must not be shared until tune() returns.
class Autotuner {
 public:
  explicit Autotuner(Executable& exec);
  ~Autotuner();
  StepObserver observer();
  AutotuneResult tune(const SymbolValues& symbols, const AutotuneOptions& options);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Both halves: runs the plan once on `inputs`, then tunes it.
AutotuneResult autotune(Executable& exec, std::span<const Array> inputs, const SymbolValues& symbols,
                        const AutotuneOptions& options);

// The choices a step of this plan has: the knobs of a generated kernel, or a float32 GEMM's
// route, and the threads. Empty for a step with none. (For tests and explain.)
Space step_space(const Executable& exec, int step);

}  // namespace ember::codegen

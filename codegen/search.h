// Search strategies over a space of discrete choices, for max-autotune (codegen/autotune.h).
//
// A space is a list of knobs, each with its options; option 0 of every knob is the default (a
// knob may mean something only beside one option of another: Knob::only_with), and
// the point of all defaults is measured by the tuner itself, so no strategy proposes it. A
// strategy proposes points and is told what each measured:
//   exhaustive  every point, in order;
//   random      points drawn without replacement;
//   bayes       a tree-structured Parzen estimator (as hyperopt and Optuna's TPE): after a few
//               random points, the measured ones are split into the fastest quarter and the
//               rest, each knob's options get a smoothed frequency in both, and of 24 points
//               drawn from the fast ones' frequencies the one that most favours them
//               (the product of fast/slow ratios) is measured next;
//   auto        exhaustive when the space is no larger than the evaluations the budget allows,
//               else bayes.
// Every strategy is deterministic for a seed.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/step_settings.h"

namespace ember::codegen {

using Space = std::vector<Knob>;  // runtime/step_settings.h's knobs
using Point = std::vector<int>;  // an option index per knob

// The number of distinct points of the space, the default included (saturates at INT64_MAX): a
// knob that depends on another (Knob::only_with) counts its options only where that one allows
// them. Throws ember::Error(Value) for a dependence on a knob the space lacks, or on a knob that
// depends on another itself.
int64_t space_size(const Space& space);

// `p` with every knob whose condition fails at p (Knob::only_with) at its default: the one point
// that stands for all that run the same way. Strategies propose only such points.
Point canonical(const Space& space, Point p);

class Search {
 public:
  virtual ~Search() = default;
  // The next point to measure, never one proposed before, nor the default; nothing when done.
  virtual std::optional<Point> next() = 0;
  // What `p` measured, in seconds (infinity when it failed or was rejected).
  virtual void tell(const Point& p, double seconds) = 0;
};

// Throws ember::Error(Value) for an unknown strategy name.
std::unique_ptr<Search> make_search(std::string_view strategy, const Space& space, int expected_evaluations,
                                    uint64_t seed);

// The strategies' names, for errors and the options' documentation.
std::vector<std::string> search_names();

}  // namespace ember::codegen

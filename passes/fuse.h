// Fusion: which nodes run together as one generated kernel.
//
// [Note: fusion]
// Fusion is an analysis, not a rewrite: it returns groups of nodes and leaves the graph as it is
// (the one IR stays the one thing passes, printers and hashes see). Code generation lowers each
// group to a KernelSpec and the plan runs it as one step (runtime/executable.h).
//
// A group is a set of elementwise nodes over one iteration domain; their inputs may broadcast
// into it. A row group also holds reductions over the domain's last dim (sum, mean, max, min),
// and elementwise nodes over its rows (the domain with the last dim 1), so that softmax or a
// layer norm is one kernel; a column group likewise, over the dim before the last (a bias
// gradient, summed over the batch). In a row group: per row, a pass over the row for each level of reductions that
// depend on each other, then one that writes the row's outputs. A node the backend can compute joins its producers' groups of
// its domain, merging them (a where over two fused branches is one kernel), as long as the
// group stays convex (no path leaves the group and comes back, or it could not run as one
// step); failing that it joins one of them, or starts a group. Views are not in groups: they
// share storage, and a kernel reads them through their strides. EMBER_LOG=fusion says what joined
// what, and why a candidate did not.
#pragma once

#include <functional>
#include <vector>

#include "ir/graph.h"

namespace ember {

struct FusionGroup {
  std::vector<Node*> nodes;  // in graph order
  Shape domain;              // what the kernel iterates over
  int folds = -1;            // the dim of the domain its reductions fold (last: rows; the one before: columns)
};

// The dim of its input that n reduces, when a row or column group can hold it (the last dim, or
// the one before it, alone), else -1.
int folded_dim(const Node* n);

// `can_compute(n)`: whether the backend can compute node n (elementwise, or a reduction of the
// last dim) inside a kernel.
std::vector<FusionGroup> find_fusion_groups(const Graph& g,
                                            const std::function<bool(const Node*)>& can_compute);

}  // namespace ember

#include "passes/split_reductions.h"

#include <algorithm>

#include "ir/builder.h"
#include "passes/fuse.h"
#include "runtime/config.h"

namespace ember {

namespace {

// A run of neighbouring dims that are all reduced or all kept, as one dim.
struct Run {
  Dim size;
  bool reduced;
};

bool splittable(const Node* n) {
  if (n->op != Op::Sum && n->op != Op::Mean && n->op != Op::Prod && n->op != Op::Max && n->op != Op::Min) return false;
  if (n->num_outputs() != 1 || n->inputs().size() != 1 || folded_dim(n) >= 0) return false;
  const TensorType& x = n->inputs()[0].type();
  if (x.shape.empty()) return false;
  // As the kernels fold them (codegen/cpu/emit_kernel.cpp: can_emit_reduction).
  if (is_floating(x.dtype)) return is_floating(n->type().dtype);
  return !is_floating(n->type().dtype) && n->op != Op::Mean;
}

// What the partial results are held in: sums, means and products in their accumulator (float16
// would round at every step; integers wrap as int64), max and min in the input's dtype.
DType partial_dtype(const Node* n) {
  DType x = n->inputs()[0].type().dtype;
  if (n->op == Op::Max || n->op == Op::Min) return x;
  return op_info(n->op == Op::Prod ? Op::Prod : Op::Sum).reduction->accumulator(x);
}

Shape sizes_of(const std::vector<Run>& runs) {
  Shape s;
  for (const Run& r : runs) s.push_back(r.size);
  return s;
}

// n's value through reductions of the last run, or of the one before it, each followed by a
// reshape that drops the reduced dim (and merges the kept runs it separated).
Value split(Builder& b, const Node* n) {
  const TensorType& x = n->inputs()[0].type();
  int64_t rank = static_cast<int64_t>(x.shape.size());
  std::vector<int64_t> axes = normalize_axes(n->info().name, attr_ints(n->attrs, "axes"), rank);
  std::vector<Run> runs;
  for (int64_t d = 0; d < rank; ++d) {
    bool reduced = axes.empty() || std::find(axes.begin(), axes.end(), d) != axes.end();
    if (!runs.empty() && runs.back().reduced == reduced) runs.back().size = runs.back().size * x.shape[d];
    else runs.push_back({x.shape[d], reduced});
  }
  Value v = b.reshape(b.cast(n->inputs()[0], partial_dtype(n)), sizes_of(runs));
  while (std::any_of(runs.begin(), runs.end(), [](const Run& r) { return r.reduced; })) {
    // Runs alternate: the reduced run is the last one or the one before it.
    int64_t at = runs.back().reduced ? static_cast<int64_t>(runs.size()) - 1 : static_cast<int64_t>(runs.size()) - 2;
    v = b.reduce(n->op, v, {at}, true);
    runs.erase(runs.begin() + at);
    if (at > 0 && at < static_cast<int64_t>(runs.size())) {  // the kept runs on either side now touch
      runs[at - 1].size = runs[at - 1].size * runs[at].size;
      runs.erase(runs.begin() + at);
    }
    v = b.reshape(v, sizes_of(runs));
  }
  return b.as_type(v, n->type());
}

class SplitReductions : public Pass {
 public:
  std::string_view name() const override { return "split-reductions"; }

  bool run(Graph& g) override {
    if (config::get("EMBER_CODEGEN") == "0") return false;
    bool changed = false;
    for (Node* n : g.nodes()) {  // a snapshot: the new reductions are already split
      if (!splittable(n)) continue;
      Builder b(g, n);
      g.replace_uses(n->out(0), split(b, n));
      changed = true;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> make_split_reductions() { return std::make_unique<SplitReductions>(); }

}  // namespace ember

#include "passes/split_reductions.h"

#include <algorithm>
#include <optional>

#include "ir/builder.h"
#include "passes/fuse.h"
#include "runtime/config.h"

namespace ember {

namespace {

using Run = DimRun;

bool splittable(const Node* n) {
  if (!is_plain_fold(n->op) || n->num_outputs() != 1 || n->inputs().size() != 1 || folded_dim(n) >= 0) return false;
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

// An operand that broadcasts against `full` in the runs' shape: per run, its dims (right-aligned)
// must be all full (the run's size) or all 1 (1); none when a run mixes them.
std::optional<Shape> operand_in_runs(const Shape& operand, const Shape& full, const std::vector<Run>& runs) {
  size_t offset = full.size() - operand.size(), d = 0;
  Shape out;
  for (const Run& r : runs) {
    bool all_full = true, all_one = true;
    for (int i = 0; i < r.dims; ++i, ++d) {
      Dim od = d < offset ? Dim(1) : operand[d - offset];
      all_full = all_full && od == full[d];
      all_one = all_one && od == Dim(1);
    }
    if (!all_one && !all_full) return std::nullopt;
    out.push_back(all_one ? Dim(1) : r.size);
  }
  return out;
}

// [Note: reshapes sink into producers] v (of shape `full`) in the runs' shape. A reshape is a
// view of memory: an elementwise producer of v would be a kernel of its own, writing v for the
// reduction to read. So a producer that only the reduction reads is rebuilt over the runs
// instead (a graph output too: computed again rather than read), its operands in the runs' shape
// likewise, and it fuses into the reduction's kernel:
// batch norm's backward sums grad * (x - mean) over (0, 2, 3) in one pass over grad and x.
// `reduction` is the node being split and `parent` the node being rebuilt that reads v: their
// uses of v are going away. Any other user (a graph output aside) keeps v as it is.
Value in_runs(Builder& b, Value v, const Shape& full, const std::vector<Run>& runs, const Node* reduction,
              const Node* parent) {
  const Node* p = v.node;
  bool only_ours = std::all_of(p->uses().begin(), p->uses().end(),
                               [&](const Use& u) { return u.user == reduction || u.user == parent; });
  if (!p->info().is_elementwise() || p->num_outputs() != 1 || !only_ours) return b.reshape(v, sizes_of(runs));
  std::vector<std::optional<Shape>> shapes;
  for (const Value& in : p->inputs()) {
    shapes.push_back(operand_in_runs(in.type().shape, full, runs));
    if (!shapes.back()) return b.reshape(v, sizes_of(runs));
  }
  std::vector<Value> operands;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const Value& in = p->inputs()[i];
    if (in.type().shape == full) operands.push_back(in_runs(b, in, full, runs, reduction, p));
    else if (in.type().shape.empty()) operands.push_back(in);  // a scalar broadcasts as it is
    else operands.push_back(b.reshape(in, *shapes[i]));
  }
  return b.op(p->op, operands, p->attrs);
}

// n's value through reductions of the last run, or of the one before it, each followed by a
// reshape that drops the reduced dim (and merges the kept runs it separated).
Value split(Builder& b, const Node* n) {
  const TensorType& x = n->inputs()[0].type();
  int64_t rank = static_cast<int64_t>(x.shape.size());
  std::vector<int64_t> axes = normalize_axes(n->info().name, attr_ints(n->attrs, "axes"), rank);
  if (axes.empty())
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  std::vector<Run> runs = dim_runs(x.shape, axes);
  Value partial = b.cast(n->inputs()[0], partial_dtype(n));
  Value v = in_runs(b, partial, x.shape, runs, n, partial.node);
  while (std::any_of(runs.begin(), runs.end(), [](const Run& r) { return r.reduced; })) {
    // Runs alternate: the reduced run is the last one or the one before it.
    int64_t at = runs.back().reduced ? static_cast<int64_t>(runs.size()) - 1 : static_cast<int64_t>(runs.size()) - 2;
    v = b.reduce(n->op, v, {at}, true);
    runs.erase(runs.begin() + at);
    if (at > 0 && at < static_cast<int64_t>(runs.size())) {  // the kept runs on either side now touch
      runs[at - 1].size = runs[at - 1].size * runs[at].size;
      runs.erase(runs.begin() + at);
    }
    bool last = std::none_of(runs.begin(), runs.end(), [](const Run& r) { return r.reduced; });
    if (!last) v = b.reshape(v, sizes_of(runs));
  }
  // Converted before the last reshape, so that the conversion is the last kernel's epilogue.
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

// Helpers shared by the decompositions: the compute dtype, reduction axes, the two-pass moments
// and the stable softmax.
#include <algorithm>
#include <limits>

#include "ir/ops/decompositions.h"

namespace ember::ops {

DType compute_dtype(DType t) { return t == DType::Float64 ? t : DType::Float32; }

std::vector<TensorType> output_types(Op op, const Values& in, const Attrs& attrs) {
  std::vector<TensorType> types;
  for (const Value& v : in) types.push_back(v.type());
  Attrs filled = attrs;
  return infer_types(op, types, filled);
}

std::vector<int64_t> reduced_axes(std::string_view op, const TensorType& x,
                                  const std::vector<int64_t>& axes) {
  int64_t rank = static_cast<int64_t>(x.shape.size());
  if (rank == 0) return {};  // a 0-d tensor takes axis 0 or -1 and reduces nothing
  std::vector<int64_t> out = normalize_axes(op, axes, rank);
  if (out.empty())
    for (int64_t i = 0; i < rank; ++i) out.push_back(i);
  return out;
}

bool empty_along(const TensorType& x, const std::vector<int64_t>& axes) {
  return std::any_of(axes.begin(), axes.end(), [&](int64_t a) { return x.shape[a] == Dim(0); });
}

// The last element of x along each of `axes`, which stay as size 1 (a slice from -1 has length 1
// for a symbolic dim too).
Value last_along(Builder& b, Value x, const std::vector<int64_t>& axes) {
  for (int64_t axis : axes) x = b.op(Op::Slice, {x}, {{"axis", axis}, {"start", int64_t{-1}}});
  return x;
}

namespace {

// x's dims as runs (dim_runs): the shape the moments are taken in, so that each reduction is
// over one dim of it.
struct Runs {
  Shape sizes;
  std::vector<int64_t> reduced;  // indices into sizes, ascending
};

Runs runs_of(const TensorType& x, const std::vector<int64_t>& axes) {
  Runs r;
  for (const DimRun& run : dim_runs(x.shape, axes)) {
    if (run.reduced) r.reduced.push_back(static_cast<int64_t>(r.sizes.size()));
    r.sizes.push_back(run.size);
  }
  return r;
}

// The mean as shift + the shifted values' mean, whose sum rounds at the data's spread, not at
// its offset (var_mean's rows of 8 at an offset of 1e7 were 1.25 off, eager's 0.5); where that
// is not finite (an infinity or NaN among the data: inf - inf), the plain mean, as eager's.
Value shifted_back(Builder& b, Value shift, Value shifted_mean, Value plain) {
  DType c = shift.type().dtype;
  Value precise = b.add(shift, shifted_mean);
  Value finite = b.op(Op::Lt, {b.unary(Op::Abs, precise), b.scalar(std::numeric_limits<double>::infinity(), c)});
  return b.op(Op::Where, {finite, precise, plain});
}

// Shift and two passes over one run of reduced dims ([Note: shifted two-pass]).
Moments moments_over_run(Builder& b, Value x, DType c, const std::vector<int64_t>& axes, bool want_mean) {
  Moments m;
  Value xc = b.cast(x, c);
  m.count = b.count(xc, axes, c);
  if (empty_along(xc.type(), axes)) {  // no element to shift by, nor a deviation
    if (want_mean) m.mean = b.div(b.reduce(Op::Sum, xc, axes, true), m.count);
    m.centered = xc;
    m.sum_squares = b.reduce(Op::Sum, b.mul(xc, xc), axes, true);
    return m;
  }
  Value shift = b.cast(last_along(b, x, axes), c);
  Value shifted = b.sub(xc, shift);
  Value shifted_mean = b.div(b.reduce(Op::Sum, shifted, axes, true), m.count);
  if (want_mean) m.mean = shifted_back(b, shift, shifted_mean, b.div(b.reduce(Op::Sum, xc, axes, true), m.count));
  m.centered = b.sub(shifted, shifted_mean);
  m.sum_squares = b.reduce(Op::Sum, b.mul(m.centered, m.centered), axes, true);
  return m;
}

// [Note: grouped moments] Over reduced dims that are not one run (batch norm's (0, 2, 3) of
// [N, C, H, W]), the two passes would each read x from memory: the deviations' pass needs the
// mean over every group. Instead the moments are taken per group of the last run, whose two
// passes read one row (H * W values) while it is in cache, and the groups' moments combine as
// Chan, Golub and LeVeque's parallel variance does: with k groups of n values,
//   mean = sum_i(mean_i) / k,   M2 = sum_i(M2_i) + n * sum_i((mean_i - mean)^2),
// which is exact in exact arithmetic and no less accurate than two passes in floating point.
// The shift is one element of the whole set, so that a constant set still centres to zeros.
Moments grouped_moments(Builder& b, Value x, DType c, const std::vector<int64_t>& axes, const Runs& runs,
                        bool want_mean) {
  Value shift = b.cast(last_along(b, x, axes), c);
  Shape kept = shift.type().shape;  // x's shape with the reduced dims as 1
  Shape kept_runs = runs.sizes;
  for (int64_t r : runs.reduced) kept_runs[r] = Dim(1);
  // In the runs' shape: x's reshape is a view, the shift's is of a small tensor. The cast comes
  // after the view, so that it joins the kernels that read it (before, it was a copy of x).
  Value x_runs = b.cast(b.reshape(x, runs.sizes), c);
  Value xc = b.cast(x, c);
  Value shifted = b.sub(x_runs, b.reshape(shift, kept_runs));
  std::vector<int64_t> inner{runs.reduced.back()};
  std::vector<int64_t> outer(runs.reduced.begin(), runs.reduced.end() - 1);
  Value n = b.count(x_runs, inner, c);
  Value row_mean = b.div(b.reduce(Op::Sum, shifted, inner, true), n);
  Value deviation = b.sub(shifted, row_mean);
  Value row_m2 = b.reduce(Op::Sum, b.mul(deviation, deviation), inner, true);
  // The groups' moments without the inner run's dim: batch norm's are [N, C], which the
  // combining reductions fold down as columns, in one kernel.
  Shape groups_shape = runs.sizes;
  groups_shape.erase(groups_shape.begin() + inner[0]);
  Value group_mean = b.reshape(row_mean, groups_shape);
  Value group_m2 = b.reshape(row_m2, groups_shape);
  Value groups = b.count(group_mean, outer, c);
  Value mean = b.div(b.reduce(Op::Sum, group_mean, outer, true), groups);
  Value spread = b.sub(group_mean, mean);
  Value between = b.mul(n, b.reduce(Op::Sum, b.mul(spread, spread), outer, true));
  Value m2 = b.add(b.reduce(Op::Sum, group_m2, outer, true), between);
  Moments m;
  m.count = b.count(xc, axes, c);
  if (want_mean) {  // summed in the same shape as the rest, so in the same kernels
    Value row_sum = b.reshape(b.reduce(Op::Sum, x_runs, inner, true), groups_shape);
    Value sum = b.reshape(b.reduce(Op::Sum, row_sum, outer, true), kept);
    m.mean = shifted_back(b, shift, b.reshape(mean, kept), b.div(sum, m.count));
  }
  m.sum_squares = b.reshape(m2, kept);
  Value shifted_x = b.sub(xc, shift);
  m.centered = b.sub(shifted_x, b.reshape(mean, kept));
  return m;
}

// A single reduced run too long for its two passes to stay in cache, split into groups of
// about `target` values: a row of 2^24 into rows of 16384, a column of 16384 into columns of 512
// (32 lanes of 512 rows: 64 KiB). The groups also give a lone row threads to run on.
bool split_long_run(Runs& runs) {
  int64_t at = runs.reduced[0];
  bool row = at + 1 == static_cast<int64_t>(runs.sizes.size());
  int64_t target = row ? 16384 : 512;
  if (!runs.sizes[at].is_static()) return false;
  int64_t length = runs.sizes[at].value();
  if (length < 4 * target) return false;
  for (int64_t group = target; group >= target / 8; --group) {
    if (length % group != 0) continue;
    runs.sizes[at] = Dim(length / group);
    runs.sizes.insert(runs.sizes.begin() + at + 1, Dim(group));
    runs.reduced = {at, at + 1};
    return true;
  }
  return false;
}

}  // namespace

Moments moments(Builder& b, Value x, DType c, const std::vector<int64_t>& axes, bool want_mean) {
  if (axes.empty() || empty_along(x.type(), axes)) return moments_over_run(b, x, c, axes, want_mean);
  Runs runs = runs_of(x.type(), axes);
  if (runs.reduced.size() < 2 && !split_long_run(runs)) return moments_over_run(b, x, c, axes, want_mean);
  return grouped_moments(b, x, c, axes, runs, want_mean);
}

Value softmax_along(Builder& b, Value xc, int64_t axis, bool log) {
  const TensorType& t = xc.type();
  int64_t rank = static_cast<int64_t>(t.shape.size());
  std::vector<int64_t> axes;  // none for a 0-d tensor: its max is itself
  if (rank > 0) axes = {normalize_axis("softmax", axis, rank)};
  if (empty_along(t, axes)) return xc;
  // A row of -inf gives -inf - -inf = NaN everywhere, as the direct kernel does.
  Value shifted = b.sub(xc, b.reduce(Op::Max, xc, axes, true));
  Value e = b.unary(Op::Exp, shifted);
  Value s = b.reduce(Op::Sum, e, axes, true);
  return log ? b.sub(shifted, b.unary(Op::Log, s)) : b.div(e, s);
}

}  // namespace ember::ops

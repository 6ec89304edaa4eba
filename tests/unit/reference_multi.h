// The op sweep's float64 reference for the ops with several outputs: max_dim/min_dim, sort, topk,
// split and the native norms. Each returns its outputs in the op's order.
#pragma once

#include <vector>

#include "tests/unit/reference.h"

namespace ember::ref {

// (values, indices) of the largest (or smallest) along a normalised axis: first on ties, first
// NaN wins. A 0-d x is its own extreme.
std::vector<Ref> extreme_along(const Ref& x, int64_t axis, bool keepdim, bool largest);

// (values, indices) sorted along a normalised axis; NaN above every number; ties in input order.
std::vector<Ref> sort(const Ref& x, int64_t axis, bool descending);

// (values, indices): the first k of sort(x, descending = largest), in index order if !sorted.
std::vector<Ref> topk(const Ref& x, int64_t k, int64_t axis, bool largest, bool sorted);

std::vector<Ref> split(const Ref& x, const Ints& sizes, int64_t axis);

// (out, mean, rstd) over the last ndim dims; mean and rstd keep those dims as size 1.
std::vector<Ref> native_layer_norm(const Ref& x, int64_t ndim, const Ref& w, const Ref& b,
                                   double eps);

// (out, mean, invstd, new running_mean, new running_var) per channel of x [N, C, ...].
std::vector<Ref> native_batch_norm(const Ref& x, const Ref& w, const Ref& b,
                                   const Ref& running_mean, const Ref& running_var,
                                   double momentum, double eps);

}  // namespace ember::ref

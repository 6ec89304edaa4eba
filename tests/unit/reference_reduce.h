// The op sweep's float64 reference for reductions: sum, mean, prod, max/min, argmax/min, var, ...
#pragma once

#include <vector>

#include "tests/unit/reference.h"

namespace ember::ref {

// For each output element (row-major over the kept dims), the flat input indices it reduces, in
// row-major order of the reduced dims. `axes` are normalised (empty: all).
std::vector<Ints> reduce_groups(const Ints& shape, const Ints& axes);

enum class Reduce { Sum, Mean, Prod, Max, Min, ArgMax, ArgMin, Var, Std, LogSumExp };

// Reduces `x` over the normalised `axes` (empty: all); `integer` selects wrapping int64
// arithmetic for sum and prod; `correction` is var's and std's.
Ref reduce(Reduce op, const Ref& x, const Ints& axes, bool keepdim, bool integer,
           double correction);

}  // namespace ember::ref

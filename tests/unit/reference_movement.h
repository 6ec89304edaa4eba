// The op sweep's float64 reference for movement: permute, slice, concat, stack, pad, indexing.
#pragma once

#include <vector>

#include "tests/unit/reference.h"

namespace ember::ref {

Ref permute(const Ref& x, const Ints& dims);

// Python slice semantics with a positive step.
Ref slice(const Ref& x, int64_t axis, int64_t start, int64_t end, int64_t step);

Ref concat(const std::vector<Ref>& xs, int64_t axis);
Ref stack(const std::vector<Ref>& xs, int64_t axis);

// Constant padding; pads are (before, after) pairs from the last dim; negative pads crop.
Ref pad(const Ref& x, const Ints& pads, double value);

Ref index_select(const Ref& x, int64_t axis, const Ref& index);
Ref gather(const Ref& x, int64_t axis, const Ref& index);
Ref embedding(const Ref& w, const Ref& index);
Ref index_put(const Ref& x, int64_t axis, const Ref& index, const Ref& src, bool accumulate);
Ref scatter(const Ref& x, int64_t axis, const Ref& index, const Ref& src, bool accumulate);
Ref cumsum(const Ref& x, int64_t axis);

}  // namespace ember::ref

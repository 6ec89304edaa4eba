// The op sweep's float64 reference for composites: softmax, layer/rms/batch norm, attention.
#pragma once

#include "tests/unit/reference.h"

namespace ember::ref {

// softmax (log = false) or log_softmax along a normalised axis.
Ref softmax(const Ref& x, int64_t axis, bool log);

// layer_norm (rms = false) or rms_norm over the last `ndim` dims.
Ref norm(const Ref& x, int64_t ndim, const Ref& w, const Ref* b, double eps, bool rms);

Ref batch_norm(const Ref& x, const Ref& mean, const Ref& var, const Ref& w, const Ref& b,
               double eps);

// softmax(q k^T * scale + mask) v over broadcast batch dims; a bool mask keeps where true, a float
// mask is added; causal masks j > i. A row with nothing kept gives NaN.
Ref attention(const Ref& q, const Ref& k, const Ref& v, const Ref* mask, bool bool_mask,
              bool causal, double scale);

}  // namespace ember::ref

// The op sweep's float64 reference for contractions and pools: matmul, linear, conv2d, pools.
#pragma once

#include "tests/unit/reference.h"

namespace ember::ref {

// torch.matmul: 1-D operands become a row (a) or a column (b) and that dim is dropped again.
Ref matmul(const Ref& a, const Ref& b);

Ref linear(const Ref& x, const Ref& w, const Ref* bias);

struct Window {
  int64_t stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
};

Ref conv2d(const Ref& x, const Ref& w, const Ref* bias, Window win, int64_t groups);

// The gradients of conv2d(x, w) given grad_y: {with respect to x, with respect to w}.
std::pair<Ref, Ref> conv2d_grads(const Ref& x, const Ref& w, const Ref& grad_y, Window win, int64_t groups);

struct Pool {
  int64_t kh, kw;
  Window win;
  bool ceil_mode = false, count_include_pad = true;
};

// max_pool2d / avg_pool2d over the last two dims. `empty_window` is set when some window holds no
// input element (the test then draws other parameters).
Ref pool2d(const Ref& x, bool is_max, const Pool& p, bool* empty_window);

Ref adaptive_avg_pool2d(const Ref& x, int64_t OH, int64_t OW);

}  // namespace ember::ref

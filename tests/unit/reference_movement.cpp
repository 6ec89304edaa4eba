// The op sweep's float64 reference for movement ops, by index arithmetic on row-major buffers.
#include "tests/unit/reference_movement.h"

#include <algorithm>

namespace ember::ref {

Ref permute(const Ref& x, const Ints& dims) {
  Ints shape;
  for (int64_t d : dims) shape.push_back(x.shape[d]);
  Ref out{shape, std::vector<double>(numel(shape))};
  for (int64_t i = 0; i < numel(shape); ++i) {
    Ints oi = unravel(i, shape), xi(x.shape.size());
    for (size_t d = 0; d < dims.size(); ++d) xi[dims[d]] = oi[d];
    out.v[i] = x.v[ravel(xi, x.shape)];
  }
  return out;
}

// Python slice semantics with a positive step.
Ref slice(const Ref& x, int64_t axis, int64_t start, int64_t end, int64_t step) {
  int64_t n = x.shape[axis];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, 0, n);
  Ints shape = x.shape;
  shape[axis] = end <= start ? 0 : (end - start + step - 1) / step;
  Ref out{shape, std::vector<double>(numel(shape))};
  for (int64_t i = 0; i < numel(shape); ++i) {
    Ints idx = unravel(i, shape);
    idx[axis] = start + idx[axis] * step;
    out.v[i] = x.v[ravel(idx, x.shape)];
  }
  return out;
}

Ref concat(const std::vector<Ref>& xs, int64_t axis) {
  Ints shape = xs[0].shape;
  shape[axis] = 0;
  for (const Ref& x : xs) shape[axis] += x.shape[axis];
  Ref out{shape, std::vector<double>(numel(shape))};
  for (int64_t i = 0; i < numel(shape); ++i) {
    Ints idx = unravel(i, shape);
    size_t k = 0;
    while (idx[axis] >= xs[k].shape[axis]) idx[axis] -= xs[k++].shape[axis];
    out.v[i] = xs[k].v[ravel(idx, xs[k].shape)];
  }
  return out;
}

Ref stack(const std::vector<Ref>& xs, int64_t axis) {
  Ints shape = xs[0].shape;
  shape.insert(shape.begin() + axis, static_cast<int64_t>(xs.size()));
  Ref out{shape, std::vector<double>(numel(shape))};
  for (int64_t i = 0; i < numel(shape); ++i) {
    Ints idx = unravel(i, shape);
    int64_t k = idx[axis];
    idx.erase(idx.begin() + axis);
    out.v[i] = xs[k].v[ravel(idx, xs[k].shape)];
  }
  return out;
}

// Constant padding; pads are (before, after) pairs from the last dim; negative pads crop.
Ref pad(const Ref& x, const Ints& pads, double value) {
  Ints shape = x.shape, before(x.shape.size(), 0);
  for (size_t p = 0; p < pads.size() / 2; ++p) {
    size_t d = x.shape.size() - 1 - p;
    shape[d] += pads[2 * p] + pads[2 * p + 1];
    before[d] = pads[2 * p];
  }
  Ref out{shape, std::vector<double>(numel(shape), value)};
  for (int64_t i = 0; i < numel(shape); ++i) {
    Ints idx = unravel(i, shape);
    bool inside = true;
    for (size_t d = 0; d < idx.size(); ++d) {
      idx[d] -= before[d];
      inside = inside && idx[d] >= 0 && idx[d] < x.shape[d];
    }
    if (inside) out.v[i] = x.v[ravel(idx, x.shape)];
  }
  return out;
}

Ref index_select(const Ref& x, int64_t axis, const Ref& index) {
  if (x.shape.empty()) return x;
  Ints shape = x.shape;
  shape[axis] = numel(index.shape);
  Ref out{shape, std::vector<double>(numel(shape))};
  for (int64_t i = 0; i < numel(shape); ++i) {
    Ints idx = unravel(i, shape);
    idx[axis] = static_cast<int64_t>(index.v[idx[axis]]);
    out.v[i] = x.v[ravel(idx, x.shape)];
  }
  return out;
}

Ref gather(const Ref& x, int64_t axis, const Ref& index) {
  Ref out{index.shape, std::vector<double>(index.v.size())};
  for (int64_t i = 0; i < numel(index.shape); ++i) {
    Ints idx = unravel(i, index.shape);
    if (!idx.empty()) idx[axis] = static_cast<int64_t>(index.v[i]);
    out.v[i] = x.v[ravel(idx, x.shape)];
  }
  return out;
}

Ref embedding(const Ref& w, const Ref& index) {
  int64_t dim = w.shape[1];
  Ref out{index.shape, {}};
  out.shape.push_back(dim);
  for (double r : index.v)
    for (int64_t j = 0; j < dim; ++j) out.v.push_back(w.v[static_cast<int64_t>(r) * dim + j]);
  return out;
}

// Sums in double: the sweep's values are small integers, exact in every dtype it tries.
Ref index_put(const Ref& x, int64_t axis, const Ref& index, const Ref& src, bool accumulate) {
  Ref out = x;
  for (int64_t i = 0; i < numel(src.shape); ++i) {
    Ints idx = unravel(i, src.shape);
    idx[axis] = static_cast<int64_t>(index.v[idx[axis]]);
    double& o = out.v[ravel(idx, x.shape)];
    o = accumulate ? o + src.v[i] : src.v[i];
  }
  return out;
}

Ref scatter(const Ref& x, int64_t axis, const Ref& index, const Ref& src, bool accumulate) {
  Ref out = x;
  for (int64_t i = 0; i < numel(index.shape); ++i) {
    Ints idx = unravel(i, index.shape);
    double v = src.v[ravel(idx, src.shape)];
    if (!idx.empty()) idx[axis] = static_cast<int64_t>(index.v[i]);
    double& o = out.v[ravel(idx, x.shape)];
    o = accumulate ? o + v : v;
  }
  return out;
}

Ref cumsum(const Ref& x, int64_t axis) {
  Ref out = x;
  for (int64_t i = 0; i < numel(x.shape); ++i) {
    Ints at = unravel(i, x.shape);
    if (at.empty() || at[axis] == 0) continue;
    --at[axis];
    out.v[i] += out.v[ravel(at, x.shape)];  // the previous running sum, computed already
  }
  return out;
}

}  // namespace ember::ref

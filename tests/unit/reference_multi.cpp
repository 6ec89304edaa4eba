// The op sweep's float64 reference for multi-output ops. Sorting is done by counting (an
// element's position is how many elements come before it), unlike the interpreter's sort.
#include "tests/unit/reference_multi.h"

#include <cmath>

#include "tests/unit/reference_movement.h"
#include "tests/unit/reference_reduce.h"

namespace ember::ref {
namespace {

// The shape of x with `axis` set to `len` (a 0-d x stays 0-d).
Ints with_dim(const Ints& shape, int64_t axis, int64_t len) {
  Ints s = shape;
  if (!s.empty()) s[axis] = len;
  return s;
}

// NaN ranks above every number; two NaNs are equal.
int compare(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) - std::isnan(b);
  return a < b ? -1 : a > b ? 1 : 0;
}

// The row-major positions of each line along `axis`, in order along it.
std::vector<Ints> lines(const Ints& shape, int64_t axis) {
  return reduce_groups(shape, shape.empty() ? Ints{} : Ints{axis});
}

}  // namespace

std::vector<Ref> extreme_along(const Ref& x, int64_t axis, bool keepdim, bool largest) {
  Ints shape = x.shape;
  if (!shape.empty()) {
    if (keepdim) shape[axis] = 1;
    else shape.erase(shape.begin() + axis);
  }
  Ref values{shape, {}}, indices{shape, {}};
  for (const Ints& line : lines(x.shape, axis)) {
    size_t best = 0;
    for (size_t j = 0; j < line.size(); ++j) {
      double v = x.v[line[j]], b = x.v[line[best]];
      if (std::isnan(v)) { best = j; break; }
      if (largest ? v > b : v < b) best = j;
    }
    values.v.push_back(x.v[line[best]]);
    indices.v.push_back(static_cast<double>(best));
  }
  return {values, indices};
}

std::vector<Ref> sort(const Ref& x, int64_t axis, bool descending) {
  Ref values{x.shape, std::vector<double>(x.v.size())}, indices = values;
  for (const Ints& line : lines(x.shape, axis)) {
    for (size_t i = 0; i < line.size(); ++i) {
      size_t position = 0;
      for (size_t j = 0; j < line.size(); ++j) {
        int c = compare(x.v[line[j]], x.v[line[i]]) * (descending ? -1 : 1);
        if (c < 0 || (c == 0 && j < i)) ++position;
      }
      values.v[line[position]] = x.v[line[i]];
      indices.v[line[position]] = static_cast<double>(i);
    }
  }
  return {values, indices};
}

std::vector<Ref> topk(const Ref& x, int64_t k, int64_t axis, bool largest, bool sorted) {
  std::vector<Ref> all = sort(x, axis, largest);
  Ints shape = with_dim(x.shape, axis, k);
  Ref values{shape, std::vector<double>(numel(shape))}, indices = values;
  std::vector<Ints> in = lines(x.shape, axis), out = lines(shape, axis);
  for (size_t r = 0; r < out.size(); ++r) {
    std::vector<std::pair<double, double>> chosen;  // (index, value)
    for (int64_t j = 0; j < k; ++j) chosen.push_back({all[1].v[in[r][j]], all[0].v[in[r][j]]});
    if (!sorted)  // by index: a selection sort, k is small
      for (size_t a = 0; a < chosen.size(); ++a)
        for (size_t b = a + 1; b < chosen.size(); ++b)
          if (chosen[b].first < chosen[a].first) std::swap(chosen[a], chosen[b]);
    for (int64_t j = 0; j < k; ++j) {
      indices.v[out[r][j]] = chosen[j].first;
      values.v[out[r][j]] = chosen[j].second;
    }
  }
  return {values, indices};
}

std::vector<Ref> split(const Ref& x, const Ints& sizes, int64_t axis) {
  std::vector<Ref> parts;
  int64_t start = 0;
  for (int64_t s : sizes) {
    parts.push_back(slice(x, axis, start, start + s, 1));
    start += s;
  }
  return parts;
}

std::vector<Ref> native_layer_norm(const Ref& x, int64_t ndim, const Ref& w, const Ref& b,
                                   double eps) {
  Ints stat_shape = x.shape;
  int64_t size = 1;
  for (size_t d = x.shape.size() - ndim; d < x.shape.size(); ++d) {
    size *= x.shape[d];
    stat_shape[d] = 1;
  }
  Ref out{x.shape, std::vector<double>(x.v.size())}, mean{stat_shape, {}}, rstd{stat_shape, {}};
  for (int64_t r = 0; r < numel(stat_shape); ++r) {
    long double m = 0, ss = 0;
    for (int64_t j = 0; j < size; ++j) m += x.v[r * size + j];
    m /= size;  // 0 / 0 is NaN: the statistics of nothing
    for (int64_t j = 0; j < size; ++j) ss += (x.v[r * size + j] - m) * (x.v[r * size + j] - m);
    long double inv = 1.0L / std::sqrt(ss / size + eps);
    for (int64_t j = 0; j < size; ++j)
      out.v[r * size + j] = static_cast<double>((x.v[r * size + j] - m) * inv * w.v[j] + b.v[j]);
    mean.v.push_back(static_cast<double>(m));
    rstd.v.push_back(static_cast<double>(inv));
  }
  return {out, mean, rstd};
}

std::vector<Ref> native_batch_norm(const Ref& x, const Ref& w, const Ref& b,
                                   const Ref& running_mean, const Ref& running_var,
                                   double momentum, double eps) {
  int64_t C = x.shape[1];
  Ref out{x.shape, std::vector<double>(x.v.size())};
  Ref mean{{C}, {}}, invstd{{C}, {}}, rm{{C}, {}}, rv{{C}, {}};
  for (int64_t c = 0; c < C; ++c) {
    Ints members;  // the flat positions of channel c
    for (int64_t i = 0; i < numel(x.shape); ++i)
      if (unravel(i, x.shape)[1] == c) members.push_back(i);
    long double n = static_cast<long double>(members.size()), m = 0, ss = 0;
    for (int64_t i : members) m += x.v[i];
    m /= n;
    for (int64_t i : members) ss += (x.v[i] - m) * (x.v[i] - m);
    long double inv = 1.0L / std::sqrt(ss / n + eps);
    for (int64_t i : members) out.v[i] = static_cast<double>((x.v[i] - m) * inv * w.v[c] + b.v[c]);
    mean.v.push_back(static_cast<double>(m));
    invstd.v.push_back(static_cast<double>(inv));
    rm.v.push_back(static_cast<double>((1 - momentum) * running_mean.v[c] + momentum * m));
    long double unbiased = ss / (n - 1);
    rv.v.push_back(static_cast<double>((1 - momentum) * running_var.v[c] + momentum * unbiased));
  }
  return {out, mean, invstd, rm, rv};
}

}  // namespace ember::ref

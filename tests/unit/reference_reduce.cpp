// The op sweep's float64 reference for reductions, in long double where it sums.
#include "tests/unit/reference_reduce.h"

#include <algorithm>
#include <cmath>

namespace ember::ref {
namespace {

Ints reduce_shape(const Ints& shape, const Ints& axes, bool keepdim) {
  Ints out;
  for (size_t d = 0; d < shape.size(); ++d) {
    bool r =
        axes.empty() || std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) != axes.end();
    if (!r)
      out.push_back(shape[d]);
    else if (keepdim)
      out.push_back(1);
  }
  return out;
}

// One reduction over `vals`; `integer` selects wrapping int64 arithmetic for sum and prod.
double reduce_values(Reduce op, const std::vector<double>& vals, bool integer, double correction) {
  size_t n = vals.size();
  switch (op) {
    case Reduce::Sum:
    case Reduce::Mean: {
      if (integer && op == Reduce::Sum) {
        uint64_t s = 0;
        for (double x : vals) s += static_cast<uint64_t>(static_cast<int64_t>(x));
        return static_cast<double>(static_cast<int64_t>(s));
      }
      long double s = 0;
      for (double x : vals) s += x;
      return op == Reduce::Sum ? static_cast<double>(s)
                               : static_cast<double>(s / static_cast<long double>(n));
    }
    case Reduce::Prod: {
      if (integer) {
        uint64_t p = 1;
        for (double x : vals) p *= static_cast<uint64_t>(static_cast<int64_t>(x));
        return static_cast<double>(static_cast<int64_t>(p));
      }
      long double p = 1;
      for (double x : vals) p *= x;
      return static_cast<double>(p);
    }
    case Reduce::Max:
    case Reduce::Min: {
      double best = vals.at(0);
      for (double x : vals) {
        if (std::isnan(x)) return x;
        if (op == Reduce::Max ? x > best : x < best) best = x;
      }
      return best;
    }
    case Reduce::ArgMax:
    case Reduce::ArgMin: {
      size_t best = 0;
      for (size_t i = 0; i < n; ++i) {
        if (std::isnan(vals[i])) return static_cast<double>(i);
        if (op == Reduce::ArgMax ? vals[i] > vals[best] : vals[i] < vals[best]) best = i;
      }
      return static_cast<double>(best);
    }
    case Reduce::Var:
    case Reduce::Std: {
      long double mean = 0, ss = 0;
      for (double x : vals) mean += x;
      mean /= static_cast<long double>(n);
      for (double x : vals) ss += (x - mean) * (x - mean);
      double denom = std::max(0.0, static_cast<double>(n) - correction);
      double var = static_cast<double>(ss) / denom;
      return op == Reduce::Var ? var : std::sqrt(var);
    }
    case Reduce::LogSumExp: {
      if (n == 0) return -kInf;
      double m = -kInf;
      for (double x : vals) {
        if (std::isnan(x)) return x;
        m = std::max(m, x);
      }
      if (std::isinf(m)) return m;
      long double s = 0;
      for (double x : vals) s += std::exp(static_cast<long double>(x) - m);
      return static_cast<double>(m + std::log(s));
    }
  }
  return kNaN;
}

}  // namespace

std::vector<Ints> reduce_groups(const Ints& shape, const Ints& axes) {
  std::vector<bool> reduced(shape.size(), axes.empty());
  for (int64_t a : axes)
    if (a < static_cast<int64_t>(shape.size())) reduced[a] = true;
  Ints kept;
  for (size_t d = 0; d < shape.size(); ++d)
    if (!reduced[d]) kept.push_back(shape[d]);
  std::vector<Ints> groups(numel(kept));
  for (int64_t i = 0; i < numel(shape); ++i) {
    Ints idx = unravel(i, shape), k;
    for (size_t d = 0; d < shape.size(); ++d)
      if (!reduced[d]) k.push_back(idx[d]);
    groups[ravel(k, kept)].push_back(i);
  }
  return groups;
}

Ref reduce(Reduce op, const Ref& x, const Ints& axes, bool keepdim, bool integer,
           double correction) {
  Ref out{reduce_shape(x.shape, axes, keepdim), {}};
  for (const Ints& g : reduce_groups(x.shape, axes)) {
    std::vector<double> vals;
    for (int64_t i : g) vals.push_back(x.v[i]);
    out.v.push_back(reduce_values(op, vals, integer, correction));
  }
  return out;
}

}  // namespace ember::ref

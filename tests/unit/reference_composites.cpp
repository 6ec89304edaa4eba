// The op sweep's float64 reference for composites, computed in long double from their formulas.
#include "tests/unit/reference_composites.h"

#include <algorithm>
#include <cmath>

#include "tests/unit/reference_reduce.h"

namespace ember::ref {

Ref softmax(const Ref& x, int64_t axis, bool log) {
  Ref out{x.shape, std::vector<double>(x.v.size())};
  if (x.shape.empty()) {
    out.v[0] = std::isnan(x.v[0]) ? kNaN : log ? 0.0 : 1.0;
    return out;
  }
  for (const Ints& g : reduce_groups(x.shape, {axis})) {
    double m = -kInf;
    for (int64_t i : g) m = std::max(m, x.v[i]);
    long double s = 0;
    for (int64_t i : g) s += std::exp(static_cast<long double>(x.v[i]) - m);
    for (int64_t i : g) {
      long double e = static_cast<long double>(x.v[i]) - m;
      out.v[i] = static_cast<double>(log ? e - std::log(s) : std::exp(e) / s);
    }
  }
  return out;
}

// layer_norm (rms = false) or rms_norm over the last `ndim` dims.
Ref norm(const Ref& x, int64_t ndim, const Ref& w, const Ref* b, double eps, bool rms) {
  int64_t size = 1;
  for (size_t d = x.shape.size() - ndim; d < x.shape.size(); ++d) size *= x.shape[d];
  int64_t rows = size == 0 ? 0 : numel(x.shape) / size;
  Ref out{x.shape, std::vector<double>(x.v.size())};
  for (int64_t r = 0; r < rows; ++r) {
    long double mean = 0, ss = 0;
    if (!rms) {
      for (int64_t j = 0; j < size; ++j) mean += x.v[r * size + j];
      mean /= size;
    }
    for (int64_t j = 0; j < size; ++j)
      ss += (x.v[r * size + j] - mean) * (x.v[r * size + j] - mean);
    long double inv = 1.0L / std::sqrt(ss / size + eps);
    for (int64_t j = 0; j < size; ++j)
      out.v[r * size + j] =
          static_cast<double>((x.v[r * size + j] - mean) * inv * w.v[j] + (b ? b->v[j] : 0.0));
  }
  return out;
}

Ref batch_norm(const Ref& x, const Ref& mean, const Ref& var, const Ref& w, const Ref& b,
               double eps) {
  int64_t C = x.shape[1], inner = 1;
  for (size_t d = 2; d < x.shape.size(); ++d) inner *= x.shape[d];
  Ref out{x.shape, std::vector<double>(x.v.size())};
  for (int64_t i = 0; i < numel(x.shape); ++i) {
    int64_t c = (i / inner) % C;
    out.v[i] = static_cast<double>(
        (x.v[i] - mean.v[c]) / std::sqrt(static_cast<long double>(var.v[c]) + eps) * w.v[c] +
        b.v[c]);
  }
  return out;
}

// softmax(q k^T * scale + mask) v over broadcast batch dims; a bool mask keeps where true, a float
// mask is added; causal masks j > i. A row with nothing kept gives NaN.
Ref attention(const Ref& q, const Ref& k, const Ref& v, const Ref* mask, bool bool_mask,
              bool causal, double scale) {
  size_t r = q.shape.size();
  int64_t L = q.shape[r - 2], E = q.shape[r - 1], S = k.shape[r - 2], Ev = v.shape[r - 1];
  Ints bq(q.shape.begin(), q.shape.end() - 2), bk(k.shape.begin(), k.shape.end() - 2),
      bv(v.shape.begin(), v.shape.end() - 2);
  Ints batch = *broadcast(*broadcast(bq, bk), bv);
  Ints out_shape = batch;
  out_shape.push_back(L);
  out_shape.push_back(Ev);
  Ref out{out_shape, {}};
  for (int64_t bi = 0; bi < numel(batch); ++bi) {
    Ints idx = unravel(bi, batch);
    auto at = [&](const Ref& t, int64_t i, int64_t j) {
      Ints full = idx;
      full.push_back(i);
      full.push_back(j);
      return at_broadcast(t, full);
    };
    for (int64_t i = 0; i < L; ++i) {
      std::vector<long double> s(S);
      long double m = -kInf;
      for (int64_t j = 0; j < S; ++j) {
        long double dot = 0;
        for (int64_t e = 0; e < E; ++e) dot += static_cast<long double>(at(q, i, e)) * at(k, j, e);
        dot *= scale;
        if (mask) {
          double mv = at(*mask, i, j);
          if (bool_mask)
            dot = mv != 0 ? dot : -kInf;
          else
            dot += mv;
        }
        if (causal && j > i) dot = -kInf;
        s[j] = dot;
        m = std::max(m, dot);
      }
      long double total = 0;
      for (int64_t j = 0; j < S; ++j) total += std::exp(s[j] - m);
      for (int64_t c = 0; c < Ev; ++c) {
        long double acc = 0;
        for (int64_t j = 0; j < S; ++j) acc += std::exp(s[j] - m) / total * at(v, j, c);
        out.v.push_back(std::isinf(m) && m < 0 && S > 0 ? kNaN : static_cast<double>(acc));
      }
    }
  }
  return out;
}

}  // namespace ember::ref

// An independent float64 reference for the op sweep (tests/unit/test_op_sweep.cpp): naive loops
// over row-major double buffers, written from PyTorch's documented semantics and the IR rules in
// ir/graph.h. Nothing here calls ember's registry scalar functions, kernels or dtype conversions,
// so a bug there cannot hide in the expected values. Header-only because tests/CMakeLists.txt
// builds tests/unit/test_*.cpp only.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "ir/dtype.h"  // the DType enum only

namespace ember::ref {

using Ints = std::vector<int64_t>;
inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A logical tensor: row-major values (already exact in their dtype) and a shape.
struct Ref {
  Ints shape;
  std::vector<double> v;
};

// ---- shapes

inline int64_t numel(const Ints& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

inline Ints unravel(int64_t i, const Ints& shape) {
  Ints idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = i % shape[d];
    i /= shape[d];
  }
  return idx;
}

inline int64_t ravel(const Ints& idx, const Ints& shape) {
  int64_t i = 0;
  for (size_t d = 0; d < shape.size(); ++d) i = i * shape[d] + idx[d];
  return i;
}

inline std::string shape_text(const Ints& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// numpy broadcasting; nullopt when the shapes do not broadcast.
inline std::optional<Ints> broadcast(const Ints& a, const Ints& b) {
  size_t r = std::max(a.size(), b.size());
  Ints out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// The element of `x` that lands at output index `idx` when x is broadcast to a larger shape.
inline double at_broadcast(const Ref& x, const Ints& idx) {
  size_t lead = idx.size() - x.shape.size();
  int64_t i = 0;
  for (size_t d = 0; d < x.shape.size(); ++d)
    i = i * x.shape[d] + (x.shape[d] == 1 ? 0 : idx[lead + d]);
  return x.v[i];
}

inline Ref broadcast_to(const Ref& x, const Ints& shape) {
  Ref out{shape, std::vector<double>(numel(shape))};
  for (int64_t i = 0; i < numel(shape); ++i) out.v[i] = at_broadcast(x, unravel(i, shape));
  return out;
}

inline int64_t norm_axis(int64_t axis, int64_t rank) {
  int64_t r = std::max<int64_t>(rank, 1);
  return axis < 0 ? axis + r : axis;
}

// ---- dtypes (PyTorch's rules)

inline bool is_float(DType t) {
  return t == DType::Float16 || t == DType::BFloat16 || t == DType::Float32 || t == DType::Float64;
}
inline bool is_int(DType t) {
  return !is_float(t) && t != DType::Bool;
}
inline int category(DType t) {
  return t == DType::Bool ? 0 : is_int(t) ? 1 : 2;
}
inline int bits(DType t) {
  switch (t) {
    case DType::Bool:
    case DType::Int8:
    case DType::UInt8:
      return 8;
    case DType::Int16:
    case DType::Float16:
    case DType::BFloat16:
      return 16;
    case DType::Int32:
    case DType::Float32:
      return 32;
    default:
      return 64;
  }
}
inline double int_min(DType t) {
  return t == DType::UInt8 ? 0 : -std::ldexp(1.0, bits(t) - 1);
}
inline double int_max(DType t) {
  return t == DType::UInt8 ? 255 : std::ldexp(1.0, bits(t) - 1) - 1;
}

// torch.promote_types.
inline DType promote(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::Bool) return b;
  if (b == DType::Bool) return a;
  if (is_float(a) && is_float(b)) {
    bool half_pair = (a == DType::Float16 && b == DType::BFloat16) ||
                     (a == DType::BFloat16 && b == DType::Float16);
    if (half_pair) return DType::Float32;
    return bits(a) >= bits(b) ? a : b;
  }
  if (is_float(a)) return a;
  if (is_float(b)) return b;
  if (a == DType::UInt8 || b == DType::UInt8) {
    DType other = a == DType::UInt8 ? b : a;
    return other == DType::Int8 ? DType::Int16 : other;
  }
  return bits(a) >= bits(b) ? a : b;
}

// torch.result_type over tensors: dimensioned tensors win over 0-d ones of the same or a lower
// category; a 0-d tensor of a higher category promotes.
struct Operand {
  DType dtype;
  bool zero_dim;
};
inline DType result_type(const std::vector<Operand>& ops) {
  std::optional<DType> dimmed, zero;
  for (const Operand& o : ops) {
    auto& slot = o.zero_dim ? zero : dimmed;
    slot = slot ? promote(*slot, o.dtype) : o.dtype;
  }
  if (!dimmed) return *zero;
  if (!zero || category(*zero) <= category(*dimmed)) return *dimmed;
  return promote(*dimmed, *zero);
}

// Rounds to nearest even with `p` significant bits, ulps no smaller than 2^min_ulp_exp, and
// overflow to infinity above `max_finite`.
inline double round_bits(double v, int p, int min_ulp_exp, double max_finite) {
  if (!std::isfinite(v) || v == 0) return v;
  int e;
  std::frexp(v, &e);
  int ulp_exp = std::max(e - p, min_ulp_exp);
  double r = std::ldexp(std::nearbyint(std::ldexp(v, -ulp_exp)), ulp_exp);
  return std::fabs(r) > max_finite ? std::copysign(kInf, v) : r;
}

inline double round_float(double v, DType t) {
  switch (t) {
    case DType::Float16:
      return round_bits(v, 11, -24, 65504.0);
    case DType::BFloat16:
      return round_bits(v, 8, -133, 3.3895313892515355e38);
    case DType::Float32:
      return round_bits(v, 24, -149, 3.4028234663852886e38);
    default:
      return v;
  }
}

// Half the spacing of dtype `t` around v (0 for float64 and non-floats).
inline double half_ulp(double v, DType t) {
  if (!std::isfinite(v)) return 0;
  int p = 0, min_exp = 0;
  switch (t) {
    case DType::Float16:
      p = 11;
      min_exp = -24;
      break;
    case DType::BFloat16:
      p = 8;
      min_exp = -133;
      break;
    case DType::Float32:
      p = 24;
      min_exp = -149;
      break;
    default:
      return 0;
  }
  int e = 0;
  if (v != 0) std::frexp(v, &e);
  return std::ldexp(1.0, std::max(e - p, min_exp) - 1);
}

// Two's complement wrap of an integer to the width of `t`.
inline int64_t wrap(int64_t x, DType t) {
  int b = bits(t);
  if (b == 64) return x;
  uint64_t mask = (uint64_t{1} << b) - 1, u = static_cast<uint64_t>(x) & mask;
  if (t != DType::UInt8 && ((u >> (b - 1)) & 1)) u |= ~mask;
  return static_cast<int64_t>(u);
}

// Converts a value to dtype `t` by the IR's cast rules (ir/graph.h): to bool is x != 0; float to
// integer truncates toward zero, saturates at the int64 range, then wraps to the width; NaN -> 0.
inline double cast_value(double v, DType t) {
  if (t == DType::Bool) return v != 0 ? 1 : 0;
  if (is_float(t)) return round_float(v, t);
  if (std::isnan(v)) return 0;
  double tr = std::trunc(v);
  int64_t wide = tr <= -0x1p63  ? std::numeric_limits<int64_t>::min()
                 : tr >= 0x1p63 ? std::numeric_limits<int64_t>::max()
                                : static_cast<int64_t>(tr);
  return static_cast<double>(wrap(wide, t));
}

// ---- element bytes (own encoders; values must already be exact in the dtype)

inline uint16_t f16_bits(double v) {
  uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  double a = std::fabs(v);
  if (std::isnan(v)) return 0x7e00;
  if (std::isinf(v)) return sign | 0x7c00;
  if (a == 0) return sign;
  int e;
  std::frexp(a, &e);
  int exponent = e - 1;  // a = 1.f * 2^exponent
  if (exponent >= -14) {
    auto mant = static_cast<uint16_t>(std::ldexp(a, -exponent) * 1024.0 - 1024.0);
    return sign | static_cast<uint16_t>((exponent + 15) << 10) | mant;
  }
  return sign | static_cast<uint16_t>(std::ldexp(a, 24));  // subnormal: multiples of 2^-24
}

inline double f16_value(uint16_t h) {
  int exponent = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double s = (h & 0x8000) ? -1.0 : 1.0;
  if (exponent == 0x1f) return mant ? kNaN : s * kInf;
  if (exponent == 0) return s * std::ldexp(mant, -24);
  return s * std::ldexp(1024.0 + mant, exponent - 25);
}

inline uint16_t bf16_bits(double v) {
  if (std::isnan(v)) return 0x7fc0;
  float f = static_cast<float>(v);
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>(u >> 16);
}

inline double bf16_value(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline void encode(void* p, DType t, double v) {
  switch (t) {
    case DType::Bool:
      *static_cast<uint8_t*>(p) = v != 0;
      return;
    case DType::Int8:
      *static_cast<int8_t*>(p) = static_cast<int8_t>(v);
      return;
    case DType::Int16:
      *static_cast<int16_t*>(p) = static_cast<int16_t>(v);
      return;
    case DType::Int32:
      *static_cast<int32_t*>(p) = static_cast<int32_t>(v);
      return;
    case DType::Int64:
      *static_cast<int64_t*>(p) = static_cast<int64_t>(v);
      return;
    case DType::UInt8:
      *static_cast<uint8_t*>(p) = static_cast<uint8_t>(v);
      return;
    case DType::Float16:
      *static_cast<uint16_t*>(p) = f16_bits(v);
      return;
    case DType::BFloat16:
      *static_cast<uint16_t*>(p) = bf16_bits(v);
      return;
    case DType::Float32:
      *static_cast<float*>(p) = static_cast<float>(v);
      return;
    case DType::Float64:
      *static_cast<double*>(p) = v;
      return;
  }
}

inline double decode(const void* p, DType t) {
  switch (t) {
    case DType::Bool:
      return *static_cast<const uint8_t*>(p) ? 1 : 0;
    case DType::Int8:
      return *static_cast<const int8_t*>(p);
    case DType::Int16:
      return *static_cast<const int16_t*>(p);
    case DType::Int32:
      return *static_cast<const int32_t*>(p);
    case DType::Int64:
      return static_cast<double>(*static_cast<const int64_t*>(p));
    case DType::UInt8:
      return *static_cast<const uint8_t*>(p);
    case DType::Float16:
      return f16_value(*static_cast<const uint16_t*>(p));
    case DType::BFloat16:
      return bf16_value(*static_cast<const uint16_t*>(p));
    case DType::Float32:
      return *static_cast<const float*>(p);
    case DType::Float64:
      return *static_cast<const double*>(p);
  }
  return 0;
}

// ---- reductions

// For each output element (row-major over the kept dims), the flat input indices it reduces, in
// row-major order of the reduced dims. `axes` are normalised (empty: all).
inline std::vector<Ints> reduce_groups(const Ints& shape, const Ints& axes) {
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

inline Ints reduce_shape(const Ints& shape, const Ints& axes, bool keepdim) {
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

enum class Reduce { Sum, Mean, Prod, Max, Min, ArgMax, ArgMin, Var, Std, LogSumExp };

// One reduction over `vals`; `integer` selects wrapping int64 arithmetic for sum and prod.
inline double reduce_values(Reduce op, const std::vector<double>& vals, bool integer,
                            double correction) {
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

inline Ref reduce(Reduce op, const Ref& x, const Ints& axes, bool keepdim, bool integer,
                  double correction) {
  Ref out{reduce_shape(x.shape, axes, keepdim), {}};
  for (const Ints& g : reduce_groups(x.shape, axes)) {
    std::vector<double> vals;
    for (int64_t i : g) vals.push_back(x.v[i]);
    out.v.push_back(reduce_values(op, vals, integer, correction));
  }
  return out;
}

// ---- contractions

// torch.matmul: 1-D operands become a row (a) or a column (b) and that dim is dropped again.
inline Ref matmul(const Ref& a, const Ref& b) {
  Ints sa = a.shape, sb = b.shape;
  bool va = sa.size() == 1, vb = sb.size() == 1;
  if (va) sa.insert(sa.begin(), 1);
  if (vb) sb.push_back(1);
  int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
  Ints ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  Ints batch = *broadcast(ba, bb);
  Ref A{sa, a.v}, B{sb, b.v};
  Ints out_shape = batch;
  if (!va) out_shape.push_back(m);
  if (!vb) out_shape.push_back(n);
  Ref out{out_shape, {}};
  for (int64_t bi = 0; bi < numel(batch); ++bi) {
    Ints idx = unravel(bi, batch);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        long double s = 0;
        for (int64_t p = 0; p < k; ++p) {
          Ints ia = idx, ib = idx;
          ia.push_back(i);
          ia.push_back(p);
          ib.push_back(p);
          ib.push_back(j);
          s += static_cast<long double>(at_broadcast(A, ia)) * at_broadcast(B, ib);
        }
        out.v.push_back(static_cast<double>(s));
      }
  }
  return out;
}

inline Ref linear(const Ref& x, const Ref& w, const Ref* bias) {
  int64_t in = w.shape[1], out_f = w.shape[0], rows = numel(x.shape) / std::max<int64_t>(in, 1);
  if (in == 0) rows = numel(Ints(x.shape.begin(), x.shape.end() - 1));
  Ref out{x.shape, {}};
  out.shape.back() = out_f;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out_f; ++o) {
      long double s = bias ? bias->v[o] : 0.0;
      for (int64_t i = 0; i < in; ++i)
        s += static_cast<long double>(x.v[r * in + i]) * w.v[o * in + i];
      out.v.push_back(static_cast<double>(s));
    }
  return out;
}

struct Window {
  int64_t stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
};

inline int64_t conv_out(int64_t size, int64_t k, int64_t s, int64_t p, int64_t d) {
  return (size + 2 * p - d * (k - 1) - 1) / s + 1;
}

inline Ref conv2d(const Ref& x, const Ref& w, const Ref* bias, Window win, int64_t groups) {
  int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  int64_t O = w.shape[0], Cg = w.shape[1], KH = w.shape[2], KW = w.shape[3];
  int64_t OH = conv_out(H, KH, win.stride_h, win.pad_h, win.dil_h);
  int64_t OW = conv_out(W, KW, win.stride_w, win.pad_w, win.dil_w);
  int64_t Og = O / groups;
  Ref out{{N, O, OH, OW}, {}};
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          long double s = bias ? bias->v[o] : 0.0;
          int64_t g = o / Og;
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                int64_t ih = oh * win.stride_h - win.pad_h + kh * win.dil_h;
                int64_t iw = ow * win.stride_w - win.pad_w + kw * win.dil_w;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                s += static_cast<long double>(x.v[((n * C + g * Cg + c) * H + ih) * W + iw]) *
                     w.v[((o * Cg + c) * KH + kh) * KW + kw];
              }
          out.v.push_back(static_cast<double>(s));
        }
  (void)C;
  return out;
}

// PyTorch's pooling output size, with the ceil_mode rule that the last window starts inside the
// input or its left padding.
inline int64_t pool_out(int64_t size, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  int64_t span = size + 2 * p - d * (k - 1) - 1;
  int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  if (ceil_mode && (out - 1) * s >= size + p) --out;
  return out;
}

struct Pool {
  int64_t kh, kw;
  Window win;
  bool ceil_mode = false, count_include_pad = true;
};

// max_pool2d / avg_pool2d over the last two dims. `empty_window` is set when some window holds no
// input element (the test then draws other parameters).
inline Ref pool2d(const Ref& x, bool is_max, const Pool& p, bool* empty_window) {
  size_t r = x.shape.size();
  int64_t H = x.shape[r - 2], W = x.shape[r - 1],
          planes = numel(x.shape) / std::max<int64_t>(H * W, 1);
  int64_t OH = pool_out(H, p.kh, p.win.stride_h, p.win.pad_h, p.win.dil_h, p.ceil_mode);
  int64_t OW = pool_out(W, p.kw, p.win.stride_w, p.win.pad_w, p.win.dil_w, p.ceil_mode);
  Ref out{x.shape, {}};
  out.shape[r - 2] = OH;
  out.shape[r - 1] = OW;
  planes = numel(out.shape) / std::max<int64_t>(OH * OW, 1);
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        int64_t h0 = oh * p.win.stride_h - p.win.pad_h, w0 = ow * p.win.stride_w - p.win.pad_w;
        if (is_max) {
          double m = -kInf;
          bool any = false;
          for (int64_t i = 0; i < p.kh; ++i)
            for (int64_t j = 0; j < p.kw; ++j) {
              int64_t ih = h0 + i * p.win.dil_h, iw = w0 + j * p.win.dil_w;
              if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
              any = true;
              m = std::max(m, x.v[(pl * H + ih) * W + iw]);
            }
          if (!any && empty_window) *empty_window = true;
          out.v.push_back(m);
          continue;
        }
        int64_t h1 = std::min(h0 + p.kh, H + p.win.pad_h),
                w1 = std::min(w0 + p.kw, W + p.win.pad_w);
        int64_t pool_size = (h1 - h0) * (w1 - w0);
        h0 = std::max<int64_t>(h0, 0);
        w0 = std::max<int64_t>(w0, 0);
        h1 = std::min(h1, H);
        w1 = std::min(w1, W);
        if (h0 >= h1 || w0 >= w1) {
          if (empty_window) *empty_window = true;
          out.v.push_back(0);
          continue;
        }
        long double s = 0;
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) s += x.v[(pl * H + ih) * W + iw];
        int64_t divisor = p.count_include_pad ? pool_size : (h1 - h0) * (w1 - w0);
        out.v.push_back(static_cast<double>(s / divisor));
      }
  return out;
}

inline Ref adaptive_avg_pool2d(const Ref& x, int64_t OH, int64_t OW) {
  size_t r = x.shape.size();
  int64_t H = x.shape[r - 2], W = x.shape[r - 1];
  Ref out{x.shape, {}};
  out.shape[r - 2] = OH;
  out.shape[r - 1] = OW;
  int64_t planes = numel(out.shape) / (OH * OW);
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        int64_t h0 = oh * H / OH, h1 = ((oh + 1) * H + OH - 1) / OH;
        int64_t w0 = ow * W / OW, w1 = ((ow + 1) * W + OW - 1) / OW;
        long double s = 0;
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) s += x.v[(pl * H + ih) * W + iw];
        out.v.push_back(static_cast<double>(s / ((h1 - h0) * (w1 - w0))));
      }
  return out;
}

// ---- movement

inline Ref permute(const Ref& x, const Ints& dims) {
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
inline Ref slice(const Ref& x, int64_t axis, int64_t start, int64_t end, int64_t step) {
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

inline Ref concat(const std::vector<Ref>& xs, int64_t axis) {
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

inline Ref stack(const std::vector<Ref>& xs, int64_t axis) {
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
inline Ref pad(const Ref& x, const Ints& pads, double value) {
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

inline Ref index_select(const Ref& x, int64_t axis, const Ref& index) {
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

inline Ref gather(const Ref& x, int64_t axis, const Ref& index) {
  Ref out{index.shape, std::vector<double>(index.v.size())};
  for (int64_t i = 0; i < numel(index.shape); ++i) {
    Ints idx = unravel(i, index.shape);
    if (!idx.empty()) idx[axis] = static_cast<int64_t>(index.v[i]);
    out.v[i] = x.v[ravel(idx, x.shape)];
  }
  return out;
}

inline Ref embedding(const Ref& w, const Ref& index) {
  int64_t dim = w.shape[1];
  Ref out{index.shape, {}};
  out.shape.push_back(dim);
  for (double r : index.v)
    for (int64_t j = 0; j < dim; ++j) out.v.push_back(w.v[static_cast<int64_t>(r) * dim + j]);
  return out;
}

// ---- composites

inline Ref softmax(const Ref& x, int64_t axis, bool log) {
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
inline Ref norm(const Ref& x, int64_t ndim, const Ref& w, const Ref* b, double eps, bool rms) {
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

inline Ref batch_norm(const Ref& x, const Ref& mean, const Ref& var, const Ref& w, const Ref& b,
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
inline Ref attention(const Ref& q, const Ref& k, const Ref& v, const Ref* mask, bool bool_mask,
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

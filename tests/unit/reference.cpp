// The op sweep's float64 reference: shapes, broadcasting and PyTorch's dtype rules.
#include "tests/unit/reference.h"

#include <algorithm>
#include <cmath>

namespace ember::ref {
namespace {

int category(DType t) {
  return t == DType::Bool ? 0 : is_int(t) ? 1 : 2;
}
int bits(DType t) {
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

// Rounds to nearest even with `p` significant bits, ulps no smaller than 2^min_ulp_exp, and
// overflow to infinity above `max_finite`.
double round_bits(double v, int p, int min_ulp_exp, double max_finite) {
  if (!std::isfinite(v) || v == 0) return v;
  int e;
  std::frexp(v, &e);
  int ulp_exp = std::max(e - p, min_ulp_exp);
  double r = std::ldexp(std::nearbyint(std::ldexp(v, -ulp_exp)), ulp_exp);
  return std::fabs(r) > max_finite ? std::copysign(kInf, v) : r;
}

// Two's complement wrap of an integer to the width of `t`.
int64_t wrap(int64_t x, DType t) {
  int b = bits(t);
  if (b == 64) return x;
  uint64_t mask = (uint64_t{1} << b) - 1, u = static_cast<uint64_t>(x) & mask;
  if (t != DType::UInt8 && ((u >> (b - 1)) & 1)) u |= ~mask;
  return static_cast<int64_t>(u);
}

}  // namespace

int64_t numel(const Ints& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Ints unravel(int64_t i, const Ints& shape) {
  Ints idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = i % shape[d];
    i /= shape[d];
  }
  return idx;
}

int64_t ravel(const Ints& idx, const Ints& shape) {
  int64_t i = 0;
  for (size_t d = 0; d < shape.size(); ++d) i = i * shape[d] + idx[d];
  return i;
}

std::string shape_text(const Ints& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// numpy broadcasting; nullopt when the shapes do not broadcast.
std::optional<Ints> broadcast(const Ints& a, const Ints& b) {
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
double at_broadcast(const Ref& x, const Ints& idx) {
  size_t lead = idx.size() - x.shape.size();
  int64_t i = 0;
  for (size_t d = 0; d < x.shape.size(); ++d)
    i = i * x.shape[d] + (x.shape[d] == 1 ? 0 : idx[lead + d]);
  return x.v[i];
}

Ref broadcast_to(const Ref& x, const Ints& shape) {
  Ref out{shape, std::vector<double>(numel(shape))};
  for (int64_t i = 0; i < numel(shape); ++i) out.v[i] = at_broadcast(x, unravel(i, shape));
  return out;
}

int64_t norm_axis(int64_t axis, int64_t rank) {
  int64_t r = std::max<int64_t>(rank, 1);
  return axis < 0 ? axis + r : axis;
}

bool is_float(DType t) {
  return t == DType::Float16 || t == DType::BFloat16 || t == DType::Float32 || t == DType::Float64;
}
bool is_int(DType t) {
  return !is_float(t) && t != DType::Bool;
}
double int_min(DType t) {
  return t == DType::UInt8 ? 0 : -std::ldexp(1.0, bits(t) - 1);
}
double int_max(DType t) {
  return t == DType::UInt8 ? 255 : std::ldexp(1.0, bits(t) - 1) - 1;
}

// torch.promote_types.
DType promote(DType a, DType b) {
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

DType result_type(const std::vector<Operand>& ops) {
  std::optional<DType> dimmed, zero;
  for (const Operand& o : ops) {
    auto& slot = o.zero_dim ? zero : dimmed;
    slot = slot ? promote(*slot, o.dtype) : o.dtype;
  }
  if (!dimmed) return *zero;
  if (!zero || category(*zero) <= category(*dimmed)) return *dimmed;
  return promote(*dimmed, *zero);
}

double round_float(double v, DType t) {
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
double half_ulp(double v, DType t) {
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

// Converts a value to dtype `t` by the IR's cast rules (ir/graph.h): to bool is x != 0; float to
// integer truncates toward zero, saturates at the int64 range, then wraps to the width; NaN -> 0.
double cast_value(double v, DType t) {
  if (t == DType::Bool) return v != 0 ? 1 : 0;
  if (is_float(t)) return round_float(v, t);
  if (std::isnan(v)) return 0;
  double tr = std::trunc(v);
  int64_t wide = tr <= -0x1p63  ? std::numeric_limits<int64_t>::min()
                 : tr >= 0x1p63 ? std::numeric_limits<int64_t>::max()
                                : static_cast<int64_t>(tr);
  return static_cast<double>(wrap(wide, t));
}

}  // namespace ember::ref

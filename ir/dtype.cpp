#include "ir/dtype.h"

#include <cmath>
#include <cstring>

namespace ember {

size_t itemsize(DType t) {
  switch (t) {
    case DType::Bool: case DType::Int8: case DType::UInt8: return 1;
    case DType::Int16: case DType::Float16: case DType::BFloat16: return 2;
    case DType::Int32: case DType::Float32: return 4;
    case DType::Int64: case DType::Float64: return 8;
  }
  return 0;
}

std::string_view dtype_name(DType t) {
  static constexpr std::string_view names[] = {"bool", "i8",  "i16",  "i32", "i64",
                                               "u8",   "f16", "bf16", "f32", "f64"};
  return names[static_cast<int>(t)];
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (DType t : kAllDTypes)
    if (dtype_name(t) == name) return t;
  // The long names users write.
  static constexpr std::pair<std::string_view, DType> aliases[] = {
      {"int8", DType::Int8},       {"int16", DType::Int16},     {"int32", DType::Int32},
      {"int64", DType::Int64},     {"uint8", DType::UInt8},     {"float16", DType::Float16},
      {"bfloat16", DType::BFloat16}, {"float32", DType::Float32}, {"float64", DType::Float64},
      {"float", DType::Float32},   {"double", DType::Float64},  {"half", DType::Float16}};
  for (auto [alias, t] : aliases)
    if (alias == name) return t;
  return std::nullopt;
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::Bool) return b;
  if (b == DType::Bool) return a;
  if (is_floating(a) && is_floating(b)) {
    if ((a == DType::Float16 && b == DType::BFloat16) || (a == DType::BFloat16 && b == DType::Float16))
      return DType::Float32;
    return a > b ? a : b;  // the enum is ordered f16, bf16 < f32 < f64
  }
  if (is_floating(a)) return a;
  if (is_floating(b)) return b;
  // Both integral.
  if (a == DType::UInt8 || b == DType::UInt8) {
    DType other = a == DType::UInt8 ? b : a;
    return other == DType::Int8 ? DType::Int16 : other;
  }
  return a > b ? a : b;  // i8 < i16 < i32 < i64
}

ComputeType compute_type(DType t) {
  if (t == DType::Float64) return ComputeType::Float64;
  if (is_floating(t)) return ComputeType::Float32;
  return ComputeType::Int64;
}

float half_to_float(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu, bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {  // subnormal: value = mant * 2^-24
    float f = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -f : f;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u)  // inf or nan (keep nan quiet)
    return sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0);
  if (absx >= 0x477ff000u) return sign | 0x7c00u;  // rounds to inf
  if (absx < 0x38800000u) {                        // below the smallest normal half
    // Round abs(f) * 2^24 to nearest even integer: that is the subnormal mantissa.
    float a;
    std::memcpy(&a, &absx, 4);
    float scaled = a * 16777216.0f;
    float r = std::nearbyint(scaled);  // default rounding mode is to nearest even
    return sign | static_cast<uint16_t>(r);
  }
  uint32_t exp = (absx >> 23) - 112, mant = absx & 0x7fffffu;
  uint32_t h = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // carries into the exponent
  return sign | static_cast<uint16_t>(h);
}

}  // namespace ember

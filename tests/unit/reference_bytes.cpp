// The op sweep's float64 reference: element bytes of every dtype, by its own encoders.
#include <cmath>
#include <cstring>

#include "tests/unit/reference.h"

namespace ember::ref {
namespace {

uint16_t f16_bits(double v) {
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

double f16_value(uint16_t h) {
  int exponent = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double s = (h & 0x8000) ? -1.0 : 1.0;
  if (exponent == 0x1f) return mant ? kNaN : s * kInf;
  if (exponent == 0) return s * std::ldexp(mant, -24);
  return s * std::ldexp(1024.0 + mant, exponent - 25);
}

uint16_t bf16_bits(double v) {
  if (std::isnan(v)) return 0x7fc0;
  float f = static_cast<float>(v);
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>(u >> 16);
}

double bf16_value(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

// Values must already be exact in the dtype.
void encode(void* p, DType t, double v) {
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

double decode(const void* p, DType t) {
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

}  // namespace ember::ref

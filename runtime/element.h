// Loading and storing single elements of any dtype as a compute type (int64_t, float, double),
// with the IR's conversion rules (ir/graph.h): float to integer truncates toward zero and
// saturates, NaN gives 0; anything to bool is x != 0; integers wrap at their width.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "ir/dtype.h"

namespace ember::element {

template <class I, class F>
I saturate(F v) {
  if (std::isnan(v)) return 0;
  if (v <= static_cast<F>(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  if (v >= static_cast<F>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(v);
}

template <class T>
inline T load(const void* p, DType t) {
  auto get = [&](auto v) -> T {
    using S = decltype(v);
    if constexpr (std::is_integral_v<T> && std::is_floating_point_v<S>) return saturate<T>(v);
    else return static_cast<T>(v);
  };
  switch (t) {
    case DType::Bool: return get(static_cast<int64_t>(*static_cast<const uint8_t*>(p) != 0));
    case DType::Int8: return get(static_cast<int64_t>(*static_cast<const int8_t*>(p)));
    case DType::Int16: return get(static_cast<int64_t>(*static_cast<const int16_t*>(p)));
    case DType::Int32: return get(static_cast<int64_t>(*static_cast<const int32_t*>(p)));
    case DType::Int64: return get(*static_cast<const int64_t*>(p));
    case DType::UInt8: return get(static_cast<int64_t>(*static_cast<const uint8_t*>(p)));
    case DType::Float16: return get(half_to_float(*static_cast<const uint16_t*>(p)));
    case DType::BFloat16: return get(bf16_to_float(*static_cast<const uint16_t*>(p)));
    case DType::Float32: return get(*static_cast<const float*>(p));
    case DType::Float64: return get(*static_cast<const double*>(p));
  }
  return T{};
}

template <class T>
inline void store(void* p, DType t, T v) {
  auto as_int = [&](auto dummy) {
    using I = decltype(dummy);
    if constexpr (std::is_floating_point_v<T>) {
      // Integers wrap at their width: go through int64 with saturation, then truncate.
      int64_t wide = saturate<int64_t>(v);
      return static_cast<I>(static_cast<uint64_t>(wide));
    } else {
      return static_cast<I>(static_cast<uint64_t>(v));
    }
  };
  switch (t) {
    case DType::Bool: *static_cast<uint8_t*>(p) = v != T(0); return;
    case DType::Int8: *static_cast<int8_t*>(p) = as_int(int8_t{}); return;
    case DType::Int16: *static_cast<int16_t*>(p) = as_int(int16_t{}); return;
    case DType::Int32: *static_cast<int32_t*>(p) = as_int(int32_t{}); return;
    case DType::Int64: *static_cast<int64_t*>(p) = std::is_floating_point_v<T> ? saturate<int64_t>(v) : static_cast<int64_t>(v); return;
    case DType::UInt8: *static_cast<uint8_t*>(p) = as_int(uint8_t{}); return;
    case DType::Float16: *static_cast<uint16_t*>(p) = float_to_half(static_cast<float>(v)); return;
    case DType::BFloat16: *static_cast<uint16_t*>(p) = float_to_bf16(static_cast<float>(v)); return;
    case DType::Float32: *static_cast<float*>(p) = static_cast<float>(v); return;
    case DType::Float64: *static_cast<double*>(p) = static_cast<double>(v); return;
  }
}

// `v` converted to dtype `t` and back: how an operand is first converted to the dtype its op
// computes in (-2 as uint8 is 254; a float32 value used in float16 arithmetic is rounded).
template <class T>
inline T through(T v, DType t) {
  alignas(8) unsigned char buf[8];
  store<T>(buf, t, v);
  return load<T>(buf, t);
}

}  // namespace ember::element

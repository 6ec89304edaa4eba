// Element types and PyTorch's type-promotion rules.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace ember {

enum class DType : uint8_t {
  Bool, Int8, Int16, Int32, Int64, UInt8, Float16, BFloat16, Float32, Float64
};
inline constexpr int kNumDTypes = 10;
inline constexpr DType kAllDTypes[kNumDTypes] = {
    DType::Bool,    DType::Int8,     DType::Int16,   DType::Int32,   DType::Int64,
    DType::UInt8,   DType::Float16,  DType::BFloat16, DType::Float32, DType::Float64};

size_t itemsize(DType t);
// Short name used in the IR text and in messages: "f32", "i64", "bool", "bf16".
std::string_view dtype_name(DType t);
std::optional<DType> parse_dtype(std::string_view name);

inline bool is_floating(DType t) { return t >= DType::Float16; }
inline bool is_integral(DType t) { return t != DType::Bool && t < DType::Float16; }
inline bool is_bool(DType t) { return t == DType::Bool; }

// torch.promote_types: bool < integers < floats; uint8 with int8 gives int16; float16 with
// bfloat16 gives float32; an integer with a float gives the float.
DType promote_types(DType a, DType b);

// The type an op computes in: integers and bool in int64, float16/bfloat16/float32 in float32
// (as PyTorch's CPU kernels do), float64 in float64.
enum class ComputeType { Int64, Float32, Float64 };
ComputeType compute_type(DType t);

// The default float type used where PyTorch uses torch.get_default_dtype().
inline constexpr DType kDefaultFloat = DType::Float32;

// float16 and bfloat16 are stored as their bit patterns; conversions round to nearest even.
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
// The bfloat16 ones are inline: conversion loops call them per element.
inline float bf16_to_float(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline uint16_t float_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // nan, kept quiet
  uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

}  // namespace ember

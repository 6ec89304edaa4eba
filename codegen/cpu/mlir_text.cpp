#include "codegen/cpu/mlir_text.h"

#include <bit>
#include <cstdio>

#include "ir/error.h"

namespace ember::codegen::cpu {

Val MlirText::let(const std::string& rhs, Ty ty) {
  std::string name = fresh();
  line(name + " = " + rhs);
  return {name, ty};
}

Val MlirText::constant(double v, Ty ty) {
  char bits[32];
  if (ty.elem == "f32")
    std::snprintf(bits, sizeof bits, "0x%08X", std::bit_cast<uint32_t>(static_cast<float>(v)));
  else if (ty.elem == "f64")
    std::snprintf(bits, sizeof bits, "0x%016llX", static_cast<unsigned long long>(std::bit_cast<uint64_t>(v)));
  else
    return int_constant(static_cast<int64_t>(v), ty);
  Val scalar = let("arith.constant " + std::string(bits) + " : " + ty.elem, ty.with(ty.elem));
  scalar.ty.width = 0;
  if (!ty.width) return scalar;
  return let("vector.broadcast " + scalar.name + " : " + ty.elem + " to " + ty.str(), ty);
}

Val MlirText::int_constant(int64_t v, Ty ty) {
  Val scalar = let("arith.constant " + std::to_string(v) + " : " + ty.elem, {ty.elem, 0});
  if (!ty.width) return scalar;
  return let("vector.broadcast " + scalar.name + " : " + ty.elem + " to " + ty.str(), ty);
}

Val MlirText::select(const Val& c, const Val& a, const Val& b) {
  std::string types = a.ty.width ? c.ty.str() + ", " + a.ty.str() : a.ty.str();
  return let("arith.select " + c.name + ", " + a.name + ", " + b.name + " : " + types, a.ty);
}

std::string storage_type(DType t) {
  switch (t) {
    case DType::Bool:
    case DType::Int8:
    case DType::UInt8: return "i8";
    case DType::Int16: return "i16";
    case DType::Float16: return "f16";
    case DType::BFloat16: return "i16";  // its bits: converted by hand (see emit_ops.h)
    case DType::Int32: return "i32";
    case DType::Int64: return "i64";
    case DType::Float32: return "f32";
    case DType::Float64: return "f64";
  }
  EMBER_CHECK(false, "unknown dtype");
  return "";
}

std::string register_type(DType t) {
  switch (compute_type(t)) {
    case ComputeType::Float32: return "f32";
    case ComputeType::Float64: return "f64";
    case ComputeType::Int64: return "i64";
  }
  EMBER_CHECK(false, "unknown dtype");
  return "";
}

}  // namespace ember::codegen::cpu

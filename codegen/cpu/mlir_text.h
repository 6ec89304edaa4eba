// Writing MLIR text: SSA names, types that are scalars or vectors of one width, constants.
// The CPU backend writes a kernel as text (no MLIR headers: quick to build, readable, dumpable)
// and the JIT (codegen/cpu/jit.cpp) parses it.
#pragma once

#include <cstdint>
#include <string>

#include "ir/dtype.h"

namespace ember::codegen::cpu {

// A scalar type (width 0) or a vector of `width` of them.
struct Ty {
  std::string elem;  // f32, f64, i1, i8, i16, i32, i64
  int width = 0;
  std::string str() const { return width ? "vector<" + std::to_string(width) + "x" + elem + ">" : elem; }
  Ty with(std::string e) const { return {std::move(e), width}; }
  Ty with_width(int w) const { return {elem, w}; }
  bool is_float() const { return elem[0] == 'f'; }
};

// A value: its SSA name and type.
struct Val {
  std::string name;
  Ty ty;
};

class MlirText {
 public:
  // Emits "%vN = rhs" and returns %vN with type `ty`.
  Val let(const std::string& rhs, Ty ty);
  void line(const std::string& text) { out_ += std::string(indent_, ' ') + text + "\n"; }
  void open(const std::string& text) { line(text); indent_ += 2; }
  void close(const std::string& text = "}") { indent_ -= 2; line(text); }
  // Indents what follows (after a line that let() wrote and that opens a region).
  void indent_more() { indent_ += 2; }
  // Closes a region and opens the next at once: "} else {".
  void middle(const std::string& text) { indent_ -= 2; line(text); indent_ += 2; }
  std::string fresh() { return "%v" + std::to_string(next_++); }
  const std::string& text() const { return out_; }

  // A constant of type `ty` (splat for a vector): a float by its bit pattern, or an integer.
  Val constant(double v, Ty ty);
  Val int_constant(int64_t v, Ty ty);

  // Two-operand and one-operand ops of one type: "arith.addf %a, %b : f32".
  Val binary(const std::string& op, const Val& a, const Val& b) { return let(op + " " + a.name + ", " + b.name + " : " + a.ty.str(), a.ty); }
  Val unary(const std::string& op, const Val& a) { return let(op + " " + a.name + " : " + a.ty.str(), a.ty); }
  Val cmp(const std::string& op, const std::string& pred, const Val& a, const Val& b) {
    return let(op + " " + pred + ", " + a.name + ", " + b.name + " : " + a.ty.str(), a.ty.with("i1"));
  }
  Val select(const Val& c, const Val& a, const Val& b);
  Val convert(const std::string& op, const Val& a, Ty to) { return let(op + " " + a.name + " : " + a.ty.str() + " to " + to.str(), to); }

 private:
  std::string out_;
  int indent_ = 0;
  int next_ = 0;
};

// The storage type of a dtype's elements (bool is a byte) and the type it computes in.
std::string storage_type(DType t);
std::string register_type(DType t);  // f32 (float16 and bfloat16 too), f64, or i64 (integers, bool)

}  // namespace ember::codegen::cpu

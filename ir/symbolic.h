// Dims and shapes. A dim is an integer polynomial over symbols: a plain integer (static), a
// symbol such as s0 (dynamic), or sums and products of them (s0*s1, 2*s0 + 1). Shape inference
// works on these; only exact division is supported, anything else raises SymbolicShapeError and
// the tracer falls back to static shapes.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace ember {

// Values of the symbols of one trace, indexed by symbol id.
using SymbolValues = std::vector<int64_t>;

class Dim {
 public:
  Dim(int64_t value = 0);  // NOLINT: a static dim converts implicitly
  static Dim symbol(int id);

  bool is_static() const;
  int64_t value() const;  // the integer of a static dim (checked)
  // The single symbol id if this dim is exactly one symbol, else -1.
  int as_symbol() const;
  std::vector<int> symbols() const;
  int64_t evaluate(const SymbolValues& values) const;

  Dim operator+(const Dim& o) const;
  Dim operator-(const Dim& o) const;
  Dim operator*(const Dim& o) const;
  // Exact division; throws SymbolicShapeError when the quotient is not a polynomial.
  Dim exact_div(const Dim& o) const;
  // Floor division, for strided windows; symbolic only when the divisor is 1.
  Dim floor_div(int64_t d) const;
  bool operator==(const Dim& o) const { return terms_ == o.terms_; }
  bool operator!=(const Dim& o) const { return !(*this == o); }
  bool operator<(const Dim& o) const { return terms_ < o.terms_; }

  std::string str() const;  // "64", "s0", "2*s0*s1 + 3"

 private:
  // monomial (sorted symbol ids, repeated for powers) -> coefficient; no zero coefficients.
  std::map<std::vector<int>, int64_t> terms_;
};

using Shape = std::vector<Dim>;

std::string shape_str(const Shape& s);  // "[2, s0, 3]"
Dim numel(const Shape& s);
bool is_static(const Shape& s);
std::vector<int64_t> static_shape(const Shape& s);  // checked
Shape to_shape(const std::vector<int64_t>& dims);
std::vector<int64_t> evaluate(const Shape& s, const SymbolValues& values);

// Parses "2*s0 + 3" (the output of Dim::str). Throws Error on malformed text.
Dim parse_dim(std::string_view text);

}  // namespace ember

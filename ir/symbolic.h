// Dims and shapes. A dim is an integer polynomial over symbols: a plain integer (static), a
// symbol such as s0 (dynamic), or sums and products of them (s0*s1, 2*s0 + 1). Shape inference
// works on these; only exact division is supported, anything else raises SymbolicShapeError and
// the tracer falls back to static shapes.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
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
  // A lower bound over every value of the symbols >= `symbol_min`, known when the non-constant
  // terms all have positive coefficients (then the value grows with each symbol).
  std::optional<int64_t> lower_bound(int64_t symbol_min) const;
  int64_t evaluate(const SymbolValues& values) const;

  Dim operator+(const Dim& o) const;
  Dim operator-(const Dim& o) const;
  Dim operator*(const Dim& o) const;
  // Exact division; throws SymbolicShapeError when the quotient is not a polynomial.
  Dim exact_div(const Dim& o) const;
  // Floor division, for strided windows; symbolic only when the divisor is 1.
  Dim floor_div(int64_t d) const;
  bool operator==(const Dim& o) const { return value_ == o.value_ && terms_ == o.terms_; }
  bool operator!=(const Dim& o) const { return !(*this == o); }
  bool operator<(const Dim& o) const { return terms_ != o.terms_ ? terms_ < o.terms_ : value_ < o.value_; }

  std::string str() const;  // "64", "s0", "2*s0*s1 + 3"

 private:
  // monomial (sorted symbol ids, repeated for powers) -> coefficient; no zero coefficients.
  using Terms = std::map<std::vector<int>, int64_t>;
  // Every term, the constant included (a static dim's as well).
  Terms terms() const;
  // The dim of these terms, static when only a constant is left.
  static Dim from_terms(Terms terms);

  // A static dim is value_ with no terms (no allocation: most dims are static). A symbolic dim
  // keeps every term, its constant included, in terms_, and value_ is 0.
  int64_t value_ = 0;
  Terms terms_;
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

// ceil(a / b) for a >= 0 and b > 0, without the overflow of (a + b - 1) / b at huge sizes.
inline int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0); }

// The number of elements of a concrete shape; a Value error naming `op` when it does not fit in
// int64 (or a dim is negative), instead of a product that silently wraps.
int64_t checked_numel(std::string_view op, const std::vector<int64_t>& shape);

// [Note: symbolic facts]
// Shape inference over symbolic dims sometimes relies on a fact that the symbols' ranges do not
// imply: a slice start within the dim, a pooling window that fits, two derived dims being equal,
// an output dim that is not negative. It states the fact with assume_nonnegative/assume_equal.
// While the tracer records an op it installs a FactSink that knows the sizes of the current call:
// a fact that holds there becomes a guard of the trace (a call that breaks it recompiles); one
// that does not raises SymbolicShapeError, and the tracer specialises the symbols involved, so
// eager semantics hold at every size. Without a sink (parser, verifier, passes re-inferring a
// traced graph) facts are taken as given: they were guarded when the graph was traced.
struct SymbolicFact {
  Dim expr;            // the fact: expr >= 0, or expr == 0 when `equal`
  bool equal = false;
  std::string why;     // what relies on it, e.g. "[slice] start within the dim"
  bool holds(const SymbolValues& values) const;
  std::string str() const;  // "s0 - 3 >= 0 ([slice] start within the dim)"
  bool operator==(const SymbolicFact& o) const { return equal == o.equal && expr == o.expr; }
};

class FactSink {
 public:
  virtual ~FactSink() = default;
  // Returns whether `fact` holds for the current sizes (and records it as a guard if so).
  virtual bool check(const SymbolicFact& fact) = 0;
};

// Makes `sink` receive this thread's facts while alive.
class ScopedFactSink {
 public:
  explicit ScopedFactSink(FactSink* sink);
  ~ScopedFactSink();
  ScopedFactSink(const ScopedFactSink&) = delete;
  ScopedFactSink& operator=(const ScopedFactSink&) = delete;

 private:
  FactSink* previous_;
};

// Inference relies on expr >= 0. Static facts are checked here; a false fact raises
// SymbolicShapeError naming the symbols of `expr` (or of `involved`, when given).
void assume_nonnegative(const Dim& expr, const std::string& why, const std::vector<int>& involved = {});
// Inference relies on a == b (see above). A symbolic dim that must equal a static one raises
// SymbolicShapeError at once: the tracer makes it static (a known size makes better code).
void assume_equal(const Dim& a, const Dim& b, const std::string& why);
// True when `d` is >= 0 for every value of its symbols (each >= 2): no fact is needed.
bool surely_nonnegative(const Dim& d);

}  // namespace ember

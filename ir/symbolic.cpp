#include "ir/symbolic.h"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "ir/error.h"

namespace ember {

namespace {

// Checked arithmetic: a size past int64 (zeros({1 << 40, 1 << 40}), a pad of 2^62 on each side)
// is a user's error, raised here for every shape rule at once, never a product that wraps.
[[noreturn]] void overflows(int64_t a, const char* op, int64_t b) {
  EMBER_THROW(Value, "[shape] ", a, " ", op, " ", b, " overflows int64: the sizes are too large");
}
int64_t checked_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) overflows(a, "+", b);
  return r;
}
int64_t checked_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) overflows(a, "*", b);
  return r;
}

}  // namespace

Dim::Dim(int64_t value) : value_(value) {}

Dim::Terms Dim::terms() const {
  if (!terms_.empty()) return terms_;
  Terms t;
  if (value_ != 0) t[{}] = value_;
  return t;
}

Dim Dim::from_terms(Terms terms) {
  std::erase_if(terms, [](const auto& term) { return term.second == 0; });
  Dim d;
  if (terms.empty() || (terms.size() == 1 && terms.begin()->first.empty())) {
    d.value_ = terms.empty() ? 0 : terms.begin()->second;
    return d;
  }
  d.terms_ = std::move(terms);
  return d;
}

std::optional<int64_t> Dim::lower_bound(int64_t symbol_min) const {
  int64_t total = 0;
  for (const auto& [mono, coeff] : terms()) {
    if (!mono.empty() && coeff < 0) return std::nullopt;
    int64_t term = coeff;
    bool overflow = false;
    for (size_t i = 0; i < mono.size(); ++i) overflow |= __builtin_mul_overflow(term, symbol_min, &term);
    if (overflow || __builtin_add_overflow(total, term, &total)) return std::nullopt;
  }
  return total;
}

Dim Dim::symbol(int id) {
  Dim d;
  d.terms_[{id}] = 1;
  return d;
}

bool Dim::is_static() const { return terms_.empty(); }

int64_t Dim::value() const {
  EMBER_CHECK(is_static(), "dim ", str(), " is symbolic");
  return value_;
}

int Dim::as_symbol() const {
  if (terms_.size() != 1) return -1;
  const auto& [mono, coeff] = *terms_.begin();
  return (mono.size() == 1 && coeff == 1) ? mono[0] : -1;
}

std::vector<int> Dim::symbols() const {
  std::vector<int> out;
  for (const auto& [mono, coeff] : terms_) out.insert(out.end(), mono.begin(), mono.end());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

int64_t Dim::evaluate(const SymbolValues& values) const {
  if (is_static()) return value_;
  int64_t total = 0;
  for (const auto& [mono, coeff] : terms_) {
    int64_t term = coeff;
    for (int s : mono) {
      EMBER_CHECK(s >= 0 && static_cast<size_t>(s) < values.size(), "symbol s", s, " is unbound");
      term = checked_mul(term, values[s]);
    }
    total = checked_add(total, term);
  }
  return total;
}

Dim Dim::operator+(const Dim& o) const {
  if (is_static() && o.is_static()) return Dim(checked_add(value_, o.value_));
  Terms r = terms();
  for (const auto& [mono, coeff] : o.terms()) r[mono] = checked_add(r[mono], coeff);
  return from_terms(std::move(r));
}

Dim Dim::operator-(const Dim& o) const { return *this + o * Dim(-1); }

Dim Dim::operator*(const Dim& o) const {
  if (is_static() && o.is_static()) return Dim(checked_mul(value_, o.value_));
  Terms r;
  for (const auto& [m1, c1] : terms()) {
    for (const auto& [m2, c2] : o.terms()) {
      std::vector<int> mono = m1;
      mono.insert(mono.end(), m2.begin(), m2.end());
      std::sort(mono.begin(), mono.end());
      r[mono] = checked_add(r[mono], checked_mul(c1, c2));
    }
  }
  return from_terms(std::move(r));
}

Dim Dim::exact_div(const Dim& o) const {
  if (o.is_static()) {
    int64_t d = o.value();
    if (d == 0) throw Error(ErrorKind::Value, "division of a dim by zero");
    if (d == -1) return *this * Dim(-1);  // INT64_MIN / -1 overflows, and is checked there
    Terms r;
    for (const auto& [mono, coeff] : terms()) {
      if (coeff % d != 0)
        throw SymbolicShapeError(detail::concat(str(), " is not divisible by ", d), symbols());
      r[mono] = coeff / d;
    }
    return from_terms(std::move(r));
  }
  // Division by a monomial c*m: every term must contain m and have a coefficient divisible by c.
  if (o.terms_.size() == 1) {
    const auto& [dm, dc] = *o.terms_.begin();
    Terms r;
    for (const auto& [mono, coeff] : terms()) {
      std::vector<int> rest;
      if (!std::includes(mono.begin(), mono.end(), dm.begin(), dm.end()) || coeff % dc != 0)
        throw SymbolicShapeError(detail::concat(str(), " is not divisible by ", o.str()), (*this + o).symbols());
      std::set_difference(mono.begin(), mono.end(), dm.begin(), dm.end(), std::back_inserter(rest));
      r[rest] = coeff / dc;
    }
    return from_terms(std::move(r));
  }
  if (*this == o) return Dim(1);
  throw SymbolicShapeError(detail::concat("cannot divide ", str(), " by ", o.str()), (*this + o).symbols());
}

Dim Dim::floor_div(int64_t d) const {
  if (d <= 0) throw Error(ErrorKind::Value, detail::concat("floor division of a dim by ", d));
  if (d == 1) return *this;
  if (is_static()) {
    int64_t v = value(), q = v / d;
    if ((v % d != 0) && ((v < 0) != (d < 0))) --q;
    return Dim(q);
  }
  throw SymbolicShapeError(detail::concat("floor division of symbolic dim ", str(), " by ", d), symbols());
}

std::string Dim::str() const {
  if (is_static()) return std::to_string(value_);
  std::string out;
  // Highest-degree terms first, the constant last: "2*s0*s1 + s0 + 3".
  std::vector<std::pair<std::vector<int>, int64_t>> ordered(terms_.begin(), terms_.end());
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  bool first = true;
  for (const auto& [mono, coeff] : ordered) {
    int64_t c = coeff;
    if (!first) {
      out += c < 0 ? " - " : " + ";
      if (c < 0) c = -c;
    }
    first = false;
    std::string term;
    if (mono.empty() || c != 1) term = std::to_string(c);
    if (c == -1 && !mono.empty()) term = "-";
    for (size_t i = 0; i < mono.size(); ++i) {
      if (!term.empty() && term != "-") term += "*";
      term += "s" + std::to_string(mono[i]);
    }
    out += term;
  }
  return out;
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + s[i].str();
  return out + "]";
}

Dim numel(const Shape& s) {
  Dim n(1);
  for (const Dim& d : s) n = n * d;
  return n;
}

bool is_static(const Shape& s) {
  return std::all_of(s.begin(), s.end(), [](const Dim& d) { return d.is_static(); });
}

std::vector<int64_t> static_shape(const Shape& s) {
  std::vector<int64_t> out;
  for (const Dim& d : s) out.push_back(d.value());
  return out;
}

Shape to_shape(const std::vector<int64_t>& dims) { return Shape(dims.begin(), dims.end()); }

std::vector<int64_t> evaluate(const Shape& s, const SymbolValues& values) {
  std::vector<int64_t> out;
  for (const Dim& d : s) out.push_back(d.evaluate(values));
  return out;
}

namespace {

// Recursive descent over: dim := term (('+'|'-') term)*; term := factor ('*' factor)*;
// factor := '-'? (integer | 's' integer | '(' dim ')').
struct DimParser {
  std::string_view text;
  size_t pos = 0;

  void skip() { while (pos < text.size() && std::isspace(static_cast<unsigned char>(text[pos]))) ++pos; }
  [[noreturn]] void fail(const char* what) {
    throw Error(ErrorKind::Value, detail::concat("malformed dim '", text, "': ", what));
  }
  int64_t integer() {
    size_t start = pos;
    while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) ++pos;
    if (start == pos) fail("expected a number");
    return std::stoll(std::string(text.substr(start, pos - start)));
  }
  Dim factor() {
    skip();
    if (pos < text.size() && text[pos] == '-') { ++pos; return factor() * Dim(-1); }
    if (pos < text.size() && text[pos] == '(') {
      ++pos;
      Dim d = dim();
      skip();
      if (pos >= text.size() || text[pos] != ')') fail("expected ')'");
      ++pos;
      return d;
    }
    if (pos < text.size() && text[pos] == 's') { ++pos; return Dim::symbol(static_cast<int>(integer())); }
    return Dim(integer());
  }
  Dim term() {
    Dim d = factor();
    for (skip(); pos < text.size() && text[pos] == '*'; skip()) { ++pos; d = d * factor(); }
    return d;
  }
  Dim dim() {
    Dim d = term();
    for (skip(); pos < text.size() && (text[pos] == '+' || text[pos] == '-'); skip()) {
      char op = text[pos++];
      Dim t = term();
      d = op == '+' ? d + t : d - t;
    }
    return d;
  }
};

}  // namespace

Dim parse_dim(std::string_view text) {
  DimParser p{text};
  Dim d = p.dim();
  p.skip();
  if (p.pos != text.size()) p.fail("unexpected trailing text");
  return d;
}

}  // namespace ember

namespace ember {

int64_t checked_numel(std::string_view op, const std::vector<int64_t>& shape) {
  int64_t n = 1;
  bool overflow = false;
  for (int64_t d : shape) {
    if (d < 0) EMBER_THROW(Value, "[", op, "] negative dim ", d, " in shape ", shape_str(to_shape(shape)));
    overflow = overflow || __builtin_mul_overflow(n, d, &n);
  }
  // A zero anywhere makes the product 0, whatever overflowed before it.
  for (int64_t d : shape)
    if (d == 0) return 0;
  if (overflow)
    EMBER_THROW(Value, "[", op, "] shape ", shape_str(to_shape(shape)), " has more elements than fit in int64");
  return n;
}

namespace {
thread_local FactSink* current_sink = nullptr;

[[noreturn]] void fact_fails(const SymbolicFact& fact, std::vector<int> involved) {
  if (involved.empty()) involved = fact.expr.symbols();
  throw SymbolicShapeError(fact.why + ": cannot assume " + fact.str(), std::move(involved));
}

void assume(SymbolicFact fact, const std::vector<int>& involved) {
  if (fact.expr.is_static()) {
    if (!fact.holds({})) fact_fails(fact, involved);
    return;
  }
  if (current_sink && !current_sink->check(fact)) fact_fails(fact, involved);
}
}  // namespace

bool SymbolicFact::holds(const SymbolValues& values) const {
  int64_t v = expr.evaluate(values);
  return equal ? v == 0 : v >= 0;
}

std::string SymbolicFact::str() const {
  return expr.str() + (equal ? " == 0" : " >= 0") + (why.empty() ? "" : " (" + why + ")");
}

ScopedFactSink::ScopedFactSink(FactSink* sink) : previous_(current_sink) { current_sink = sink; }
ScopedFactSink::~ScopedFactSink() { current_sink = previous_; }

bool surely_nonnegative(const Dim& d) {
  if (d.is_static()) return d.value() >= 0;
  // Every symbol is >= 2 (the tracer never makes sizes 0 or 1 symbolic).
  std::optional<int64_t> low = d.lower_bound(2);
  return low && *low >= 0;
}

void assume_nonnegative(const Dim& expr, const std::string& why, const std::vector<int>& involved) {
  if (surely_nonnegative(expr)) return;
  assume({expr, false, why}, involved);
}

void assume_equal(const Dim& a, const Dim& b, const std::string& why) {
  std::vector<int> involved = a.symbols();
  for (int s : b.symbols()) involved.push_back(s);
  // A symbolic dim that must equal a static one is better static: code for a known size is
  // better code. Specialise rather than guard.
  if (a.is_static() != b.is_static() && a != b)
    throw SymbolicShapeError(why + ": " + a.str() + " must equal " + b.str(), involved);
  assume({a - b, true, why}, involved);
}

}  // namespace ember

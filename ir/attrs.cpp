#include "ir/attrs.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string_view>

namespace ember {

bool Literal::operator==(const Literal& o) const {
  if (dtype != o.dtype || ints != o.ints || floats.size() != o.floats.size()) return false;
  // Bitwise equality for floats: a NaN equals the same NaN, and -0.0 differs from 0.0.
  for (size_t i = 0; i < floats.size(); ++i)
    if (std::bit_cast<uint64_t>(floats[i]) != std::bit_cast<uint64_t>(o.floats[i])) return false;
  return true;
}

AttrType attr_type(const Attr& a) { return static_cast<AttrType>(a.index()); }

std::string_view attr_type_name(AttrType t) {
  static constexpr std::string_view names[] = {"int", "float", "bool", "dtype",
                                               "ints", "shape", "string", "literal"};
  return names[static_cast<int>(t)];
}

namespace {

// Floats are printed so that parsing gives back the same double, and always with a '.', 'e',
// "inf" or "nan" so that they never look like integers.
// The shortest "%.<p>g" that reads back as v. std::to_chars finds the fewest significant digits
// that round-trip (no precision below can); printing with that precision gives what a search
// over p with snprintf and strtod would, at a fraction of the cost (this runs for every float
// attribute each time a graph is printed or hashed).
std::string float_str(double v) {
  if (std::isnan(v)) {
    // Only the canonical quiet NaN prints as "nan": a sign or payload is part of the value.
    uint64_t bits = std::bit_cast<uint64_t>(v);
    if (bits == std::bit_cast<uint64_t>(std::numeric_limits<double>::quiet_NaN())) return "nan";
    char buf[32];
    std::snprintf(buf, sizeof buf, "nan_0x%016llx", static_cast<unsigned long long>(bits));
    return buf;
  }
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[40];
  auto shortest = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string_view digits(buf, shortest.ptr - buf);
  digits = digits.substr(0, digits.find('e'));
  int precision = static_cast<int>(std::count_if(digits.begin(), digits.end(),
                                                 [](char c) { return c >= '0' && c <= '9'; }));
  for (;; ++precision) {  // at most one more step, where %g's rounding differs from the shortest
    auto end = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, precision).ptr;
    double back = 0;
    std::from_chars(buf, end, back);
    if (back == v || precision >= 17) {
      std::string s(buf, end);
      if (s.find_first_of(".en") == std::string::npos) s += ".0";
      return s;
    }
  }
}

template <class T, class F>
std::string list_str(const std::vector<T>& v, F&& item) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + item(v[i]);
  return out + "]";
}

}  // namespace

std::string attr_str(const Attr& a) {
  switch (attr_type(a)) {
    case AttrType::Int: return std::to_string(std::get<int64_t>(a));
    case AttrType::Float: return float_str(std::get<double>(a));
    case AttrType::Bool: return std::get<bool>(a) ? "true" : "false";
    case AttrType::DType: return std::string(dtype_name(std::get<DType>(a)));
    case AttrType::Ints:
      return list_str(std::get<std::vector<int64_t>>(a), [](int64_t v) { return std::to_string(v); });
    case AttrType::Shape: return shape_str(std::get<Shape>(a));
    case AttrType::String: return "\"" + std::get<std::string>(a) + "\"";
    case AttrType::Literal: {
      const Literal& l = std::get<Literal>(a);
      std::string body = is_floating(l.dtype)
                             ? list_str(l.floats, float_str)
                             : list_str(l.ints, [](int64_t v) { return std::to_string(v); });
      return std::string(dtype_name(l.dtype)) + body;
    }
  }
  return "?";
}

}  // namespace ember

// Node attributes: a sorted map from name to a typed value. Each op's registry record declares
// the attributes it takes (name, type, default), so the parser and verifier know their types.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "ir/dtype.h"
#include "ir/symbolic.h"

namespace ember {

// The data of a `constant` node, flattened in row-major order. Floats keep double precision (exact
// for every float dtype); integers and bool keep int64.
struct Literal {
  DType dtype = DType::Float32;
  std::vector<double> floats;
  std::vector<int64_t> ints;
  size_t size() const { return is_floating(dtype) ? floats.size() : ints.size(); }
  double as_double(size_t i) const { return is_floating(dtype) ? floats[i] : static_cast<double>(ints[i]); }
  bool operator==(const Literal& o) const;
};

enum class AttrType { Int, Float, Bool, DType, Ints, Shape, String, Literal };
using Attr = std::variant<int64_t, double, bool, DType, std::vector<int64_t>, Shape, std::string, Literal>;
using Attrs = std::map<std::string, Attr>;

AttrType attr_type(const Attr& a);
std::string_view attr_type_name(AttrType t);
std::string attr_str(const Attr& a);  // the IR text form

}  // namespace ember

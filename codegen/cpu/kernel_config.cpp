#include "codegen/cpu/kernel_config.h"

#include <sstream>

#include "ir/error.h"

namespace ember::codegen::cpu {

std::string KernelConfig::code_str() const {
  std::string s;
  auto add = [&](const char* name, int64_t v) {
    if (v) s += (s.empty() ? "" : " ") + std::string(name) + "=" + std::to_string(v);
  };
  add("lanes", lanes);
  add("fold_block", fold_block);
  add("column_vectors", column_vectors);
  return s;
}

std::string KernelConfig::str() const {
  std::string s = code_str();
  if (grain) s += (s.empty() ? "" : " ") + std::string("grain=") + std::to_string(grain);
  return s.empty() ? "default" : s;
}

KernelConfig KernelConfig::parse(std::string_view text) {
  KernelConfig c;
  if (text == "default") return c;
  std::istringstream in{std::string(text)};
  for (std::string field; in >> field;) {
    size_t eq = field.find('=');
    if (eq == std::string::npos) EMBER_THROW(Value, "[kernel config] '", field, "' is not name=value");
    std::string name = field.substr(0, eq);
    int64_t value = 0;
    try {
      value = std::stoll(field.substr(eq + 1));
    } catch (const std::exception&) {
      EMBER_THROW(Value, "[kernel config] '", field, "' has no integer value");
    }
    if (value <= 0) EMBER_THROW(Value, "[kernel config] '", field, "' must be positive");
    if (name == "lanes") c.lanes = static_cast<int>(value);
    else if (name == "fold_block") c.fold_block = static_cast<int>(value);
    else if (name == "column_vectors") c.column_vectors = static_cast<int>(value);
    else if (name == "grain") c.grain = value;
    else EMBER_THROW(Value, "[kernel config] unknown field '", name, "'");
  }
  return c;
}

}  // namespace ember::codegen::cpu

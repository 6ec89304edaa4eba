#include "codegen/cpu/kernel_config.h"

#include "ir/error.h"
#include "runtime/step_settings.h"

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
  if (whole_rows) s += (s.empty() ? "" : " ") + std::string("whole_rows=") + std::to_string(whole_rows);
  return s.empty() ? "default" : s;
}

KernelConfig KernelConfig::parse(std::string_view text) {
  KernelConfig c;
  for (const auto& [name, value] : choice_fields(text, "kernel config")) {
    int64_t v = positive_field(name, value, "kernel config");
    if (name == "lanes") c.lanes = static_cast<int>(v);
    else if (name == "fold_block") c.fold_block = static_cast<int>(v);
    else if (name == "column_vectors") c.column_vectors = static_cast<int>(v);
    else if (name == "grain") c.grain = v;
    else if (name == "whole_rows" && v != 1) EMBER_THROW(Value, "[kernel config] whole_rows is 1 or absent, got ", v);
    else if (name == "whole_rows") c.whole_rows = 1;
    else EMBER_THROW(Value, "[kernel config] unknown field '", name, "'");
  }
  return c;
}

}  // namespace ember::codegen::cpu

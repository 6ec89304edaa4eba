#include "modes/mode.h"

#include "ir/error.h"

namespace ember {

namespace {

// The one list of modes: everything else (the Python package's MODES too) asks for it.
struct ModeEntry {
  const char* name;
  ModeConfig (*make)();
};
constexpr ModeEntry kModes[] = {
    {"default", default_mode},
    {"reduce-overhead", reduce_overhead_mode},
    {"max-autotune", max_autotune_mode},
};

}  // namespace

std::vector<std::string> mode_names() {
  std::vector<std::string> names;
  for (const ModeEntry& m : kModes) names.emplace_back(m.name);
  return names;
}

ModeConfig mode_config(std::string_view name) {
  for (const ModeEntry& m : kModes)
    if (name == m.name) return m.make();
  std::string valid;
  for (const ModeEntry& m : kModes) valid += (valid.empty() ? "" : ", ") + std::string(m.name);
  EMBER_THROW(Value, "[compile] unknown mode '", name, "' (valid: ", valid, ")");
}

}  // namespace ember

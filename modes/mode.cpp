#include "modes/mode.h"

#include "ir/error.h"

namespace ember {

std::vector<std::string> mode_names() { return {"default", "reduce-overhead", "max-autotune"}; }

ModeConfig mode_config(std::string_view name) {
  if (name == "default") return default_mode();
  if (name == "reduce-overhead") return reduce_overhead_mode();
  if (name == "max-autotune") return max_autotune_mode();
  EMBER_THROW(Value, "[compile] unknown mode '", name, "' (valid: default, reduce-overhead, max-autotune)");
}

}  // namespace ember

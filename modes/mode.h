// A mode is a configuration: a flat list of passes plus runtime settings. One file per mode.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ember {

struct ModeConfig {
  std::string name;
  std::vector<std::string> passes;
  bool static_memory_plan = false;  // reduce-overhead, max-autotune: plan buffers once per shape
  bool cuda_graphs = false;         // reduce-overhead, max-autotune: capture and replay on CUDA
  bool autotune = false;            // max-autotune: benchmark kernel configurations
};

ModeConfig default_mode();
ModeConfig reduce_overhead_mode();
ModeConfig max_autotune_mode();

// The mode by name; throws ember::Error listing the valid names for an unknown one.
ModeConfig mode_config(std::string_view name);
std::vector<std::string> mode_names();

}  // namespace ember

// A mode is a configuration: a flat list of passes plus the runtime settings it turns on, one file
// per mode. The code that acts on a mode reads these fields; none compares the mode's name.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ember {

struct ModeConfig {
  std::string name;
  std::vector<std::string> passes;
  bool static_memory_plan = false;  // each shape's buffers kept from call to call (runtime/executable.h)
  bool autotune = false;            // measure each step's ways of running and keep the fastest (codegen/autotune.h)
};

ModeConfig default_mode();
ModeConfig reduce_overhead_mode();
ModeConfig max_autotune_mode();

// The mode by name; throws ember::Error listing the valid names for an unknown one.
ModeConfig mode_config(std::string_view name);
// Every mode's name, in the order the table in mode.cpp lists them.
std::vector<std::string> mode_names();

}  // namespace ember

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
  // Steps that hold more than one way to run (codegen/plan.h): a float32 GEMM and the kernel that
  // alone reads its product, which can run inside ember's own GEMM ([Note: GEMM epilogues]), and a
  // value stored by one kernel for another or recomputed there ([Note: recompute or store]).
  // Choices for autotune to measure, so only its mode turns them on.
  bool choice_steps = false;
};

ModeConfig default_mode();
ModeConfig reduce_overhead_mode();
ModeConfig max_autotune_mode();

// The mode by name; throws ember::Error listing the valid names for an unknown one.
ModeConfig mode_config(std::string_view name);
// Every mode's name, in the order the table in mode.cpp lists them.
std::vector<std::string> mode_names();

}  // namespace ember

// reduce-overhead: the default pipeline, then a static memory plan and pre-bound launches; on
// CUDA the executable is captured as a CUDA graph (the runtime pieces come with the codegen
// issues; the settings are read from here).
#include "modes/mode.h"

namespace ember {

ModeConfig reduce_overhead_mode() {
  ModeConfig m = default_mode();
  m.name = "reduce-overhead";
  m.static_memory_plan = true;
  m.cuda_graphs = true;
  return m;
}

}  // namespace ember

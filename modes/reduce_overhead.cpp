// reduce-overhead: the default pipeline, then a static memory plan: each shape's buffers and
// step destinations are bound once and kept from call to call.
#include "modes/mode.h"

namespace ember {

ModeConfig reduce_overhead_mode() {
  ModeConfig m = default_mode();
  m.name = "reduce-overhead";
  m.static_memory_plan = true;
  return m;
}

}  // namespace ember

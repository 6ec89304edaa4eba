// max-autotune: reduce-overhead, plus benchmarked kernel configurations with a persistent tuning
// database (filled in by the codegen issues).
#include "modes/mode.h"

namespace ember {

ModeConfig max_autotune_mode() {
  ModeConfig m = reduce_overhead_mode();
  m.name = "max-autotune";
  m.autotune = true;
  return m;
}

}  // namespace ember

// max-autotune: the reduce-overhead pipeline, plus benchmarked kernel configurations with a
// persistent tuning database (filled in by the codegen issues).
#include "modes/mode.h"

namespace ember {

ModeConfig max_autotune_mode() {
  ModeConfig m;
  m.name = "max-autotune";
  m.passes = {
      "constant-fold",
      "simplify",
      "cse",
      "dce",
  };
  m.static_memory_plan = true;
  m.cuda_graphs = true;
  m.autotune = true;
  return m;
}

}  // namespace ember

// max-autotune: reduce-overhead, plus each step's ways of running measured on the first call's
// inputs, the fastest kept, and the choices remembered in the tuning database (codegen/autotune.h);
// a GEMM's epilogue is one of those choices.
#include "modes/mode.h"

namespace ember {

ModeConfig max_autotune_mode() {
  ModeConfig m = reduce_overhead_mode();
  m.name = "max-autotune";
  m.autotune = true;
  m.choice_steps = true;
  return m;
}

}  // namespace ember

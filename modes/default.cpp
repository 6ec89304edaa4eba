// default: cheap clean-ups, short compile time.
#include "modes/mode.h"

namespace ember {

ModeConfig default_mode() {
  ModeConfig m;
  m.name = "default";
  m.passes = {
      "decompose-fusible",    // softmax, the norms, ...: one row kernel each after fusion
      "split-reductions",  // reductions over any dims: row and column kernels
      "constant-fold",  // evaluate small constant subgraphs
      "simplify",       // algebraic identities (x * 1, reshape to the same shape, ...)
      "cse",            // merge identical nodes
      "dce",            // drop what no output needs
  };
  return m;
}

}  // namespace ember

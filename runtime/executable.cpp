#include "runtime/executable.h"

#include "runtime/interpreter.h"

namespace ember {

std::vector<Array> Executable::run(std::span<const Array> inputs, const SymbolValues& symbols) const {
  return run_graph(*graph_, inputs, symbols);
}

}  // namespace ember

#include "ir/reduction.h"

namespace ember {

std::string_view combiner_name(Combiner c) {
  switch (c) {
    case Combiner::Add: return "add";
    case Combiner::Mul: return "mul";
    case Combiner::Max: return "max";
    case Combiner::Min: return "min";
    case Combiner::ArgMax: return "argmax";
    case Combiner::ArgMin: return "argmin";
  }
  return "?";
}

bool is_indexed(Combiner c) { return c == Combiner::ArgMax || c == Combiner::ArgMin; }

}  // namespace ember

// Guards: what a cached trace checks before it is replayed, and the failing guard's text.
#include <cstdint>
#include <string>

#include "frontend/trace.h"

namespace ember {

namespace {

std::string range_str(const SymbolRange& r) {
  return "[" + std::to_string(r.min) + ", " + (r.max == INT64_MAX ? "max" : std::to_string(r.max)) + "]";
}

}  // namespace

// The hot path of every replay: plain comparisons, and text only for the guard that fails.
std::string Guards::check(const std::vector<Array>& args, SymbolValues& values) const {
  values.assign(symbols.size(), -1);
  if (args.size() != tensors.size())
    return "number of tensor inputs: " + std::to_string(tensors.size()) + " -> " + std::to_string(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const TensorGuard& g = tensors[i];
    const Array& a = args[i];
    auto in = [&] { return "input " + std::to_string(i); };
    if (a.dtype() != g.dtype)
      return in() + " dtype: " + std::string(dtype_name(g.dtype)) + " -> " + std::string(dtype_name(a.dtype()));
    if (a.rank() != static_cast<int64_t>(g.shape.size()))
      return in() + " rank: " + std::to_string(g.shape.size()) + " -> " + std::to_string(a.rank());
    if (a.is_contiguous() != g.contiguous)
      return in() + " layout: " + (g.contiguous ? "contiguous -> strided" : "strided -> contiguous");
    for (size_t d = 0; d < g.shape.size(); ++d) {
      const Dim& dim = g.shape[d];
      int64_t got = a.shape()[d];
      auto where = [&] { return in() + " dim " + std::to_string(d) + ": "; };
      if (dim.is_static()) {
        if (dim.value() != got) return where() + std::to_string(dim.value()) + " -> " + std::to_string(got);
        continue;
      }
      int s = dim.as_symbol();
      const SymbolRange& r = symbols[s];
      if (got < r.min || got > r.max)
        return where() + std::to_string(got) + " is outside s" + std::to_string(s) + "'s range " + range_str(r);
      if (values[s] < 0) values[s] = got;
      else if (values[s] != got)
        return where() + std::to_string(got) + " differs from s" + std::to_string(s) + " = " + std::to_string(values[s]) +
               " (these dims were equal when traced)";
    }
  }
  for (const auto& [dim, v] : specialisations) {
    int64_t got = dim.evaluate(values);
    if (got != v) return dim.str() + " == " + std::to_string(v) + " (a size used as an integer): now " + std::to_string(got);
  }
  for (const SymbolicFact& f : facts)
    if (!f.holds(values)) return f.str() + ": now " + std::to_string(f.expr.evaluate(values));
  return "";
}

std::vector<std::string> Guards::describe() const {
  std::vector<std::string> out;
  for (size_t i = 0; i < tensors.size(); ++i)
    out.push_back("input " + std::to_string(i) + ": " + std::string(dtype_name(tensors[i].dtype)) +
                  shape_str(tensors[i].shape) + ", " + (tensors[i].contiguous ? "contiguous" : "strided") + ", cpu");
  for (size_t s = 0; s < symbols.size(); ++s) out.push_back("s" + std::to_string(s) + " in " + range_str(symbols[s]));
  for (const auto& [dim, v] : specialisations) out.push_back(dim.str() + " == " + std::to_string(v));
  for (const SymbolicFact& f : facts) out.push_back(f.str());
  return out;
}

}  // namespace ember

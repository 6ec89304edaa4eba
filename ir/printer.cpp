// The IR text form: see docs/ir.md.
#include <limits>

#include "ir/graph.h"
#include "ir/sha256.h"

namespace ember {

std::string attrs_str(const Attrs& attrs) {
  if (attrs.empty()) return "";
  std::string out = " {";
  bool first = true;
  for (const auto& [key, value] : attrs) {
    out += (first ? "" : ", ") + key + "=" + attr_str(value);
    first = false;
  }
  return out + "}";
}

std::string print(const Graph& g) {
  std::vector<int> names(g.id_bound(), -1);
  auto name = [&](const Node* n) { return "%" + std::to_string(names[n->id()]); };
  // %3 names the only output of a node, %3#1 output 1 of a multi-output node.
  auto ref = [&](const Value& v) {
    return v.node->num_outputs() == 1 ? name(v.node) : name(v.node) + "#" + std::to_string(v.index);
  };
  std::string out = "graph(";
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    names[g.inputs()[i]->id()] = static_cast<int>(i);
    out += (i ? ", " : "") + name(g.inputs()[i]) + ": " + g.inputs()[i]->type().str();
  }
  out += ") {\n";
  for (size_t s = 0; s < g.symbols().size(); ++s) {
    const SymbolRange& r = g.symbols()[s];
    std::string max = r.max == std::numeric_limits<int64_t>::max() ? "max" : std::to_string(r.max);
    out += "  symbol s" + std::to_string(s) + " in [" + std::to_string(r.min) + ", " + max + "]\n";
  }
  int next = static_cast<int>(g.inputs().size());
  for (const Node* n : g.nodes()) {
    if (n->op == Op::Input) continue;
    names[n->id()] = next++;
    out += "  " + name(n);
    if (n->num_outputs() != 1) out += ":" + std::to_string(n->num_outputs());
    out += " = " + std::string(n->info().name) + "(";
    for (size_t i = 0; i < n->inputs().size(); ++i) out += (i ? ", " : "") + ref(n->inputs()[i]);
    out += ")";
    out += attrs_str(n->attrs);
    out += " : " + types_str(n->types) + "\n";
  }
  out += "  return";
  for (size_t i = 0; i < g.outputs().size(); ++i) out += (i ? ", " : " ") + ref(g.outputs()[i]);
  return out + "\n}\n";
}

uint64_t structural_hash(const Graph& g) {
  auto digest = sha256(print(g));
  uint64_t h = 0;
  for (int i = 0; i < 8; ++i) h = (h << 8) | digest[i];
  return h;
}

}  // namespace ember

// The verifier: checks the structural rules of ir/graph.h and names the node that breaks one.
#include <unordered_set>

#include "ir/error.h"
#include "ir/graph.h"

namespace ember {

namespace {

class Verifier {
 public:
  explicit Verifier(const Graph& g) : g_(g) {}

  void run() {
    check_inputs();
    for (const Node* n : g_.nodes()) {
      for (const Value& in : n->inputs()) check_defined(n, in);
      seen_.insert(n);
      check_node(n);
    }
    for (const Value& out : g_.outputs()) check_defined(nullptr, out);
    check_use_lists();
  }

 private:
  [[noreturn]] void fail(const Node* n, const std::string& why) const {
    std::string where = n ? detail::concat(" at a '", n->info().name, "' node") : "";
    std::string message = detail::concat("verifier", where, ": ", why, "\n", print(g_));
    detail::internal_error(__FILE__, __LINE__, "verify", message);
  }

  void check_inputs() const {
    for (size_t i = 0; i < g_.inputs().size(); ++i) {
      const Node* in = g_.inputs()[i];
      if (in->op != Op::Input || attr_int(in->attrs, "index") != static_cast<int64_t>(i))
        fail(in, detail::concat("graph input ", i, " is not an input node with index ", i));
    }
  }

  // `user` is null for a graph output.
  void check_defined(const Node* user, const Value& v) const {
    const char* what = user ? "uses" : "returns";
    if (!v.node || !seen_.count(v.node)) {
      if (!user) fail(nullptr, "an output is not a node of the graph");
      fail(user, std::string(what) + " a value that is not defined before it");
    }
    if (v.index < 0 || v.index >= v.node->num_outputs())
      fail(user, detail::concat(what, " output ", v.index, " of a '", v.node->info().name,
                                "' node with ", v.node->num_outputs(), " outputs"));
  }

  void check_node(const Node* n) const {
    for (const TensorType& t : n->types) check_symbols(n, t);
    if (n->op == Op::Input) return;
    if (n->op == Op::Constant) return check_constant(n);
    std::vector<TensorType> types;
    for (const Value& in : n->inputs()) types.push_back(in.type());
    Attrs attrs = n->attrs;
    std::vector<TensorType> expected;
    try {
      expected = infer_types(n->op, types, attrs);
    } catch (const Error& e) {
      fail(n, std::string("inference fails: ") + e.what());
    } catch (const SymbolicShapeError& e) {
      fail(n, std::string("inference fails: ") + e.what());
    }
    if (expected != n->types)
      fail(n, "type " + types_str(n->types) + " differs from the inferred " + types_str(expected));
    if (attrs.size() != n->attrs.size()) fail(n, "attribute defaults are not filled in");
  }

  void check_constant(const Node* n) const {
    const Literal& lit = attr_literal(n->attrs, "value");
    const TensorType& t = n->types.at(0);
    if (n->types.size() != 1 || lit.dtype != t.dtype || !is_static(t.shape) ||
        static_cast<int64_t>(lit.size()) != numel(t.shape).value())
      fail(n, "constant value does not match its type " + types_str(n->types));
  }

  void check_symbols(const Node* n, const TensorType& t) const {
    for (const Dim& d : t.shape)
      for (int s : d.symbols())
        if (s < 0 || static_cast<size_t>(s) >= g_.symbols().size())
          fail(n, detail::concat("uses undeclared symbol s", s));
  }

  // [Note: use lists] in ir/graph.h: each node's list names exactly the slots that read it.
  void check_use_lists() const {
    struct UseHash {
      size_t operator()(const Use& u) const {
        size_t operand = static_cast<size_t>(u.operand) * 0x9e3779b97f4a7c15ull;
        return std::hash<const Node*>()(u.user) ^ operand;
      }
    };
    struct UseEq {
      bool operator()(const Use& a, const Use& b) const {
        return a.user == b.user && a.operand == b.operand;
      }
    };
    std::unordered_set<Use, UseHash, UseEq> recorded;
    size_t slots = g_.outputs().size();
    for (const Node* n : g_.nodes()) {
      slots += n->inputs().size();
      for (const Use& u : n->uses()) {
        if (!reads(u, n)) fail(n, "its use list names a slot that does not read it");
        if (!recorded.insert(u).second) fail(n, "its use list names a slot twice");
      }
    }
    if (recorded.size() != slots)
      fail(nullptr, detail::concat("the use lists name ", recorded.size(), " slots of ", slots,
                                   " (node operands and graph outputs)"));
  }

  // Whether the slot `u` names holds a value of `n`.
  bool reads(const Use& u, const Node* n) const {
    if (u.operand < 0) return false;
    size_t i = static_cast<size_t>(u.operand);
    if (!u.user) return i < g_.outputs().size() && g_.outputs()[i].node == n;
    return seen_.count(u.user) && i < u.user->inputs().size() && u.user->inputs()[i].node == n;
  }

  const Graph& g_;
  std::unordered_set<const Node*> seen_;
};

}  // namespace

void verify(const Graph& g) { Verifier(g).run(); }

}  // namespace ember

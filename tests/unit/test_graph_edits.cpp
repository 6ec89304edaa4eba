// Graph edits: use lists stay exact through every edit, insertion before a node keeps the order
// topological, and remove_dead/replace_uses work on large graphs (their speed is measured in
// benchmarks/overhead.cpp, not here).
#include <algorithm>

#include "ir/error.h"
#include "ir/graph.h"
#include "tests/catch.h"

using namespace ember;

namespace {

const TensorType kVector{DType::Float32, {Dim(4)}};

using Uses = std::vector<std::pair<const Node*, int>>;

Uses sorted(Uses u) {
  std::sort(u.begin(), u.end());
  return u;
}

// The uses of `n` as (user, operand) pairs, sorted (by address: compare with sorted(...)).
Uses uses_of(const Node* n) {
  Uses out;
  for (const Use& u : n->uses()) out.emplace_back(u.user, u.operand);
  return sorted(out);
}

}  // namespace

TEST_CASE("use lists follow every edit", "[ir][uses]") {
  Graph g;
  Node* x = g.add_input(kVector);
  Node* e = g.add(Op::Exp, {x});
  Node* a = g.add(Op::Add, {e, e});
  CHECK(uses_of(e) == Uses{{a, 0}, {a, 1}});
  g.add_output(a);
  g.add_output(e);
  CHECK(uses_of(e) == Uses{{nullptr, 1}, {a, 0}, {a, 1}});
  Node* n = g.add(Op::Neg, {x});
  g.set_input(a, 1, n);
  CHECK(uses_of(e) == Uses{{nullptr, 1}, {a, 0}});
  CHECK(uses_of(n) == Uses{{a, 1}});
  g.replace_uses(e, n);  // every use of exp, the graph output included
  CHECK(uses_of(e).empty());
  CHECK(uses_of(n) == Uses{{nullptr, 1}, {a, 0}, {a, 1}});
  CHECK(g.outputs()[1] == Value(n));
  CHECK(g.remove_dead() == 1);  // exp
  CHECK(uses_of(x) == Uses{{n, 0}});
  g.set_outputs({x});
  CHECK(uses_of(n) == Uses{{a, 0}, {a, 1}});  // outputs gone; add still reads neg
  CHECK(uses_of(x) == Uses{{nullptr, 0}, {n, 0}});
  CHECK(g.remove_dead() == 2);  // add and neg
  CHECK(uses_of(x) == Uses{{nullptr, 0}});
  verify(g);
}

TEST_CASE("replace_all_uses moves every output, replace_uses between outputs of one node",
          "[ir][uses]") {
  Graph g;
  Node* x = g.add_input(kVector);
  Node* s1 = g.add(Op::Sort, {x});
  Node* s2 = g.add(Op::Sort, {x});
  Node* f = g.add(Op::Cast, {s2->out(1)}, {{"dtype", DType::Float32}});
  g.set_outputs({s2->out(0), f});
  g.replace_all_uses(s2, s1);
  CHECK(s2->uses().empty());
  CHECK(f->inputs()[0] == s1->out(1));
  CHECK(g.outputs()[0] == s1->out(0));
  // Within one node: the uses of output 0 move to output 1, output 1's own uses stay.
  Node* split = g.add(Op::Split, {x}, {{"sizes", std::vector<int64_t>{2, 2}}});
  Node* n0 = g.add(Op::Neg, {split->out(0)});
  Node* n1 = g.add(Op::Neg, {split->out(1)});
  g.set_outputs({n0, n1});
  g.replace_uses(split->out(0), split->out(1));
  CHECK(n0->inputs()[0] == split->out(1));
  CHECK(uses_of(split) == sorted({{n0, 0}, {n1, 0}}));
  verify(g);
  auto copy = g.clone();
  verify(*copy);
  CHECK(print(*copy) == print(g));
}

TEST_CASE("nodes inserted before another keep the order topological", "[ir][order]") {
  Graph g;
  Node* x = g.add_input(kVector);
  Node* n = g.add(Op::Neg, {x});
  Node* c = g.add_constant(Literal{DType::Float32, {1, 2, 3, 4}, {}}, {Dim(4)}, n);
  Node* m = g.add(Op::Mul, {x, c}, {}, n);
  g.set_input(n, 0, m);
  g.add_output(n);
  std::vector<Node*> order = g.nodes();
  CHECK(order == std::vector<Node*>{x, c, m, n});
  CHECK(g.first() == x);
  CHECK(x->next() == c);
  verify(g);
  Graph other;
  other.add_input(kVector);
  Literal four{DType::Float32, {1, 2, 3, 4}, {}};
  CHECK_THROWS_AS(other.add_constant(four, {Dim(4)}, n), Error);
  Graph moved = std::move(g);  // nodes stay where they are; the moved-to graph owns them
  CHECK(moved.nodes() == order);
  CHECK(moved.size() == 4);
}

TEST_CASE("a long chain: every use replaced and every dead node removed", "[ir][uses]") {
  Graph g;
  Node* x = g.add_input(kVector);
  Value y = x;
  std::vector<Node*> doubles;
  for (int i = 0; i < 20000; ++i) {
    Node* e = g.add(Op::Exp, {y});
    doubles.push_back(g.add(Op::Exp, {y}));  // a duplicate of e, merged below
    y = g.add(Op::Add, {e, doubles.back()});
  }
  g.add_output(y);
  for (Node* d : doubles) g.replace_uses(d, d->inputs()[0].node->uses()[0].user);
  CHECK(g.remove_dead() == doubles.size());
  CHECK(g.size() == 1 + 2 * doubles.size());
  verify(g);
}

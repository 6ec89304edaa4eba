// Nodes with several outputs: the Graph API, the text form's errors, the verifier, the frontend
// functions built on split (chunk, unbind), and tracing multi-output ops inside compile().
#include <ember/ember.h>

#include "ir/error.h"
#include "ir/graph.h"
#include "passes/pass.h"
#include "tests/catch.h"
#include "tests/unit/helpers.h"

using namespace ember;
using ember::test::error_of;

namespace {


void require_equal(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  REQUIRE(a.dtype() == b.dtype());
  auto x = a.to_vector(), y = b.to_vector();
  for (size_t i = 0; i < x.size(); ++i) {
    INFO("element " << i);
    if (std::isnan(y[i])) CHECK(std::isnan(x[i]));
    else CHECK(x[i] == y[i]);
  }
}

const TensorType kMatrix{DType::Float32, {Dim(4), Dim(6)}};

}  // namespace

TEST_CASE("a multi-output node: values, printing, DCE by any output, RAUW of one output",
          "[ir][multi]") {
  Graph g;
  Node* x = g.add_input(kMatrix);
  Node* top = g.add(Op::TopK, {x}, {{"k", int64_t{2}}});
  REQUIRE(top->num_outputs() == 2);
  CHECK(top->types[1] == TensorType{DType::Int64, {Dim(4), Dim(2)}});
  // A multi-output node is not one value: naming it without an output is a bug.
  ErrorKind kind{};
  std::string message = error_of([&] { g.add(Op::Neg, {top}); }, &kind);
  CHECK(message.find("name the output") != std::string::npos);
  CHECK(kind == ErrorKind::Internal);
  Node* neg = g.add(Op::Neg, {top->out(0)});
  g.set_outputs({neg, top->out(1)});
  CHECK(print(g).find("%1:2 = topk(%0)") != std::string::npos);
  CHECK(print(g).find("%2 = neg(%1#0) : f32[4, 2]") != std::string::npos);
  CHECK(print(g).find("return %2, %1#1") != std::string::npos);
  // Replacing output 0 moves its uses only; output 1 still keeps the node alive.
  Node* zero = g.add(Op::Full, {}, {{"shape", Shape{Dim(4), Dim(2)}}, {"value", 0.0}});
  g.replace_uses(top->out(0), zero);
  CHECK(neg->inputs()[0] == Value(zero));
  CHECK(g.outputs()[1] == top->out(1));
  CHECK(g.remove_dead() == 0);
  g.set_outputs({neg});
  CHECK(g.remove_dead() == 1);  // topk, now unused
  g.set_outputs({});
  CHECK(g.remove_dead() == 2);  // neg and full
  auto copy = parse_graph(print(g));
  CHECK(print(*copy) == print(g));
}

const char* kTopK = "graph(%0: f32[4, 6]) {\n  %1:2 = topk(%0) {k=2} : f32[4, 2], i64[4, 2]\n";

TEST_CASE("the text form names multi-output values and rejects wrong names",
          "[ir][multi][errors]") {
  auto fails_with = [](const std::string& body, const std::string& part) {
    std::string text = kTopK + body + "}\n";
    INFO(text);
    std::string message = error_of([&] { parse_graph(text); });
    CHECK(message.find(part) != std::string::npos);
  };
  fails_with("  %2 = neg(%1) : f32[4, 2]\n  return %2\n",
             "line 3: %1 has 2 outputs: name one as %1#i");
  fails_with("  return %1#2\n", "line 3: %1 has no output 2 (it has 2)");
  fails_with("  %2 = neg(%0#1) : f32[4, 6]\n  return %2\n", "%0 has no output 1");
  fails_with("  %2:3 = sort(%0) : f32[4, 6], i64[4, 6]\n  return %2#0\n",
             "%2 names 3 outputs but 2 types follow");
  fails_with("  %2 = sort(%0) : f32[4, 6]\n  return %2\n",
             "declared type f32[4, 6] differs from the inferred f32[4, 6], i64[4, 6]");
  fails_with("  %2:2 = sort(%0) : f32[4, 6], i32[4, 6]\n  return %2#0\n",
             "differs from the inferred");
  auto g = parse_graph(std::string(kTopK) + "  return %1#1, %1#0\n}\n");
  CHECK(g->outputs()[0].index == 1);
  CHECK(g->outputs()[1].type() == TensorType{DType::Float32, {Dim(4), Dim(2)}});
}

TEST_CASE("the verifier rejects a use of an output the node does not have",
          "[ir][multi][verifier]") {
  auto g = parse_graph(std::string(kTopK) + "  %2 = neg(%1#0) : f32[4, 2]\n  return %2\n}\n");
  verify(*g);
  Node* top = g->nodes()[1];
  Node* neg = g->nodes()[2];
  g->set_input(neg, 0, {top, 5});
  std::string message = error_of([&] { verify(*g); });
  CHECK(message.find("at a 'neg' node: uses output 5 of a 'topk' node with 2 outputs") !=
        std::string::npos);
  g->set_input(neg, 0, {top, 1});  // the i64 output: neg's recorded f32 type is now wrong
  message = error_of([&] { verify(*g); });
  CHECK(message.find("differs from the inferred i64[4, 2]") != std::string::npos);
}

TEST_CASE("chunk and unbind follow torch.chunk and torch.unbind", "[frontend][multi]") {
  Tensor x = reshape(arange(0, 14, 1, DType::Float32), {7, 2});
  auto parts = chunk(x, 3);  // ceil(7 / 3) = 3: sizes 3, 3, 1
  REQUIRE(parts.size() == 3);
  CHECK(parts[2].shape() == std::vector<int64_t>{1, 2});
  require_equal(parts[1], slice(x, 0, 3, 6));
  CHECK(chunk(x, 6).size() == 4);  // ceil(7 / 6) = 2: four parts of 2, 2, 2, 1
  CHECK(chunk(zeros({0, 2}), 3).size() == 3);  // a zero-size dim still gives `chunks` parts
  CHECK(chunk(x, 2, -1)[1].shape() == std::vector<int64_t>{7, 1});
  auto rows = unbind(x, 1);
  REQUIRE(rows.size() == 2);
  require_equal(rows[1], from_vector({1, 3, 5, 7, 9, 11, 13}, {7}));
  CHECK(unbind(zeros({0, 3})).empty());
  ErrorKind kind{};
  CHECK(error_of([&] { chunk(x, 0); }, &kind).find("[chunk] chunks must be positive") == 0);
  CHECK(kind == ErrorKind::Value);
  CHECK(error_of([&] { split(x, {3, 3}); }, &kind).find("[split] sizes [3, 3] add up to 6") == 0);
  CHECK(error_of([&] { split(x, {}); }).find("[split] sizes must name at least one part") == 0);
  CHECK(error_of([&] { topk(x, 3); }).find("[topk] k = 3 is larger than dim 1") == 0);
  CHECK(error_of([&] { topk(ones({2}, DType::Bool), 1); }, &kind).find("[topk]") == 0);
  CHECK(kind == ErrorKind::Type);
  CHECK(error_of([&] { max_dim(zeros({0, 2}), 0); }).find("[max_dim] cannot reduce over") == 0);
  CHECK(error_of([&] { native_batch_norm(ones({1, 3}), {}, {}, zeros({3}), ones({3})); })
            .find("[native_batch_norm] expected more than 1 value per channel") == 0);
}

TEST_CASE("multi-output ops traced by compile() equal eager, one node each", "[compile][multi]") {
  Tensor rm = zeros({3}), rv = ones({3});
  auto body = [&](const Tensor& x) {
    auto [values, indices] = topk(x, 2, 1);
    auto [largest, where] = max_dim(x, 0, true);
    auto [var, mean] = var_mean(x, {1});
    auto parts = chunk(x, 2, 1);
    auto [out, bmean, invstd, new_rm, new_rv] =
        native_batch_norm(reshape(x, {2, 3, 2}), {}, {}, rm, rv, 0.1);
    Tensor sorted = std::get<0>(sort(x, -1, true));  // the indices are never used
    return std::vector<Tensor>{values + 1.0, indices, largest, where, var,
                               mean, parts[1], new_rm, new_rv, sorted};
  };
  auto f = compile(body);
  Tensor x = from_vector({3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8}, {2, 6});
  for (int call = 0; call < 2; ++call) {  // traced, then replayed
    auto got = f(x), want = body(x);
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      INFO("output " << i << ", call " << call);
      // var_mean and batch norm run as their float32 decompositions (kernels), eager's in double.
      if (i == 4 || i == 5 || i == 7 || i == 8) ember::test::check_close(got[i], want[i], 1.3e-5, 1.5e-5);
      else require_equal(got[i], want[i]);
    }
  }
  Report r = f.report();
  REQUIRE(r.graph_count() == 1);
  CHECK(r.graphs[0].ops.at("topk") == 1);
  CHECK(r.graphs[0].ops.at("split") == 1);
  CHECK(r.graphs[0].ir.find("%") != std::string::npos);
}

TEST_CASE("dynamic shapes flow through multi-output ops", "[compile][multi][dynamic]") {
  int calls = 0;
  auto f = compile(
      [&](const Tensor& x) {
        ++calls;
        auto [v, i] = topk(x, 2, 0);  // k <= 2 holds for any symbol (>= 2)
        return std::tuple{v, std::get<1>(max_dim(x, 1)), std::get<0>(sort(x, 0))};
      },
      Options{.dynamic = true});
  for (int64_t n : {3, 5, 8}) {
    Tensor x = uniform({n, 4}, n);
    auto [v, i, s] = f(x);
    require_equal(v, std::get<0>(topk(x, 2, 0)));
    require_equal(i, std::get<1>(max_dim(x, 1)));
    require_equal(s, std::get<0>(sort(x, 0)));
  }
  CHECK(calls == 1);
  CHECK(f.report().graphs[0].ir.find("s0") != std::string::npos);
}

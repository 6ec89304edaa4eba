// Decompositions ([Note: decompositions] in ir/op.h) and the decompose pass: every composite of
// tests/data/every_op.ir becomes primitives of the node's exact types; the one declined case
// stays; edge values (rows of -inf, NaN, infinities, empty reductions, fully masked attention)
// give what the direct kernels give. The op sweep checks every composite's cases the same way
// (tests/unit/sweep_compiled.cpp).
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "ir/extern.h"
#include "ir/graph.h"
#include "passes/pass.h"
#include "runtime/element.h"
#include "runtime/interpreter.h"
#include "tests/catch.h"

using namespace ember;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string read_file(const std::string& path) {
  std::ifstream in(std::string(EMBER_SOURCE_DIR) + "/" + path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs decompose and dce; returns whether decompose changed the graph.
bool decompose(Graph& g) {
  bool changed = make_pass("decompose")->run(g);
  make_pass("dce")->run(g);
  verify(g);
  return changed;
}

int count_decomposable(const Graph& g) {
  int n = 0;
  for (const Node* node : g.nodes()) n += node->info().has_decomposition();
  return n;
}

Array array_of(DType t, std::vector<int64_t> shape, const std::vector<double>& values) {
  Array a = Array::empty(t, shape);
  REQUIRE(a.numel() == static_cast<int64_t>(values.size()));
  for (size_t i = 0; i < values.size(); ++i)
    element::store<double>(static_cast<char*>(a.data()) + i * itemsize(t), t, values[i]);
  return a;
}

// The graph run directly and decomposed give the same values: NaN where the other has NaN,
// infinities exactly, finite values within float32's tolerance.
void check_same_results(const std::string& text, const std::vector<Array>& inputs) {
  auto direct = parse_graph(text);
  auto decomposed = parse_graph(text);
  REQUIRE(decompose(*decomposed));
  CHECK(count_decomposable(*decomposed) == 0);
  std::vector<Array> want = run_graph(*direct, inputs, {});
  std::vector<Array> got = run_graph(*decomposed, inputs, {});
  REQUIRE(got.size() == want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    REQUIRE(got[k].shape() == want[k].shape());
    REQUIRE(got[k].dtype() == want[k].dtype());
    for (int64_t i = 0; i < got[k].numel(); ++i) {
      double g = got[k].get(i), w = want[k].get(i);
      INFO("output " << k << " element " << i << ": decomposed " << g << ", direct " << w);
      if (std::isnan(w) || std::isnan(g)) CHECK((std::isnan(w) && std::isnan(g)));
      else if (std::isinf(w) || std::isinf(g)) CHECK(g == w);
      else CHECK(std::fabs(g - w) <= 1.5e-5 + 1.3e-5 * std::fabs(w));
    }
  }
}

}  // namespace

TEST_CASE("decompose turns every composite of every_op.ir into primitives", "[passes][decompose]") {
  if (!find_extern_op("test.pair"))  // every_op.ir's extern (tests/unit/test_ir.cpp): shapes only
    register_extern_op({"test.pair", [](std::span<const TensorType> in, const Attrs&) {
                          return std::vector<TensorType>{in[0], {DType::Int64, {}}};
                        }});
  auto g = parse_graph(read_file("tests/data/every_op.ir"));
  int with_decomposition = 0;
  for (int i = 0; i < kNumOps; ++i)
    with_decomposition += op_info(static_cast<Op>(i)).has_decomposition();
  CHECK(with_decomposition == 16);
  CHECK(count_decomposable(*g) == with_decomposition);  // one node of each op
  std::vector<TensorType> before;
  for (const Value& v : g->outputs()) before.push_back(v.type());
  CHECK(decompose(*g));
  CHECK(count_decomposable(*g) == 0);
  std::vector<TensorType> after;
  for (const Value& v : g->outputs()) after.push_back(v.type());
  CHECK(after == before);  // the graph's signature is the same
  CHECK_FALSE(make_pass("decompose")->run(*g));  // nothing left to do
}

TEST_CASE("causal attention over a symbolic length is declined and stays", "[passes][decompose]") {
  const char* text = R"(graph(%0: f32[2, s0, 8], %1: f32[2, s0, 8]) {
  symbol s0 in [2, max]
  %2 = scaled_dot_product_attention(%0, %1, %1) {causal=true, scale=0.0} : f32[2, s0, 8]
  %3 = scaled_dot_product_attention(%0, %1, %1) {causal=false, scale=0.0} : f32[2, s0, 8]
  return %2, %3
}
)";
  auto g = parse_graph(text);
  CHECK(decompose(*g));
  CHECK(count_decomposable(*g) == 1);  // the causal one; the other became primitives
  size_t size = g->size();
  auto causal_only = parse_graph(R"(graph(%0: f32[2, s0, 8]) {
  symbol s0 in [2, max]
  %1 = scaled_dot_product_attention(%0, %0, %0) {causal=true, scale=0.0} : f32[2, s0, 8]
  return %1
}
)");
  CHECK_FALSE(decompose(*causal_only));  // declined before adding a node
  CHECK(causal_only->size() == 2);
  CHECK(g->size() == size);
}

TEST_CASE("decompositions give the direct kernels' results on edge values", "[passes][decompose]") {
  const std::vector<double> rows = {-kInf, -kInf, -kInf,  // all -inf: NaN (softmax), -inf (lse)
                                    1, kInf, 2,           // +inf: NaN (softmax), inf (lse)
                                    kNaN, 0, 1,           // NaN propagates
                                    -kInf, 0, 1000};      // large and -inf
  check_same_results(R"(graph(%0: f32[4, 3]) {
  %1 = softmax(%0) {axis=1} : f32[4, 3]
  %2 = log_softmax(%0) {axis=-1} : f32[4, 3]
  %3 = logsumexp(%0) {axes=[1], keepdim=false} : f32[4]
  %4 = gelu(%0) {approximate="none"} : f32[4, 3]
  %5 = gelu(%0) {approximate="tanh"} : f32[4, 3]
  %6 = silu(%0) : f32[4, 3]
  return %1, %2, %3, %4, %5, %6
}
)", {array_of(DType::Float32, {4, 3}, rows)});
  // Reductions over nothing and past the last degree of freedom.
  check_same_results(R"(graph(%0: f32[2, 0], %1: f32[2, 1]) {
  %2 = mean(%0) {axes=[1], keepdim=false} : f32[2]
  %3 = logsumexp(%0) {axes=[1], keepdim=true} : f32[2, 1]
  %4 = var(%0) {axes=[1], correction=1.0, keepdim=false} : f32[2]
  %5 = var(%1) {axes=[1], correction=1.0, keepdim=false} : f32[2]
  %6 = std(%1) {axes=[1], correction=2.0, keepdim=false} : f32[2]
  %7 = softmax(%0) {axis=1} : f32[2, 0]
  %8:2 = var_mean(%1) {axes=[], correction=0.0, keepdim=true} : f32[1, 1], f32[1, 1]
  return %2, %3, %4, %5, %6, %7, %8#0, %8#1
}
)", {array_of(DType::Float32, {2, 0}, {}), array_of(DType::Float32, {2, 1}, {3, -1})});
  // A fully masked row gives zeros (PyTorch's safe softmax), as does an empty key sequence.
  check_same_results(R"(graph(%0: f32[2, 3], %1: bool[2, 2], %2: f32[0, 3]) {
  %3 = scaled_dot_product_attention(%0, %0, %0, %1) {causal=false, scale=0.5} : f32[2, 3]
  %4 = scaled_dot_product_attention(%0, %0, %0) {causal=true, scale=0.0} : f32[2, 3]
  %5 = scaled_dot_product_attention(%0, %2, %2) {causal=false, scale=0.0} : f32[2, 3]
  return %3, %4, %5
}
)", {array_of(DType::Float32, {2, 3}, {0.5, -1, 2, 0, 1, -0.25}),
     array_of(DType::Bool, {2, 2}, {0, 0, 1, 0}), array_of(DType::Float32, {0, 3}, {})});
}

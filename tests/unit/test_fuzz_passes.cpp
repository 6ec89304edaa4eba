// Random-graph fuzzing of the passes: thousands of small graphs (up to 10 nodes) built to hit
// the simplifier, constant folding and CSE (multi-output nodes included), run unoptimised and
// through the default pipeline's exact passes, whose outputs must be identical bit for bit (the
// sign of zero, NaN signs and payloads, signalling NaNs quieted or not, all as eager); every
// graph must print and parse back to itself. Then the whole pipeline (with the decompositions and
// split reductions, which round in float32 where the interpreter folds in double) on generated
// code, against the unoptimised graph on the interpreter within tolerances.
#include <bit>
#include <cmath>
#include <limits>
#include <cstring>
#include <random>

#include "codegen/plan.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "modes/mode.h"
#include "passes/pipeline.h"
#include "runtime/element.h"
#include "runtime/interpreter.h"
#include "tests/catch.h"
#include "tests/unit/helpers.h"

using namespace ember;

namespace {

Array random_array(std::mt19937_64& rng, DType dtype, const std::vector<int64_t>& shape) {
  Array a = Array::empty(dtype, shape);
  std::uniform_int_distribution<int> pick(0, 9);
  std::uniform_real_distribution<double> real(-3, 3);
  for (int64_t i = 0; i < a.numel(); ++i) {
    double v = real(rng);
    int p = pick(rng);
    if (p == 0) v = 0.0;
    if (p == 1) v = -0.0;
    if (p == 2) v = 1.0;
    char* at = static_cast<char*>(a.data()) + i * itemsize(dtype);
    if (dtype == DType::Float32 && p >= 8) {
      // NaNs with a sign and payload, signalling (p == 8) or quiet: stored as bits, since a
      // conversion from double would quiet them.
      uint32_t bits = (p == 8 ? 0x7f800001u : 0x7fc00000u) | static_cast<uint32_t>(rng() % 0x1000) << 4;
      if (rng() % 2) bits |= 0x80000000u;
      std::memcpy(at, &bits, 4);
      continue;
    }
    element::store<double>(at, dtype, v);
  }
  return a;
}


// A node with several outputs on x: every output is usable by later nodes and as a graph output.
Node* multi_output_node(Graph& g, Value x, std::mt19937_64& rng) {
  int64_t rank = static_cast<int64_t>(x.type().shape.size());
  switch (rng() % 5) {
    case 0: return g.add(Op::TopK, {x}, {{"k", int64_t{1}}, {"largest", rng() % 2 == 0}});
    case 1: return g.add(Op::MaxDim, {x}, {{"axis", int64_t{-1}}, {"keepdim", rng() % 2 == 0}});
    case 2: return g.add(Op::Sort, {x}, {{"descending", rng() % 2 == 0}});
    case 3: return g.add(Op::VarMean, {x}, {{"correction", 0.0}});
    default: {
      if (rank == 0) return g.add(Op::MinDim, {x}, {{"axis", int64_t{0}}});
      int64_t n = x.type().shape.back().value(), first = static_cast<int64_t>(rng() % (n + 1));
      std::vector<int64_t> sizes{first, n - first};
      return g.add(Op::Split, {x}, {{"sizes", sizes}, {"axis", int64_t{-1}}});
    }
  }
}

std::unique_ptr<Graph> random_graph(std::mt19937_64& rng) {
  auto g = std::make_unique<Graph>();
  DType dt = rng() % 4 == 0 ? DType::Int32 : DType::Float32;
  const std::vector<Shape> shapes = {{Dim(3), Dim(4)}, {Dim(4)}, {Dim(1), Dim(4)}, {}};
  std::vector<Value> values;
  auto push_all = [&](Node* n) {
    for (int i = 0; i < n->num_outputs(); ++i) values.push_back(n->out(i));
  };
  int inputs = 1 + static_cast<int>(rng() % 3);
  for (int i = 0; i < inputs; ++i) values.push_back(g->add_input({dt, shapes[rng() % shapes.size()]}));
  auto any = [&]() { return values[rng() % values.size()]; };
  const double splats[] = {0.0, -0.0, 1.0, 2.5, -1.0, std::numeric_limits<double>::quiet_NaN(),
                           std::bit_cast<double>(uint64_t{0x7ff8000000000123}), -std::numeric_limits<double>::quiet_NaN()};
  const Op unary[] = {Op::Neg, Op::Abs, Op::Relu, Op::Exp, Op::Tanh, Op::Floor, Op::Sign, Op::Sqrt, Op::Sigmoid};
  const Op binary[] = {Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Maximum, Op::Minimum, Op::Pow, Op::Lt};
  int nodes = 1 + static_cast<int>(rng() % 10);
  for (int i = 0; i < nodes; ++i) {
    try {
      switch (rng() % 9) {
        case 0:
          values.push_back(g->add(Op::Full, {}, {{"shape", shapes[rng() % shapes.size()]},
                                                 {"value", splats[rng() % 8]}, {"dtype", dt}}));
          break;
        case 1: values.push_back(g->add(unary[rng() % 9], {any()})); break;
        case 2: case 3: values.push_back(g->add(binary[rng() % 8], {any(), any()})); break;
        case 4: {  // a duplicate of an existing node, for CSE
          Node* n = values[rng() % values.size()].node;
          if (n->op == Op::Input || n->op == Op::Constant) break;
          push_all(g->add(n->op, n->inputs(), n->attrs));
          break;
        }
        case 5: {
          Value x = any();
          values.push_back(g->add(Op::Reshape, {x}, {{"shape", x.type().shape}}));
          break;
        }
        case 6: {
          Value x = any();
          if (x.type().shape.empty()) break;
          values.push_back(g->add(Op::Sum, {x}, {{"axes", std::vector<int64_t>{-1}}, {"keepdim", true}}));
          break;
        }
        case 7: values.push_back(g->add(Op::Cast, {any()}, {{"dtype", rng() % 2 ? dt : DType::Float32}})); break;
        case 8: push_all(multi_output_node(*g, any(), rng)); break;
      }
    } catch (const Error&) {
      // An op that does not accept these inputs (pow of ints by negatives is fine; bool inputs to
      // sub are not): draw another.
    }
  }
  int outputs = 1 + static_cast<int>(rng() % 2);
  for (int i = 0; i < outputs; ++i)
    g->add_output(values[values.size() - 1 - rng() % std::min<size_t>(3, values.size())]);
  return g;
}

// Random values for each of the graph's inputs.
std::vector<Array> random_inputs(std::mt19937_64& rng, const Graph& g) {
  std::vector<Array> inputs;
  for (const Node* in : g.inputs()) inputs.push_back(random_array(rng, in->type().dtype, static_shape(in->type().shape)));
  return inputs;
}

}  // namespace

TEST_CASE("fuzz: the default pipeline never changes a result, and graphs round-trip", "[fuzz][passes]") {
  std::mt19937_64 rng(20261130);
  std::vector<std::string> exact;
  for (const std::string& pass : default_mode().passes)
    if (pass != "decompose-fusible" && pass != "split-reductions") exact.push_back(pass);
  Pipeline pipeline(exact);
  int compared = 0, errors_both = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    auto g = random_graph(rng);
    std::string text = print(*g);
    INFO("graph " << iter << ":\n" << text);
    REQUIRE(print(*parse_graph(text)) == text);
    std::vector<Array> inputs = random_inputs(rng, *g);
    auto optimised = g->clone();
    pipeline.run(*optimised);  // the verifier runs between passes (EMBER_VERIFY=1 under ctest)
    verify(*optimised);
    std::vector<Array> expected, got;
    bool expected_error = false, got_error = false;
    try { expected = run_graph(*g, inputs, {}); } catch (const Error&) { expected_error = true; }
    try { got = run_graph(*optimised, inputs, {}); } catch (const Error&) { got_error = true; }
    // The optimised graph never raises where the original does not. It may raise less: dce drops
    // a dead node that would raise (integer pow by a negative), as any compiler's dce does.
    REQUIRE((!got_error || expected_error));
    if (expected_error) { ++errors_both; continue; }
    REQUIRE(expected.size() == got.size());
    for (size_t o = 0; o < expected.size(); ++o) {
      REQUIRE(expected[o].dtype() == got[o].dtype());
      REQUIRE(expected[o].shape() == got[o].shape());
      INFO("output " << o << ": " << expected[o].str(64) << " vs " << got[o].str(64));
      REQUIRE(test::same_bits(expected[o], got[o]));
    }
    ++compared;
  }
  CHECK(compared > 2500);
  CHECK(errors_both < 300);
}

namespace {

// The first element where generated code and the interpreter differ beyond the tolerances
// (integers and bool exactly).
std::string mismatch(const Array& want, const Array& got) {
  Array w = want.contiguous(), g = got.contiguous();
  for (int64_t i = 0; i < w.numel(); ++i) {
    double a = w.get(i), b = g.get(i);
    bool same = is_floating(w.dtype()) ? test::within_chain_tolerance(a, b) : w.get_int(i) == g.get_int(i);
    if (!same) return "element " + std::to_string(i) + ": interpreter " + std::to_string(a) + ", generated " + std::to_string(b);
  }
  return "";
}

}  // namespace

TEST_CASE("fuzz: optimised graphs on generated code give the interpreter's results", "[fuzz][passes][codegen]") {
  std::mt19937_64 rng(20261201);
  Pipeline pipeline(default_mode().passes);
  int compared = 0, kernels = 0;
  for (int iter = 0; iter < 2000; ++iter) {
    auto g = random_graph(rng);
    INFO("graph " << iter << ":\n" << print(*g));
    std::vector<Array> inputs = random_inputs(rng, *g);
    std::vector<Array> expected, got;
    bool expected_error = false, got_error = false;
    try { expected = run_graph(*g, inputs, {}); } catch (const Error&) { expected_error = true; }
    pipeline.run(*g);
    codegen::CodegenStats stats;
    auto exec = codegen::build_cpu_executable(g->clone(), stats, /*strict=*/true);
    kernels += exec->kernel_steps();
    try { got = exec->run(inputs, {}); } catch (const Error&) { got_error = true; }
    // Kernels never raise (the ops that can stay interpreted); dce may drop a node that would.
    REQUIRE((!got_error || expected_error));
    if (expected_error) continue;
    REQUIRE(expected.size() == got.size());
    for (size_t o = 0; o < expected.size(); ++o) {
      REQUIRE(expected[o].dtype() == got[o].dtype());
      REQUIRE(expected[o].shape() == got[o].shape());
      INFO("output " << o << ": " << expected[o].str(64) << " vs " << got[o].str(64) << "\n" << exec->describe());
      REQUIRE(mismatch(expected[o], got[o]) == "");
    }
    ++compared;
  }
  CHECK(compared > 1500);
  CHECK(kernels > 1000);  // generated code really ran
}

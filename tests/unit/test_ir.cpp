// IR: dtypes and promotion, symbolic dims, shape and dtype inference, printer/parser round trip,
// verifier failures, structural hash.
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <set>
#include <sstream>
#include <type_traits>

#include "ir/error.h"
#include "ir/extern.h"
#include "ir/graph.h"
#include "tests/catch.h"

using namespace ember;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(std::string(EMBER_SOURCE_DIR) + "/" + path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TensorType T(DType d, Shape s) { return {d, std::move(s)}; }

// The extern op of tests/data/every_op.ir: (x, its first row count as i64[]), shape only (the IR
// tests never run it).
void register_test_extern() {
  register_extern_op({"test.pair", [](std::span<const TensorType> in, const Attrs&) {
                        if (in.size() != 1) EMBER_THROW(Value, "[test.pair] takes one tensor");
                        return std::vector<TensorType>{in[0], {DType::Int64, {}}};
                      }});
}

TensorType infer(Op op, std::vector<TensorType> in, Attrs attrs = {}) { return infer_type(op, in, attrs); }

ErrorKind kind_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.kind();
  }
  FAIL("expected an ember::Error");
  return ErrorKind::Internal;
}

}  // namespace

TEST_CASE("dtype promotion follows torch.promote_types", "[ir]") {
  using D = DType;
  CHECK(promote_types(D::Bool, D::Int8) == D::Int8);
  CHECK(promote_types(D::UInt8, D::Int8) == D::Int16);
  CHECK(promote_types(D::UInt8, D::Int32) == D::Int32);
  CHECK(promote_types(D::Int64, D::Float16) == D::Float16);
  CHECK(promote_types(D::Float16, D::BFloat16) == D::Float32);
  CHECK(promote_types(D::BFloat16, D::Float64) == D::Float64);
  CHECK(promote_types(D::Int32, D::Int16) == D::Int32);
  for (DType a : kAllDTypes)
    for (DType b : kAllDTypes) CHECK(promote_types(a, b) == promote_types(b, a));
  // 0-d tensors do not widen dimensioned tensors of the same category, but do lift the category.
  CHECK(promoted_dtype(std::vector{T(D::Float32, {Dim(3)}), T(D::Float64, {})}) == D::Float32);
  CHECK(promoted_dtype(std::vector{T(D::Int32, {Dim(3)}), T(D::Float64, {})}) == D::Float64);
  CHECK(promoted_dtype(std::vector{T(D::Int8, {Dim(3)}), T(D::Int64, {})}) == D::Int8);
}

TEST_CASE("float16 and bfloat16 conversions round to nearest even", "[ir]") {
  CHECK(half_to_float(float_to_half(1.0f)) == 1.0f);
  CHECK(half_to_float(float_to_half(65504.0f)) == 65504.0f);
  CHECK(std::isinf(half_to_float(float_to_half(65520.0f))));
  CHECK(half_to_float(float_to_half(5.960464477539063e-08f)) == 5.960464477539063e-08f);  // smallest subnormal
  CHECK(half_to_float(float_to_half(1.0f + 1.0f / 2048)) == 1.0f);                       // tie to even
  CHECK(std::isnan(half_to_float(float_to_half(NAN))));
  CHECK(bf16_to_float(float_to_bf16(1.0f + 1.0f / 256)) == 1.0f);                         // tie to even
  CHECK(bf16_to_float(float_to_bf16(-3.5f)) == -3.5f);
  CHECK(std::isnan(bf16_to_float(float_to_bf16(NAN))));
  for (int bits = 0; bits < 0x10000; ++bits) {  // every finite half round-trips through float
    float f = half_to_float(static_cast<uint16_t>(bits));
    if (!std::isnan(f)) CHECK(float_to_half(f) == bits);
  }
}

TEST_CASE("symbolic dims: arithmetic, printing and parsing", "[ir][symbolic]") {
  Dim s0 = Dim::symbol(0), s1 = Dim::symbol(1);
  Dim e = s0 * s1 * Dim(2) + s0 + Dim(3);
  CHECK(e.str() == "2*s0*s1 + s0 + 3");
  CHECK(parse_dim(e.str()) == e);
  CHECK(parse_dim("(s0 + 1) * 2") == s0 * Dim(2) + Dim(2));
  CHECK((s0 - s0).is_static());
  CHECK(e.evaluate({4, 5}) == 2 * 4 * 5 + 4 + 3);
  CHECK((s0 * s1 * Dim(6)).exact_div(s1 * Dim(3)) == s0 * Dim(2));
  CHECK_THROWS_AS((s0 + Dim(1)).exact_div(Dim(2)), SymbolicShapeError);
  CHECK(Dim(7).floor_div(2) == Dim(3));
  CHECK(Dim(-7).floor_div(2) == Dim(-4));
  CHECK_THROWS_AS(s0.floor_div(2), SymbolicShapeError);
  CHECK_THROWS_AS(parse_dim("s0 +"), Error);
}

TEST_CASE("shape inference with symbolic dims", "[ir][symbolic]") {
  Dim s0 = Dim::symbol(0), s1 = Dim::symbol(1);
  // broadcasting: a symbol with 1, with itself
  CHECK(infer(Op::Add, {T(DType::Float32, {s0, Dim(1)}), T(DType::Float32, {Dim(1), s1})}).shape == Shape{s0, s1});
  CHECK(infer(Op::Add, {T(DType::Float32, {s0}), T(DType::Float32, {s0})}).shape == Shape{s0});
  // s0 vs s1 relies on a fact ([Note: symbolic facts]): taken as given without a sink; a sink
  // that knows the sizes records it as a guard when it holds and refuses it when it does not.
  CHECK(infer(Op::Add, {T(DType::Float32, {s0}), T(DType::Float32, {s1})}).shape == Shape{s0});
  struct Sizes : FactSink {
    SymbolValues values;
    std::vector<SymbolicFact> facts;
    bool check(const SymbolicFact& f) override {
      if (f.holds(values)) facts.push_back(f);
      return f.holds(values);
    }
  } sizes;
  sizes.values = {5, 5};
  {
    ScopedFactSink scope(&sizes);
    CHECK(infer(Op::Add, {T(DType::Float32, {s0}), T(DType::Float32, {s1})}).shape == Shape{s0});
    REQUIRE(sizes.facts.size() == 1);
    CHECK(sizes.facts[0].str() == "s0 - s1 == 0 ([add] broadcast dims equal)");
    sizes.values = {5, 6};
    CHECK_THROWS_AS(infer(Op::Add, {T(DType::Float32, {s0}), T(DType::Float32, {s1})}), SymbolicShapeError);
    // slice(x, 0, 3): s0 - 3 is not negative at 5, but would be at 2
    CHECK(infer(Op::Slice, {T(DType::Float32, {s0})}, {{"axis", int64_t(0)}, {"start", int64_t(3)}}).shape ==
          Shape{s0 - Dim(3)});
    CHECK(sizes.facts.at(1).str() == "s0 - 3 >= 0 ([slice] start within the dim)");
    sizes.values = {2, 2};
    CHECK_THROWS_AS(infer(Op::Slice, {T(DType::Float32, {s0})}, {{"axis", int64_t(0)}, {"start", int64_t(3)}}),
                    SymbolicShapeError);
  }
  // SymbolicShapeError is the tracer's signal, not a user error.
  static_assert(!std::is_base_of_v<Error, SymbolicShapeError>);
  // reshape with -1 divides symbolically; flatten multiplies
  CHECK(infer(Op::Reshape, {T(DType::Float32, {s0, Dim(4), Dim(6)})}, {{"shape", Shape{s0 * Dim(2), Dim(-1)}}}).shape ==
        Shape{s0 * Dim(2), Dim(12)});
  CHECK(infer(Op::Flatten, {T(DType::Float32, {s0, s1, Dim(3)})}).shape == Shape{s0 * s1 * Dim(3)});
  CHECK(infer(Op::Concat, {T(DType::Float32, {s0, Dim(2)}), T(DType::Float32, {s1, Dim(2)})}).shape == Shape{s0 + s1, Dim(2)});
  CHECK(infer(Op::MatMul, {T(DType::Float32, {Dim(5), s0, Dim(3)}), T(DType::Float32, {Dim(3), s1})}).shape ==
        Shape{Dim(5), s0, s1});
  CHECK(infer(Op::Sum, {T(DType::Int8, {s0, Dim(3)})}, {{"axes", std::vector<int64_t>{0}}}).dtype == DType::Int64);
  CHECK(infer(Op::Mean, {T(DType::Int8, {s0})}).dtype == DType::Float32);
  CHECK(infer(Op::Exp, {T(DType::Int32, {s0})}).dtype == DType::Float32);
  CHECK(infer(Op::Div, {T(DType::Int32, {s0}), T(DType::Int32, {})}).dtype == DType::Float32);
  CHECK(infer(Op::Lt, {T(DType::Int32, {s0}), T(DType::Float16, {})}).dtype == DType::Bool);
  CHECK(infer(Op::Conv2d, {T(DType::Float32, {s0, Dim(3), Dim(8), Dim(8)}), T(DType::Float32, {Dim(4), Dim(3), Dim(3), Dim(3)})},
              {{"padding", std::vector<int64_t>{1, 1}}}).shape == Shape{s0, Dim(4), Dim(8), Dim(8)});
  CHECK(infer(Op::Slice, {T(DType::Float32, {s0})}, {{"axis", int64_t{0}}, {"start", int64_t{1}}}).shape == Shape{s0 - Dim(1)});
  // x[:, :s1] of a static dim, and x[:, 2:3] of a symbolic one: a stated length
  CHECK(infer(Op::Slice, {T(DType::Float32, {Dim(2), Dim(64)})}, {{"axis", int64_t{1}}, {"length", Shape{s1}}}).shape ==
        Shape{Dim(2), s1});
  CHECK(infer(Op::Slice, {T(DType::Float32, {s0})}, {{"axis", int64_t{0}}, {"start", int64_t{2}}, {"length", Shape{Dim(1)}}})
            .shape == Shape{Dim(1)});
  CHECK_THROWS_AS(infer(Op::Slice, {T(DType::Float32, {Dim(4)})}, {{"axis", int64_t{0}}, {"start", int64_t{2}},
                                                                   {"step", int64_t{2}}, {"length", Shape{Dim(2)}}}),
                  Error);
  CHECK_THROWS_AS(infer(Op::Slice, {T(DType::Float32, {s0})}, {{"axis", int64_t{0}}, {"end", int64_t{3}},
                                                              {"length", Shape{Dim(3)}}}),
                  Error);
}

TEST_CASE("inference errors name the op and the values", "[ir][errors]") {
  auto message = [](const std::function<void()>& f) -> std::string {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  CHECK(message([] { infer(Op::MatMul, {T(DType::Float32, {Dim(8), Dim(3)}), T(DType::Float32, {Dim(4), Dim(5)})}); }) ==
        "[matmul] inner dimensions differ: [8, 3] @ [4, 5]");
  CHECK(message([] { infer(Op::Add, {T(DType::Float32, {Dim(2)}), T(DType::Float32, {Dim(3)})}); })
            .find("[add] shapes [2] and [3] cannot be broadcast") == 0);
  CHECK(kind_of([] { infer(Op::BitwiseAnd, {T(DType::Float32, {}), T(DType::Float32, {})}); }) == ErrorKind::Type);
  CHECK(kind_of([] { infer(Op::Where, {T(DType::Int32, {}), T(DType::Float32, {}), T(DType::Float32, {})}); }) == ErrorKind::Type);
  CHECK(kind_of([] { infer(Op::Neg, {T(DType::Bool, {})}); }) == ErrorKind::Type);
  CHECK(kind_of([] { infer(Op::Sum, {T(DType::Float32, {Dim(2)})}, {{"axes", std::vector<int64_t>{3}}}); }) == ErrorKind::Value);
  CHECK(kind_of([] { infer(Op::Sum, {T(DType::Float32, {Dim(2)})}, {{"axis", int64_t{0}}}); }) == ErrorKind::Value);
  CHECK(kind_of([] { infer(Op::Sum, {T(DType::Float32, {Dim(2)})}, {{"keepdim", int64_t{0}}}); }) == ErrorKind::Type);
  CHECK(kind_of([] { infer(Op::Reshape, {T(DType::Float32, {Dim(6)})}, {{"shape", Shape{Dim(4)}}}); }) == ErrorKind::Value);
  CHECK(kind_of([] { infer(Op::Max, {T(DType::Float32, {Dim(0)})}); }) == ErrorKind::Value);
  CHECK(kind_of([] { infer(Op::Gelu, {T(DType::Float32, {})}, {{"approximate", std::string("fast")}}); }) == ErrorKind::Value);
  CHECK(kind_of([] { infer(Op::Add, {T(DType::Float32, {})}); }) == ErrorKind::Value);
  CHECK(kind_of([] { infer(Op::Linear, {T(DType::Float32, {Dim(2), Dim(3)}), T(DType::Float64, {Dim(4), Dim(3)})}); }) ==
        ErrorKind::Type);
}

TEST_CASE("every op parses and prints back to the same text", "[ir][roundtrip]") {
  register_test_extern();
  std::string text = read_file("tests/data/every_op.ir");
  auto g = parse_graph(text);
  std::set<std::string> seen;
  for (const Node* n : g->nodes()) seen.insert(std::string(n->info().name));
  for (int i = 0; i < kNumOps; ++i) {
    std::string name(op_name(static_cast<Op>(i)));
    INFO("op " << name);
    CHECK(seen.count(name) == 1);
  }
  std::string printed = print(*g);
  auto again = parse_graph(printed);
  CHECK(print(*again) == printed);
  CHECK(structural_hash(*again) == structural_hash(*g));
  verify(*g);
  auto copy = g->clone();
  CHECK(print(*copy) == printed);
}

TEST_CASE("the structural hash is stable across processes", "[ir][hash]") {
  auto g = parse_graph("graph(%0: f32[4]) {\n  %1 = exp(%0) : f32[4]\n  return %1\n}\n");
  // A fixed value: it must not depend on pointers, the run or the process.
  CHECK(structural_hash(*g) == structural_hash(*parse_graph(print(*g))));
  auto other = parse_graph("graph(%0: f32[4]) {\n  %1 = log(%0) : f32[4]\n  return %1\n}\n");
  CHECK(structural_hash(*g) != structural_hash(*other));
  static const uint64_t expected = structural_hash(*g);
  CHECK(expected == 0x614d445b49d8f597ull);  // the first 8 bytes of SHA-256 of the printed text
}

TEST_CASE("the parser reports malformed text with its line", "[ir][errors]") {
  auto fails_with = [](const std::string& text, const std::string& part) {
    try {
      parse_graph(text);
    } catch (const Error& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(part) != std::string::npos);
      return;
    }
    FAIL("parsed: " << text);
  };
  fails_with("graph(%0: f32[4]) {\n  %1 = frob(%0) : f32[4]\n  return %1\n}\n", "line 2: unknown op 'frob'");
  fails_with("graph(%0: f32[4]) {\n  %1 = exp(%5) : f32[4]\n  return %1\n}\n", "%5 is not defined");
  fails_with("graph(%0: f32[4]) {\n  %1 = exp(%0) : f32[5]\n  return %1\n}\n", "declared type f32[5] differs");
  fails_with("graph(%0: q32[4]) {\n}\n", "unknown dtype 'q32'");
  fails_with("graph(%0: f32[4]) {\n  %1 = exp(%0) : f32[4]\n", "not closed");
  fails_with("graph(%0: f32[4]) {\n  %1 = sum(%0) {axes=[x]} : f32[]\n  return %1\n}\n", "expected an integer");
}

TEST_CASE("the verifier rejects broken graphs and names the node", "[ir][verifier]") {
  auto g = parse_graph("graph(%0: f32[4]) {\n  %1 = exp(%0) : f32[4]\n  %2 = neg(%1) : f32[4]\n  return %2\n}\n");
  verify(*g);
  Node* exp_node = g->nodes()[1];
  exp_node->types[0].shape = {Dim(5)};  // a pass that set a type by hand
  try {
    verify(*g);
    FAIL("verify accepted a wrong type");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Internal);
    CHECK(std::string(e.what()).find("at a 'exp' node") != std::string::npos);
    CHECK(std::string(e.what()).find("differs from the inferred f32[4]") != std::string::npos);
  }
  auto h = parse_graph("graph(%0: f32[4]) {\n  %1 = exp(%0) : f32[4]\n  %2 = neg(%1) : f32[4]\n  return %2\n}\n");
  auto nodes = h->nodes();
  h->set_input(nodes[2], 0, nodes[2]);  // uses itself: not defined before it
  CHECK_THROWS_AS(verify(*h), Error);
}

TEST_CASE("docs/ir.md lists every op with its registry doc line", "[ir][docs]") {
  std::string doc = read_file("docs/ir.md");
  for (int i = 0; i < kNumOps; ++i) {
    const OpInfo& info = op_info(static_cast<Op>(i));
    INFO("op " << info.name);
    size_t row = doc.find("| `" + std::string(info.name) + "` |");
    REQUIRE(row != std::string::npos);
    std::string line = doc.substr(row, doc.find('\n', row) - row);
    for (size_t at; (at = line.find("\\|")) != std::string::npos;) line.erase(at, 1);  // markdown's \|
    CHECK(line.find(std::string(info.doc)) != std::string::npos);
  }
}

// The names at the start of `text`, as "`a`, `b`, `c`" (whatever follows the list is prose).
std::vector<std::string> leading_names(const std::string& text) {
  std::vector<std::string> names;
  size_t at = 0;
  while (at < text.size() && text[at] == '`') {
    size_t close = text.find('`', at + 1);
    names.push_back(text.substr(at + 1, close - at - 1));
    at = close + 1;
    if (text.compare(at, 2, ", ") != 0) break;
    at += 2;
  }
  return names;
}

// The bullets under the paragraph of docs/ir.md's "The primitive set" section that starts with
// `heading`, each joined into one line.
std::vector<std::string> bullets_under(const std::string& doc, const std::string& heading) {
  size_t section = doc.find("## The primitive set");
  REQUIRE(section != std::string::npos);
  size_t at = doc.find("\n" + heading, section);
  REQUIRE(at != std::string::npos);
  at = doc.find("\n\n", at) + 2;
  std::istringstream lines(doc.substr(at, doc.find("\n\n", at) - at));
  std::vector<std::string> bullets;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("- ", 0) == 0) bullets.push_back(line.substr(2));
    else if (!bullets.empty()) bullets.back() += " " + line.substr(line.find_first_not_of(' '));
  }
  return bullets;
}

TEST_CASE("docs/ir.md's primitive set is the registry's: ops without a decomposition", "[ir][docs]") {
  std::string doc = read_file("docs/ir.md");
  std::multiset<std::string> primitives, composites;
  for (const std::string& bullet : bullets_under(doc, "Primitives, by kind"))  // "Kind: `a`, ..."
    for (const std::string& name : leading_names(bullet.substr(bullet.find(": ") + 2)))
      primitives.insert(name);
  for (const std::string& bullet : bullets_under(doc, "Composites, each"))  // "`a`, `b`: how"
    for (const std::string& name : leading_names(bullet)) composites.insert(name);
  for (int i = 0; i < kNumOps; ++i) {
    const OpInfo& info = op_info(static_cast<Op>(i));
    std::string name(info.name);
    INFO("op " << name);
    CHECK(primitives.count(name) == (info.has_decomposition() ? 0u : 1u));
    CHECK(composites.count(name) == (info.has_decomposition() ? 1u : 0u));
  }
  CHECK(primitives.size() + composites.size() == static_cast<size_t>(kNumOps));
}

TEST_CASE("float attributes print as the shortest %g that reads back", "[ir][attrs]") {
  auto text = [](double v) { return attr_str(Attr(v)); };
  CHECK(text(0.1) == "0.1");
  CHECK(text(2.0) == "2.0");
  CHECK(text(100.0) == "1e+02");  // %g with the fewest digits that read back
  CHECK(text(1e-05) == "1e-05");
  CHECK(text(1e16) == "1e+16");
  CHECK(text(123456789.0) == "123456789.0");
  CHECK(text(1.0 / 3) == "0.3333333333333333");
  CHECK(text(5e-324) == "5e-324");
  CHECK(text(-0.0) == "-0.0");
  CHECK(text(-std::numeric_limits<double>::infinity()) == "-inf");
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    uint64_t bits = rng();
    double v;
    std::memcpy(&v, &bits, sizeof v);
    if (std::isnan(v)) continue;
    std::string s = text(v);
    INFO(s);
    CHECK(std::strtod(s.c_str(), nullptr) == v);
  }
}

// Custom ops (frontend/custom_op.h): registered C++ functions that compiled code calls as extern
// nodes, without a graph break; their shape functions carry symbolic dims; passes keep them
// opaque; impure ones run on every call.
#include <ember/ember.h>

#include <atomic>
#include <cstring>

#include "runtime/element.h"
#include "tests/catch.h"
#include "tests/unit/helpers.h"

using namespace ember;

namespace {

std::atomic<int> row_sum_calls{0};
std::atomic<int> log_calls{0};

// (sum over the last dim, count of rows) of a float32 matrix: two outputs, the first with a
// symbolic dim when the input has one.
void register_row_sum() {
  register_op({
      .name = "test.row_sum",
      .shape =
          [](std::span<const TensorType> in, const Attrs&) {
            if (in.size() != 1 || in[0].shape.size() != 2 || in[0].dtype != DType::Float32)
              EMBER_THROW(Value, "[test.row_sum] takes one f32 matrix, got ", in.empty() ? "nothing" : in[0].str());
            return std::vector<TensorType>{{DType::Float32, {in[0].shape[0]}}, {DType::Int64, {}}};
          },
      .cpu =
          [](std::span<const Array> in, std::span<const Array> out, const Attrs& attrs) {
            ++row_sum_calls;
            double scale = attrs.count("scale") ? attr_float(attrs, "scale") : 1.0;
            const Array& x = in[0];
            int64_t rows = x.shape()[0], cols = x.shape()[1];
            for (int64_t r = 0; r < rows; ++r) {
              double s = 0;
              for (int64_t c = 0; c < cols; ++c) s += x.get(r * cols + c);
              out[0].data_as<float>()[r] = static_cast<float>(s * scale);
            }
            out[1].data_as<int64_t>()[0] = rows;
          },
  });
}

// A side effect and its input back: impure.
void register_log() {
  register_op({
      .name = "test.log",
      .shape = [](std::span<const TensorType> in, const Attrs&) { return std::vector<TensorType>{in[0]}; },
      .cpu =
          [](std::span<const Array> in, std::span<const Array> out, const Attrs&) {
            ++log_calls;
            Array src = in[0].contiguous();
            std::memcpy(out[0].data(), src.data(), src.numel() * itemsize(src.dtype()));
          },
      .pure = false,
  });
}


}  // namespace

TEST_CASE("a custom op runs eagerly and compiled, with no graph break", "[custom_ops]") {
  register_row_sum();
  auto fn = [](const Tensor& x) {
    auto out = call_op("test.row_sum", {relu(x)}, {{"scale", 0.5}});
    return std::vector<Tensor>{out[0] * 2.0, out[1]};
  };
  Tensor x = uniform({4, 3}, 1, -1, 1);
  auto f = compile(fn, Options{.fullgraph = true});
  for (int call = 0; call < 3; ++call) {
    auto got = f(x), want = fn(x);
    CHECK(test::same_bits(got[0], want[0]));
    CHECK(test::same_bits(got[1], want[1]));
  }
  Report r = f.report();
  CHECK(r.graph_count() == 1);
  CHECK(r.graph_break_count() == 0);
  CHECK(r.graphs[0].ops.at("extern") == 1);
  CHECK(r.graphs[0].ir.find("extern(") != std::string::npos);
  CHECK(r.graphs[0].ir.find("name=\"test.row_sum\"") != std::string::npos);
}

TEST_CASE("a custom op's shape function carries symbolic dims", "[custom_ops][dynamic]") {
  register_row_sum();
  int traces = 0;
  auto fn = [&](const Tensor& x) {
    ++traces;
    return call_op("test.row_sum", {x})[0] + 1.0;
  };
  auto f = compile(fn, Options{.dynamic = true});
  for (int64_t rows : {4, 7, 9}) {
    Tensor x = uniform({rows, 5}, rows);
    CHECK(test::same_bits(f(x), call_op("test.row_sum", {x})[0] + 1.0));
  }
  CHECK(traces == 1);
  CHECK(f.report().graphs[0].ir.find("f32[s0]") != std::string::npos);
}

TEST_CASE("custom op errors are clear and of the right kind", "[custom_ops][errors]") {
  register_row_sum();
  CHECK_THROWS_WITH(call_op("test.nope", {ones({2})}), Catch::Contains("[extern] no op is registered as 'test.nope'"));
  CHECK_THROWS_WITH(call_op("test.row_sum", {ones({2})}), Catch::StartsWith("[test.row_sum] takes one f32 matrix"));
  auto f = compile([](const Tensor& x) { return call_op("test.row_sum", {x})[0]; });
  CHECK_THROWS_WITH(f(ones({2})), Catch::StartsWith("[test.row_sum]"));
  CHECK_THROWS_AS(register_op({.name = "", .shape = nullptr, .cpu = nullptr}), Error);
  CHECK_THROWS_AS(register_op({.name = "test.no_cpu", .shape = [](auto, const Attrs&) { return std::vector<TensorType>{}; }}),
                  Error);
  // An op known to the IR without a CPU implementation is NotImplemented when it runs.
  register_extern_op({"test.shape_only", [](std::span<const TensorType> in, const Attrs&) {
                        return std::vector<TensorType>{in[0]};
                      }});
  try {
    call_op("test.shape_only", {ones({2})});
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::NotImplemented);
  }
  CHECK_THROWS_AS(call_op("test.row_sum", {ones({2, 2})}, {{"name", std::string("x")}}), Error);
  // Shape attributes are refused: the text form could not tell them from ints.
  CHECK_THROWS_AS(call_op("test.row_sum", {ones({2, 2})}, {{"dims", Shape{Dim(2)}}}), Error);
}

TEST_CASE("passes keep custom ops opaque: pure ones merge, impure ones always run", "[custom_ops][passes]") {
  register_row_sum();
  register_log();
  // Two identical pure calls: CSE merges them, so the op runs once per call.
  auto pure = compile([](const Tensor& x) {
    return call_op("test.row_sum", {x})[0] + call_op("test.row_sum", {x})[0];
  });
  Tensor x = ones({3, 2});
  pure(x);
  int before = row_sum_calls;
  pure(x);
  CHECK(row_sum_calls - before == 1);
  // Constant inputs are not folded through it either: it runs on every call.
  auto constant_in = compile([](const Tensor& x) { return x + call_op("test.row_sum", {ones({2, 2})})[0]; });
  constant_in(ones({2}));
  before = row_sum_calls;
  constant_in(ones({2}));
  CHECK(row_sum_calls - before == 1);
  // Impure: two calls are two calls, and an unused result still runs.
  auto impure = compile([](const Tensor& x) {
    call_op("test.log", {x});  // result dropped
    return call_op("test.log", {x})[0] * 2.0 + call_op("test.log", {x})[0];
  });
  impure(x);
  int logs = log_calls;
  Tensor y = impure(x);
  CHECK(log_calls - logs == 3);
  CHECK(test::same_bits(y, x * 2.0 + x));
  // A function whose only effect is an impure call still makes it, every call.
  auto only_effect = compile([](const Tensor& x) {
    call_op("test.log", {x});
    return x;
  });
  only_effect(x);
  logs = log_calls;
  only_effect(x);
  only_effect(x);
  CHECK(log_calls - logs == 2);
}

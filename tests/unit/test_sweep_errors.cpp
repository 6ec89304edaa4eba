// The op sweep of invalid inputs: each raises ember::Error of the right kind, naming its op.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "frontend/ops.h"
#include "frontend/trace.h"
#include "tests/catch.h"
#include "tests/unit/sweep.h"

namespace ember::sweep {
namespace {

template <class F>
std::optional<ErrorKind> error_kind(F&& f, std::string* message = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.kind();
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("op sweep: invalid inputs raise ember::Error of the right kind", "[sweep]") {
  Tensor f32 = ones({2, 3}), f64 = ones({3, 2}, DType::Float64), f16 = ones({3}, DType::Float16);
  Tensor i32 = ones({2, 3}, DType::Int32), b = ones({2, 3}, DType::Bool), fidx = zeros({2}),
         bidx = zeros({2}, DType::Bool);
  Tensor x4 = ones({1, 2, 4, 4}), w4 = ones({3, 2, 3, 3}), q = ones({2, 3, 4}),
         kv = ones({2, 5, 4});
  struct Bad {
    const char* what;
    ErrorKind kind;
    std::function<void()> call;
  };
  const std::vector<Bad> cases = {
      {"where with an int condition", ErrorKind::Type, [&] { where(i32, f32, f32); }},
      {"matmul f32 @ f64", ErrorKind::Type, [&] { matmul(f32, f64); }},
      {"matmul of integers", ErrorKind::Type, [&] { matmul(i32, ones({3, 2}, DType::Int32)); }},
      {"matmul inner dims differ", ErrorKind::Value, [&] { matmul(f32, ones({4, 5})); }},
      {"matmul of a 0-d tensor", ErrorKind::Value, [&] { matmul(ones({}), f32); }},
      {"linear with an f16 weight", ErrorKind::Type,
       [&] { linear(ones({2, 3}), ones({4, 3}, DType::Float16)); }},
      {"linear with an f64 bias", ErrorKind::Type,
       [&] { linear(ones({2, 3}), ones({4, 3}), ones({4}, DType::Float64)); }},
      {"linear features differ", ErrorKind::Value, [&] { linear(ones({2, 3}), ones({4, 5})); }},
      {"conv2d with an f64 weight", ErrorKind::Type,
       [&] { conv2d(x4, ones({3, 2, 3, 3}, DType::Float64)); }},
      {"conv2d channels differ from groups", ErrorKind::Value,
       [&] { conv2d(x4, w4, std::nullopt, {1, 1}, {0, 0}, {1, 1}, 2); }},
      {"conv2d window larger than the input", ErrorKind::Value,
       [&] { conv2d(ones({1, 2, 2, 2}), w4); }},
      {"avg_pool2d padding above half the kernel", ErrorKind::Value,
       [&] { avg_pool2d(x4, {2, 2}, {}, {2, 2}); }},
      {"sdpa with an f64 key", ErrorKind::Type,
       [&] { scaled_dot_product_attention(q, ones({2, 5, 4}, DType::Float64), kv); }},
      {"sdpa with an int mask", ErrorKind::Type,
       [&] { scaled_dot_product_attention(q, kv, kv, ones({3, 5}, DType::Int32)); }},
      {"sdpa mask that does not broadcast", ErrorKind::Value,
       [&] { scaled_dot_product_attention(q, kv, kv, ones({4, 5}, DType::Bool)); }},
      {"layer_norm with an f64 weight", ErrorKind::Type,
       [&] { layer_norm(f32, {3}, ones({3}, DType::Float64)); }},
      {"layer_norm weight of the wrong shape", ErrorKind::Value,
       [&] { layer_norm(f32, {3}, ones({2})); }},
      {"batch_norm with f16 statistics", ErrorKind::Type,
       [&] { batch_norm(ones({2, 3, 2}), f16, f16); }},
      {"index_select with a float index", ErrorKind::Type, [&] { index_select(f32, 0, fidx); }},
      {"index_select with a bool index", ErrorKind::Type, [&] { index_select(f32, 0, bidx); }},
      {"index_select index out of range", ErrorKind::Index,
       [&] { index_select(f32, 0, full({1}, 5)); }},
      {"gather with a float index", ErrorKind::Type, [&] { gather(f32, 1, zeros({2, 3})); }},
      {"gather index out of range", ErrorKind::Index, [&] { gather(f32, 1, full({2, 3}, 3)); }},
      {"embedding with a float index", ErrorKind::Type, [&] { embedding(f32, fidx); }},
      {"embedding index out of range", ErrorKind::Index, [&] { embedding(f32, full({2}, 2)); }},
      // Without `wrap` (the bridge's PyTorch semantics) a negative index is out of range too.
      {"index_select of a negative index without wrap", ErrorKind::Index,
       [&] { apply(Op::IndexSelect, {f32, full({1}, -1, DType::Int64)}, {{"axis", int64_t{0}}, {"wrap", false}}); }},
      {"gather of a negative index without wrap", ErrorKind::Index,
       [&] { apply(Op::Gather, {f32, full({2, 3}, -1, DType::Int64)}, {{"axis", int64_t{1}}, {"wrap", false}}); }},
      {"embedding of a negative index without wrap", ErrorKind::Index,
       [&] { apply(Op::Embedding, {f32, full({2}, -1, DType::Int64)}, {{"wrap", false}}); }},
      // Data-dependent, as eager's RuntimeError("ZeroDivisionError"): a Runtime error.
      {"integer floor_divide by zero", ErrorKind::Runtime,
       [&] { floor_divide(i32, zeros({2, 3}, DType::Int32)); }},
      {"integer remainder by zero", ErrorKind::Runtime,
       [&] { remainder(i32, zeros({2, 3}, DType::Int32)); }},
      {"integer pow to a negative power", ErrorKind::Value,
       [&] { ember::pow(full({2}, 3), full({2}, -1)); }},
      {"shapes that do not broadcast", ErrorKind::Value, [&] { add(f32, ones({4})); }},
      {"sub of bool tensors", ErrorKind::Type, [&] { sub(b, b); }},
      {"sub of a bool tensor and an integer one", ErrorKind::Type, [&] { sub(b, i32); }},  // PyTorch refuses it
      {"abs of a bool tensor", ErrorKind::Type, [&] { ember::abs(b); }},
      {"bitwise_and of floats", ErrorKind::Type, [&] { bitwise_and(f32, f32); }},
      {"gelu with an unknown approximation", ErrorKind::Value, [&] { gelu(f32, "fast"); }},
      {"reshape to the wrong size", ErrorKind::Value, [&] { reshape(f32, {4}); }},
      {"permute that is not a permutation", ErrorKind::Value, [&] { permute(f32, {0, 0}); }},
      {"slice with step 0", ErrorKind::Value, [&] { slice(f32, 0, 0, 2, 0); }},
      {"softmax axis out of range", ErrorKind::Value, [&] { softmax(f32, 2); }},
      {"sum with a repeated axis", ErrorKind::Value, [&] { sum(f32, {0, -2}); }},
      {"max over a zero-size dim", ErrorKind::Value, [&] { max(zeros({0, 3}), {0}); }},
      {"pad that makes a dim negative", ErrorKind::Value, [&] { pad(f32, {-2, -2}); }},
      {"uniform of an integer dtype", ErrorKind::Type,
       [&] { uniform({2}, 0, 0, 1, DType::Int32); }},
      {"uniform with low > high", ErrorKind::Value, [&] { uniform({2}, 0, 1, 0); }},
      {"normal with std < 0", ErrorKind::Value, [&] { normal({2}, 0, 0, -1); }},
      {"arange with step 0", ErrorKind::Value, [&] { arange(0, 5, 0); }},
      {"arange with the wrong step sign", ErrorKind::Value, [&] { arange(0, 5, -1); }},
      {"full with a negative dim", ErrorKind::Value, [&] { full({-1}, 1.0); }},
  };
  for (const Bad& bad : cases) {
    std::string message;
    std::optional<ErrorKind> kind = error_kind(bad.call, &message);
    INFO(bad.what << ": "
                  << (kind ? std::string(error_kind_name(*kind)) + " error: " + message
                           : std::string("no error")));
    CHECK(kind.has_value());
    if (kind) CHECK(error_kind_name(*kind) == std::string(error_kind_name(bad.kind)));
    if (kind) CHECK(message.rfind("[", 0) == 0);  // names the op first, in brackets
  }
}

}  // namespace ember::sweep

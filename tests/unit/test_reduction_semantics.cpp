// The reductions' declared semantics ([Note: reduction semantics] in ir/reduction.h): every
// reduction declares a combiner or a decomposition; each identity is neutral for its combiner;
// folding in the declared accumulator gives what the interpreter gives (exactly where the
// combiner only picks or the arithmetic is integer, within docs/testing.md's tolerance for float sums
// and products, which the interpreter accumulates in double).
#include <ember/ember.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ir/op.h"
#include "runtime/element.h"
#include "runtime/interpreter.h"
#include "tests/catch.h"

using namespace ember;

namespace {

std::vector<Op> primitive_reductions() {
  std::vector<Op> ops;
  for (int i = 0; i < kNumOps; ++i)
    if (op_info(static_cast<Op>(i)).reduction) ops.push_back(static_cast<Op>(i));
  return ops;
}

bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

// Values of dtype t to try the identity against, in the accumulator type T.
template <class T>
std::vector<T> probes(DType t) {
  if (is_bool(t)) return {0, 1};
  if constexpr (std::is_floating_point_v<T>) {
    const T inf = std::numeric_limits<T>::infinity();
    std::vector<T> v{0, T(-0.0), 1, -1, T(2.5), T(-7.25), inf, -inf,
                     std::numeric_limits<T>::quiet_NaN(), T(65504), T(-65504), T(1e-7)};
    if (t != DType::Float16) v.push_back(std::numeric_limits<T>::lowest());
    if (t != DType::Float16) v.push_back(std::numeric_limits<T>::max());
    return v;
  } else {
    alignas(8) unsigned char lo[8], hi[8];
    element::store<double>(lo, t, -1e300);  // saturates to the dtype's range
    element::store<double>(hi, t, 1e300);
    std::vector<T> v{0, 1, 17, element::load<int64_t>(lo, t), element::load<int64_t>(hi, t)};
    if (t != DType::UInt8) v.push_back(-20);
    return v;
  }
}

template <class T>
T identity_as(const ReductionSemantics& r, DType t) {
  Literal id = r.identity(t);
  REQUIRE(id.size() == 1);
  REQUIRE(id.dtype == r.accumulator(t));
  if constexpr (std::is_integral_v<T>) return id.ints[0];
  else return static_cast<T>(id.floats[0]);
}

// `v` as the dtype `t` would hold it.
double rounded(double v, DType t) {
  alignas(8) unsigned char buf[8];
  element::store<double>(buf, t, v);
  return element::load<double>(buf, t);
}

template <class T>
void check_neutral(Op op, DType t) {
  const ReductionSemantics& r = *op_info(op).reduction;
  T id = identity_as<T>(r, t);
  for (T v : probes<T>(t)) {
    INFO("op " << op_name(op) << ", dtype " << dtype_name(t) << ", value " << double(v));
    if (is_indexed(r.combiner)) {
      Indexed<T> x{v, 3}, left = combine_indexed<T>(r.combiner, {id, kNoIndex}, x),
                          right = combine_indexed<T>(r.combiner, x, {id, kNoIndex});
      CHECK((same(double(left.value), double(v)) && left.index == 3));
      CHECK((same(double(right.value), double(v)) && right.index == 3));
    } else {
      CHECK(same(double(combine(r.combiner, id, v)), double(v)));
      CHECK(same(double(combine(r.combiner, v, id)), double(v)));
    }
  }
}

// n values of dtype t with ties, and for floats a NaN or an infinity now and then.
std::vector<double> draw(DType t, int64_t n, std::mt19937_64& rng, bool specials) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) {
    double x = std::uniform_int_distribution<int>(-8, 8)(rng) * 0.375;
    if (!is_floating(t)) x = std::uniform_int_distribution<int>(is_bool(t) ? 0 : -3, 3)(rng);
    if (specials && is_floating(t) && rng() % 23 == 0)
      x = rng() % 3 == 0 ? NAN : rng() % 2 ? INFINITY : -INFINITY;
    v.push_back(rounded(x, t));
  }
  return v;
}

// The fold of `v` from the identity in the accumulator dtype, as generated code would do it: in
// T, rounded to the accumulator after each step (a no-op unless it is float16/bfloat16).
template <class T>
double fold(const ReductionSemantics& r, DType t, const std::vector<double>& v) {
  DType acc_dtype = r.accumulator(t);
  auto round = [&](T x) { return is_floating(acc_dtype) ? T(rounded(x, acc_dtype)) : x; };
  if (is_indexed(r.combiner)) {
    Indexed<T> acc{identity_as<T>(r, t), kNoIndex};
    for (size_t j = 0; j < v.size(); ++j)
      acc = combine_indexed<T>(r.combiner, acc, {static_cast<T>(v[j]), static_cast<int64_t>(j)});
    return static_cast<double>(acc.index);
  }
  T acc = identity_as<T>(r, t);
  for (double x : v) acc = round(combine(r.combiner, acc, static_cast<T>(x)));
  return static_cast<double>(acc);
}

double fold_in_accumulator(const ReductionSemantics& r, DType t, const std::vector<double>& v) {
  DType acc = r.accumulator(t);
  if (acc == DType::Float64) return fold<double>(r, t, v);
  if (is_floating(acc)) return fold<float>(r, t, v);
  return fold<int64_t>(r, t, v);  // integers and bool, exact in int64
}

struct Result {
  double value;
  DType dtype;
};

// The interpreter's result of `op` over all of `v`; for max_dim/min_dim (along axis 0) the
// index, which is what their combiner decides (the value is the element there).
Result interpret(Op op, DType t, const std::vector<double>& v) {
  Array x = Array::empty(t, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i)
    element::store<double>(static_cast<char*>(x.data()) + i * itemsize(t), t, v[i]);
  Attrs attrs;
  if (op == Op::MaxDim || op == Op::MinDim) attrs = {{"axis", int64_t{0}}};
  TensorType in{t, {Dim(static_cast<int64_t>(v.size()))}};
  std::vector<TensorType> outs = infer_types(op, std::span<const TensorType>(&in, 1), attrs);
  std::vector<Array> result = run_op(op, attrs, std::span<const Array>(&x, 1), outs);
  return {result.back().get(0), result.back().dtype()};
}

}  // namespace

TEST_CASE("every reduction declares a combiner or a decomposition, and every composite a "
          "decomposition", "[ir][semantics]") {
  for (int i = 0; i < kNumOps; ++i) {
    const OpInfo& info = op_info(static_cast<Op>(i));
    INFO("op " << info.name);
    if (info.is_reduction()) CHECK(info.reduction.has_value() != info.has_decomposition());
    else CHECK(!info.reduction);
    if (info.kind == OpKind::Composite) CHECK(info.has_decomposition());
  }
  // The primitive reductions of the brief, with their combiners.
  const std::pair<Op, Combiner> expected[] = {
      {Op::Sum, Combiner::Add},         {Op::Prod, Combiner::Mul},
      {Op::Max, Combiner::Max},         {Op::Min, Combiner::Min},
      {Op::ArgMax, Combiner::ArgMax},   {Op::ArgMin, Combiner::ArgMin},
      {Op::MaxDim, Combiner::ArgMax},   {Op::MinDim, Combiner::ArgMin}};
  CHECK(primitive_reductions().size() == std::size(expected));
  for (auto [op, combiner] : expected) {
    INFO("op " << op_name(op));
    REQUIRE(op_info(op).reduction);
    CHECK(op_info(op).reduction->combiner == combiner);
  }
}

TEST_CASE("each reduction's identity is the neutral element of its combiner", "[ir][semantics]") {
  for (Op op : primitive_reductions())
    for (DType t : kAllDTypes) {
      DType acc = op_info(op).reduction->accumulator(t);
      if (acc == DType::Float64) check_neutral<double>(op, t);
      else if (is_floating(acc)) check_neutral<float>(op, t);
      else check_neutral<int64_t>(op, t);
    }
}

TEST_CASE("the accumulator dtypes: float16/bfloat16 in float32, integer sums in int64",
          "[ir][semantics]") {
  const ReductionSemantics &sum = *op_info(Op::Sum).reduction, &max = *op_info(Op::Max).reduction;
  CHECK(sum.accumulator(DType::Float16) == DType::Float32);
  CHECK(sum.accumulator(DType::BFloat16) == DType::Float32);
  CHECK(sum.accumulator(DType::Float32) == DType::Float32);
  CHECK(sum.accumulator(DType::Float64) == DType::Float64);
  CHECK(max.accumulator(DType::BFloat16) == DType::Float32);
  CHECK(max.accumulator(DType::Int8) == DType::Int8);
  for (Op op : {Op::Sum, Op::Prod})
    for (DType t : kAllDTypes) {
      if (is_floating(t)) continue;
      // An integer sum or product is its accumulator: the output dtype is the accumulator's.
      Attrs attrs;
      TensorType in{t, {Dim(3)}};
      INFO("op " << op_name(op) << ", dtype " << dtype_name(t));
      CHECK(infer_type(op, std::span<const TensorType>(&in, 1), attrs).dtype ==
            op_info(op).reduction->accumulator(t));
    }
}

TEST_CASE("folding in the declared accumulator gives the interpreter's result",
          "[ir][semantics]") {
  std::mt19937_64 rng(20261201);
  for (Op op : primitive_reductions())
    for (DType t : kAllDTypes)
      for (int64_t n : {1, 2, 7, 100, 5000}) {
        const ReductionSemantics& r = *op_info(op).reduction;
        bool arithmetic = r.combiner == Combiner::Add || r.combiner == Combiner::Mul;
        std::vector<double> v = draw(t, n, rng, !arithmetic);
        if (r.combiner == Combiner::Mul && is_floating(t))  // products near 1 stay finite
          for (double& x : v) x = rounded(1 + x / 64, t);
        Result want = interpret(op, t, v);
        double got = rounded(fold_in_accumulator(r, t, v), want.dtype);
        INFO("op " << op_name(op) << ", dtype " << dtype_name(t) << ", n " << n);
        if (arithmetic && is_floating(t)) {
          double rtol = t == DType::Float32 ? 1.3e-5 : t == DType::Float64 ? 1e-12 : 2e-3;
          CHECK(std::fabs(got - want.value) <= 1.5e-5 + rtol * std::fabs(want.value));
        } else {
          CHECK(same(got, want.value));
        }
      }
}

namespace {

// The float32 tensor of these values repeated `times` times along a row.
Tensor repeated(std::vector<double> v, int64_t times, DType dt = DType::Float32) {
  std::vector<double> all;
  for (int64_t i = 0; i < times; ++i) all.insert(all.end(), v.begin(), v.end());
  return from_vector(all, {static_cast<int64_t>(all.size())}, dt);
}

// Compiled (generated kernels) against eager (the interpreter, folding in float64): the same
// infinities and NaNs, finite values within float32 rounding of the float64 fold.
void check_same_fold(const std::function<Tensor(const Tensor&)>& fn, const Tensor& x) {
  Tensor want = fn(x), got = compile(fn)(x);
  std::vector<double> w = want.to_vector(), g = got.to_vector();
  REQUIRE(w.size() == g.size());
  for (size_t i = 0; i < w.size(); ++i) {
    INFO("element " << i << ": compiled " << g[i] << ", eager " << w[i]);
    if (!std::isfinite(w[i])) CHECK(((std::isnan(w[i]) && std::isnan(g[i])) || w[i] == g[i]));
    else CHECK(std::abs(g[i] - w[i]) <= 1e-5 * std::abs(w[i]) + 1e-30);
  }
}

}  // namespace

TEST_CASE("generated float32 sums and products never show their accumulator's overflow",
          "[codegen][semantics]") {
  // [Note: overflow-safe folds] (codegen/cpu/emit_kernel.cpp): partial results past float32's
  // range, which a fold in float32 shows as inf or NaN and the interpreter's float64 fold not.
  using Fn = std::function<Tensor(const Tensor&)>;
  Fn row_sum = [](const Tensor& x) { return sum(x, {-1}); };
  Fn row_mean = [](const Tensor& x) { return mean(x * 1.0, {-1}); };
  Fn row_prod = [](const Tensor& x) { return prod(x, {-1}); };
  Fn column_sum = [](const Tensor& x) { return sum(reshape(x, {-1, 1}) * 2.0, {0}); };
  Fn fused = [](const Tensor& x) { return x / sum(x, {-1}, true) + mean(x, {-1}, true); };
  for (int64_t times : {1, 3, 40, 1000}) {  // the scalar tail, then vectors of 16 and blocks of 256
    INFO(times << " repetitions");
    Tensor big = repeated({3e38, 3e38, -3e38, 7e4}, times);
    for (const Fn& f : {row_sum, row_mean, column_sum, fused}) check_same_fold(f, big);
    check_same_fold(row_sum, repeated({3e38, -3e38}, times));
    check_same_fold(row_mean, repeated({3e38, 3e38}, times));  // a mean that fits, its sum not
    check_same_fold(row_prod, repeated({1e30, 1e30, 1e-30, 1e-30}, times));  // overflows in float32
    check_same_fold(row_prod, repeated({1e-30, 1e-30, 1e30, 1e30}, times));  // underflows to 0
    check_same_fold(row_sum, repeated({3e38, 3e38, -3e38, -3e38}, times, DType::BFloat16));
    // What truly overflows, and infinities and NaN in the input, stay as the reference has them.
    check_same_fold(row_sum, repeated({3e38, 3e38}, times));
    check_same_fold(row_sum, repeated({1.0, std::numeric_limits<double>::infinity()}, times));
    check_same_fold(row_prod, repeated({2.0, 0.0, std::nan("")}, times));
  }
}

TEST_CASE("generated float max and min find a NaN or an infinity anywhere in a row or column",
          "[codegen][semantics]") {
  // [Note: fast max folds] (codegen/cpu/emit_kernel.cpp): the first fold reads a NaN as an
  // infinity and a row whose result is infinite is folded again, exactly. Row i of an n x n
  // matrix holds the odd value at position i (the vectors, their lanes, the scalar tail), so
  // every position is met, in rows and, transposed, in columns.
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  using Fn = std::function<Tensor(const Tensor&)>;
  const std::vector<Fn> folds = {
      [](const Tensor& x) { return max(x, {-1}); },
      [](const Tensor& x) { return min(x, {-1}); },
      [](const Tensor& x) { return max(x, {0}); },  // down the columns
      [](const Tensor& x) { return min(x * 1.0, {0}); },
      [](const Tensor& x) { return softmax(x, -1); },  // a max feeding the row's other values
      [](const Tensor& x) { return x - max(x, {-1}, true) + min(x, {-1}, true); },
  };
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16})
    for (int64_t n : {1, 5, 16, 17, 64, 67, 300}) {
      for (double odd : {nan, inf, -inf}) {
        INFO(dtype_name(dt) << " n " << n << " odd value " << odd);
        std::vector<double> v(n * n);
        for (int64_t i = 0; i < n * n; ++i) v[i] = i / n == i % n ? odd : std::sin(double(i));
        Tensor x = from_vector(v, {n, n}, dt);
        for (size_t k = 0; k < folds.size(); ++k)
          if (dt != DType::Float16 || k < 4) check_same_fold(folds[k], x);  // float16 softmax rounds as it may
      }
      // Rows of only -inf (a max's identity), of only +inf, and of +inf and NaN both.
      for (std::vector<double> row : {std::vector<double>{-inf}, {inf}, {inf, nan}, {nan, inf}, {-0.0, 0.0}})
        for (size_t k = 0; k < 4; ++k) check_same_fold(folds[k], reshape(repeated(row, n, dt), {n, -1}));
    }
  // Which zero: a row of one zero and the other sign's zeros gives a zero (either sign).
  Tensor zeros = reshape(repeated({0.0, -0.0, -0.0}, 50), {3, 50});
  std::vector<double> got = compile(folds[0])(zeros).to_vector();
  for (double g : got) CHECK(g == 0.0);
}

// Capture fuzzing: random C++ programs run through ember::compile() and eagerly, compared bit
// for bit on every call.
//
// A program (struct Program) is a list of random steps, each an op and the values it reads (the
// arguments, captured tensors and earlier steps), interpreted by one generic lambda
// (program_lambda), so one closure type serves every program. Programs take tensor and scalar
// arguments (double, float, int64_t, int32_t, bool, in any order), read captured tensors, break
// the graph with item(), to_bool() and to_vector() and feed the values read to later ops (as
// operands, slice bounds, branch conditions), and return a std::vector<Tensor> that may hold the
// same tensor twice, an argument, a captured tensor or a view of an argument. The ops: unary and
// binary elementwise (division, pow, comparisons, bitwise), where, clamp, reductions with keepdim,
// slices with negative, out-of-range and size-derived bounds and steps, reshape / flatten /
// permute / transpose / expand / squeeze / unsqueeze, concat / stack, pad, pools and conv2d,
// matmul / linear, gather / index_select / embedding, casts, softmax / layer_norm, creation ops.
//
// Each program is called 4-6 times (struct CallSpec) with varying shapes of the same rank (sizes
// 1, 2, 3, 5, 8 and now and then 0), dtypes, layouts (transposed, strided, expanded), argument
// aliasing (f(a, a) then f(b, c)), captured tensors passed as arguments (f(w) then f(y)) and
// scalar values (-0.0 after 0.0, NaN, inf, float after double), under dynamic = unset, true and
// false. Inputs are normal or uniform with -0.0, NaN (both signs, with a payload, signalling),
// inf and denormals sprinkled in; steps are drawn so that most are valid on the first call.
//
// The contract checked on every call (compare()): if eager raises an ember::Error, the compiled
// call raises an ember::Error of the same kind; if eager succeeds, the compiled call succeeds with
// the same number of outputs, each of the same dtype and shape and with identical bytes (the sign
// of zero and NaN bits included), and an output that eagerly is one of the arguments is that
// same tensor.
//
// Programs run in batches in a child process, so a crash is a failure like any other. A failure
// names its seed and prints the program as pseudo-C++ with its calls, as found and minimised
// (calls, outputs, steps, arguments and argument features removed while the failure keeps its
// category); the test ends with a summary of the failure categories and their seeds.
//
// Environment:
//   EMBER_FUZZ_PROGRAMS=n     how many programs (default 3000, seeds kBaseSeed + 0 .. n-1)
//   EMBER_FUZZ_SEED=s         run the program with seed s only (seeds are printed on failure)
//   EMBER_FUZZ_DYNAMIC=unset|true|false   run one dynamic setting only
//   EMBER_FUZZ_SHOW=n         print the full report of the first n failures (default 3); the
//                             first failure of each category is printed at the end anyway
//   EMBER_FUZZ_MINIMIZE=0     do not minimise failing programs
//   EMBER_FUZZ_NAN_BITS=0     accept any NaN where eager has NaN (default: the bits must match)
//   EMBER_FUZZ_VERBOSE=1      print each seed before it runs
//   EMBER_FUZZ_FORK=0         run everything in this process (a crash then ends the test; the
//                             signal handler still names the seed)
//   EMBER_FUZZ_TRIAGE=1       minimise every failure and group them by category, features and ops
//   EMBER_FUZZ_AVOID=a,b|all  keep away from features behind known bugs, for triage (see avoid());
//                             seeds found with it reproduce only with it
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <typeinfo>
#include <variant>
#include <vector>

#include <cerrno>
#include <csignal>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ember/ember.h>

#include "runtime/array.h"
#include "runtime/element.h"
#include "tests/catch.h"

using namespace ember;

namespace {

// ---------------------------------------------------------------------------------------------
// Settings

constexpr uint64_t kBaseSeed = 0x5EED0000;
constexpr int kDefaultPrograms = 3000;

int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  return std::strtoll(v, nullptr, 0);
}

std::string env_str(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// Triage: EMBER_FUZZ_AVOID=a,b,... (or all) keeps the generator away from some features, so that
// while a known class of bug is being fixed the others still show:
//   alias         the same tensor passed twice in a call
//   captured-arg  a captured tensor passed as an argument
//   dup-outputs   the same tensor returned twice
//   arg-outputs   an argument or a captured tensor returned as it is
//   scalar-twins  scalar arguments that only -0.0/0.0, the NaN sign or float/double tell apart
//   neg-slice     slice bounds other than [0, end) (symbolic slice lengths)
//   nan-sign      -NaN constants
//   int-div       floor_divide and remainder (integer division by zero in dead code)
//   dead-code     every value computed is also returned (an error in dead code is not raised)
bool avoid(const char* what) {
  static const std::string list = "," + env_str("EMBER_FUZZ_AVOID") + ",";
  return list == ",all," || list.find("," + std::string(what) + ",") != std::string::npos;
}

// ---------------------------------------------------------------------------------------------
// Values: tensors, and numbers (scalar arguments, values read with item(), constants)

constexpr int64_t kToEnd = std::numeric_limits<int64_t>::max();

// A number with the C++ type it has in the program.
struct Num {
  enum Kind : uint8_t { F64, F32, I64, I32, Bool } kind = F64;
  double f = 0;   // F64, F32 (an F32 value is exactly a float)
  int64_t i = 0;  // I64, I32, Bool

  static Num f64(double v) { return {F64, v, 0}; }
  static Num f32(float v) { return {F32, static_cast<double>(v), 0}; }
  static Num i64(int64_t v) { return {I64, 0, v}; }
  static Num i32(int32_t v) { return {I32, 0, v}; }
  static Num boolean(bool v) { return {Bool, 0, v ? 1 : 0}; }

  bool is_float() const { return kind == F64 || kind == F32; }
  Scalar scalar() const {
    switch (kind) {
      case F64: return Scalar(f);
      case F32: return Scalar(static_cast<float>(f));
      case I64: return Scalar(i);
      case I32: return Scalar(static_cast<int32_t>(i));
      case Bool: return Scalar(i != 0);
    }
    return Scalar(0);
  }
  // The dtype matching the C++ type: what a program that keeps the argument's precision uses.
  DType dtype() const {
    switch (kind) {
      case F64: return DType::Float64;
      case F32: return DType::Float32;
      case I64: return DType::Int64;
      case I32: return DType::Int32;
      case Bool: return DType::Bool;
    }
    return DType::Float64;
  }
  bool truthy() const { return is_float() ? f != 0 : i != 0; }  // NaN is true, as in C++
  // A small integer for slice bounds.
  int64_t as_index() const {
    if (is_float()) return std::isnan(f) ? 0 : static_cast<int64_t>(std::clamp(f, -20.0, 20.0));
    return std::clamp<int64_t>(i, -20, 20);
  }
  const char* type_name() const {
    static const char* names[] = {"double", "float", "int64_t", "int32_t", "bool"};
    return names[kind];
  }
  // Same C++ type and the same bits.
  bool identical(const Num& o) const {
    if (kind != o.kind) return false;
    if (is_float()) return std::bit_cast<uint64_t>(f) == std::bit_cast<uint64_t>(o.f);
    return i == o.i;
  }
  std::string str() const {
    if (kind == Bool) return i ? "true" : "false";
    if (kind == I64) return "int64_t{" + std::to_string(i) + "}";
    if (kind == I32) return "int32_t{" + std::to_string(i) + "}";
    const char* suffix = kind == F32 ? "f" : "";
    std::string lim = kind == F32 ? "std::numeric_limits<float>::" : "std::numeric_limits<double>::";
    if (std::isnan(f)) return std::string(std::signbit(f) ? "-" : "") + lim + "quiet_NaN()";
    if (std::isinf(f)) return std::string(f < 0 ? "-" : "") + lim + "infinity()";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g", f);
    std::string s = buf;
    if (s.find_first_of(".e") == std::string::npos) s += ".0";
    return s + suffix;
  }
};

// One argument of a call, with its C++ type.
using Arg = std::variant<Tensor, double, float, int64_t, int32_t, bool>;

Num num_of(const Arg& a) {
  switch (a.index()) {
    case 1: return Num::f64(std::get<double>(a));
    case 2: return Num::f32(std::get<float>(a));
    case 3: return Num::i64(std::get<int64_t>(a));
    case 4: return Num::i32(std::get<int32_t>(a));
    case 5: return Num::boolean(std::get<bool>(a));
  }
  throw std::logic_error("num_of: a tensor");
}

Arg arg_of(const Num& n) {
  switch (n.kind) {
    case Num::F64: return n.f;
    case Num::F32: return static_cast<float>(n.f);
    case Num::I64: return n.i;
    case Num::I32: return static_cast<int32_t>(n.i);
    case Num::Bool: return n.i != 0;
  }
  return n.f;
}

std::string dtype_str(DType t) { return std::string(dtype_name(t)); }

std::string ints_str(const std::vector<int64_t>& v) {
  std::string s = "{";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + (v[i] == kToEnd ? std::string("INT64_MAX") : std::to_string(v[i]));
  return s + "}";
}

std::string dtype_cpp(DType t) {
  switch (t) {
    case DType::Bool: return "DType::Bool";
    case DType::Int8: return "DType::Int8";
    case DType::Int16: return "DType::Int16";
    case DType::Int32: return "DType::Int32";
    case DType::Int64: return "DType::Int64";
    case DType::UInt8: return "DType::UInt8";
    case DType::Float16: return "DType::Float16";
    case DType::BFloat16: return "DType::BFloat16";
    case DType::Float32: return "DType::Float32";
    case DType::Float64: return "DType::Float64";
  }
  return "?";
}

// ---------------------------------------------------------------------------------------------
// Programs

// What a step does. Every step pushes one value: a number for Item and ConstNum, else a tensor.
enum class K : uint8_t {
  Unary,        // op(x)
  Binary,       // op(x, y)
  BinaryConst,  // op(x, c) or op(c, x)
  BinaryNum,    // op(x, n) or op(n, x): a scalar argument or a value read with item()
  Where,        // where(cmp(x, y), a, b)
  WhereConst,   // where(x > 0, a, c) or where(x > 0, c, a)
  Clamp,        // clamp(x, lo?, hi?) with constant or number bounds
  ClampTensor,  // clamp(x, lo, hi)
  Reduce,       // op(x, axes, keepdim)
  Slice,        // slice(x, axis, start, end, step) with constant bounds
  SliceSized,   // slice bounds computed from x.size(axis) (specialises a symbolic size)
  SliceNum,     // slice(x, axis, 0, n): the bound read from data
  Reshape,      // reshape / flatten, in several forms
  Permute,      // permute(x, dims)
  Transpose,    // transpose(x, d0, d1)
  Expand,       // expand in several forms
  Squeeze,      // squeeze(x, axes)
  Unsqueeze,    // unsqueeze(x, axis)
  Concat,       // concat(xs, axis)
  Stack,        // stack(xs, axis)
  Pool,         // max_pool2d / avg_pool2d / adaptive_avg_pool2d
  MatMul,       // matmul / linear
  Cast,         // cast(x, dtype)
  Softmax,      // softmax / log_softmax / layer_norm
  Create,       // zeros / full / arange / uniform shaped after x
  NumTensor,    // a tensor made from a number
  Branch,       // n ? a : b (data-dependent control flow when n was read with item())
  Gather,       // gather / index_select / embedding with indices computed from data
  Pad,          // pad(x, pads, value), negative pads crop
  Conv,         // conv2d(x, w)
  Item,         // a number read from a tensor: a graph break
  Copy,         // t = x (what the minimiser leaves of a removed step)
  ConstNum,     // n = c (what the minimiser leaves of a removed Item)
};

struct Step {
  K kind = K::Copy;
  int op = 0;                 // which variant of the kind
  std::vector<int> t;         // tensor operands (indices into the tensor pool)
  std::vector<int> n;         // number operands (indices into the number pool)
  std::vector<int64_t> ints;  // axes, bounds, kernels, ...
  std::vector<Num> c;         // constants
  DType dtype = DType::Float32;
  bool flag = false, flag2 = false;

  bool makes_num() const { return kind == K::Item || kind == K::ConstNum; }
};

// What each argument position takes.
enum class Slot : uint8_t { Tensor, Floating, Integer, Boolean };

// How a call gets a tensor argument.
struct TensorSpec {
  enum Source : uint8_t { Fresh, Alias, Captured } source = Fresh;
  int ref = -1;  // Alias: an earlier argument position of the same call; Captured: which one
  DType dtype = DType::Float32;
  std::vector<int64_t> shape;
  int layout = 0;  // 0 contiguous, 1 transposed, 2 every other row, 3 expanded from size 1
  uint64_t data_seed = 0;
};

struct CallSpec {
  std::vector<std::variant<TensorSpec, Num>> args;  // by argument position
};

struct Program {
  std::vector<Slot> sig;
  std::vector<TensorSpec> captured_specs;
  std::vector<Tensor> captured;  // read by reference by the lambda: constants of the trace
  std::vector<Step> steps;
  std::vector<int> outputs;  // tensor pool indices, repeats allowed
  int recompile_limit = 8;

  int tensor_args() const { return static_cast<int>(std::count(sig.begin(), sig.end(), Slot::Tensor)); }
  int num_args() const { return static_cast<int>(sig.size()) - tensor_args(); }
  int first_step_tensor() const { return tensor_args() + static_cast<int>(captured.size()); }

  std::vector<Tensor> run(const std::vector<Arg>& args) const;
};

// ---------------------------------------------------------------------------------------------
// The ops, each in one place: run by eager calls, traced calls and the generator alike.

const char* const kUnaryNames[] = {"neg", "abs", "exp", "log", "sqrt", "sin", "tanh", "sigmoid", "relu",
                                   "floor", "round", "sign", "reciprocal", "isnan", "isinf", "logical_not",
                                   "gelu", "silu", "erf", "rsqrt", "expm1", "log1p", "trunc", "ceil"};
constexpr int kUnaryCount = sizeof(kUnaryNames) / sizeof(kUnaryNames[0]);

Tensor unary_op(int op, const Tensor& x) {
  switch (op) {
    case 0: return ember::neg(x);
    case 1: return ember::abs(x);
    case 2: return ember::exp(x);
    case 3: return ember::log(x);
    case 4: return ember::sqrt(x);
    case 5: return ember::sin(x);
    case 6: return ember::tanh(x);
    case 7: return ember::sigmoid(x);
    case 8: return ember::relu(x);
    case 9: return ember::floor(x);
    case 10: return ember::round(x);
    case 11: return ember::sign(x);
    case 12: return ember::reciprocal(x);
    case 13: return ember::isnan(x);
    case 14: return ember::isinf(x);
    case 15: return ember::logical_not(x);
    case 16: return ember::gelu(x);
    case 17: return ember::silu(x);
    case 18: return ember::erf(x);
    case 19: return ember::rsqrt(x);
    case 20: return ember::expm1(x);
    case 21: return ember::log1p(x);
    case 22: return ember::trunc(x);
    default: return ember::ceil(x);
  }
}

const char* const kBinaryNames[] = {"add", "sub", "mul", "div", "pow", "maximum", "minimum", "floor_divide",
                                    "remainder", "eq", "ne", "lt", "le", "gt", "ge", "logical_and",
                                    "logical_or", "bitwise_and", "bitwise_xor"};
constexpr int kBinaryCount = sizeof(kBinaryNames) / sizeof(kBinaryNames[0]);

template <class A, class B>
Tensor binary_op(int op, const A& a, const B& b) {
  switch (op) {
    case 0: return ember::add(a, b);
    case 1: return ember::sub(a, b);
    case 2: return ember::mul(a, b);
    case 3: return ember::div(a, b);
    case 4: return ember::pow(a, b);
    case 5: return ember::maximum(a, b);
    case 6: return ember::minimum(a, b);
    case 7: return ember::floor_divide(a, b);
    case 8: return ember::remainder(a, b);
    case 9: return ember::eq(a, b);
    case 10: return ember::ne(a, b);
    case 11: return ember::lt(a, b);
    case 12: return ember::le(a, b);
    case 13: return ember::gt(a, b);
    case 14: return ember::ge(a, b);
    case 15: return ember::logical_and(a, b);
    case 16: return ember::logical_or(a, b);
    case 17: return ember::bitwise_and(a, b);
    default: return ember::bitwise_xor(a, b);
  }
}

const char* const kCompareNames[] = {"gt", "lt", "eq", "ne", "isnan"};

Tensor compare_op(int op, const Tensor& x, const Tensor& y) {
  switch (op) {
    case 0: return ember::gt(x, y);
    case 1: return ember::lt(x, y);
    case 2: return ember::eq(x, y);
    case 3: return ember::ne(x, y);
    default: return ember::isnan(x);
  }
}

const char* const kReduceNames[] = {"sum", "mean", "prod", "max", "min", "argmax", "argmin", "var", "std", "logsumexp"};
constexpr int kReduceCount = sizeof(kReduceNames) / sizeof(kReduceNames[0]);

Tensor reduce_op(int op, const Tensor& x, std::vector<int64_t> axes, bool keepdim) {
  switch (op) {
    case 0: return ember::sum(x, axes, keepdim);
    case 1: return ember::mean(x, axes, keepdim);
    case 2: return ember::prod(x, axes, keepdim);
    case 3: return ember::max(x, axes, keepdim);
    case 4: return ember::min(x, axes, keepdim);
    case 5: return ember::argmax(x, axes, keepdim);
    case 6: return ember::argmin(x, axes, keepdim);
    case 7: return ember::var(x, axes, 1.0, keepdim);
    case 8: return ember::std(x, axes, 1.0, keepdim);
    default: return ember::logsumexp(x, axes, keepdim);
  }
}

std::optional<Scalar> bound(const Step& s, int which, const std::vector<Num>& nums) {
  // ints[0]: bit 0 a lower bound, bit 1 an upper bound; a number operand replaces the first one.
  if (!(s.ints[0] & (1 << which))) return std::nullopt;
  if (which == 0 && !s.n.empty()) return nums[s.n[0]].scalar();
  return s.c[which].scalar();
}

void exec_step(const Step& s, std::vector<Tensor>& T, std::vector<Num>& N) {
  auto x = [&](size_t k) -> const Tensor& { return T[s.t[k]]; };
  switch (s.kind) {
    case K::Unary: T.push_back(unary_op(s.op, x(0))); return;
    case K::Binary: T.push_back(binary_op(s.op, x(0), x(1))); return;
    case K::BinaryConst:
      T.push_back(s.flag ? binary_op(s.op, s.c[0].scalar(), x(0)) : binary_op(s.op, x(0), s.c[0].scalar()));
      return;
    case K::BinaryNum: {
      Scalar v = N[s.n[0]].scalar();
      T.push_back(s.flag ? binary_op(s.op, v, x(0)) : binary_op(s.op, x(0), v));
      return;
    }
    case K::Where: T.push_back(where(compare_op(s.op, x(0), x(1)), x(2), x(3))); return;
    case K::WhereConst: {
      Tensor cond = gt(x(0), 0.0);
      T.push_back(s.flag ? where(cond, s.c[0].scalar(), x(1)) : where(cond, x(1), s.c[0].scalar()));
      return;
    }
    case K::Clamp: T.push_back(clamp(x(0), bound(s, 0, N), bound(s, 1, N))); return;
    case K::ClampTensor: T.push_back(clamp(x(0), x(1), x(2))); return;
    case K::Reduce: T.push_back(reduce_op(s.op, x(0), s.ints, s.flag)); return;
    case K::Slice: T.push_back(slice(x(0), s.ints[0], s.ints[1], s.ints[2], s.ints[3])); return;
    case K::SliceSized: {
      int64_t axis = s.ints[0], start = s.ints[1], off = s.ints[2];
      if (s.op == 0) T.push_back(slice(x(0), axis, start, static_cast<int64_t>(x(0).size(axis)) + off));
      else T.push_back(slice(x(0), axis, static_cast<int64_t>(x(0).size(axis) / 2) + off));
      return;
    }
    case K::SliceNum:
      T.push_back(slice(x(0), s.ints[0], 0, avoid("neg-slice") ? std::max<int64_t>(0, N[s.n[0]].as_index()) : N[s.n[0]].as_index()));
      return;
    case K::Reshape:
      switch (s.op) {
        case 0: T.push_back(reshape(x(0), {-1})); return;
        case 1: T.push_back(flatten(x(0), s.ints[0], s.ints[1])); return;
        case 2: {  // merge the first two dims, keeping sizes symbolic
          SymShape sz = x(0).sizes();
          if (sz.size() < 2) EMBER_THROW(Value, "[fuzz] needs two dims");  // raised alike on both paths
          SymShape target{sz[0] * sz[1]};
          target.insert(target.end(), sz.begin() + 2, sz.end());
          T.push_back(reshape(x(0), target));
          return;
        }
        case 3: T.push_back(reshape(x(0), {1, -1})); return;
        case 4: {  // fixed sizes (as the generator saw them)
          SymShape target(s.ints.begin(), s.ints.end());
          T.push_back(reshape(x(0), target));
          return;
        }
        case 5: {  // the concrete shape reversed: specialises every dim
          std::vector<int64_t> shape = x(0).shape();
          std::reverse(shape.begin(), shape.end());
          T.push_back(reshape(x(0), SymShape(shape.begin(), shape.end())));
          return;
        }
        default: T.push_back(reshape(x(0), {x(0).size(-1), -1})); return;
      }
    case K::Permute: T.push_back(permute(x(0), s.ints)); return;
    case K::Transpose: T.push_back(transpose(x(0), s.ints[0], s.ints[1])); return;
    case K::Expand:
      switch (s.op) {
        case 0: T.push_back(expand(x(0), x(1).sizes())); return;
        case 1: {
          SymShape sz = x(0).sizes();
          sz.insert(sz.begin(), SymInt(s.ints[0]));
          T.push_back(expand(unsqueeze(x(0), 0), sz));
          return;
        }
        default: T.push_back(expand(x(0), SymShape(s.ints.begin(), s.ints.end()))); return;
      }
    case K::Squeeze: T.push_back(squeeze(x(0), s.ints)); return;
    case K::Unsqueeze: T.push_back(unsqueeze(x(0), s.ints[0])); return;
    case K::Concat:
    case K::Stack: {
      std::vector<Tensor> xs;
      for (int i : s.t) xs.push_back(T[i]);
      T.push_back(s.kind == K::Concat ? concat(xs, s.ints[0]) : stack(xs, s.ints[0]));
      return;
    }
    case K::Pool: {
      const auto& v = s.ints;  // kh, kw, sh, sw (sh < 0: stride = kernel), ph, pw, dilation
      std::vector<int64_t> stride = v[2] < 0 ? std::vector<int64_t>{} : std::vector<int64_t>{v[2], v[3]};
      if (s.op == 0) T.push_back(max_pool2d(x(0), {v[0], v[1]}, stride, {v[4], v[5]}, {v[6], v[6]}, s.flag));
      else if (s.op == 1) T.push_back(avg_pool2d(x(0), {v[0], v[1]}, stride, {v[4], v[5]}, s.flag, s.flag2));
      else T.push_back(adaptive_avg_pool2d(x(0), {v[0], v[1]}));
      return;
    }
    case K::MatMul:
      switch (s.op) {
        case 0: T.push_back(matmul(x(0), x(1))); return;
        case 1: T.push_back(matmul(x(0), transpose(x(0), -1, -2))); return;
        case 2: T.push_back(linear(x(0), x(1))); return;
        default: T.push_back(linear(x(0), x(1), x(2))); return;
      }
    case K::Cast: T.push_back(cast(x(0), s.dtype)); return;
    case K::Softmax:
      switch (s.op) {
        case 0: T.push_back(softmax(x(0), s.ints[0])); return;
        case 1: T.push_back(log_softmax(x(0), s.ints[0])); return;
        default: T.push_back(layer_norm(x(0), {x(0).size(-1)})); return;
      }
    case K::Create:
      switch (s.op) {
        case 0: T.push_back(zeros(x(0).sizes(), s.dtype)); return;
        case 1: T.push_back(full(x(0).sizes(), s.c[0].scalar())); return;
        case 2: T.push_back(arange(static_cast<int64_t>(x(0).size(0)))); return;
        case 3: T.push_back(uniform(x(0).sizes(), s.ints[0])); return;
        default: T.push_back(full({}, s.c[0].scalar(), s.dtype)); return;
      }
    case K::NumTensor: {
      const Num& v = N[s.n[0]];
      if (s.op == 0) T.push_back(scalar_tensor(v.scalar(), v.dtype()));
      else T.push_back(full(x(0).sizes(), v.scalar()));
      return;
    }
    case K::Branch: T.push_back(N[s.n[0]].truthy() ? x(0) : x(1)); return;
    case K::Gather:
      switch (s.op) {
        case 0: T.push_back(gather(x(0), s.ints[0], argmax(x(1), {s.ints[0]}, true))); return;
        case 1: T.push_back(index_select(x(0), s.ints[0], argmax(x(1)))); return;
        case 2: T.push_back(index_select(x(0), s.ints[0], reshape(cast(x(1), DType::Int64), {-1}))); return;
        default: T.push_back(embedding(x(0), cast(x(1), DType::Int64))); return;
      }
    case K::Pad: T.push_back(pad(x(0), s.ints, s.c[0].f)); return;
    case K::Conv:
      T.push_back(conv2d(x(0), x(1), std::nullopt, {s.ints[0], s.ints[0]}, {s.ints[1], s.ints[1]}, {s.ints[2], s.ints[2]}));
      return;
    case K::Item:
      switch (s.op) {
        case 0: N.push_back(Num::f64(sum(x(0)).item<double>())); return;
        case 1: N.push_back(Num::f32(max(x(0)).item<float>())); return;
        case 2: N.push_back(Num::i64(argmax(x(0)).item<int64_t>())); return;
        case 3: N.push_back(Num::boolean((sum(x(0)) > 0.0).to_bool())); return;
        case 4: N.push_back(Num::f64(x(0).item<double>())); return;
        case 5: N.push_back(Num::i32(mean(x(0)).item<int32_t>())); return;
        default: {
          std::vector<double> v = x(0).to_vector();
          N.push_back(Num::f64(v.empty() ? -1.0 : v.back()));
          return;
        }
      }
    case K::Copy: T.push_back(x(0)); return;
    case K::ConstNum: N.push_back(s.c[0]); return;
  }
}

std::vector<Tensor> Program::run(const std::vector<Arg>& args) const {
  std::vector<Tensor> T;
  std::vector<Num> N;
  T.reserve(args.size() + captured.size() + steps.size());
  for (const Arg& a : args) {
    if (auto* t = std::get_if<Tensor>(&a)) T.push_back(*t);
    else N.push_back(num_of(a));
  }
  for (const Tensor& w : captured) T.push_back(w);
  for (const Step& s : steps) exec_step(s, T, N);
  std::vector<Tensor> out;
  for (int o : outputs) {
    // Triage: control flow (n ? a : b) can return the same tensor twice, or an input, at run time.
    auto same = [&](const Tensor& t) { return t.impl() == T[o].impl(); };
    if (avoid("dup-outputs") && std::any_of(out.begin(), out.end(), same)) continue;
    if (avoid("arg-outputs") && std::any_of(T.begin(), T.begin() + first_step_tensor(), same)) continue;
    out.push_back(T[o]);
  }
  if (avoid("dead-code"))  // every value computed is returned too
    for (size_t t = static_cast<size_t>(first_step_tensor()); t < T.size(); ++t)
      if (std::none_of(out.begin(), out.end(), [&](const Tensor& o) { return o.impl() == T[t].impl(); })) out.push_back(T[t]);
  return out;
}

// One closure type for every program: it reads the program (and its captured tensors) by
// reference, and takes any mix of tensor and scalar arguments.
auto program_lambda(const Program& p) {
  return [&p](const auto&... a) -> std::vector<Tensor> {
    std::vector<Arg> args{Arg(std::in_place_type<std::decay_t<decltype(a)>>, a)...};
    return p.run(args);
  };
}
using ProgramLambda = decltype(program_lambda(std::declval<const Program&>()));

// ---------------------------------------------------------------------------------------------
// Printing a program as pseudo-C++

struct Names {
  std::vector<std::string> t, n;
};

Names names_of(const Program& p) {
  Names names;
  int slot = 0;
  for (Slot s : p.sig) {
    if (s == Slot::Tensor) names.t.push_back("a" + std::to_string(slot));
    else names.n.push_back("s" + std::to_string(slot));
    ++slot;
  }
  for (size_t k = 0; k < p.captured.size(); ++k) names.t.push_back("w" + std::to_string(k));
  for (const Step& s : p.steps) {
    if (s.makes_num()) names.n.push_back("n" + std::to_string(names.n.size()));
    else names.t.push_back("t" + std::to_string(names.t.size()));
  }
  return names;
}

std::string step_str(const Step& s, const Names& nm, const std::string& out) {
  auto x = [&](size_t k) { return nm.t[s.t[k]]; };
  auto num = [&](size_t k) { return nm.n[s.n[k]]; };
  std::ostringstream o;
  auto tensor = [&]() -> std::ostream& { return o << "Tensor " << out << " = "; };
  switch (s.kind) {
    case K::Unary: tensor() << kUnaryNames[s.op] << "(" << x(0) << ")"; break;
    case K::Binary: tensor() << kBinaryNames[s.op] << "(" << x(0) << ", " << x(1) << ")"; break;
    case K::BinaryConst:
      tensor() << kBinaryNames[s.op] << "(" << (s.flag ? s.c[0].str() + ", " + x(0) : x(0) + ", " + s.c[0].str()) << ")";
      break;
    case K::BinaryNum:
      tensor() << kBinaryNames[s.op] << "(" << (s.flag ? num(0) + ", " + x(0) : x(0) + ", " + num(0)) << ")";
      break;
    case K::Where:
      tensor() << "where(" << kCompareNames[s.op] << "(" << x(0) << (s.op == 4 ? "" : ", " + x(1)) << "), " << x(2)
               << ", " << x(3) << ")";
      break;
    case K::WhereConst:
      tensor() << "where(" << x(0) << " > 0.0, " << (s.flag ? s.c[0].str() + ", " + x(1) : x(1) + ", " + s.c[0].str()) << ")";
      break;
    case K::Clamp: {
      auto b = [&](int which) -> std::string {
        if (!(s.ints[0] & (1 << which))) return "std::nullopt";
        if (which == 0 && !s.n.empty()) return num(0);
        return s.c[which].str();
      };
      tensor() << "clamp(" << x(0) << ", " << b(0) << ", " << b(1) << ")";
      break;
    }
    case K::ClampTensor: tensor() << "clamp(" << x(0) << ", " << x(1) << ", " << x(2) << ")"; break;
    case K::Reduce:
      tensor() << kReduceNames[s.op] << "(" << x(0) << ", " << ints_str(s.ints) << ", /*keepdim=*/" << (s.flag ? "true" : "false") << ")";
      break;
    case K::Slice:
      tensor() << "slice(" << x(0) << ", " << s.ints[0] << ", " << s.ints[1] << ", "
               << (s.ints[2] == kToEnd ? std::string("INT64_MAX") : std::to_string(s.ints[2])) << ", " << s.ints[3] << ")";
      break;
    case K::SliceSized:
      if (s.op == 0)
        tensor() << "slice(" << x(0) << ", " << s.ints[0] << ", " << s.ints[1] << ", int64_t(" << x(0) << ".size("
                 << s.ints[0] << ")) + " << s.ints[2] << ")";
      else
        tensor() << "slice(" << x(0) << ", " << s.ints[0] << ", int64_t(" << x(0) << ".size(" << s.ints[0] << ") / 2) + "
                 << s.ints[2] << ")";
      break;
    case K::SliceNum: tensor() << "slice(" << x(0) << ", " << s.ints[0] << ", 0, clamp_to_20(" << num(0) << "))"; break;
    case K::Reshape:
      switch (s.op) {
        case 0: tensor() << "reshape(" << x(0) << ", {-1})"; break;
        case 1: tensor() << "flatten(" << x(0) << ", " << s.ints[0] << ", " << s.ints[1] << ")"; break;
        case 2: tensor() << "reshape(" << x(0) << ", {" << x(0) << ".size(0) * " << x(0) << ".size(1), <" << x(0) << ".sizes() from 2>})"; break;
        case 3: tensor() << "reshape(" << x(0) << ", {1, -1})"; break;
        case 4: tensor() << "reshape(" << x(0) << ", " << ints_str(s.ints) << ")"; break;
        case 5: tensor() << "reshape(" << x(0) << ", reversed(" << x(0) << ".shape()))"; break;
        default: tensor() << "reshape(" << x(0) << ", {" << x(0) << ".size(-1), -1})"; break;
      }
      break;
    case K::Permute: tensor() << "permute(" << x(0) << ", " << ints_str(s.ints) << ")"; break;
    case K::Transpose: tensor() << "transpose(" << x(0) << ", " << s.ints[0] << ", " << s.ints[1] << ")"; break;
    case K::Expand:
      if (s.op == 0) tensor() << "expand(" << x(0) << ", " << x(1) << ".sizes())";
      else if (s.op == 1) tensor() << "expand(unsqueeze(" << x(0) << ", 0), {" << s.ints[0] << ", <" << x(0) << ".sizes()>})";
      else tensor() << "expand(" << x(0) << ", " << ints_str(s.ints) << ")";
      break;
    case K::Squeeze: tensor() << "squeeze(" << x(0) << ", " << ints_str(s.ints) << ")"; break;
    case K::Unsqueeze: tensor() << "unsqueeze(" << x(0) << ", " << s.ints[0] << ")"; break;
    case K::Concat:
    case K::Stack: {
      tensor() << (s.kind == K::Concat ? "concat({" : "stack({");
      for (size_t i = 0; i < s.t.size(); ++i) o << (i ? ", " : "") << x(i);
      o << "}, " << s.ints[0] << ")";
      break;
    }
    case K::Pool: {
      const auto& v = s.ints;
      std::string stride = v[2] < 0 ? "{}" : "{" + std::to_string(v[2]) + ", " + std::to_string(v[3]) + "}";
      std::string kernel = "{" + std::to_string(v[0]) + ", " + std::to_string(v[1]) + "}";
      std::string pad = "{" + std::to_string(v[4]) + ", " + std::to_string(v[5]) + "}";
      if (s.op == 0)
        tensor() << "max_pool2d(" << x(0) << ", " << kernel << ", " << stride << ", " << pad << ", {" << v[6] << ", " << v[6]
                 << "}, /*ceil_mode=*/" << s.flag << ")";
      else if (s.op == 1)
        tensor() << "avg_pool2d(" << x(0) << ", " << kernel << ", " << stride << ", " << pad << ", /*ceil_mode=*/" << s.flag
                 << ", /*count_include_pad=*/" << s.flag2 << ")";
      else tensor() << "adaptive_avg_pool2d(" << x(0) << ", " << kernel << ")";
      break;
    }
    case K::MatMul:
      if (s.op == 0) tensor() << "matmul(" << x(0) << ", " << x(1) << ")";
      else if (s.op == 1) tensor() << "matmul(" << x(0) << ", transpose(" << x(0) << ", -1, -2))";
      else if (s.op == 2) tensor() << "linear(" << x(0) << ", " << x(1) << ")";
      else tensor() << "linear(" << x(0) << ", " << x(1) << ", " << x(2) << ")";
      break;
    case K::Cast: tensor() << "cast(" << x(0) << ", " << dtype_cpp(s.dtype) << ")"; break;
    case K::Softmax:
      if (s.op == 0) tensor() << "softmax(" << x(0) << ", " << s.ints[0] << ")";
      else if (s.op == 1) tensor() << "log_softmax(" << x(0) << ", " << s.ints[0] << ")";
      else tensor() << "layer_norm(" << x(0) << ", {" << x(0) << ".size(-1)})";
      break;
    case K::Create:
      if (s.op == 0) tensor() << "zeros(" << x(0) << ".sizes(), " << dtype_cpp(s.dtype) << ")";
      else if (s.op == 1) tensor() << "full(" << x(0) << ".sizes(), " << s.c[0].str() << ")";
      else if (s.op == 2) tensor() << "arange(int64_t(" << x(0) << ".size(0)))";
      else if (s.op == 3) tensor() << "uniform(" << x(0) << ".sizes(), /*seed=*/" << s.ints[0] << ")";
      else tensor() << "full({}, " << s.c[0].str() << ", " << dtype_cpp(s.dtype) << ")";
      break;
    case K::NumTensor:
      if (s.op == 0) tensor() << "scalar_tensor(" << num(0) << ", dtype_of<decltype(" << num(0) << ")>)";
      else tensor() << "full(" << x(0) << ".sizes(), " << num(0) << ")";
      break;
    case K::Branch: tensor() << num(0) << " ? " << x(0) << " : " << x(1) << "  // control flow on a value"; break;
    case K::Gather:
      if (s.op == 0) tensor() << "gather(" << x(0) << ", " << s.ints[0] << ", argmax(" << x(1) << ", {" << s.ints[0] << "}, true))";
      else if (s.op == 1) tensor() << "index_select(" << x(0) << ", " << s.ints[0] << ", argmax(" << x(1) << "))";
      else if (s.op == 2)
        tensor() << "index_select(" << x(0) << ", " << s.ints[0] << ", reshape(cast(" << x(1) << ", DType::Int64), {-1}))";
      else tensor() << "embedding(" << x(0) << ", cast(" << x(1) << ", DType::Int64))";
      break;
    case K::Pad: tensor() << "pad(" << x(0) << ", " << ints_str(s.ints) << ", " << s.c[0].str() << ")"; break;
    case K::Conv:
      tensor() << "conv2d(" << x(0) << ", " << x(1) << ", std::nullopt, /*stride=*/{" << s.ints[0] << ", " << s.ints[0]
               << "}, /*padding=*/{" << s.ints[1] << ", " << s.ints[1] << "}, /*dilation=*/{" << s.ints[2] << ", " << s.ints[2] << "})";
      break;
    case K::Item: {
      static const char* kinds[] = {"double", "float", "int64_t", "bool", "double", "int32_t", "double"};
      o << kinds[s.op] << " " << out << " = ";
      switch (s.op) {
        case 0: o << "sum(" << x(0) << ").item<double>()"; break;
        case 1: o << "max(" << x(0) << ").item<float>()"; break;
        case 2: o << "argmax(" << x(0) << ").item<int64_t>()"; break;
        case 3: o << "(sum(" << x(0) << ") > 0.0).to_bool()"; break;
        case 4: o << x(0) << ".item<double>()"; break;
        case 5: o << "mean(" << x(0) << ").item<int32_t>()"; break;
        default: o << x(0) << ".to_vector().back()  /* -1.0 when empty */"; break;
      }
      o << ";  // graph break";
      return o.str();
    }
    case K::Copy: tensor() << x(0); break;
    case K::ConstNum: o << s.c[0].type_name() << " " << out << " = " << s.c[0].str(); break;
  }
  o << ";";
  return o.str();
}

std::string spec_str(const TensorSpec& t) {
  static const char* layouts[] = {"contiguous", "transposed", "every other row", "expanded"};
  return dtype_str(t.dtype) + shape_str(to_shape(t.shape)) + " " + layouts[t.layout];
}

// The values of a small tensor, with their bits where they matter (-0.0, NaN).
std::string values_str(const Tensor& t) {
  const Array& a = t.array();
  if (a.numel() > 16) return "(" + std::to_string(a.numel()) + " values)";
  std::string s = "[";
  for (int64_t i = 0; i < a.numel(); ++i) {
    double v = a.get(i);
    char buf[48];
    if (std::isnan(v)) std::snprintf(buf, sizeof buf, "%snan", std::signbit(v) ? "-" : "");
    else std::snprintf(buf, sizeof buf, "%.6g", v);
    s += (i ? ", " : "") + std::string(buf);
  }
  return s + "]";
}

std::string program_str(const Program& p, std::optional<bool> dynamic) {
  Names nm = names_of(p);
  std::ostringstream o;
  for (size_t k = 0; k < p.captured.size(); ++k)
    o << "Tensor w" << k << " = " << spec_str(p.captured_specs[k]) << " " << values_str(p.captured[k])
      << ";  // captured by reference\n";
  o << "auto f = compile([&](";
  int slot = 0;
  for (Slot s : p.sig) {
    o << (slot ? ", " : "");
    if (s == Slot::Tensor) o << "const Tensor& a" << slot;
    else o << "auto s" << slot << " /*" << (s == Slot::Floating ? "double or float" : s == Slot::Integer ? "int64_t or int32_t" : "bool") << "*/";
    ++slot;
  }
  o << ") {\n";
  size_t t_index = p.first_step_tensor(), n_index = p.num_args();
  for (const Step& s : p.steps) {
    std::string out = s.makes_num() ? nm.n[n_index++] : nm.t[t_index++];
    o << "  " << step_str(s, nm, out) << "\n";
  }
  o << "  return std::vector<Tensor>{";
  for (size_t i = 0; i < p.outputs.size(); ++i) o << (i ? ", " : "") << nm.t[p.outputs[i]];
  o << "};\n}, Options{.dynamic = " << (dynamic ? (*dynamic ? "true" : "false") : "std::nullopt");
  if (p.recompile_limit != 8) o << ", .recompile_limit = " << p.recompile_limit;
  o << "});\n";
  return o.str();
}

std::string call_str(const Program& p, const CallSpec& c, const std::vector<Arg>& args, bool values) {
  std::ostringstream o;
  o << "f(";
  for (size_t i = 0; i < c.args.size(); ++i) {
    o << (i ? ", " : "");
    if (auto* n = std::get_if<Num>(&c.args[i])) {
      o << n->str();
      continue;
    }
    const TensorSpec& t = std::get<TensorSpec>(c.args[i]);
    if (t.source == TensorSpec::Alias) o << "<the same tensor as argument " << t.ref << ">";
    else if (t.source == TensorSpec::Captured) o << "w" << t.ref;
    else {
      o << spec_str(t);
      if (values) o << " " << values_str(std::get<Tensor>(args[i]));
    }
  }
  o << ")";
  (void)p;
  return o.str();
}

// ---------------------------------------------------------------------------------------------
// Random inputs

struct Rng {
  std::mt19937_64 g;
  explicit Rng(uint64_t seed) : g(seed) {}
  int64_t range(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(g); }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(g) < p; }
  double real(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(g); }
  double normal() { return std::normal_distribution<double>(0, 1)(g); }
  template <class T>
  const T& pick(const std::vector<T>& v) { return v[static_cast<size_t>(range(0, static_cast<int64_t>(v.size()) - 1))]; }
};

// Special float values, as bits: +-0, qNaN, -qNaN, a NaN with a payload, +-inf, +-1, a denormal,
// a signalling NaN (arithmetic quiets it: x * 1 is not x).
constexpr int kSpecials = 11;
const uint32_t kSpecialF32[kSpecials] = {0x00000000u, 0x80000000u, 0x7fc00000u, 0xffc00000u, 0x7fc00123u, 0x7f800000u,
                                         0xff800000u, 0x3f800000u, 0xbf800000u, 0x00000001u, 0x7fa00000u};
const uint64_t kSpecialF64[kSpecials] = {0x0000000000000000ull, 0x8000000000000000ull, 0x7ff8000000000000ull,
                                         0xfff8000000000000ull, 0x7ff8000000000123ull, 0x7ff0000000000000ull,
                                         0xfff0000000000000ull, 0x3ff0000000000000ull, 0xbff0000000000000ull,
                                         0x0000000000000001ull, 0x7ff4000000000000ull};

void fill(Array& a, Rng& rng, double specials) {
  DType dt = a.dtype();
  size_t size = itemsize(dt);
  char* base = static_cast<char*>(a.data());
  bool uniform_values = rng.chance(0.3);
  for (int64_t i = 0; i < a.numel(); ++i) {
    char* p = base + i * size;
    if (is_floating(dt)) {
      if (rng.chance(specials)) {
        size_t k = static_cast<size_t>(rng.range(0, kSpecials - 1));
        if (dt == DType::Float32) std::memcpy(p, &kSpecialF32[k], 4);
        else if (dt == DType::Float64) std::memcpy(p, &kSpecialF64[k], 8);
        else element::store<float>(p, dt, std::bit_cast<float>(kSpecialF32[k]));
        continue;
      }
      double v = uniform_values ? rng.real(-3, 3) : rng.normal();
      if (rng.chance(0.1)) v = static_cast<double>(rng.range(-3, 3));
      element::store<double>(p, dt, v);
    } else if (dt == DType::Bool) {
      element::store<int64_t>(p, dt, rng.range(0, 1));
    } else {
      int64_t v = rng.range(-4, 4);
      if (rng.chance(0.03)) v = rng.chance(0.5) ? std::numeric_limits<int32_t>::max() : std::numeric_limits<int32_t>::min();
      element::store<int64_t>(p, dt, v);
    }
  }
}

Tensor make_tensor(const TensorSpec& spec) {
  Rng rng(spec.data_seed);
  double specials = rng.chance(0.5) ? 0.15 : 0.0;
  std::vector<int64_t> alloc = spec.shape;
  int layout = spec.layout;
  if (layout == 1 && alloc.size() < 2) layout = 0;
  if ((layout == 2 || layout == 3) && alloc.empty()) layout = 0;
  if (layout == 3 && alloc[0] < 2) layout = 0;
  if (layout == 1) std::swap(alloc[alloc.size() - 1], alloc[alloc.size() - 2]);
  if (layout == 2) alloc[0] *= 2;
  if (layout == 3) alloc[0] = 1;
  Array a = Array::empty(spec.dtype, alloc);
  fill(a, rng, specials);
  Tensor t(a);
  if (layout == 1) return transpose(t, -1, -2);
  if (layout == 2) return slice(t, 0, 0, kToEnd, 2);
  if (layout == 3) return expand(t, SymShape(spec.shape.begin(), spec.shape.end()));
  return t;
}

const std::vector<int64_t> kSizes = {1, 2, 3, 5, 8};

int64_t draw_size(Rng& rng) { return rng.chance(0.04) ? 0 : rng.pick(kSizes); }

DType draw_dtype(Rng& rng) {
  double u = rng.real(0, 1);
  if (u < 0.62) return DType::Float32;
  if (u < 0.72) return DType::Float64;
  if (u < 0.80) return DType::Int64;
  if (u < 0.87) return DType::Int32;
  if (u < 0.91) return DType::Bool;
  if (u < 0.96) return DType::Float16;
  return DType::BFloat16;
}

Num draw_num(Rng& rng, Slot slot) {
  static const std::vector<double> floats = {0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 3.0, 1e-3, -2.5,
                                             std::numeric_limits<double>::quiet_NaN(),
                                             -std::numeric_limits<double>::quiet_NaN(),
                                             std::numeric_limits<double>::infinity(),
                                             -std::numeric_limits<double>::infinity()};
  static const std::vector<int64_t> ints = {0, 1, -1, 2, 3, 7, -5};
  switch (slot) {
    case Slot::Floating: {
      double v = rng.pick(floats);
      return rng.chance(0.35) ? Num::f32(static_cast<float>(v)) : Num::f64(v);
    }
    case Slot::Integer: {
      int64_t v = rng.pick(ints);
      return rng.chance(0.4) ? Num::i32(static_cast<int32_t>(v)) : Num::i64(v);
    }
    default: return Num::boolean(rng.chance(0.5));
  }
}

// A number that a guard by value may confuse with `n`: the other zero, another NaN, the same
// value with the other C++ type.
Num twin(Rng& rng, Num n) {
  if (n.kind == Num::Bool) return n;
  if (n.is_float()) {
    if (rng.chance(0.5)) n.f = std::isnan(n.f) ? -n.f : (n.f == 0 ? -n.f : n.f);
    else n.kind = n.kind == Num::F64 ? Num::F32 : Num::F64;
    if (n.kind == Num::F32) n.f = static_cast<float>(n.f);
    return n;
  }
  n.kind = n.kind == Num::I64 ? Num::I32 : Num::I64;
  return n;
}

// ---------------------------------------------------------------------------------------------
// Generating a program and its calls

struct Case {
  uint64_t seed = 0;
  Program prog;
  std::vector<CallSpec> calls;
};

// The arguments of a call, made once so that eager and every compiled run see the same tensors.
std::vector<Arg> materialize(const Program& p, const CallSpec& c) {
  std::vector<Arg> args;
  for (size_t i = 0; i < c.args.size(); ++i) {
    if (auto* n = std::get_if<Num>(&c.args[i])) {
      args.push_back(arg_of(*n));
      continue;
    }
    const TensorSpec& t = std::get<TensorSpec>(c.args[i]);
    if (t.source == TensorSpec::Alias) args.push_back(std::get<Tensor>(args.at(static_cast<size_t>(t.ref))));
    else if (t.source == TensorSpec::Captured) args.push_back(p.captured.at(static_cast<size_t>(t.ref)));
    else args.push_back(make_tensor(t));
  }
  return args;
}

std::vector<int64_t> vary_shape(Rng& rng, const std::vector<int64_t>& base) {
  std::vector<int64_t> s = base;
  for (auto& d : s)
    if (rng.chance(0.5)) d = draw_size(rng);
  return s;
}

CallSpec draw_call(Rng& rng, const Program& p, const std::vector<DType>& dtypes, const std::vector<int64_t>& base,
                   const CallSpec* previous) {
  CallSpec c;
  int first_tensor = -1;
  for (size_t i = 0; i < p.sig.size(); ++i) {
    Slot slot = p.sig[i];
    if (slot != Slot::Tensor) {
      Num n = draw_num(rng, slot);
      if (previous) {
        const Num& before = std::get<Num>(previous->args[i]);
        double u = rng.real(0, 1);
        if (u < 0.35) n = before;
        else if (u < 0.6) n = twin(rng, before);
      }
      if (avoid("scalar-twins")) {
        if (n.kind == Num::F32) n.kind = Num::F64;
        if (n.kind == Num::I32) n.kind = Num::I64;
        if (n.is_float() && (n.f == 0 || std::isnan(n.f))) n.f = std::abs(n.f);
      }
      c.args.emplace_back(n);
      continue;
    }
    TensorSpec t;
    if (first_tensor >= 0 && rng.chance(0.22) && !avoid("alias")) {
      // The same tensor as an earlier argument.
      std::vector<int> earlier;
      for (size_t j = 0; j < i; ++j)
        if (p.sig[j] == Slot::Tensor) earlier.push_back(static_cast<int>(j));
      t.source = TensorSpec::Alias;
      t.ref = rng.pick(earlier);
    } else if (!p.captured.empty() && rng.chance(0.15) && !avoid("captured-arg")) {
      t.source = TensorSpec::Captured;
      t.ref = static_cast<int>(rng.range(0, static_cast<int64_t>(p.captured.size()) - 1));
    } else {
      t.dtype = rng.chance(0.06) ? draw_dtype(rng) : dtypes[i];
      t.shape = base;
      if (rng.chance(0.15)) t.shape = vary_shape(rng, base);
      for (auto& d : t.shape)
        if (rng.chance(0.08)) d = 1;
      double u = rng.real(0, 1);
      t.layout = u < 0.8 ? 0 : u < 0.9 ? 1 : u < 0.96 ? 2 : 3;
      t.data_seed = rng.g();
    }
    if (first_tensor < 0) first_tensor = static_cast<int>(i);
    c.args.emplace_back(t);
  }
  return c;
}

struct Generator {
  Rng& rng;
  std::vector<Tensor> T;  // the values on the first call, to draw valid steps
  std::vector<Num> N;
  int first_step_tensor = 0;
  int n_args = 1;  // tensor arguments

  int pick_t() {
    int n = static_cast<int>(T.size());
    if (n > first_step_tensor && rng.chance(0.55)) return static_cast<int>(rng.range(std::max(first_step_tensor, n - 3), n - 1));
    return static_cast<int>(rng.range(0, n - 1));
  }
  int pick_n() { return static_cast<int>(rng.range(0, static_cast<int64_t>(N.size()) - 1)); }
  int64_t rank(int i) { return T[i].dim(); }
  int64_t axis_of(int i) {  // a valid axis (negative half the time), now and then an invalid one
    int64_t r = std::max<int64_t>(rank(i), 1);
    if (rng.chance(0.03)) return r + rng.range(0, 2);
    int64_t a = rng.range(0, r - 1);
    return rng.chance(0.5) ? a - r : a;
  }
  std::vector<int64_t> axes_of(int i) {
    std::vector<int64_t> axes;
    if (rng.chance(0.35) || rank(i) == 0) return axes;
    int64_t count = rng.range(1, std::max<int64_t>(1, rank(i)));
    std::vector<int64_t> all;
    for (int64_t a = 0; a < rank(i); ++a) all.push_back(a);
    std::shuffle(all.begin(), all.end(), rng.g);
    for (int64_t k = 0; k < count; ++k) axes.push_back(rng.chance(0.3) ? all[k] - rank(i) : all[k]);
    if (rng.chance(0.03)) axes.push_back(axes.empty() ? 0 : axes[0]);  // a repeated axis
    return axes;
  }
  Num constant() {
    double u = rng.real(0, 1);
    if (u < 0.65) {
      Num n = draw_num(rng, Slot::Floating);
      if (avoid("nan-sign") && std::isnan(n.f)) n.f = std::abs(n.f);
      return n;
    }
    if (u < 0.92) return draw_num(rng, Slot::Integer);
    return draw_num(rng, Slot::Boolean);
  }

  int binary(double common) {
    for (;;) {
      int op = rng.chance(common) ? static_cast<int>(rng.range(0, 6)) : static_cast<int>(rng.range(0, kBinaryCount - 1));
      if (!(avoid("int-div") && (op == 7 || op == 8))) return op;
    }
  }

  // The kind of the next step, by weight.
  K choose_kind() {
    const bool nums = !N.empty();
    const std::pair<K, double> table[] = {
        {K::Unary, 10},     {K::Binary, 12},     {K::BinaryConst, 8},           {K::BinaryNum, nums ? 8.0 : 0.0},
        {K::Where, 3},      {K::WhereConst, 2},  {K::Clamp, 3},                 {K::ClampTensor, 1},
        {K::Reduce, 7},     {K::Slice, 6},       {K::SliceSized, 3},            {K::SliceNum, nums ? 2.0 : 0.0},
        {K::Reshape, 5},    {K::Permute, 3},     {K::Transpose, 2},             {K::Expand, 3},
        {K::Squeeze, 2},    {K::Unsqueeze, 2},   {K::Concat, 4},                {K::Pool, 4},
        {K::MatMul, 4},     {K::Cast, 3},        {K::Softmax, 2},               {K::Create, 3},
        {K::NumTensor, nums ? 3.0 : 0.0},        {K::Branch, nums ? 2.0 : 0.0}, {K::Gather, 3},
        {K::Pad, 2},        {K::Conv, 2},        {K::Item, 5}};
    double total = 0;
    for (const auto& [kind, w] : table) total += w;
    double u = rng.real(0, total);
    for (const auto& [kind, w] : table) {
      if (u < w) return kind;
      u -= w;
    }
    return K::Item;
  }

  Step random_step() {
    Step s;
    int x = pick_t();
    s.t = {x};
    s.kind = choose_kind();
    switch (s.kind) {
      case K::Unary:
        s.op = static_cast<int>(rng.range(0, kUnaryCount - 1));
        break;
      case K::Binary:
        s.op = binary(0.6);
        s.t.push_back(pick_t());
        break;
      case K::BinaryConst:
        s.op = binary(0.7);
        s.c = {constant()};
        s.flag = rng.chance(0.3);
        break;
      case K::BinaryNum:
        s.op = binary(0.75);
        s.n = {pick_n()};
        s.flag = rng.chance(0.3);
        break;
      case K::Where:
        s.op = static_cast<int>(rng.range(0, 4));
        s.t = {x, pick_t(), pick_t(), pick_t()};
        break;
      case K::WhereConst:
        s.t.push_back(pick_t());
        s.c = {constant()};
        s.flag = rng.chance(0.5);
        break;
      case K::Clamp:
        s.ints = {rng.range(rng.chance(0.05) ? 0 : 1, 3)};
        s.c = {constant(), constant()};
        if (!N.empty() && rng.chance(0.3)) s.n = {pick_n()};
        if (!(s.ints[0] & 1)) s.n.clear();  // the number replaces the lower bound only
        break;
      case K::ClampTensor:
        s.t = {x, pick_t(), pick_t()};
        break;
      case K::Reduce:
        s.op = static_cast<int>(rng.range(0, kReduceCount - 1));
        s.ints = axes_of(x);
        s.flag = rng.chance(0.4);
        break;
      case K::Slice: {
        static const std::vector<int64_t> starts = {0, 1, 2, -1, -2, -3, -10, 10, 3};
        static const std::vector<int64_t> ends = {kToEnd, -1, -2, -3, 3, 1, 100, 0, -100, 2};
        int64_t step = rng.chance(0.7) ? 1 : rng.range(2, 3);
        if (rng.chance(0.02)) step = rng.range(-1, 0);
        s.ints = {axis_of(x), rng.pick(starts), rng.pick(ends), step};
        if (avoid("neg-slice")) s.ints[1] = 0, s.ints[2] = kToEnd;
        break;
      }
      case K::SliceSized:
        s.op = static_cast<int>(rng.range(0, 1));
        s.ints = {axis_of(x), rng.range(0, 1), rng.range(-2, 1)};
        break;
      case K::SliceNum:
        s.ints = {axis_of(x)};
        s.n = {pick_n()};
        break;
      case K::Reshape:
        s.op = static_cast<int>(rng.range(0, 6));
        if (s.op == 1) s.ints = {axis_of(x), axis_of(x)};
        if (s.op == 4) {
          std::vector<int64_t> shape = T[x].shape();
          std::reverse(shape.begin(), shape.end());
          if (!shape.empty() && rng.chance(0.3)) shape[0] = -1;
          s.ints = shape;
        }
        break;
      case K::Permute:
        for (int64_t a = 0; a < rank(x); ++a) s.ints.push_back(a);
        std::shuffle(s.ints.begin(), s.ints.end(), rng.g);
        if (rng.chance(0.3))
          for (auto& a : s.ints) a -= rank(x);
        break;
      case K::Transpose:
        s.ints = {axis_of(x), axis_of(x)};
        break;
      case K::Expand:
        s.op = static_cast<int>(rng.range(0, 2));
        if (s.op == 0) s.t.push_back(pick_t());
        if (s.op == 1) s.ints = {rng.pick(kSizes)};
        if (s.op == 2) {
          s.ints = T[x].shape();
          for (auto& d : s.ints)
            if (d == 1 || rng.chance(0.1)) d = rng.chance(0.2) ? -1 : rng.pick(kSizes);
          if (rng.chance(0.3)) s.ints.insert(s.ints.begin(), rng.pick(kSizes));
        }
        break;
      case K::Squeeze:
        if (rng.chance(0.6) && rank(x) > 0) s.ints = {axis_of(x)};
        break;
      case K::Unsqueeze:
        s.ints = {rng.range(-rank(x) - 1, rank(x))};
        break;
      case K::Concat:
      case K::Stack: {
        s.kind = rng.chance(0.7) ? K::Concat : K::Stack;
        int count = static_cast<int>(rng.range(1, 3));
        for (int k = 1; k < count; ++k) s.t.push_back(rng.chance(0.5) ? x : pick_t());
        s.ints = {s.kind == K::Concat ? axis_of(x) : rng.range(-rank(x) - 1, rank(x))};
        break;
      }
      case K::Pool: {
        s.op = rng.chance(0.45) ? 0 : rng.chance(0.75) ? 1 : 2;
        int64_t kh = rng.range(1, 3), kw = rng.range(1, 3);
        int64_t sh = rng.chance(0.35) ? -1 : rng.range(1, 3), sw = rng.range(1, 3);
        s.ints = {kh, kw, sh, sw, rng.range(0, 2), rng.range(0, 2), rng.chance(0.8) ? 1 : 2};
        if (rng.chance(0.7)) s.ints[4] = std::min(s.ints[4], kh / 2), s.ints[5] = std::min(s.ints[5], kw / 2);
        s.flag = rng.chance(0.4);
        s.flag2 = rng.chance(0.5);
        break;
      }
      case K::MatMul:
        s.op = static_cast<int>(rng.range(0, 3));
        if (s.op != 1) s.t.push_back(pick_t());
        if (s.op == 3) s.t.push_back(pick_t());
        break;
      case K::Cast: {
        static const std::vector<DType> dts = {DType::Float32, DType::Float64, DType::Int32, DType::Int64,
                                               DType::Bool, DType::Float16, DType::BFloat16, DType::Int8};
        s.dtype = rng.pick(dts);
        break;
      }
      case K::Softmax:
        s.op = static_cast<int>(rng.range(0, 2));
        s.ints = {axis_of(x)};
        break;
      case K::Create: {
        static const std::vector<DType> dts = {DType::Float32, DType::Int64, DType::Int32, DType::Float64, DType::Bool};
        s.op = static_cast<int>(rng.range(0, 4));
        s.dtype = s.op == 4 ? rng.pick(dts) : rng.chance(0.5) ? DType::Float32 : DType::Int64;
        s.c = {s.op == 4 && rng.chance(0.5) ? Num::i64(0) : constant()};
        s.ints = {rng.range(0, 1000)};
        if (s.op == 4) s.t.clear();  // full({}, c): no tensor operand
        break;
      }
      case K::NumTensor:
        s.op = static_cast<int>(rng.range(0, 1));
        s.n = {pick_n()};
        if (s.op == 0) s.t.clear();  // scalar_tensor(n): no tensor operand
        break;
      case K::Branch:
        s.n = {pick_n()};
        s.t.push_back(pick_t());
        break;
      case K::Gather:
        s.op = static_cast<int>(rng.range(0, 3));
        s.t.push_back(rng.chance(0.3) ? x : rng.chance(0.5) ? static_cast<int>(rng.range(0, n_args - 1)) : pick_t());
        s.ints = {axis_of(x)};
        break;
      case K::Pad: {
        int64_t pairs = rng.range(1, std::max<int64_t>(1, std::min<int64_t>(2, rank(x))));
        for (int64_t k = 0; k < 2 * pairs; ++k) s.ints.push_back(rng.range(-2, 2));
        s.c = {Num::f64(rng.chance(0.5) ? 0.0 : rng.chance(0.5) ? -0.0 : 1.5)};
        break;
      }
      case K::Conv:
        s.t.push_back(rng.chance(0.4) ? x : pick_t());
        s.ints = {rng.range(1, 2), rng.range(0, 1), rng.range(1, 2)};
        break;
      case K::Item:
        s.op = static_cast<int>(rng.range(0, 6));
        break;
      case K::Copy:
      case K::ConstNum:
        break;
    }
    return s;
  }
};

Case generate(uint64_t seed) {
  Case cs;
  cs.seed = seed;
  Rng rng(seed);
  Program& p = cs.prog;

  // Signature: 1-3 tensors and 0-2 scalars, at most 4 arguments, in any order.
  int tensors = static_cast<int>(rng.range(1, 3));
  int scalars = static_cast<int>(rng.range(0, std::min(2, 4 - tensors)));
  if (rng.chance(0.3)) scalars = 0;
  for (int i = 0; i < tensors; ++i) p.sig.push_back(Slot::Tensor);
  for (int i = 0; i < scalars; ++i) {
    double u = rng.real(0, 1);
    p.sig.push_back(u < 0.6 ? Slot::Floating : u < 0.85 ? Slot::Integer : Slot::Boolean);
  }
  if (rng.chance(0.3)) std::shuffle(p.sig.begin(), p.sig.end(), rng.g);

  int64_t rank = std::vector<int64_t>{0, 1, 1, 2, 2, 2, 3, 3, 4, 4}[static_cast<size_t>(rng.range(0, 9))];
  std::vector<int64_t> base;
  for (int64_t d = 0; d < rank; ++d) base.push_back(draw_size(rng));

  std::vector<DType> dtypes;
  DType common = draw_dtype(rng);
  for (Slot s : p.sig) dtypes.push_back(s == Slot::Tensor && rng.chance(0.25) ? draw_dtype(rng) : common);

  // Captured tensors: broadcast-friendly shapes mostly.
  int captured = rng.chance(0.45) ? static_cast<int>(rng.range(1, 2)) : 0;
  for (int k = 0; k < captured; ++k) {
    TensorSpec w;
    double u = rng.real(0, 1);
    if (u < 0.5) w.shape = base;
    else if (u < 0.75) w.shape = std::vector<int64_t>(static_cast<size_t>(rank), 1);
    else if (u < 0.9) w.shape = {};
    else w.shape = vary_shape(rng, base);
    w.dtype = rng.chance(0.7) ? common : draw_dtype(rng);
    w.data_seed = rng.g();
    p.captured_specs.push_back(w);
    p.captured.push_back(make_tensor(w));
  }

  // Mostly the default recompile limit; sometimes one that calls run into (eager fallback).
  p.recompile_limit = rng.chance(0.85) ? 8 : static_cast<int>(rng.range(0, 2));

  // Calls: 4-6, the base shape changing now and then.
  int ncalls = static_cast<int>(rng.range(4, 6));
  std::vector<int64_t> shape = base;
  for (int i = 0; i < ncalls; ++i) {
    if (i > 0 && rng.chance(0.6)) shape = vary_shape(rng, shape);
    cs.calls.push_back(draw_call(rng, p, dtypes, shape, i ? &cs.calls.back() : nullptr));
  }

  // Steps, drawn so that most of them are valid on the first call. Now and then an invalid one
  // is kept (and ends the program) to check that both paths raise the same error.
  Generator gen{rng, {}, {}, 0};
  std::vector<Arg> first = materialize(p, cs.calls[0]);
  for (const Arg& a : first) {
    if (auto* t = std::get_if<Tensor>(&a)) gen.T.push_back(*t);
    else gen.N.push_back(num_of(a));
  }
  for (const Tensor& w : p.captured) gen.T.push_back(w);
  gen.first_step_tensor = static_cast<int>(gen.T.size());
  gen.n_args = p.tensor_args();
  int nsteps = static_cast<int>(rng.range(1, 10));
  bool ended = false;
  for (int k = 0; k < nsteps && !ended; ++k) {
    for (int attempt = 0; attempt < 10; ++attempt) {
      Step s = gen.random_step();
      try {
        exec_step(s, gen.T, gen.N);
        p.steps.push_back(s);
        break;
      } catch (const std::exception&) {
        if (rng.chance(0.06)) {
          p.steps.push_back(s);
          ended = true;
          break;
        }
      }
    }
  }

  // A view of an argument, to return.
  if (!ended && rng.chance(0.15)) {
    Step v;
    v.t = {static_cast<int>(rng.range(0, p.tensor_args() - 1))};
    int64_t r = gen.T[v.t[0]].dim();
    if (r >= 2 && rng.chance(0.5)) {
      v.kind = K::Transpose;
      v.ints = {0, 1};
    } else if (r >= 1 && rng.chance(0.5)) {
      v.kind = K::Slice;
      v.ints = {0, 1, kToEnd, 1};
    } else {
      v.kind = K::Reshape;
      v.op = 0;
    }
    try {
      exec_step(v, gen.T, gen.N);
      p.steps.push_back(v);
    } catch (const std::exception&) {
    }
  }

  // Outputs: mostly the last values, also arguments, captured tensors and repeats.
  int n_tensors = static_cast<int>(gen.T.size());
  int nout = static_cast<int>(rng.range(1, 4));
  for (int i = 0; i < nout; ++i) {
    double u = rng.real(0, 1);
    int o;
    if (!p.outputs.empty() && u < 0.12) o = rng.pick(p.outputs);
    else if (u < 0.22 && !avoid("arg-outputs")) o = static_cast<int>(rng.range(0, p.tensor_args() - 1));
    else if (u < 0.3 && !p.captured.empty() && !avoid("arg-outputs"))
      o = p.tensor_args() + static_cast<int>(rng.range(0, static_cast<int64_t>(p.captured.size()) - 1));
    else if (u < 0.45) o = static_cast<int>(rng.range(0, n_tensors - 1));
    else o = static_cast<int>(rng.range(std::max(0, n_tensors - 2), n_tensors - 1));
    if (avoid("arg-outputs") && o < p.first_step_tensor()) o = n_tensors - 1;
    if (avoid("arg-outputs") && o < p.first_step_tensor()) continue;
    if (avoid("dup-outputs") && std::count(p.outputs.begin(), p.outputs.end(), o)) continue;
    p.outputs.push_back(o);
  }
  if (p.outputs.empty()) p.outputs.push_back(n_tensors - 1);
  return cs;
}

// ---------------------------------------------------------------------------------------------
// Calling with a runtime list of arguments: one instantiation per signature (at most 3 tensors,
// 2 scalars, 4 arguments).

template <int NT, int NS, class F, class... A>
std::vector<Tensor> invoke(F& f, const std::vector<Arg>& args, const A&... a) {
  constexpr size_t k = sizeof...(A);
  if constexpr (k > 0)
    if (args.size() == k) return f(a...);
  if constexpr (k < 4) {
    const Arg& next = args.at(k);
    switch (next.index()) {
      case 0:
        if constexpr (NT < 3) return invoke<NT + 1, NS>(f, args, a..., std::get<0>(next));
        break;
      case 1:
        if constexpr (NS < 2) return invoke<NT, NS + 1>(f, args, a..., std::get<1>(next));
        break;
      case 2:
        if constexpr (NS < 2) return invoke<NT, NS + 1>(f, args, a..., std::get<2>(next));
        break;
      case 3:
        if constexpr (NS < 2) return invoke<NT, NS + 1>(f, args, a..., std::get<3>(next));
        break;
      case 4:
        if constexpr (NS < 2) return invoke<NT, NS + 1>(f, args, a..., std::get<4>(next));
        break;
      case 5:
        if constexpr (NS < 2) return invoke<NT, NS + 1>(f, args, a..., std::get<5>(next));
        break;
    }
  }
  throw std::logic_error("fuzz: unsupported signature");
}

struct Outcome {
  enum Status { Ok, EmberError, OtherError } status = Ok;
  ErrorKind kind = ErrorKind::Value;
  std::string message;
  std::vector<Tensor> outs;
};

const char* kind_name(ErrorKind k) {
  switch (k) {
    case ErrorKind::Value: return "Value";
    case ErrorKind::Type: return "Type";
    case ErrorKind::Runtime: return "Runtime";
    case ErrorKind::NotImplemented: return "NotImplemented";
    case ErrorKind::Internal: return "Internal";
  }
  return "?";
}

std::string outcome_str(const Outcome& o) {
  if (o.status == Outcome::EmberError) return std::string("ember::Error(") + kind_name(o.kind) + "): " + o.message;
  if (o.status == Outcome::OtherError) return "exception: " + o.message;
  std::string s = std::to_string(o.outs.size()) + " outputs";
  for (const Tensor& t : o.outs) {
    try {
      s += "\n      " + dtype_str(t.dtype()) + shape_str(to_shape(t.array().shape())) + " " + values_str(t);
    } catch (const std::exception& e) {
      s += std::string("\n      <unreadable: ") + e.what() + ">";
    }
  }
  return s;
}

template <class F>
Outcome run_call(F& f, const std::vector<Arg>& args) {
  Outcome o;
  try {
    o.outs = invoke<0, 0>(f, args);
  } catch (const Error& e) {
    o.status = Outcome::EmberError;
    o.kind = e.kind();
    o.message = e.what();
  } catch (const std::exception& e) {
    o.status = Outcome::OtherError;
    o.message = std::string(typeid(e).name()) + ": " + e.what();
  }
  return o;
}

// ---------------------------------------------------------------------------------------------
// Comparing bit for bit

struct Mismatch {
  std::string category;  // the class of failure: the same class is kept while minimising
  std::string detail;
};

bool loose_nan() { return env_str("EMBER_FUZZ_NAN_BITS") == "0"; }

// Prefix "[op]" of an ember message, to tell error classes apart.
std::string op_of(const std::string& message) {
  if (message.size() > 1 && message[0] == '[') {
    size_t close = message.find(']');
    if (close != std::string::npos) return message.substr(0, close + 1);
  }
  return "";
}

std::optional<Mismatch> compare(const Outcome& e, const Outcome& c, const std::vector<Arg>& args) {
  if (c.status == Outcome::OtherError)
    return Mismatch{"compiled raised a non-ember exception", c.message};
  if (e.status != Outcome::Ok) {
    if (e.status == Outcome::OtherError) return Mismatch{"eager raised a non-ember exception", e.message};
    if (c.status == Outcome::Ok) return Mismatch{"eager raised, compiled returned", "eager: " + e.message};
    if (c.kind == ErrorKind::Internal)
      return Mismatch{"compiled raised an internal error", "eager: " + e.message + "\n    compiled: " + c.message};
    if (c.kind != e.kind)
      return Mismatch{std::string("error kind differs: eager ") + kind_name(e.kind) + ", compiled " + kind_name(c.kind),
                      "eager: " + e.message + "\n    compiled: " + c.message};
    return std::nullopt;
  }
  if (c.status != Outcome::Ok) {
    std::string cat = c.kind == ErrorKind::Internal ? "compiled raised an internal error"
                                                    : std::string("eager returned, compiled raised ") + kind_name(c.kind) +
                                                          " " + op_of(c.message);
    return Mismatch{cat, c.message};
  }
  if (e.outs.size() != c.outs.size())
    return Mismatch{"number of outputs differs", std::to_string(e.outs.size()) + " vs " + std::to_string(c.outs.size())};
  for (size_t k = 0; k < e.outs.size(); ++k) {
    std::string where = "output " + std::to_string(k) + ": ";
    const Tensor &et = e.outs[k], &ct = c.outs[k];
    if (!ct.defined()) return Mismatch{"compiled output undefined", where};
    Array ea = et.array(), ca;
    try {
      if (ct.is_traced()) return Mismatch{"compiled output is still a traced tensor", where};
      ca = ct.array();
    } catch (const Error& err) {
      return Mismatch{"compiled output unreadable", where + err.what()};
    }
    if (ea.dtype() != ca.dtype())
      return Mismatch{"dtype differs", where + "eager " + dtype_str(ea.dtype()) + ", compiled " + dtype_str(ca.dtype())};
    if (ct.dtype() != ca.dtype())
      return Mismatch{"dtype() disagrees with the data", where + dtype_str(ct.dtype()) + " vs " + dtype_str(ca.dtype())};
    if (ea.shape() != ca.shape())
      return Mismatch{"shape differs", where + "eager " + shape_str(to_shape(ea.shape())) + ", compiled " +
                                           shape_str(to_shape(ca.shape()))};
    // An output that eagerly is an argument must be that same tensor.
    for (size_t a = 0; a < args.size(); ++a)
      if (auto* t = std::get_if<Tensor>(&args[a]); t && t->impl() == et.impl() && ct.impl() != et.impl())
        return Mismatch{"a returned argument is not the same tensor", where + "argument " + std::to_string(a)};
    Array ec = ea.contiguous(), cc = ca.contiguous();
    size_t size = itemsize(ea.dtype());
    const char *eb = static_cast<const char*>(ec.data()), *cb = static_cast<const char*>(cc.data());
    for (int64_t i = 0; i < ec.numel(); ++i) {
      if (std::memcmp(eb + i * size, cb + i * size, size) == 0) continue;
      double ev = ec.get(i), cv = cc.get(i);
      std::string cat;
      if (std::isnan(ev) && std::isnan(cv)) {
        if (loose_nan()) continue;
        cat = "NaN bits differ";
      } else if (std::isnan(ev) || std::isnan(cv)) {
        cat = "NaN where the other has a number";
      } else if (ev == 0 && cv == 0) {
        cat = "sign of zero differs";
      } else {
        cat = "values differ";
      }
      char buf[160];
      uint64_t ebits = 0, cbits = 0;
      std::memcpy(&ebits, eb + i * size, size);
      std::memcpy(&cbits, cb + i * size, size);
      std::snprintf(buf, sizeof buf, "element %lld: eager %.9g (0x%llx), compiled %.9g (0x%llx)", static_cast<long long>(i),
                    ev, static_cast<unsigned long long>(ebits), cv, static_cast<unsigned long long>(cbits));
      return Mismatch{cat, where + dtype_str(ea.dtype()) + shape_str(to_shape(ea.shape())) + " " + buf};
    }
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// Running a case

const std::optional<bool> kDynamics[] = {std::nullopt, true, false};

std::string dynamic_str(std::optional<bool> d) { return d ? (*d ? "true" : "false") : "unset"; }

struct Failure {
  uint64_t seed = 0;
  std::optional<bool> dynamic;
  size_t call = 0;
  Mismatch mismatch;
  std::string eager, compiled;
};

struct Prepared {
  std::vector<std::vector<Arg>> args;
  std::vector<Outcome> eager;
};

Prepared prepare(const Case& cs) {
  Prepared pr;
  ProgramLambda fn = program_lambda(cs.prog);
  for (const CallSpec& c : cs.calls) {
    pr.args.push_back(materialize(cs.prog, c));
    pr.eager.push_back(run_call(fn, pr.args.back()));
  }
  return pr;
}

std::optional<Failure> run_compiled(const Case& cs, const Prepared& pr, std::optional<bool> dynamic) {
  auto f = compile(program_lambda(cs.prog), Options{.dynamic = dynamic, .recompile_limit = cs.prog.recompile_limit});
  for (size_t i = 0; i < cs.calls.size(); ++i) {
    Outcome got = run_call(f, pr.args[i]);
    if (auto m = compare(pr.eager[i], got, pr.args[i]))
      return Failure{cs.seed, dynamic, i, *m, outcome_str(pr.eager[i]), outcome_str(got)};
  }
  return std::nullopt;
}

std::optional<Failure> check(const Case& cs, std::optional<bool> dynamic) {
  Prepared pr = prepare(cs);
  return run_compiled(cs, pr, dynamic);
}

std::string case_str(const Case& cs, const Failure& f, bool values) {
  std::ostringstream o;
  std::string avoided = env_str("EMBER_FUZZ_AVOID");
  o << "seed " << cs.seed << " (" << (avoided.empty() ? "" : "EMBER_FUZZ_AVOID=" + avoided + " ") << "EMBER_FUZZ_SEED=" << cs.seed
    << "), dynamic=" << dynamic_str(f.dynamic) << "\n";
  o << program_str(cs.prog, f.dynamic);
  Prepared pr;
  for (const CallSpec& c : cs.calls) pr.args.push_back(materialize(cs.prog, c));
  for (size_t i = 0; i < cs.calls.size(); ++i)
    o << "  call " << i << ": " << call_str(cs.prog, cs.calls[i], pr.args[i], values) << (i == f.call ? "   <-- fails" : "")
      << "\n";
  o << "  failure: " << f.mismatch.category << "\n    " << f.mismatch.detail << "\n";
  o << "  eager:    " << f.eager << "\n  compiled: " << f.compiled << "\n";
  return o.str();
}

// ---------------------------------------------------------------------------------------------
// Isolation: each program runs in a child process (unless EMBER_FUZZ_FORK=0), so that a crash
// (an out-of-bounds read in a kernel, say) is reported, minimised and counted like any other
// failure instead of ending the test.

const std::string kCrashed = "crashed: ";

bool fork_enabled() {
  static const bool on = env_str("EMBER_FUZZ_FORK") != "0";
  return on;
}

void write_all(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// Runs `fn` in a child and returns what it returned, or kCrashed and the signal. `progress` lets
// the child send text before it finishes (kept when it then crashes).
std::string isolated(const std::function<std::string(int progress)>& fn) {
  if (!fork_enabled()) return fn(-1);
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  int fds[2];
  if (pipe(fds) != 0) return fn(-1);
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return fn(-1);
  }
  if (pid == 0) {
    close(fds[0]);
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(sig, SIG_DFL);  // die quietly
    if (env_str("EMBER_FUZZ_VERBOSE") != "1") {
      // ember's warnings (the recompile limit, ...) would drown the reports: the parent reports.
      int null = open("/dev/null", O_WRONLY);
      if (null >= 0) dup2(null, 2);
    }
    std::string out;
    try {
      out = fn(fds[1]);
    } catch (const std::exception& e) {
      out = std::string("exception: ") + e.what();
    }
    write_all(fds[1], out);
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) return out + "\n" + kCrashed + strsignal(WTERMSIG(status));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return out + "\n" + kCrashed + "exit status " + std::to_string(WEXITSTATUS(status));
  return out;
}

bool crashed(const std::string& out) { return out.find(kCrashed) != std::string::npos; }
std::string crash_category(const std::string& out) { return out.substr(out.find(kCrashed)); }

// The category of the case's failure under `dynamic`, "" when it passes.
std::string category_of(const Case& cs, std::optional<bool> dynamic) {
  std::string out = isolated([&](int) {
    auto f = check(cs, dynamic);
    return f ? f->mismatch.category : std::string();
  });
  return crashed(out) ? crash_category(out) : out;
}

// The printed case with its failure (found again, in a child).
std::string report_of(const Case& cs, std::optional<bool> dynamic, const std::string& category, bool values) {
  std::string out = isolated([&](int) {
    auto f = check(cs, dynamic);
    return f ? case_str(cs, *f, values) : std::string();
  });
  if (!crashed(out) && !out.empty()) return out;
  Failure f{cs.seed, dynamic, cs.calls.size() - 1, {category, "the process died: run it in gdb"}, "-", "-"};
  return case_str(cs, f, values);
}

// ---------------------------------------------------------------------------------------------
// Minimising a failing case: fewer calls, outputs, steps, arguments and argument features, while
// the failure keeps its category.

// Replaces Copy steps by their source; with `drop_dead`, also drops the steps no output needs
// (not always wanted: a dead step can be the one that raises).
void compact(Program& p, bool drop_dead) {
  int nt = p.first_step_tensor(), nn = p.num_args();
  std::vector<int> value_of(p.steps.size());  // the pool index of each step's value
  {
    int t = nt, n = nn;
    for (size_t k = 0; k < p.steps.size(); ++k) value_of[k] = p.steps[k].makes_num() ? n++ : t++;
  }
  std::map<int, int> alias;
  auto resolve = [&](int t) {
    while (alias.count(t)) t = alias[t];
    return t;
  };
  for (size_t k = 0; k < p.steps.size(); ++k) {
    Step& s = p.steps[k];
    for (int& t : s.t) t = resolve(t);
    if (s.kind == K::Copy) alias[value_of[k]] = s.t[0];
  }
  for (int& o : p.outputs) o = resolve(o);
  std::set<int> live_t(p.outputs.begin(), p.outputs.end()), live_n;
  std::vector<bool> keep(p.steps.size(), false);
  for (size_t k = p.steps.size(); k-- > 0;) {
    const Step& s = p.steps[k];
    if (s.kind == K::Copy) continue;
    bool live = s.makes_num() ? live_n.count(value_of[k]) > 0 : live_t.count(value_of[k]) > 0;
    if (!live && (drop_dead || s.kind == K::ConstNum)) continue;  // an unused constant never matters
    keep[k] = true;
    live_t.insert(s.t.begin(), s.t.end());
    live_n.insert(s.n.begin(), s.n.end());
  }
  std::map<int, int> new_t, new_n;
  for (int i = 0; i < nt; ++i) new_t[i] = i;
  for (int i = 0; i < nn; ++i) new_n[i] = i;
  std::vector<Step> steps;
  int t = nt, n = nn;
  for (size_t k = 0; k < p.steps.size(); ++k) {
    if (!keep[k]) continue;
    Step s = p.steps[k];
    for (int& i : s.t) i = new_t.at(i);
    for (int& i : s.n) i = new_n.at(i);
    if (s.makes_num()) new_n[value_of[k]] = n++;
    else new_t[value_of[k]] = t++;
    steps.push_back(s);
  }
  for (int& o : p.outputs) o = new_t.at(o);
  p.steps = steps;
}

// Removes tensor pool entry `index` (an argument or a captured tensor) when no step or output
// reads it; later entries move down.
bool drop_tensor_index(Program& p, int index) {
  for (const Step& s : p.steps)
    if (std::count(s.t.begin(), s.t.end(), index)) return false;
  if (std::count(p.outputs.begin(), p.outputs.end(), index)) return false;
  for (Step& s : p.steps)
    for (int& t : s.t) t -= t > index;
  for (int& o : p.outputs) o -= o > index;
  return true;
}

bool drop_num_index(Program& p, int index) {
  for (const Step& s : p.steps)
    if (std::count(s.n.begin(), s.n.end(), index)) return false;
  for (Step& s : p.steps)
    for (int& n : s.n) n -= n > index;
  return true;
}

// Removes argument position `slot` when nothing reads it.
bool drop_slot(Case& cs, size_t slot) {
  Program& p = cs.prog;
  if (p.sig.size() <= 1) return false;
  for (const CallSpec& c : cs.calls)
    for (const auto& a : c.args)
      if (auto* t = std::get_if<TensorSpec>(&a); t && t->source == TensorSpec::Alias && t->ref == static_cast<int>(slot))
        return false;
  int before = 0;
  for (size_t i = 0; i < slot; ++i) before += (p.sig[i] == Slot::Tensor) == (p.sig[slot] == Slot::Tensor);
  if (p.sig[slot] == Slot::Tensor ? !drop_tensor_index(p, before) : !drop_num_index(p, before)) return false;
  p.sig.erase(p.sig.begin() + static_cast<long>(slot));
  for (CallSpec& c : cs.calls) {
    c.args.erase(c.args.begin() + static_cast<long>(slot));
    for (auto& a : c.args)
      if (auto* t = std::get_if<TensorSpec>(&a); t && t->source == TensorSpec::Alias && t->ref > static_cast<int>(slot)) --t->ref;
  }
  return true;
}

bool drop_captured(Case& cs, size_t k) {
  Program& p = cs.prog;
  for (const CallSpec& c : cs.calls)
    for (const auto& a : c.args)
      if (auto* t = std::get_if<TensorSpec>(&a); t && t->source == TensorSpec::Captured && t->ref == static_cast<int>(k))
        return false;
  if (!drop_tensor_index(p, p.tensor_args() + static_cast<int>(k))) return false;
  p.captured.erase(p.captured.begin() + static_cast<long>(k));
  p.captured_specs.erase(p.captured_specs.begin() + static_cast<long>(k));
  for (CallSpec& c : cs.calls)
    for (auto& a : c.args)
      if (auto* t = std::get_if<TensorSpec>(&a); t && t->source == TensorSpec::Captured && t->ref > static_cast<int>(k)) --t->ref;
  return true;
}

Case minimize(Case cs, std::optional<bool> dynamic, const std::string& category) {
  auto still_fails = [&](const Case& candidate) { return category_of(candidate, dynamic) == category; };
  // A smaller case must not gain a feature that is a bug of its own: the same output twice.
  auto distinct = [](const std::vector<int>& v) { return std::set<int>(v.begin(), v.end()).size() == v.size(); };
  const bool distinct_outputs = distinct(cs.prog.outputs);
  auto attempt = [&](Case& current, const std::function<bool(Case&)>& change) {
    Case c = current;
    if (!change(c)) return false;
    if (distinct_outputs && !distinct(c.prog.outputs)) {
      std::vector<int> outs;
      for (int o : c.prog.outputs)
        if (!std::count(outs.begin(), outs.end(), o)) outs.push_back(o);
      c.prog.outputs = outs;
    }
    if (!still_fails(c)) return false;
    current = std::move(c);
    return true;
  };
  // The calls after the failing one.
  for (size_t n = 1; n < cs.calls.size(); ++n)
    if (attempt(cs, [&](Case& c) { c.calls.resize(n); return true; })) break;
  bool changed = true;
  for (int round = 0; changed && round < 8; ++round) {
    changed = false;
    // Calls.
    for (size_t i = 0; i + 1 < cs.calls.size();)
      if (attempt(cs, [&](Case& c) { c.calls.erase(c.calls.begin() + static_cast<long>(i)); return true; })) changed = true;
      else ++i;
    // Outputs.
    for (size_t i = 0; i < cs.prog.outputs.size() && cs.prog.outputs.size() > 1;)
      if (attempt(cs, [&](Case& c) { c.prog.outputs.erase(c.prog.outputs.begin() + static_cast<long>(i)); return true; }))
        changed = true;
      else ++i;
    // Dead steps, all at once.
    if (attempt(cs, [&](Case& c) {
          size_t n = c.prog.steps.size();
          compact(c.prog, true);
          return c.prog.steps.size() < n;
        }))
      changed = true;
    // Each step: a copy of one of its operands (a number: a constant).
    for (size_t k = cs.prog.steps.size(); k-- > 0;) {
      if (k >= cs.prog.steps.size()) continue;
      const Step s = cs.prog.steps[k];
      if (s.kind == K::Copy || s.kind == K::ConstNum) continue;
      std::vector<Step> candidates;
      if (s.makes_num()) {
        for (Num v : {Num::f64(1.0), Num::i64(1), Num::boolean(true)}) {
          Step r;
          r.kind = K::ConstNum;
          r.c = {v};
          candidates.push_back(r);
        }
      } else {
        std::set<int> seen;
        for (int t : s.t)
          if (seen.insert(t).second) {
            Step r;
            r.kind = K::Copy;
            r.t = {t};
            candidates.push_back(r);
          }
        if (s.t.empty() && cs.prog.first_step_tensor() > 0) {  // full({}, c) and the like: any value will do
          Step r;
          r.kind = K::Copy;
          r.t = {0};
          candidates.push_back(r);
        }
      }
      for (const Step& r : candidates)
        if (attempt(cs, [&](Case& c) { c.prog.steps[k] = r; compact(c.prog, false); return true; })) {
          changed = true;
          break;
        }
    }
    // Arguments: no aliasing, no captured tensor passed (a fresh tensor with the same values
    // instead), plain layouts.
    for (size_t i = 0; i < cs.calls.size(); ++i)
      for (size_t a = 0; a < cs.calls[i].args.size(); ++a) {
        auto* t = std::get_if<TensorSpec>(&cs.calls[i].args[a]);
        if (!t) continue;
        TensorSpec plain = *t;
        if (t->source == TensorSpec::Alias) plain = std::get<TensorSpec>(cs.calls[i].args[static_cast<size_t>(t->ref)]);
        else if (t->source == TensorSpec::Captured) plain = cs.prog.captured_specs[static_cast<size_t>(t->ref)];
        plain.source = TensorSpec::Fresh;
        plain.ref = -1;
        std::vector<int> layouts = {0};
        if (t->source != TensorSpec::Fresh && plain.layout != 0) layouts.push_back(plain.layout);
        if (t->source == TensorSpec::Fresh && t->layout == 0) continue;
        for (int layout : layouts) {
          plain.layout = layout;
          if (attempt(cs, [&](Case& c) { c.calls[i].args[a] = plain; return true; })) {
            changed = true;
            break;
          }
        }
      }
    if (cs.prog.recompile_limit != 8 && attempt(cs, [&](Case& c) { c.prog.recompile_limit = 8; return true; })) changed = true;
    // Unused arguments and captured tensors.
    for (size_t slot = cs.prog.sig.size(); slot-- > 0;)
      if (attempt(cs, [&](Case& c) { return drop_slot(c, slot); })) changed = true;
    for (size_t k = cs.prog.captured.size(); k-- > 0;)
      if (attempt(cs, [&](Case& c) { return drop_captured(c, k); })) changed = true;
  }
  return cs;
}

// The ops of a (minimised) program in order, e.g. "sqrt pow": with the category, a key to group
// failures by likely cause (EMBER_FUZZ_TRIAGE=1).
std::string ops_key(const Program& p) {
  Names nm = names_of(p);
  std::string key;
  size_t t_index = p.first_step_tensor(), n_index = p.num_args();
  for (const Step& s : p.steps) {
    std::string out = s.makes_num() ? nm.n[n_index++] : nm.t[t_index++];
    std::string line = step_str(s, nm, out);
    size_t eq = line.find(" = ");
    std::string rhs = eq == std::string::npos ? line : line.substr(eq + 3);
    size_t end = rhs.find_first_of("(;. ");
    key += (key.empty() ? "" : " ") + (s.kind == K::Item ? "item" : rhs.substr(0, end));
  }
  return key;
}

// Features of a (minimised) case, to tell classes apart at a glance.
std::string features(const Case& cs) {
  std::set<std::string> f;
  const Program& p = cs.prog;
  for (const CallSpec& c : cs.calls)
    for (const auto& a : c.args) {
      if (auto* t = std::get_if<TensorSpec>(&a)) {
        if (t->source == TensorSpec::Alias) f.insert("aliased arguments");
        if (t->source == TensorSpec::Captured) f.insert("captured tensor passed as argument");
        if (t->source == TensorSpec::Fresh && t->layout) f.insert("strided argument");
        for (int64_t d : t->shape)
          if (d == 0) f.insert("zero-size argument");
      }
    }
  std::set<int> outs;
  for (int o : p.outputs) {
    if (!outs.insert(o).second) f.insert("same output twice");
    if (o < p.tensor_args()) f.insert("argument returned");
    else if (o < p.first_step_tensor()) f.insert("captured returned");
  }
  if (p.num_args() > 0) f.insert("scalar arguments");
  std::map<K, const char*> kinds = {{K::Item, "item()"}, {K::Branch, "branch on a value"}, {K::Slice, "slice"},
                                    {K::SliceSized, "slice by size"}, {K::SliceNum, "slice by value"},
                                    {K::Pool, "pool"}, {K::Reduce, "reduce"}, {K::BinaryNum, "op with a number"},
                                    {K::NumTensor, "tensor from a number"}, {K::MatMul, "matmul"}};
  for (const Step& s : p.steps)
    if (kinds.count(s.kind)) f.insert(kinds[s.kind]);
  std::string out;
  for (const auto& s : f) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// A crash (an out-of-bounds read in a kernel, say) ends the process: say which seed it was on,
// then let the previous handler (Catch's) report it.
volatile std::sig_atomic_t g_running = 0;
char g_crash_message[160];
struct sigaction g_previous[32];

void on_crash(int sig) {
  if (g_running) {
    ssize_t ignored = write(2, g_crash_message, std::strlen(g_crash_message));
    (void)ignored;
  }
  sigaction(sig, &g_previous[sig], nullptr);
  raise(sig);
}

void set_running(uint64_t seed, const char* phase) {
  std::snprintf(g_crash_message, sizeof g_crash_message, "\ncapture fuzz: crashed on seed %llu (%s); rerun with EMBER_FUZZ_SEED=%llu\n",
                static_cast<unsigned long long>(seed), phase, static_cast<unsigned long long>(seed));
  g_running = 1;
}

struct CrashReporter {
  CrashReporter() {
    struct sigaction sa {};
    sa.sa_handler = on_crash;
    sigemptyset(&sa.sa_mask);
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) sigaction(sig, &sa, &g_previous[sig]);
  }
  ~CrashReporter() {
    g_running = 0;
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) sigaction(sig, &g_previous[sig], nullptr);
  }
};

// One program under every dynamic setting, in this process: "calls <n> <eager errors>" and then
// one "fail <dynamic> <category>" line per failing setting.
std::string run_program(uint64_t seed, const std::vector<std::optional<bool>>& dynamics, int progress) {
  set_running(seed, "generating");
  Case cs = generate(seed);
  if (progress >= 0) write_all(progress, "generated\n");  // the parent may generate it too
  set_running(seed, "eager");
  Prepared pr = prepare(cs);
  int errors = 0;
  for (const Outcome& o : pr.eager) errors += o.status != Outcome::Ok;
  std::string out = "calls " + std::to_string(cs.calls.size() * dynamics.size()) + " " + std::to_string(errors) + "\n";
  for (std::optional<bool> dynamic : dynamics) {
    set_running(seed, dynamic ? (*dynamic ? "compiled, dynamic=true" : "compiled, dynamic=false") : "compiled, dynamic unset");
    if (auto f = run_compiled(cs, pr, dynamic)) out += "fail " + dynamic_str(dynamic) + " " + f->mismatch.category + "\n";
  }
  return out;
}

std::optional<bool> parse_dynamic(const std::string& d) {
  if (d == "true") return true;
  if (d == "false") return false;
  return std::nullopt;
}

}  // namespace

TEST_CASE("fuzz: compiled programs equal eager bit for bit on every call", "[fuzz][capture]") {
  const int64_t programs = env_int("EMBER_FUZZ_PROGRAMS", kDefaultPrograms);
  const int64_t only_seed = env_int("EMBER_FUZZ_SEED", -1);
  const int64_t show = env_int("EMBER_FUZZ_SHOW", 3);
  const bool minimise = env_str("EMBER_FUZZ_MINIMIZE") != "0";
  const bool verbose = env_str("EMBER_FUZZ_VERBOSE") == "1";
  const bool triage = env_str("EMBER_FUZZ_TRIAGE") == "1";
  std::vector<std::optional<bool>> dynamics(std::begin(kDynamics), std::end(kDynamics));
  if (std::string d = env_str("EMBER_FUZZ_DYNAMIC"); !d.empty()) dynamics = {parse_dynamic(d)};

  std::vector<uint64_t> seeds;
  if (only_seed >= 0) seeds.push_back(static_cast<uint64_t>(only_seed));
  else
    for (int64_t i = 0; i < programs; ++i) seeds.push_back(kBaseSeed + static_cast<uint64_t>(i));

  struct Class {
    int count = 0;
    std::vector<uint64_t> seeds;
    std::string example;
  };
  std::map<std::string, Class> classes;
  int failures = 0, calls = 0, eager_errors = 0, shown = 0;
  CrashReporter crash_reporter;  // when not forking: at least name the seed

  // Run the programs, a batch per child process: each reports "begin <seed>", its results and
  // "end"; after a crash, a new child goes on with the next seed.
  struct Result {
    uint64_t seed = 0;
    std::string out;  // run_program's lines
    bool done = false;
    std::string crash;
  };
  std::vector<Result> results;
  for (size_t next = 0; next < seeds.size();) {
    std::string out = isolated([&](int fd) {
      std::string all;
      for (size_t i = next; i < seeds.size(); ++i) {
        if (verbose) std::fprintf(stderr, "seed %llu\n", static_cast<unsigned long long>(seeds[i]));
        std::string begin = "begin " + std::to_string(seeds[i]) + "\n";
        if (fd >= 0) write_all(fd, begin);
        std::string block = run_program(seeds[i], dynamics, fd) + "end\n";
        if (fd >= 0) write_all(fd, block);
        else all += begin + block;
      }
      return all;
    });
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("begin ", 0) == 0) {
        results.push_back({std::stoull(line.substr(6)), "", false, ""});
        ++next;
      } else if (line == "end") {
        results.back().done = true;
      } else if (!results.empty()) {
        results.back().out += line + "\n";
      }
    }
    if (crashed(out) && !results.empty() && !results.back().done) results.back().crash = crash_category(out);
    else if (crashed(out)) break;  // a crash outside any program: nothing more to learn
  }

  for (const Result& r : results) {
    const uint64_t seed = r.seed;
    const std::string& out = r.out;
    // (dynamic, category) of each failing run.
    std::vector<std::pair<std::optional<bool>, std::string>> failing;
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("calls ", 0) == 0) {
        std::istringstream in(line.substr(6));
        int n = 0, e = 0;
        in >> n >> e;
        calls += n;
        eager_errors += e;
      } else if (line.rfind("fail ", 0) == 0) {
        size_t space = line.find(' ', 5);
        failing.emplace_back(parse_dynamic(line.substr(5, space - 5)), line.substr(space + 1));
      }
    }
    if (!r.crash.empty()) {
      std::string category = r.crash;
      if (out.find("generated\n") == std::string::npos) {
        ++failures;
        Class& c = classes["generating the program crashed: " + category];
        if (c.seeds.size() < 8) c.seeds.push_back(seed);
        ++c.count;
        continue;
      }
      // Which setting crashed (every one, if eager did)?
      Case cs = generate(seed);
      for (std::optional<bool> dynamic : dynamics) {
        std::string cat = category_of(cs, dynamic);
        if (!cat.empty() && std::none_of(failing.begin(), failing.end(), [&](const auto& f) { return f.first == dynamic; }))
          failing.emplace_back(dynamic, cat);
      }
      if (failing.empty()) failing.emplace_back(dynamics.front(), category);
    }
    if (failing.empty()) continue;
    Case cs = generate(seed);
    for (const auto& [dynamic, category] : failing) {
      ++failures;
      std::string class_key = category;
      Case small;
      bool minimised = false;
      if (triage) {
        // Minimise every failure and group them by category, features and ops.
        small = minimize(cs, dynamic, category);
        minimised = true;
        class_key += " | " + features(small) + " | " + ops_key(small.prog) + " | dynamic=" + dynamic_str(dynamic);
      }
      Class& c = classes[class_key];
      ++c.count;
      if (c.seeds.size() < 8 && (c.seeds.empty() || c.seeds.back() != seed)) c.seeds.push_back(seed);
      bool first_of_class = c.count == 1;
      if (!first_of_class && shown >= show) continue;
      std::string report = "capture fuzz failure: " + report_of(cs, dynamic, category, false);
      if (minimise) {
        if (!minimised) small = minimize(cs, dynamic, category);
        report += "\nminimised (" + features(small) + "):\n" + report_of(small, dynamic, category, true);
      }
      if (first_of_class) c.example = report;
      if (shown < show) {
        // The report goes to stderr as it is: Catch wraps messages at 80 columns.
        ++shown;
        std::cerr << "\n==== " << report << std::flush;
        FAIL_CHECK("seed " << seed << ", dynamic=" << dynamic_str(dynamic) << ": " << category
                           << " (the program is printed above)");
      }
    }
  }
  if (!classes.empty()) {
    std::ostringstream summary;
    summary << failures << " failing runs of " << seeds.size() << " programs x " << dynamics.size()
            << " dynamic settings; classes:\n";
    for (const auto& [name, c] : classes) {
      summary << "  " << c.count << " x " << name << "; seeds:";
      for (uint64_t s : c.seeds) summary << " " << s;
      summary << "\n";
    }
    std::cerr << "\n" << summary.str() << "\nfirst example of each class:\n";
    for (const auto& [name, c] : classes) std::cerr << "---- " << name << "\n" << c.example << "\n";
    UNSCOPED_INFO(summary.str());
  }
  CHECK(failures == 0);
  // The generator keeps most programs valid: errors are checked, but they are not the point.
  CHECK(eager_errors < calls / 2);
}

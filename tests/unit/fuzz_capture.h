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
// 1, 2, 3, 5, 8 and now and then 0; a third of the programs go large, other large, then small,
// to break the facts a dynamic trace relied on), dtypes, layouts (transposed, strided, expanded), argument
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
//   EMBER_FUZZ_PROGRAMS=n     how many programs (default 3000 on the interpreter, 400 on generated
//                             code; seeds kBaseSeed + 0 .. n-1)
//   EMBER_FUZZ_TOLERANCE=1    floats may differ within rtol 1e-4, atol 1e-5 (set by the test on
//                             generated code)
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
//
// Layout: this header holds the shared types (a program, its steps, its calls, the outcome of a
// call, a failure), the settings and the functions the files share. fuzz_capture_ops.cpp
// interprets a program, fuzz_capture_inputs.cpp draws the calls and their tensors and numbers,
// fuzz_capture_gen.cpp draws programs, fuzz_capture_run.cpp runs a case eagerly and compiled,
// fuzz_capture_compare.cpp compares the outcomes, fuzz_capture_isolate.cpp runs work in a child
// process, fuzz_capture_minimize.cpp shrinks a failing case, fuzz_capture_print.cpp prints
// programs and reports, and test_fuzz_capture.cpp runs the seeds and tallies the failures.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include <ember/ember.h>

namespace ember::capture_fuzz {

// ---------------------------------------------------------------------------------------------
// Settings

constexpr uint64_t kBaseSeed = 0x5EED0000;
constexpr int kDefaultPrograms = 3000;
constexpr int kDefaultCodegenPrograms = 400;  // each compiles kernels: fewer

inline int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  return std::strtoll(v, nullptr, 0);
}

inline std::string env_str(const char* name) {
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
inline bool avoid(const char* what) {
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
  std::string str() const;  // as C++ source, e.g. 2.5f, int64_t{3} (fuzz_capture_print.cpp)
};

// One argument of a call, with its C++ type.
using Arg = std::variant<Tensor, double, float, int64_t, int32_t, bool>;

Num num_of(const Arg& a);  // a scalar argument as a number (fuzz_capture_ops.cpp)
Arg arg_of(const Num& n);  // a number as the argument of its C++ type (fuzz_capture_ops.cpp)

// ---------------------------------------------------------------------------------------------
// Programs and their calls

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

// A program and the calls it gets: what a seed stands for.
struct Case {
  uint64_t seed = 0;
  Program prog;
  std::vector<CallSpec> calls;
};

// ---------------------------------------------------------------------------------------------
// Running and comparing

// What a call did: its outputs, or the error it raised.
struct Outcome {
  enum Status { Ok, EmberError, OtherError } status = Ok;
  ErrorKind kind = ErrorKind::Value;
  std::string message;
  std::vector<Tensor> outs;
};

// How a compiled call differs from eager.
struct Mismatch {
  std::string category;  // the class of failure: the same class is kept while minimising
  std::string detail;
};

// A failing call of a case: which call, how it differs, and both outcomes printed.
struct Failure {
  uint64_t seed = 0;
  std::optional<bool> dynamic;
  size_t call = 0;
  Mismatch mismatch;
  std::string eager, compiled;
};

// The arguments of every call of a case, made once, and eager's outcomes.
struct Prepared {
  std::vector<std::vector<Arg>> args;
  std::vector<Outcome> eager;
};

// ---------------------------------------------------------------------------------------------
// The ops and the interpreter (fuzz_capture_ops.cpp)

// Names of the op variants a step's `op` picks, in the order of the interpreter's switches.
extern const char* const kUnaryNames[];
extern const char* const kBinaryNames[];
extern const char* const kCompareNames[];
extern const char* const kReduceNames[];
extern const int kUnaryCount, kBinaryCount, kReduceCount;

// Runs one step on the values so far: pushes its tensor onto T or its number onto N.
void exec_step(const Step& s, std::vector<Tensor>& T, std::vector<Num>& N);

// ---------------------------------------------------------------------------------------------
// Drawing at random (fuzz_capture_inputs.cpp, fuzz_capture_gen.cpp)

// The one source of randomness: a seed fixes a program, its calls and their data.
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

extern const std::vector<int64_t> kSizes;  // the sizes a dim takes (draw_size: now and then 0)
int64_t draw_size(Rng& rng);
DType draw_dtype(Rng& rng);
Num draw_num(Rng& rng, Slot slot);
std::vector<int64_t> vary_shape(Rng& rng, const std::vector<int64_t>& base);
// A tensor argument or captured tensor, its values drawn from spec.data_seed.
Tensor make_tensor(const TensorSpec& spec);
// A call of `p`; after the first (`previous`), scalar arguments tend to keep or twin its values.
CallSpec draw_call(Rng& rng, const Program& p, const std::vector<DType>& dtypes,
                   const std::vector<int64_t>& base, const CallSpec* previous);
// The arguments of a call, made once so that eager and every compiled run see the same tensors.
std::vector<Arg> materialize(const Program& p, const CallSpec& c);

Case generate(uint64_t seed);  // the program and calls of a seed

// ---------------------------------------------------------------------------------------------
// Running a case (fuzz_capture_run.cpp) and comparing (fuzz_capture_compare.cpp)

Prepared prepare(const Case& cs);  // the arguments and eager outcomes of every call
// The first call whose compiled outcome differs from eager, if any.
std::optional<Failure> run_compiled(const Case& cs, const Prepared& pr, std::optional<bool> dynamic);
std::optional<Failure> check(const Case& cs, std::optional<bool> dynamic);  // prepare + run_compiled
std::optional<Mismatch> compare(const Outcome& e, const Outcome& c, const std::vector<Arg>& args);

// ---------------------------------------------------------------------------------------------
// Printing (fuzz_capture_print.cpp)

std::string dtype_str(DType t);
std::string dynamic_str(std::optional<bool> d);  // "unset", "true" or "false"
std::string outcome_str(const Outcome& o);
// The case as pseudo-C++ with its calls and failure; `values` adds the values of small tensors.
std::string case_str(const Case& cs, const Failure& f, bool values);
// Keys to group failures by likely cause: the ops in order ("sqrt pow") and the features.
std::string ops_key(const Program& p);
std::string features(const Case& cs);

// ---------------------------------------------------------------------------------------------
// Isolation in a child process, and naming the seed on a crash (fuzz_capture_isolate.cpp)

void write_all(int fd, const std::string& data);
// Runs `fn` in a child (unless EMBER_FUZZ_FORK=0) and returns what it returned, or a crash
// marker and the signal. `progress` lets the child send text before it finishes (kept when it
// then crashes).
std::string isolated(const std::function<std::string(int progress)>& fn);
bool crashed(const std::string& out);
std::string crash_category(const std::string& out);  // "crashed: <signal>"
// The category of the case's failure under `dynamic`, "" when it passes.
std::string category_of(const Case& cs, std::optional<bool> dynamic);
// The printed case with its failure (found again, in a child).
std::string report_of(const Case& cs, std::optional<bool> dynamic, const std::string& category,
                      bool values);

// What a crash names: the seed and the phase it was in.
void set_running(uint64_t seed, const char* phase);
// While alive, a crash in this process prints the seed set_running named, then the previous
// handler (Catch's) reports it.
struct CrashReporter {
  CrashReporter();
  ~CrashReporter();
};

// ---------------------------------------------------------------------------------------------
// Minimising (fuzz_capture_minimize.cpp)

// A smaller case that fails with the same category under `dynamic`.
Case minimize(Case cs, std::optional<bool> dynamic, const std::string& category);

}  // namespace ember::capture_fuzz

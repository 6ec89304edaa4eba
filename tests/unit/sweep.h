// The op sweep's shared machinery: seeds, strided random inputs, cases and their checks, op table.
//
// The op sweep (docs/testing.md, family 1): every op in ir/ops.def but `input`, times every dtype,
// run eagerly through the public functions of frontend/ops.h (the reference interpreter), against
// the independent float64 reference in tests/unit/reference*.h. Each op gets at least 20 random
// cases per dtype, among them a 0-d tensor, a zero-size dim, size-1 broadcasting and inputs that
// are transposed, sliced with a step, expanded or at a storage offset. Each case checks the
// output dtype and shape against PyTorch's rules, the values within docs/testing.md's tolerances, and
// that the inputs' storage was not touched. Dtypes an op does not support must raise
// ember::Error of kind Type. Failures print the op, dtype, case, seed, shapes and layouts; the
// same seed reproduces them (EMBER_SWEEP_SEED changes the base seed; EMBER_SWEEP_VERBOSE=1 prints
// every case).
//
// Layout: sweep.cpp runs and reports cases and holds the expected-failure table, sweep_gen.cpp
// draws inputs, sweep_specs.cpp is the op table, sweep_elementwise.{h,cpp} holds the elementwise
// semantics shared with the promotion test, and each test_sweep_<family>.cpp builds the cases of
// one op family and holds its TEST_CASEs.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "frontend/tensor.h"
#include "ir/error.h"
#include "ir/op.h"
#include "tests/unit/reference.h"

namespace ember::sweep {

using ref::Ints;
using ref::Ref;

constexpr int kCases = 20;  // random cases per (op, dtype)

// ---- expected failures (sweep.cpp): (op, dtype) pairs known to mismatch the reference. Keep it
// small; an entry that starts passing fails the sweep so that it gets removed. A name with a
// bracketed suffix is a sub-case of that op (e.g. "clamp[min>max]").
struct ExpectedFailure {
  const char* op;
  DType dtype;
  const char* why;
};
extern const std::vector<ExpectedFailure> kExpectedFailures;

// A case builder's switch over ops ends here: an op it does not list fails the sweep instead
// of being tested as some other op.
[[noreturn]] void unlisted(Op op, const char* where);

// ---- names and seeds (sweep.cpp)

std::string dname(DType t);
std::string op_text(Op op);
std::string num(double v);  // all 17 digits

uint64_t base_seed();
// A seed per (op, dtype, case), independent of the order in which cases run.
uint64_t case_seed(const std::string& op, DType dt, int index);
// "op <op>, dtype <dt>, case <index>, seed <seed>": the start of every failure message.
std::string header(const std::string& op, DType dt, int index, uint64_t seed);

// ---- inputs (sweep_gen.cpp)

// Where values are drawn from, per dtype family.
struct Domain {
  double lo = -3, hi = 3;       // floats
  int64_t ilo = -20, ihi = 20;  // integers, clipped to the dtype
  double min_abs = 0;           // |x| >= min_abs (integers and bool: nonzero when > 0)
  double quantum = 0;           // floats on a grid exact in every float dtype (ties, zeros)
  double specials = 0;          // probability of NaN / +inf / -inf (floats)
};

Domain dom(double lo, double hi, int64_t ilo, int64_t ihi);
Domain coarse();  // small values on a 0.5 grid: zeros and ties
Domain nonzero(Domain d, double min_abs = 0.25);

enum class Layout { Contiguous, Offset, Transposed, Stepped, Expanded, Mixed };

// A strided input over a larger storage, with its logical values and a snapshot of the storage.
struct Input {
  DType dtype;
  Ref ref;
  Tensor tensor;
  std::shared_ptr<Storage> storage;
  std::vector<unsigned char> snapshot;
  std::string desc;
};

// The random source of one case: values, shapes and strided inputs, all from one seed.
class Gen {
 public:
  Gen(uint64_t seed, int index) : rng_(seed), index_(index) {}
  int index() const { return index_; }
  std::mt19937_64& rng() { return rng_; }

  int64_t integer(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  double real(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng_); }
  bool coin(double p = 0.5) { return real(0, 1) < p; }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[integer(0, static_cast<int64_t>(v.size()) - 1)];
  }

  double value(DType dt, const Domain& d);
  Ref values(DType dt, const Ints& shape, const Domain& d);

  // A random shape: rank in [min_rank, max_rank], dims in [1, max_dim] (1 more often).
  Ints shape(int min_rank, int max_rank, int64_t max_dim = 5);

  // Case 0 is 0-d and case 1 has a zero-size dim; the others are random.
  Ints case_shape(int max_rank = 4, int64_t max_dim = 5);

  // A shape that broadcasts to `out`: some leading dims dropped, some dims set to 1.
  Ints broadcast_operand(const Ints& out);

  // The layout of the next input: cycles with the case index so that every op sees each layout.
  Layout next_layout();

  // A random input of `shape` laid out by the next layout (expanded dims repeat their values).
  Input input(DType dt, const Ints& shape, const Domain& d);

  // An input holding exactly `r` (no expanded dims), laid out by the next layout.
  Input input_of(DType dt, Ref r, const Domain& garbage = Domain());

 private:
  Input build(DType dt, Ref r, Layout layout, const std::vector<bool>& expanded, const Domain& d);

  std::mt19937_64 rng_;
  int index_;
  int slot_ = 0;
};

// ---- cases and their checks (sweep.cpp)

// One more output of a multi-output op.
struct ExpectedOutput {
  DType dtype;
  Ref out;
};

struct Expected {
  DType dtype = DType::Float32;
  Ref out;                         // unrounded reference values
  std::vector<ExpectedOutput> more;  // outputs 1, 2, ... of a multi-output op
  std::optional<ErrorKind> error;  // the call must raise this instead
  bool big_reduction = false;      // a reduction over > 4096 elements (looser f16/bf16 rtol)
  bool check_values = true;        // false: dtype and shape only (random ops)
};

// The expected outcome of a case: a value of `dtype`, or an error of `kind`.
Expected result(DType dtype, Ref out);
// The outputs of a multi-output op, in order, with their dtypes.
Expected results(const std::vector<DType>& dtypes, std::vector<Ref> outs);
Expected raises(ErrorKind kind);

struct Case {
  std::vector<Input> inputs;
  std::string note;     // attributes, for messages
  std::string variant;  // a sub-case with its own failure entry
  std::function<Tensor(const std::vector<Tensor>&)> call;
  // The op alone, for the compiled run, where `call` also reads its result (random ops check
  // their statistics); unset: `call` itself.
  std::function<Tensor(const std::vector<Tensor>&)> traced;
  // Why the case cannot run through compile(); unset: it must.
  const char* not_compiled = nullptr;
  // Set instead of `call` for a multi-output op: every output, in order.
  std::function<std::vector<Tensor>(const std::vector<Tensor>&)> call_multi;
  std::function<Expected()> expect;
  bool shares_storage = false;  // a view of input 0 (every output of it)
  // Set by the sweep when the op has a decomposition: the case also runs decomposed.
  std::optional<Op> decomposes;
};

// The outputs of a case's call (one for a single-output op).
std::vector<Tensor> invoke(const Case& c, const std::vector<Tensor>& args);

// The logical values of an array, read with its own strides and offset.
std::vector<double> read(const Array& a);

struct Outcome {
  int cases = 0;
  std::vector<std::string> failures;
};

// Runs one case; appends a message to `out.failures` for each way it went wrong.
void run_case(const Case& c, const std::string& header, Outcome& out, int index = 0);

// Checks one output against its expected dtype and values within the tolerances; returns the
// failures (sweep.cpp).
std::vector<std::string> check_output(const Array& a, DType dtype, const Ref& want,
                                      const Expected& e);

// Runs the case through compile() and compares with eager's result or error: bit for bit on the
// interpreter, within the tolerances on generated code (sweep_compiled.cpp).
void check_compiled(const Case& c, const std::vector<Tensor>& args, const std::vector<Tensor>* eager,
                    const Expected* e, std::optional<ErrorKind> eager_error, int index,
                    const std::function<void(const std::string&)>& fail);

// For a case whose op has a decomposition: runs it compiled with the op decomposed into
// primitives (EMBER_EXTRA_PASSES) and checks the outputs against the reference as eager's are
// checked (not bit for bit: the decomposition may round differently), or raises eager's error
// (sweep_compiled.cpp).
void check_decomposed(const Case& c, const std::vector<Tensor>& args, const Expected& e,
                      std::optional<ErrorKind> eager_error, int index,
                      const std::function<void(const std::string&)>& fail);

// Reports one (op, dtype) outcome through Catch, honouring the expected-failure table.
void report(const std::string& op, DType dt, const Outcome& o, int min_cases);

// ---- the op table (sweep_specs.cpp)

using Builder = Case (*)(Op op, DType dt, Gen& g);

struct Spec {
  Op op;
  const char* family;
  bool (*supports)(DType);
  Builder build;
  int cases = kCases;
};

// One entry per op of ir/ops.def but `input`.
const std::vector<Spec>& specs();

// Sweeps every op of `family` over every dtype (sweep.cpp).
void sweep_family(const char* family);

// The case builders, one per op family, each defined in test_sweep_<family>.cpp.
Case elementwise(Op op, DType dt, Gen& g);
Case reduction(Op op, DType dt, Gen& g);
Case matmul_case(Op op, DType dt, Gen& g);
Case linear_case(Op op, DType dt, Gen& g);
Case conv2d_case(Op op, DType dt, Gen& g);
Case conv2d_grad_case(Op op, DType dt, Gen& g);
Case pool_case(Op op, DType dt, Gen& g);
Case view_case(Op op, DType dt, Gen& g);
Case movement_case(Op op, DType dt, Gen& g);
Case softmax_case(Op op, DType dt, Gen& g);
Case norm_case(Op op, DType dt, Gen& g);
Case batch_norm_case(Op op, DType dt, Gen& g);
Case attention_case(Op op, DType dt, Gen& g);
Case full_case(Op op, DType dt, Gen& g);
Case arange_case(Op op, DType dt, Gen& g);
Case constant_case(Op op, DType dt, Gen& g);
Case random_case(Op op, DType dt, Gen& g);
Case extern_case(Op op, DType dt, Gen& g);
Case extreme_case(Op op, DType dt, Gen& g);
Case var_mean_case(Op op, DType dt, Gen& g);
Case sort_case(Op op, DType dt, Gen& g);
Case split_case(Op op, DType dt, Gen& g);
Case native_layer_norm_case(Op op, DType dt, Gen& g);
Case native_batch_norm_case(Op op, DType dt, Gen& g);

}  // namespace ember::sweep

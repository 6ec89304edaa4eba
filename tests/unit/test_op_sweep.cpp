// The op sweep (TESTING.md, family 1): every op in ir/ops.def but `input`, times every dtype,
// run eagerly through the public functions of frontend/ops.h (the reference interpreter), against
// the independent float64 reference in tests/unit/reference.h. Each op gets at least 20 random
// cases per dtype, among them a 0-d tensor, a zero-size dim, size-1 broadcasting and inputs that
// are transposed, sliced with a step, expanded or at a storage offset. Each case checks the
// output dtype and shape against PyTorch's rules, the values within TESTING.md's tolerances, and
// that the inputs' storage was not touched. Dtypes an op does not support must raise
// ember::Error of kind Type. Failures print the op, dtype, case, seed, shapes and layouts; the
// same seed reproduces them (EMBER_SWEEP_SEED changes the base seed; EMBER_SWEEP_VERBOSE=1 prints
// every case).
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <sstream>

#include "frontend/ops.h"
#include "frontend/tensor.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "runtime/interpreter.h"
#include "tests/catch.h"
#include "tests/unit/reference.h"

namespace {

using namespace ember;
using ref::Ints;
using ref::Ref;

constexpr int kCases = 20;  // random cases per (op, dtype)

// ---- expected failures: (op, dtype) pairs known to mismatch the reference. Keep it small; an
// entry that starts passing fails the sweep so that it gets removed. A name with a bracketed
// suffix is a sub-case of that op (e.g. "clamp[min>max]").
struct ExpectedFailure {
  const char* op;
  DType dtype;
  const char* why;
};
// Empty: the three bugs the sweep found (matmul dropping a contiguous operand's storage offset,
// clamp with min > max, integer operands not converted to the promoted dtype) are fixed, and
// tests/unit/test_regressions.cpp keeps a small case for each.
const std::vector<ExpectedFailure> kExpectedFailures = {};

bool expected_to_fail(const std::string& op, DType dt) {
  for (const ExpectedFailure& e : kExpectedFailures)
    if (op == e.op && dt == e.dtype) return true;
  return false;
}

std::string dname(DType t) {
  return std::string(dtype_name(t));
}

uint64_t base_seed() {
  static const uint64_t seed = [] {
    const char* env = std::getenv("EMBER_SWEEP_SEED");
    return env ? std::strtoull(env, nullptr, 0) : uint64_t{0x5eed2024};
  }();
  return seed;
}

// A seed per (op, dtype, case), independent of the order in which cases run.
uint64_t case_seed(const std::string& op, DType dt, int index) {
  uint64_t h = 1469598103934665603ull ^ base_seed();
  auto mix = [&](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  for (char c : op) mix(static_cast<unsigned char>(c));
  mix(static_cast<uint64_t>(dt) + 1000);
  mix(static_cast<uint64_t>(index) + 5000);
  return h;
}

std::string hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// ---- inputs

// Where values are drawn from, per dtype family.
struct Domain {
  double lo = -3, hi = 3;       // floats
  int64_t ilo = -20, ihi = 20;  // integers, clipped to the dtype
  double min_abs = 0;           // |x| >= min_abs (integers and bool: nonzero when > 0)
  double quantum = 0;           // floats on a grid exact in every float dtype (ties, zeros)
  double specials = 0;          // probability of NaN / +inf / -inf (floats)
};

Domain dom(double lo, double hi, int64_t ilo, int64_t ihi) {
  Domain d;
  d.lo = lo, d.hi = hi, d.ilo = ilo, d.ihi = ihi;
  return d;
}
Domain coarse() {
  Domain d = dom(-2, 2, -3, 3);
  d.quantum = 0.5;
  return d;
}
Domain nonzero(Domain d, double min_abs = 0.25) {
  d.min_abs = min_abs;
  return d;
}

enum class Layout { Contiguous, Offset, Transposed, Stepped, Expanded, Mixed };
constexpr int kNumLayouts = 6;
const char* layout_name(Layout l) {
  static const char* names[] = {"contiguous", "offset",   "transposed",
                                "stepped",    "expanded", "mixed"};
  return names[static_cast<int>(l)];
}

// A strided input over a larger storage, with its logical values and a snapshot of the storage.
struct Input {
  DType dtype;
  Ref ref;
  Tensor tensor;
  std::shared_ptr<Storage> storage;
  std::vector<unsigned char> snapshot;
  std::string desc;
};

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

  double value(DType dt, const Domain& d) {
    if (dt == DType::Bool) return d.min_abs > 0 ? 1 : coin() ? 1 : 0;
    if (ref::is_int(dt)) {
      int64_t lo = d.ilo, hi = d.ihi;
      if (dt != DType::Int64) {  // the bounds of narrower types are exact doubles
        lo = std::max<int64_t>(lo, static_cast<int64_t>(ref::int_min(dt)));
        hi = std::min<int64_t>(hi, static_cast<int64_t>(ref::int_max(dt)));
      }
      while (true) {
        int64_t v = integer(lo, hi);
        if (!(d.min_abs > 0 && v == 0)) return static_cast<double>(v);
      }
    }
    if (d.specials > 0 && coin(d.specials)) return pick<double>({ref::kNaN, ref::kInf, -ref::kInf});
    while (true) {
      double v = real(d.lo, d.hi);
      if (d.quantum > 0) v = std::round(v / d.quantum) * d.quantum + 0.0;
      v = ref::round_float(v, dt);
      if (std::fabs(v) >= d.min_abs && v >= d.lo && v <= d.hi) return v;
    }
  }

  Ref values(DType dt, const Ints& shape, const Domain& d) {
    Ref r{shape, {}};
    for (int64_t i = 0; i < ref::numel(shape); ++i) r.v.push_back(value(dt, d));
    return r;
  }

  // A random shape: rank in [min_rank, max_rank], dims in [1, max_dim] (1 more often).
  Ints shape(int min_rank, int max_rank, int64_t max_dim = 5) {
    Ints s(integer(min_rank, max_rank));
    for (int64_t& d : s) d = coin(0.2) ? 1 : integer(2, max_dim);
    return s;
  }

  // Case 0 is 0-d and case 1 has a zero-size dim; the others are random.
  Ints case_shape(int max_rank = 4, int64_t max_dim = 5) {
    if (index_ == 0) return {};
    Ints s = shape(1, max_rank, max_dim);
    if (index_ == 1) s[integer(0, static_cast<int64_t>(s.size()) - 1)] = 0;
    return s;
  }

  // A shape that broadcasts to `out`: some leading dims dropped, some dims set to 1.
  Ints broadcast_operand(const Ints& out) {
    Ints s = out;
    if (coin(0.3)) s.erase(s.begin(), s.begin() + integer(0, static_cast<int64_t>(s.size())));
    for (int64_t& d : s)
      if (coin(0.25)) d = 1;
    return s;
  }

  // The layout of the next input: cycles with the case index so that every op sees each layout.
  Layout next_layout() { return static_cast<Layout>((index_ + 2 * slot_++) % kNumLayouts); }

  // A random input of `shape` laid out by the next layout (expanded dims repeat their values).
  Input input(DType dt, const Ints& shape, const Domain& d) {
    Layout layout = next_layout();
    std::vector<bool> expanded(shape.size(), false);
    if (layout == Layout::Expanded || layout == Layout::Mixed) {
      // One dim of size > 1 always; of two or more, one always stays whole, the rest 1 in 3.
      std::vector<size_t> candidates;
      for (size_t i = 0; i < shape.size(); ++i)
        if (shape[i] > 1) candidates.push_back(i);
      std::shuffle(candidates.begin(), candidates.end(), rng_);
      for (size_t k = 0; k < candidates.size(); ++k)
        expanded[candidates[k]] = k == 0 || (k + 1 < candidates.size() && coin(1.0 / 3));
    }
    Ints base = shape;
    for (size_t i = 0; i < shape.size(); ++i)
      if (expanded[i]) base[i] = 1;
    Ref r = ref::broadcast_to(values(dt, base, d), shape);
    return build(dt, std::move(r), layout, expanded, d);
  }

  // An input holding exactly `r` (no expanded dims), laid out by the next layout.
  Input input_of(DType dt, Ref r, const Domain& garbage = Domain()) {
    Layout layout = next_layout();
    if (layout == Layout::Expanded) layout = Layout::Stepped;
    std::vector<bool> expanded(r.shape.size(), false);
    return build(dt, std::move(r), layout, expanded, garbage);
  }

 private:
  Input build(DType dt, Ref r, Layout layout, const std::vector<bool>& expanded, const Domain& d) {
    const Ints shape = r.shape;  // a copy: r moves into the Input below
    size_t rank = shape.size();
    Ints perm(rank);
    std::iota(perm.begin(), perm.end(), 0);
    bool permuted = (layout == Layout::Transposed || layout == Layout::Mixed) && rank >= 2;
    if (permuted) {
      if (layout == Layout::Transposed)
        std::reverse(perm.begin(), perm.end());
      else
        while (std::is_sorted(perm.begin(), perm.end()))
          std::shuffle(perm.begin(), perm.end(), rng_);
    }
    Ints step(rank, 1);
    if ((layout == Layout::Stepped || layout == Layout::Mixed) && rank >= 1) {
      for (int64_t& s : step) s = coin(0.4) ? integer(2, 3) : 1;
      step[integer(0, static_cast<int64_t>(rank) - 1)] = integer(2, 3);
    }
    int64_t offset = (layout == Layout::Offset || layout == Layout::Mixed) ? integer(1, 9) : 0;
    // Physical dims are the logical ones in `perm` order, each `step` times larger.
    Ints phys(rank), pstride(rank), strides(rank);
    for (size_t i = 0; i < rank; ++i) {
      int64_t dim = perm[i];
      phys[i] = expanded[dim] ? 1 : std::max<int64_t>(shape[dim], 1) * step[dim];
    }
    int64_t s = 1;
    for (size_t i = rank; i-- > 0;) {
      pstride[i] = s;
      s *= phys[i];
    }
    for (size_t i = 0; i < rank; ++i) {
      int64_t dim = perm[i];
      strides[dim] = expanded[dim] ? 0 : pstride[i] * step[dim];
    }
    int64_t count = offset + s + integer(0, 3);
    size_t item = itemsize(dt);
    Array base = Array::empty(dt, {count});  // the larger storage the view looks into
    Input in{dt, std::move(r), Tensor(), base.storage(), {}, ""};
    auto* bytes = static_cast<unsigned char*>(in.storage->data);
    for (int64_t i = 0; i < count; ++i) ref::encode(bytes + i * item, dt, value(dt, d));  // garbage
    for (int64_t i = 0; i < ref::numel(shape); ++i) {
      Ints idx = ref::unravel(i, shape);
      int64_t off = offset;
      for (size_t k = 0; k < rank; ++k) off += idx[k] * strides[k];
      ref::encode(bytes + off * item, dt, in.ref.v[i]);
    }
    in.tensor = Tensor(base.view(shape, strides, offset));
    in.snapshot.assign(bytes, bytes + count * item);
    in.desc = dname(dt) + ref::shape_text(shape) + " " + layout_name(layout) +
              " strides=" + ref::shape_text(strides) + " offset=" + std::to_string(offset);
    return in;
  }

  std::mt19937_64 rng_;
  int index_;
  int slot_ = 0;
};

// ---- cases and their checks

struct Expected {
  DType dtype = DType::Float32;
  Ref out;                         // unrounded reference values
  std::optional<ErrorKind> error;  // the call must raise this instead
  bool big_reduction = false;      // a reduction over > 4096 elements (looser f16/bf16 rtol)
  bool check_values = true;        // false: dtype and shape only (random ops)
};

// The expected outcome of a case: a value of `dtype`, or an error of `kind`.
Expected result(DType dtype, Ref out) {
  Expected e;
  e.dtype = dtype;
  e.out = std::move(out);
  return e;
}
Expected raises(ErrorKind kind) {
  Expected e;
  e.error = kind;
  return e;
}

struct Case {
  std::vector<Input> inputs;
  std::string note;     // attributes, for messages
  std::string variant;  // a sub-case with its own failure entry
  std::function<Tensor(const std::vector<Tensor>&)> call;
  std::function<Expected()> expect;
  bool shares_storage = false;  // a view of input 0
};

struct Tol {
  double rtol, atol;
};

Tol tolerance(DType t, bool big_reduction) {
  switch (t) {
    case DType::Float16:
    case DType::BFloat16:
      return {big_reduction ? 1e-2 : 2e-3, 1e-5};
    case DType::Float32:
      return {1.3e-5, 1.5e-5};
    case DType::Float64:
      return {1e-9, 1e-12};
    default:
      return {0, 0};
  }
}

// Integers and bool exactly; floats within tolerance of the unrounded reference, plus half an ulp
// of the output dtype (the one rounding a correct float16/bfloat16 result must make). NaN where
// the reference is NaN and nowhere else; infinities exactly.
bool matches(double got, double want, DType t, Tol tol) {
  if (!ref::is_float(t)) return got == ref::cast_value(want, t);
  double rounded = ref::round_float(want, t);
  if (std::isnan(rounded) || std::isnan(got)) return std::isnan(rounded) && std::isnan(got);
  if (std::isinf(rounded) || std::isinf(got)) return got == rounded;
  return std::fabs(got - want) <= tol.atol + tol.rtol * std::fabs(want) + ref::half_ulp(want, t);
}

// The logical values of an array, read with its own strides and offset.
std::vector<double> read(const Array& a) {
  std::vector<double> out;
  const auto* base = static_cast<const unsigned char*>(a.storage()->data);
  size_t item = itemsize(a.dtype());
  for (int64_t i = 0; i < ref::numel(a.shape()); ++i) {
    Ints idx = ref::unravel(i, a.shape());
    int64_t off = a.offset();
    for (size_t k = 0; k < idx.size(); ++k) off += idx[k] * a.strides()[k];
    out.push_back(ref::decode(base + off * item, a.dtype()));
  }
  return out;
}

std::string num(double v) {
  std::ostringstream s;
  s.precision(17);
  s << v;
  return s.str();
}

const char* kind_name(ErrorKind k) {
  switch (k) {
    case ErrorKind::Value:
      return "Value";
    case ErrorKind::Type:
      return "Type";
    case ErrorKind::Runtime:
      return "Runtime";
    case ErrorKind::NotImplemented:
      return "NotImplemented";
    case ErrorKind::Internal:
      return "Internal";
  }
  return "?";
}

struct Outcome {
  int cases = 0;
  std::vector<std::string> failures;
};

// Runs one case; appends a message to `out.failures` for each way it went wrong.
void run_case(const Case& c, const std::string& header, Outcome& out) {
  ++out.cases;
  std::string context = header + (c.note.empty() ? "" : " {" + c.note + "}");
  for (size_t i = 0; i < c.inputs.size(); ++i)
    context += "\n    input " + std::to_string(i) + ": " + c.inputs[i].desc;
  auto fail = [&](const std::string& what) { out.failures.push_back(context + "\n    " + what); };
  static const bool verbose = std::getenv("EMBER_SWEEP_VERBOSE") != nullptr;
  if (verbose) std::printf("%s\n", context.c_str());
  std::vector<Tensor> args;
  for (const Input& in : c.inputs) args.push_back(in.tensor);
  Expected e = c.expect();
  auto check_inputs = [&] {
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      const Input& in = c.inputs[i];
      if (std::memcmp(in.storage->data, in.snapshot.data(), in.snapshot.size()) != 0)
        fail("input " + std::to_string(i) + " was modified");
    }
  };
  Tensor y;
  try {
    y = c.call(args);
  } catch (const Error& err) {
    check_inputs();
    if (e.error && err.kind() == *e.error) return;
    fail(std::string("threw ember::Error(") + kind_name(err.kind()) + "): " + err.what() +
         (e.error ? std::string(" (expected kind ") + kind_name(*e.error) + ")" : ""));
    return;
  } catch (const std::exception& err) {
    fail(std::string("threw a non-ember exception: ") + err.what());
    return;
  }
  check_inputs();
  if (e.error) {
    fail(std::string("expected ember::Error(") + kind_name(*e.error) + "), got a result");
    return;
  }
  const Array& a = y.array();
  if (a.dtype() != e.dtype) fail("dtype " + dname(a.dtype()) + ", expected " + dname(e.dtype));
  if (a.shape() != e.out.shape) {
    fail("shape " + ref::shape_text(a.shape()) + ", expected " + ref::shape_text(e.out.shape));
    return;
  }
  if (c.shares_storage && a.storage() != c.inputs[0].storage)
    fail("a view op did not share its input's storage");
  if (!e.check_values) return;
  std::vector<double> got = read(a);
  Tol tol = tolerance(a.dtype(), e.big_reduction);
  int bad = 0;
  std::string detail;
  for (size_t i = 0; i < got.size(); ++i) {
    if (matches(got[i], e.out.v[i], a.dtype(), tol)) continue;
    if (++bad > 3) continue;
    detail += "\n    at " + ref::shape_text(ref::unravel(static_cast<int64_t>(i), e.out.shape)) +
              ": got " + num(got[i]) + ", expected " + num(e.out.v[i]);
  }
  if (bad)
    fail(std::to_string(bad) + " of " + std::to_string(got.size()) + " values differ (" +
         dname(a.dtype()) + " rtol " + num(tol.rtol) + " atol " + num(tol.atol) + ")" + detail);
}

// Reports one (op, dtype) outcome through Catch, honouring the expected-failure table.
void report(const std::string& op, DType dt, const Outcome& o, int min_cases) {
  INFO("op " << op << ", dtype " << dname(dt) << ", base seed " << hex(base_seed()));
  if (expected_to_fail(op, dt)) {
    if (o.failures.empty())
      FAIL_CHECK("(" << op << ", " << dname(dt)
                     << ") is in the expected-failure table but now passes: remove it");
    return;
  }
  CHECK(o.cases >= min_cases);
  for (size_t i = 0; i < o.failures.size() && i < 3; ++i) FAIL_CHECK(o.failures[i]);
  if (o.failures.size() > 3)
    FAIL_CHECK("... and " << o.failures.size() - 3 << " more failing cases");
}

// ---- the op table

using Builder = Case (*)(Op op, DType dt, Gen& g);

struct Spec {
  Op op;
  const char* family;
  bool (*supports)(DType);
  Builder build;
  int cases = kCases;
};

bool all_dtypes(DType) {
  return true;
}
bool no_bool(DType t) {
  return t != DType::Bool;
}
bool floats_only(DType t) {
  return ref::is_float(t);
}
bool no_floats(DType t) {
  return !ref::is_float(t);
}

std::string op_text(Op op) {
  return std::string(op_name(op));
}

// ---- elementwise

enum class EwKind { Same, Float, Bool, Cast };

EwKind ew_kind(Op op) {
  switch (op) {
    case Op::Exp:
    case Op::Exp2:
    case Op::Log:
    case Op::Log2:
    case Op::Log1p:
    case Op::Expm1:
    case Op::Sqrt:
    case Op::Rsqrt:
    case Op::Sin:
    case Op::Cos:
    case Op::Tan:
    case Op::Tanh:
    case Op::Sigmoid:
    case Op::Gelu:
    case Op::Silu:
    case Op::Erf:
    case Op::Reciprocal:
    case Op::Div:
      return EwKind::Float;
    case Op::LogicalNot:
    case Op::IsNan:
    case Op::IsInf:
    case Op::Eq:
    case Op::Ne:
    case Op::Lt:
    case Op::Le:
    case Op::Gt:
    case Op::Ge:
    case Op::LogicalAnd:
    case Op::LogicalOr:
    case Op::LogicalXor:
      return EwKind::Bool;
    case Op::Cast:
      return EwKind::Cast;
    default:
      return EwKind::Same;
  }
}

int arity(Op op) {
  if (op == Op::Where || op == Op::Clamp) return 3;
  return op >= Op::Add ? 2 : 1;
}

// PyTorch semantics of one element, in double, on operands already converted to the compute dtype.
double ew_ref(Op op, const std::vector<double>& a, bool integer, int variant) {
  double x = a[0], y = a.size() > 1 ? a[1] : 0;
  auto to_i = [](double v) { return static_cast<int64_t>(v); };
  switch (op) {
    case Op::Neg:
      return -x;
    case Op::Abs:
      return std::fabs(x);
    case Op::Exp:
      return std::exp(x);
    case Op::Exp2:
      return std::exp2(x);
    case Op::Log:
      return std::log(x);
    case Op::Log2:
      return std::log2(x);
    case Op::Log1p:
      return std::log1p(x);
    case Op::Expm1:
      return std::expm1(x);
    case Op::Sqrt:
      return std::sqrt(x);
    case Op::Rsqrt:
      return 1.0 / std::sqrt(x);
    case Op::Sin:
      return std::sin(x);
    case Op::Cos:
      return std::cos(x);
    case Op::Tan:
      return std::tan(x);
    case Op::Tanh:
      return std::tanh(x);
    case Op::Sigmoid:
      return 1.0 / (1.0 + std::exp(-x));
    case Op::Relu:
      return std::isnan(x) ? x : std::max(x, 0.0);
    case Op::Gelu:
      if (variant)
        return 0.5 * x *
               (1 + std::tanh(std::sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
      return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case Op::Silu:
      return x / (1.0 + std::exp(-x));
    case Op::Erf:
      return std::erf(x);
    case Op::Floor:
      return std::floor(x);
    case Op::Ceil:
      return std::ceil(x);
    case Op::Round:
      return std::nearbyint(x);  // half to even in the default rounding mode
    case Op::Trunc:
      return std::trunc(x);
    case Op::Sign:
      return std::isnan(x) ? x : (x > 0) - (x < 0);
    case Op::Reciprocal:
      return 1.0 / x;
    case Op::LogicalNot:
      return x == 0;
    case Op::IsNan:
      return std::isnan(x);
    case Op::IsInf:
      return std::isinf(x);
    case Op::Cast:
      return x;
    case Op::Add:
      return x + y;
    case Op::Sub:
      return x - y;
    case Op::Mul:
      return x * y;
    case Op::Div:
      return x / y;
    case Op::FloorDivide:
      if (integer) return std::floor(x / y);
      return static_cast<double>(std::floor(static_cast<long double>(x) / y));
    case Op::Remainder: {
      if (integer) return x - y * std::floor(x / y);
      long double q = std::floor(static_cast<long double>(x) / y);
      return static_cast<double>(x - static_cast<long double>(y) * q);
    }
    case Op::Pow:
      return std::pow(x, y);
    case Op::Maximum:
      return std::isnan(x) || std::isnan(y) ? ref::kNaN : std::max(x, y);
    case Op::Minimum:
      return std::isnan(x) || std::isnan(y) ? ref::kNaN : std::min(x, y);
    case Op::Eq:
      return x == y;
    case Op::Ne:
      return x != y;
    case Op::Lt:
      return x < y;
    case Op::Le:
      return x <= y;
    case Op::Gt:
      return x > y;
    case Op::Ge:
      return x >= y;
    case Op::LogicalAnd:
      return x != 0 && y != 0;
    case Op::LogicalOr:
      return x != 0 || y != 0;
    case Op::LogicalXor:
      return (x != 0) != (y != 0);
    case Op::BitwiseAnd:
      return static_cast<double>(to_i(x) & to_i(y));
    case Op::BitwiseOr:
      return static_cast<double>(to_i(x) | to_i(y));
    case Op::BitwiseXor:
      return static_cast<double>(to_i(x) ^ to_i(y));
    case Op::Where:
      return x != 0 ? a[1] : a[2];
    case Op::Clamp: {  // torch.clamp: min(max(x, lo), hi), so lo > hi gives hi
      if (std::isnan(x) || std::isnan(a[1]) || std::isnan(a[2])) return ref::kNaN;
      return std::min(std::max(x, a[1]), a[2]);
    }
    default:
      return ref::kNaN;
  }
}

// Input domains that keep each op well conditioned and inside its domain.
Domain ew_domain(Op op, int operand) {
  switch (op) {
    case Op::Exp:
    case Op::Exp2:
    case Op::Expm1:
      return dom(-4, 4, -5, 5);
    case Op::Log:
    case Op::Log2:
    case Op::Sqrt:
    case Op::Rsqrt:
      return dom(0.05, 6, 1, 30);
    case Op::Log1p:
      return dom(-0.9, 6, 0, 30);
    case Op::Sin:
    case Op::Cos:
      return dom(-6, 6, -6, 6);
    case Op::Tan:
      return dom(-1.4, 1.4, -3, 3);  // away from the poles at +-pi/2
    case Op::Tanh:
    case Op::Sigmoid:
    case Op::Gelu:
    case Op::Silu:
    case Op::Erf:
      return dom(-4, 4, -5, 5);
    case Op::Reciprocal:
      return nonzero(Domain());
    case Op::Div:
      return operand == 1 ? nonzero(Domain()) : Domain();
    case Op::FloorDivide:
    case Op::Remainder:
      return operand == 1 ? nonzero(dom(-3, 3, -7, 7)) : dom(-3, 3, -30, 30);
    case Op::Pow:
      return operand == 0 ? dom(0.1, 3, -4, 4) : dom(-2, 2, 0, 4);
    case Op::Floor:
    case Op::Ceil:
    case Op::Round:
    case Op::Trunc: {
      Domain d = dom(-4, 4, -20, 20);
      d.quantum = 0.125;  // hits the .5 ties of round
      return d;
    }
    case Op::IsNan:
    case Op::IsInf: {
      Domain d;
      d.specials = 0.25;
      return d;
    }
    case Op::Abs:
    case Op::Neg:
    case Op::Sign:
    case Op::Relu:
    case Op::LogicalNot:
    case Op::Maximum:
    case Op::Minimum:
    case Op::Eq:
    case Op::Ne:
    case Op::Lt:
    case Op::Le:
    case Op::Gt:
    case Op::Ge:
    case Op::LogicalAnd:
    case Op::LogicalOr:
    case Op::LogicalXor:
      return coarse();  // zeros and ties
    case Op::Cast:
      return dom(-300, 300, -300, 300);
    default:
      return Domain();
  }
}

Tensor call_unary(Op op, const Tensor& x, int variant, DType cast_to) {
  switch (op) {
    case Op::Neg:
      return neg(x);
    case Op::Abs:
      return ember::abs(x);
    case Op::Exp:
      return ember::exp(x);
    case Op::Exp2:
      return ember::exp2(x);
    case Op::Log:
      return ember::log(x);
    case Op::Log2:
      return ember::log2(x);
    case Op::Log1p:
      return ember::log1p(x);
    case Op::Expm1:
      return ember::expm1(x);
    case Op::Sqrt:
      return ember::sqrt(x);
    case Op::Rsqrt:
      return rsqrt(x);
    case Op::Sin:
      return ember::sin(x);
    case Op::Cos:
      return ember::cos(x);
    case Op::Tan:
      return ember::tan(x);
    case Op::Tanh:
      return ember::tanh(x);
    case Op::Sigmoid:
      return sigmoid(x);
    case Op::Relu:
      return relu(x);
    case Op::Gelu:
      return gelu(x, variant ? "tanh" : "none");
    case Op::Silu:
      return silu(x);
    case Op::Erf:
      return ember::erf(x);
    case Op::Floor:
      return ember::floor(x);
    case Op::Ceil:
      return ember::ceil(x);
    case Op::Round:
      return ember::round(x);
    case Op::Trunc:
      return ember::trunc(x);
    case Op::Sign:
      return sign(x);
    case Op::Reciprocal:
      return reciprocal(x);
    case Op::LogicalNot:
      return logical_not(x);
    case Op::IsNan:
      return ember::isnan(x);
    case Op::IsInf:
      return ember::isinf(x);
    case Op::Cast:
      return cast(x, cast_to);
    default:
      EMBER_THROW(Internal, "not a unary op");
  }
}

#define EMBER_SWEEP_BINARY(X)                                                                      \
  X(Add, add)                                                                                      \
  X(Sub, sub)                                                                                      \
  X(Mul, mul)                                                                                      \
  X(Div, div) X(FloorDivide, floor_divide) X(Remainder, remainder) X(Pow, pow) X(Maximum, maximum) \
      X(Minimum, minimum) X(Eq, eq) X(Ne, ne) X(Lt, lt) X(Le, le) X(Gt, gt) X(Ge, ge)              \
          X(LogicalAnd, logical_and) X(LogicalOr, logical_or) X(LogicalXor, logical_xor)           \
              X(BitwiseAnd, bitwise_and) X(BitwiseOr, bitwise_or) X(BitwiseXor, bitwise_xor)

template <class A, class B>
Tensor call_binary(Op op, const A& a, const B& b) {
#define EMBER_CASE(E, f) \
  case Op::E:            \
    return ember::f(a, b);
  switch (op) {
    EMBER_SWEEP_BINARY(EMBER_CASE)
    default:
      EMBER_THROW(Internal, "not a binary op");
  }
#undef EMBER_CASE
}

// The dtype a Python number takes next to a tensor (PyTorch's wrapped-number rule): a float with
// an integer or bool tensor is the default float; an int with a bool tensor is int64.
DType scalar_dtype(DType tensor, const Scalar& s) {
  if (s.is_float()) return ref::is_float(tensor) ? tensor : DType::Float32;
  if (s.is_bool()) return tensor;
  return tensor == DType::Bool ? DType::Int64 : tensor;
}

// Expected output of an elementwise op over operands (values, dtype, 0-d or not).
Expected ew_expect(Op op, const std::vector<Ref>& refs, const std::vector<DType>& dts, int variant,
                   DType cast_to) {
  std::vector<ref::Operand> values;
  for (size_t i = op == Op::Where ? 1 : 0; i < refs.size(); ++i)
    values.push_back({dts[i], refs[i].shape.empty()});
  DType promoted = ref::result_type(values);
  EwKind kind = ew_kind(op);
  DType compute = kind == EwKind::Float && !ref::is_float(promoted) ? DType::Float32 : promoted;
  if (op == Op::Cast) compute = dts[0];
  Expected e;
  e.dtype = kind == EwKind::Bool ? DType::Bool : kind == EwKind::Cast ? cast_to : compute;
  Ints shape = refs[0].shape;
  for (const Ref& r : refs) shape = *ref::broadcast(shape, r.shape);
  e.out.shape = shape;
  bool integer = !ref::is_float(compute);
  std::vector<double> args(refs.size());
  for (int64_t i = 0; i < ref::numel(shape); ++i) {
    Ints idx = ref::unravel(i, shape);
    for (size_t k = 0; k < refs.size(); ++k) {
      double v = ref::at_broadcast(refs[k], idx);
      args[k] = (op == Op::Where && k == 0) ? v : ref::cast_value(v, compute);
    }
    e.out.v.push_back(ew_ref(op, args, integer, variant));
  }
  return e;
}

// Operand shapes of an n-ary elementwise case: case 2 broadcasts a 0-d operand, case 3 size-1
// dims on both sides.
std::vector<Ints> ew_shapes(Gen& g, int n) {
  Ints out = g.case_shape();
  std::vector<Ints> shapes(n, out);
  if (n == 1) return shapes;
  if (g.index() == 2) {
    shapes[n - 1] = {};
    return shapes;
  }
  if (g.index() == 3 && !out.empty()) {
    shapes[0][g.integer(0, static_cast<int64_t>(out.size()) - 1)] = 1;
    for (int k = 1; k < n; ++k) shapes[k] = g.broadcast_operand(out);
    return shapes;
  }
  for (int k = 0; k < n; ++k)
    if (g.coin(0.4)) shapes[k] = g.broadcast_operand(out);
  return shapes;
}

// A Python number of the tensor's own kind inside `d`, exact in every dtype of that kind.
Scalar number_in(Gen& g, DType dt, const Domain& d) {
  if (dt == DType::Bool) return Scalar(g.value(DType::Bool, d) != 0);
  if (!ref::is_float(dt)) return Scalar(static_cast<int64_t>(g.value(dt, d)));
  while (true) {
    double v = std::round(g.real(d.lo, d.hi) * 4) / 4 + 0.0;
    if (v >= d.lo && v <= d.hi && std::fabs(v) >= d.min_abs && (v != 0 || d.min_abs == 0))
      return Scalar(v);
  }
}

Case elementwise(Op op, DType dt, Gen& g) {
  Case c;
  int n = arity(op);
  std::vector<Ints> shapes = ew_shapes(g, n);
  int variant = op == Op::Gelu ? g.index() % 2 : 0;
  DType cast_to = kAllDTypes[g.index() % kNumDTypes];
  std::vector<DType> dts(n, dt);
  if (op == Op::Where) dts[0] = DType::Bool;
  // Cases 4 and 5 of binary ops pass a Python number on one side.
  if (n == 2 && (g.index() == 4 || g.index() == 5)) {
    bool first = g.index() == 5;
    Scalar s = number_in(g, dt, ew_domain(op, first ? 0 : 1));
    DType sdt = scalar_dtype(dt, s);
    Ref sref{{}, {ref::cast_value(s.to_double(), sdt)}};
    c.inputs.push_back(g.input(dt, shapes[0], ew_domain(op, first ? 1 : 0)));
    Ref tref = c.inputs[0].ref;
    c.note = std::string("number ") + (first ? "first: " : "second: ") + num(s.to_double());
    c.call = [op, s, first](const std::vector<Tensor>& t) {
      return first ? call_binary(op, s, t[0]) : call_binary(op, t[0], s);
    };
    c.expect = [=] {
      std::vector<Ref> refs = first ? std::vector<Ref>{sref, tref} : std::vector<Ref>{tref, sref};
      std::vector<DType> types = first ? std::vector<DType>{sdt, dt} : std::vector<DType>{dt, sdt};
      return ew_expect(op, refs, types, variant, cast_to);
    };
    return c;
  }
  // Cases 4 and 5 of where pass a Python number as one of the values.
  if (op == Op::Where && (g.index() == 4 || g.index() == 5)) {
    bool first = g.index() == 5;
    Scalar s = number_in(g, dt, Domain());
    DType sdt = scalar_dtype(dt, s);
    Ref sref{{}, {ref::cast_value(s.to_double(), sdt)}};
    c.inputs.push_back(g.input(DType::Bool, shapes[0], Domain()));
    c.inputs.push_back(g.input(dt, shapes[1], Domain()));
    Ref cond = c.inputs[0].ref, tref = c.inputs[1].ref;
    c.note = std::string("number ") + (first ? "a: " : "b: ") + num(s.to_double());
    c.call = [s, first](const std::vector<Tensor>& t) {
      return first ? where(t[0], s, t[1]) : where(t[0], t[1], s);
    };
    c.expect = [=] {
      std::vector<Ref> refs =
          first ? std::vector<Ref>{cond, sref, tref} : std::vector<Ref>{cond, tref, sref};
      std::vector<DType> types = first ? std::vector<DType>{DType::Bool, sdt, dt}
                                       : std::vector<DType>{DType::Bool, dt, sdt};
      return ew_expect(op, refs, types, 0, dt);
    };
    return c;
  }
  // Cases 16-19 of clamp give one or both bounds as numbers; a missing bound never changes x.
  if (op == Op::Clamp && g.index() >= 16) {
    std::optional<Scalar> lo, hi;
    if (g.index() != 17)
      lo = dt == DType::Bool   ? Scalar(false)
           : ref::is_float(dt) ? Scalar(-0.5)
                               : Scalar(int64_t{1});
    if (g.index() != 16)
      hi = dt == DType::Bool ? Scalar(true) : ref::is_float(dt) ? Scalar(1.5) : Scalar(int64_t{7});
    c.inputs.push_back(g.input(dt, shapes[0], Domain()));
    Ref x = c.inputs[0].ref;
    c.note = "min=" + (lo ? num(lo->to_double()) : "none") +
             " max=" + (hi ? num(hi->to_double()) : "none");
    c.call = [lo, hi](const std::vector<Tensor>& t) { return clamp(t[0], lo, hi); };
    c.expect = [=] {
      Expected e = result(dt, x);
      for (double& v : e.out.v)
        v = std::min(std::max(v, lo ? lo->to_double() : -ref::kInf),
                     hi ? hi->to_double() : ref::kInf);
      return e;
    };
    return c;
  }
  // Clamp's tensor bounds do not cross, but for cases 14 and 15 of two dtypes, which cross them
  // on purpose (sub-case clamp[min>max]).
  bool cross = op == Op::Clamp && (g.index() == 14 || g.index() == 15) &&
               (dt == DType::Float32 || dt == DType::Int64);
  for (int k = 0; k < n; ++k) {
    Domain d = ew_domain(op, k);
    if (op == Op::Clamp && k > 0)
      d = (k == 1) != cross ? dom(-3, 0.5, -20, 3) : dom(0.75, 3, 4, 20);
    if (op == Op::Clamp && k == 1 && dt == DType::Bool) {  // min false: bool bounds cannot cross
      c.inputs.push_back(
          g.input_of(dt, Ref{shapes[k], std::vector<double>(ref::numel(shapes[k]), 0.0)}));
      continue;
    }
    c.inputs.push_back(g.input(dts[k], shapes[k], d));
  }
  if (op == Op::Gelu) c.note = variant ? "approximate=tanh" : "approximate=none";
  if (op == Op::Cast) c.note = "dtype=" + dname(cast_to);
  if (op == Op::Clamp) {
    // Tensor bounds may cross (min > max): PyTorch then gives max.
    bool crossed = false;
    Ints shape = c.inputs[0].ref.shape;
    for (size_t k = 1; k < 3; ++k) shape = *ref::broadcast(shape, c.inputs[k].ref.shape);
    for (int64_t i = 0; i < ref::numel(shape); ++i) {
      Ints idx = ref::unravel(i, shape);
      crossed = crossed ||
                ref::at_broadcast(c.inputs[1].ref, idx) > ref::at_broadcast(c.inputs[2].ref, idx);
    }
    if (crossed) c.variant = "clamp[min>max]";
  }
  std::vector<Ref> refs;
  for (const Input& in : c.inputs) refs.push_back(in.ref);
  c.call = [op, variant, cast_to](const std::vector<Tensor>& t) -> Tensor {
    if (t.size() == 1) return call_unary(op, t[0], variant, cast_to);
    if (t.size() == 2) return call_binary(op, t[0], t[1]);
    if (op == Op::Where) return where(t[0], t[1], t[2]);
    return clamp(t[0], t[1], t[2]);
  };
  c.expect = [=] { return ew_expect(op, refs, dts, variant, cast_to); };
  return c;
}

// ---- reductions

ref::Reduce reduce_kind(Op op) {
  switch (op) {
    case Op::Sum:
      return ref::Reduce::Sum;
    case Op::Mean:
      return ref::Reduce::Mean;
    case Op::Prod:
      return ref::Reduce::Prod;
    case Op::Max:
      return ref::Reduce::Max;
    case Op::Min:
      return ref::Reduce::Min;
    case Op::ArgMax:
      return ref::Reduce::ArgMax;
    case Op::ArgMin:
      return ref::Reduce::ArgMin;
    case Op::Var:
      return ref::Reduce::Var;
    case Op::Std:
      return ref::Reduce::Std;
    default:
      return ref::Reduce::LogSumExp;
  }
}

Case reduction(Op op, DType dt, Gen& g) {
  Case c;
  Ints shape = g.case_shape();
  bool big = g.index() == kCases;  // the one > 4096-element case (float16/bfloat16 sum and mean)
  if (big) shape = {5000};
  Domain d = Domain();
  if (op == Op::Prod) d = dom(0.5, 1.5, -2, 2);
  if (op == Op::Max || op == Op::Min || op == Op::ArgMax || op == Op::ArgMin) d = coarse();
  if (op == Op::LogSumExp) d = dom(-4, 4, -5, 5);
  if (big) d = dom(0, 1, 0, 1);
  c.inputs.push_back(g.input(dt, shape, d));
  int64_t rank = static_cast<int64_t>(shape.size());
  Ints axes;
  if (rank == 0 && g.coin()) axes = {g.coin() ? 0 : -1};  // a 0-d tensor accepts axis 0 and -1
  for (int64_t i = 0; i < rank && !big; ++i)
    if (g.coin(0.4)) axes.push_back(g.coin() ? i : i - rank);
  std::shuffle(axes.begin(), axes.end(), g.rng());
  bool keepdim = g.coin();
  double correction = g.coin() ? 1.0 : 0.0;
  c.note = "axes=" + ref::shape_text(axes) + " keepdim=" + std::to_string(keepdim);
  if (op == Op::Var || op == Op::Std) c.note += " correction=" + num(correction);
  Ref x = c.inputs[0].ref;
  c.call = [=](const std::vector<Tensor>& t) {
    switch (op) {
      case Op::Sum:
        return sum(t[0], axes, keepdim);
      case Op::Mean:
        return mean(t[0], axes, keepdim);
      case Op::Prod:
        return prod(t[0], axes, keepdim);
      case Op::Max:
        return max(t[0], axes, keepdim);
      case Op::Min:
        return min(t[0], axes, keepdim);
      case Op::ArgMax:
        return argmax(t[0], axes, keepdim);
      case Op::ArgMin:
        return argmin(t[0], axes, keepdim);
      case Op::Var:
        return var(t[0], axes, correction, keepdim);
      case Op::Std:
        return ember::std(t[0], axes, correction, keepdim);
      default:
        return logsumexp(t[0], axes, keepdim);
    }
  };
  c.expect = [=] {
    Expected e;
    Ints norm;
    for (int64_t a : axes) norm.push_back(ref::norm_axis(a, rank));
    bool is_int = !ref::is_float(dt);
    switch (op) {
      case Op::Sum:
      case Op::Prod:
        e.dtype = is_int ? DType::Int64 : dt;
        break;
      case Op::ArgMax:
      case Op::ArgMin:
        e.dtype = DType::Int64;
        break;
      case Op::Max:
      case Op::Min:
        e.dtype = dt;
        break;
      default:
        e.dtype = is_int ? DType::Float32 : dt;
        break;
    }
    bool needs_elements = op == Op::Max || op == Op::Min || op == Op::ArgMax || op == Op::ArgMin;
    for (int64_t a = 0; a < rank; ++a) {
      bool reduced = norm.empty() || std::find(norm.begin(), norm.end(), a) != norm.end();
      if (needs_elements && reduced && shape[a] == 0) e.error = ErrorKind::Value;
    }
    if (e.error) return e;
    e.out = ref::reduce(reduce_kind(op), x, norm, keepdim, is_int, correction);
    e.big_reduction = big;
    return e;
  };
  return c;
}

// ---- contractions and pools

Case matmul_case(Op, DType dt, Gen& g) {
  Case c;
  int i = g.index();
  int64_t m = g.integer(1, 5), k = g.integer(1, 8), n = g.integer(1, 5);
  Ints sa, sb;
  switch (i) {
    case 0:
      sa = {k};
      sb = {k};
      break;  // dot product: 0-d
    case 1:
      sa = {2, 0, k};
      sb = {k, n};
      break;  // zero-size
    case 2:
      sa = {m, 0};
      sb = {0, n};
      break;  // k = 0: zeros
    case 3:
      sa = {k};
      sb = {3, k, n};
      break;  // vector @ batch
    case 4:
      sa = {2, m, k};
      sb = {k};
      break;  // batch @ vector
    case 5:
      sa = {2, 1, m, k};
      sb = {3, k, n};
      break;  // broadcast batch
    case 6:
      sa = {1, m, k};
      sb = {4, k, n};
      break;
    case 7:
      sa = {m, k};
      sb = {k, n};
      break;
    default: {
      Ints batch = g.shape(0, 2, 3);
      sa = g.coin(0.2) ? Ints{} : g.broadcast_operand(batch);
      sb = g.coin(0.2) ? Ints{} : g.broadcast_operand(batch);
      // A missing m or n makes that operand 1-D, which then has no batch dims.
      if (g.coin(0.85))
        sa.push_back(m);
      else
        sa.clear();
      sa.push_back(k);
      if (g.coin(0.85))
        sb.insert(sb.end(), {k, n});
      else
        sb = {k};
    }
  }
  Domain d = dom(-1, 1, -3, 3);
  c.inputs.push_back(g.input(dt, sa, d));
  c.inputs.push_back(g.input(dt, sb, d));
  Ref a = c.inputs[0].ref, b = c.inputs[1].ref;
  c.call = [](const std::vector<Tensor>& t) { return matmul(t[0], t[1]); };
  c.expect = [=] { return result(dt, ref::matmul(a, b)); };
  return c;
}

Case linear_case(Op, DType dt, Gen& g) {
  Case c;
  int64_t in = g.integer(1, 8), out = g.integer(1, 6);
  Ints xs = g.shape(0, 3, 4);
  if (g.index() == 1) xs = {0};
  if (g.index() == 2) out = 0;
  if (g.index() == 3) in = 0;
  xs.push_back(in);
  bool bias = g.index() % 2 == 0;
  Domain d = dom(-1, 1, -3, 3);
  c.inputs.push_back(g.input(dt, xs, d));
  c.inputs.push_back(g.input(dt, {out, in}, d));
  if (bias) c.inputs.push_back(g.input(dt, {out}, d));
  c.note = bias ? "bias" : "no bias";
  std::vector<Ref> r;
  for (const Input& x : c.inputs) r.push_back(x.ref);
  c.call = [bias](const std::vector<Tensor>& t) {
    return bias ? linear(t[0], t[1], t[2]) : linear(t[0], t[1]);
  };
  c.expect = [=] { return result(dt, ref::linear(r[0], r[1], bias ? &r[2] : nullptr)); };
  return c;
}

Case conv2d_case(Op, DType dt, Gen& g) {
  Case c;
  int64_t groups, cg, og, N, H, W, KH, KW;
  ref::Window win;
  while (true) {
    groups = g.pick<int64_t>({1, 1, 2, 3});
    cg = g.integer(1, 3);
    og = g.integer(1, 3);
    N = g.index() == 1 ? 0 : g.integer(1, 2);
    H = g.integer(1, 7), W = g.integer(1, 7), KH = g.integer(1, 3), KW = g.integer(1, 3);
    win = {g.integer(1, 3), g.integer(1, 3), g.integer(0, 2),
           g.integer(0, 2), g.integer(1, 2), g.integer(1, 2)};
    if (H + 2 * win.pad_h >= win.dil_h * (KH - 1) + 1 &&
        W + 2 * win.pad_w >= win.dil_w * (KW - 1) + 1)
      break;
  }
  if (g.index() == 2) og = 0;  // no output channels
  bool bias = g.coin();
  Domain d = dom(-1, 1, -3, 3);
  c.inputs.push_back(g.input(dt, {N, groups * cg, H, W}, d));
  c.inputs.push_back(g.input(dt, {groups * og, cg, KH, KW}, d));
  if (bias) c.inputs.push_back(g.input(dt, {groups * og}, d));
  std::ostringstream note;
  note << "stride=[" << win.stride_h << "," << win.stride_w << "] padding=[" << win.pad_h << ","
       << win.pad_w << "] dilation=[" << win.dil_h << "," << win.dil_w << "] groups=" << groups
       << (bias ? " bias" : "");
  c.note = note.str();
  std::vector<Ref> r;
  for (const Input& x : c.inputs) r.push_back(x.ref);
  c.call = [=](const std::vector<Tensor>& t) {
    std::optional<Tensor> b;
    if (bias) b = t[2];
    return conv2d(t[0], t[1], b, {win.stride_h, win.stride_w}, {win.pad_h, win.pad_w},
                  {win.dil_h, win.dil_w}, groups);
  };
  c.expect = [=] {
    return result(dt, ref::conv2d(r[0], r[1], bias ? &r[2] : nullptr, win, groups));
  };
  return c;
}

Case pool_case(Op op, DType dt, Gen& g) {
  Case c;
  bool is_max = op == Op::MaxPool2d, adaptive = op == Op::AdaptiveAvgPool2d;
  ref::Pool p{};
  Ints shape;
  bool stride_default = false;
  Ref x;
  Domain d = is_max ? coarse() : Domain();
  int64_t oh = g.integer(1, 5), ow = g.integer(1, 5);
  while (true) {
    shape = g.coin() && g.index() != 1 ? Ints{g.integer(1, 3), g.integer(1, 8), g.integer(1, 8)}
                                       : Ints{g.index() == 1 ? 0 : g.integer(1, 2), g.integer(1, 3),
                                              g.integer(1, 8), g.integer(1, 8)};
    if (adaptive) break;
    p.kh = g.integer(1, 3), p.kw = g.integer(1, 3);
    stride_default = g.coin(0.3);
    p.win.stride_h = stride_default ? p.kh : g.integer(1, 3);
    p.win.stride_w = stride_default ? p.kw : g.integer(1, 3);
    p.win.pad_h = g.integer(0, p.kh / 2), p.win.pad_w = g.integer(0, p.kw / 2);
    p.win.dil_h = is_max ? g.integer(1, 2) : 1, p.win.dil_w = is_max ? g.integer(1, 2) : 1;
    p.ceil_mode = g.coin(), p.count_include_pad = g.coin();
    size_t r = shape.size();
    if (shape[r - 2] + 2 * p.win.pad_h < p.win.dil_h * (p.kh - 1) + 1) continue;
    if (shape[r - 1] + 2 * p.win.pad_w < p.win.dil_w * (p.kw - 1) + 1) continue;
    bool empty = false;
    Ref probe{shape, std::vector<double>(ref::numel(shape), 0.0)};
    if (ref::numel(shape) == 0) break;
    ref::pool2d(probe, is_max, p, &empty);
    if (!empty) break;
  }
  c.inputs.push_back(g.input(dt, shape, d));
  x = c.inputs[0].ref;
  std::ostringstream note;
  if (adaptive)
    note << "output_size=[" << oh << "," << ow << "]";
  else
    note << "kernel=[" << p.kh << "," << p.kw << "] stride="
         << (stride_default ? "default"
                            : "[" + std::to_string(p.win.stride_h) + "," +
                                  std::to_string(p.win.stride_w) + "]")
         << " padding=[" << p.win.pad_h << "," << p.win.pad_w << "] dilation=[" << p.win.dil_h
         << "," << p.win.dil_w << "] ceil_mode=" << p.ceil_mode
         << " count_include_pad=" << p.count_include_pad;
  c.note = note.str();
  c.call = [=](const std::vector<Tensor>& t) {
    if (adaptive) return adaptive_avg_pool2d(t[0], {oh, ow});
    Ints stride = stride_default ? Ints{} : Ints{p.win.stride_h, p.win.stride_w};
    if (is_max)
      return max_pool2d(t[0], {p.kh, p.kw}, stride, {p.win.pad_h, p.win.pad_w},
                        {p.win.dil_h, p.win.dil_w}, p.ceil_mode);
    return avg_pool2d(t[0], {p.kh, p.kw}, stride, {p.win.pad_h, p.win.pad_w}, p.ceil_mode,
                      p.count_include_pad);
  };
  c.expect = [=] {
    if (adaptive) return result(dt, ref::adaptive_avg_pool2d(x, oh, ow));
    return result(dt, ref::pool2d(x, is_max, p, nullptr));
  };
  return c;
}

// ---- views

// A random shape with `n` elements (n > 0), or with a zero dim when n == 0.
Ints shape_with_numel(Gen& g, int64_t n) {
  if (n == 0) {
    Ints s = g.shape(1, 3, 4);
    s[g.integer(0, static_cast<int64_t>(s.size()) - 1)] = 0;
    return s;
  }
  Ints factors;
  for (int64_t p = 2; n > 1; ++p)
    while (n % p == 0) factors.push_back(p), n /= p;
  Ints s(g.integer(factors.empty() ? 0 : 1, 4), 1);
  for (int64_t f : factors) {
    if (s.empty()) s.push_back(1);
    s[g.integer(0, static_cast<int64_t>(s.size()) - 1)] *= f;
  }
  return s;
}

Case view_case(Op op, DType dt, Gen& g) {
  Case c;
  Ints shape = g.case_shape();
  int64_t rank = static_cast<int64_t>(shape.size());
  auto axis_in = [&](int64_t r) {  // an axis of a rank-r tensor, sometimes negative
    int64_t a = g.integer(0, std::max<int64_t>(r, 1) - 1);
    return g.coin(0.3) ? a - std::max<int64_t>(r, 1) : a;
  };
  if (op == Op::Expand) {
    Ints src = shape;
    for (int64_t& d : src)
      if (g.coin(0.5)) d = 1;
    shape = src;
  }
  c.inputs.push_back(g.input(dt, shape, Domain()));
  Ref x = c.inputs[0].ref;
  c.shares_storage = op != Op::Reshape && op != Op::Flatten;
  switch (op) {
    case Op::Reshape: {
      Ints target = shape_with_numel(g, ref::numel(shape));
      Ints given = target;
      if (!given.empty() && ref::numel(target) > 0 && g.coin(0.4))
        given[g.integer(0, static_cast<int64_t>(given.size()) - 1)] = -1;
      c.note = "shape=" + ref::shape_text(given);
      c.call = [given](const std::vector<Tensor>& t) {
        return reshape(t[0], SymShape(given.begin(), given.end()));
      };
      c.expect = [=] { return result(dt, {target, x.v}); };
      break;
    }
    case Op::Permute: {
      Ints dims(rank);
      std::iota(dims.begin(), dims.end(), 0);
      std::shuffle(dims.begin(), dims.end(), g.rng());
      Ints given = dims;
      for (int64_t& d : given)
        if (g.coin(0.3)) d -= rank;
      c.note = "dims=" + ref::shape_text(given);
      c.call = [given](const std::vector<Tensor>& t) { return permute(t[0], given); };
      c.expect = [=] { return result(dt, ref::permute(x, dims)); };
      break;
    }
    case Op::Transpose: {
      int64_t a = axis_in(rank), b = axis_in(rank);
      c.note = "dim0=" + std::to_string(a) + " dim1=" + std::to_string(b);
      c.call = [a, b](const std::vector<Tensor>& t) { return transpose(t[0], a, b); };
      c.expect = [=] {
        Ints dims(rank);
        std::iota(dims.begin(), dims.end(), 0);
        if (rank) std::swap(dims[ref::norm_axis(a, rank)], dims[ref::norm_axis(b, rank)]);
        return result(dt, ref::permute(x, dims));
      };
      break;
    }
    case Op::Expand: {
      Ints target = g.shape(0, 2, 3);  // new leading dims
      Ints full = target;
      for (int64_t d : shape) {
        int64_t size = d == 1 ? g.pick<int64_t>({1, 2, 3, 4, 0}) : d;
        full.push_back(size);
        target.push_back(size == d && g.coin(0.3) ? -1 : size);
      }
      c.note = "shape=" + ref::shape_text(target);
      c.call = [target](const std::vector<Tensor>& t) {
        return expand(t[0], SymShape(target.begin(), target.end()));
      };
      c.expect = [=] { return result(dt, ref::broadcast_to(x, full)); };
      break;
    }
    case Op::Slice: {
      if (rank == 0) {
        c.note = "axis=0";
        c.call = [](const std::vector<Tensor>& t) { return slice(t[0], 0); };
        c.expect = [=] { return raises(ErrorKind::Value); };
        break;
      }
      int64_t axis = axis_in(rank), n = shape[ref::norm_axis(axis, rank)];
      int64_t start = g.integer(-n - 2, n + 2),
              end = g.coin(0.3) ? INT64_MAX : g.integer(-n - 2, n + 2);
      int64_t step = g.integer(1, 3);
      c.note = "axis=" + std::to_string(axis) + " start=" + std::to_string(start) +
               " end=" + (end == INT64_MAX ? std::string("max") : std::to_string(end)) +
               " step=" + std::to_string(step);
      c.call = [=](const std::vector<Tensor>& t) { return slice(t[0], axis, start, end, step); };
      c.expect = [=] {
        return result(dt, ref::slice(x, ref::norm_axis(axis, rank), start, end, step));
      };
      break;
    }
    case Op::Squeeze: {
      Ints axes;
      for (int64_t i = 0; i < rank; ++i)
        if (g.coin(0.4)) axes.push_back(g.coin() ? i : i - rank);
      c.note = "axes=" + ref::shape_text(axes);
      c.call = [axes](const std::vector<Tensor>& t) { return squeeze(t[0], axes); };
      c.expect = [=] {
        Ints out;
        for (int64_t i = 0; i < rank; ++i) {
          bool named = axes.empty();
          for (int64_t a : axes) named = named || ref::norm_axis(a, rank) == i;
          if (!(named && shape[i] == 1)) out.push_back(shape[i]);
        }
        return result(dt, {out, x.v});
      };
      break;
    }
    case Op::Unsqueeze: {
      int64_t axis = g.integer(-(rank + 1), rank);
      c.note = "axis=" + std::to_string(axis);
      c.call = [axis](const std::vector<Tensor>& t) { return unsqueeze(t[0], axis); };
      c.expect = [=] {
        Ints out = shape;
        out.insert(out.begin() + (axis < 0 ? axis + rank + 1 : axis), 1);
        return result(dt, {out, x.v});
      };
      break;
    }
    default: {  // flatten
      int64_t start = axis_in(rank), end = axis_in(rank);
      if (ref::norm_axis(start, rank) > ref::norm_axis(end, rank)) std::swap(start, end);
      c.note = "start=" + std::to_string(start) + " end=" + std::to_string(end);
      c.call = [start, end](const std::vector<Tensor>& t) { return flatten(t[0], start, end); };
      c.expect = [=] {
        if (rank == 0) return result(dt, {{1}, x.v});
        int64_t s = ref::norm_axis(start, rank), e = ref::norm_axis(end, rank);
        if (s > e) return raises(ErrorKind::Value);
        Ints out(shape.begin(), shape.begin() + s);
        out.push_back(ref::numel(Ints(shape.begin() + s, shape.begin() + e + 1)));
        out.insert(out.end(), shape.begin() + e + 1, shape.end());
        return result(dt, {out, x.v});
      };
    }
  }
  return c;
}

// ---- movement

DType index_dtype(Gen& g) {
  static const DType kinds[] = {DType::Int64, DType::Int32, DType::Int16, DType::Int8,
                                DType::UInt8};
  return kinds[g.index() % 5];
}

Case movement_case(Op op, DType dt, Gen& g) {
  Case c;
  Ints shape = g.case_shape();
  int64_t rank = static_cast<int64_t>(shape.size());
  switch (op) {
    case Op::Concat:
    case Op::Stack: {
      bool is_stack = op == Op::Stack;
      int64_t axis =
          is_stack ? g.integer(-(rank + 1), rank) : (rank ? g.integer(-rank, rank - 1) : 0);
      int64_t count = g.integer(1, 3);
      std::vector<Ref> refs;
      for (int64_t k = 0; k < count; ++k) {
        Ints s = shape;
        if (!is_stack && rank) s[ref::norm_axis(axis, rank)] = g.integer(0, 3);
        c.inputs.push_back(g.input(dt, s, Domain()));
        refs.push_back(c.inputs.back().ref);
      }
      c.note = "axis=" + std::to_string(axis) + " count=" + std::to_string(count);
      c.call = [=](const std::vector<Tensor>& t) {
        return is_stack ? stack(t, axis) : concat(t, axis);
      };
      c.expect = [=] {
        if (!is_stack && rank == 0) return raises(ErrorKind::Value);
        if (is_stack) return result(dt, ref::stack(refs, axis < 0 ? axis + rank + 1 : axis));
        return result(dt, ref::concat(refs, ref::norm_axis(axis, rank)));
      };
      return c;
    }
    case Op::Pad: {
      Ints pads;
      int64_t pairs = g.integer(0, rank);
      for (int64_t p = 0; p < pairs; ++p) {
        int64_t size = shape[rank - 1 - p];
        int64_t before = g.integer(-std::min<int64_t>(size, 2), 3);
        int64_t after = g.integer(-std::min<int64_t>(size + before, 2), 3);  // keeps the dim >= 0
        pads.push_back(before);
        pads.push_back(after);
      }
      double value = g.pick<double>({0.0, 1.0, -2.0, 2.5});
      c.inputs.push_back(g.input(dt, shape, Domain()));
      Ref x = c.inputs[0].ref;
      c.note = "pads=" + ref::shape_text(pads) + " value=" + num(value);
      c.call = [=](const std::vector<Tensor>& t) { return pad(t[0], pads, value); };
      c.expect = [=] { return result(dt, ref::pad(x, pads, ref::cast_value(value, dt))); };
      return c;
    }
    case Op::IndexSelect: {
      int64_t axis = rank ? g.integer(-rank, rank - 1) : 0;
      int64_t size = rank ? shape[ref::norm_axis(axis, rank)] : 1;
      bool zero_d_index = g.coin(0.2) && size > 0;
      Ints ishape = zero_d_index ? Ints{} : Ints{size == 0 ? 0 : rank == 0 ? 1 : g.integer(0, 5)};
      bool out_of_range = g.index() == kCases - 1 && size > 0;
      Ref idx{ishape, {}};
      for (int64_t i = 0; i < ref::numel(ishape); ++i)
        idx.v.push_back(static_cast<double>(g.integer(0, size - 1)));
      if (out_of_range && !idx.v.empty()) idx.v[0] = static_cast<double>(size);
      out_of_range = out_of_range && !idx.v.empty();
      DType it = index_dtype(g);
      c.inputs.push_back(g.input(dt, shape, Domain()));
      c.inputs.push_back(g.input_of(it, idx));
      Ref x = c.inputs[0].ref;
      c.note = "axis=" + std::to_string(axis);
      c.call = [axis](const std::vector<Tensor>& t) { return index_select(t[0], axis, t[1]); };
      c.expect = [=] {
        if (out_of_range) return raises(ErrorKind::Value);
        return result(dt, ref::index_select(x, ref::norm_axis(axis, rank), idx));
      };
      return c;
    }
    case Op::Gather: {
      int64_t axis = rank ? g.integer(-rank, rank - 1) : 0;
      int64_t na = rank ? ref::norm_axis(axis, rank) : 0;
      Ints ishape = shape;
      for (int64_t d = 0; d < rank; ++d)
        ishape[d] = d == na ? (shape[d] == 0 ? 0 : g.integer(0, 4)) : g.integer(0, shape[d]);
      if (g.index() > 1)  // only case 1 has zero-size dims
        for (int64_t& d : ishape) d = std::max<int64_t>(d, 1);
      Ref idx{ishape, {}};
      for (int64_t i = 0; i < ref::numel(ishape); ++i)
        idx.v.push_back(static_cast<double>(g.integer(0, rank ? shape[na] - 1 : 0)));
      c.inputs.push_back(g.input(dt, shape, Domain()));
      c.inputs.push_back(g.input_of(index_dtype(g), idx));
      Ref x = c.inputs[0].ref;
      c.note = "axis=" + std::to_string(axis);
      c.call = [axis](const std::vector<Tensor>& t) { return gather(t[0], axis, t[1]); };
      c.expect = [=] { return result(dt, ref::gather(x, na, idx)); };
      return c;
    }
    default: {  // embedding
      int64_t rows = g.integer(1, 6), dim = g.index() == 2 ? 0 : g.integer(1, 5);
      Ints ishape = g.case_shape(3);
      Ref idx{ishape, {}};
      for (int64_t i = 0; i < ref::numel(ishape); ++i)
        idx.v.push_back(static_cast<double>(g.integer(0, rows - 1)));
      c.inputs.push_back(g.input(dt, {rows, dim}, Domain()));
      c.inputs.push_back(g.input_of(index_dtype(g), idx));
      Ref w = c.inputs[0].ref;
      c.call = [](const std::vector<Tensor>& t) { return embedding(t[0], t[1]); };
      c.expect = [=] { return result(dt, ref::embedding(w, idx)); };
      return c;
    }
  }
}

// ---- composites

// torch.finfo(dtype).eps, the default eps of rms_norm.
double machine_eps(DType t) {
  switch (t) {
    case DType::Float16:
      return 0x1p-10;
    case DType::BFloat16:
      return 0x1p-7;
    case DType::Float64:
      return 0x1p-52;
    default:
      return 0x1p-23;
  }
}

Case softmax_case(Op op, DType dt, Gen& g) {
  Case c;
  Ints shape = g.case_shape();
  int64_t rank = static_cast<int64_t>(shape.size());
  int64_t axis = rank ? g.integer(-rank, rank - 1) : g.pick<int64_t>({0, -1});
  bool log = op == Op::LogSoftmax;
  c.inputs.push_back(g.input(dt, shape, dom(-4, 4, -5, 5)));
  Ref x = c.inputs[0].ref;
  c.note = "axis=" + std::to_string(axis);
  c.call = [=](const std::vector<Tensor>& t) {
    return log ? log_softmax(t[0], axis) : softmax(t[0], axis);
  };
  c.expect = [=] {
    return result(ref::is_float(dt) ? dt : DType::Float32,
                  ref::softmax(x, ref::norm_axis(axis, rank), log));
  };
  return c;
}

Case norm_case(Op op, DType dt, Gen& g) {
  Case c;
  bool rms = op == Op::RmsNorm;
  Ints shape = g.case_shape();
  int64_t rank = static_cast<int64_t>(shape.size());
  int64_t ndim = rank ? g.integer(1, std::min<int64_t>(rank, 3)) : 0;
  Ints normalized(shape.end() - ndim, shape.end());
  bool weight = g.coin(0.7), bias = !rms && g.coin(0.7);
  std::optional<double> eps;
  if (!rms || g.coin()) eps = g.pick<double>({1e-5, 1e-3, 0.1});
  c.inputs.push_back(g.input(dt, shape, Domain()));
  if (weight) c.inputs.push_back(g.input(dt, normalized, dom(-2, 2, -2, 2)));
  if (bias) c.inputs.push_back(g.input(dt, normalized, dom(-1, 1, -2, 2)));
  std::vector<Ref> r;
  for (const Input& x : c.inputs) r.push_back(x.ref);
  c.note = "normalized_shape=" + ref::shape_text(normalized) + (weight ? " weight" : "") +
           (bias ? " bias" : "") + " eps=" + (eps ? num(*eps) : "default");
  c.call = [=](const std::vector<Tensor>& t) {
    std::optional<Tensor> w, b;
    if (weight) w = t[1];
    if (bias) b = t[weight ? 2 : 1];
    SymShape ns(normalized.begin(), normalized.end());
    return rms ? rms_norm(t[0], ns, w, eps) : layer_norm(t[0], ns, w, b, *eps);
  };
  c.expect = [=] {
    if (rank == 0) return raises(ErrorKind::Value);  // normalized_shape must name >= 1 dim
    Ref w = weight ? r[1] : Ref{normalized, std::vector<double>(ref::numel(normalized), 1.0)};
    const Ref* b = bias ? &r[weight ? 2 : 1] : nullptr;
    return result(dt, ref::norm(r[0], ndim, w, b, eps.value_or(machine_eps(dt)), rms));
  };
  return c;
}

Case batch_norm_case(Op, DType dt, Gen& g) {
  Case c;
  Ints shape = g.shape(2, 4, 4);
  if (g.index() == 1) shape[0] = 0;
  if (g.index() == 0) shape = {3};  // rank < 2: a Value error
  int64_t C = shape.size() > 1 ? shape[1] : shape[0];
  bool weight = g.coin(0.7), bias = g.coin(0.7);
  double eps = g.pick<double>({1e-5, 1e-3});
  c.inputs.push_back(g.input(dt, shape, Domain()));
  c.inputs.push_back(g.input(dt, {C}, dom(-1, 1, -2, 2)));
  c.inputs.push_back(g.input(dt, {C}, dom(0.25, 2, 1, 4)));
  if (weight) c.inputs.push_back(g.input(dt, {C}, dom(-2, 2, -2, 2)));
  if (bias) c.inputs.push_back(g.input(dt, {C}, dom(-1, 1, -2, 2)));
  std::vector<Ref> r;
  for (const Input& x : c.inputs) r.push_back(x.ref);
  c.note = std::string(weight ? "weight " : "") + (bias ? "bias " : "") + "eps=" + num(eps);
  c.call = [=](const std::vector<Tensor>& t) {
    std::optional<Tensor> w, b;
    if (weight) w = t[3];
    if (bias) b = t[weight ? 4 : 3];
    return batch_norm(t[0], t[1], t[2], w, b, eps);
  };
  c.expect = [=] {
    if (shape.size() < 2) return raises(ErrorKind::Value);
    Ref w = weight ? r[3] : Ref{{C}, std::vector<double>(C, 1.0)};
    Ref b = bias ? r[weight ? 4 : 3] : Ref{{C}, std::vector<double>(C, 0.0)};
    return result(dt, ref::batch_norm(r[0], r[1], r[2], w, b, eps));
  };
  return c;
}

Case attention_case(Op, DType dt, Gen& g) {
  Case c;
  Ints batch = g.shape(0, 2, 3);
  int64_t L = g.integer(1, 5), S = g.integer(1, 5), E = g.integer(1, 6), Ev = g.integer(1, 6);
  if (g.index() == 1) L = 0;
  if (g.index() == 2) S = 0;
  auto with = [](Ints b, int64_t r, int64_t k) {
    b.push_back(r);
    b.push_back(k);
    return b;
  };
  Domain d = dom(-1, 1, -2, 2);
  c.inputs.push_back(g.input(dt, with(g.coin(0.3) ? g.broadcast_operand(batch) : batch, L, E), d));
  Ints kb = g.coin(0.3) ? g.broadcast_operand(batch) : batch;
  while (kb.size() < c.inputs[0].ref.shape.size() - 2) kb.insert(kb.begin(), 1);
  while (kb.size() > c.inputs[0].ref.shape.size() - 2) kb.erase(kb.begin());
  c.inputs.push_back(g.input(dt, with(kb, S, E), d));
  c.inputs.push_back(g.input(dt, with(kb, S, Ev), d));
  int mask_kind = g.index() % 3;  // 0: none, 1: bool, 2: additive
  bool causal = g.coin(0.4);
  std::optional<double> scale;
  if (g.coin(0.3)) scale = 0.5;
  const Ints qs = c.inputs[0].ref.shape;  // a copy: the mask is pushed below
  Ints scores = with(*ref::broadcast(Ints(qs.begin(), qs.end() - 2), kb), L, S);
  if (mask_kind) {
    Ints ms = g.coin() ? Ints{L, S} : g.coin() ? Ints{1, S} : scores;
    if (mask_kind == 1) {
      Ref m = g.values(DType::Bool, ms, Domain());
      for (int64_t i = 0; i < ref::numel(ms); ++i)
        if (ms.back() && i % ms.back() == 0) m.v[i] = 1;  // every row attends to key 0
      c.inputs.push_back(g.input_of(DType::Bool, m));
    } else {
      c.inputs.push_back(g.input(dt, ms, dom(-2, 0, -2, 0)));
    }
  }
  std::vector<Ref> r;
  for (const Input& x : c.inputs) r.push_back(x.ref);
  c.note = std::string("mask=") +
           (mask_kind == 0   ? "none"
            : mask_kind == 1 ? "bool"
                             : "additive") +
           " causal=" + std::to_string(causal) + " scale=" + (scale ? num(*scale) : "default");
  c.call = [=](const std::vector<Tensor>& t) {
    std::optional<Tensor> m;
    if (mask_kind) m = t[3];
    return scaled_dot_product_attention(t[0], t[1], t[2], m, causal, scale);
  };
  c.expect = [=] {
    double s = scale.value_or(1.0 / std::sqrt(static_cast<double>(E)));
    return result(dt, ref::attention(r[0], r[1], r[2], mask_kind ? &r[3] : nullptr, mask_kind == 1,
                                     causal, s));
  };
  return c;
}

// ---- creation and constants

Case full_case(Op, DType dt, Gen& g) {
  Case c;
  Ints shape = g.case_shape();
  int form = g.index() % 3;  // full, zeros, ones
  double value = form == 1 ? 0.0 : form == 2 ? 1.0 : g.value(dt, dom(-3, 3, -100, 100));
  Scalar s = ref::is_float(dt)   ? Scalar(value)
             : dt == DType::Bool ? Scalar(value != 0)
                                 : Scalar(static_cast<int64_t>(value));
  c.note = std::string(form == 0   ? "full value=" + num(value)
                       : form == 1 ? "zeros"
                                   : "ones") +
           " shape=" + ref::shape_text(shape);
  c.call = [=](const std::vector<Tensor>&) {
    SymShape ss(shape.begin(), shape.end());
    return form == 1 ? zeros(ss, dt) : form == 2 ? ones(ss, dt) : full(ss, s, dt);
  };
  c.expect = [=] { return result(dt, {shape, std::vector<double>(ref::numel(shape), value)}); };
  return c;
}

Case arange_case(Op, DType dt, Gen& g) {
  Case c;
  int64_t len = g.index() == 1 ? 0 : g.integer(1, 20);
  double start, step;
  if (ref::is_float(dt)) {
    start = g.integer(-12, 12) * 0.25;
    step = g.pick<double>({0.25, 0.5, -0.75, 1.5, 1.0});
  } else {
    bool non_negative = dt == DType::UInt8 || dt == DType::Bool;
    step = static_cast<double>(g.pick<int64_t>({1, 2, 3, -1, -2}));
    start = static_cast<double>(g.integer(-5, 5));
    if (non_negative) step = std::fabs(step), start = std::fabs(start);
  }
  // An end inside the last step, so the length is a true ceil.
  double end =
      start + step * static_cast<double>(len) - (len ? step * g.pick<double>({0.0, 0.5}) : 0.0);
  c.note = "start=" + num(start) + " end=" + num(end) + " step=" + num(step);
  c.call = [=](const std::vector<Tensor>&) { return arange(start, end, step, dt); };
  c.expect = [=] {
    int64_t n = static_cast<int64_t>(std::ceil((end - start) / step));
    Ref out{{n}, {}};
    for (int64_t i = 0; i < n; ++i) out.v.push_back(start + static_cast<double>(i) * step);
    return result(dt, out);
  };
  return c;
}

// The `constant` op has no function in frontend/ops.h (it comes from passes): run it as a graph
// through the interpreter.
Case constant_case(Op, DType dt, Gen& g) {
  Case c;
  Ints shape = g.case_shape();
  Ref values = g.values(dt, shape, Domain());
  c.note = "shape=" + ref::shape_text(shape);
  c.call = [=](const std::vector<Tensor>&) {
    Literal lit;
    lit.dtype = dt;
    for (double v : values.v) {
      if (ref::is_float(dt))
        lit.floats.push_back(v);
      else
        lit.ints.push_back(static_cast<int64_t>(v));
    }
    Graph graph;
    graph.outputs().push_back(graph.add_constant(lit, to_shape(shape)));
    std::vector<Array> outs = run_graph(graph, {}, {});
    return Tensor(outs.at(0));
  };
  c.expect = [=] { return result(dt, values); };
  return c;
}

// uniform / normal: random values checked statistically, plus determinism by seed.
Case random_case(Op op, DType dt, Gen& g) {
  Case c;
  bool is_uniform = op == Op::Uniform;
  Ints shape = g.index() < 2 ? g.case_shape() : Ints{40, 100};
  int64_t seed = g.integer(0, 1 << 20);
  double a = g.pick<double>({0.0, -2.0, 1.5}), b = a + g.pick<double>({1.0, 4.0, 0.5});
  c.note =
      (is_uniform ? "low=" + num(a) + " high=" + num(b) : "mean=" + num(a) + " std=" + num(b - a)) +
      " seed=" + std::to_string(seed) + " shape=" + ref::shape_text(shape);
  auto make = [=](int64_t s) {
    SymShape ss(shape.begin(), shape.end());
    return is_uniform ? uniform(ss, s, a, b, dt) : normal(ss, s, a, b - a, dt);
  };
  c.call = [=](const std::vector<Tensor>&) {
    Tensor t = make(seed);
    std::vector<double> v = read(t.array());
    auto fail = [&](const std::string& what) -> Tensor { EMBER_THROW(Runtime, "[sweep] ", what); };
    if (v != read(make(seed).array())) return fail("the same seed gave different values");
    if (v.size() > 1 && v == read(make(seed + 1).array()))
      return fail("different seeds gave the same values");
    double total = 0, sq = 0;
    for (double x : v) {
      if (!std::isfinite(x)) return fail("a non-finite value " + num(x));
      if (is_uniform && (x < a || x > b || (dt == DType::Float64 && x == b)))
        return fail("value " + num(x) + " out of range");
      total += x;
    }
    if (v.size() >= 1000) {
      double n = static_cast<double>(v.size()), m = total / n;
      for (double x : v) sq += (x - m) * (x - m);
      double sd = std::sqrt(sq / (n - 1));
      double want_m = is_uniform ? (a + b) / 2 : a,
             want_sd = is_uniform ? (b - a) / std::sqrt(12.0) : b - a;
      // 4000 draws: the sample mean within 6 standard errors (a fair generator misses once in
      // 5e8), the sd within 8% (7 standard errors for normal, 11 for uniform).
      if (std::fabs(m - want_m) > 6 * want_sd / std::sqrt(n))
        return fail("mean " + num(m) + ", expected " + num(want_m));
      if (std::fabs(sd - want_sd) > 0.08 * want_sd)
        return fail("std " + num(sd) + ", expected " + num(want_sd));
    }
    return t;
  };
  c.expect = [=] {
    Expected e = result(dt, {shape, {}});
    e.check_values = false;  // checked statistically in the call
    return e;
  };
  return c;
}

// ---- the table: one entry per op of ir/ops.def but `input`

const std::vector<Spec>& specs() {
  static const std::vector<Spec> table = [] {
    std::vector<Spec> t;
    auto add = [&](Op op, const char* family, bool (*supports)(DType), Builder b) {
      t.push_back({op, family, supports, b});
    };
    for (Op op : {Op::Neg,        Op::Abs,        Op::Exp,     Op::Exp2,  Op::Log,   Op::Log2,
                  Op::Log1p,      Op::Expm1,      Op::Sqrt,    Op::Rsqrt, Op::Sin,   Op::Cos,
                  Op::Tan,        Op::Tanh,       Op::Sigmoid, Op::Relu,  Op::Gelu,  Op::Silu,
                  Op::Erf,        Op::Floor,      Op::Ceil,    Op::Round, Op::Trunc, Op::Sign,
                  Op::Reciprocal, Op::LogicalNot, Op::IsNan,   Op::IsInf, Op::Cast})
      add(op, "unary", op == Op::Neg ? no_bool : all_dtypes, elementwise);
    for (Op op : {Op::Add,        Op::Sub,       Op::Mul,        Op::Div,        Op::FloorDivide,
                  Op::Remainder,  Op::Pow,       Op::Maximum,    Op::Minimum,    Op::Eq,
                  Op::Ne,         Op::Lt,        Op::Le,         Op::Gt,         Op::Ge,
                  Op::LogicalAnd, Op::LogicalOr, Op::LogicalXor, Op::BitwiseAnd, Op::BitwiseOr,
                  Op::BitwiseXor, Op::Where,     Op::Clamp}) {
      bool bitwise = op == Op::BitwiseAnd || op == Op::BitwiseOr || op == Op::BitwiseXor;
      add(op, "binary", op == Op::Sub ? no_bool : bitwise ? no_floats : all_dtypes, elementwise);
    }
    for (Op op : {Op::Sum, Op::Mean, Op::Prod, Op::Max, Op::Min, Op::ArgMax, Op::ArgMin, Op::Var,
                  Op::Std, Op::LogSumExp})
      add(op, "reduction", all_dtypes, reduction);
    add(Op::MatMul, "contraction", floats_only, matmul_case);
    add(Op::Linear, "contraction", floats_only, linear_case);
    add(Op::Conv2d, "contraction", floats_only, conv2d_case);
    add(Op::MaxPool2d, "contraction", no_bool, pool_case);
    add(Op::AvgPool2d, "contraction", floats_only, pool_case);
    add(Op::AdaptiveAvgPool2d, "contraction", floats_only, pool_case);
    for (Op op : {Op::Reshape, Op::Permute, Op::Transpose, Op::Expand, Op::Slice, Op::Squeeze,
                  Op::Unsqueeze, Op::Flatten})
      add(op, "view", all_dtypes, view_case);
    for (Op op : {Op::Concat, Op::Stack, Op::Pad, Op::IndexSelect, Op::Gather, Op::Embedding})
      add(op, "movement", all_dtypes, movement_case);
    add(Op::Softmax, "composite", all_dtypes, softmax_case);
    add(Op::LogSoftmax, "composite", all_dtypes, softmax_case);
    add(Op::LayerNorm, "composite", floats_only, norm_case);
    add(Op::RmsNorm, "composite", floats_only, norm_case);
    add(Op::BatchNorm, "composite", floats_only, batch_norm_case);
    add(Op::ScaledDotProductAttention, "composite", floats_only, attention_case);
    add(Op::Full, "creation", all_dtypes, full_case);
    add(Op::Arange, "creation", all_dtypes, arange_case);
    add(Op::Uniform, "creation", floats_only, random_case);
    add(Op::Normal, "creation", floats_only, random_case);
    add(Op::Constant, "creation", all_dtypes, constant_case);
    return t;
  }();
  return table;
}

struct Totals {
  int run = 0, rejected = 0;
};
Totals& totals() {
  static Totals t;
  return t;
}

std::string header(const std::string& op, DType dt, int index, uint64_t seed) {
  return "op " + op + ", dtype " + dname(dt) + ", case " + std::to_string(index) + ", seed " +
         hex(seed);
}

// An unsupported (op, dtype) raises ember::Error of kind Type naming the op.
void check_rejects(const Spec& s, DType dt) {
  std::string name = op_text(s.op);
  uint64_t seed = case_seed(name, dt, 5);
  Gen g(seed, 5);
  Case c = s.build(s.op, dt, g);
  std::vector<Tensor> args;
  for (const Input& in : c.inputs) args.push_back(in.tensor);
  INFO(header(name, dt, 5, seed) << " (unsupported dtype)");
  try {
    c.call(args);
    FAIL_CHECK("(" << name << ", " << dname(dt) << ") is unsupported but ran without an error");
  } catch (const Error& e) {
    INFO("message: " << e.what());
    CHECK(kind_name(e.kind()) == std::string("Type"));
    CHECK(std::string(e.what()).rfind("[" + name + "]", 0) == 0);
  }
  ++totals().rejected;
}

void sweep(const Spec& s, DType dt) {
  std::string name = op_text(s.op);
  if (!s.supports(dt)) return check_rejects(s, dt);
  ++totals().run;
  std::map<std::string, Outcome> outcomes;  // by variant
  outcomes[name];
  bool big =
      (s.op == Op::Sum || s.op == Op::Mean) && (dt == DType::Float16 || dt == DType::BFloat16);
  int count = s.cases + (big ? 1 : 0);
  for (int i = 0; i < count; ++i) {
    uint64_t seed = case_seed(name, dt, i);
    Gen g(seed, i);
    Case c = s.build(s.op, dt, g);
    std::string variant = c.variant.empty() ? name : c.variant;
    run_case(c, header(variant, dt, i, seed), outcomes[variant]);
  }
  for (const auto& [variant, outcome] : outcomes)
    report(variant, dt, outcome, variant == name ? std::min(count, kCases) / 2 : 0);
}

void sweep_family(const char* family) {
  for (const Spec& s : specs())
    if (std::string(s.family) == family)
      for (DType dt : kAllDTypes) sweep(s, dt);
}

}  // namespace

TEST_CASE("op sweep: unary elementwise and cast", "[sweep]") {
  sweep_family("unary");
}
TEST_CASE("op sweep: binary and ternary elementwise", "[sweep]") {
  sweep_family("binary");
}
TEST_CASE("op sweep: reductions", "[sweep]") {
  sweep_family("reduction");
}
TEST_CASE("op sweep: matmul, linear, conv2d and pools", "[sweep]") {
  sweep_family("contraction");
}
TEST_CASE("op sweep: views", "[sweep]") {
  sweep_family("view");
}
TEST_CASE("op sweep: movement", "[sweep]") {
  sweep_family("movement");
}
TEST_CASE("op sweep: composites", "[sweep]") {
  sweep_family("composite");
}
TEST_CASE("op sweep: creation, random and constants", "[sweep]") {
  sweep_family("creation");
}

namespace {

// Mixed dtypes: an op on (a, b) of every pair of dtypes, b dimensioned or 0-d, and Python numbers
// of each kind, against PyTorch's result_type.
Case mixed_case(Op op, DType a, DType b, int form, Gen& g) {
  Case c;
  Domain d = coarse();
  Ints sa = {3, 4}, sb = form == 1 ? Ints{} : Ints{4};
  if (op == Op::Concat) {
    c.inputs.push_back(g.input(a, sa, d));
    c.inputs.push_back(g.input(b, {form == 1 ? 1 : 2, 4}, d));
    std::vector<Ref> r{c.inputs[0].ref, c.inputs[1].ref};
    c.call = [](const std::vector<Tensor>& t) { return concat(t, 0); };
    c.expect = [=] {
      DType out = ref::promote(a, b);
      std::vector<Ref> cast = r;
      for (Ref& x : cast)
        for (double& v : x.v) v = ref::cast_value(v, out);
      return result(out, ref::concat(cast, 0));
    };
    return c;
  }
  if (op == Op::Where) c.inputs.push_back(g.input(DType::Bool, sa, d));
  c.inputs.push_back(g.input(a, sa, d));
  // A negative 0-d signed integer next to a uint8 tensor converts to the uint8 result dtype
  // (-2 -> 254) before the op runs.
  bool narrowing = a == DType::UInt8 && ref::is_int(b) && b != DType::UInt8 && form == 1;
  if (narrowing) c.variant = "promotion[negative 0-d int with uint8]";
  if (narrowing) {
    c.inputs.push_back(g.input_of(b, Ref{{}, {-2.0}}));
    if (op == Op::Clamp) c.inputs.push_back(g.input(b, sb, dom(0, 2, 0, 3)));
  } else if (op == Op::Clamp &&
             b == DType::Bool) {  // false <= x <= random: bounds that never cross
    c.inputs.push_back(g.input_of(b, Ref{sb, std::vector<double>(ref::numel(sb), 0.0)}));
    c.inputs.push_back(g.input(b, sb, d));
  } else if (op == Op::Clamp) {
    c.inputs.push_back(g.input(b, sb, dom(-2, 0, -3, 0)));
    c.inputs.push_back(g.input(b, sb, dom(0, 2, 0, 3)));
  } else {
    c.inputs.push_back(g.input(b, sb, op == Op::Div ? nonzero(d) : d));
  }
  std::vector<Ref> refs;
  std::vector<DType> dts;
  for (const Input& in : c.inputs) refs.push_back(in.ref), dts.push_back(in.dtype);
  c.call = [op](const std::vector<Tensor>& t) -> Tensor {
    if (op == Op::Where) return where(t[0], t[1], t[2]);
    if (op == Op::Clamp) return clamp(t[0], t[1], t[2]);
    return call_binary(op, t[0], t[1]);
  };
  c.expect = [=] { return ew_expect(op, refs, dts, 0, DType::Float32); };
  return c;
}

Case number_case(Op op, DType a, const Scalar& s, bool first, Gen& g) {
  Case c;
  c.inputs.push_back(g.input(a, {2, 3}, coarse()));
  Ref x = c.inputs[0].ref;
  DType sdt = scalar_dtype(a, s);
  Ref sref{{}, {ref::cast_value(s.to_double(), sdt)}};
  c.note = std::string("number ") +
           (s.is_float()  ? "float "
            : s.is_bool() ? "bool "
                          : "int ") +
           num(s.to_double()) + (first ? " first" : " second");
  c.call = [=](const std::vector<Tensor>& t) {
    return first ? call_binary(op, s, t[0]) : call_binary(op, t[0], s);
  };
  c.expect = [=] {
    return first ? ew_expect(op, {sref, x}, {sdt, a}, 0, DType::Float32)
                 : ew_expect(op, {x, sref}, {a, sdt}, 0, DType::Float32);
  };
  return c;
}

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

TEST_CASE("op sweep: type promotion of mixed dtypes and Python numbers", "[sweep]") {
  std::map<std::pair<std::string, DType>, Outcome> outcomes;
  for (Op op : {Op::Add, Op::Mul, Op::Div, Op::Maximum, Op::Lt, Op::Where, Op::Clamp, Op::Concat}) {
    std::string name = op_text(op) + "[mixed]";
    for (DType a : kAllDTypes) {
      outcomes[{name, a}];
      for (DType b : kAllDTypes)
        for (int form = 0; form < 2; ++form) {
          uint64_t seed = case_seed(name + dname(b), a, form);
          Gen g(seed, form + 6);
          Case c = mixed_case(op, a, b, form, g);
          std::string variant = c.variant.empty() ? name : c.variant;
          run_case(c, header(name, a, form, seed) + " with " + dname(b) + (form ? " 0-d" : ""),
                   outcomes[{variant, a}]);
        }
    }
  }
  for (const auto& [key, outcome] : outcomes) report(key.first, key.second, outcome, 1);
  for (Op op : {Op::Add, Op::Mul, Op::Div, Op::Maximum, Op::Lt}) {
    std::string name = op_text(op) + "[number]";
    for (DType a : kAllDTypes) {
      Outcome o;
      int i = 0;
      for (const Scalar& s : {Scalar(int64_t{2}), Scalar(0.5), Scalar(true), Scalar(int64_t{-1})})
        for (bool first : {false, true}) {
          uint64_t seed = case_seed(name, a, i);
          Gen g(seed, i++);
          if (op == Op::Div && s.to_double() == 0) continue;
          run_case(number_case(op, a, s, first, g), header(name, a, i, seed), o);
        }
      report(name, a, o, 8);
    }
  }
}

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
      {"index_select index out of range", ErrorKind::Value,
       [&] { index_select(f32, 0, full({1}, 5)); }},
      {"gather with a float index", ErrorKind::Type, [&] { gather(f32, 1, zeros({2, 3})); }},
      {"gather index out of range", ErrorKind::Value, [&] { gather(f32, 1, full({2, 3}, 3)); }},
      {"embedding with a float index", ErrorKind::Type, [&] { embedding(f32, fidx); }},
      {"embedding index out of range", ErrorKind::Value, [&] { embedding(f32, full({2}, 2)); }},
      {"integer floor_divide by zero", ErrorKind::Value,
       [&] { floor_divide(i32, zeros({2, 3}, DType::Int32)); }},
      {"integer remainder by zero", ErrorKind::Value,
       [&] { remainder(i32, zeros({2, 3}, DType::Int32)); }},
      {"integer pow to a negative power", ErrorKind::Value,
       [&] { ember::pow(full({2}, 3), full({2}, -1)); }},
      {"shapes that do not broadcast", ErrorKind::Value, [&] { add(f32, ones({4})); }},
      {"sub of bool tensors", ErrorKind::Type, [&] { sub(b, b); }},
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
                  << (kind ? std::string(kind_name(*kind)) + " error: " + message
                           : std::string("no error")));
    CHECK(kind.has_value());
    if (kind) CHECK(kind_name(*kind) == std::string(kind_name(bad.kind)));
    if (kind) CHECK(message.rfind("[", 0) == 0);  // names the op first, in brackets
  }
}

TEST_CASE("op sweep: the creation functions infer PyTorch's default dtypes", "[sweep]") {
  CHECK(full({2}, 1.5).dtype() == DType::Float32);
  CHECK(full({2}, 3).dtype() == DType::Int64);
  CHECK(full({2}, true).dtype() == DType::Bool);
  CHECK(zeros({2}).dtype() == DType::Float32);
  CHECK(ones({2}).dtype() == DType::Float32);
  CHECK(arange(5).dtype() == DType::Int64);
  CHECK(arange(5).shape() == std::vector<int64_t>{5});
  CHECK(arange(0, 2.5, 0.5).dtype() == DType::Float32);
  CHECK(arange(0, 2.5, 0.5).to_vector() == std::vector<double>{0, 0.5, 1, 1.5, 2});
  CHECK(uniform({2}, 0).dtype() == DType::Float32);
  CHECK(normal({2}, 0).dtype() == DType::Float32);
}

TEST_CASE("op sweep: the table covers every op of ir/ops.def", "[sweep]") {
  std::set<Op> covered;
  for (const Spec& s : specs()) {
    INFO("op " << op_text(s.op));
    CHECK(covered.insert(s.op).second);  // one entry per op
  }
#define EMBER_OP(name, text, min_arity, max_arity, kind) \
  if (Op::name != Op::Input) {                           \
    INFO("op " text " is in ir/ops.def but not swept");  \
    CHECK(covered.count(Op::name) == 1);                 \
  }
#include "ir/ops.def"
#undef EMBER_OP
  // Expected failures name a swept op (or a sub-case of one) with a dtype it supports, and a
  // reason.
  CHECK(kExpectedFailures.size() <= 12);
  for (const ExpectedFailure& e : kExpectedFailures) {
    std::string name = e.op, base = name.substr(0, name.find('['));
    INFO("expected failure (" << name << ", " << dname(e.dtype) << ")");
    auto it = std::find_if(specs().begin(), specs().end(),
                           [&](const Spec& s) { return op_text(s.op) == base; });
    bool mixed =
        name.find("[mixed]") != std::string::npos || name.find("[number]") != std::string::npos;
    bool promotion = name.rfind("promotion[", 0) == 0;  // a group of the type-promotion test
    CHECK((promotion || (it != specs().end() && (mixed || it->supports(e.dtype)))));
    CHECK(std::string(e.why).size() > 0);
  }
  int supported = 0, total = 0;
  for (const Spec& s : specs())
    for (DType dt : kAllDTypes) supported += s.supports(dt), ++total;
  std::printf(
      "op sweep: %zu ops, %d (op, dtype) pairs swept, %d checked to raise a Type error, %zu "
      "expected failures\n",
      specs().size(), supported, total - supported, kExpectedFailures.size());
}

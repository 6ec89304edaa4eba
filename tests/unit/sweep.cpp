// The op sweep's driver: the expected-failure table, seeds, running and checking cases, reporting.
#include "tests/unit/sweep.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>

#include "tests/catch.h"

namespace ember::sweep {

// Empty: the three bugs the sweep found (matmul dropping a contiguous operand's storage offset,
// clamp with min > max, integer operands not converted to the promoted dtype) are fixed, and
// tests/unit/test_regressions.cpp keeps a small case for each.
const std::vector<ExpectedFailure> kExpectedFailures = {};

void unlisted(Op op, const char* where) {
  throw std::logic_error("the sweep's " + std::string(where) + " has no case for op '" + op_text(op) + "'");
}

namespace {

bool expected_to_fail(const std::string& op, DType dt) {
  for (const ExpectedFailure& e : kExpectedFailures)
    if (op == e.op && dt == e.dtype) return true;
  return false;
}

std::string hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

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

}  // namespace

std::string dname(DType t) {
  return std::string(dtype_name(t));
}

std::string op_text(Op op) {
  return std::string(op_name(op));
}

std::string num(double v) {
  std::ostringstream s;
  s.precision(17);
  s << v;
  return s.str();
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

std::string header(const std::string& op, DType dt, int index, uint64_t seed) {
  return "op " + op + ", dtype " + dname(dt) + ", case " + std::to_string(index) + ", seed " +
         hex(seed);
}

// The expected outcome of a case: a value of `dtype`, or an error of `kind`.
Expected result(DType dtype, Ref out) {
  Expected e;
  e.dtype = dtype;
  e.out = std::move(out);
  return e;
}
Expected results(const std::vector<DType>& dtypes, std::vector<Ref> outs) {
  Expected e = result(dtypes.at(0), std::move(outs.at(0)));
  for (size_t i = 1; i < outs.size(); ++i) e.more.push_back({dtypes.at(i), std::move(outs[i])});
  return e;
}
Expected raises(ErrorKind kind) {
  Expected e;
  e.error = kind;
  return e;
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

std::vector<Tensor> invoke(const Case& c, const std::vector<Tensor>& args) {
  if (c.call_multi) return c.call_multi(args);
  return {c.call(args)};
}

std::vector<std::string> check_output(const Array& a, DType dtype, const Ref& want,
                                      const Expected& e) {
  std::vector<std::string> failures;
  if (a.dtype() != dtype)
    failures.push_back("dtype " + dname(a.dtype()) + ", expected " + dname(dtype));
  if (a.shape() != want.shape) {
    failures.push_back("shape " + ref::shape_text(a.shape()) + ", expected " +
                       ref::shape_text(want.shape));
    return failures;
  }
  if (!e.check_values) return failures;
  std::vector<double> got = read(a);
  Tol tol = tolerance(a.dtype(), e.big_reduction);
  int bad = 0;
  std::string detail;
  for (size_t i = 0; i < got.size(); ++i) {
    if (matches(got[i], want.v[i], a.dtype(), tol)) continue;
    if (++bad > 3) continue;
    detail += "\n    at " + ref::shape_text(ref::unravel(static_cast<int64_t>(i), want.shape)) +
              ": got " + num(got[i]) + ", expected " + num(want.v[i]);
  }
  if (bad)
    failures.push_back(std::to_string(bad) + " of " + std::to_string(got.size()) +
                       " values differ (" + dname(a.dtype()) + " rtol " + num(tol.rtol) +
                       " atol " + num(tol.atol) + ")" + detail);
  return failures;
}

// Runs one case; appends a message to `out.failures` for each way it went wrong.
void run_case(const Case& c, const std::string& header, Outcome& out, int index) {
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
  std::vector<Tensor> ys;
  try {
    ys = invoke(c, args);
  } catch (const Error& err) {
    check_inputs();
    check_compiled(c, args, nullptr, &e, err.kind(), index, fail);
    check_decomposed(c, args, e, err.kind(), index, fail);
    if (e.error && err.kind() == *e.error) return;
    fail(std::string("threw ember::Error(") + error_kind_name(err.kind()) + "): " + err.what() +
         (e.error ? std::string(" (expected kind ") + error_kind_name(*e.error) + ")" : ""));
    return;
  } catch (const std::exception& err) {
    fail(std::string("threw a non-ember exception: ") + err.what());
    return;
  }
  check_inputs();
  check_compiled(c, args, &ys, &e, std::nullopt, index, fail);
  check_decomposed(c, args, e, std::nullopt, index, fail);
  if (e.error) {
    fail(std::string("expected ember::Error(") + error_kind_name(*e.error) + "), got a result");
    return;
  }
  if (ys.size() != 1 + e.more.size()) {
    fail(std::to_string(ys.size()) + " outputs, expected " + std::to_string(1 + e.more.size()));
    return;
  }
  for (size_t k = 0; k < ys.size(); ++k) {
    const Array& a = ys[k].array();
    std::string which = ys.size() > 1 ? "output " + std::to_string(k) + ": " : "";
    if (c.shares_storage && a.storage() != c.inputs[0].storage)
      fail(which + "a view op did not share its input's storage");
    const ExpectedOutput want = k == 0 ? ExpectedOutput{e.dtype, e.out} : e.more[k - 1];
    for (const std::string& f : check_output(a, want.dtype, want.out, e)) fail(which + f);
  }
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

namespace {

struct Totals {
  int run = 0, rejected = 0;
};
Totals& totals() {
  static Totals t;
  return t;
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
    invoke(c, args);
    FAIL_CHECK("(" << name << ", " << dname(dt) << ") is unsupported but ran without an error");
  } catch (const Error& e) {
    INFO("message: " << e.what());
    CHECK(error_kind_name(e.kind()) == std::string("Type"));
    CHECK(std::string(e.what()).rfind("[" + name + "]", 0) == 0);
  }
  ++totals().rejected;
}

void sweep_op(const Spec& s, DType dt) {
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
    if (op_info(s.op).has_decomposition()) c.decomposes = s.op;
    std::string variant = c.variant.empty() ? name : c.variant;
    run_case(c, header(variant, dt, i, seed), outcomes[variant], i);
  }
  for (const auto& [variant, outcome] : outcomes)
    report(variant, dt, outcome, variant == name ? std::min(count, kCases) / 2 : 0);
}

}  // namespace

void sweep_family(const char* family) {
  for (const Spec& s : specs())
    if (std::string(s.family) == family)
      for (DType dt : kAllDTypes) sweep_op(s, dt);
}

}  // namespace ember::sweep

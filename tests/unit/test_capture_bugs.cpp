// Minimal reproducers of the wrong results the capture fuzzer (test_fuzz_capture.cpp) found, one
// test case per class of bug. Each asserts the contract the fuzzer checks: the compiled call equals
// the eager one bit for bit (or both raise an ember::Error of the same kind). The seed in each
// comment reproduces the original finding: EMBER_FUZZ_SEED=<seed> ember_unit_tests "[fuzz][capture]".
//
// Cases that crash the process (an out-of-bounds read) run in a child process, so that a crash is
// one failed check rather than the end of the test binary.
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <functional>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <tuple>
#include <type_traits>

#include <ember/ember.h>

#include "runtime/array.h"
#include "tests/catch.h"

using namespace ember;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

// What a call gave: its tensors, or the kind of the ember::Error it raised.
struct Result {
  bool ok = true;
  ErrorKind kind = ErrorKind::Value;
  std::string message;
  std::vector<Tensor> outs;
};

template <class R>
std::vector<Tensor> tensors_of(const R& r) {
  if constexpr (std::is_same_v<R, Tensor>) return {r};
  else if constexpr (std::is_same_v<R, std::vector<Tensor>>) return r;
  else return std::apply([](const auto&... t) { return std::vector<Tensor>{t...}; }, r);
}

template <class Call>
Result run(Call&& call) {
  Result r;
  try {
    r.outs = tensors_of(call());
  } catch (const Error& e) {
    r.ok = false;
    r.kind = e.kind();
    r.message = e.what();
  }
  return r;
}

std::string describe(const Result& r) {
  if (!r.ok) return std::string("ember::Error: ") + r.message;
  std::ostringstream o;
  for (const Tensor& t : r.outs) {
    const Array& a = t.array();
    o << dtype_name(a.dtype()) << shape_str(to_shape(a.shape())) << " [";
    if (std::any_of(a.shape().begin(), a.shape().end(), [](int64_t d) { return d < 0; })) {
      o << "a negative size: no data] ";
      continue;
    }
    Array c = a.contiguous();
    for (int64_t i = 0; i < c.numel() && i < 8; ++i) {
      uint64_t bits = 0;
      std::memcpy(&bits, static_cast<const char*>(c.data()) + i * itemsize(c.dtype()), itemsize(c.dtype()));
      o << (i ? ", " : "") << c.get(i) << " (0x" << std::hex << bits << std::dec << ")";
    }
    o << "] ";
  }
  return o.str();
}

// Compiled equals eager: the same error kind, or the same dtypes, shapes and bytes (-0.0 and NaN
// bits included); an output that eagerly is an argument is that same tensor.
void require_same(const Result& eager, const Result& compiled, const std::vector<Tensor>& args = {}) {
  INFO("eager:    " << describe(eager));
  INFO("compiled: " << describe(compiled));
  REQUIRE(eager.ok == compiled.ok);
  if (!eager.ok) {
    REQUIRE(eager.kind == compiled.kind);
    return;
  }
  REQUIRE(eager.outs.size() == compiled.outs.size());
  for (size_t k = 0; k < eager.outs.size(); ++k) {
    INFO("output " << k);
    const Array &e = eager.outs[k].array(), &c = compiled.outs[k].array();
    REQUIRE(e.dtype() == c.dtype());
    REQUIRE(e.shape() == c.shape());
    for (const Tensor& a : args)
      if (a.impl() == eager.outs[k].impl()) REQUIRE(compiled.outs[k].impl() == a.impl());
    Array ec = e.contiguous(), cc = c.contiguous();
    REQUIRE(std::memcmp(ec.data(), cc.data(), static_cast<size_t>(ec.numel()) * itemsize(ec.dtype())) == 0);
  }
}

// A tensor with these exact float32 bits.
Tensor f32_bits(std::vector<uint32_t> bits) {
  Array a = Array::empty(DType::Float32, {static_cast<int64_t>(bits.size())});
  std::memcpy(a.data(), bits.data(), 4 * bits.size());
  return Tensor(a);
}

// The same check as require_same, as a value (for a child process).
bool same(const Result& eager, const Result& compiled) {
  if (eager.ok != compiled.ok) return false;
  if (!eager.ok) return eager.kind == compiled.kind;
  if (eager.outs.size() != compiled.outs.size()) return false;
  for (size_t k = 0; k < eager.outs.size(); ++k) {
    const Array &e = eager.outs[k].array(), &c = compiled.outs[k].array();
    if (e.dtype() != c.dtype() || e.shape() != c.shape()) return false;
    Array ec = e.contiguous(), cc = c.contiguous();
    if (std::memcmp(ec.data(), cc.data(), static_cast<size_t>(ec.numel()) * itemsize(ec.dtype())) != 0) return false;
  }
  return true;
}

// For the cases that read out of bounds or make tensors of negative size (which corrupts the
// heap): `calls` returns the eager and the compiled result; they are compared in a child
// process, so that a crash fails this check instead of ending the test binary.
void require_same_in_child(const std::function<std::pair<Result, Result>()>& calls) {
  std::fflush(nullptr);
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    for (int sig : {SIGSEGV, SIGBUS, SIGABRT, SIGFPE}) std::signal(sig, SIG_DFL);  // die quietly
    bool ok = false;
    std::string text;
    try {
      auto [eager, compiled] = calls();
      text = "eager:    " + describe(eager) + "\ncompiled: " + describe(compiled);
      ok = same(eager, compiled);
    } catch (const std::exception& e) {
      text = std::string("exception: ") + e.what();
    }
    ssize_t written = write(fds[1], text.data(), text.size());
    (void)written;
    _exit(ok ? 0 : 1);
  }
  close(fds[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) text += std::string("\nthe child process crashed: ") + strsignal(WTERMSIG(status));
  INFO(text);
  const bool compiled_equals_eager = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  CHECK(compiled_equals_eager);
}

}  // namespace

// ---- Known classes (listed when the fuzzer was written)

TEST_CASE("capture bug: aliased arguments are not guarded: f(a a) then f(b c)", "[capture-bugs]") {
  // Seed 1592591959. The trace of f(x, x) reads argument 0 for both; f(y, z) then computes y - y.
  auto fn = [](const Tensor& a, const Tensor& b) { return a - b; };
  auto f = compile(fn);
  Tensor x = full({3}, 1.0), y = full({3}, 2.0), z = full({3}, 5.0);
  require_same(run([&] { return fn(x, x); }), run([&] { return f(x, x); }));
  require_same(run([&] { return fn(y, z); }), run([&] { return f(y, z); }));
}

TEST_CASE("capture bug: a captured tensor also passed as an argument: f(w) then f(y)", "[capture-bugs]") {
  // Seeds 1592592995, 1592590686. Tracing f(w) reads the captured w as argument 0; f(y) then adds
  // y to itself and returns y for w.
  Tensor w = full({3}, 10.0);
  auto fn = [&](const Tensor& x) { return std::vector<Tensor>{x + w, w}; };
  auto f = compile(fn);
  Tensor y = full({3}, 1.0);
  require_same(run([&] { return fn(w); }), run([&] { return f(w); }));
  require_same(run([&] { return fn(y); }), run([&] { return f(y); }), {y});
}

TEST_CASE("capture bug: returning the same tensor twice shifts the later outputs", "[capture-bugs]") {
  // Seed 1592590345. The graph returns [y, y, z] while the replay expects [y, z]: output 2 is y.
  auto fn = [](const Tensor& x) {
    Tensor y = x + 1.0;
    return std::vector<Tensor>{y, y, cast(x, DType::Int64)};
  };
  auto f = compile(fn);
  Tensor x = full({2}, 3.0);
  require_same(run([&] { return fn(x); }), run([&] { return f(x); }));
  require_same(run([&] { return fn(x); }), run([&] { return f(x); }));  // the replay
}

TEST_CASE("capture bug: a returned argument is another argument after aliasing", "[capture-bugs]") {
  // Seed 1592590338. Traced with f(x, x), "return b" is recorded as "return argument 0".
  auto fn = [](const Tensor& a, const Tensor& b) { return b; };
  auto f = compile(fn);
  Tensor x = full({3}, 1.0), y = full({3}, 2.0), z = full({3}, 3.0);
  require_same(run([&] { return fn(x, x); }), run([&] { return f(x, x); }), {x});
  require_same(run([&] { return fn(y, z); }), run([&] { return f(y, z); }), {y, z});
}

TEST_CASE("capture bug: symbolic slice lengths assume facts no guard checks", "[capture-bugs]") {
  // The compiled results are tensors of negative size, which also corrupt the heap.
  SECTION("slice(x, 0, 0, -3) at size 8 then 2") {
    require_same_in_child([] {
      auto fn = [](const Tensor& x) { return slice(x, 0, 0, -3); };
      auto f = compile(fn, Options{.dynamic = true});
      Tensor a = uniform({8}, 1), b = uniform({2}, 2);
      f(a);
      return std::pair{run([&] { return fn(b); }), run([&] { return f(b); })};  // compiled: f32[-1]
    });
  }
  SECTION("wrong on the first call: slice(x, 0, 0, -4) at size 2 (seed 1592590542)") {
    require_same_in_child([] {
      auto fn = [](const Tensor& x) { return slice(x, 0, 0, -4); };
      auto f = compile(fn, Options{.dynamic = true});
      Tensor a = uniform({2}, 1);
      return std::pair{run([&] { return fn(a); }), run([&] { return f(a); })};  // compiled: f32[-2]
    });
  }
  SECTION("automatic dynamic shapes: concat with slice(x, 0, 2, -2) at size 3 then 2") {
    require_same_in_child([] {
      auto fn = [](const Tensor& x) { return concat({x, slice(x, 0, 2, -2)}, 0); };
      auto f = compile(fn);
      Tensor a = uniform({3}, 1), b = uniform({2}, 2);
      f(a);
      // Compiled raises "[empty] negative dim -2" (or crashes); eager returns b.
      return std::pair{run([&] { return fn(b); }), run([&] { return f(b); })};
    });
  }
  SECTION("a std::length_error escapes: argmax of slice(x, 0, 1, -2) at size 2 (seed 1592597772)") {
    require_same_in_child([] {
      auto fn = [](const Tensor& x) { return argmax(slice(x, 0, 1, -2), {-1}); };
      auto f = compile(fn, Options{.dynamic = true});
      Tensor a = full({2}, 1, DType::Int64);
      return std::pair{run([&] { return fn(a); }), run([&] { return f(a); })};
    });
  }
}

TEST_CASE("capture bug: scalar arguments are guarded by value: -0.0 equals 0.0", "[capture-bugs]") {
  // Seed 1592595668. The trace for -0.0 is replayed for 0.0: -0.0 + -0.0 instead of -0.0 + 0.0.
  auto fn = [](const Tensor& x, double s) { return x + s; };
  auto f = compile(fn);
  Tensor x = full({2}, -0.0);
  require_same(run([&] { return fn(x, -0.0); }), run([&] { return f(x, -0.0); }));
  require_same(run([&] { return fn(x, 0.0); }), run([&] { return f(x, 0.0); }));
}

TEST_CASE("capture bug: scalar arguments are guarded by value: float and double are one", "[capture-bugs]") {
  // Seed 1592592508. Both are kept as a double 0.5: the trace for double is replayed for float.
  auto fn = [](const Tensor& x, auto s) {
    (void)x;
    return scalar_tensor(s, std::is_same_v<decltype(s), float> ? DType::Float32 : DType::Float64);
  };
  auto f = compile(fn);
  Tensor x = full({2}, 1.0);
  require_same(run([&] { return fn(x, 0.5); }), run([&] { return f(x, 0.5); }));
  require_same(run([&] { return fn(x, 0.5f); }), run([&] { return f(x, 0.5f); }));
}

TEST_CASE("capture bug: a NaN scalar argument never matches its guard", "[capture-bugs]") {
  // Not a wrong result: NaN != NaN, so every call with a NaN recompiles, and past the recompile
  // limit the function runs eagerly.
  auto fn = [](const Tensor& x, double s) { return x * s; };
  auto f = compile(fn);
  Tensor x = full({2}, 1.0);
  for (int i = 0; i < 3; ++i) require_same(run([&] { return fn(x, kNaN); }), run([&] { return f(x, kNaN); }));
  CHECK(f.report().recompiles.empty());
}

TEST_CASE("capture bug: simplify is not bit-exact", "[capture-bugs]") {
  SECTION("x + zeros({}, int64) is not x for x = -0.0 (EMBER_FUZZ_AVOID=all, seed 1592591826)") {
    // The rule checks the sign of a floating zero; an integer constant has no float values, so
    // the check passes vacuously.
    auto fn = [](const Tensor& x) { return x + zeros({}, DType::Int64); };
    auto f = compile(fn);
    Tensor x = full({2}, -0.0);
    require_same(run([&] { return fn(x); }), run([&] { return f(x); }));
  }
  SECTION("pow(x, 1) is not x for x = -NaN or a signalling NaN (seed 1592592538)") {
    auto fn = [](const Tensor& x) { return pow(x, 1.0); };
    auto f = compile(fn);
    Tensor x = f32_bits({0xffc00000u, 0x7fa00000u});
    require_same(run([&] { return fn(x); }), run([&] { return f(x); }));
  }
  SECTION("x * 1, x / 1, x - 0.0 are not x for a signalling NaN (seed 1592592605)") {
    Tensor x = f32_bits({0x7fa00000u});
    auto mul = [](const Tensor& x) { return x * 1.0; };
    auto div = [](const Tensor& x) { return x / 1.0; };
    auto sub = [](const Tensor& x) { return x - 0.0; };
    auto fm = compile(mul);
    auto fd = compile(div);
    auto fs = compile(sub);
    require_same(run([&] { return mul(x); }), run([&] { return fm(x); }));
    require_same(run([&] { return div(x); }), run([&] { return fd(x); }));
    require_same(run([&] { return sub(x); }), run([&] { return fs(x); }));
  }
}

TEST_CASE("capture bug: an item() value is baked into a cached segment (NaN signs)", "[capture-bugs]") {
  // Seed 1592591509. After the break, the segment "full(v)" is looked up by the
  // hash of its printed IR, and every NaN prints as "nan": the segment compiled for NaN is
  // reused for -NaN (or for a NaN with another payload).
  auto fn = [](const Tensor& x) {
    double v = x.sum().item<double>();
    return full({1}, v, DType::Float64);
  };
  auto f = compile(fn);
  Tensor a = full({1}, kNaN, DType::Float64), b = full({1}, -kNaN, DType::Float64);
  require_same(run([&] { return fn(a); }), run([&] { return f(a); }));
  require_same(run([&] { return fn(b); }), run([&] { return f(b); }));
}

// ---- New classes

TEST_CASE("capture bug: reducing a symbolic dim that is 0 at run time reads out of bounds", "[capture-bugs]") {
  // Seed 1592609203. The "cannot reduce over a zero-size dim" check only looks at static
  // sizes; slice(x, 0, 2) of a symbolic s0 has size s0 - 2 = 0 here and max() reads past the end
  // of its input (SIGSEGV).
  require_same_in_child([] {
    auto fn = [](const Tensor& x) { return max(slice(x, 0, 2)); };
    auto f = compile(fn, Options{.dynamic = true});
    Tensor x = uniform({2}, 1);
    return std::pair{run([&] { return fn(x); }), run([&] { return f(x); })};
  });
}

TEST_CASE("capture bug: gather skips its index-size check for symbolic dims", "[capture-bugs]") {
  // Seed 1592590755. Eagerly an index larger than the input in a dim other than `axis` is an
  // error; when either size is symbolic infer_gather skips the check and the kernel reads rows
  // that do not exist (garbage here, a crash for larger sizes).
  require_same_in_child([] {
    auto fn = [](const Tensor& x, const Tensor& index) { return gather(x, 1, index); };
    auto f = compile(fn, Options{.dynamic = true});
    Tensor x = uniform({2, 4}, 1), index = zeros({3, 4}, DType::Int64);
    return std::pair{run([&] { return fn(x, index); }), run([&] { return f(x, index); })};
  });
}

TEST_CASE("capture bug: windowed ops skip the window-size check for symbolic sizes", "[capture-bugs]") {
  SECTION("max_pool2d with a window larger than the input (seed 1592594102)") {
    // Eager: "[max_pool2d] input size 2 is smaller than the window"; compiled returns [1, 2, 0, 0].
    require_same_in_child([] {
      auto fn = [](const Tensor& x) { return max_pool2d(x, {3, 3}, {1, 1}); };
      auto f = compile(fn, Options{.dynamic = true});
      Tensor x = uniform({1, 2, 2, 2}, 1);
      return std::pair{run([&] { return fn(x); }), run([&] { return f(x); })};
    });
  }
  SECTION("conv2d with a kernel larger than the padded input (EMBER_FUZZ_AVOID=all, seed 1592606050)") {
    require_same_in_child([] {
      auto fn = [](const Tensor& x, const Tensor& w) { return conv2d(x, w, std::nullopt, {1, 1}, {1, 1}); };
      auto f = compile(fn, Options{.dynamic = true});
      Tensor x = uniform({5, 1, 2, 8}, 1), w = uniform({5, 1, 5, 8}, 2);
      return std::pair{run([&] { return fn(x, w); }), run([&] { return f(x, w); })};
    });
  }
}

TEST_CASE("capture bug: squeeze keeps a symbolic dim that is 1 at run time", "[capture-bugs]") {
  // Seed 1592599413. slice(x, 0, 1) of s0 is s0 - 1: squeeze cannot tell that it is 1 here
  // and keeps it; eager drops it. The rank is wrong on the very first call.
  auto fn = [](const Tensor& x) { return squeeze(slice(x, 0, 1)); };
  auto f = compile(fn, Options{.dynamic = true});
  Tensor x = uniform({2}, 1);
  require_same(run([&] { return fn(x); }), run([&] { return f(x); }));
}

TEST_CASE("capture bug: CSE merges constants that differ only in their NaN sign", "[capture-bugs]") {
  // Seeds 1592596590, 1592609127. The CSE key prints attributes with attr_str, which writes every
  // NaN as "nan": full(NaN) and full(-NaN) become one node. Constant folding makes more of them
  // (neg(full(NaN)) folds to a -NaN constant, which CSE then replaces by the NaN one).
  SECTION("x + NaN and x * -NaN") {
    auto fn = [](const Tensor& x) { return std::vector<Tensor>{x + kNaN, x * -kNaN}; };
    auto f = compile(fn);
    Tensor x = full({2}, 1.0);
    require_same(run([&] { return fn(x); }), run([&] { return f(x); }));
  }
  SECTION("full(NaN) and neg(full(NaN))") {
    auto fn = [](const Tensor& x) {
      Tensor n = full({2}, kNaN);
      return std::vector<Tensor>{x + n, neg(n)};
    };
    auto f = compile(fn);
    Tensor x = full({2}, 1.0);
    require_same(run([&] { return fn(x); }), run([&] { return f(x); }));
  }
}

TEST_CASE("capture bug: a run-time error is preempted by a later op's trace-time error", "[capture-bugs]") {
  // Seed 1592601226. Eager stops at pow ("integers to negative integer powers",
  // Value); tracing records pow without running it and raises matmul's dtype error (Type).
  auto fn = [](const Tensor& a) {
    Tensor p = pow(a, a);
    return matmul(p, p);
  };
  auto f = compile(fn);
  Tensor a = full({2, 2}, -2, DType::Int64);
  require_same(run([&] { return fn(a); }), run([&] { return f(a); }));
}

TEST_CASE("capture bug: an error in dead code is not raised", "[capture-bugs]") {
  // Seeds 1592590902, 1592596480. DCE removes the unused remainder, so the integer division by
  // zero that eager raises never runs. (test_fuzz_passes accepts this for the passes alone; the
  // user guide promises the error eager raises.)
  auto fn = [](const Tensor& x) {
    Tensor unused = remainder(x, zeros({2}, DType::Int64));
    return x * 2;
  };
  auto f = compile(fn);
  Tensor x = full({2}, 3, DType::Int64);
  require_same(run([&] { return fn(x); }), run([&] { return f(x); }));
}

TEST_CASE("capture bug: an error in dead code is not raised, for bool operands", "[capture-bugs]") {
  // Seeds 1592600003, 1592602099 (found once the fuzzer shrank sizes). remainder and
  // floor_divide of bools divide by false; pow of bools never raises and may be dropped.
  for (bool rem : {true, false}) {
    auto fn = [rem](const Tensor& x) {
      Tensor t = gt(x, x);  // all false
      Tensor unused = rem ? remainder(t, t) : floor_divide(t, t);
      return t;
    };
    auto f = compile(fn);
    Tensor x = arange(6).reshape({2, 3});
    require_same(run([&] { return fn(x); }), run([&] { return f(x); }));
  }
  auto g = compile([](const Tensor& x) {
    Tensor t = gt(x, x);
    Tensor unused = pow(t, t);
    return t;
  });
  g(arange(4));
  CHECK(g.report().graphs[0].ops.count("pow") == 0);
}

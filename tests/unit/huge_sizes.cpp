// Sizes near 2^31, 2^32, 2^62 and 2^63 through creation, view, broadcast, reduction and
// indexing ops, eager and compiled (static and dynamic): a result equal to eager's, or the same
// kind of ember::Error, never a crash, an internal error or a wrapped size.
//
// Its own program, not a Catch2 case: it caps its address space at 4 GiB first (RLIMIT_AS), so
// a request of 8 GiB meets the system's refusal at once instead of being granted on this
// machine, and one crash fails the whole run, naming the case it was on.
#include <sys/resource.h>

#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "frontend/compile.h"
#include "frontend/ops.h"
#include "ir/error.h"

using namespace ember;

namespace {

// What a case returned: its shape and first values, or the kind and text of its error.
struct Outcome {
  std::optional<ErrorKind> error;
  std::string text;
  bool operator==(const Outcome& o) const { return error == o.error && (error || text == o.text); }
};

std::string describe(const Tensor& t) {
  std::string s = "[";
  for (int64_t d : t.shape()) s += std::to_string(d) + ",";
  s += "]";
  if (t.numel().value() <= 16)
    for (double v : t.to_vector()) s += " " + std::to_string(v);
  return s;
}

template <class F>
Outcome outcome_of(F&& f) {
  try {
    return {std::nullopt, describe(f())};
  } catch (const Error& e) {
    return {e.kind(), e.what()};
  }
}

std::string str(const Outcome& o) {
  if (!o.error) return "result " + o.text;
  return std::string("ember::Error(") + error_kind_name(*o.error) + "): " + o.text;
}

struct Case {
  std::string name;
  std::function<Tensor(const Tensor&)> fn;  // of a small input, or of the huge one below
  std::optional<ErrorKind> expected;        // the error eager must raise; nullopt: a result
  bool huge_input = false;                  // called on expand(ones(1), {n}) instead of ones({3})
};

std::vector<Case> cases_for(int64_t n) {
  // Whether a * b elements overflow int64 (a Value error) rather than only the memory.
  auto past_int64 = [](int64_t a, int64_t b) {
    int64_t r;
    return __builtin_mul_overflow(a, b, &r);
  };
  std::optional<ErrorKind> none, value = ErrorKind::Value, oom = ErrorKind::OutOfMemory;
  // A view of n elements that holds one: every size computation of a view, none of the memory.
  auto line = [=] { return expand(ones({1}), {n}); };
  auto grid = [](int64_t rows, int64_t columns) { return expand(ones({1, 1}), {rows, columns}); };
  auto no_columns = [=] { return expand(ones({1, 0}), {n, 0}); };  // n rows of nothing
  std::vector<Case> c = {
      {"zeros [n, n]", [=](const Tensor& x) { return x + zeros({n, n}); },
           past_int64(n, n) ? value : oom},
      {"zeros [n, 8]", [=](const Tensor& x) { return zeros({n, 8}) * x.sum(); },
           past_int64(n, 8) ? value : oom},
      {"zeros [n] f64", [=](const Tensor& x) { return zeros({n}, DType::Float64) + x.sum(); }, oom},
      {"full [4, n] i8", [=](const Tensor& x) { return full({4, n}, 1, DType::Int8) + x.sum(); },
           past_int64(n, 4) ? value : oom},
      {"uniform [n, n]", [=](const Tensor& x) { return uniform({n, n}, 0) * x.sum(); },
           past_int64(n, n) ? value : oom},
      {"arange(n)", [=](const Tensor& x) { return arange(n) + x.sum(); },
           n == INT64_MAX ? value : oom},
      {"arange(0, n, n / 4)", [=](const Tensor& x) { return arange(0, n, n / 4) * x.sum(); }, none},
      {"arange(-n, n, n)", [=](const Tensor& x) { return arange(-n, n, n) * x.sum(); }, none},
      {"expand [n] then slice", [=](const Tensor& x) { return slice(line(), 0, n - 3, n) + x; },
           none},
      {"expand [n, n]", 
           [=](const Tensor& x) { return slice(slice(grid(n, n), 0, n - 2), 1, n - 2) * x.sum(); },
           past_int64(n, n) ? value : none},
      {"expand [2, n] flatten", 
           [=](const Tensor& x) { return slice(flatten(grid(2, n)), 0, n - 1, INT64_MAX, n) * x.sum(); },
           past_int64(n, 2) ? value : none},
      {"expand [n, 2] permute", 
           [=](const Tensor& x) { return slice(permute(grid(n, 2), {1, 0}), 1, 0, 2) * x.sum(); },
           past_int64(n, 2) ? value : none},
      {"expand [n] unsqueeze", 
           [=](const Tensor& x) { return slice(unsqueeze(line(), 0), 1, n - 2, n) * x.sum(); },
           none},
      {"expand [n] reshape", 
           [=](const Tensor& x) { return slice(reshape(line(), {1, n, 1}), 1, 1, 3) * x.sum(); },
           none},
      {"expand [n] * 2 (materialises)", [=](const Tensor& x) { return line() * 2.0 + x.sum(); },
           oom},
      {"sum over [n, 0]", 
           [=](const Tensor& x) { return no_columns().sum({0}) + x.sum(); },
           none},
      {"sum keeping [n] of [n, 0]", 
           [=](const Tensor& x) { return no_columns().sum({1}) + x.sum(); },
           oom},
      {"sum of [0, n]", 
           [=](const Tensor& x) { return expand(ones({0, 1}), {0, n}).sum() + x.sum(); },
           none},
      {"max over [n, n] dim 0", 
           [=](const Tensor& x) { return grid(n, n).max({0}) + x.sum(); },
           past_int64(n, n) ? value : oom},
      {"softmax of [n, 0]", 
           [=](const Tensor& x) { return softmax(no_columns(), 0) + x.sum(); },
           none},
      {"cumsum of [n, 0]", 
           [=](const Tensor& x) { return cumsum(no_columns(), 0) + x.sum(); },
           none},
      {"reshape [n, 0] to [0, n]", 
           [=](const Tensor& x) { return reshape(no_columns(), {0, n}) + x.sum(); },
           none},
      {"matmul [n, 0] @ [0, n]", 
           [=](const Tensor& x) { return matmul(no_columns(), ones({0, n})) + x.sum(); },
           past_int64(n, n) ? value : oom},
      {"concat [n] [n]", 
           [=](const Tensor& x) { return slice(concat({line(), line()}), 0, 0, 2) + x.sum(); },
           n > (int64_t{1} << 62) - 1 ? value : oom},
      {"stack [n]", [=](const Tensor& x) { return slice(stack({line()}), 1, 0, 2) + x.sum(); },
           oom},
      {"pad by n", [=](const Tensor& x) { return pad(x, {n, n}); },
           n >= (int64_t{1} << 62) ? value : oom},
      {"pad by -n", [=](const Tensor& x) { return pad(x, {-n, 0}); }, value},
      {"slice step n", [=](const Tensor& x) { return slice(x, 0, 0, n, n); }, none},
      {"slice from n", [=](const Tensor& x) { return slice(x, 0, n, n, 1); }, none},
      {"slice from -n", [=](const Tensor& x) { return slice(x, 0, -n, 10, n); }, none},
      {"chunk into n", [=](const Tensor& x) { return chunk(x, n)[0]; }, none},
      {"split n", [=](const Tensor& x) { return split(x, {n, 3 - n})[0]; }, value},
      {"topk n", [=](const Tensor& x) { return std::get<0>(topk(x, n)); }, value},
      {"index_select of [n]", 
           [=](const Tensor& x) { return index_select(line(), 0, arange(3)) + x; },
           none},
      {"index_select at n - 1", 
           [=](const Tensor& x) { return index_select(x, 0, full({1}, n - 1, DType::Int64)); },
           ErrorKind::Index},
      {"gather from [2, n]",
           [=](const Tensor& x) { return gather(grid(2, n), 1, zeros({2, 1}, DType::Int64)) + x; },
           past_int64(n, 2) ? value : none},
      {"max_pool window n", 
           [=](const Tensor& x) { return max_pool2d(reshape(x, {1, 1, 1, 3}), {n, n}); },
           value},
      {"avg_pool stride n", 
           [=](const Tensor& x) {
             return avg_pool2d(expand(reshape(x, {1, 1, 1, 3}), {1, 1, 3, 3}), {2, 2}, {n, n});
           },
           none},
      {"adaptive_avg_pool to n", 
           [=](const Tensor& x) { return adaptive_avg_pool2d(reshape(x, {1, 1, 1, 3}), {n, n}); },
           past_int64(n, n) ? value : oom},
      // The huge view as the compiled function's argument: its sizes are guarded, and symbolic
      // under dynamic=true.
      {"argument [n]: its last 3", [=](const Tensor& x) { return slice(x, 0, -3) * 2.0; },
           none, true},
      {"argument [n]: reshape [n, 1] and back", 
           [=](const Tensor& x) { return slice(reshape(reshape(x, {n, 1}), {n}), 0, 0, 2); },
           none, true},
  };
  return c;
}

Tensor input_for(const Case& c, int64_t n) {
  return c.huge_input ? expand(ones({1}), {n}) : ones({3});
}

}  // namespace

int main() {
  rlimit cap{rlim_t{4} << 30, rlim_t{4} << 30};
  if (setrlimit(RLIMIT_AS, &cap) != 0) std::perror("setrlimit");
  const int64_t p31 = int64_t{1} << 31, p32 = int64_t{1} << 32, p62 = int64_t{1} << 62;
  const std::vector<int64_t> sizes = {p31 - 1, p31, p31 + 1, p32, p32 + 1, p62, p62 + 1, INT64_MAX};
  int failures = 0, checked = 0;
  for (int64_t n : sizes) {
    for (const Case& c : cases_for(n)) {
      std::string name = c.name + " at n = " + std::to_string(n);
      std::fprintf(stderr, "%s\n", name.c_str());  // the last line names a case that crashed
      Outcome eager = outcome_of([&] { return c.fn(input_for(c, n)); });
      auto fail = [&](const std::string& why) {
        std::printf("FAIL %s: %s\n", name.c_str(), why.c_str());
        ++failures;
      };
      std::string expected = "a result";
      if (c.expected) expected = std::string("ember::Error(") + error_kind_name(*c.expected) + ")";
      if (eager.error != c.expected) fail("eager gave " + str(eager) + ", expected " + expected);
      for (std::optional<bool> dynamic : {std::optional<bool>(false), std::optional<bool>(true)}) {
        auto f = compile(c.fn, Options{.dynamic = dynamic});
        Outcome compiled = outcome_of([&] { return f(input_for(c, n)); });
        ++checked;
        if (!(compiled == eager))
          fail(std::string("compiled (dynamic=") + (*dynamic ? "true" : "false") + ") gave " +
               str(compiled) + ", eager " + str(eager));
      }
    }
  }
  std::printf("%d cases checked eager and compiled, %d failures\n", checked, failures);
  return failures == 0 ? 0 : 1;
}

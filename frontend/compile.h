// compile(): wraps a function of tensors so that its ops are traced into graphs, optimised by a
// mode's passes and replayed while the guards hold. See docs/user-guide.md.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <array>
#include <type_traits>
#include <typeindex>
#include <typeinfo>
#include <utility>
#include <variant>
#include <vector>

#include "frontend/report.h"
#include "frontend/tensor.h"
#include "ir/error.h"

namespace ember {

struct Options {
  std::string mode = "default";   // default | reduce-overhead | max-autotune
  bool fullgraph = false;         // the first graph break raises instead
  std::optional<bool> dynamic;    // false: static; true: every dim symbolic; unset: automatic
  int recompile_limit = 8;        // past it, new guard failures run eagerly (one warning)
  int segment_cache_limit = 64;   // compiled graphs kept per function; the oldest go first
  bool strict = false;            // a compile failure raises instead of falling back to eager
  // max-autotune's time per compiled graph in seconds, and its search (auto, exhaustive, random,
  // bayes): unset, EMBER_AUTOTUNE_BUDGET_S and EMBER_AUTOTUNE_SEARCH, else 30 and auto.
  std::optional<double> autotune_budget_s;
  std::string autotune_search;
  // The most memory, in MiB, a static plan (reduce-overhead, max-autotune) keeps between calls;
  // unset: its buffers for up to 8 sizes, however large ([Note: bounded static plans]).
  std::optional<double> static_plan_mb;

  // From text pairs, as a binding or a config file gives them. Unknown keys and bad values are
  // ember::Error naming the valid ones.
  static Options from_map(const std::map<std::string, std::string>& values);
  // Throws ember::Error for an unknown mode or a bad value.
  void validate() const;
};

// A non-tensor argument is guarded by its value (floats by bit pattern) and the kind of C++ type
// it came as (guard_type below).
using ArgValue = std::variant<Tensor, int64_t, double, bool, std::string>;

namespace detail {

class CompiledState;

// What one call of a compiled function gives back: its outputs, and the tensor arguments the
// function rebound (`x = x * 2` on a `Tensor&` parameter), by index among the tensor arguments,
// with their new values, which the caller's variables take as they would in eager code.
struct CallResult {
  std::vector<Tensor> outputs;
  std::vector<std::pair<int, Tensor>> rebound;
};

class CompiledCore {
 public:
  explicit CompiledCore(Options options);
  ~CompiledCore();
  // The user function, called with the tensor arguments to use in place of the original ones.
  using Body = std::function<std::vector<Tensor>(std::vector<Tensor>& tensor_args)>;
  // Runs `body` traced or replayed. `types` are the arguments' guard types (a generic lambda
  // may do different things for 0.5f and 0.5); `shared` is shared_variables' (a guard too).
  CallResult call(const std::vector<ArgValue>& args, const std::vector<std::type_index>& types,
                  const std::vector<int>& shared, const Body& body);
  Report report() const;
  const Options& options() const;

 private:
  std::unique_ptr<CompiledState> state_;
};

template <class T>
constexpr bool is_string_like = std::is_convertible_v<const T&, std::string> || std::is_same_v<T, std::string_view>;

template <class T>
ArgValue to_arg(const T& v) {
  if constexpr (std::is_same_v<std::decay_t<T>, Tensor>) return v;
  else if constexpr (std::is_same_v<std::decay_t<T>, bool>) return v;
  else if constexpr (std::is_integral_v<std::decay_t<T>>) return static_cast<int64_t>(v);
  else if constexpr (std::is_floating_point_v<std::decay_t<T>>) return static_cast<double>(v);
  else if constexpr (is_string_like<std::decay_t<T>>) return std::string(v);
  else static_assert(sizeof(T) == 0, "compiled functions take Tensor, integer, float, bool or string arguments");
}

// The parameter types of a callable whose call operator is not a template (a plain lambda, a
// function pointer, std::function); `known` is false for a generic lambda.
template <class M>
struct member_params {
  static constexpr bool known = false;
};
template <class C, class R, class... P>
struct member_params<R (C::*)(P...) const> {
  static constexpr bool known = true;
  using type = std::tuple<P...>;
};
template <class C, class R, class... P>
struct member_params<R (C::*)(P...)> : member_params<R (C::*)(P...) const> {};
template <class C, class R, class... P>
struct member_params<R (C::*)(P...) const noexcept> : member_params<R (C::*)(P...) const> {};
template <class C, class R, class... P>
struct member_params<R (C::*)(P...) noexcept> : member_params<R (C::*)(P...) const> {};

template <class F, class = void>
struct params_of {
  static constexpr bool known = false;
};
template <class F>
struct params_of<F, std::void_t<decltype(&F::operator())>> : member_params<decltype(&F::operator())> {};
template <class R, class... P>
struct params_of<R (*)(P...)> {
  static constexpr bool known = true;
  using type = std::tuple<P...>;
};

// Argument I of N as the function's body sees it: converted to its parameter's type where that
// is known, else the argument's own type (a generic lambda).
template <class T>
constexpr bool is_guardable = std::is_same_v<T, Tensor> || std::is_arithmetic_v<T> || is_string_like<T>;

template <class Params, size_t I, class Arg, size_t N, bool = std::tuple_size_v<Params> == N>
struct param_or_arg {
  using type = std::decay_t<Arg>;
};
// A parameter of another type (ember::Scalar) takes what it is given: the argument's type.
template <class Params, size_t I, class Arg, size_t N>
struct param_or_arg<Params, I, Arg, N, true> {
  using param = std::decay_t<std::tuple_element_t<I, Params>>;
  using type = std::conditional_t<is_guardable<param>, param, std::decay_t<Arg>>;
};
template <class F, size_t I, class Arg, size_t N, class = void>
struct seen_as {
  using type = std::decay_t<Arg>;
};
template <class F, size_t I, class Arg, size_t N>
struct seen_as<F, I, Arg, N, std::enable_if_t<params_of<F>::known>>
    : param_or_arg<typename params_of<F>::type, I, Arg, N> {};

// A non-tensor argument is guarded by its value and type as the body sees them, not as the
// caller spelled them: for a `const std::string&` parameter, f(x, "relu") and
// f(x, std::string("relu")) are one trace, as f(x, 2) and f(x, 2.0) are for a `double` one.
// A generic lambda sees each argument's own type and may act on it (dtype_of<decltype(s)>),
// so there each C++ type keeps its trace.
template <class F, size_t I, size_t N, class Arg>
ArgValue guard_value(const Arg& arg) {
  using Seen = typename seen_as<F, I, Arg, N>::type;
  if constexpr (std::is_same_v<Seen, Tensor> || std::is_same_v<Seen, std::decay_t<Arg>>) return to_arg(arg);
  else return to_arg(static_cast<Seen>(arg));
}
template <class F, size_t I, size_t N, class Arg>
std::type_index guard_type() {
  return typeid(typename seen_as<F, I, Arg, N>::type);
}

// For each argument position, its index among the tensor arguments (-1 for other arguments).
template <class... Args>
constexpr std::array<int, sizeof...(Args)> tensor_positions() {
  constexpr bool is_tensor[] = {std::is_same_v<std::decay_t<Args>, Tensor>..., false};
  std::array<int, sizeof...(Args)> out{};
  int k = 0;
  for (size_t i = 0; i < sizeof...(Args); ++i) out[i] = is_tensor[i] ? k++ : -1;
  return out;
}

template <int P, class A>
decltype(auto) pick(std::vector<Tensor>& tensor_args, const std::vector<int>& shared, A& arg) {
  if constexpr (P >= 0) return (tensor_args[shared.empty() ? P : shared[P]]);
  else return (arg);
}

// Calls fn with each tensor argument replaced by its stand-in from `tensor_args`.
template <class F, class... Args, size_t... I>
decltype(auto) call_with(F& fn, std::vector<Tensor>& tensor_args, const std::vector<int>& shared,
                         std::index_sequence<I...>, Args&... args) {
  constexpr auto positions = tensor_positions<Args...>();
  return fn(pick<positions[I]>(tensor_args, shared, args)...);
}

// Gives each rebound tensor argument's new value to the caller's variable, as eager code would.
// Only a non-const lvalue can take it: a temporary's rebinding is not visible to the caller.
template <class... Args>
void rebind_arguments(const std::vector<std::pair<int, Tensor>>& rebound, Args&&... args) {
  if (rebound.empty()) return;
  constexpr auto positions = tensor_positions<Args...>();
  size_t i = 0;
  auto one = [&]<class A>(A&& arg) {
    int p = positions[i++];
    if constexpr (std::is_same_v<A, Tensor&>)
      for (const auto& [index, value] : rebound)
        if (index == p) arg = value;
  };
  (one(std::forward<Args>(args)), ...);
}

// Whether argument I (of N, as the caller passed it: A) may be rebound by the function: a
// Tensor& parameter, or, in a generic lambda, a non-const Tensor lvalue.
template <class F, size_t I, size_t N, class A>
constexpr bool may_rebind() {
  if constexpr (!std::is_same_v<std::decay_t<A>, Tensor>) {
    return false;
  } else if constexpr (params_of<F>::known) {
    using P = typename params_of<F>::type;
    if constexpr (std::tuple_size_v<P> == N) return std::is_same_v<std::tuple_element_t<I, P>, Tensor&>;
    else return false;
  } else {
    return std::is_same_v<A, Tensor&>;
  }
}

// For each tensor argument, the tensor argument whose variable it shares (its own index when
// none): f(a, a) into (Tensor& x, Tensor& y) shows `x = x * 2` through y in eager code, so such
// arguments get one stand-in between them, as they are one variable. Only where one of them may
// be rebound: otherwise sharing is invisible, and a trace that tells them apart also serves
// f(b, c). Empty when no variable is shared ([Note: rebound arguments]).
template <class F, class... A, size_t... I>
std::vector<int> shared_variables(std::index_sequence<I...>, const A&... args) {
  constexpr size_t n = sizeof...(A);
  constexpr auto positions = tensor_positions<A...>();
  const void* variables[] = {static_cast<const void*>(&args)..., nullptr};
  constexpr bool rebindable[] = {may_rebind<F, I, n, A>()..., false};
  std::vector<int> shared;
  for (size_t j = 0; j < n; ++j) {
    if (positions[j] < 0) continue;
    for (size_t i = 0; i < j; ++i) {
      if (positions[i] < 0 || variables[i] != variables[j] || !(rebindable[i] || rebindable[j])) continue;
      if (shared.empty())
        for (size_t k = 0; k < n; ++k)
          if (positions[k] >= 0) shared.push_back(positions[k]);
      shared[positions[j]] = shared[positions[i]];
      break;
    }
  }
  return shared;
}

template <class R>
std::vector<Tensor> flatten(R&& r) {
  using D = std::decay_t<R>;
  if constexpr (std::is_same_v<D, Tensor>) return {r};
  else if constexpr (std::is_same_v<D, std::vector<Tensor>>) return r;
  else return std::apply([](auto&&... t) { return std::vector<Tensor>{t...}; }, r);  // tuple or pair
}

template <class R>
R unflatten(std::vector<Tensor> v) {
  if constexpr (std::is_same_v<R, Tensor>) return v.at(0);
  else if constexpr (std::is_same_v<R, std::vector<Tensor>>) return v;
  else return [&]<size_t... I>(std::index_sequence<I...>) { return R{v.at(I)...}; }(
      std::make_index_sequence<std::tuple_size_v<R>>{});
}

}  // namespace detail

template <class F>
class CompiledFunction {
 public:
  CompiledFunction(F fn, Options options)
      : fn_(std::move(fn)), core_(std::make_shared<detail::CompiledCore>(std::move(options))) {}

  template <class... Args>
  auto operator()(Args&&... args) {
    using R = std::decay_t<std::invoke_result_t<F&, Args&...>>;
    if (!core_) throw Error(ErrorKind::Runtime, "[compile] this compiled function was moved from");
    std::vector<int> shared = detail::shared_variables<F, Args...>(std::index_sequence_for<Args...>{}, args...);
    auto [packed, types] = pack<Args...>(std::index_sequence_for<Args...>{}, args...);
    auto body = [&](std::vector<Tensor>& tensor_args) {
      return detail::flatten(detail::call_with(fn_, tensor_args, shared, std::index_sequence_for<Args...>{}, args...));
    };
    detail::CallResult result = core_->call(packed, types, shared, body);
    detail::rebind_arguments(result.rebound, std::forward<Args>(args)...);
    return detail::unflatten<R>(std::move(result.outputs));
  }

  // The arguments as the guards see them, and their types (detail::guard_value).
  template <class... Args, size_t... I>
  static std::pair<std::vector<ArgValue>, std::vector<std::type_index>> pack(std::index_sequence<I...>,
                                                                             const Args&... args) {
    constexpr size_t n = sizeof...(Args);
    return {{detail::guard_value<F, I, n>(args)...}, {detail::guard_type<F, I, n, Args>()...}};
  }

  // The report of the latest trace, with every recompile so far.
  Report report() const { return core().report(); }
  const Options& options() const { return core().options(); }

 private:
  const detail::CompiledCore& core() const {
    if (!core_) throw Error(ErrorKind::Runtime, "[compile] this compiled function was moved from");
    return *core_;
  }

  F fn_;
  std::shared_ptr<detail::CompiledCore> core_;  // shared by copies, so they share the cache
};

// Validates the options now: an unknown mode or option is an error here, not at the first call.
template <class F>
CompiledFunction<F> compile(F fn, Options options = {}) {
  options.validate();
  return CompiledFunction<F>(std::move(fn), std::move(options));
}

// Compiles `fn` afresh with default options, calls it once on `args` and returns the report.
template <class F, class... Args>
Report explain(F fn, Args&&... args) {
  auto compiled = compile(std::move(fn));
  compiled(std::forward<Args>(args)...);
  return compiled.report();
}

}  // namespace ember

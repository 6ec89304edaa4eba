// compile(): wraps a function of tensors so that its ops are traced into graphs, optimised by a
// mode's passes and replayed while the guards hold. See docs/user-guide.md.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
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

  // From text pairs, as a binding or a config file gives them. Unknown keys and bad values are
  // ember::Error naming the valid ones.
  static Options from_map(const std::map<std::string, std::string>& values);
  // Throws ember::Error for an unknown mode or a bad value.
  void validate() const;
};

// A non-tensor argument is guarded by its value (floats by bit pattern) and its C++ type.
using ArgValue = std::variant<Tensor, int64_t, double, bool, std::string>;

namespace detail {

class CompiledState;

class CompiledCore {
 public:
  explicit CompiledCore(Options options);
  ~CompiledCore();
  // The user function, called with the tensor arguments to use in place of the original ones.
  using Body = std::function<std::vector<Tensor>(std::vector<Tensor>& tensor_args)>;
  // Runs `body` traced or replayed. `types` are the C++ types of the arguments (a generic
  // lambda may do different things for 0.5f and 0.5).
  std::vector<Tensor> call(const std::vector<ArgValue>& args, const std::vector<std::type_index>& types,
                           const Body& body);
  Report report() const;
  const Options& options() const;

 private:
  std::unique_ptr<CompiledState> state_;
};

template <class T>
ArgValue to_arg(const T& v) {
  if constexpr (std::is_same_v<std::decay_t<T>, Tensor>) return v;
  else if constexpr (std::is_same_v<std::decay_t<T>, bool>) return v;
  else if constexpr (std::is_integral_v<std::decay_t<T>>) return static_cast<int64_t>(v);
  else if constexpr (std::is_floating_point_v<std::decay_t<T>>) return static_cast<double>(v);
  else if constexpr (std::is_convertible_v<T, std::string>) return std::string(v);
  else static_assert(sizeof(T) == 0, "compiled functions take Tensor, integer, float, bool or string arguments");
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
decltype(auto) pick(std::vector<Tensor>& tensor_args, A& arg) {
  if constexpr (P >= 0) return (tensor_args[P]);
  else return (arg);
}

// Calls fn with each tensor argument replaced by its stand-in from `tensor_args`.
template <class F, class... Args, size_t... I>
decltype(auto) call_with(F& fn, std::vector<Tensor>& tensor_args, std::index_sequence<I...>, Args&... args) {
  constexpr auto positions = tensor_positions<Args...>();
  return fn(pick<positions[I]>(tensor_args, args)...);
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
    std::vector<ArgValue> packed{detail::to_arg(args)...};
    std::vector<std::type_index> types{std::type_index(typeid(std::decay_t<Args>))...};
    auto body = [&](std::vector<Tensor>& tensor_args) {
      return detail::flatten(detail::call_with(fn_, tensor_args, std::index_sequence_for<Args...>{}, args...));
    };
    return detail::unflatten<R>(core_->call(packed, types, body));
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

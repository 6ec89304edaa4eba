// compile(): wraps a function of tensors so that its ops are traced into graphs, optimised by a
// mode's passes and replayed while the guards hold. See docs/user-guide.md.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "frontend/report.h"
#include "frontend/tensor.h"

namespace ember {

struct Options {
  std::string mode = "default";   // default | reduce-overhead | max-autotune
  bool fullgraph = false;         // the first graph break raises instead
  std::optional<bool> dynamic;    // false: static; true: every dim symbolic; unset: automatic
  int recompile_limit = 8;        // past it, new guard failures run eagerly (one warning)
  bool strict = false;            // a compile failure raises instead of falling back to eager

  // From text pairs, as a binding or a config file gives them. Unknown keys and bad values are
  // ember::Error naming the valid ones.
  static Options from_map(const std::map<std::string, std::string>& values);
  // Throws ember::Error for an unknown mode or a bad value.
  void validate() const;
};

// A non-tensor argument is guarded by its value.
using ArgValue = std::variant<Tensor, int64_t, double, bool, std::string>;

namespace detail {

class CompiledState;

class CompiledCore {
 public:
  explicit CompiledCore(Options options);
  ~CompiledCore();
  // Runs `body` (the user function over the original arguments) traced or replayed.
  std::vector<Tensor> call(const std::vector<ArgValue>& args, const std::function<std::vector<Tensor>()>& body);
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
    std::vector<ArgValue> packed{detail::to_arg(args)...};
    auto body = [&]() { return detail::flatten(fn_(args...)); };
    return detail::unflatten<R>(core_->call(packed, body));
  }

  // The report of the latest trace, with every recompile so far.
  Report report() const { return core_->report(); }
  const Options& options() const { return core_->options(); }

 private:
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

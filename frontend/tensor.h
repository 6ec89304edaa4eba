// ember::Tensor: an eager value on the CPU, or a traced value inside a compiled function. The
// same op functions work on both; inside `compile` they record graph nodes instead of running.
#pragma once

#include <concepts>
#include <cstdint>
#include <memory>
#include <optional>
#include <source_location>
#include <string>
#include <type_traits>
#include <vector>

#include "ir/dtype.h"
#include "ir/symbolic.h"
#include "runtime/array.h"

namespace ember {

class TraceContext;

// A size that may be symbolic while tracing (dynamic shapes). Arithmetic keeps it symbolic;
// converting it to an integer specialises the trace on its current value (adds a guard).
class SymInt {
 public:
  SymInt(int64_t v = 0) : dim_(v), hint_(v) {}  // NOLINT: plain integers convert implicitly
  SymInt(int v) : SymInt(static_cast<int64_t>(v)) {}  // NOLINT
  SymInt(Dim dim, int64_t hint) : dim_(std::move(dim)), hint_(hint) {}

  bool is_symbolic() const { return !dim_.is_static(); }
  const Dim& dim() const { return dim_; }
  int64_t hint() const { return hint_; }  // the value in the current call, without a guard
  operator int64_t() const;               // NOLINT: specialises when symbolic
  int64_t value() const { return static_cast<int64_t>(*this); }
  std::string str() const { return dim_.str(); }

  friend SymInt operator+(const SymInt& a, const SymInt& b) { return {a.dim_ + b.dim_, a.hint_ + b.hint_}; }
  friend SymInt operator-(const SymInt& a, const SymInt& b) { return {a.dim_ - b.dim_, a.hint_ - b.hint_}; }
  friend SymInt operator*(const SymInt& a, const SymInt& b) { return {a.dim_ * b.dim_, a.hint_ * b.hint_}; }
  // Exact division stays symbolic; anything else specialises.
  friend SymInt operator/(const SymInt& a, const SymInt& b);
  // With plain integers (x.size(0) * 2): these win over converting the SymInt to an integer.
  template <std::integral I> friend SymInt operator+(const SymInt& a, I b) { return a + SymInt(int64_t(b)); }
  template <std::integral I> friend SymInt operator+(I a, const SymInt& b) { return SymInt(int64_t(a)) + b; }
  template <std::integral I> friend SymInt operator-(const SymInt& a, I b) { return a - SymInt(int64_t(b)); }
  template <std::integral I> friend SymInt operator-(I a, const SymInt& b) { return SymInt(int64_t(a)) - b; }
  template <std::integral I> friend SymInt operator*(const SymInt& a, I b) { return a * SymInt(int64_t(b)); }
  template <std::integral I> friend SymInt operator*(I a, const SymInt& b) { return SymInt(int64_t(a)) * b; }
  template <std::integral I> friend SymInt operator/(const SymInt& a, I b) { return a / SymInt(int64_t(b)); }

 private:
  Dim dim_;
  int64_t hint_;
};
using SymShape = std::vector<SymInt>;

// A number given where a tensor is expected (x + 1, x * 0.5). It takes part in type promotion
// with lower priority than tensors, as Python scalars do in PyTorch.
class Scalar {
 public:
  Scalar(bool v) : i_(v), f_(v), is_bool_(true) {}  // NOLINT
  template <class T>
    requires(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>)
  Scalar(T v) {  // NOLINT: numbers convert implicitly
    if constexpr (std::is_floating_point_v<T>) {
      f_ = static_cast<double>(v);
      is_float_ = true;
    } else {
      i_ = static_cast<int64_t>(v);
      f_ = static_cast<double>(v);
    }
  }
  bool is_float() const { return is_float_; }
  bool is_bool() const { return is_bool_; }
  double to_double() const { return f_; }
  int64_t to_int() const { return i_; }

 private:
  int64_t i_ = 0;
  double f_ = 0;
  bool is_float_ = false, is_bool_ = false;
};

struct TensorImpl;

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(Array value);
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  DType dtype() const;
  int64_t dim() const;
  // Sizes, symbolic while tracing with dynamic shapes.
  SymShape sizes() const;
  SymInt size(int64_t axis) const;
  // Concrete sizes; inside a dynamic trace this specialises every symbolic dim.
  std::vector<int64_t> shape() const;
  SymInt numel() const;
  bool is_traced() const;

  // Reading values needs concrete data: inside `compile` each of these is a graph break.
  template <class T>
  T item(std::source_location loc = std::source_location::current()) const {
    if constexpr (std::is_integral_v<T>) return static_cast<T>(item_int(loc));
    else return static_cast<T>(item_double(loc));
  }
  bool to_bool(std::source_location loc = std::source_location::current()) const;
  explicit operator bool() const;  // a graph break whose location is found from the call stack
  std::vector<double> to_vector(std::source_location loc = std::source_location::current()) const;
  std::string str(std::source_location loc = std::source_location::current()) const;
  // The eager value (materialising it: a graph break inside `compile`).
  const Array& array(std::source_location loc = std::source_location::current()) const;

  // Method forms of common ops (the free functions in frontend/ops.h are the full set).
  Tensor to(DType dtype) const;
  Tensor reshape(SymShape shape) const;
  Tensor view(SymShape shape) const { return reshape(std::move(shape)); }
  Tensor permute(std::vector<int64_t> dims) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor unsqueeze(int64_t axis) const;
  Tensor flatten(int64_t start = 0, int64_t end = -1) const;
  Tensor matmul(const Tensor& other) const;
  Tensor sum(std::vector<int64_t> axes = {}, bool keepdim = false) const;
  Tensor mean(std::vector<int64_t> axes = {}, bool keepdim = false) const;
  Tensor max(std::vector<int64_t> axes = {}, bool keepdim = false) const;
  Tensor exp() const;
  Tensor relu() const;
  Tensor t() const { return transpose(0, 1); }

  const std::shared_ptr<TensorImpl>& impl() const { return impl_; }

 private:
  double item_double(std::source_location loc) const;
  int64_t item_int(std::source_location loc) const;
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& out, const Tensor& t);

}  // namespace ember

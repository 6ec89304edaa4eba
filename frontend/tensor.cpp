#include "frontend/tensor.h"

#include <cxxabi.h>
#include <dlfcn.h>

#include <array>
#include <cstdio>
#include <memory>
#include <ostream>
#include <string_view>

#include "frontend/ops.h"
#include "frontend/trace.h"
#include "ir/error.h"

namespace ember {

namespace {

// File and line of a return address, for breaks where C++ gives no source_location (operator
// bool, operator<<). Uses addr2line on the caller's binary (built with -g); otherwise the binary
// and function name.
std::pair<std::string, int> caller_location(void* return_address) {
  Dl_info info;
  if (!dladdr(return_address, &info) || !info.dli_fname) return {"<unknown caller>", 0};
  uintptr_t offset = reinterpret_cast<uintptr_t>(return_address) - reinterpret_cast<uintptr_t>(info.dli_fbase) - 1;
  char cmd[1024];
  std::snprintf(cmd, sizeof cmd, "addr2line -e '%s' 0x%lx 2>/dev/null", info.dli_fname, static_cast<unsigned long>(offset));
  if (FILE* p = popen(cmd, "r")) {
    char line[1024] = {0};
    bool ok = std::fgets(line, sizeof line, p) != nullptr;
    pclose(p);
    std::string text = ok ? line : "";
    size_t colon = text.rfind(':');
    if (colon != std::string::npos && text.rfind("??", 0) != 0) {
      int number = std::atoi(text.c_str() + colon + 1);
      if (number > 0) return {text.substr(0, colon), number};
    }
  }
  std::string where = info.dli_fname;
  if (info.dli_sname) {
    int status = 0;
    std::unique_ptr<char, void (*)(void*)> name(abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status), std::free);
    where += std::string(" in ") + (status == 0 ? name.get() : info.dli_sname);
  }
  return {where, 0};
}

// Makes `impl` concrete. Inside a trace, reading the data of a traced value, an argument or a
// materialised value is a graph break: the value depends on the inputs.
// The texts are views: the common call (no trace) makes no string (a 1-element compiled call
// read its argument's array through here, and made four).
const Array& materialise(const TensorImpl* impl, std::string_view category, std::string_view reason,
                         std::string_view op, std::string_view file, int line, std::string_view hint) {
  if (!impl) EMBER_THROW(Value, "[", op, "] undefined tensor");
  if (impl->poisoned) EMBER_THROW(Value, "[", op, "] the tensor comes from a trace that failed");
  TraceContext* ctx = TraceContext::current();
  if (ctx) {
    if (impl->is_traced() && impl->ctx != ctx)
      EMBER_THROW(Value, "[", op, "] a traced tensor from another compiled call was used here");
    if (impl->is_traced() || impl->ctx == ctx || ctx->is_arg(*impl)) {
      // Say which value was needed: the op that computes it, or an input of the function.
      std::string source = impl->is_traced() ? "the result of '" + std::string(impl->node->info().name) + "'"
                           : ctx->is_arg(*impl) ? std::string("an input of the compiled function")
                                                : std::string("a value computed before an earlier break");
      ctx->graph_break(std::string(category), std::string(reason) + ", on " + source, std::string(op),
                       std::string(file), line, std::string(hint));
    }
  } else if (impl->is_traced()) {
    EMBER_THROW(Value, "[", op, "] the tensor comes from a trace that has ended");
  }
  EMBER_CHECK(impl->value.defined(), "a value is still not concrete after a graph break");
  return impl->value;
}

const char* kItemHint = "keep the value as a tensor (e.g. use ember::where instead of branching on it), or move the read out of the compiled function";

}  // namespace

SymInt::operator int64_t() const {
  if (is_symbolic())
    if (TraceContext* ctx = TraceContext::current()) ctx->specialise(dim_, hint_);
  return hint_;
}

SymInt operator/(const SymInt& a, const SymInt& b) {
  if (b.hint() == 0) EMBER_THROW(Value, "[size] division of a size by zero");
  try {
    if (a.is_symbolic() || b.is_symbolic()) return SymInt(a.dim().exact_div(b.dim()), a.hint() / b.hint());
  } catch (const SymbolicShapeError&) {
  }
  int64_t x = a, y = b;  // specialises both
  return SymInt(x / y);
}

Tensor::Tensor(Array value) : impl_(std::make_shared<TensorImpl>()) {
  impl_->type = {value.dtype(), to_shape(value.shape())};
  impl_->value = std::move(value);
}

bool Tensor::is_traced() const { return impl_ && impl_->is_traced(); }

DType Tensor::dtype() const {
  if (!impl_) EMBER_THROW(Value, "[dtype] undefined tensor");
  return impl_->type.dtype;
}

int64_t Tensor::dim() const {
  if (!impl_) EMBER_THROW(Value, "[dim] undefined tensor");
  return static_cast<int64_t>(impl_->type.shape.size());
}

SymShape Tensor::sizes() const {
  if (!impl_) EMBER_THROW(Value, "[sizes] undefined tensor");
  SymShape out;
  TraceContext* ctx = TraceContext::current();
  if (!ctx) {
    if (!impl_->value.defined()) EMBER_THROW(Value, "[sizes] the tensor comes from a trace that failed");
    for (int64_t d : impl_->value.shape()) out.emplace_back(d);
    return out;
  }
  TensorType t = ctx->type_of(*impl_);
  for (const Dim& d : t.shape) out.emplace_back(d, d.evaluate(ctx->symbol_values()));
  return out;
}

SymInt Tensor::size(int64_t axis) const {
  SymShape s = sizes();
  int64_t a = normalize_axis("size", axis, static_cast<int64_t>(s.size()));
  if (s.empty()) EMBER_THROW(Value, "[size] a 0-d tensor has no dims");
  return s[a];
}

std::vector<int64_t> Tensor::shape() const {
  std::vector<int64_t> out;
  for (const SymInt& s : sizes()) out.push_back(s);
  return out;
}

SymInt Tensor::numel() const {
  SymInt n(1);
  for (const SymInt& s : sizes()) n = n * s;
  return n;
}

double Tensor::item_double(std::source_location loc) const {
  const Array& a = materialise(impl_.get(), "item", "item() needs a concrete value", "item",
                               loc.file_name(), static_cast<int>(loc.line()), kItemHint);
  if (a.numel() != 1) EMBER_THROW(Value, "[item] the tensor must have one element, it has ", a.numel());
  double v = a.get(0);
  if (TraceContext* ctx = TraceContext::current()) ctx->note_read_value(v);
  return v;
}

int64_t Tensor::item_int(std::source_location loc) const {
  const Array& a = materialise(impl_.get(), "item", "item() needs a concrete value", "item",
                               loc.file_name(), static_cast<int>(loc.line()), kItemHint);
  if (a.numel() != 1) EMBER_THROW(Value, "[item] the tensor must have one element, it has ", a.numel());
  int64_t v = a.get_int(0);
  if (TraceContext* ctx = TraceContext::current()) ctx->note_read_value(static_cast<double>(v));
  return v;
}

bool Tensor::to_bool(std::source_location loc) const {
  const Array& a = materialise(impl_.get(), "bool", "data-dependent control flow: a tensor was converted to bool", "to_bool",
                               loc.file_name(), static_cast<int>(loc.line()),
                               "compute both branches and select with ember::where, or move the branch out of the compiled function");
  if (a.numel() != 1) EMBER_THROW(Value, "[to_bool] the truth value of a tensor with ", a.numel(), " elements is ambiguous");
  return a.get(0) != 0;
}

Tensor::operator bool() const {
  // Finding the caller's line runs addr2line: only worth it when a trace may record a break.
  auto [file, line] = TraceContext::current() ? caller_location(__builtin_return_address(0))
                                              : std::pair<std::string, int>{"", 0};
  const Array& a = materialise(impl_.get(), "bool", "data-dependent control flow: a tensor was converted to bool", "bool",
                               file, line,
                               "compute both branches and select with ember::where, or move the branch out of the compiled function");
  if (a.numel() != 1) EMBER_THROW(Value, "[bool] the truth value of a tensor with ", a.numel(), " elements is ambiguous");
  return a.get(0) != 0;
}

std::vector<double> Tensor::to_vector(std::source_location loc) const {
  const Array& a = materialise(impl_.get(), "data", "reading a tensor's elements", "to_vector", loc.file_name(),
                               static_cast<int>(loc.line()), "return the tensor from the compiled function and read it outside");
  std::vector<double> out;
  for (int64_t i = 0, n = a.numel(); i < n; ++i) out.push_back(a.get(i));
  return out;
}

std::string Tensor::str(std::source_location loc) const {
  const Array& a = materialise(impl_.get(), "print", "printing a tensor's values", "print", loc.file_name(),
                               static_cast<int>(loc.line()), "print outside the compiled function, or print only its shape");
  return a.str(64);
}

const Array& Tensor::array(std::source_location loc) const {
  return materialise(impl_.get(), "data", "reading a tensor's storage", "array", loc.file_name(),
                     static_cast<int>(loc.line()), "return the tensor from the compiled function and read it outside");
}

std::ostream& operator<<(std::ostream& out, const Tensor& t) {
  if (!t.defined()) return out << "Tensor(undefined)";
  // Finding the caller's line runs addr2line: only worth it when a trace may record a break.
  auto [file, line] = TraceContext::current() ? caller_location(__builtin_return_address(0))
                                              : std::pair<std::string, int>{"", 0};
  const Array& a = materialise(t.impl().get(), "print", "printing a tensor's values", "print", file, line,
                               "print outside the compiled function, or print only its shape");
  return out << a.str(64);
}

Tensor Tensor::to(DType dtype) const { return cast(*this, dtype); }
Tensor Tensor::reshape(SymShape shape) const { return ember::reshape(*this, std::move(shape)); }
Tensor Tensor::permute(std::vector<int64_t> dims) const { return ember::permute(*this, std::move(dims)); }
Tensor Tensor::transpose(int64_t a, int64_t b) const { return ember::transpose(*this, a, b); }
Tensor Tensor::unsqueeze(int64_t axis) const { return ember::unsqueeze(*this, axis); }
Tensor Tensor::flatten(int64_t start, int64_t end) const { return ember::flatten(*this, start, end); }
Tensor Tensor::matmul(const Tensor& other) const { return ember::matmul(*this, other); }
Tensor Tensor::sum(std::vector<int64_t> axes, bool keepdim) const { return ember::sum(*this, std::move(axes), keepdim); }
Tensor Tensor::mean(std::vector<int64_t> axes, bool keepdim) const { return ember::mean(*this, std::move(axes), keepdim); }
Tensor Tensor::max(std::vector<int64_t> axes, bool keepdim) const { return ember::max(*this, std::move(axes), keepdim); }
Tensor Tensor::exp() const { return ember::exp(*this); }
Tensor Tensor::relu() const { return ember::relu(*this); }

}  // namespace ember

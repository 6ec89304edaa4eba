// Errors. A user error (bad input, unsupported option, shape mismatch) is an ember::Error whose
// message starts with the op in brackets: "[matmul] inner dimensions differ: [8, 3] @ [4, 5]".
// An internal error (EMBER_CHECK failed) is a bug in ember and says so.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace ember {

// The Python binding maps each kind to the matching exception.
// Index: an index tensor's value out of range, found at run time (PyTorch raises IndexError or
// RuntimeError for it, by op; the Python binding raises an exception that is both).
// OutOfMemory: an allocation the machine cannot give, or whose byte count does not even fit in
// the address space (PyTorch raises RuntimeError; the Python binding raises an exception that is
// both a RuntimeError and a MemoryError).
// DeviceUnavailable: a device was asked for and this machine cannot give it (no driver, no
// device; runtime/cuda_driver.h): ember.DeviceUnavailableError in Python, a RuntimeError.
enum class ErrorKind { Value, Type, Runtime, NotImplemented, Internal, Index, OutOfMemory, DeviceUnavailable };

// "Value", "Type", ...: the kind's name as the C++ enumerator spells it.
const char* error_kind_name(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  explicit Error(const std::string& message) : Error(ErrorKind::Value, message) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

// Raised by shape inference when a symbolic dim cannot be carried through an op (for example a
// non-exact division). The tracer catches it and specialises the trace to static shapes. It is
// internal control flow, not a user error: it does not derive from ember::Error, so a user's
// `catch (const ember::Error&)` around a compiled call never sees it.
class SymbolicShapeError : public std::runtime_error {
 public:
  explicit SymbolicShapeError(const std::string& message, std::vector<int> symbols = {})
      : std::runtime_error(message), symbols_(std::move(symbols)) {}
  // The symbols involved; specialising them to their values lets the trace go on.
  const std::vector<int>& symbols() const { return symbols_; }

 private:
  std::vector<int> symbols_;
};

namespace detail {
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}
[[noreturn]] void internal_error(const char* file, int line, const char* cond, const std::string& msg);
}  // namespace detail

// Builds the message from streamable pieces: EMBER_THROW(Value, "[add] ", a, " vs ", b).
#define EMBER_THROW(kind, ...) \
  throw ::ember::Error(::ember::ErrorKind::kind, ::ember::detail::concat(__VA_ARGS__))

#define EMBER_CHECK(cond, ...)                                                   \
  do {                                                                           \
    if (!(cond))                                                                 \
      ::ember::detail::internal_error(__FILE__, __LINE__, #cond,                 \
                                      ::ember::detail::concat("" __VA_ARGS__));  \
  } while (0)

}  // namespace ember

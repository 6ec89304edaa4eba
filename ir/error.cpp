#include "ir/error.h"

namespace ember {

const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Value: return "Value";
    case ErrorKind::Type: return "Type";
    case ErrorKind::Runtime: return "Runtime";
    case ErrorKind::NotImplemented: return "NotImplemented";
    case ErrorKind::Internal: return "Internal";
    case ErrorKind::Index: return "Index";
    case ErrorKind::OutOfMemory: return "OutOfMemory";
    case ErrorKind::DeviceUnavailable: return "DeviceUnavailable";
  }
  return "?";
}

}  // namespace ember

namespace ember::detail {

void internal_error(const char* file, int line, const char* cond, const std::string& msg) {
  throw Error(ErrorKind::Internal,
              concat("internal error (a bug in ember, please report it): ", file, ":", line,
                     ": check '", cond, "' failed", msg.empty() ? "" : ": ", msg));
}

}  // namespace ember::detail

#include "ir/error.h"

namespace ember::detail {

void internal_error(const char* file, int line, const char* cond, const std::string& msg) {
  throw Error(ErrorKind::Internal,
              concat("internal error (a bug in ember, please report it): ", file, ":", line,
                     ": check '", cond, "' failed", msg.empty() ? "" : ": ", msg));
}

}  // namespace ember::detail

#include "runtime/step_settings.h"

#include <sstream>

#include "ir/error.h"
#include "runtime/thread_pool.h"

namespace ember {

namespace {

thread_local StepSettings current;

const char* route_name(GemmRoute r) {
  switch (r) {
    case GemmRoute::Auto: return "auto";
    case GemmRoute::OneDnn: return "onednn";
    case GemmRoute::Blas: return "blas";
  }
  return "?";
}

}  // namespace

std::string StepSettings::str() const {
  std::string s;
  if (threads) s = "threads=" + std::to_string(threads);
  if (gemm != GemmRoute::Auto) s += (s.empty() ? "" : " ") + std::string("gemm=") + route_name(gemm);
  return s.empty() ? "default" : s;
}

StepSettings StepSettings::parse(std::string_view text) {
  StepSettings s;
  if (text == "default") return s;
  std::istringstream in{std::string(text)};
  for (std::string field; in >> field;) {
    size_t eq = field.find('=');
    std::string name = field.substr(0, eq), value = eq == std::string::npos ? "" : field.substr(eq + 1);
    if (name == "threads") {
      try {
        s.threads = std::stoi(value);
      } catch (const std::exception&) {
        s.threads = 0;
      }
      if (s.threads <= 0) EMBER_THROW(Value, "[step settings] threads must be a positive integer, got '", value, "'");
    } else if (name == "gemm" && (value == "auto" || value == "onednn" || value == "blas")) {
      s.gemm = value == "onednn" ? GemmRoute::OneDnn : value == "blas" ? GemmRoute::Blas : GemmRoute::Auto;
    } else {
      EMBER_THROW(Value, "[step settings] unknown setting '", field, "'");
    }
  }
  return s;
}

ScopedStepSettings::ScopedStepSettings(const StepSettings& settings)
    : previous_(current), previous_limit_(set_thread_limit(settings.threads)) {
  current = settings;
}
ScopedStepSettings::~ScopedStepSettings() {
  current = previous_;
  set_thread_limit(previous_limit_);
}

GemmRoute current_gemm_route() { return current.gemm; }

}  // namespace ember

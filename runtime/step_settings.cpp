#include "runtime/step_settings.h"

#include <sstream>

#include "ir/error.h"
#include "runtime/thread_pool.h"

namespace ember {

namespace {

thread_local StepSettings current;

}  // namespace

std::string StepSettings::str() const {
  std::string s;
  if (threads) s = "threads=" + std::to_string(threads);
  auto add = [&s](const std::string& field) { s += (s.empty() ? "" : " ") + field; };
  if (gemm != GemmRoute::Auto) add(std::string("gemm=") + route_name(gemm));
  if (conv != ConvAlgorithm::Auto) add(std::string("conv=") + conv_name(conv));
  if (query_block) add("query_block=" + std::to_string(query_block));
  if (key_block) add("key_block=" + std::to_string(key_block));
  return s.empty() ? "default" : s;
}

std::vector<std::pair<std::string, std::string>> choice_fields(std::string_view text, std::string_view what) {
  std::vector<std::pair<std::string, std::string>> fields;
  if (text == "default") return fields;
  std::istringstream in{std::string(text)};
  for (std::string field; in >> field;) {
    size_t eq = field.find('=');
    if (eq == std::string::npos) EMBER_THROW(Value, "[", what, "] '", field, "' is not name=value");
    fields.emplace_back(field.substr(0, eq), field.substr(eq + 1));
  }
  return fields;
}

int64_t positive_field(const std::string& name, const std::string& value, std::string_view what) {
  int64_t n = 0;
  try {
    size_t used = 0;
    n = std::stoll(value, &used);
    if (used != value.size()) n = 0;
  } catch (const std::exception&) {
    n = 0;
  }
  if (n <= 0) EMBER_THROW(Value, "[", what, "] ", name, " must be a positive integer, got '", value, "'");
  return n;
}

namespace {

// The route named `name` into `route`; false for no route of that name.
bool parse_route(const std::string& name, GemmRoute& route) {
  for (GemmRoute r : {GemmRoute::Auto, GemmRoute::OneDnn, GemmRoute::Blas, GemmRoute::Mkl, GemmRoute::Generated})
    if (name == route_name(r)) {
      route = r;
      return true;
    }
  return false;
}

// The algorithm named `name` into `algorithm`; false for none of that name.
bool parse_conv(const std::string& name, ConvAlgorithm& algorithm) {
  for (ConvAlgorithm a : {ConvAlgorithm::Auto, ConvAlgorithm::Brgemm, ConvAlgorithm::Im2col})
    if (name == conv_name(a)) {
      algorithm = a;
      return true;
    }
  return false;
}

}  // namespace

StepSettings StepSettings::parse(std::string_view text) {
  StepSettings s;
  for (const auto& [name, value] : choice_fields(text, "step settings")) {
    if (name == "threads") s.threads = static_cast<int>(positive_field(name, value, "step settings"));
    else if (name == "gemm" && parse_route(value, s.gemm)) continue;
    else if (name == "conv" && parse_conv(value, s.conv)) continue;
    else if (name == "query_block") s.query_block = static_cast<int>(positive_field(name, value, "step settings"));
    else if (name == "key_block") s.key_block = static_cast<int>(positive_field(name, value, "step settings"));
    else EMBER_THROW(Value, "[step settings] unknown setting '", name, "=", value, "'");
  }
  return s;
}

bool StepSettings::is_field(std::string_view name) {
  return name == "threads" || name == "gemm" || name == "conv" || name == "query_block" || name == "key_block";
}

ScopedStepSettings::ScopedStepSettings(const StepSettings& settings)
    : previous_(current), previous_limit_(set_thread_limit(settings.threads)) {
  current = settings;
}
ScopedStepSettings::~ScopedStepSettings() {
  current = previous_;
  set_thread_limit(previous_limit_);
}

const StepSettings& current_step_settings() { return current; }

const char* route_name(GemmRoute r) {
  switch (r) {
    case GemmRoute::Auto: return "auto";
    case GemmRoute::OneDnn: return "onednn";
    case GemmRoute::Blas: return "blas";
    case GemmRoute::Mkl: return "mkl";
    case GemmRoute::Generated: return "generated";
  }
  return "?";
}

const char* conv_name(ConvAlgorithm a) {
  switch (a) {
    case ConvAlgorithm::Auto: return "auto";
    case ConvAlgorithm::Brgemm: return "brgemm";
    case ConvAlgorithm::Im2col: return "im2col";
  }
  return "?";
}

}  // namespace ember

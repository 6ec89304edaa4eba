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
  if (!tile.is_default()) add("tile=" + tile.str());
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

// "12x32" into `tile`; false for text of another form or a tile that cannot be generated.
bool parse_tile(const std::string& text, GemmTile& tile) {
  size_t x = text.find('x');
  if (x == std::string::npos || x == 0 || x + 1 == text.size() || x > 2 || text.size() - x - 1 > 3 ||
      text.find_first_not_of("0123456789x") != std::string::npos || text.find('x', x + 1) != std::string::npos)
    return false;
  tile = {std::stoi(text.substr(0, x)), std::stoi(text.substr(x + 1))};
  return tile.valid();
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
    else if (name == "tile") {
      if (!parse_tile(value, s.tile))
        EMBER_THROW(Value, "[step settings] tile=", value, " is not rows x columns of a tile ember's GEMM can ",
                    "generate (columns a multiple of 16, 2 to 32 accumulators of 16)");
    }
    else if (name == "query_block") s.query_block = static_cast<int>(positive_field(name, value, "step settings"));
    else if (name == "key_block") s.key_block = static_cast<int>(positive_field(name, value, "step settings"));
    else EMBER_THROW(Value, "[step settings] unknown setting '", name, "=", value, "'");
  }
  return s;
}

bool StepSettings::is_field(std::string_view name) {
  return name == "threads" || name == "gemm" || name == "tile" || name == "conv" || name == "query_block" ||
         name == "key_block";
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

bool GemmTile::valid() const {
  const int accumulators = rows * (cols / 16);
  return rows >= 1 && cols >= 16 && cols % 16 == 0 && accumulators >= 2 && accumulators <= 32;
}

std::string GemmTile::str() const { return std::to_string(rows) + "x" + std::to_string(cols); }

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

// compile() options: parsing from text pairs and validation.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "codegen/search.h"
#include "frontend/compile.h"
#include "ir/error.h"
#include "modes/mode.h"

namespace ember {

namespace {

// A number of type T from the whole of `v` (std::stoi or std::stod), or a Value error naming the option.
template <class T>
T parse_number(const std::string& key, const std::string& v, T (*convert)(const std::string&, size_t*),
               const char* what) {
  try {
    size_t used = 0;
    T out = convert(v, &used);
    if (used != v.size()) throw std::invalid_argument(v);
    return out;
  } catch (const std::exception&) {
    EMBER_THROW(Value, "[compile] option '", key, "' must be ", what, ", got '", v, "'");
  }
}

int parse_int(const std::string& key, const std::string& v) {
  return parse_number<int>(key, v, [](const std::string& s, size_t* used) { return std::stoi(s, used); }, "an integer");
}

double parse_double(const std::string& key, const std::string& v) {
  return parse_number<double>(key, v, [](const std::string& s, size_t* used) { return std::stod(s, used); }, "a number");
}

bool parse_bool(const std::string& key, const std::string& v) {
  if (v == "true" || v == "1") return true;
  if (v == "false" || v == "0") return false;
  EMBER_THROW(Value, "[compile] option '", key, "' must be true or false", key == "dynamic" ? " (or none)" : "",
              ", got '", v, "'");
}

}  // namespace

Options Options::from_map(const std::map<std::string, std::string>& values) {
  Options o;
  for (const auto& [key, v] : values) {
    if (key == "mode") o.mode = v;
    else if (key == "fullgraph") o.fullgraph = parse_bool(key, v);
    else if (key == "dynamic") o.dynamic = v == "none" || v.empty() ? std::nullopt : std::optional(parse_bool(key, v));
    else if (key == "strict") o.strict = parse_bool(key, v);
    else if (key == "recompile_limit") o.recompile_limit = parse_int(key, v);
    else if (key == "segment_cache_limit") o.segment_cache_limit = parse_int(key, v);
    else if (key == "autotune_budget_s") o.autotune_budget_s = parse_double(key, v);
    else if (key == "autotune_search") o.autotune_search = v;
    else if (key == "static_plan_mb") o.static_plan_mb = parse_double(key, v);
    else
      EMBER_THROW(Value, "[compile] unknown option '", key,
                  "' (valid: mode, fullgraph, dynamic, recompile_limit, segment_cache_limit, strict, "
                  "autotune_budget_s, autotune_search, static_plan_mb)");
  }
  o.validate();
  return o;
}

void Options::validate() const {
  mode_config(mode);  // throws for an unknown mode, listing the valid ones
  if (recompile_limit < 0) EMBER_THROW(Value, "[compile] recompile_limit must be >= 0, got ", recompile_limit);
  if (segment_cache_limit < 1)
    EMBER_THROW(Value, "[compile] segment_cache_limit must be >= 1, got ", segment_cache_limit);
  if (autotune_budget_s && !(*autotune_budget_s >= 0 && std::isfinite(*autotune_budget_s)))
    EMBER_THROW(Value, "[compile] autotune_budget_s must be a number of seconds >= 0, got ", *autotune_budget_s);
  if (static_plan_mb && !(*static_plan_mb >= 0 && *static_plan_mb < 1e12))
    EMBER_THROW(Value, "[compile] static_plan_mb must be a number of MiB >= 0, got ", *static_plan_mb);
  if (!autotune_search.empty()) {
    std::vector<std::string> names = codegen::search_names();
    if (std::find(names.begin(), names.end(), autotune_search) == names.end())
      EMBER_THROW(Value, "[compile] unknown autotune_search '", autotune_search,
                  "' (valid: auto, exhaustive, random, bayes)");
  }
}

}  // namespace ember

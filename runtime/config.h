// Every EMBER_* environment setting, in one table. Values are read from the environment at each
// use, so a test may change them between calls.
//
//   EMBER_LOG=graph_breaks,recompiles,guards,passes,compile   what to print to stderr as it happens
//   EMBER_DUMP_AFTER=<pass>|all   print the IR after that pass, or "(unchanged)"
//   EMBER_DUMP_DIR=<dir>          where dumps go (stderr when unset)
//   EMBER_DISABLE_PASSES=a,b      passes to skip
//   EMBER_EXTRA_PASSES=a,b        passes to run after a pipeline's own (decompose,dce)
//   EMBER_VERIFY=0|1              run the verifier between passes (default: on in debug builds)
//   EMBER_CACHE_DIR=<dir>         the on-disk cache (default ~/.cache/ember)
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ember::config {

struct Setting {
  const char* name;
  const char* doc;
};
const std::vector<Setting>& settings();

// The raw value, or "" when unset. Unknown EMBER_* variables in the environment are reported once.
std::string get(const char* name);
// Comma-separated list membership: EMBER_LOG=graph_breaks,guards -> log_enabled("guards").
bool log_enabled(std::string_view topic);
bool pass_disabled(std::string_view pass);
// The passes EMBER_EXTRA_PASSES names, in order (empty when unset).
std::vector<std::string> extra_passes();
bool dump_after(std::string_view pass);
bool verify_enabled();
// Writes "[ember:topic] message" to stderr (thread-safe).
void log(const std::string& topic, const std::string& message);
// A warning on stderr, always shown.
void warn(const std::string& message);
// Writes `text` to EMBER_DUMP_DIR/<name> or, when unset, to stderr.
void dump(const std::string& name, const std::string& text);

}  // namespace ember::config

// ember-tuning: lists or clears max-autotune's tuning database (runtime/tuning_db.h).
//   ember-tuning list     each entry: its machine, the step's signature and the choice
//   ember-tuning clear    removes every entry
// The database is the one under EMBER_CACHE_DIR (default ~/.cache/ember), as the library uses.
#include <cstdio>
#include <cstring>
#include <string>

#include "runtime/disk_cache.h"
#include "runtime/tuning_db.h"

namespace {

int usage() {
  std::fprintf(stderr, "usage: ember-tuning list | clear\n");
  return 2;
}

// What the step is (a library call's op, or a kernel's first lines), its sizes and its machine.
std::string summary(const std::string& signature) {
  auto line_after = [&](const std::string& head) {
    size_t at = signature.find(head);
    if (at == std::string::npos) return std::string();
    at += head.size();
    return signature.substr(at, signature.find('\n', at) - at);
  };
  std::string what = signature.substr(0, signature.find('\n'));
  if (what == "kernel") what = line_after("kernel\n");
  return what + "\n    inputs" + line_after("\ninputs") + " [" + line_after("\nmachine ") + "]";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return usage();
  std::string dir = ember::disk_cache::directory();
  if (std::strcmp(argv[1], "list") == 0) {
    auto entries = ember::tuning_db::list();
    std::printf("%zu entries in %s/tuning\n", entries.size(), dir.empty() ? "(cache off)" : dir.c_str());
    for (const auto& e : entries) std::printf("%s  %s\n  -> %s\n", e.key.substr(0, 12).c_str(), summary(e.signature).c_str(), e.choice.c_str());
    return 0;
  }
  if (std::strcmp(argv[1], "clear") == 0) {
    std::printf("removed %d entries from %s/tuning\n", ember::tuning_db::clear(), dir.c_str());
    return 0;
  }
  return usage();
}

#include "runtime/tuning_db.h"

#include <fstream>
#include <sstream>

#include "ir/sha256.h"
#include "runtime/disk_cache.h"

namespace ember::tuning_db {

namespace {

constexpr const char* kKind = "tuning";
constexpr const char* kSeparator = "\n--- choice\n";

std::string cpuinfo_field(const std::string& field) {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind(field, 0) == 0 && line.find(':') != std::string::npos) return line.substr(line.find(':') + 2);
  return "unknown";
}

std::string full_signature(const std::string& signature) { return signature + "\nmachine " + machine(); }

std::optional<Entry> parse(const std::string& key, const std::string& payload) {
  size_t at = payload.find(kSeparator);
  if (at == std::string::npos) return std::nullopt;
  return Entry{key, payload.substr(0, at), payload.substr(at + std::string(kSeparator).size())};
}

}  // namespace

std::string machine() {
  static const std::string id = [] {
    std::string flags = cpuinfo_field("flags");
    return cpuinfo_field("model name") + " (features " + sha256_hex(flags).substr(0, 16) + ")";
  }();
  return id;
}

std::optional<std::string> load(const std::string& signature) {
  std::string full = full_signature(signature);
  std::string key = sha256_hex(full);
  std::optional<std::string> payload = disk_cache::load(kKind, key);
  if (!payload) return std::nullopt;
  std::optional<Entry> e = parse(key, *payload);
  if (!e || e->signature != full) return std::nullopt;  // a collision, or a foreign entry
  return e->choice;
}

void store(const std::string& signature, const std::string& choice) {
  std::string full = full_signature(signature);
  disk_cache::store(kKind, sha256_hex(full), full + kSeparator + choice);
}

std::vector<Entry> list() {
  std::vector<Entry> out;
  for (const std::string& key : disk_cache::keys(kKind))
    if (std::optional<std::string> payload = disk_cache::load(kKind, key))
      if (std::optional<Entry> e = parse(key, *payload)) out.push_back(*e);
  return out;
}

int clear() { return disk_cache::remove_all(kKind); }

}  // namespace ember::tuning_db

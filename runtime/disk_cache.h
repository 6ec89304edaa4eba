// The on-disk cache: blobs (kernels' object code today; tuning results later) by key, under
// EMBER_CACHE_DIR (default ~/.cache/ember), shared by every process of this user.
//
// [Note: the disk cache]
// An entry is <dir>/<kind>/<key>: a header (magic, format version, key, payload length, the
// payload's SHA-256) and the payload. Directories are 0700 and files 0600, owned by this user;
// writes go to a temporary file that is renamed over the entry, so a reader sees a whole entry
// or none, and 8 processes writing the same key at once leave one whole entry. Anything that
// does not read back exactly (missing, truncated, bit-flipped, another key, a symlink, owned by
// someone else, a directory we cannot trust) is a miss, logged under EMBER_LOG=cache, never a
// crash and never a wrong payload. The cache keeps under EMBER_CACHE_MAX_MB (default 1024) by
// removing the least recently written entries when it stores one. EMBER_CACHE_DIR=off (or an
// unusable directory) turns it off.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ember::disk_cache {

// The payload stored under `key` (a hex digest) in `kind` ("kernels"), or nothing.
std::optional<std::string> load(const std::string& kind, const std::string& key);
// Stores it (best effort: a failure is logged, the caller carries on).
void store(const std::string& kind, const std::string& key, const std::string& payload);

// The keys of the entries of `kind` (whole or not: load tells), sorted.
std::vector<std::string> keys(const std::string& kind);
// Removes every entry of `kind`; returns how many.
int remove_all(const std::string& kind);

// Counters since the process started, for tests and the report.
struct Stats {
  int64_t hits = 0, misses = 0, rejected = 0, stores = 0, evictions = 0;
};
Stats stats();

// The cache directory in use ("" when off).
std::string directory();

}  // namespace ember::disk_cache

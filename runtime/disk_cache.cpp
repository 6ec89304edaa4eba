#include "runtime/disk_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <mutex>
#include <random>
#include <vector>

#include "ir/sha256.h"
#include "runtime/config.h"

namespace ember::disk_cache {

namespace {

constexpr char kMagic[8] = {'E', 'M', 'B', 'E', 'R', 'C', 'C', '1'};
constexpr uint32_t kFormat = 1;

std::atomic<int64_t> hits{0}, misses{0}, rejected{0}, stores{0}, evictions{0};

void log(const std::string& message) {
  if (config::log_enabled("cache")) config::log("cache", message);
}

// A directory that exists (made 0700 if not), is not a symlink, and is ours.
bool trusted_directory(const std::string& path) {
  if (mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) return false;
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return false;
  return S_ISDIR(st.st_mode) && st.st_uid == geteuid() && (st.st_mode & 0022) == 0;
}

bool make_parents(const std::string& path) {
  for (size_t at = path.find('/', 1); at != std::string::npos; at = path.find('/', at + 1))
    if (mkdir(path.substr(0, at).c_str(), 0700) != 0 && errno != EEXIST) return false;
  return true;
}

std::string root() {
  std::string dir = config::get("EMBER_CACHE_DIR");
  if (dir == "off") return "";
  if (dir.empty()) {
    const char* home = std::getenv("HOME");
    if (!home || !*home) return "";
    dir = std::string(home) + "/.cache/ember";
  }
  return dir;
}

// The kind's directory, trusted, or "" (the cache is off for this call).
std::string kind_directory(const std::string& kind) {
  std::string dir = root();
  if (dir.empty()) return "";
  if (!make_parents(dir + "/") || !trusted_directory(dir) || !trusted_directory(dir + "/" + kind)) {
    log("cache directory " + dir + " is not usable (missing, a symlink, or not ours): off");
    return "";
  }
  return dir + "/" + kind;
}

bool valid_key(const std::string& key) {
  return !key.empty() && key.size() <= 128 &&
         std::all_of(key.begin(), key.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
}

std::string header(const std::string& key, const std::string& payload) {
  std::string h(kMagic, sizeof kMagic);
  h.append(reinterpret_cast<const char*>(&kFormat), sizeof kFormat);
  uint32_t key_size = static_cast<uint32_t>(key.size());
  h.append(reinterpret_cast<const char*>(&key_size), sizeof key_size);
  h += key;
  uint64_t length = payload.size();
  h.append(reinterpret_cast<const char*>(&length), sizeof length);
  auto digest = sha256(payload);
  h.append(reinterpret_cast<const char*>(digest.data()), digest.size());
  return h;
}

// Reads a regular file of ours without following a symlink; nothing on any doubt.
std::optional<std::string> read_entry(const std::string& path, std::string& why) {
  int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    why = errno == ELOOP ? "a symlink" : "missing";
    return std::nullopt;
  }
  struct stat st;
  std::optional<std::string> data;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) why = "not a regular file";
  else if (st.st_uid != geteuid()) why = "owned by another user";
  else if (st.st_size > (int64_t{1} << 30)) why = "too large";
  else {
    std::string buf(static_cast<size_t>(st.st_size), '\0');
    size_t got = 0;
    while (got < buf.size()) {
      ssize_t n = read(fd, buf.data() + got, buf.size() - got);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    if (got == buf.size()) data = std::move(buf);
    else why = "unreadable";
  }
  close(fd);
  return data;
}

// The payload if `data` is a whole, intact entry for `key`.
std::optional<std::string> parse_entry(const std::string& data, const std::string& key, std::string& why) {
  std::string expected_prefix = header(key, "");  // magic, format, key: the part without the payload
  size_t fixed = sizeof kMagic + sizeof kFormat + sizeof(uint32_t) + key.size();
  size_t head = fixed + sizeof(uint64_t) + 32;
  if (data.size() < head || data.compare(0, fixed, expected_prefix, 0, fixed) != 0) {
    why = "a bad header (another key, format or not an entry)";
    return std::nullopt;
  }
  uint64_t length;
  std::memcpy(&length, data.data() + fixed, sizeof length);
  if (data.size() - head != length) {
    why = "truncated or padded";
    return std::nullopt;
  }
  std::string payload = data.substr(head);
  auto digest = sha256(payload);
  if (std::memcmp(digest.data(), data.data() + fixed + sizeof length, digest.size()) != 0) {
    why = "a checksum mismatch";
    return std::nullopt;
  }
  return payload;
}

// Removes the oldest entries while the kind's directory is over the limit.
void evict(const std::string& dir) {
  int64_t limit_mb = 1024;
  std::string v = config::get("EMBER_CACHE_MAX_MB");
  if (!v.empty()) limit_mb = std::max<int64_t>(0, std::atoll(v.c_str()));
  struct Entry {
    std::string path;
    int64_t size;
    int64_t mtime;
  };
  std::vector<Entry> entries;
  int64_t total = 0;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      std::string path = dir + "/" + e->d_name;
      struct stat st;
      if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      entries.push_back({path, st.st_size, st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec});
      total += st.st_size;
    }
    closedir(d);
  }
  if (total <= limit_mb * 1024 * 1024) return;
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.mtime < b.mtime; });
  for (const Entry& e : entries) {
    if (total <= limit_mb * 1024 * 1024) break;
    if (unlink(e.path.c_str()) == 0) {
      total -= e.size;
      ++evictions;
      log("evicted " + e.path);
    }
  }
}

}  // namespace

std::optional<std::string> load(const std::string& kind, const std::string& key) {
  std::string dir = kind_directory(kind);
  if (dir.empty() || !valid_key(key)) return std::nullopt;
  std::string path = dir + "/" + key, why;
  std::optional<std::string> data = read_entry(path, why);
  std::optional<std::string> payload;
  if (data) payload = parse_entry(*data, key, why);
  if (payload) {
    ++hits;
    return payload;
  }
  if (why == "missing") {
    ++misses;
  } else {
    ++rejected;
    log("entry " + path + " is " + why + ": a miss");
  }
  return std::nullopt;
}

void store(const std::string& kind, const std::string& key, const std::string& payload) {
  std::string dir = kind_directory(kind);
  if (dir.empty() || !valid_key(key)) return;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::string tmp = dir + "/." + key + ".tmp." + std::to_string(getpid()) + "." + std::to_string(std::random_device{}());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    log("cannot write " + tmp + ": " + std::strerror(errno));
    return;
  }
  std::string data = header(key, payload) + payload;
  size_t put = 0;
  while (put < data.size()) {
    ssize_t n = write(fd, data.data() + put, data.size() - put);
    if (n <= 0) break;
    put += static_cast<size_t>(n);
  }
  bool ok = put == data.size();
  ok = close(fd) == 0 && ok;
  if (!ok || rename(tmp.c_str(), (dir + "/" + key).c_str()) != 0) {
    unlink(tmp.c_str());
    log("cannot store " + key + ": " + std::strerror(errno));
    return;
  }
  ++stores;
  evict(dir);
}

std::vector<std::string> keys(const std::string& kind) {
  std::vector<std::string> out;
  std::string dir = kind_directory(kind);
  if (dir.empty()) return out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (valid_key(e->d_name)) out.emplace_back(e->d_name);
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

int remove_all(const std::string& kind) {
  std::string dir = kind_directory(kind);
  int removed = 0;
  for (const std::string& key : keys(kind)) removed += unlink((dir + "/" + key).c_str()) == 0;
  return removed;
}

Stats stats() { return {hits.load(), misses.load(), rejected.load(), stores.load(), evictions.load()}; }

std::string directory() { return root(); }

}  // namespace ember::disk_cache

// The on-disk cache ([Note: the disk cache]): round trips, every kind of bad entry is a logged
// miss, the size limit, a warm start in a second process, and 8 processes at once.
#include <ember/ember.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "runtime/disk_cache.h"
#include "tests/catch.h"
#include "tests/unit/helpers.h"

using namespace ember;
namespace fs = std::filesystem;

namespace {

// A fresh cache directory for one test, removed after it.
struct TempCache {
  std::string dir;
  test::ScopedEnv env;
  explicit TempCache(const std::string& name)
      : dir("/tmp/ember-cache-test-" + name + "-" + std::to_string(getpid())), env("EMBER_CACHE_DIR", dir.c_str()) {
    fs::remove_all(dir);
  }
  ~TempCache() { fs::remove_all(dir); }
  std::string entry(const std::string& key) const { return dir + "/kernels/" + key; }
};

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_all(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
}

const std::string kKey = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
const std::string kOther = "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100";

// Runs this test binary again as a separate process on one hidden test, with `env` set; returns
// its exit status.
pid_t spawn_child(const std::string& test, const std::vector<std::pair<std::string, std::string>>& env) {
  pid_t pid = fork();
  if (pid == 0) {
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    execl("/proc/self/exe", "ember_unit_tests", test.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

int wait_child(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

// The program the child processes compile: one kernel, unusual enough to be only theirs.
auto child_program() {
  return compile([](const Tensor& x) { return tanh(x * 0.25 - 3.0) * exp2(x) + sqrt(x); });
}

}  // namespace

TEST_CASE("disk cache: a stored entry reads back, a missing one is a miss", "[cache]") {
  TempCache cache("roundtrip");
  auto before = disk_cache::stats();
  CHECK_FALSE(disk_cache::load("kernels", kKey));
  disk_cache::store("kernels", kKey, std::string("object\0code", 11));
  CHECK(disk_cache::load("kernels", kKey) == std::string("object\0code", 11));
  auto after = disk_cache::stats();
  CHECK(after.misses - before.misses == 1);
  CHECK(after.hits - before.hits == 1);
  CHECK(after.stores - before.stores == 1);
  struct stat st;
  REQUIRE(stat(cache.dir.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  REQUIRE(stat(cache.entry(kKey).c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK_FALSE(disk_cache::load("kernels", "../../etc/passwd"));  // not a key
}

TEST_CASE("disk cache: corrupt, truncated, foreign, symlinked entries are misses", "[cache]") {
  TempCache cache("bad");
  std::string payload(1000, 'x');
  auto stored = [&] {
    fs::remove(cache.entry(kKey));
    disk_cache::store("kernels", kKey, payload);
    return read_all(cache.entry(kKey));
  };
  auto rejected = [&] {
    auto before = disk_cache::stats().rejected;
    bool miss = !disk_cache::load("kernels", kKey);
    return miss && disk_cache::stats().rejected == before + 1;
  };
  std::string whole = stored();
  SECTION("a flipped bit in the payload") {
    whole[whole.size() - 10] ^= 0x10;
    write_all(cache.entry(kKey), whole);
    CHECK(rejected());
  }
  SECTION("a flipped bit in the header") {
    whole[3] ^= 0x01;
    write_all(cache.entry(kKey), whole);
    CHECK(rejected());
  }
  SECTION("truncated") {
    write_all(cache.entry(kKey), whole.substr(0, whole.size() - 1));
    CHECK(rejected());
    write_all(cache.entry(kKey), whole.substr(0, 20));
    CHECK(rejected());
  }
  SECTION("another key's entry under this name") {
    disk_cache::store("kernels", kOther, payload);
    fs::copy_file(cache.entry(kOther), cache.entry(kKey), fs::copy_options::overwrite_existing);
    CHECK(rejected());
  }
  SECTION("a symlink to a valid entry") {
    disk_cache::store("kernels", kOther, payload);
    fs::remove(cache.entry(kKey));
    fs::create_symlink(cache.entry(kOther), cache.entry(kKey));
    CHECK(rejected());
  }
  SECTION("owned by another user") {
    if (geteuid() == 0) {
      REQUIRE(chown(cache.entry(kKey).c_str(), 65534, 65534) == 0);
      CHECK(rejected());
    }
  }
  SECTION("garbage") {
    write_all(cache.entry(kKey), "not a cache entry at all");
    CHECK(rejected());
  }
  // After any of these, storing again repairs the entry.
  disk_cache::store("kernels", kKey, payload);
  CHECK(disk_cache::load("kernels", kKey) == payload);
}

TEST_CASE("disk cache: a directory that is not ours, or open to others, is not used", "[cache]") {
  TempCache cache("untrusted");
  disk_cache::store("kernels", kKey, "abc");
  REQUIRE(disk_cache::load("kernels", kKey) == "abc");
  REQUIRE(chmod(cache.dir.c_str(), 0777) == 0);
  CHECK_FALSE(disk_cache::load("kernels", kKey));
  REQUIRE(chmod(cache.dir.c_str(), 0700) == 0);
  std::string link = cache.dir + "-link";
  fs::remove(link);
  fs::create_symlink(cache.dir, link);
  {
    test::ScopedEnv via_link("EMBER_CACHE_DIR", link.c_str());
    CHECK_FALSE(disk_cache::load("kernels", kKey));
  }
  fs::remove(link);
  test::ScopedEnv off("EMBER_CACHE_DIR", "off");
  CHECK_FALSE(disk_cache::load("kernels", kKey));
}

TEST_CASE("disk cache: the size limit evicts the oldest entries", "[cache]") {
  TempCache cache("limit");
  test::ScopedEnv limit("EMBER_CACHE_MAX_MB", "1");
  std::string big(400 * 1024, 'z');
  auto before = disk_cache::stats().evictions;
  disk_cache::store("kernels", kKey, big);
  disk_cache::store("kernels", kOther, big);
  disk_cache::store("kernels", std::string(64, 'a'), big);  // 1.2 MiB in all: the oldest goes
  CHECK(disk_cache::stats().evictions - before == 1);
  CHECK_FALSE(disk_cache::load("kernels", kKey));
  CHECK(disk_cache::load("kernels", std::string(64, 'a')) == big);
}

// Run by the tests below in a separate process: compiles the program and checks where its
// kernel came from (CACHE_CHILD_EXPECT: "compiled" or "disk").
TEST_CASE("disk cache child process", "[.cache-child]") {
  auto f = child_program();
  Tensor x = uniform({100}, 1);
  Tensor y = f(x);
  Tensor want = tanh(x * 0.25 - 3.0) * exp2(x) + sqrt(x);
  for (int64_t i = 0; i < 100; ++i) REQUIRE(std::abs(y.array().get(i) - want.array().get(i)) < 1e-5);
  const GraphInfo g = f.report().graphs.at(0);  // a copy: report() returns by value
  REQUIRE(g.kernels == 1);
  std::string expect = std::getenv("CACHE_CHILD_EXPECT") ? std::getenv("CACHE_CHILD_EXPECT") : "";
  if (expect == "compiled") REQUIRE(g.kernels_compiled == 1);
  if (expect == "disk") {
    REQUIRE(g.kernels_compiled == 0);
    REQUIRE(g.kernels_from_disk == 1);
  }
}

TEST_CASE("disk cache: a second process loads the kernels instead of compiling them", "[cache][process]") {
  TempCache cache("warm");
  CHECK(wait_child(spawn_child("disk cache child process", {{"CACHE_CHILD_EXPECT", "compiled"}})) == 0);
  CHECK(wait_child(spawn_child("disk cache child process", {{"CACHE_CHILD_EXPECT", "disk"}})) == 0);
  // A corrupted entry: the next process compiles again, and repairs it.
  for (const auto& e : fs::directory_iterator(cache.dir + "/kernels")) {
    std::string data = read_all(e.path());
    data[data.size() / 2] ^= 0x40;
    write_all(e.path(), data);
  }
  CHECK(wait_child(spawn_child("disk cache child process", {{"CACHE_CHILD_EXPECT", "compiled"}})) == 0);
  CHECK(wait_child(spawn_child("disk cache child process", {{"CACHE_CHILD_EXPECT", "disk"}})) == 0);
}

TEST_CASE("disk cache: 8 processes compiling the same kernels at once leave whole entries", "[cache][process]") {
  TempCache cache("race");
  std::vector<pid_t> children;
  for (int i = 0; i < 8; ++i) children.push_back(spawn_child("disk cache child process", {}));
  for (pid_t c : children) CHECK(wait_child(c) == 0);
  int entries = 0;
  for (const auto& e : fs::directory_iterator(cache.dir + "/kernels")) {
    std::string name = e.path().filename();
    CHECK(name[0] != '.');  // no temporary file left behind
    ++entries;
    auto before = disk_cache::stats().rejected;
    CHECK(disk_cache::load("kernels", name));
    CHECK(disk_cache::stats().rejected == before);
  }
  CHECK(entries == 1);
}

// The cubin cache ([Note: the cubin cache]): NVRTC compiles a source once per process; a second
// process loads the cubin from the disk cache without compiling; a corrupt entry is a miss that
// compiles again. No GPU needed (NVRTC runs on the CPU).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "codegen/cuda/cuda_kernel.h"
#include "codegen/cuda/nvrtc.h"
#include "tests/catch.h"
#include "tests/unit/helpers.h"

using namespace ember;
using namespace ember::codegen::cuda;
namespace fs = std::filesystem;

namespace {

// A kernel only these tests compile (the process id keeps two test runs apart).
std::string source() {
  return "extern \"C\" __global__ void cubin_cache_test(float* x) { x[threadIdx.x] *= " + std::to_string(getpid()) +
         ".0f; }\n";
}

// This test binary again, as a new process with an empty memory cache, on the hidden test case
// below; returns its exit status (0: the cubin came from disk, 3: it was compiled).
int child_build(const std::string& dir) {
  pid_t pid = fork();
  if (pid == 0) {
    setenv("EMBER_CACHE_DIR", dir.c_str(), 1);
    setenv("CUBIN_CACHE_TEST_SOURCE_PID", std::to_string(getppid()).c_str(), 1);
    execl("/proc/self/exe", "ember_unit_tests", "[.cubin_child]", static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

bool is_elf(const std::string& image) { return image.size() > 4 && image.compare(0, 4, "\x7f" "ELF") == 0; }

}  // namespace

TEST_CASE("cubin cache: child process", "[.cubin_child]") {
  std::string pid = std::getenv("CUBIN_CACHE_TEST_SOURCE_PID");
  std::string src = "extern \"C\" __global__ void cubin_cache_test(float* x) { x[threadIdx.x] *= " + pid + ".0f; }\n";
  CubinBuild b = cubin_for(src, "cubin_cache_test", "sm_80");
  if (!is_elf(*b.image)) std::exit(4);
  std::exit(b.from_disk ? 0 : b.compiled ? 3 : 5);
}

TEST_CASE("cubin cache: compiled once, then from memory, then from disk in another process, a corrupt entry a miss",
          "[cuda][cache]") {
  std::string why;
  bool nvrtc = nvrtc_available(&why);
  INFO(why);
  REQUIRE(nvrtc);  // scripts/setup.sh installs it, as cuda.generated_kernels needs
  std::string dir = "/tmp/ember-cubin-test-" + std::to_string(getpid());
  fs::remove_all(dir);
  test::ScopedEnv env("EMBER_CACHE_DIR", dir.c_str());

  CubinBuild first = cubin_for(source(), "cubin_cache_test", "sm_80");
  CHECK(first.compiled);
  CHECK(is_elf(*first.image));
  CubinBuild again = cubin_for(source(), "cubin_cache_test", "sm_80");
  CHECK_FALSE(again.compiled);
  CHECK_FALSE(again.from_disk);
  CHECK(again.image == first.image);  // the same bytes, shared
  CHECK(cubin_for(source(), "cubin_cache_test", "sm_90").compiled);  // another architecture, another entry

  REQUIRE(fs::exists(dir + "/cuda"));
  CHECK(child_build(dir) == 0);  // from disk, not compiled
  for (const auto& entry : fs::directory_iterator(dir + "/cuda")) {
    std::fstream f(entry.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(entry.path()) / 2));
    f.put('\x5a').put('\x5a');  // a flipped byte in the middle: the checksum fails
  }
  CHECK(child_build(dir) == 3);  // a miss, compiled again (and stored whole)
  CHECK(child_build(dir) == 0);
  fs::remove_all(dir);
}

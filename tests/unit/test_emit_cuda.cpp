// What the CUDA generator's kernels become in PTX ([Note: flat elementwise kernels]): a flat
// elementwise launch moves 16 bytes per access, whatever its dtypes. Their values are checked
// by cuda.generated_kernels (emulated, aligned and not) and on a device by tests/cuda.
#include <regex>

#include "codegen/cuda/emit_cuda.h"
#include "codegen/cuda/nvrtc.h"
#include "tests/catch.h"

using namespace ember;
using namespace ember::codegen;

namespace {

std::string ptx_of(const std::string& spec_text) {
  std::string why;
  bool nvrtc = cuda::nvrtc_available(&why);
  INFO(why);
  REQUIRE(nvrtc);  // scripts/setup.sh installs it
  KernelSpec spec = parse_kernel_spec(spec_text);
  return cuda::nvrtc_compile(cuda::emit_cuda(spec, "flat_test"), "flat_test", "sm_90", false).image;
}

bool has(const std::string& ptx, const std::string& pattern) { return std::regex_search(ptx, std::regex(pattern)); }

}  // namespace

TEST_CASE("CUDA elementwise kernels load and store 16-byte vectors", "[cuda][codegen]") {
  SECTION("float32: four lanes, a broadcast input read once") {
    std::string ptx = ptx_of(R"(kernel rank=2 {
  %0 = load in0 : f32[*, *]
  %1 = load in1 : f32[1, *]
  %2 = add(%0, %1) : f32 compute=f32
  store out0 = %2
})");
    CHECK(has(ptx, R"(ld\.global(\.nc)?\.v4\.(f32|b32|u32))"));
    CHECK(has(ptx, R"(st\.global\.v4\.(f32|b32|u32))"));
  }
  SECTION("float16 stored, float32 computed: eight lanes in one 16-byte access") {
    std::string ptx = ptx_of(R"(kernel rank=1 {
  %0 = load in0 : f16[*]
  %1 = exp(%0) : f16 compute=f32
  store out0 = %1
})");
    CHECK(has(ptx, R"(ld\.global(\.nc)?\.v4\.(b32|u32))"));
    CHECK(has(ptx, R"(st\.global\.v4\.(b32|u32))"));
  }
  SECTION("mixed widths: the widest operand's 16 bytes set the lanes (two float64, two bytes of bool)") {
    std::string ptx = ptx_of(R"(kernel rank=1 {
  %0 = load in0 : f64[*]
  %1 = load in1 : f32[*]
  %2 = cast(%1) {dtype=f64} : f64 compute=f64
  %3 = gt(%0, %2) : bool compute=f64
  store out0 = %3
})");
    CHECK(has(ptx, R"(ld\.global(\.nc)?\.v2\.(f64|b64|u64))"));
    CHECK(has(ptx, R"(ld\.global(\.nc)?\.v2\.(f32|b32|u32))"));
  }
}

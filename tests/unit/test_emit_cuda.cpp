// What the CUDA generator's kernels become in PTX ([Note: flat elementwise kernels]): a flat
// elementwise launch moves 16 bytes per access, whatever its dtypes. Their values are checked
// by cuda.generated_kernels (emulated, aligned and not) and on a device by tests/cuda.
#include <regex>

#include "codegen/cpu/cpu_kernel.h"
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

TEST_CASE("CUDA row kernels: a warp per short row, a block per long one, and the grid to match", "[cuda][codegen]") {
  KernelSpec softmax_like = parse_kernel_spec(R"(kernel rank=2 {
  %0 = load in0 : f32[*, *]
  %1 = max(%0) {axes=[1], keepdim=true} : f32 compute=f32
  %2 = sub(%0, %1) : f32 compute=f32
  store out0 = %2
})");
  REQUIRE(softmax_like.reduces());
  REQUIRE_FALSE(softmax_like.columns);
  const int64_t rows_per_block = cuda::kBlockThreads / 32;
  int64_t short_rows[] = {1000, 64};
  CHECK(cuda::grid_of(softmax_like, short_rows) == (1000 + rows_per_block - 1) / rows_per_block);
  int64_t at_limit[] = {1000, cuda::kWarpRowLimit};
  CHECK(cuda::grid_of(softmax_like, at_limit) == (1000 + rows_per_block - 1) / rows_per_block);
  int64_t long_rows[] = {1000, cuda::kWarpRowLimit + 1};
  CHECK(cuda::grid_of(softmax_like, long_rows) == 1000);
  int64_t many_rows[] = {1 << 24, 64};
  CHECK(cuda::grid_of(softmax_like, many_rows, 4096) == 4096);  // the grid-stride loop takes the rest
  // Both ways are in the one kernel: its source chooses by the row's length.
  std::string source = cuda::emit_cuda(softmax_like, "rows_test");
  CHECK(source.find("ember_warp_row_limit(" + std::to_string(cuda::kWarpRowLimit) + ")") != std::string::npos);
  CHECK(source.find("__syncthreads") != std::string::npos);
}

// A launch of `inputs` inputs, input 0 one value for every element ([1]), the rest [n]: run on the
// CPU here, and recorded, so that cuda.generated_kernels replays it through the CUDA kernel (a
// broadcast bit per input: past 32 inputs one was once read as another's, past 64 the kernel
// takes only the strided path).
static void run_many_inputs(int inputs) {
  std::string text = "kernel rank=1 {\n  %0 = load in0 : f32[1]\n";
  for (int k = 1; k < inputs; ++k) text += "  %" + std::to_string(k) + " = load in" + std::to_string(k) + " : f32[*]\n";
  int v = inputs;
  text += "  %" + std::to_string(v) + " = mul(%0, %1) : f32 compute=f32\n";
  for (int k = 2; k < inputs; ++k) {
    text += "  %" + std::to_string(v + 1) + " = mul(%0, %" + std::to_string(k) + ") : f32 compute=f32\n";
    text += "  %" + std::to_string(v + 2) + " = add(%" + std::to_string(v) + ", %" + std::to_string(v + 1) +
            ") : f32 compute=f32\n";
    v += 2;
  }
  text += "  store out0 = %" + std::to_string(v) + "\n}\n";
  KernelSpec spec = parse_kernel_spec(text);
  auto build = codegen::cpu::cpu_kernel(spec);
  const int64_t n = 37;
  Array scale = Array::empty(DType::Float32, {1});
  static_cast<float*>(scale.data())[0] = 0.5f;
  std::vector<Array> in{scale};
  std::vector<double> want(n, 0.0);
  for (int k = 1; k < inputs; ++k) {
    Array a = Array::empty(DType::Float32, {n});
    for (int64_t i = 0; i < n; ++i) {
      float x = static_cast<float>(k * 100 + i);
      static_cast<float*>(a.data())[i] = x;
      want[i] += 0.5 * x;
    }
    in.push_back(a);
  }
  std::vector<Array> out{Array::empty(DType::Float32, {n})};
  build.kernel->run(in, out);
  for (int64_t i = 0; i < n; ++i) CHECK(static_cast<float*>(out[0].data())[i] == Approx(want[i]).epsilon(1e-6));
}

TEST_CASE("CUDA elementwise kernels with more inputs than a word has bits", "[cuda][codegen]") {
  run_many_inputs(40);
  run_many_inputs(70);
}

// The first device replay (an H200, benchmarks/results/cuda.md) found a multiply-add contracted
// into an FMA, one rounding where the CPU kernels have two: the kernels keep both.
TEST_CASE("CUDA kernels round as the CPU's: no FMA contraction", "[cuda][codegen]") {
  std::string muladd = ptx_of(R"(kernel rank=1 {
  %0 = load in0 : f32[*]
  %1 = load in1 : f32[*]
  %2 = load in2 : f32[*]
  %3 = mul(%0, %1) : f32 compute=f32
  %4 = add(%3, %2) : f32 compute=f32
  store out0 = %4
})");
  CHECK(has(muladd, R"(mul(\.rn)?\.f32)"));
  CHECK_FALSE(has(muladd, R"(fma\.rn\.f32)"));
}

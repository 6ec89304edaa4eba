// [Note: GEMM epilogues] (codegen/cpu/gemm_epilogue.h): which matmuls a plan takes into the kernel
// that reads their product, and that the step computes what the interpreter does, by the library
// route and by ember's own GEMM with the kernel inside it, on one thread and on several.
#include <atomic>
#include <cmath>
#include <random>
#include <thread>

#include "codegen/cpu/gemm_epilogue.h"
#include "codegen/cpu/jit.h"
#include "codegen/plan.h"
#include "runtime/interpreter.h"
#include "runtime/thread_pool.h"
#include "tests/catch.h"
#include "tests/unit/helpers.h"

using namespace ember;

namespace {

// The plan of `ir` with GEMM epilogues, and how many of its steps are GemmEpilogue steps.
std::shared_ptr<Executable> plan(const std::string& ir, int& epilogues, bool choice_steps = true) {
  codegen::CodegenStats stats;
  auto exec = codegen::build_cpu_executable(parse_graph(ir), stats, /*strict=*/true, false, choice_steps);
  epilogues = 0;
  for (int i = 0; i < exec->steps(); ++i)
    epilogues += dynamic_cast<const codegen::cpu::GemmEpilogue*>(exec->step_kernel(i).get()) != nullptr;
  return exec;
}

// Runs the plan with each of its epilogue steps on `settings`, against the interpreter.
void check_values(const std::string& ir, std::shared_ptr<Executable> exec, const StepSettings& settings) {
  for (int i = 0; i < exec->steps(); ++i)
    if (dynamic_cast<const codegen::cpu::GemmEpilogue*>(exec->step_kernel(i).get())) exec->set_step(i, nullptr, settings);
  auto g = parse_graph(ir);
  std::vector<Array> inputs = test::normal_inputs(*g, 3);
  std::vector<Array> want = run_graph(*g, inputs, {}), got = exec->run(inputs, {});
  REQUIRE(want.size() == got.size());
  for (size_t o = 0; o < want.size(); ++o) {
    REQUIRE(want[o].shape() == got[o].shape());
    for (int64_t i = 0; i < want[o].numel(); ++i) {
      const double w = want[o].get(i), x = got[o].get(i);
      INFO(settings.str() << " output " << o << " element " << i);
      REQUIRE(std::abs(w - x) <= 1e-4 * (1 + std::abs(w)));
    }
  }
}

// A linear layer's decomposition as PyTorch hands it over: the input's rows flattened, the weight
// transposed, reshapes around the product, the bias added, then GELU.
const char* kLinearGelu = R"(graph(%0: f32[70, 48], %1: f32[70], %2: f32[3, 37, 48]) {
  %3 = reshape(%2) {shape=[111, 48]} : f32[111, 48]
  %4 = permute(%0) {dims=[1, 0]} : f32[48, 70]
  %5 = matmul(%3, %4) : f32[111, 70]
  %6 = reshape(%5) {shape=[3, 37, 70]} : f32[3, 37, 70]
  %7 = add(%1, %6) : f32[3, 37, 70]
  %8 = gelu(%7) {approximate="none"} : f32[3, 37, 70]
  return %8
})";

}  // namespace

TEST_CASE("gemm epilogues: a linear layer's bias and GELU are its GEMM's epilogue, by either route", "[gemm][epilogue]") {
  if (!codegen::cpu::jit_available()) return;  // a build without the CPU code generator
  int epilogues = 0;
  auto exec = plan(kLinearGelu, epilogues);
  REQUIRE(epilogues == 1);
  REQUIRE(exec->steps() - exec->kernel_steps() == 2);  // two views: the input flattened, the weight transposed
  for (const std::string& op : exec->interpreter_ops()) REQUIRE(op != "matmul");
  for (int threads : {1, 3}) {
    ThreadCountForCall count(threads);
    for (GemmRoute route : {GemmRoute::Auto, GemmRoute::Blas, GemmRoute::Generated})
      check_values(kLinearGelu, plan(kLinearGelu, epilogues), StepSettings{.gemm = route});
    for (GemmTile tile : {GemmTile{12, 32}, GemmTile{8, 48}})  // the pieces of other tiles
      check_values(kLinearGelu, plan(kLinearGelu, epilogues), StepSettings{.gemm = GemmRoute::Generated, .tile = tile});
  }
  plan(kLinearGelu, epilogues, /*choice_steps=*/false);
  REQUIRE(epilogues == 0);  // only where the mode asks
}

TEST_CASE("gemm epilogues: a product that something else reads, or that is broadcast, stays its own step", "[gemm][epilogue]") {
  if (!codegen::cpu::jit_available()) return;
  const char* cases[] = {
      // returned as well
      R"(graph(%0: f32[20, 8], %1: f32[8, 30]) {
  %2 = matmul(%0, %1) : f32[20, 30]
  %3 = tanh(%2) : f32[20, 30]
  return %3, %2
})",
      // read by two kernels (a row sum and an elementwise kernel)
      R"(graph(%0: f32[20, 8], %1: f32[8, 30]) {
  %2 = matmul(%0, %1) : f32[20, 30]
  %3 = tanh(%2) : f32[20, 30]
  %4 = sum(%2) {axes=[1], keepdim=true} : f32[20, 1]
  %5 = mul(%3, %4) : f32[20, 30]
  return %5
})",
      // broadcast over the kernel's domain
      R"(graph(%0: f32[1, 8], %1: f32[8, 30], %2: f32[20, 30]) {
  %3 = matmul(%0, %1) : f32[1, 30]
  %4 = add(%3, %2) : f32[20, 30]
  return %4
})",
      // a reshape that changes the rows
      R"(graph(%0: f32[20, 8], %1: f32[8, 30]) {
  %2 = matmul(%0, %1) : f32[20, 30]
  %3 = reshape(%2) {shape=[20, 3, 10]} : f32[20, 3, 10]
  %4 = exp(%3) : f32[20, 3, 10]
  return %4
})"};
  for (const char* ir : cases) {
    INFO(ir);
    int epilogues = -1;
    auto exec = plan(ir, epilogues);
    REQUIRE(epilogues == 0);
    check_values(ir, exec, StepSettings{});
  }
}

TEST_CASE("gemm epilogues: several outputs, a residual input, A transposed or strided, empty depth", "[gemm][epilogue]") {
  if (!codegen::cpu::jit_available()) return;
  const char* cases[] = {
      R"(graph(%0: f32[33, 17], %1: f32[17, 65], %2: f32[33, 65]) {
  %3 = matmul(%0, %1) : f32[33, 65]
  %4 = add(%3, %2) : f32[33, 65]
  %5 = relu(%4) : f32[33, 65]
  return %5, %4
})",
      R"(graph(%0: f32[40, 9], %1: f32[40, 130]) {
  %2 = permute(%0) {dims=[1, 0]} : f32[9, 40]
  %3 = matmul(%2, %1) : f32[9, 130]
  %4 = mul(%3, %3) : f32[9, 130]
  return %4
})",
      // A's rows not evenly apart: a slice of a dim beyond a size-1 dim (rows 0-2 at 0, 8, 16,
      // rows 3-5 at 40, 48, 56), read as 6 rows 8 apart by an earlier version
      R"(graph(%0: f32[2, 1, 5, 8], %1: f32[8, 20], %2: f32[20]) {
  %3 = slice(%0) {axis=2, start=0, end=3} : f32[2, 1, 3, 8]
  %4 = matmul(%3, %1) : f32[2, 1, 3, 20]
  %5 = add(%4, %2) : f32[2, 1, 3, 20]
  %6 = relu(%5) : f32[2, 1, 3, 20]
  return %6
})",
      // A's rows all one row (stride 0)
      R"(graph(%0: f32[1, 8], %1: f32[8, 20]) {
  %2 = expand(%0) {shape=[4, 8]} : f32[4, 8]
  %3 = matmul(%2, %1) : f32[4, 20]
  %4 = tanh(%3) : f32[4, 20]
  return %4
})",
      R"(graph(%0: f32[7, 0], %1: f32[0, 20], %2: f32[20]) {
  %3 = matmul(%0, %1) : f32[7, 20]
  %4 = add(%3, %2) : f32[7, 20]
  return %4
})"};
  for (const char* ir : cases)
    for (GemmRoute route : {GemmRoute::Auto, GemmRoute::Generated}) {
      INFO(ir);
      int epilogues = 0;
      auto exec = plan(ir, epilogues);
      REQUIRE(epilogues == 1);
      check_values(ir, exec, StepSettings{.gemm = route});
    }
}

TEST_CASE("gemm epilogues: 16 callers at once, and 16 threads for one call, on ember's own GEMM", "[gemm][epilogue]") {
  if (!codegen::cpu::jit_available()) return;
  // Each caller's packed B and the epilogue's launch arguments are the calling thread's own; the
  // pieces run on whichever threads the pool gives (none, while another caller holds it).
  int epilogues = 0;
  auto exec = plan(kLinearGelu, epilogues);
  for (int i = 0; i < exec->steps(); ++i)
    if (dynamic_cast<const codegen::cpu::GemmEpilogue*>(exec->step_kernel(i).get()))
      exec->set_step(i, nullptr, StepSettings{.gemm = GemmRoute::Generated});
  auto g = parse_graph(kLinearGelu);
  std::vector<Array> inputs = test::normal_inputs(*g, 3);
  std::vector<Array> want = run_graph(*g, inputs, {});
  auto close = [&](const std::vector<Array>& got) {
    for (int64_t i = 0; i < want[0].numel(); ++i)
      if (std::abs(want[0].get(i) - got[0].get(i)) > 1e-4 * (1 + std::abs(want[0].get(i)))) return false;
    return true;
  };
  {
    ThreadCountForCall sixteen(16);
    REQUIRE(close(exec->run(inputs, {})));
  }
  std::atomic<int> wrong{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 16; ++t)
    callers.emplace_back([&] {
      for (int r = 0; r < 20; ++r)
        if (!close(exec->run(inputs, {}))) ++wrong;
    });
  for (std::thread& t : callers) t.join();
  REQUIRE(wrong == 0);
}

TEST_CASE("gemm epilogues: the float64 reference rounds the product once, then runs the kernel", "[gemm][epilogue]") {
  // [Note: no less accurate than the default]: max-autotune measures each route's rounding
  // against this. Over a depth of 4096, a float32 GEMM's sums are more than half a unit in the
  // last place off; the product rounded once, then the bias added in float32, is within half of
  // one of the float32 product's exact rounding plus the bias.
  if (!codegen::cpu::jit_available()) return;
  const char* ir = R"(graph(%0: f32[8, 4096], %1: f32[4096, 16], %2: f32[16]) {
    %3 = matmul(%0, %1) : f32[8, 16]
    %4 = add(%3, %2) : f32[8, 16]
    %5 = relu(%4) : f32[8, 16]
    return %5
  })";
  int epilogues = 0;
  auto exec = plan(ir, epilogues);
  REQUIRE(epilogues == 1);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::vector<Array> inputs;
  for (std::vector<int64_t> shape : {std::vector<int64_t>{8, 4096}, {4096, 16}, {16}}) {
    inputs.push_back(Array::empty(DType::Float32, shape));
    for (int64_t i = 0; i < inputs.back().numel(); ++i) inputs.back().data_as<float>()[i] = unit(rng);
  }
  const codegen::cpu::GemmEpilogue* step = nullptr;
  std::vector<Array> step_inputs;
  exec->run(inputs, {}, nullptr, {}, [&](int i, std::span<const Array> in, std::span<const Array>) {
    if ((step = dynamic_cast<const codegen::cpu::GemmEpilogue*>(exec->step_kernel(i).get())))
      step_inputs.assign(in.begin(), in.end());
  });
  REQUIRE(step != nullptr);
  Array exact = Array::empty(DType::Float32, {8, 16}), rounded = Array::empty(DType::Float32, {8, 16});
  step->run_exact_product(step_inputs, std::span<const Array>(&exact, 1));
  {
    ThreadCountForCall one(1);
    ScopedStepSettings library(StepSettings{.gemm = GemmRoute::Blas});
    step->run(step_inputs, std::span<const Array>(&rounded, 1));
  }
  double exact_ulps = 0, float32_ulps = 0;  // the largest error, in units of 2^-23 of the value
  for (int64_t r = 0; r < 8; ++r)
    for (int64_t c = 0; c < 16; ++c) {
      double want = inputs[2].data_as<float>()[c];
      double sum = 0;
      for (int64_t k = 0; k < 4096; ++k)
        sum += double(inputs[0].data_as<float>()[r * 4096 + k]) * inputs[1].data_as<float>()[k * 16 + c];
      want = std::max(0.0, double(float(sum)) + want);  // no float32 rounds better than this
      const double ulp = std::ldexp(std::abs(want), -23);
      exact_ulps = std::max(exact_ulps, std::abs(exact.data_as<float>()[r * 16 + c] - want) / ulp);
      float32_ulps = std::max(float32_ulps, std::abs(rounded.data_as<float>()[r * 16 + c] - want) / ulp);
    }
  INFO("float64 reference " << exact_ulps << " ulp, a float32 GEMM's " << float32_ulps);
  CHECK(exact_ulps <= 0.51);
  CHECK(float32_ulps > 1.0);
}

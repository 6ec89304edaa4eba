// A value one kernel stores for another, or recomputes there ([Note: recompute or store] in
// codegen/cpu/recompute_choice.h): which pairs of steps become one step with both ways, that
// both ways compute what the interpreter does, and that max-autotune measures them.
#include <ember/ember.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <set>

#include "codegen/cpu/jit.h"
#include "codegen/cpu/recompute_choice.h"
#include "codegen/plan.h"
#include "runtime/interpreter.h"
#include "runtime/thread_pool.h"
#include "tests/catch.h"
#include "tests/unit/helpers.h"

using namespace ember;
using codegen::cpu::RecomputeChoice;

namespace {

struct Planned {
  std::shared_ptr<Executable> exec;
  int choices = 0;  // RecomputeChoice steps
  int choice_step = -1;
};

Planned plan(const std::string& ir, bool choice_steps = true) {
  codegen::CodegenStats stats;
  Planned p{codegen::build_cpu_executable(parse_graph(ir), stats, /*strict=*/true, false, choice_steps)};
  for (int i = 0; i < p.exec->steps(); ++i)
    if (dynamic_cast<const RecomputeChoice*>(p.exec->step_kernel(i).get())) ++p.choices, p.choice_step = i;
  return p;
}

// Runs `ir`'s plan with its choice step storing, then recomputing, against the interpreter;
// returns how many kernels each way ran.
std::vector<size_t> check_both_ways(const std::string& ir) {
  std::vector<size_t> ways;
  auto g = parse_graph(ir);
  std::vector<Array> inputs = test::normal_inputs(*g, 5);
  std::vector<Array> want = run_graph(*g, inputs, {});
  // Each way as built, then with the last knob of each of its kernels at its second option.
  std::vector<std::string> choices{"", "recompute=1", "recompute=0", "recompute=1"};
  const Planned planned = plan(ir);
  REQUIRE(planned.choices == 1);
  for (const Knob& k : planned.exec->step_kernel(planned.choice_step)->knobs())
    if (k.name != "recompute") choices[k.name[0] == 'r' ? 3 : 2] += " " + k.name + "=" + std::to_string(k.options[1]);
  for (const std::string& way : choices) {
    Planned p = plan(ir);
    REQUIRE(p.choices == 1);
    auto step = p.exec->step_kernel(p.choice_step);
    auto chosen = step->with(way);
    p.exec->set_step(p.choice_step, chosen, {});
    ways.push_back(dynamic_cast<const RecomputeChoice&>(*chosen).kernels());
    std::vector<Array> got = p.exec->run(inputs, {});
    REQUIRE(got.size() == want.size());
    for (size_t o = 0; o < want.size(); ++o) {
      REQUIRE(want[o].shape() == got[o].shape());
      for (int64_t i = 0; i < want[o].numel(); ++i) {
        INFO("way '" << way << "' output " << o << " element " << i);
        REQUIRE(std::abs(want[o].get(i) - got[o].get(i)) <= 1e-4 * (1 + std::abs(want[o].get(i))));
      }
    }
  }
  return ways;
}

// x * x (from an input) read by a row sum in its own group and by a column sum in another.
const char* kRowsAndColumns = R"(graph(%0: f32[40, 70]) {
  %1 = mul(%0, %0) : f32[40, 70]
  %2 = sum(%1) {axes=[1], keepdim=true} : f32[40, 1]
  %3 = sum(%1) {axes=[0], keepdim=true} : f32[1, 70]
  return %2, %3
})";

}  // namespace

TEST_CASE("recompute or store: a value one group stores for one other is a choice step, only where asked",
          "[codegen][recompute]") {
  if (!codegen::cpu::jit_available()) return;
  Planned p = plan(kRowsAndColumns);
  REQUIRE(p.choices == 1);
  REQUIRE(p.exec->kernel_steps() == 1);  // the two kernels are one step
  auto knobs = p.exec->step_kernel(p.choice_step)->knobs();
  REQUIRE(knobs.size() > 1);
  CHECK(knobs[0].name == "recompute");
  CHECK(knobs[0].options == std::vector<int64_t>{0, 1});
  // Each kernel's own knobs, tried only beside its way: s0.lanes, r1.fold_block, ...
  std::set<std::string> names;
  for (size_t k = 1; k < knobs.size(); ++k) {
    names.insert(knobs[k].name);
    CHECK(knobs[k].only_with == "recompute");
    CHECK(knobs[k].only_value == (knobs[k].name[0] == 'r' ? 1 : 0));
  }
  CHECK(names.count("s0.lanes"));
  CHECK(names.count("r0.fold_block"));
  auto recomputing = p.exec->step_kernel(p.choice_step)->with("recompute=1");
  CHECK(recomputing->knobs()[0].options == std::vector<int64_t>{1, 0});  // option 0: its own way
  CHECK(recomputing->name() == p.exec->step_kernel(p.choice_step)->name());  // one key for both ways
  for (const char* bad : {"recompute=2", "x0.lanes=32", "s9.lanes=32", "s.lanes=32", "s0.nosuch=1", "lanes=32"})
    CHECK_THROWS_AS(recomputing->with(bad), Error);
  CHECK(plan(kRowsAndColumns, /*choice_steps=*/false).choices == 0);
  check_both_ways(kRowsAndColumns);
}

TEST_CASE("recompute or store: both ways compute the interpreter's values", "[codegen][recompute]") {
  if (!codegen::cpu::jit_available()) return;
  const char* cases[] = {
      // The value is its group's only output: recomputing drops that kernel. A per-column scale
      // of two inputs, read broadcast by a kernel over the whole domain.
      R"(graph(%0: f32[1, 70], %1: f32[1, 70], %2: f32[40, 70]) {
  %3 = mul(%0, %1) : f32[1, 70]
  %4 = sum(%2) {axes=[1], keepdim=true} : f32[40, 1]
  %5 = div(%2, %4) : f32[40, 70]
  %6 = mul(%5, %3) : f32[40, 70]
  return %6
})",
      // Two outputs besides the value (a row group), the value read by a column group, with a
      // broadcast input and a 3-d domain.
      R"(graph(%0: f32[3, 20, 33], %1: f32[33]) {
  %2 = add(%0, %1) : f32[3, 20, 33]
  %3 = max(%2) {axes=[2], keepdim=true} : f32[3, 20, 1]
  %4 = sub(%2, %3) : f32[3, 20, 33]
  %5 = sum(%2) {axes=[1], keepdim=true} : f32[3, 1, 33]
  return %4, %5
})",
      // computed through its group's nodes (the reader computes exp(x) too), one also stored
      R"(graph(%0: f32[40, 70]) {
  %1 = exp(%0) : f32[40, 70]
  %2 = mul(%1, %1) : f32[40, 70]
  %3 = sum(%2) {axes=[1], keepdim=true} : f32[40, 1]
  %4 = sum(%2) {axes=[0], keepdim=true} : f32[1, 70]
  %5 = neg(%1) : f32[40, 70]
  return %3, %4, %5
})",
      kRowsAndColumns,
      // Read by three other groups (domains of 40, 30 and 20 rows): each computes it again.
      R"(graph(%0: f32[1, 70], %1: f32[1, 70], %2: f32[40, 70], %3: f32[30, 70], %4: f32[20, 70]) {
  %5 = mul(%0, %1) : f32[1, 70]
  %6 = sum(%2) {axes=[1], keepdim=true} : f32[40, 1]
  %7 = div(%2, %6) : f32[40, 70]
  %8 = mul(%7, %5) : f32[40, 70]
  %9 = mul(%3, %5) : f32[30, 70]
  %10 = sum(%9) {axes=[1], keepdim=true} : f32[30, 1]
  %11 = sub(%4, %5) : f32[20, 70]
  return %8, %10, %11
})",
      // Read by two others (a column sum, and a product over a larger domain), the producer
      // storing a row sum too.
      R"(graph(%0: f32[40, 70], %1: f32[3, 40, 70]) {
  %2 = exp(%0) : f32[40, 70]
  %3 = sum(%2) {axes=[1], keepdim=true} : f32[40, 1]
  %4 = sum(%2) {axes=[0], keepdim=true} : f32[1, 70]
  %5 = mul(%1, %2) : f32[3, 40, 70]
  return %3, %4, %5
})",
      // Computed from another kernel's value (a column sum's), which its step stores anyway.
      R"(graph(%0: f32[40, 70], %1: f32[5, 70], %2: f32[3, 5, 70], %3: f32[2, 5, 70]) {
  %4 = sum(%0) {axes=[0], keepdim=true} : f32[1, 70]
  %5 = mul(%4, %1) : f32[5, 70]
  %6 = sub(%2, %5) : f32[3, 5, 70]
  %7 = sum(%6) {axes=[2], keepdim=true} : f32[3, 5, 1]
  %8 = mul(%3, %5) : f32[2, 5, 70]
  return %7, %8
})"};
  const std::vector<size_t> kernels[] = {{2, 1, 2, 1}, {2, 2, 2, 2}, {2, 2, 2, 2}, {2, 2, 2, 2}, {4, 3, 4, 3}, {3, 3, 3, 3}, {3, 2, 3, 2}};  // each way
  for (size_t c = 0; c < std::size(cases); ++c) {
    INFO(cases[c]);
    for (int threads : {1, 3}) {
      ThreadCountForCall count(threads);
      CHECK(check_both_ways(cases[c]) == kernels[c]);
    }
  }
}

TEST_CASE("recompute or store: a value with another reader, returned, or computed by a reduction stays stored",
          "[codegen][recompute]") {
  if (!codegen::cpu::jit_available()) return;
  const char* cases[] = {
      // returned as well
      R"(graph(%0: f32[40, 70]) {
  %1 = mul(%0, %0) : f32[40, 70]
  %2 = sum(%1) {axes=[1], keepdim=true} : f32[40, 1]
  %3 = sum(%1) {axes=[0], keepdim=true} : f32[1, 70]
  return %2, %3, %1
})",
      // read by the interpreter too (a matmul)
      R"(graph(%0: f32[40, 70], %1: f32[70, 5]) {
  %2 = mul(%0, %0) : f32[40, 70]
  %3 = sum(%2) {axes=[1], keepdim=true} : f32[40, 1]
  %4 = sum(%2) {axes=[0], keepdim=true} : f32[1, 70]
  %5 = matmul(%2, %1) : f32[40, 5]
  return %3, %4, %5
})",
      // the reader reads another value of the producer's too (joined, the step would read
      // its own output: a batch norm's scale and shift in ResNet-50 made a cycle so)
      R"(graph(%0: f32[1, 70], %1: f32[40, 70]) {
  %2 = mul(%0, %0) : f32[1, 70]
  %3 = sum(%2) {axes=[1], keepdim=true} : f32[1, 1]
  %4 = mul(%1, %2) : f32[40, 70]
  %5 = add(%4, %3) : f32[40, 70]
  return %5
})",
      // read by two others, one of which reads the other's row sum too (joined, the step would
      // read its own output)
      R"(graph(%0: f32[1, 70], %1: f32[1, 70], %2: f32[40, 70], %3: f32[2, 40, 70]) {
  %4 = mul(%0, %1) : f32[1, 70]
  %5 = mul(%2, %4) : f32[40, 70]
  %6 = sum(%5) {axes=[1], keepdim=true} : f32[40, 1]
  %7 = mul(%3, %4) : f32[2, 40, 70]
  %8 = add(%7, %6) : f32[2, 40, 70]
  return %6, %8
})",
      // read by five others: more than kMaxReaders
      R"(graph(%0: f32[1, 70], %1: f32[1, 70], %2: f32[2, 70], %3: f32[3, 70], %4: f32[4, 70], %5: f32[5, 70], %6: f32[6, 70]) {
  %7 = mul(%0, %1) : f32[1, 70]
  %8 = sub(%2, %7) : f32[2, 70]
  %9 = sub(%3, %7) : f32[3, 70]
  %10 = sub(%4, %7) : f32[4, 70]
  %11 = sub(%5, %7) : f32[5, 70]
  %12 = sub(%6, %7) : f32[6, 70]
  return %8, %9, %10, %11, %12
})",
      // a constant that a pow reads as its exponent (held in the kernel's text there, read
      // as an input by a kernel that recomputed the value: pow computed two ways)
      R"(graph(%0: f32[40, 70]) {
  %1 = constant() {value=f32[3.0]} : f32[]
  %2 = mul(%0, %1) : f32[40, 70]
  %3 = sum(%2) {axes=[1], keepdim=true} : f32[40, 1]
  %4 = sum(%2) {axes=[0], keepdim=true} : f32[1, 70]
  %5 = pow(%4, %1) : f32[1, 70]
  return %3, %5
})",
      // computed from a reduction of its own group
      R"(graph(%0: f32[40, 70]) {
  %1 = max(%0) {axes=[1], keepdim=true} : f32[40, 1]
  %2 = sub(%0, %1) : f32[40, 70]
  %3 = sum(%2) {axes=[1], keepdim=true} : f32[40, 1]
  %4 = sum(%2) {axes=[0], keepdim=true} : f32[1, 70]
  return %3, %4
})",
      // through more elementwise nodes than kMaxCone
      R"(graph(%0: f32[40, 70]) {
  %1 = exp(%0) : f32[40, 70]
  %2 = exp(%1) : f32[40, 70]
  %3 = exp(%2) : f32[40, 70]
  %4 = exp(%3) : f32[40, 70]
  %5 = exp(%4) : f32[40, 70]
  %6 = exp(%5) : f32[40, 70]
  %7 = exp(%6) : f32[40, 70]
  %8 = exp(%7) : f32[40, 70]
  %9 = neg(%8) : f32[40, 70]
  %10 = sum(%9) {axes=[1], keepdim=true} : f32[40, 1]
  %11 = sum(%9) {axes=[0], keepdim=true} : f32[1, 70]
  return %10, %11
})"};
  for (const char* ir : cases) {
    INFO(ir);
    Planned p = plan(ir);
    CHECK(p.choices == 0);
  }
}

TEST_CASE("recompute or store: max-autotune measures both ways and its choice computes the same",
          "[codegen][recompute][autotune]") {
  if (!codegen::cpu::jit_available()) return;
  test::ScopedEnv cache("EMBER_CACHE_DIR", (std::string("/tmp/ember-recompute-") + std::to_string(getpid())).c_str());
  Tensor x = uniform({300, 500}, 3, -1, 1);
  auto fn = [](const Tensor& t) {
    Tensor y = t * t;
    return std::vector<Tensor>{sum(y, {1}, true), sum(y, {0}, true)};
  };
  auto f = compile(fn, Options{.mode = "max-autotune", .autotune_budget_s = 2.0, .autotune_search = "exhaustive"});
  auto want = fn(x);
  for (int call = 0; call < 2; ++call) {  // the tuning call, then the tuned plan
    auto got = f(x);
    test::check_close(got[0], want[0], 1e-4, 1e-5);
    test::check_close(got[1], want[1], 1e-4, 1e-5);
  }
  const GraphInfo g = f.report().graphs.at(0);
  bool measured = false;
  for (const TuningRecord& t : g.tuning)
    if (t.name.rfind("store-or-recompute(", 0) == 0) {
      measured = true;
      CHECK(t.rejected == 0);
      CHECK(t.timed >= 1);  // recompute=1, at least
    }
  CHECK(measured);
  std::filesystem::remove_all(std::string("/tmp/ember-recompute-") + std::to_string(getpid()));
}

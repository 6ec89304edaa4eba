// [Note: max-autotune]
// A plan's steps that can run more than one way without computing anything else:
//   a generated kernel: its vector lanes per step (one register, or several, which unrolls the
//   loop), a reduction's fold block, a column kernel's vectors per step, the grain at which its
//   work splits over threads, and the threads it uses;
//   a float32 GEMM: oneDNN, OpenBLAS, PyTorch's MKL or ember's own (codegen/cpu/gemm.h), and the threads;
//   blocked attention: its tiles' queries and keys, and their GEMM's library, and the threads.
// The tuner runs the plan once on the call's inputs, keeping a copy of each such step's inputs
// (with their strides) and the time each step took. The budget is split over the steps by their
// share of that time, so the slow steps get the search. A step whose signature (below) an earlier
// step of the plan has is a twin: it takes that step's choice, and its time adds to that step's
// share. For each other step, in plan order:
//   1. the tuning database (runtime/tuning_db.h) may know its choice: taken with no timing;
//   2. else the default is timed (a warm-up, then the median of repeats, whose spread is the
//      noise), and candidates from the search strategy (search.h) are compiled, checked against
//      the default's outputs (a candidate that computes another value is rejected and logged)
//      and timed the same way (a candidate already 1.3x slower than the best after 3 runs is
//      dropped: kHopeless), until the strategy or the step's budget runs out;
//   3. the fastest replaces the default only when faster by more than the noise (and 3%), so
//      max-autotune is never slower than default beyond noise; the choice, "default" included,
//      goes to the database.
// EMBER_LOG=autotune lists every candidate with its time; a tuning that takes longer than 2 s
// shows its progress on stderr.
#include "codegen/autotune.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <new>
#include <optional>
#include <sstream>

#include "codegen/autotune_measure.h"
#include "codegen/cpu/cpu_kernel.h"
#include "codegen/cpu/emit_kernel.h"
#include "codegen/cpu/gemm_epilogue.h"
#include "ir/error.h"
#include "runtime/config.h"
#include "runtime/interpreter.h"
#include "runtime/kernels/kernel.h"
#include "runtime/kernels/mkl.h"
#include "runtime/thread_pool.h"

namespace ember::codegen {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// A step's way of running: its kernel's choice (KernelStep::with's text) and its settings.
struct Choice {
  std::string kernel;
  StepSettings settings;
};

std::string choice_str(const Choice& c) {
  std::string s = c.kernel;
  if (!c.settings.is_default()) s += (s.empty() ? "" : " ") + c.settings.str();
  return s.empty() ? "default" : s;
}

bool is_setting(const std::string& knob) { return StepSettings::is_field(knob); }

// Parses choice_str's text: the settings' fields, and the kernel's (the rest), in any order.
Choice parse_choice(const std::string& text) {
  Choice c;
  if (text == "default") return c;
  std::string settings;
  std::istringstream in(text);
  for (std::string field; in >> field;) {
    std::string& part = is_setting(field.substr(0, field.find('='))) ? settings : c.kernel;
    part += (part.empty() ? "" : " ") + field;
  }
  if (!settings.empty()) c.settings = StepSettings::parse(settings);
  return c;
}

// The choice at point p: the settings' knobs set their fields, the kernel's knobs that are not
// at their own default make its text.
Choice choice_at(const Space& space, const Point& p) {
  Choice c;
  std::string settings;
  for (size_t k = 0; k < space.size(); ++k) {
    if (p[k] == 0) continue;
    std::string field = space[k].name + "=";
    if (space[k].name == "gemm") field += route_name(static_cast<GemmRoute>(space[k].options[p[k]]));
    else if (space[k].name == "tile") field += GemmTile::of_option(space[k].options[p[k]]).str();
    else if (space[k].name == "conv") field += conv_name(static_cast<ConvAlgorithm>(space[k].options[p[k]]));
    else field += std::to_string(space[k].options[p[k]]);
    std::string& part = is_setting(space[k].name) ? settings : c.kernel;
    part += (part.empty() ? "" : " ") + field;
  }
  if (!settings.empty()) c.settings = StepSettings::parse(settings);
  return c;
}

// Fewer threads than the call has: one (small steps lose more to the hand-off than they gain),
// and half from four up.
std::vector<int64_t> thread_options(int threads) {
  std::vector<int64_t> options{0, 1};
  if (threads >= 4) options.push_back(threads / 2);
  return options;
}

bool is_float32_gemm(const Node* n) {
  if (n->op != Op::MatMul && n->op != Op::Linear) return false;
  if (n->types.size() != 1 || n->types[0].dtype != DType::Float32) return false;
  for (const Value& in : n->inputs())
    if (in.type().dtype != DType::Float32) return false;
  return true;
}

bool is_float32_conv(const Node* n) {
  return n->op == Op::Conv2d && n->types.size() == 1 && n->types[0].dtype == DType::Float32 &&
         n->inputs()[0].type().dtype == DType::Float32;
}

// One input channel per group (ConvShape::depthwise): ember's own algorithm runs it directly, not
// as GEMMs.
bool is_depthwise_conv(const Node* n) {
  const Dim& per_group = n->inputs()[1].type().shape[1];
  return attr_int(n->attrs, "groups") > 1 && per_group.is_static() && per_group.value() == 1;
}

// Whether the step runs the blocked attention kernel (every dtype but float64), whose tiles and
// their GEMM library are choices (runtime/kernels/attention.cpp).
bool is_blocked_attention(const Node* n) {
  return n->op == Op::ScaledDotProductAttention && n->types.size() == 1 && n->types[0].dtype != DType::Float64;
}

// A step that a library runs (or ember's own path in its place), whose choices sum in other
// orders: its signature names the routes this process has, and its candidates are checked
// against float64 ([Note: no less accurate than the default]).
bool is_library_step(const Node* n) { return is_float32_gemm(n) || is_float32_conv(n) || is_blocked_attention(n); }

// The tiles of ember's own GEMM that max-autotune tries beside its default (6 x 64): in L1, 12 x 32
// and 8 x 48 ran 106-108 GFLOP/s against 104 (benchmarks/results/autotune.md), and their rows and
// columns divide other shapes evenly (128 rows, 768 columns).
std::vector<GemmTile> own_gemm_tiles() { return {{12, 32}, {8, 48}}; }

// The GEMM routes a step may take: option 0 is its default.
Knob gemm_routes(std::vector<GemmRoute> routes) {
  Knob knob{"gemm", {0}};
  if (kernels::mkl_available()) routes.push_back(GemmRoute::Mkl);
  for (GemmRoute r : routes) knob.options.push_back(static_cast<int64_t>(r));
  return knob;
}

const cpu::CpuKernel* generated_kernel(const Executable& exec, int step) {
  return dynamic_cast<const cpu::CpuKernel*>(exec.step_kernel(step).get());
}

// What the step is, for the database's key and the report.
std::string step_name(const Executable& exec, int step) {
  if (const KernelStep* k = exec.step_kernel(step).get()) return k->name();
  return std::string(exec.step_node(step)->info().name);
}

// The GEMM routes that depend on the process, for a signature: one without PyTorch has no MKL
// route, and a build without the CPU code generator no GEMM of ember's own (`own`: the step could
// take it); neither must take a choice measured by a process that has them.
std::string routes_present(bool own) {
  std::string s = kernels::mkl_available() ? " routes+mkl" : "";
  if (!own || !kernels::has_own_gemm()) return s;
  s += " routes+generated tiles";
  for (GemmTile t : own_gemm_tiles()) s += " " + t.str();
  return s;
}

std::string step_signature(const Executable& exec, int step, std::span<const Array> inputs,
                           std::span<const Array> outputs) {
  std::string s;
  if (const cpu::CpuKernel* k = generated_kernel(exec, step)) {
    s = "kernel\n" + k->spec().str() + "\nconfig " + k->config().str();
  } else if (const KernelStep* other = exec.step_kernel(step).get()) {
    s = "kernel " + other->name();
    if (dynamic_cast<const cpu::GemmEpilogue*>(other)) s += routes_present(true) + " checked";
  } else {
    const Node* n = exec.step_node(step);
    s = "op " + std::string(n->info().name) + " " + attrs_str(n->attrs);
    // "checked": chosen under [Note: no less accurate than the default], so that no choice made
    // before that check is taken from the database.
    if (is_library_step(n)) s += routes_present(is_float32_gemm(n)) + " checked";
  }
  s += "\ninputs";
  for (const Array& a : inputs) s += " " + layout_signature(a);
  s += "\noutputs";
  for (const Array& a : outputs) s += " " + layout_signature(a);
  return s + "\nthreads " + std::to_string(num_threads()) + "\nember " + EMBER_VERSION + " " +
         cpu::codegen_version();
}

// One step the tuner works on: its choice from the database, or a copy of its inputs and its
// outputs' types to measure with; and its time in the profile run.
struct Tunable {
  int step = 0;
  Space space;
  std::string signature;
  std::optional<std::string> known;  // the database's choice
  int twin_of = -1;  // an earlier tunable with the same signature: this one takes its choice
  std::vector<Array> inputs;
  std::vector<Array> outputs;  // scratch arrays of its destinations' types, for candidates to write
  double profile_s = 0;
};

void log_candidate(const std::string& name, const std::string& choice, const std::string& outcome);

// Runs a step with a choice, on its inputs into `outputs`; the plan's own kernels are kept, so
// that each choice starts from the step as it was built.
class StepRunner {
 public:
  StepRunner(Executable& exec, const SymbolValues& symbols) : exec_(exec), symbols_(symbols) {
    for (int i = 0; i < exec.steps(); ++i) built_.push_back(exec.step_kernel(i));
  }

  // The kernel for a choice (null for an interpreter step); throws when it cannot be built.
  std::shared_ptr<const KernelStep> kernel_for(int step, const Choice& choice) const {
    const std::shared_ptr<const KernelStep>& k = built_[step];
    if (!k || choice.kernel.empty()) return k;
    return k->with(choice.kernel);
  }

  // A function that runs step `step` with `kernel` and `settings` on `inputs` into `outputs`.
  std::function<void()> runner(int step, std::shared_ptr<const KernelStep> kernel, const StepSettings& settings,
                               std::span<const Array> inputs, std::span<const Array> outputs) const {
    return [this, step, kernel, settings, inputs, outputs] {
      ScopedStepSettings scoped(settings);
      if (kernel) kernel->run(inputs, outputs);
      else exec_.run_step(step, inputs, outputs, symbols_);
    };
  }

  void apply(int step, const Choice& choice) { exec_.set_step(step, kernel_for(step, choice), choice.settings); }

  // The step's outputs computed at float64 on the interpreter, where it is a library op whose
  // candidates sum in other orders, or with its product so where it is a GEMM and its epilogue
  // ([Note: no less accurate than the default]); else none. None either where that would cost
  // more than a quarter of `budget_s` (at about 20 runs of the default, `default_s` each) or 256
  // MiB of float64 (the interpreter's attention expands its scores and mask to [batch...,
  // queries, keys]).
  std::optional<std::vector<Array>> exact_outputs(int step, std::span<const Array> inputs,
                                                  std::span<const Array> outputs, double default_s,
                                                  double budget_s) const {
    const Node* n = exec_.step_node(step);
    const auto* epilogue = dynamic_cast<const cpu::GemmEpilogue*>(built_[step].get());
    const bool checked = epilogue || (!built_[step] && is_library_step(n));
    if (!checked || 20 * default_s > budget_s / 4) return std::nullopt;
    constexpr int64_t kMaxValues = int64_t{32} << 20;
    int64_t values = 0;
    for (const Array& a : inputs) values += a.numel();
    if (epilogue) {
      for (const Array& o : outputs) values += o.numel();
      if (values > kMaxValues) return std::nullopt;
      std::vector<Array> exact;
      for (const Array& o : outputs) exact.push_back(Array::empty(o.dtype(), o.shape()));
      epilogue->run_exact_product(inputs, exact);
      return exact;
    }
    if (n->op == Op::ScaledDotProductAttention && inputs.size() > 1 && inputs[1].rank() >= 2) {
      const int64_t queries = inputs[0].numel() / std::max<int64_t>(inputs[0].shape().back(), 1);
      values += queries * inputs[1].shape()[inputs[1].rank() - 2];  // the scores: queries x keys
    }
    if (values > kMaxValues) return std::nullopt;
    std::vector<Array> wide;
    for (const Array& a : inputs)
      wide.push_back(is_floating(a.dtype()) ? kernels::to_contiguous(a, DType::Float64) : a);
    std::vector<TensorType> types = n->types;
    for (TensorType& t : types)
      if (is_floating(t.dtype)) t.dtype = DType::Float64;
    try {
      return run_op(n->op, n->attrs, wide, types, symbols_);
    } catch (const Error& e) {  // no float64 kernel for it: the candidates' values alone are checked
      if (e.kind() == ErrorKind::Internal) throw;
      log_candidate(std::string(n->info().name), "float64 reference", std::string("none: ") + e.what());
      return std::nullopt;
    } catch (const std::bad_alloc&) {
      return std::nullopt;
    }
  }

 private:
  Executable& exec_;
  const SymbolValues& symbols_;
  std::vector<std::shared_ptr<const KernelStep>> built_;
};

// Progress on stderr once tuning has taken more than 2 s, at most once a second.
class Progress {
 public:
  Progress(size_t steps, Clock::time_point start) : steps_(steps), start_(start) {}
  void update(size_t done, double best_gain) {
    double now = seconds_since(start_);
    if (now < 2.0 || now - last_ < 1.0) return;
    last_ = now;
    std::fprintf(stderr, "ember: max-autotune: %zu of %zu steps, %.1f s, best gain so far %.2fx\n", done, steps_, now,
                 best_gain);
  }

 private:
  size_t steps_;
  Clock::time_point start_;
  double last_ = 0;
};

void log_candidate(const std::string& name, const std::string& choice, const std::string& outcome) {
  if (config::log_enabled("autotune")) config::log("autotune", name + ": " + choice + ": " + outcome);
}

std::string us_str(double seconds) { return std::to_string(static_cast<int64_t>(seconds * 1e6)) + " us"; }

// A candidate whose fastest run is this much slower than the best median so far is not timed
// further: the racing of sweep tools, which keeps the budget for candidates that may win.
constexpr double kHopeless = 1.3;

// Searches step t's space within `budget_s` seconds; returns the record and the winning choice.
std::pair<TuningRecord, Choice> search_step(StepRunner& runner, const Tunable& t, const std::string& name,
                                            double budget_s, const AutotuneOptions& options, int& timed) {
  Clock::time_point start = Clock::now();
  TuningRecord record;
  record.step = t.step;
  record.name = name;
  std::vector<Array> reference = t.outputs;
  Timing base = measure(runner.runner(t.step, runner.kernel_for(t.step, {}), {}, t.inputs, reference), budget_s / 4);
  const std::optional<std::vector<Array>> exact = runner.exact_outputs(t.step, t.inputs, t.outputs, base.median, budget_s);
  const double default_error = exact ? rms_error(reference, *exact) : 0.0;
  ++timed;
  record.default_us = base.median * 1e6;
  log_candidate(name, "default", us_str(base.median) + " (noise " + std::to_string(int(base.spread * 100)) + "%)");
  // A candidate costs its compile (tens of ms) and its timing (tens of the default's runs).
  double cost = std::max(0.03, 20 * base.median);
  int evaluations = std::max(1, static_cast<int>((budget_s - seconds_since(start)) / cost));
  std::unique_ptr<Search> search = make_search(options.search, t.space, evaluations, std::hash<std::string>{}(name));
  Choice best;
  double best_s = base.median;
  std::vector<Array> outputs;
  for (const Array& o : t.outputs) outputs.push_back(Array::empty(o.dtype(), o.shape()));
  while (seconds_since(start) < budget_s) {
    std::optional<Point> p = search->next();
    if (!p) break;
    Choice c = choice_at(t.space, *p);
    std::string text = choice_str(c);
    std::shared_ptr<const KernelStep> kernel;
    try {
      kernel = runner.kernel_for(t.step, c);
    } catch (const std::exception& e) {  // a config the code generator cannot compile
      ++record.rejected;
      search->tell(*p, std::numeric_limits<double>::infinity());
      log_candidate(name, text, std::string("failed to compile: ") + e.what());
      continue;
    }
    std::function<void()> run = runner.runner(t.step, kernel, c.settings, t.inputs, outputs);
    run();
    std::string why;
    if (!same_values(outputs, reference, why) || (exact && !as_accurate(outputs, *exact, default_error, why))) {
      ++record.rejected;
      search->tell(*p, std::numeric_limits<double>::infinity());
      log_candidate(name, text, "rejected: " + why);
      continue;
    }
    Timing time = measure(run, std::max(0.0, budget_s - seconds_since(start)), kHopeless * best_s);
    ++timed;
    ++record.timed;
    search->tell(*p, time.median);
    log_candidate(name, text, us_str(time.median));
    if (time.median < best_s) best_s = time.median, best = c;
  }
  // Only a gain beyond the noise counts.
  double margin = std::max(0.03, 2 * base.spread);
  if (best_s >= base.median * (1 - margin)) best = Choice{}, best_s = base.median;
  record.winner = choice_str(best);
  record.winner_us = best_s * 1e6;
  return {record, best};
}

}  // namespace

// The routes of a float32 GEMM step: the libraries, and ember's own where this build has it, with
// its tiles.
Space float32_gemm_routes() {
  std::vector<GemmRoute> routes{GemmRoute::OneDnn, GemmRoute::Blas};
  if (!kernels::has_own_gemm()) return {gemm_routes(routes)};
  routes.push_back(GemmRoute::Generated);  // [Note: ember's own GEMM]
  Knob tiles{"tile", {0}, "gemm", static_cast<int64_t>(GemmRoute::Generated)};
  for (GemmTile t : own_gemm_tiles()) tiles.options.push_back(t.option());
  return {gemm_routes(routes), tiles};
}

Space step_space(const Executable& exec, int step) {
  int threads = num_threads();
  Space space;
  if (dynamic_cast<const cpu::GemmEpilogue*>(exec.step_kernel(step).get())) {
    space = float32_gemm_routes();  // ember's own runs the epilogue inside ([Note: GEMM epilogues])
  } else if (const KernelStep* k = exec.step_kernel(step).get()) {
    space = k->knobs();
  } else if (is_float32_gemm(exec.step_node(step))) {
    space = float32_gemm_routes();
  } else if (is_float32_conv(exec.step_node(step))) {
    // oneDNN's direct kernel, its brgemm one, or ember's own (im2col and GEMM, or depthwise),
    // whose GEMM's library is a choice too: a convolution of few pixels is a product with few
    // columns, where the libraries differ by up to 4x (benchmarks/results/autotune.md).
    const int64_t im2col = static_cast<int64_t>(ConvAlgorithm::Im2col);
    space.push_back({"conv", {0, static_cast<int64_t>(ConvAlgorithm::Brgemm), im2col}});
    if (!is_depthwise_conv(exec.step_node(step))) {  // a depthwise one runs no GEMM
      Knob routes = gemm_routes({GemmRoute::OneDnn, GemmRoute::Blas});
      routes.only_with = "conv";
      routes.only_value = im2col;
      space.push_back(routes);
    }
  } else if (is_blocked_attention(exec.step_node(step))) {
    // Its default is the own tiles where the CPU runs them, else oneDNN.
    space.push_back(gemm_routes({GemmRoute::OneDnn, GemmRoute::Blas}));
    space.push_back({"query_block", {0, 16, 32, 128}});
    space.push_back({"key_block", {0, 64, 128, 512}});
  } else {
    return space;
  }
  if (space.empty() && !exec.step_kernel(step)) return space;
  if (threads > 1) space.push_back({"threads", thread_options(threads)});
  return space;
}

// What the observed call leaves for tune(): the steps with a choice, as the call ran them.
struct Autotuner::State {
  Executable& exec;
  std::vector<Tunable> tunables;
  std::vector<double> step_s;
  int running = -1;
  Clock::time_point started;

  // Before step `step` runs: the previous one is done; keep what this one reads, if it has a
  // choice that the database does not know.
  void before(int step, std::span<const Array> in, std::span<const Array> out) {
    finish_running();
    running = step;
    Space space = step_space(exec, step);
    bool whole = std::all_of(out.begin(), out.end(), [](const Array& a) { return a.defined(); });
    if (!space.empty() && whole) {
      Tunable t;
      t.step = step;
      t.space = std::move(space);
      t.signature = step_signature(exec, step, in, out);
      auto twin = std::find_if(tunables.begin(), tunables.end(),
                               [&](const Tunable& o) { return o.twin_of < 0 && o.signature == t.signature; });
      if (twin != tunables.end()) t.twin_of = static_cast<int>(twin - tunables.begin());
      else t.known = tuning_db::load(t.signature);
      if (t.twin_of < 0 && !t.known) {
        for (const Array& a : in) t.inputs.push_back(copy_keeping_layout(a));
        for (const Array& a : out) t.outputs.push_back(Array::empty(a.dtype(), a.shape()));
      }
      tunables.push_back(std::move(t));
    }
    started = Clock::now();  // the copies are not the step's time
  }
  void finish_running() {
    if (running >= 0) step_s[running] = seconds_since(started);
    running = -1;
  }
};

Autotuner::Autotuner(Executable& exec) : state_(new State{exec, {}, std::vector<double>(exec.steps(), 0.0), -1, {}}) {}
Autotuner::~Autotuner() = default;

StepObserver Autotuner::observer() {
  return [this](int step, std::span<const Array> in, std::span<const Array> out) { state_->before(step, in, out); };
}

AutotuneResult Autotuner::tune(const SymbolValues& symbols, const AutotuneOptions& options) {
  Clock::time_point start = Clock::now();
  state_->finish_running();
  std::vector<Tunable>& tunables = state_->tunables;
  // A step's time counts for the tunable whose choice it takes (its twin's), so that a kernel
  // that runs in every layer gets the search its total time deserves.
  double total_s = 0;
  for (Tunable& t : tunables) {
    double s = state_->step_s[t.step];
    tunables[t.twin_of < 0 ? &t - tunables.data() : t.twin_of].profile_s += s;
    total_s += s;
  }
  Executable& exec = state_->exec;
  AutotuneResult result;
  StepRunner runner(exec, symbols);
  Progress progress(tunables.size(), start);
  double best_gain = 1.0;
  std::vector<Choice> chosen(tunables.size());
  for (size_t i = 0; i < tunables.size(); ++i) {
    const Tunable& t = tunables[i];
    std::string name = step_name(exec, t.step);
    TuningRecord record;
    Choice& choice = chosen[i];
    if (t.twin_of >= 0) {  // the same step as an earlier one: its choice, timed once
      choice = chosen[t.twin_of];
      runner.apply(t.step, choice);
      const TuningRecord& twin = result.steps[t.twin_of];
      result.steps.push_back({t.step, name, 0, choice_str(choice), 0, twin.from_database, 0, 0, "", twin.step});
      continue;
    }
    if (t.known) {
      try {
        choice = parse_choice(*t.known);
      } catch (const Error& e) {  // an entry this version cannot read: the default, as a miss would
        config::log("cache", std::string("a tuning entry would not parse: ") + e.what());
      }
      runner.apply(t.step, choice);
      result.steps.push_back({t.step, name, 0, choice_str(choice), 0, true, 0, 0, ""});
      continue;
    }
    double share = total_s > 0 ? t.profile_s / total_s : 1.0 / tunables.size();
    std::tie(record, choice) = search_step(runner, t, name, options.budget_s * share, options, result.timed);
    runner.apply(t.step, choice);
    tuning_db::store(t.signature, choice_str(choice));
    if (record.winner_us > 0) best_gain = std::max(best_gain, record.default_us / record.winner_us);
    result.steps.push_back(record);
    progress.update(i + 1, best_gain);
  }
  result.seconds = seconds_since(start);
  return result;
}

AutotuneResult autotune(Executable& exec, std::span<const Array> inputs, const SymbolValues& symbols,
                        const AutotuneOptions& options) {
  Autotuner tuner(exec);
  exec.run(inputs, symbols, nullptr, {}, tuner.observer());
  return tuner.tune(symbols, options);
}

}  // namespace ember::codegen

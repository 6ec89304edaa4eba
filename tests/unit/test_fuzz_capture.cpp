// The capture fuzzer's test: random programs through compile() and eagerly, compared bit for bit
// on every call (fuzz_capture.h says what is drawn, what is checked and the settings). The
// programs run in batches in child processes; the parent reads what each child reported, finds
// each failure again to print it (minimised) and sums the failures up by category.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tests/catch.h"
#include "tests/unit/fuzz_capture.h"
#include "tests/unit/helpers.h"

using namespace ember;
using namespace ember::capture_fuzz;

namespace {

const std::optional<bool> kDynamics[] = {std::nullopt, true, false};

std::optional<bool> parse_dynamic(const std::string& d) {
  if (d == "true") return true;
  if (d == "false") return false;
  return std::nullopt;
}

struct Settings {
  std::vector<uint64_t> seeds;
  std::vector<std::optional<bool>> dynamics;
  int64_t show = 3;  // how many failures to print in full
  bool minimise = true, verbose = false, triage = false;
};

Settings read_settings(int64_t default_programs) {
  Settings s;
  const int64_t programs = env_int("EMBER_FUZZ_PROGRAMS", default_programs);
  const int64_t only_seed = env_int("EMBER_FUZZ_SEED", -1);
  s.show = env_int("EMBER_FUZZ_SHOW", 3);
  s.minimise = env_str("EMBER_FUZZ_MINIMIZE") != "0";
  s.verbose = env_str("EMBER_FUZZ_VERBOSE") == "1";
  s.triage = env_str("EMBER_FUZZ_TRIAGE") == "1";
  s.dynamics.assign(std::begin(kDynamics), std::end(kDynamics));
  if (std::string d = env_str("EMBER_FUZZ_DYNAMIC"); !d.empty()) s.dynamics = {parse_dynamic(d)};
  if (only_seed >= 0) s.seeds.push_back(static_cast<uint64_t>(only_seed));
  else
    for (int64_t i = 0; i < programs; ++i) s.seeds.push_back(kBaseSeed + static_cast<uint64_t>(i));
  return s;
}

// ---------------------------------------------------------------------------------------------
// Running the programs

// One program under every dynamic setting, in this process: "calls <n> <eager errors>" and then
// one "fail <dynamic> <category>" line per failing setting.
std::string run_program(uint64_t seed, const std::vector<std::optional<bool>>& dynamics, int progress) {
  set_running(seed, "generating");
  Case cs = generate(seed);
  if (progress >= 0) write_all(progress, "generated\n");  // the parent may generate it too
  set_running(seed, "eager");
  Prepared pr = prepare(cs);
  int errors = 0;
  for (const Outcome& o : pr.eager) errors += o.status != Outcome::Ok;
  std::string out = "calls " + std::to_string(cs.calls.size() * dynamics.size()) + " " + std::to_string(errors) + "\n";
  for (std::optional<bool> dynamic : dynamics) {
    set_running(seed, dynamic ? (*dynamic ? "compiled, dynamic=true" : "compiled, dynamic=false") : "compiled, dynamic unset");
    if (auto f = run_compiled(cs, pr, dynamic)) out += "fail " + dynamic_str(dynamic) + " " + f->mismatch.category + "\n";
  }
  return out;
}

// What the child reported for one seed.
struct Result {
  uint64_t seed = 0;
  std::string out;  // run_program's lines
  bool done = false;
  std::string crash;
};

// The seeds from `next` on, in one child: each reports "begin <seed>", its results and "end",
// sent as they come so that they outlive a crash.
std::string run_batch(const Settings& s, size_t next) {
  return isolated([&](int fd) {
    std::string all;
    for (size_t i = next; i < s.seeds.size(); ++i) {
      if (s.verbose) std::fprintf(stderr, "seed %llu\n", static_cast<unsigned long long>(s.seeds[i]));
      std::string begin = "begin " + std::to_string(s.seeds[i]) + "\n";
      if (fd >= 0) write_all(fd, begin);
      std::string block = run_program(s.seeds[i], s.dynamics, fd) + "end\n";
      if (fd >= 0) write_all(fd, block);
      else all += begin + block;
    }
    return all;
  });
}

// Every seed, a batch per child process; after a crash, a new child goes on with the next seed.
std::vector<Result> run_all(const Settings& s) {
  std::vector<Result> results;
  for (size_t next = 0; next < s.seeds.size();) {
    std::string out = run_batch(s, next);
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("begin ", 0) == 0) {
        results.push_back({std::stoull(line.substr(6)), "", false, ""});
        ++next;
      } else if (line == "end") {
        results.back().done = true;
      } else if (!results.empty()) {
        results.back().out += line + "\n";
      }
    }
    if (crashed(out) && !results.empty() && !results.back().done) results.back().crash = crash_category(out);
    else if (crashed(out)) break;  // a crash outside any program: nothing more to learn
  }
  return results;
}

// ---------------------------------------------------------------------------------------------
// Tallying and reporting the failures

// Failures of one category (with EMBER_FUZZ_TRIAGE=1: also features, ops and dynamic setting).
struct Class {
  int count = 0;
  std::vector<uint64_t> seeds;  // the first 8
  std::string example;          // the report of the first
};

struct Tally {
  std::map<std::string, Class> classes;
  int failures = 0, calls = 0, eager_errors = 0, shown = 0;
};

using FailingRun = std::pair<std::optional<bool>, std::string>;  // (dynamic, category)

// Counts a result's calls and eager errors; returns its failing runs.
std::vector<FailingRun> read_result(const Result& r, Tally& t) {
  std::vector<FailingRun> failing;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("calls ", 0) == 0) {
      std::istringstream in(line.substr(6));
      int n = 0, e = 0;
      in >> n >> e;
      t.calls += n;
      t.eager_errors += e;
    } else if (line.rfind("fail ", 0) == 0) {
      size_t space = line.find(' ', 5);
      failing.emplace_back(parse_dynamic(line.substr(5, space - 5)), line.substr(space + 1));
    }
  }
  return failing;
}

// After a crash in a compiled run or in eager: which settings crashed (every one, if eager did)?
// Each is found again in a child of its own.
void add_crashed_runs(const Result& r, const std::vector<std::optional<bool>>& dynamics,
                      std::vector<FailingRun>& failing) {
  Case cs = generate(r.seed);
  for (std::optional<bool> dynamic : dynamics) {
    std::string cat = category_of(cs, dynamic);
    if (!cat.empty() && std::none_of(failing.begin(), failing.end(), [&](const auto& f) { return f.first == dynamic; }))
      failing.emplace_back(dynamic, cat);
  }
  if (failing.empty()) failing.emplace_back(dynamics.front(), r.crash);
}

// Counts a failing run in its class, and prints it (found again in a child, and minimised) when
// it is among the first EMBER_FUZZ_SHOW; the first of each class is kept for the summary.
void record_failure(const Case& cs, std::optional<bool> dynamic, const std::string& category, const Settings& s,
                    Tally& t) {
  ++t.failures;
  std::string class_key = category;
  Case small;
  bool minimised = false;
  if (s.triage) {
    // Minimise every failure and group them by category, features and ops.
    small = minimize(cs, dynamic, category);
    minimised = true;
    class_key += " | " + features(small) + " | " + ops_key(small.prog) + " | dynamic=" + dynamic_str(dynamic);
  }
  Class& c = t.classes[class_key];
  ++c.count;
  if (c.seeds.size() < 8 && (c.seeds.empty() || c.seeds.back() != cs.seed)) c.seeds.push_back(cs.seed);
  bool first_of_class = c.count == 1;
  if (!first_of_class && t.shown >= s.show) return;
  std::string report = "capture fuzz failure: " + report_of(cs, dynamic, category, false);
  if (s.minimise) {
    if (!minimised) small = minimize(cs, dynamic, category);
    report += "\nminimised (" + features(small) + "):\n" + report_of(small, dynamic, category, true);
  }
  if (first_of_class) c.example = report;
  if (t.shown < s.show) {
    // The report goes to stderr as it is: Catch wraps messages at 80 columns.
    ++t.shown;
    std::cerr << "\n==== " << report << std::flush;
    FAIL_CHECK("seed " << cs.seed << ", dynamic=" << dynamic_str(dynamic) << ": " << category
                       << " (the program is printed above)");
  }
}

void tally_result(const Result& r, const Settings& s, Tally& t) {
  std::vector<FailingRun> failing = read_result(r, t);
  if (!r.crash.empty()) {
    if (r.out.find("generated\n") == std::string::npos) {
      ++t.failures;
      Class& c = t.classes["generating the program crashed: " + r.crash];
      if (c.seeds.size() < 8) c.seeds.push_back(r.seed);
      ++c.count;
      return;
    }
    add_crashed_runs(r, s.dynamics, failing);
  }
  if (failing.empty()) return;
  Case cs = generate(r.seed);
  for (const auto& [dynamic, category] : failing) record_failure(cs, dynamic, category, s, t);
}

// The classes with their counts and seeds, and the first example of each.
void print_summary(const Tally& t, const Settings& s) {
  if (t.classes.empty()) return;
  std::ostringstream summary;
  summary << t.failures << " failing runs of " << s.seeds.size() << " programs x " << s.dynamics.size()
          << " dynamic settings; classes:\n";
  for (const auto& [name, c] : t.classes) {
    summary << "  " << c.count << " x " << name << "; seeds:";
    for (uint64_t seed : c.seeds) summary << " " << seed;
    summary << "\n";
  }
  std::cerr << "\n" << summary.str() << "\nfirst example of each class:\n";
  for (const auto& [name, c] : t.classes) std::cerr << "---- " << name << "\n" << c.example << "\n";
  UNSCOPED_INFO(summary.str());
}

}  // namespace

namespace {

// Runs the programs and checks the tally.
void fuzz(const Settings& settings) {
  CrashReporter crash_reporter;  // when not forking: at least name the seed
  Tally tally;
  for (const Result& r : run_all(settings)) tally_result(r, settings, tally);
  print_summary(tally, settings);
  // Named for what Catch prints of the checks.
  const int failures = tally.failures, calls = tally.calls, eager_errors = tally.eager_errors;
  CHECK(failures == 0);
  // The generator keeps most programs valid: errors are checked, but they are not the point.
  CHECK(eager_errors < calls / 2);
}

}  // namespace

// Capture, guards, replay and passes are exact: on the interpreter, bit for bit.
TEST_CASE("fuzz: compiled programs equal eager bit for bit on every call", "[fuzz][capture]") {
  test::ScopedEnv interpreter("EMBER_CODEGEN", "0");
  fuzz(read_settings(kDefaultPrograms));
}

// Generated kernels round differently (polynomial exp, log, ...): floats within tolerances.
TEST_CASE("fuzz: compiled programs on generated code equal eager within tolerances", "[fuzz][capture][codegen]") {
  test::ScopedEnv codegen("EMBER_CODEGEN", "1");
  test::ScopedEnv tolerance("EMBER_FUZZ_TOLERANCE", "1");
  fuzz(read_settings(kDefaultCodegenPrograms));
}

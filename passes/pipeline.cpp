#include "passes/pipeline.h"

#include <chrono>

#include "ir/error.h"
#include "passes/pass.h"
#include "runtime/config.h"

namespace ember {

Pipeline::Pipeline(std::vector<std::string> passes) : passes_(std::move(passes)) {
  for (const std::string& p : passes_) make_pass(p);  // throws on an unknown name
}

std::vector<PassTiming> Pipeline::run(Graph& g) const {
  std::vector<PassTiming> timings;
  bool verify = config::verify_enabled();
  if (verify) verify_graph_named(g, "the pipeline's input");
  std::vector<std::string> names = passes_;
  for (std::string& extra : config::extra_passes()) names.push_back(std::move(extra));
  for (const std::string& name : names) {
    PassTiming t{name};
    if (config::pass_disabled(name)) {
      t.skipped = true;
      timings.push_back(t);
      continue;
    }
    auto pass = make_pass(name);
    auto start = std::chrono::steady_clock::now();
    t.changed = pass->run(g);
    t.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (verify) verify_graph_named(g, "pass '" + name + "'");
    if (config::dump_after(name)) config::dump("after-" + name + ".ir", t.changed ? print(g) : "(unchanged)\n");
    if (config::log_enabled("passes"))
      config::log("passes", name + ": " + (t.changed ? "changed" : "unchanged") + ", " + std::to_string(t.ms) + " ms");
    timings.push_back(t);
  }
  return timings;
}

void verify_graph_named(const Graph& g, const std::string& after) {
  try {
    verify(g);
  } catch (const Error& e) {
    EMBER_THROW(Internal, "the IR is invalid after ", after, ": ", e.what());
  }
}

}  // namespace ember

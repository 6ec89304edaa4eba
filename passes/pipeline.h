// Runs a list of passes over a graph: the verifier between passes (EMBER_VERIFY, on in debug and
// test builds; a failure names the pass that broke the IR), EMBER_DISABLE_PASSES,
// EMBER_EXTRA_PASSES (appended to the list when run() is called; an unknown name throws then),
// EMBER_DUMP_AFTER and per-pass timing.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace ember {

struct PassTiming {
  std::string pass;
  double ms = 0;
  bool changed = false;
  bool skipped = false;
};

class Pipeline {
 public:
  explicit Pipeline(std::vector<std::string> passes);  // checks every name
  const std::vector<std::string>& passes() const { return passes_; }
  std::vector<PassTiming> run(Graph& g) const;

 private:
  std::vector<std::string> passes_;
};

// verify(g), with a failure that says what ran before: "the IR is invalid after pass 'cse'".
void verify_graph_named(const Graph& g, const std::string& after);

}  // namespace ember

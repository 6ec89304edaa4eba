// One captured graph to a runnable plan under a mode: the mode's passes, then the CPU plan
// (generated kernels and interpreter steps), with what the report says about it. The C++
// tracer's compiled functions and the PyTorch bridge (which captures graphs through Dynamo)
// both compile graphs through here.
#pragma once

#include <memory>

#include "frontend/report.h"
#include "ir/graph.h"
#include "modes/mode.h"
#include "passes/pipeline.h"
#include "runtime/executable.h"

namespace ember {

// Fills `info` (except id and hash). A pass that fails leaves the graph unoptimised with a
// warning, and `strict` raises instead; so does a kernel that fails to compile.
std::shared_ptr<const Executable> compile_graph(const Graph& g, const ModeConfig& mode, const Pipeline& pipeline,
                                                bool strict, GraphInfo& info);

}  // namespace ember

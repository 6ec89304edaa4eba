// The graph-break and recompile report of a compiled function, as returned by explain() and
// CompiledFunction::report(), with a readable text form and a JSON form.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/tuning_db.h"

namespace ember {

struct GraphBreak {
  std::string category;  // "item", "bool", "data", "print"
  std::string reason;
  std::string op;
  std::string file;
  int line = 0;
  std::string hint;
  std::string location() const { return file + ":" + std::to_string(line); }
};

struct GraphInfo {
  int id = 0;
  uint64_t hash = 0;
  int op_count = 0;
  std::map<std::string, int> ops;  // op name -> count
  double compile_ms = 0;
  bool cache_hit = false;          // found among this function's compiled graphs
  std::vector<std::pair<std::string, double>> pass_ms;  // time in each pass, in pipeline order
  std::string ir;                  // the optimised graph's text
  int steps = 0;                   // steps of its plan (runtime/executable.h)
  int buffers = 0;                 // buffers of its plan, allocated once per call
  int64_t allocations = 0;         // storages one call allocated: buffers plus kernel temporaries
  int kernels = 0;                 // steps that run generated code
  int kernels_compiled = 0;        // of those, compiled for this graph
  int kernels_from_disk = 0;       // of those, loaded from the on-disk cache (the rest were in memory)
  double kernel_compile_ms = 0;    // time spent compiling them (part of compile_ms)
  std::vector<std::string> interpreter_ops;  // ops of the steps that run on the interpreter
  // What the mode did (modes/mode.h): its name, whether the plan keeps its buffers between
  // calls, and what max-autotune measured and chose per step.
  std::string mode;
  bool static_plan = false;
  size_t held_bytes = 0;               // a static plan's buffers between calls ([Note: bounded static plans])
  size_t held_limit = SIZE_MAX;        // the most it may hold: Options::static_plan_mb for each plan
  int static_plans = 1;                // max-autotune keeps a plan per bucket of sizes
  bool autotuned = false;
  double autotune_s = 0;        // time spent tuning (part of compile_ms)
  int autotune_timed = 0;       // timings, each step's default and its candidates: 0 when every choice came from the database
  std::vector<TuningRecord> tuning;
};

// What the mode did, in lines: "mode max-autotune: static plan; tuned 5 steps in 1.20 s (2 from
// the tuning database, 1 as an identical earlier step; timed 2 defaults and 12 candidates)", then each step whose choice is not the default and
// each that was timed. Empty when the graph has no mode (a fallback).
std::string mode_summary(const GraphInfo& g);

struct Recompile {
  std::string guard;   // the failing guard, e.g. "input 0 dim 1: 128 -> 256"
  std::string action;  // "recompiled", "recompiled with dynamic dims ...", "fell back to eager"
};

struct Report {
  std::vector<GraphInfo> graphs;
  std::vector<GraphBreak> breaks;
  std::vector<std::string> guards;
  std::vector<Recompile> recompiles;
  std::vector<std::string> notes;  // fallbacks and specialisations
  int segment_evictions = 0;       // compiled graphs dropped by Options::segment_cache_limit

  int graph_count() const { return static_cast<int>(graphs.size()); }
  int graph_break_count() const { return static_cast<int>(breaks.size()); }
  std::string text() const;
  std::string json() const;
};

}  // namespace ember

// Internal: the tracer. A TraceContext is active on a thread while a compiled function runs its
// user code. Ops on tensors record nodes into the current segment graph; a request for concrete
// data breaks the graph: the segment is compiled and run, its live values become concrete, and
// recording resumes in a new segment.
#pragma once

#include <functional>
#include <memory>
#include <source_location>
#include <string>
#include <unordered_map>
#include <vector>

#include "frontend/report.h"
#include "frontend/tensor.h"
#include "ir/graph.h"
#include "runtime/executable.h"

namespace ember {

struct TensorImpl {
  Array value;                      // defined once concrete (eager, or materialised)
  TraceContext* ctx = nullptr;      // the trace that produced it, while that trace runs
  Node* node = nullptr;             // its node in the current segment, while not materialised
  int output = 0;                   // which output of `node` it is
  TensorType type;                  // its type; symbolic dims while `ctx` is set
  bool poisoned = false;            // produced by a trace that failed

  bool is_traced() const { return node != nullptr; }
};

// Where a segment's graph input comes from, so a replay can find it without tracing.
struct InputSource {
  enum Kind { Arg, Captured, Materialized } kind = Arg;
  int arg = -1;        // for Arg: the index among the function's tensor arguments
  Array captured;      // for Captured: the array (kept alive by the trace cache)
};

// What the guards of one trace check: dtype, rank and dims of each tensor argument (a dim is a
// value or a symbol), layout, and facts learnt while tracing (a symbolic size used as an int).
struct TensorGuard {
  DType dtype;
  Shape shape;
  bool contiguous = true;
};
struct Guards {
  std::vector<TensorGuard> tensors;
  std::vector<SymbolRange> symbols;
  std::vector<std::pair<Dim, int64_t>> specialisations;  // dim == value
  std::vector<SymbolicFact> facts;  // what shape inference relied on ([Note: symbolic facts])
  // Checks `args`; on success fills `values` with the symbols' values and returns "", else
  // returns the first failing guard, e.g. "input 0 dim 1: 128 -> 256".
  std::string check(const std::vector<Array>& args, SymbolValues& values) const;
  std::vector<std::string> describe() const;
};

class GraphPlan;  // frontend/graph_compile.h

// The compile-side services a trace needs; implemented by the compiled function.
class SegmentCompiler {
 public:
  virtual ~SegmentCompiler() = default;
  // Compiles (or finds in the cache) the plan for `g` and runs it on this call's inputs
  // into `results`; fills `info` for the report. A graph compiled now under max-autotune is
  // tuned around this first run (frontend/graph_compile.h).
  virtual std::shared_ptr<const GraphPlan> compile(const Graph& g, GraphInfo& info, std::span<const Array> inputs,
                                                   const SymbolValues& symbols, std::vector<Array>& results) = 0;
};

class TraceContext : public FactSink {
 public:
  TraceContext(SegmentCompiler& compiler, bool fullgraph, Report& report);
  ~TraceContext();
  TraceContext(const TraceContext&) = delete;
  TraceContext& operator=(const TraceContext&) = delete;

  static TraceContext* current();

  // Declares tensor argument `index` with its (possibly symbolic) type for this trace.
  void add_arg(const Tensor& t, int index, TensorType type);
  int add_symbol(SymbolRange range, int64_t value);
  bool is_arg(const TensorImpl& impl) const { return args_.count(&impl) > 0; }
  const SymbolValues& symbol_values() const { return values_; }

  Tensor record(Op op, const std::vector<Tensor>& inputs, Attrs attrs);
  // Records a multi-output op: one tensor per output.
  std::vector<Tensor> record_multi(Op op, const std::vector<Tensor>& inputs, Attrs attrs);
  // The type of `t` as this trace sees it (symbolic for arguments and traced values).
  TensorType type_of(const TensorImpl& impl) const;
  // Records a guard that `dim` equals `value` in this trace.
  void specialise(const Dim& dim, int64_t value);
  // FactSink: a fact that holds for this call's sizes becomes a guard.
  bool check(const SymbolicFact& fact) override;
  // A number read out of a traced value (item()). Where it comes back as a scalar operand, it
  // enters the segment as an input instead of a constant, so that break-y functions reuse their
  // compiled segments whatever the value.
  void note_read_value(double value);
  // Breaks the graph (or throws under fullgraph): the segment so far runs and every live value
  // of it becomes concrete.
  void graph_break(const std::string& category, const std::string& reason,
                   const std::string& op, const std::string& file, int line, const std::string& hint);

  // Ends the trace: the last segment is compiled and run with `outputs` (and every other live
  // traced value) as its outputs.
  void finish(const std::vector<Tensor>& outputs);

  int segments() const { return segments_; }
  bool had_breaks() const { return breaks_ > 0; }
  // Valid after finish() when the trace had no break: what a replay needs.
  std::shared_ptr<const GraphPlan> single_plan() const { return last_plan_; }
  const std::vector<InputSource>& single_inputs() const { return last_inputs_; }
  const Guards& guards() const { return guards_; }
  Guards& guards() { return guards_; }

 private:
  Value node_for(const Tensor& t);
  Node* add_node(Op op, std::vector<Value> inputs, Attrs attrs);
  void run_recorded_ops();
  bool is_read_value(const Attrs& full_attrs) const;
  void flush(const std::vector<Tensor>& outputs);
  void begin_segment();

  SegmentCompiler& compiler_;
  bool fullgraph_;
  Report& report_;
  TraceContext* previous_;
  std::unique_ptr<Graph> graph_;
  std::vector<InputSource> sources_;
  std::vector<Array> input_values_;
  // Keyed by address, so the tensors are held: a temporary freed mid-segment must not let
  // another tensor at the same address pass for it.
  std::unordered_map<const TensorImpl*, Node*> segment_inputs_;
  std::vector<std::shared_ptr<TensorImpl>> held_inputs_;
  std::unordered_map<const TensorImpl*, std::pair<int, TensorType>> args_;
  std::vector<std::weak_ptr<TensorImpl>> produced_;      // traced, this segment
  std::vector<std::weak_ptr<TensorImpl>> all_produced_;  // every segment, to release at the end
  std::vector<SymbolRange> ranges_;
  SymbolValues values_;
  Guards guards_;
  std::vector<uint64_t> read_values_;  // bit patterns of note_read_value()
  int segments_ = 0, breaks_ = 0;
  std::shared_ptr<const GraphPlan> last_plan_;
  std::vector<InputSource> last_inputs_;
};

// Runs `op` on `inputs`: records it when a trace is active, else runs the interpreter now.
Tensor apply(Op op, const std::vector<Tensor>& inputs, Attrs attrs = {});
// The same for a multi-output op: one tensor per output.
std::vector<Tensor> apply_multi(Op op, const std::vector<Tensor>& inputs, Attrs attrs = {});

// Where the user's call is, for a front end in another language (Python): while one is alive on
// this thread, a graph break reports its file and line instead of the C++ caller's.
class ScopedCallerLocation {
 public:
  ScopedCallerLocation(std::string file, int line);
  ~ScopedCallerLocation();
  ScopedCallerLocation(const ScopedCallerLocation&) = delete;
  ScopedCallerLocation& operator=(const ScopedCallerLocation&) = delete;
  // The innermost one's (file, line), or null.
  static const std::pair<std::string, int>* current();

 private:
  std::pair<std::string, int> location_;
  const std::pair<std::string, int>* previous_;
};

}  // namespace ember

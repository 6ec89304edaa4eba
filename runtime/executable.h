// A compiled graph, ready to run: a plan of steps over numbered buffers.
//
// [Note: plans]
// Each value of the graph lives in one place: a graph input's own array, a constant made once
// when the plan is built, a view of another value (view ops share their input's storage), or one
// of the plan's numbered buffers. Each step (an interpreter kernel today; a generated kernel, a
// library call or an extern later) reads its input values and writes its outputs into the
// buffers it is given. Buffer sizes are polynomials of the symbols, evaluated once per call;
// values whose lifetimes do not overlap share a buffer (a view keeps the buffer it looks into
// alive until its own last use; outputs live to the end). So a call allocates one storage per
// buffer, plus whatever a kernel needs inside, and run() reports the count.
// This is the shape that generated kernels, static arenas (reduce-overhead) and CUDA graphs
// plug into.
#pragma once

#include <cstdint>
#include <functional>
#include <atomic>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "runtime/array.h"
#include "runtime/step_settings.h"

namespace ember {

// Generated code for a group of nodes (codegen/): it reads the group's input arrays (any
// strides) and writes the group's outputs into the destinations it is given (contiguous, of the
// outputs' types with this call's sizes).
class KernelStep {
 public:
  virtual ~KernelStep() = default;
  virtual void run(std::span<const Array> inputs, std::span<const Array> outputs) const = 0;
  virtual std::string name() const = 0;  // for the plan's text
  // Whether an output may be written over the memory of an input of its shape and element size
  // (one that dies here): true when the kernel reads each element of such an input only where
  // it stores the same element of its outputs, and before it stores it (elementwise kernels).
  virtual bool may_overwrite_inputs() const { return false; }
  // The choices this kernel leaves open at the calling thread's thread count (max-autotune,
  // codegen/autotune.h), each knob's option 0 being this kernel's own; none by default.
  virtual std::vector<Knob> knobs() const { return {}; }
  // The kernel that computes the same with `choice` ("name=value ..." of knobs(), non-default
  // values only; "" is this one). Throws when it cannot be built.
  virtual std::shared_ptr<const KernelStep> with(const std::string& choice) const;
};

// A group of nodes that one KernelStep computes. The group must be convex (no path leaves it
// and comes back): the plan then orders it as one step.
struct FusedStep {
  std::vector<const Node*> nodes;  // in graph order
  std::vector<Value> inputs;       // values from outside the group, in the kernel's order
  std::vector<Value> outputs;      // values read outside the group or returned, likewise
  std::shared_ptr<const KernelStep> kernel;
};

// Plans' sizes evaluated and buffers bound by this thread so far: once per call, but for the
// steady state of a static plan (reduce-overhead), which finds them bound by an earlier call of
// the same sizes.
int64_t plan_bindings();
// View steps that this thread's plans ran through the interpreter: only those whose layout
// could not resolve them ([Note: views resolved per layout]).
int64_t plan_views_run();
// Step destinations (the arrays a step writes into: a buffer with this call's shape) that this
// thread's plans have built: every one on every call, but for the steady state of a static plan,
// whose launches keep theirs while their buffers stay.
int64_t plan_destinations_built();

// A buffer that outputs live in or view: its size in bytes, and, when it is exactly one output
// (that output alone, contiguous, filling the buffer), that output's index, dtype and shape.
struct OutputBuffer {
  size_t bytes = 0;
  int output = -1;  // the plan's output that is this whole buffer, or -1
  DType dtype = DType::UInt8;
  std::vector<int64_t> shape;
};
// Storages for the given buffers, one each: where a caller wants the memory of a plan's outputs
// to come from (the PyTorch bridge: PyTorch's allocator, so its statistics stay true). For a
// buffer that is exactly one output, the caller may make the output's own tensor and keep it
// as the output: no second tensor over the memory afterwards.
//
// [Note: outputs the caller makes]
// Such buffers are asked for on every call, in every mode: a static plan keeps the others (its
// intermediates and their launches' destinations) and never these. The plan cannot see whether
// the caller still holds a tensor it made (its reference is to PyTorch's memory, not to the
// plan's storage), so keeping the buffer would let the next call write over an output the caller
// holds; fresh, it costs one allocation per output, as eager pays, and the output leaves as
// PyTorch's own tensor (no DLPack import, resizable, counted by PyTorch's statistics).
using OutputStorages = std::function<std::vector<std::shared_ptr<Storage>>(const std::vector<OutputBuffer>&)>;
// Called before step `step` runs, with the arrays it reads and the destinations it writes.
using StepObserver = std::function<void(int step, std::span<const Array> inputs, std::span<const Array> outputs)>;

class Executable {
 public:
  // Every node runs on its interpreter kernel, except the groups in `fused`. With
  // `static_buffers` (reduce-overhead), each shape's sizes and buffers are kept from call to call:
  // an output's buffer is reused once only the plan holds it, and never when the caller makes it
  // ([Note: outputs the caller makes]); a new size may take over an old one's ([Note: size buckets]).
  explicit Executable(std::unique_ptr<Graph> graph, std::vector<FusedStep> fused = {},
                      bool static_buffers = false);
  const Graph& graph() const { return *graph_; }
  // Thread-safe: all per-call state lives in the call. `allocations`, when given, receives the
  // storages this call allocated: one per buffer, plus kernel temporaries. With
  // `output_storages`, the buffers that hold outputs (or that outputs are views of) come from
  // it, in one call, instead of from ember's allocator.
  std::vector<Array> run(std::span<const Array> inputs, const SymbolValues& symbols,
                         int64_t* allocations = nullptr, const OutputStorages& output_storages = {},
                         const StepObserver& observe = {}) const;

  // One step's parts, for max-autotune (codegen/autotune.h): its node (an interpreter step's, or
  // a kernel step's first), its kernel (null: the interpreter runs the node), its settings.
  const Node* step_node(int i) const { return steps_[i].node; }
  const std::shared_ptr<const KernelStep>& step_kernel(int i) const { return steps_[i].kernel; }
  const StepSettings& step_settings(int i) const { return steps_[i].settings; }
  // Runs step i alone on `inputs` into `outputs` (arrays of its output types at these sizes),
  // as run() runs it.
  void run_step(int i, std::span<const Array> inputs, std::span<const Array> outputs,
                const SymbolValues& symbols) const;
  // Before the executable is shared: step i runs `kernel` (the same computation as its own;
  // kept as it is when null) under `settings`.
  void set_step(int i, std::shared_ptr<const KernelStep> kernel, StepSettings settings);

  int steps() const { return static_cast<int>(steps_.size()); }
  bool static_plan() const { return static_buffers_; }  // reduce-overhead's: buffers kept between calls
  // A static plan's memory between calls: the bytes of the storages its kept sizes hold, and,
  // set before the executable is shared, the most it may hold ([Note: bounded static plans]).
  size_t held_bytes() const;
  void set_held_limit(size_t bytes) { held_limit_ = bytes; }
  size_t held_limit() const { return held_limit_; }
  // Steps that run generated code, and the ops of those that run on the interpreter.
  int kernel_steps() const;
  std::vector<std::string> interpreter_ops() const;
  int buffers() const { return static_cast<int>(buffer_slots_.size()); }
  // Whether `a` views the storage of one of the plan's constants (made once, alive with it).
  bool holds_constant(const Array& a) const;
  // The plan as text: one line per step with the buffers it reads and writes.
  std::string describe() const;

 private:
  enum class Home : uint8_t { Input, Constant, View, Buffer };
  struct Slot {
    Home home;
    int index = -1;  // the input, constant or buffer number (views: unused)
    Value value;
  };
  struct Step {
    const Node* node;  // an interpreter step's node; a kernel step's first node
    std::shared_ptr<const KernelStep> kernel;  // null: the interpreter runs `node`
    std::vector<int> inputs;   // slots read
    std::vector<int> outputs;  // slots written, one per output
    std::vector<int> release;  // slots whose last use this is
    StepSettings settings;     // how it runs (max-autotune's choice)
  };
  // The sizes of one set of symbol values: the shape of every buffer's values and the buffers'
  // bytes, and the view steps resolved. Shared by the bindings of those values, and kept for the
  // next call's.
  struct Layout {
    SymbolValues symbols;
    // Per buffer slot: an array of its shape, contiguous, without storage; a destination is it
    // over the buffer's storage.
    std::vector<Array> shaped;
    std::vector<size_t> sizes;  // per buffer, in bytes
    // The views, resolved on the layout's first or second call (views_resolved): written once,
    // under views_once, and read once views_ready says so. A resolved output is an array over
    // a stand-in of the storage the step's input lies in ([Note: views resolved per layout]).
    mutable std::vector<std::vector<Array>> views;  // per step: its outputs where resolved, else empty
    mutable std::vector<Array> view_in;  // per resolved step: the input it was resolved at
    mutable std::vector<int> view_input;  // per step: the input its resolution assumes contiguous at offset 0, or -1
    mutable std::vector<int> assumed_inputs;  // the inputs some resolution assumes so
    mutable std::vector<std::vector<int64_t>> assumed_shapes;  // and the shape it assumes of each
    // The plan's layout before this one, whose resolved views this one's resolution reuses
    // where a step's input is laid out as it was; dropped once this one is resolved.
    mutable std::shared_ptr<const Layout> previous;
    bool follows = false;  // made after another layout: its sizes change from call to call
    mutable std::atomic<int> calls{0};
    mutable std::atomic<bool> views_ready{false};
    mutable std::once_flag views_once;
  };
  std::shared_ptr<const Layout> layout_for(const SymbolValues& symbols) const;
  bool views_resolved(const Layout& layout) const;
  void resolve_views(const Layout& layout) const;
  std::vector<Array> resolve_view(size_t i, const Array& x, const SymbolValues& symbols) const;
  std::vector<Array> resolved_as_before(const Layout& previous, size_t i, const Array& x,
                                        const SymbolValues& symbols) const;
  std::vector<char> inputs_as_assumed(const Layout& layout, std::span<const Array> inputs) const;
  bool run_resolved_view(int index, const Layout* layout, const std::vector<char>& as_assumed,
                         std::vector<Array>& values) const;
  // A call's sizes, bound: their layout, the buffers' storages, and each step's destinations in
  // them.
  struct Binding {
    std::shared_ptr<const Layout> layout;
    std::vector<std::shared_ptr<Storage>> storages;
    // Each step's outputs' destinations, step i's from destination_offset_[i] on, in one vector
    // (one allocation for a plan's, not one per step); undefined: not a buffer.
    std::vector<Array> destinations;
    int64_t calls = 0;                             // calls of these sizes since it was bound
  };
  static constexpr size_t kBindings = 8;  // shapes a static plan keeps bound
  Binding take_binding(const SymbolValues& symbols, const OutputStorages& output_storages) const;
  bool is_free(const Binding& binding, size_t b) const;
  bool adopt_storages(Binding& binding) const;
  static size_t bucket_bytes(size_t bytes);
  void bind_destinations(Binding& binding, const std::vector<bool>& fresh) const;
  // `binding_us`: taking the call's binding (buffers, destinations); `give_back_us`: keeping it.
  void log_profile(std::vector<std::pair<double, size_t>> step_us, double binding_us, double give_back_us) const;
  static void run_kernel(const Step& step, std::span<const Array> args, std::span<const Array> destinations);
  // Runs `step`, leaving its results in `destinations` where they are buffers; returns them.
  std::vector<Array> run_one(const Step& step, std::span<const Array> args, std::span<const Array> destinations,
                             const SymbolValues& symbols) const;
  std::span<const Array> destinations_of(const Binding& binding, size_t step) const {
    return {binding.destinations.data() + destination_offset_[step], steps_[step].outputs.size()};
  }
  void give_back(Binding binding) const;
  void forget_callers_buffers(Binding& binding) const;
  static size_t binding_bytes(const Binding& binding);
  size_t kept_bytes() const;
  void plan_slots(const std::vector<FusedStep>& fused);
  void order_steps();
  void plan_buffers();
  void plan_exact_outputs(const std::vector<int>& root);
  OutputBuffer output_buffer(const Binding& binding, size_t b) const;

  std::unique_ptr<Graph> graph_;
  std::vector<Slot> slots_;
  std::vector<Array> constants_;
  std::vector<Step> steps_;
  std::vector<std::vector<int>> buffer_slots_;  // the slots each buffer holds, in turn
  std::vector<bool> holds_output_;              // per buffer: an output is in it or views it
  std::vector<int> exact_output_;               // per buffer: the output that is all of it, or -1
  std::vector<long> destination_refs_;          // per buffer: the step destinations in it
  std::vector<size_t> destination_offset_;      // per step: where its destinations start in a binding's
  std::vector<std::pair<int, int>> output_destinations_;  // (step, output) destinations in buffers of outputs
  std::vector<int> outputs_;
  bool static_buffers_ = false;
  size_t held_limit_ = SIZE_MAX;
  mutable std::mutex layout_mu_;
  mutable std::shared_ptr<const Layout> last_layout_;  // the latest call's: most calls repeat its sizes
  mutable std::mutex bindings_mu_;
  mutable std::vector<Binding> bindings_;  // kept bindings, most recently used last
};

}  // namespace ember

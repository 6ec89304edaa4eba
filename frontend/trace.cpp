// The tracer: recording ops into segment graphs, graph breaks, and flushing segments.
#include "frontend/trace.h"

#include <algorithm>
#include <bit>
#include <unordered_set>

#include "ir/error.h"
#include "ir/extern.h"
#include "runtime/config.h"
#include "runtime/interpreter.h"

namespace ember {

namespace {
thread_local TraceContext* current_context = nullptr;
}  // namespace

TraceContext::TraceContext(SegmentCompiler& compiler, bool fullgraph, Report& report)
    : compiler_(compiler), fullgraph_(fullgraph), report_(report), previous_(current_context) {
  current_context = this;
  begin_segment();
}

TraceContext::~TraceContext() {
  current_context = previous_;
  // Values still traced here belong to a trace that failed: using them later is an error.
  for (auto& weak : all_produced_)
    if (auto impl = weak.lock()) {
      if (impl->is_traced()) impl->poisoned = true;
      impl->node = nullptr;
      impl->ctx = nullptr;
      if (impl->value.defined()) impl->type = {impl->value.dtype(), to_shape(impl->value.shape())};
    }
}

TraceContext* TraceContext::current() { return current_context; }

void TraceContext::begin_segment() {
  graph_ = std::make_unique<Graph>();
  graph_->symbols() = ranges_;
  sources_.clear();
  input_values_.clear();
  segment_inputs_.clear();
  held_inputs_.clear();
  produced_.clear();
}

void TraceContext::add_arg(const Tensor& t, int index, TensorType type) {
  args_.emplace(t.impl().get(), std::pair{index, std::move(type)});
}

int TraceContext::add_symbol(SymbolRange range, int64_t value) {
  ranges_.push_back(range);
  values_.push_back(value);
  graph_->symbols() = ranges_;
  return static_cast<int>(ranges_.size()) - 1;
}

TensorType TraceContext::type_of(const TensorImpl& impl) const {
  if (impl.ctx == this) return impl.type;
  auto it = args_.find(&impl);
  if (it != args_.end()) return it->second.second;
  return {impl.value.dtype(), to_shape(impl.value.shape())};
}

bool TraceContext::check(const SymbolicFact& fact) {
  if (!fact.holds(values_)) return false;
  if (std::find(guards_.facts.begin(), guards_.facts.end(), fact) == guards_.facts.end()) {
    guards_.facts.push_back(fact);
    if (config::log_enabled("guards")) config::log("guards", "assumed " + fact.str());
  }
  return true;
}

void TraceContext::note_read_value(double value) { read_values_.push_back(std::bit_cast<uint64_t>(value)); }

bool TraceContext::is_read_value(const Attrs& attrs) const {
  auto shape = attrs.find("shape");
  auto value = attrs.find("value");
  if (shape == attrs.end() || value == attrs.end() || !std::get<Shape>(shape->second).empty()) return false;
  uint64_t bits = std::bit_cast<uint64_t>(std::get<double>(value->second));
  return std::find(read_values_.begin(), read_values_.end(), bits) != read_values_.end();
}

void TraceContext::specialise(const Dim& dim, int64_t value) {
  for (const auto& [d, v] : guards_.specialisations)
    if (d == dim) return;
  guards_.specialisations.emplace_back(dim, value);
  if (config::log_enabled("guards"))
    config::log("guards", "specialised " + dim.str() + " == " + std::to_string(value) + " (a size used as an integer)");
}

Value TraceContext::node_for(const Tensor& t) {
  TensorImpl* impl = t.impl().get();
  if (!impl) EMBER_THROW(Value, "[compile] an undefined tensor was used");
  if (impl->poisoned) EMBER_THROW(Value, "[compile] a tensor from a trace that failed was used");
  if (impl->is_traced()) {
    if (impl->ctx != this)
      EMBER_THROW(Value, "[compile] a traced tensor from another compiled call was used here; "
                         "return it from that function instead of storing it");
    return {impl->node, impl->output};
  }
  auto known = segment_inputs_.find(impl);
  if (known != segment_inputs_.end()) return known->second;
  InputSource src;
  auto arg = args_.find(impl);
  if (arg != args_.end()) {
    src.kind = InputSource::Arg;
    src.arg = arg->second.first;
  } else if (impl->ctx == this) {
    src.kind = InputSource::Materialized;
  } else {
    src.kind = InputSource::Captured;
    src.captured = impl->value;
  }
  Node* node = graph_->add_input(type_of(*impl));
  sources_.push_back(std::move(src));
  input_values_.push_back(impl->value);
  segment_inputs_[impl] = node;
  held_inputs_.push_back(t.impl());
  return node;
}

namespace {

Attrs concrete_attrs(Attrs attrs, const SymbolValues& values) {
  for (auto& [name, value] : attrs)
    if (auto* shape = std::get_if<Shape>(&value)) *shape = to_shape(evaluate(*shape, values));
  return attrs;
}

bool has_symbols(std::span<const TensorType> types, const Attrs& attrs) {
  for (const TensorType& t : types)
    if (!is_static(t.shape)) return true;
  for (const auto& [name, value] : attrs)
    if (auto* shape = std::get_if<Shape>(&value); shape && !is_static(*shape)) return true;
  return false;
}

}  // namespace

Node* TraceContext::add_node(Op op, std::vector<Value> inputs, Attrs attrs) {
  try {
    ScopedFactSink sink(this);
    return graph_->add(op, inputs, attrs);
  } catch (const Error& e) {
    std::vector<TensorType> types;
    for (const Value& v : inputs) types.push_back(v.type());
    if (!has_symbols(types, attrs)) {
      run_recorded_ops();
      throw;
    }
    // Say what eager says, with this call's sizes ("[6, 4] @ [3, 5]", not "[s0, 4] @ [3, s1]").
    std::vector<TensorType> concrete;
    std::vector<int> involved;
    for (const TensorType& t : types) {
      concrete.push_back({t.dtype, to_shape(evaluate(t.shape, values_))});
      for (const Dim& d : t.shape)
        for (int s : d.symbols()) involved.push_back(s);
    }
    Attrs eager_attrs = concrete_attrs(attrs, values_);
    try {
      infer_types(op, concrete, eager_attrs);
    } catch (const Error&) {
      run_recorded_ops();
      throw;
    }
    // Eager accepts these sizes: only the symbolic form failed, so specialise.
    throw SymbolicShapeError(e.what(), involved);
  }
}

// Eager would have run the ops recorded so far before this op's error, and raised theirs first
// (pow of integers by negative powers, then a matmul of the wrong dtype): run them now.
void TraceContext::run_recorded_ops() { flush({}); }

Tensor TraceContext::record(Op op, const std::vector<Tensor>& inputs, Attrs attrs) {
  EMBER_CHECK(!op_info(op).multi_output(), "record of the multi-output op '", op_name(op), "'");
  return record_multi(op, inputs, std::move(attrs))[0];
}

std::vector<Tensor> TraceContext::record_multi(Op op, const std::vector<Tensor>& inputs,
                                               Attrs attrs) {
  // A number read by item() and used again is data, not a constant: it stays out of the graph.
  if (op == Op::Full && breaks_ > 0 && is_read_value(attrs)) {
    TensorType type = infer_type(op, {}, attrs);
    return {Tensor(run_op(op, attrs, {}, type))};
  }
  std::vector<Value> values;
  for (const Tensor& t : inputs) values.push_back(node_for(t));
  Node* node = add_node(op, std::move(values), std::move(attrs));
  std::vector<Tensor> out;
  for (int i = 0; i < node->num_outputs(); ++i) {
    auto impl = std::make_shared<TensorImpl>();
    impl->ctx = this;
    impl->node = node;
    impl->output = i;
    impl->type = node->types[i];
    produced_.push_back(impl);
    all_produced_.push_back(impl);
    out.emplace_back(impl);
  }
  return out;
}

namespace {
thread_local const std::pair<std::string, int>* caller_location_override = nullptr;
}  // namespace

ScopedCallerLocation::ScopedCallerLocation(std::string file, int line)
    : location_(std::move(file), line), previous_(caller_location_override) {
  caller_location_override = &location_;
}

ScopedCallerLocation::~ScopedCallerLocation() { caller_location_override = previous_; }

const std::pair<std::string, int>* ScopedCallerLocation::current() { return caller_location_override; }

void TraceContext::graph_break(const std::string& category, const std::string& reason,
                               const std::string& op, const std::string& file, int line, const std::string& hint) {
  const auto* caller = ScopedCallerLocation::current();
  GraphBreak b{category, reason, op, caller ? caller->first : file, caller ? caller->second : line, hint};
  if (fullgraph_)
    EMBER_THROW(Runtime, "[compile] graph break under fullgraph=true: [", category, "] ", reason, " at ",
                b.location(), ". Hint: ", hint);
  ++breaks_;
  report_.breaks.push_back(b);
  if (config::log_enabled("graph_breaks"))
    config::log("graph_breaks", "[" + category + "] " + reason + " at " + b.location() + "; hint: " + hint);
  flush({});
  begin_segment();
}

void TraceContext::flush(const std::vector<Tensor>& outputs) {
  // Outputs: the requested tensors first, then every other value of this segment still alive.
  std::vector<std::shared_ptr<TensorImpl>> live;
  // Each value once: a tensor returned twice is one graph output, found by position later.
  std::unordered_set<const TensorImpl*> seen;
  auto add_live = [&](const std::shared_ptr<TensorImpl>& impl) {
    if (impl && impl->is_traced() && impl->ctx == this && seen.insert(impl.get()).second) live.push_back(impl);
  };
  for (const Tensor& t : outputs) add_live(t.impl());
  for (auto& weak : produced_) add_live(weak.lock());
  for (auto& impl : live) graph_->add_output({impl->node, impl->output});
  ++segments_;
  // A segment with nothing to output need not run, unless it holds a node that must.
  bool has_effects = false;
  for (const Node* n : graph_->nodes()) has_effects = has_effects || must_run(n);
  if (graph_->outputs().empty() && !has_effects) {
    last_plan_ = nullptr;
    last_inputs_ = sources_;
    return;
  }
  GraphInfo info;
  std::vector<Array> results;
  auto plan = compiler_.compile(*graph_, info, input_values_, values_, results);
  info.id = static_cast<int>(report_.graphs.size());
  report_.graphs.push_back(info);
  for (size_t i = 0; i < live.size(); ++i) {
    live[i]->value = results[i];
    live[i]->node = nullptr;  // now concrete; `ctx` stays set so its symbolic type is kept
  }
  last_plan_ = plan;
  last_inputs_ = sources_;
}

void TraceContext::finish(const std::vector<Tensor>& outputs) {
  guards_.symbols = ranges_;
  flush(outputs);
}

namespace {

// The arrays of eager inputs and their types; rejects undefined and stale traced tensors.
void eager_inputs(Op op, const std::vector<Tensor>& inputs, std::vector<Array>& arrays,
                  std::vector<TensorType>& types) {
  for (const Tensor& t : inputs) {
    if (!t.defined()) EMBER_THROW(Value, "[", op_name(op), "] an input tensor is undefined");
    if (t.impl()->poisoned || t.impl()->is_traced())
      EMBER_THROW(Value, "[", op_name(op), "] a tensor from a trace that failed or ended was used");
    arrays.push_back(t.impl()->value);
    types.push_back({arrays.back().dtype(), to_shape(arrays.back().shape())});
  }
}

}  // namespace

Tensor apply(Op op, const std::vector<Tensor>& inputs, Attrs attrs) {
  if (TraceContext* ctx = TraceContext::current()) return ctx->record(op, inputs, std::move(attrs));
  std::vector<TensorType> types;
  std::vector<Array> arrays;
  eager_inputs(op, inputs, arrays, types);
  TensorType out = infer_type(op, types, attrs);
  return Tensor(run_op(op, attrs, arrays, out));
}

std::vector<Tensor> apply_multi(Op op, const std::vector<Tensor>& inputs, Attrs attrs) {
  if (TraceContext* ctx = TraceContext::current())
    return ctx->record_multi(op, inputs, std::move(attrs));
  std::vector<TensorType> types;
  std::vector<Array> arrays;
  eager_inputs(op, inputs, arrays, types);
  std::vector<TensorType> outs = infer_types(op, types, attrs);
  std::vector<Tensor> results;
  for (Array& a : run_op(op, attrs, arrays, outs)) results.emplace_back(std::move(a));
  return results;
}

}  // namespace ember

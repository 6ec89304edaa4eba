// ember._C.Graph (a graph built node by node, as the FX translation does) and
// ember._C.CompiledGraph (its plan under a mode, run on arrays).
#include "graph.h"

#include <pybind11/stl.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <optional>

#include "arrays.h"
#include "plan_call.h"
#include "steady_call.h"
#include "convert.h"
#include "frontend/graph_compile.h"
#include "ir/builder.h"
#include "ir/error.h"
#include "runtime/kernels/kernel.h"
#include "torch_calls.h"

namespace py = pybind11;

namespace ember::python {

namespace {

// A graph under construction; values keep it alive.
struct GraphHolder {
  Graph graph;
};

struct PyValue {
  std::shared_ptr<GraphHolder> owner;
  Value value;
};

class PyGraph {
 public:
  PyGraph() : holder_(std::make_shared<GraphHolder>()) {}
  Graph& graph() { return holder_->graph; }

  int symbol(int64_t min) { return graph().add_symbol({min}); }
  PyValue input(const std::string& dtype, const py::handle& shape) {
    return wrap(graph().add_input({dtype_arg(dtype), shape_arg(shape)}));
  }
  PyValue scalar(double value, const std::string& dtype) {
    return wrap(Builder(graph()).scalar(value, dtype_arg(dtype)));
  }
  // An integer or bool 0-d constant, exact over all of int64.
  PyValue scalar_int(int64_t value, const std::string& dtype) {
    DType dt = dtype_arg(dtype);
    if (is_floating(dt)) EMBER_THROW(Type, "scalar_int makes integer and bool constants, not ", dtype);
    Literal literal;
    literal.dtype = dt;
    literal.ints = {dt == DType::Bool ? static_cast<int64_t>(value != 0) : value};
    return wrap(graph().add_constant(std::move(literal), Shape{}));
  }
  py::list op(const std::string& name, const std::vector<PyValue>& inputs, const py::dict& attrs) {
    auto op = parse_op(name);
    if (!op || *op == Op::Input || *op == Op::Constant || *op == Op::Extern)
      EMBER_THROW(Value, "unknown op '", name, "'");
    return wrap_all(Builder(graph()).op_multi(*op, values(inputs), attrs_arg(*op, attrs)));
  }
  py::list torch_call(int64_t id, bool pure, const std::vector<PyValue>& inputs, const py::list& out_types) {
    std::vector<TensorType> types;
    for (py::handle t : out_types) {
      auto pair = t.cast<py::tuple>();
      types.push_back({dtype_arg(pair[0].cast<std::string>()), shape_arg(pair[1])});
    }
    return wrap_all(add_torch_call(graph(), id, pure, values(inputs), std::move(types)));
  }
  void set_outputs(const std::vector<PyValue>& outputs) { graph().set_outputs(values(outputs)); }
  std::string text() { return print(graph()); }

 private:
  PyValue wrap(Value v) { return {holder_, v}; }
  py::list wrap_all(const std::vector<Value>& vs) {
    py::list out;
    for (const Value& v : vs) out.append(wrap(v));
    return out;
  }
  std::vector<Value> values(const std::vector<PyValue>& vs) {
    std::vector<Value> out;
    for (const PyValue& v : vs) {
      if (v.owner != holder_) EMBER_THROW(Value, "a value of another graph was used");
      out.push_back(v.value);
    }
    return out;
  }

  std::shared_ptr<GraphHolder> holder_;
};

class CompiledGraph {
 public:
  CompiledGraph(PyGraph& g, const std::string& mode_name, bool strict, std::optional<double> autotune_budget_s,
                const std::string& autotune_search, std::optional<double> static_plan_mb) {
    ModeConfig mode = mode_config(mode_name);
    Pipeline pipeline(mode.passes);
    verify(g.graph());
    std::shared_ptr<Executable> exec = compile_graph(g.graph(), mode, pipeline, strict, info_);
    std::optional<codegen::AutotuneOptions> autotune;
    if (mode.autotune) autotune = autotune_options(autotune_budget_s, autotune_search);
    plan_ = std::make_shared<const GraphPlan>(std::move(exec), autotune, strict, mode.choice_steps, static_plan_mb);
    info_.hash = structural_hash(g.graph());
  }

  // The outputs as DLPack capsules, and for each what it shares memory with: input i (i >= 0), an earlier output j
  // (-2 - j), or nothing (-1). The bridge copies an output that shares memory where eager's
  // would not (a CSE'd duplicate, a fresh value that is an input).
  // `output_storages`, when given, is called with a list of buffers, each (bytes, exact): exact
  // is None, or (dtype, shape) when the buffer is exactly one output, contiguous. It returns as
  // many tensors (or DLPack capsules) of at least those sizes, or None where ember's own
  // allocator is to serve: the memory of the outputs. For an exact buffer it may give a pair
  // (a tensor of that dtype and shape, its capsule): that tensor is then returned as the output
  // itself, in place of a capsule.
  std::pair<py::list, std::vector<int64_t>> run(const py::list& inputs, const SymbolValues& symbols,
                                                const py::object& output_storages) const {
    std::vector<Array> arrays = import_inputs(inputs, symbols);
    std::vector<GivenOutput> given_outputs;  // outputs the caller made whole
    std::vector<py::object> keep;            // the caller's tensors among them
    OutputStorages storages;
    GivenBuffers given;
    if (py::isinstance<py::list>(output_storages)) {
      // The buffers' memory made before the call (the bridge's steady state): no call back into Python.
      given = given_buffers(py::reinterpret_borrow<py::list>(output_storages));
      storages = [&](const std::vector<OutputBuffer>& buffers) { return bind_given(given, buffers, given_outputs); };
    } else if (!output_storages.is_none()) {
      storages = [&](const std::vector<OutputBuffer>& buffers) {
        return take_storages(output_storages, buffers, given_outputs, keep);
      };
    }
    std::vector<Array> outputs = run_plan(*plan_, arrays, symbols, storages);
    std::vector<int64_t> shares(outputs.size(), -1);
    for (size_t k = 0; k < outputs.size(); ++k) {
      // A constant of the plan (a folded value, a `full`) lives as long as the plan: PyTorch
      // may mutate what it gets, so it gets a copy.
      if (plan_->holds_constant(outputs[k])) {
        const std::vector<int64_t>& shape = outputs[k].shape();
        size_t bytes = static_cast<size_t>(outputs[k].numel()) * itemsize(outputs[k].dtype());
        Array fresh = storages ? Array(outputs[k].dtype(), shape, Array::contiguous_strides(shape), 0,
                                       storages({OutputBuffer{bytes, -1, DType::UInt8, {}}})[0])
                               : Array::empty(outputs[k].dtype(), shape);
        kernels::copy_into(outputs[k], fresh);
        outputs[k] = fresh;
      }
      const Storage* s = outputs[k].storage().get();
      if (!s || outputs[k].numel() == 0) continue;
      for (size_t i = 0; i < arrays.size() && shares[k] == -1; ++i)
        if (arrays[i].storage().get() == s) shares[k] = static_cast<int64_t>(i);
      for (size_t j = 0; j < k && shares[k] == -1; ++j)
        if (outputs[j].storage().get() == s) shares[k] = -2 - static_cast<int64_t>(j);
    }
    py::list results;
    for (size_t k = 0; k < outputs.size(); ++k) {
      py::handle given = given_tensor(given_outputs, k, outputs[k]);
      if (given) results.append(given);
      else results.append(array_to_dlpack(outputs[k]));
    }
    return {std::move(results), std::move(shares)};
  }

  // [Note: the steady call] in ember/_translate.py: every output is a buffer the caller made,
  // given as (tensor, capsule) pairs in the order of an earlier call's request, or an input
  // returned as it is; the outputs are those tensors, and nothing is computed for the caller
  // to rebuild them.
  py::list run_given(const py::list& inputs, const py::list& output_storages) const {
    std::vector<Array> arrays = import_inputs(inputs, {});
    std::vector<GivenOutput> given_outputs;
    GivenBuffers given = given_buffers(output_storages);
    OutputStorages storages = [&](const std::vector<OutputBuffer>& buffers) {
      return bind_given(given, buffers, given_outputs);
    };
    std::vector<Array> outputs = run_plan(*plan_, arrays, {}, storages);
    py::list results(outputs.size());
    for (size_t k = 0; k < outputs.size(); ++k) {
      py::handle given = given_tensor(given_outputs, k, outputs[k]);
      // Not one: an input the graph returns as it is, which the caller puts back itself.
      results[k] = given ? py::reinterpret_borrow<py::object>(given) : py::object(array_to_dlpack(outputs[k]));
    }
    return results;
  }

  // The steady call made in C++ through the torch bridge (steady_call.h).
  std::unique_ptr<SteadyCall> steady_call(const py::capsule& bridge, const py::list& sources, const std::vector<std::pair<int, int>>& symbols,
                         const std::vector<std::pair<int, int>>& returned, size_t max_output_bytes) const {
    return std::make_unique<SteadyCall>(plan_, bridge, sources, symbols, returned, max_output_bytes);
  }

  py::dict info() const {
    GraphInfo info_ = this->info_;
    plan_->describe_live(info_);  // tuning done so far, in every bucket of sizes; memory held now
    info_.compile_ms += info_.autotune_s * 1e3;
    py::dict d;
    d["op_count"] = info_.op_count;
    d["ops"] = info_.ops;
    d["compile_ms"] = info_.compile_ms;
    d["pass_ms"] = info_.pass_ms;
    d["ir"] = info_.ir;
    d["steps"] = info_.steps;
    d["buffers"] = info_.buffers;
    d["kernels"] = info_.kernels;
    d["kernels_compiled"] = info_.kernels_compiled;
    d["kernels_from_disk"] = info_.kernels_from_disk;
    d["kernel_compile_ms"] = info_.kernel_compile_ms;
    d["interpreter_ops"] = info_.interpreter_ops;
    d["hash"] = info_.hash;
    d["mode"] = info_.mode;
    d["static_plan"] = info_.static_plan;
    d["held_bytes"] = info_.held_bytes;
    d["held_limit_bytes"] = info_.held_limit == SIZE_MAX ? py::object(py::none()) : py::object(py::int_(info_.held_limit));
    d["autotuned"] = info_.autotuned;
    d["autotune_s"] = info_.autotune_s;
    d["autotune_timed"] = info_.autotune_timed;
    py::list tuning;
    for (const TuningRecord& t : info_.tuning) {
      py::dict r;
      r["step"] = t.step;
      r["name"] = t.name;
      r["winner"] = t.winner;
      r["default_us"] = t.default_us;
      r["winner_us"] = t.winner_us;
      r["from_database"] = t.from_database;
      r["timed"] = t.timed;
      r["rejected"] = t.rejected;
      r["sizes"] = t.sizes;
      r["same_as"] = t.same_as;
      tuning.append(r);
    }
    d["tuning"] = tuning;
    return d;
  }
  std::string plan() const { return plan_->plan().describe(); }
  std::string mode_text() const {
    GraphInfo info = info_;
    plan_->describe_live(info);
    return mode_summary(info);
  }

 private:
  // `output_storages` given as a list: (tensor, its capsule) for each buffer, in the order the plan
  // asks for them, each exactly one output.
  static GivenBuffers given_buffers(const py::list& list) {
    GivenBuffers out;
    for (py::handle item : list) {
      if (!PyTuple_Check(item.ptr()) || py::len(item) != 2)
        throw py::value_error("[run] output_storages as a list holds (tensor, capsule) pairs");
      out.arrays.push_back(array_from_dlpack(item[py::int_(1)]));
      out.tensors.push_back(py::reinterpret_borrow<py::object>(item[py::int_(0)]));
    }
    return out;
  }

  // Calls the caller's `output_storages` (with the GIL) for these buffers; remembers the tensors
  // it made whole for an exact buffer.
  static std::vector<std::shared_ptr<Storage>> take_storages(const py::object& output_storages,
                                                             const std::vector<OutputBuffer>& buffers,
                                                             std::vector<GivenOutput>& given_outputs,
                                                             std::vector<py::object>& keep) {
    py::gil_scoped_acquire gil;
    py::list requests;
    for (const OutputBuffer& b : buffers) {
      py::object exact = py::none();
      if (b.output >= 0) exact = py::make_tuple(std::string(dtype_name(b.dtype)), py::cast(b.shape));
      requests.append(py::make_tuple(b.bytes, exact));
    }
    py::list given = output_storages(requests);
    if (given.size() != buffers.size()) throw py::value_error("[run] output_storages gave a list of another length");
    std::vector<std::shared_ptr<Storage>> out;
    for (size_t i = 0; i < buffers.size(); ++i) {
      if (given[i].is_none()) {  // ember's own
        out.push_back(std::make_shared<Storage>(buffers[i].bytes));
        continue;
      }
      const OutputBuffer& b = buffers[i];
      bool pair = PyTuple_Check(given[i].ptr());
      if (pair && (b.output < 0 || py::len(given[i]) != 2))
        throw py::value_error("[run] output_storages gave a pair for a buffer that is not one output");
      py::object storage = pair ? py::object(given[i][py::int_(1)]) : py::object(given[i]);
      Array a = array_from_dlpack(storage);
      bool whole = pair && a.dtype() == b.dtype && a.shape() == b.shape && a.is_contiguous() && a.data() == a.storage()->data;
      if (pair && !whole) throw py::value_error("[run] output_storages gave a tensor other than the output asked for");
      if (whole) {
        keep.push_back(given[i][py::int_(0)]);
        given_outputs.push_back({b.output, a.storage().get(), a.data(), keep.back()});
      }
      out.push_back(a.storage());
    }
    return out;
  }

  // An input is a DLPack capsule, or an Array the bridge imported on an earlier call and kept
  // ([Note: kept imports] in ember/_translate.py).
  std::vector<Array> import_inputs(const py::list& inputs, const SymbolValues& symbols) const {
    std::vector<Array> arrays;
    arrays.reserve(inputs.size());
    for (py::handle h : inputs) arrays.push_back(py::isinstance<Array>(h) ? h.cast<Array>() : array_from_dlpack(h));
    const Graph& g = plan_->plan().graph();
    if (arrays.size() != g.inputs().size())
      EMBER_THROW(Value, "[run] the graph takes ", g.inputs().size(), " inputs, not ", arrays.size());
    if (symbols.size() != g.symbols().size())
      EMBER_THROW(Value, "[run] the graph has ", g.symbols().size(), " symbols, not ", symbols.size());
    for (size_t i = 0; i < arrays.size(); ++i) check_input(i, g.inputs()[i]->type(), arrays[i], symbols);
    return arrays;
  }

  std::shared_ptr<const GraphPlan> plan_;
  GraphInfo info_;  // as compiled; the plan adds its tuning when asked
};

}  // namespace

void register_graph(py::module_& m) {
  py::class_<PyValue>(m, "Value")
      .def_property_readonly("dtype", [](const PyValue& v) { return std::string(dtype_name(v.value.type().dtype)); })
      .def_property_readonly("shape", [](const PyValue& v) { return shape_to_python(v.value.type().shape); })
      .def("__repr__", [](const PyValue& v) { return "<ember.Value " + v.value.type().str() + ">"; });

  py::class_<PyGraph>(m, "Graph")
      .def(py::init<>())
      .def("symbol", &PyGraph::symbol, py::arg("min") = 2, "Declares a symbol; returns its id (dims name it sN).")
      .def("input", &PyGraph::input, py::arg("dtype"), py::arg("shape"))
      .def("scalar", &PyGraph::scalar, py::arg("value"), py::arg("dtype"))
      .def("scalar_int", &PyGraph::scalar_int, py::arg("value"), py::arg("dtype"))
      .def("op", &PyGraph::op, py::arg("name"), py::arg("inputs"), py::arg("attrs") = py::dict(),
           "Adds a node; returns its outputs. ValueError/TypeError when ember rejects it.")
      .def("torch_call", &PyGraph::torch_call, py::arg("id"), py::arg("pure"), py::arg("inputs"), py::arg("out_types"))
      .def("set_outputs", &PyGraph::set_outputs)
      .def("text", &PyGraph::text);

  py::class_<CompiledGraph>(m, "CompiledGraph")
      .def(py::init<PyGraph&, const std::string&, bool, std::optional<double>, const std::string&,
                    std::optional<double>>(),
           py::arg("graph"), py::arg("mode") = "default", py::arg("strict") = false,
           py::arg("autotune_budget_s") = py::none(), py::arg("autotune_search") = "",
           py::arg("static_plan_mb") = py::none())
      .def("run", &CompiledGraph::run, py::arg("inputs"), py::arg("symbols"), py::arg("output_storages") = py::none())
      .def("run_given", &CompiledGraph::run_given, py::arg("inputs"), py::arg("output_storages"))
      .def("steady_call", &CompiledGraph::steady_call, py::arg("bridge"), py::arg("sources"), py::arg("symbols"),
           py::arg("returned"), py::arg("max_output_bytes"))
      .def_property_readonly("info", &CompiledGraph::info)
      .def_property_readonly("plan", &CompiledGraph::plan)
      .def_property_readonly("mode_summary", &CompiledGraph::mode_text);
}

}  // namespace ember::python

// ember._C.Graph (a graph built node by node, as the FX translation does) and
// ember._C.CompiledGraph (its plan under a mode, run on arrays).
#include "graph.h"

#include <pybind11/stl.h>

#include <memory>

#include "arrays.h"
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
  CompiledGraph(PyGraph& g, const std::string& mode_name, bool strict) {
    ModeConfig mode = mode_config(mode_name);
    Pipeline pipeline(mode.passes);
    verify(g.graph());
    exec_ = compile_graph(g.graph(), mode, pipeline, strict, info_);
    info_.hash = structural_hash(g.graph());
  }

  // The outputs as DLPack capsules, and for each what it shares memory with: input i (i >= 0), an earlier output j
  // (-2 - j), or nothing (-1). The bridge copies an output that shares memory where eager's
  // would not (a CSE'd duplicate, a fresh value that is an input).
  // `output_storages`, when given, is called with a list of sizes in bytes and returns as many
  // tensors (or DLPack capsules) of at least those sizes, or None where ember's own allocator
  // is to serve: the memory of the outputs.
  std::pair<py::list, std::vector<int64_t>> run(const py::list& inputs, const SymbolValues& symbols,
                                                const py::object& output_storages) const {
    std::vector<Array> arrays;
    arrays.reserve(inputs.size());
    for (py::handle h : inputs) arrays.push_back(array_from_dlpack(h));
    const Graph& g = exec_->graph();
    if (arrays.size() != g.inputs().size())
      EMBER_THROW(Value, "[run] the graph takes ", g.inputs().size(), " inputs, not ", arrays.size());
    if (symbols.size() != g.symbols().size())
      EMBER_THROW(Value, "[run] the graph has ", g.symbols().size(), " symbols, not ", symbols.size());
    for (size_t i = 0; i < arrays.size(); ++i) check_input(i, g.inputs()[i]->type(), arrays[i], symbols);
    OutputStorages storages;
    if (!output_storages.is_none()) storages = [&output_storages](const std::vector<size_t>& sizes) {
      py::gil_scoped_acquire gil;
      py::list given = output_storages(sizes);
      if (given.size() != sizes.size()) throw py::value_error("[run] output_storages gave a list of another length");
      std::vector<std::shared_ptr<Storage>> out;
      for (size_t i = 0; i < sizes.size(); ++i)  // None: ember's own
        out.push_back(given[i].is_none() ? std::make_shared<Storage>(sizes[i]) : array_from_dlpack(given[i]).storage());
      return out;
    };
    std::vector<Array> outputs;
    {
      py::gil_scoped_release no_gil;  // kernels and the thread pool run without it; torch calls take it
      outputs = exec_->run(arrays, symbols, nullptr, storages);
    }
    std::vector<int64_t> shares(outputs.size(), -1);
    for (size_t k = 0; k < outputs.size(); ++k) {
      // A constant of the plan (a folded value, a `full`) lives as long as the plan: PyTorch
      // may mutate what it gets, so it gets a copy.
      if (exec_->holds_constant(outputs[k])) {
        const std::vector<int64_t>& shape = outputs[k].shape();
        size_t bytes = static_cast<size_t>(outputs[k].numel()) * itemsize(outputs[k].dtype());
        Array fresh = storages ? Array(outputs[k].dtype(), shape, Array::contiguous_strides(shape), 0, storages({bytes})[0])
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
    py::list capsules;
    for (const Array& a : outputs) capsules.append(array_to_dlpack(a));
    return {std::move(capsules), std::move(shares)};
  }

  py::dict info() const {
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
    return d;
  }
  std::string plan() const { return exec_->describe(); }

 private:
  // The plan trusts its inputs' types; a caller's mistake must be an error, not wrong memory.
  static void check_input(size_t i, const TensorType& t, const Array& a, const SymbolValues& symbols) {
    if (a.dtype() != t.dtype)
      EMBER_THROW(Type, "[run] input ", i, " is ", dtype_name(a.dtype()), ", the graph takes ", t.str());
    std::vector<int64_t> shape = evaluate(t.shape, symbols);
    if (a.shape() != shape)
      EMBER_THROW(Value, "[run] input ", i, " has shape ", shape_str(to_shape(a.shape())), ", the graph takes ",
                  shape_str(to_shape(shape)), " (", t.str(), ")");
  }

  std::shared_ptr<const Executable> exec_;
  GraphInfo info_;
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
      .def(py::init<PyGraph&, const std::string&, bool>(), py::arg("graph"), py::arg("mode") = "default",
           py::arg("strict") = false)
      .def("run", &CompiledGraph::run, py::arg("inputs"), py::arg("symbols"), py::arg("output_storages") = py::none())
      .def_property_readonly("info", &CompiledGraph::info)
      .def_property_readonly("plan", &CompiledGraph::plan);
}

}  // namespace ember::python

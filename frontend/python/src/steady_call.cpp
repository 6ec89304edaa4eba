#include "steady_call.h"

#include <pybind11/stl.h>

#include <algorithm>

#include "arrays.h"
#include "convert.h"
#include "ir/error.h"
#include "plan_call.h"

namespace py = pybind11;

namespace ember::python {

namespace {

// A tensor's memory as an array, owned by the caller: the call holds the tensor while the plan
// runs, and a plan keeps no input past its call ([Note: kept imports] in ember/_translate.py).
Array borrowed(const TorchTensorView& v) {
  std::vector<int64_t> shape(v.sizes, v.sizes + v.ndim), strides(v.strides, v.strides + v.ndim);
  size_t nbytes = extent_bytes(shape, strides, itemsize(v.dtype));
  auto storage = std::make_shared<Storage>(v.data, nbytes, [] {});
  return Array(v.dtype, std::move(shape), std::move(strides), 0, std::move(storage));
}

}  // namespace

SteadyCall::SteadyCall(std::shared_ptr<const GraphPlan> plan, const py::capsule& bridge, const py::list& sources,
                       const py::list& outputs, const std::vector<std::pair<int, int>>& returned)
    : plan_(std::move(plan)), returned_(returned) {
  bridge_ = static_cast<const TorchBridge*>(PyCapsule_GetPointer(bridge.ptr(), kTorchBridgeCapsule));
  if (!bridge_) throw py::error_already_set();
  if (bridge_->version != kTorchBridgeVersion)
    EMBER_THROW(Value, "ember._torch_bridge has version ", bridge_->version, ", ember._C takes ", kTorchBridgeVersion);
  const Graph& g = plan_->plan().graph();
  if (sources.size() != g.inputs().size())
    EMBER_THROW(Value, "[steady call] the graph takes ", g.inputs().size(), " inputs, not ", sources.size());
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const TensorType& t = g.inputs()[i]->type();
    if (!is_static(t.shape)) EMBER_THROW(Value, "[steady call] input ", i, " has symbolic sizes");
    input_types_.push_back(t);
    input_shapes_.push_back(evaluate(t.shape, {}));
    py::handle s = sources[i];
    if (PyLong_Check(s.ptr())) min_args_ = std::max(min_args_, s.cast<Py_ssize_t>() + 1);
    sources_.push_back(PyLong_Check(s.ptr()) ? Source{s.cast<int>(), py::object()}
                                             : Source{-1, py::reinterpret_borrow<py::object>(s)});
  }
  for (py::handle o : outputs) {
    auto pair = o.cast<py::tuple>();
    std::vector<int64_t> shape = pair[1].cast<std::vector<int64_t>>();
    outputs_.push_back({dtype_arg(pair[0].cast<std::string>()), shape, Array::contiguous_strides(shape)});
  }
  for (const auto& [output, arg] : returned_)
    min_args_ = std::max<Py_ssize_t>(min_args_, arg + 1);
}

// The inputs as arrays over the caller's memory; false when one is not a plain tensor.
bool SteadyCall::take_inputs(PyObject* args, std::vector<Array>& arrays) const {
  arrays.reserve(sources_.size());
  for (size_t i = 0; i < sources_.size(); ++i) {
    const Source& s = sources_[i];
    PyObject* object = s.arg < 0 ? s.constant.ptr() : PyList_GET_ITEM(args, s.arg);
    TorchTensorView view;
    if (!bridge_->view(object, &view)) return false;
    arrays.push_back(borrowed(view));
    if (arrays.back().dtype() != input_types_[i].dtype || arrays.back().shape() != input_shapes_[i])
      check_input(i, input_types_[i], arrays.back(), {});  // raises its error
  }
  return true;
}

py::object SteadyCall::operator()(const py::handle& args) const {
  std::vector<Array> arrays;
  if (!PyList_Check(args.ptr()) || PyList_GET_SIZE(args.ptr()) < min_args_ || !take_inputs(args.ptr(), arrays))
    return py::none();
  GivenBuffers given;
  for (const Output& o : outputs_) {
    PyObject* made = bridge_->empty_strided(o.dtype, static_cast<int64_t>(o.shape.size()), o.shape.data(), o.strides.data());
    if (!made) throw py::error_already_set();
    given.tensors.push_back(py::reinterpret_steal<py::object>(made));
    TorchTensorView view;
    bridge_->view(made, &view);  // a new plain tensor
    given.arrays.push_back(borrowed(view));
  }
  std::vector<GivenOutput> given_outputs;
  OutputStorages storages = [&](const std::vector<OutputBuffer>& buffers) {
    return bind_given(given, buffers, given_outputs);
  };
  std::vector<Array> outputs = run_plan(*plan_, arrays, {}, storages);
  py::list results;
  for (size_t k = 0; k < outputs.size(); ++k) {
    py::handle t = given_tensor(given_outputs, k, outputs[k]);
    for (const auto& [output, arg] : returned_)
      if (output == static_cast<int>(k)) t = PyList_GET_ITEM(args.ptr(), arg);  // the caller's own object
    if (!t) EMBER_THROW(Internal, "[steady call] output ", k, " is neither a tensor made for it nor an input");
    results.append(t);
  }
  return std::move(results);
}

void register_steady_call(py::module_& m) {
  py::class_<SteadyCall>(m, "SteadyCall")
      .def("__call__", &SteadyCall::operator(), py::arg("args"));
}

}  // namespace ember::python

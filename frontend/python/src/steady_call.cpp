#include "steady_call.h"

#include <pybind11/stl.h>

#include <algorithm>

#include "arrays.h"
#include "convert.h"
#include "ir/error.h"
#include "plan_call.h"
#include "runtime/allocator.h"
#include "runtime/kernels/kernel.h"

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

// A size's value as a 0-d array of the input's dtype, as torch.tensor(value, dtype=...) makes
// it; an empty array for a dtype this path does not make.
Array size_array(DType dtype, int64_t value) {
  Array a = Array::empty(dtype, {});
  switch (dtype) {
    case DType::Int64: *static_cast<int64_t*>(a.data()) = value; return a;
    case DType::Int32:
      if (value != static_cast<int32_t>(value)) return Array();  // torch.tensor would refuse it: the long way
      *static_cast<int32_t*>(a.data()) = static_cast<int32_t>(value);
      return a;
    case DType::Float32: *static_cast<float*>(a.data()) = static_cast<float>(value); return a;
    case DType::Float64: *static_cast<double*>(a.data()) = static_cast<double>(value); return a;
    default: return Array();
  }
}

// A new contiguous PyTorch tensor, made without the GIL, as an array over its memory; `handle`
// receives the tensor, for the bridge's wrap or discard.
Array new_tensor(const TorchBridge* bridge, DType dtype, const std::vector<int64_t>& shape, void*& handle) {
  std::vector<int64_t> strides = Array::contiguous_strides(shape);
  void* data = nullptr;
  handle = bridge->allocate(dtype, static_cast<int64_t>(shape.size()), shape.data(), strides.data(), &data);
  size_t bytes = checked_nbytes("steady call", shape, dtype);
  if (!handle) EMBER_THROW(OutOfMemory, "[steady call] PyTorch could not allocate an output of ", bytes, " bytes");
  return Array(dtype, shape, std::move(strides), 0, std::make_shared<Storage>(data, bytes, [] {}));
}

// An output buffer at these sizes that is not exactly one output, or larger than PyTorch's
// outputs may be (EMBER_TORCH_OUTPUT_MAX_MB in ember/_translate.py): the call goes the long way.
struct TheLongWay {};

// The tensors the bridge made for a call's outputs, in the plan's order; each wrapped for the
// caller once the plan has run, or discarded.
struct MadeOutputs {
  struct Made {
    int output;
    const Storage* storage;
    void* handle;
  };
  const TorchBridge* bridge;
  size_t max_bytes;
  std::vector<Made> made;
  ~MadeOutputs() {
    for (const Made& m : made)
      if (m.handle) bridge->discard(m.handle);
  }

  // Without the GIL, as the plan asks.
  std::vector<std::shared_ptr<Storage>> allocate(const std::vector<OutputBuffer>& buffers) {
    std::vector<std::shared_ptr<Storage>> out;
    for (const OutputBuffer& b : buffers) {
      if (b.output < 0 || b.bytes > max_bytes) throw TheLongWay{};
      void* handle = nullptr;
      out.push_back(new_tensor(bridge, b.dtype, b.shape, handle).storage());
      made.push_back({b.output, out.back().get(), handle});
    }
    return out;
  }

  // With the GIL: output k's tensor when it is the one made for it, else an empty object.
  py::object take(size_t k, const Array& output) {
    for (Made& m : made) {
      if (m.output != static_cast<int>(k) || m.storage != output.storage().get() || !m.handle) continue;
      if (!output.is_contiguous() || output.data() != output.storage()->data) break;  // not the tensor's layout
      PyObject* t = bridge->wrap(m.handle);
      m.handle = nullptr;
      if (!t) throw py::error_already_set();
      return py::reinterpret_steal<py::object>(t);
    }
    return py::object();
  }
};

}  // namespace

SteadyCall::SteadyCall(std::shared_ptr<const GraphPlan> plan, const py::capsule& bridge, const py::list& sources,
                       const std::vector<std::pair<int, int>>& symbols, const std::vector<std::pair<int, int>>& returned,
                       size_t max_output_bytes)
    : plan_(std::move(plan)), symbols_(symbols), returned_(returned), max_output_bytes_(max_output_bytes) {
  bridge_ = static_cast<const TorchBridge*>(PyCapsule_GetPointer(bridge.ptr(), kTorchBridgeCapsule));
  if (!bridge_) throw py::error_already_set();
  if (bridge_->version != kTorchBridgeVersion)
    EMBER_THROW(Value, "ember._torch_bridge has version ", bridge_->version, ", ember._C takes ", kTorchBridgeVersion);
  const Graph& g = plan_->plan().graph();
  if (sources.size() != g.inputs().size())
    EMBER_THROW(Value, "[steady call] the graph takes ", g.inputs().size(), " inputs, not ", sources.size());
  if (symbols.size() != g.symbols().size())
    EMBER_THROW(Value, "[steady call] the graph has ", g.symbols().size(), " symbols, not ", symbols.size());
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const TensorType& t = g.inputs()[i]->type();
    input_types_.push_back(t);
    static_input_.push_back(is_static(t.shape));
    static_shapes_.push_back(static_input_.back() ? evaluate(t.shape, {}) : std::vector<int64_t>());
    py::handle s = sources[i];
    if (PyTuple_Check(s.ptr())) {  // ("size", dim)
      py::list dim;
      dim.append(s[py::int_(1)]);
      sources_.push_back(Source{-1, py::object(), shape_arg(dim)});
      continue;
    }
    bool is_arg = PyLong_Check(s.ptr());
    if (is_arg) min_args_ = std::max(min_args_, s.cast<Py_ssize_t>() + 1);
    sources_.push_back(is_arg ? Source{s.cast<int>(), py::object(), {}} : Source{-1, py::reinterpret_borrow<py::object>(s), {}});
  }
  for (const auto& [arg, dim] : symbols_) min_args_ = std::max<Py_ssize_t>(min_args_, arg + 1);
  for (const auto& [output, arg] : returned_) min_args_ = std::max<Py_ssize_t>(min_args_, arg + 1);
}

// Each symbol's value from the call's arguments; false when an argument is not what it was.
bool SteadyCall::take_symbols(PyObject* args, SymbolValues& symbols) const {
  symbols.resize(symbols_.size());
  for (size_t s = 0; s < symbols_.size(); ++s) {
    auto [arg, dim] = symbols_[s];
    PyObject* object = PyList_GET_ITEM(args, arg);
    if (dim < 0) {
      if (!PyLong_CheckExact(object)) return false;
      symbols[s] = PyLong_AsLongLong(object);
      if (symbols[s] == -1 && PyErr_Occurred()) throw py::error_already_set();
      continue;
    }
    TorchTensorView view;
    if (!bridge_->view(object, &view) || dim >= view.ndim) return false;
    symbols[s] = view.sizes[dim];
  }
  return true;
}

// The inputs as arrays over the caller's memory; false when one is not a plain tensor.
bool SteadyCall::take_inputs(PyObject* args, std::vector<Array>& arrays, SymbolValues& symbols) const {
  if (!take_symbols(args, symbols)) return false;
  arrays.reserve(sources_.size());
  for (size_t i = 0; i < sources_.size(); ++i) {
    const Source& s = sources_[i];
    if (!s.size.empty()) {
      arrays.push_back(size_array(input_types_[i].dtype, evaluate(s.size, symbols)[0]));
      if (!arrays.back().defined()) return false;
      continue;
    }
    PyObject* object = s.arg < 0 ? s.constant.ptr() : PyList_GET_ITEM(args, s.arg);
    TorchTensorView view;
    if (!bridge_->view(object, &view)) return false;
    arrays.push_back(borrowed(view));
    const Array& a = arrays.back();
    if (!static_input_[i] || a.dtype() != input_types_[i].dtype || a.shape() != static_shapes_[i])
      check_input(i, input_types_[i], a, symbols);  // raises its error
  }
  return true;
}

py::object SteadyCall::operator()(const py::handle& args) const {
  std::vector<Array> arrays;
  SymbolValues symbols;
  if (!PyList_Check(args.ptr()) || PyList_GET_SIZE(args.ptr()) < min_args_ || !take_inputs(args.ptr(), arrays, symbols))
    return py::none();
  if (declined(symbols)) return py::none();
  MadeOutputs made{bridge_, max_output_bytes_, {}};
  OutputStorages storages = [&](const std::vector<OutputBuffer>& buffers) { return made.allocate(buffers); };
  std::vector<Array> outputs;
  try {
    outputs = run_plan(*plan_, arrays, symbols, storages);
  } catch (const TheLongWay&) {
    // Asked for before any step ran. The plan had taken its binding for these sizes, which the
    // throw lost (a static plan binds them again): the sizes are remembered, and their next
    // calls go the long way at once.
    remember_declined(symbols);
    return py::none();
  }
  py::list results;
  for (size_t k = 0; k < outputs.size(); ++k) {
    py::object t = made.take(k, outputs[k]);
    for (const auto& [output, arg] : returned_)
      if (output == static_cast<int>(k)) t = py::reinterpret_borrow<py::object>(PyList_GET_ITEM(args.ptr(), arg));
    if (!t) {  // memory the plan holds or shares at these sizes (a constant, a view): the caller's own copy
      void* handle = nullptr;
      kernels::copy_into(outputs[k], new_tensor(bridge_, outputs[k].dtype(), outputs[k].shape(), handle));
      PyObject* wrapped = bridge_->wrap(handle);
      if (!wrapped) throw py::error_already_set();
      t = py::reinterpret_steal<py::object>(wrapped);
    }
    results.append(t);
  }
  return std::move(results);
}

bool SteadyCall::declined(const SymbolValues& symbols) const {
  std::lock_guard<std::mutex> lock(declined_mu_);
  return std::find(declined_.begin(), declined_.end(), symbols) != declined_.end();
}

void SteadyCall::remember_declined(const SymbolValues& symbols) const {
  std::lock_guard<std::mutex> lock(declined_mu_);
  if (declined_.size() == kDeclinedKept) declined_.erase(declined_.begin());
  declined_.push_back(symbols);
}

void register_steady_call(py::module_& m) {
  py::class_<SteadyCall>(m, "SteadyCall")
      .def("__call__", &SteadyCall::operator(), py::arg("args"));
}

}  // namespace ember::python

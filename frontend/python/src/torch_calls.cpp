#include "torch_calls.h"

#include <pybind11/stl.h>

#include <map>
#include <mutex>

#include "ir/error.h"
#include "ir/extern.h"
#include "runtime/extern_kernels.h"

namespace py = pybind11;

namespace ember::python {

namespace {

std::mutex table_mu;
std::map<int64_t, std::vector<TensorType>>& output_types() {
  static auto* table = new std::map<int64_t, std::vector<TensorType>>();
  return *table;
}

// Leaked on purpose: it must outlive the interpreter's teardown of this module.
py::object* runner = nullptr;

std::vector<TensorType> torch_call_shape(std::span<const TensorType>, const Attrs& attrs) {
  int64_t id = attr_int(attrs, "call");
  std::lock_guard<std::mutex> lock(table_mu);
  auto it = output_types().find(id);
  if (it == output_types().end()) EMBER_THROW(Internal, "[torch] call ", id, " was released or never made");
  return it->second;
}

void torch_call_run(std::span<const Array> inputs, std::span<const Array> outputs, const Attrs& attrs) {
  int64_t id = attr_int(attrs, "call");
  py::gil_scoped_acquire gil;
  if (!runner) EMBER_THROW(Internal, "[torch] no runner is registered");
  py::list ins, outs;
  for (const Array& a : inputs) ins.append(py::cast(a));
  for (const Array& a : outputs) outs.append(py::cast(a));
  (*runner)(id, ins, outs);  // a Python exception propagates to the caller of run() as it is
}

}  // namespace

std::vector<Value> add_torch_call(Graph& g, int64_t id, bool pure, std::vector<Value> inputs,
                                  std::vector<TensorType> outputs) {
  {
    std::lock_guard<std::mutex> lock(table_mu);
    output_types()[id] = std::move(outputs);
  }
  Node* n = g.add(Op::Extern, std::move(inputs),
                  {{"name", std::string(pure ? "torch" : "torch_impure")}, {"call", id}});
  std::vector<Value> values;
  for (int i = 0; i < n->num_outputs(); ++i) values.push_back(n->out(i));
  return values;
}

void release_torch_calls(const std::vector<int64_t>& ids) {
  std::lock_guard<std::mutex> lock(table_mu);
  for (int64_t id : ids) output_types().erase(id);
}

void register_torch_calls(py::module_& m) {
  for (bool pure : {true, false}) {
    std::string name = pure ? "torch" : "torch_impure";
    register_extern_op({name, torch_call_shape, pure});
    register_extern_kernel(name, torch_call_run);
  }
  m.def("set_torch_call_runner", [](py::object fn) {
    if (!runner) runner = new py::object();
    *runner = std::move(fn);
  }, "Sets runner(id, inputs, outputs), which runs torch call `id`.");
  m.def("release_torch_calls", &release_torch_calls, "Forgets the output types of these torch calls.");
}

}  // namespace ember::python

// The steady call through the torch bridge: a compiled graph's call made in C++ from PyTorch's
// tensors ([Note: the steady call] in ember/_translate.py, [Note: the torch bridge] in
// frontend/python/torch_bridge/torch_bridge.cpp).
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <utility>
#include <vector>

#include "frontend/graph_compile.h"
#include "frontend/python/torch_bridge/torch_bridge.h"

namespace ember::python {

class SteadyCall {
 public:
  // `bridge`: ember._torch_bridge.api. `sources`: for each input of the plan, the index of the
  // call's argument it is, or a tensor (a constant of the graph). `outputs`: for each buffer the
  // plan asks the caller for, in the plan's order, (dtype name, shape): each is one output, made
  // contiguous. `returned`: (output, argument) pairs, inputs the graph returns as they are.
  SteadyCall(std::shared_ptr<const GraphPlan> plan, const pybind11::capsule& bridge, const pybind11::list& sources,
             const pybind11::list& outputs, const std::vector<std::pair<int, int>>& returned);

  // The outputs as tensors; None, having run nothing, when an input is not a plain tensor (a
  // subclass, a lazy negation, another device) or `args` not a list: the caller goes the long
  // way. A ValueError or TypeError "[run] input ..." for an input of another dtype or shape.
  pybind11::object operator()(const pybind11::handle& args) const;

 private:
  struct Source {
    int arg = -1;               // the call's argument, or
    pybind11::object constant;  // a tensor of the graph's own
  };
  struct Output {
    DType dtype;
    std::vector<int64_t> shape, strides;
  };
  bool take_inputs(PyObject* args, std::vector<Array>& arrays) const;

  std::shared_ptr<const GraphPlan> plan_;
  const TorchBridge* bridge_;
  std::vector<Source> sources_;
  std::vector<TensorType> input_types_;
  std::vector<std::vector<int64_t>> input_shapes_;
  std::vector<Output> outputs_;
  std::vector<std::pair<int, int>> returned_;
  Py_ssize_t min_args_ = 0;  // arguments the call reads
};

void register_steady_call(pybind11::module_& m);

}  // namespace ember::python

// The steady call through the torch bridge: a compiled graph's call made in C++ from PyTorch's
// tensors ([Note: the steady call] in ember/_translate.py, [Note: the torch bridge] in
// frontend/python/torch_bridge/torch_bridge.cpp).
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "frontend/graph_compile.h"
#include "frontend/python/torch_bridge/torch_bridge.h"

namespace ember::python {

class SteadyCall {
 public:
  // `bridge`: ember._torch_bridge.api. `sources`: for each input of the plan, the index of the
  // call's argument it is, a tensor (a constant of the graph), or ("size", dim): a 0-d tensor of
  // that dim's value (an int or a polynomial of the symbols). `symbols`: for each symbol of
  // the plan, (argument, dim) when it is that tensor argument's size, (argument, -1) when it is
  // that int argument. `returned`: (output, argument) pairs, inputs the graph returns as they are.
  // `max_output_bytes`: the largest output PyTorch's allocator makes.
  SteadyCall(std::shared_ptr<const GraphPlan> plan, const pybind11::capsule& bridge, const pybind11::list& sources,
             const std::vector<std::pair<int, int>>& symbols, const std::vector<std::pair<int, int>>& returned,
             size_t max_output_bytes);

  // The outputs as tensors, each made by PyTorch's allocator as the plan asks for its memory;
  // None, having run nothing, when the call is not one this path takes: an input that is not a
  // plain tensor (a subclass, a lazy negation, another device), `args` not a list, or an output
  // buffer at these sizes that is not exactly one output, or a larger one than PyTorch makes. A ValueError or TypeError
  // "[run] input ..." for an input of another dtype or shape.
  pybind11::object operator()(const pybind11::handle& args) const;

 private:
  struct Source {
    int arg = -1;               // the call's argument, or
    pybind11::object constant;  // a tensor of the graph's own, or
    Shape size;                 // one dim: the value of a size
  };
  bool take_inputs(PyObject* args, std::vector<Array>& arrays, SymbolValues& symbols) const;
  bool take_symbols(PyObject* args, SymbolValues& symbols) const;
  bool declined(const SymbolValues& symbols) const;
  void remember_declined(const SymbolValues& symbols) const;
  static constexpr size_t kDeclinedKept = 64;  // the latest sizes declined

  std::shared_ptr<const GraphPlan> plan_;
  const TorchBridge* bridge_;
  std::vector<Source> sources_;
  std::vector<std::pair<int, int>> symbols_;
  std::vector<TensorType> input_types_;
  std::vector<std::vector<int64_t>> static_shapes_;  // empty for an input of symbolic sizes
  std::vector<char> static_input_;
  std::vector<std::pair<int, int>> returned_;
  size_t max_output_bytes_;
  mutable std::mutex declined_mu_;
  mutable std::vector<SymbolValues> declined_;  // sizes whose outputs this path cannot make
  Py_ssize_t min_args_ = 0;  // arguments the call reads
};

void register_steady_call(pybind11::module_& m);

}  // namespace ember::python

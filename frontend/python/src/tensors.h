#pragma once

#include <pybind11/pybind11.h>

namespace ember::python {

void register_tensors(pybind11::module_& m);

}  // namespace ember::python

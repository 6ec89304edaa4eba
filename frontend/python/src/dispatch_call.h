// ember._C.DispatchCall: the call of a function compiled by ember.compile, which goes to
// Dynamo's compiled function, or to ember's tracer when an argument is an ember tensor.
#pragma once

#include <pybind11/pybind11.h>

namespace ember::python {

void register_dispatch_call(pybind11::module_& m);

}  // namespace ember::python

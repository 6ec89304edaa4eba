// Python values as ember's, and back.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "ir/graph.h"

namespace ember::python {

// A ValueError for an unknown name.
DType dtype_arg(const std::string& name);
// An int, or a dim's text ("s0", "2*s0 + 1").
Dim dim_arg(const pybind11::handle& h);
Shape shape_arg(const pybind11::handle& h);
pybind11::list shape_to_python(const Shape& s);  // ints, and texts for symbolic dims
// `op`'s attributes from a dict, each converted to the type the op declares (a TypeError for a
// value of the wrong type, a ValueError for an attribute the op does not take).
Attrs attrs_arg(Op op, const pybind11::dict& d);

}  // namespace ember::python

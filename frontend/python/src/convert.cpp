// Python values as ember's: dtypes by name, shapes of ints and dim texts ("s0", "2*s0 + 1"),
// attributes as the op's registry record declares their types.
#include "convert.h"

#include <pybind11/stl.h>

#include "ir/error.h"

namespace py = pybind11;

namespace ember::python {

DType dtype_arg(const std::string& name) {
  auto d = parse_dtype(name);
  if (!d) EMBER_THROW(Value, "unknown dtype '", name, "'");
  return *d;
}

Dim dim_arg(const py::handle& h) {
  if (py::isinstance<py::str>(h)) return parse_dim(h.cast<std::string>());
  return Dim(h.cast<int64_t>());
}

Shape shape_arg(const py::handle& h) {
  Shape s;
  for (py::handle d : h) s.push_back(dim_arg(d));
  return s;
}

py::list shape_to_python(const Shape& s) {
  py::list out;
  for (const Dim& d : s) {
    if (d.is_static()) out.append(d.value());
    else out.append(d.str());
  }
  return out;
}

namespace {

// A Python value as the attribute `spec` of an op declares it.
Attr attr_arg(std::string_view op, const std::string& name, AttrType type, const py::handle& h) {
  switch (type) {
    case AttrType::Int:
      if (py::isinstance<py::bool_>(h) || !py::isinstance<py::int_>(h)) break;
      return h.cast<int64_t>();
    case AttrType::Float:
      if (py::isinstance<py::bool_>(h)) break;
      if (py::isinstance<py::float_>(h) || py::isinstance<py::int_>(h)) return h.cast<double>();
      break;
    case AttrType::Bool:
      if (py::isinstance<py::bool_>(h)) return h.cast<bool>();
      break;
    case AttrType::DType:
      if (py::isinstance<py::str>(h)) return dtype_arg(h.cast<std::string>());
      break;
    case AttrType::Ints:
      if (py::isinstance<py::sequence>(h) && !py::isinstance<py::str>(h)) return h.cast<std::vector<int64_t>>();
      break;
    case AttrType::Shape:
      if (py::isinstance<py::sequence>(h) && !py::isinstance<py::str>(h)) return shape_arg(h);
      break;
    case AttrType::String:
      if (py::isinstance<py::str>(h)) return h.cast<std::string>();
      break;
    case AttrType::Literal: break;
  }
  EMBER_THROW(Type, "[", op, "] attribute '", name, "' takes ", attr_type_name(type), ", not ",
              std::string(py::str(py::type::of(h).attr("__name__"))));
}

}  // namespace

Attrs attrs_arg(Op op, const py::dict& d) {
  const OpInfo& info = op_info(op);
  Attrs attrs;
  for (auto [key, value] : d) {
    std::string name = key.cast<std::string>();
    const AttrSpec* spec = nullptr;
    for (const AttrSpec& s : info.attrs)
      if (s.name == name) spec = &s;
    if (!spec) EMBER_THROW(Value, "[", info.name, "] has no attribute '", name, "'");
    attrs[name] = attr_arg(info.name, name, spec->type, value);
  }
  return attrs;
}

}  // namespace ember::python

// ember._C.Tensor (ember's own tensors from Python: eager, or traced inside ember's compile),
// ember._C.apply (any op by name) and ember._C.CompiledFunction (ember's tracer over a Python
// function of ember tensors). Graph breaks report the Python caller's file and line.
#include "tensors.h"

#include <pybind11/stl.h>

#include <optional>
#include <typeindex>

#include "arrays.h"
#include "convert.h"
#include "frontend/compile.h"
#include "frontend/ops.h"
#include "frontend/trace.h"
#include "ir/error.h"

namespace py = pybind11;

namespace ember::python {

namespace {

// The file and line of the Python code that called into here.
std::pair<std::string, int> python_caller() {
  PyFrameObject* frame = PyEval_GetFrame();  // borrowed
  if (!frame) return {"<python>", 0};
  PyCodeObject* code = PyFrame_GetCode(frame);  // new reference
  std::string file = py::str(code->co_filename);
  Py_DECREF(code);
  return {file, PyFrame_GetLineNumber(frame)};
}

// Runs f with graph breaks located at the Python caller.
template <class F>
auto at_python_caller(F&& f) {
  auto [file, line] = python_caller();
  ScopedCallerLocation here(file, line);
  return f();
}

std::optional<Scalar> to_scalar(const py::handle& h) {
  if (py::isinstance<py::bool_>(h)) return Scalar(h.cast<bool>());
  if (py::isinstance<py::int_>(h)) return Scalar(h.cast<int64_t>());
  if (py::isinstance<py::float_>(h)) return Scalar(h.cast<double>());
  return std::nullopt;
}

// a op b for an ember tensor a and a tensor or Python number b (b op a when reflected);
// NotImplemented for anything else, so Python tries the other operand.
template <class Op>
py::object binary(const Tensor& a, const py::handle& b, Op op, bool reflected = false) {
  if (py::isinstance<Tensor>(b)) {
    Tensor t = b.cast<Tensor>();
    return py::cast(reflected ? op(t, a) : op(a, t));
  }
  std::optional<Scalar> s = to_scalar(b);
  if (!s) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
  return py::cast(reflected ? op(*s, a) : op(a, *s));
}

#define EMBER_PY_BINARY(name, rname, sym)                                                               \
  cls.def(name, [](const Tensor& a, const py::handle& b) {                                              \
    return binary(a, b, [](const auto& x, const auto& y) { return x sym y; });                         \
  });                                                                                                   \
  if (rname[0]) cls.def(rname, [](const Tensor& a, const py::handle& b) {                               \
    return binary(a, b, [](const auto& x, const auto& y) { return x sym y; }, true);                   \
  });

void bind_tensor(py::module_& m) {
  py::class_<Tensor> cls(m, "Tensor");
  cls.def_static("from_dlpack", [](const py::handle& h) { return Tensor(array_from_dlpack(h)); },
                 "An ember tensor sharing the memory of a CPU tensor with __dlpack__ (no copy).")
      .def("__dlpack__", [](const Tensor& t, py::kwargs) {
        return at_python_caller([&] { return array_to_dlpack(t.array()); });
      })
      .def("__dlpack_device__", [](const Tensor&) { return py::make_tuple(1, 0); })
      .def_property_readonly("shape", [](const Tensor& t) { return t.shape(); })
      .def_property_readonly("ndim", &Tensor::dim)
      .def_property_readonly("dtype", [](const Tensor& t) { return std::string(dtype_name(t.dtype())); })
      .def("item", [](const Tensor& t) -> py::object {
        return at_python_caller([&]() -> py::object {
          if (is_floating(t.dtype())) return py::float_(t.item<double>());
          if (is_bool(t.dtype())) return py::bool_(t.item<int64_t>() != 0);
          return py::int_(t.item<int64_t>());
        });
      })
      .def("__bool__", [](const Tensor& t) { return at_python_caller([&] { return t.to_bool(); }); })
      .def("__float__", [](const Tensor& t) { return at_python_caller([&] { return t.item<double>(); }); })
      .def("__int__", [](const Tensor& t) { return at_python_caller([&] { return t.item<int64_t>(); }); })
      .def("__repr__", [](const Tensor& t) { return at_python_caller([&] { return "ember.Tensor(" + t.str() + ")"; }); })
      .def("__neg__", [](const Tensor& t) { return -t; })
      .def("__matmul__", [](const Tensor& a, const Tensor& b) { return matmul(a, b); });
  EMBER_PY_BINARY("__add__", "__radd__", +)
  EMBER_PY_BINARY("__sub__", "__rsub__", -)
  EMBER_PY_BINARY("__mul__", "__rmul__", *)
  EMBER_PY_BINARY("__truediv__", "__rtruediv__", /)
  EMBER_PY_BINARY("__lt__", "", <)
  EMBER_PY_BINARY("__le__", "", <=)
  EMBER_PY_BINARY("__gt__", "", >)
  EMBER_PY_BINARY("__ge__", "", >=)
  EMBER_PY_BINARY("__eq__", "", ==)
  EMBER_PY_BINARY("__ne__", "", !=)
}

// Any op by name on ember tensors, its attributes as the op declares them.
std::vector<Tensor> apply_op(const std::string& name, const std::vector<Tensor>& inputs, const py::dict& attrs) {
  auto op = parse_op(name);
  if (!op || *op == Op::Input || *op == Op::Constant || *op == Op::Extern) EMBER_THROW(Value, "unknown op '", name, "'");
  return apply_multi(*op, inputs, attrs_arg(*op, attrs));
}

// ember's compile() over a Python function. Non-tensor arguments are guarded by value and
// Python type, as C++ arguments are by value and C++ type.
class CompiledFunction {
 public:
  explicit CompiledFunction(const std::map<std::string, std::string>& options)
      : core_(std::make_shared<detail::CompiledCore>(checked(options))) {}

  py::object call(const py::function& fn, const py::tuple& args) {
    std::vector<ArgValue> values;
    std::vector<std::type_index> types;
    std::vector<int> tensor_position(args.size(), -1);
    int tensors = 0;
    for (size_t i = 0; i < args.size(); ++i) {
      py::handle a = args[i];
      if (py::isinstance<Tensor>(a)) {
        values.emplace_back(a.cast<Tensor>());
        types.emplace_back(typeid(Tensor));
        tensor_position[i] = tensors++;
      } else if (py::isinstance<py::bool_>(a)) {
        values.emplace_back(a.cast<bool>());
        types.emplace_back(typeid(bool));
      } else if (py::isinstance<py::int_>(a)) {
        values.emplace_back(a.cast<int64_t>());
        types.emplace_back(typeid(int64_t));
      } else if (py::isinstance<py::float_>(a)) {
        values.emplace_back(a.cast<double>());
        types.emplace_back(typeid(double));
      } else if (py::isinstance<py::str>(a)) {
        values.emplace_back(a.cast<std::string>());
        types.emplace_back(typeid(std::string));
      } else {
        throw py::type_error("ember.compile over ember tensors takes tensors, ints, floats, bools and strings, not " +
                             std::string(py::str(py::type::of(a).attr("__name__"))));
      }
    }
    bool single = true;
    auto body = [&](std::vector<Tensor>& stand_ins) {
      py::tuple call_args(args.size());
      for (size_t i = 0; i < args.size(); ++i)
        call_args[i] = tensor_position[i] >= 0 ? py::cast(stand_ins[tensor_position[i]]) : args[i];
      py::object result = fn(*call_args);
      std::vector<Tensor> out;
      if (py::isinstance<Tensor>(result)) {
        out.push_back(result.cast<Tensor>());
      } else if (py::isinstance<py::tuple>(result) || py::isinstance<py::list>(result)) {
        single = false;
        for (py::handle h : result) {
          if (!py::isinstance<Tensor>(h)) throw py::type_error("a function compiled over ember tensors returns tensors");
          out.push_back(h.cast<Tensor>());
        }
      } else {
        throw py::type_error("a function compiled over ember tensors returns a tensor or a tuple of them");
      }
      return out;
    };
    std::vector<Tensor> out = core_->call(values, types, {}, body).outputs;  // Python cannot rebind arguments
    if (single && out.size() == 1) return py::cast(out[0]);
    return py::cast(out);
  }

  Report report() const { return core_->report(); }

 private:
  static Options checked(const std::map<std::string, std::string>& values) {
    Options o = Options::from_map(values);
    o.validate();
    return o;
  }

  std::shared_ptr<detail::CompiledCore> core_;
};

}  // namespace

void register_tensors(py::module_& m) {
  bind_tensor(m);
  m.def("apply", &apply_op, py::arg("op"), py::arg("inputs"), py::arg("attrs") = py::dict(),
        "Runs (or, inside ember's compile, records) op `op` on ember tensors; returns its outputs.");
  py::class_<CompiledFunction>(m, "CompiledFunction")
      .def(py::init<const std::map<std::string, std::string>&>(), py::arg("options"))
      .def("__call__", &CompiledFunction::call)
      .def("report_text", [](const CompiledFunction& f) { return f.report().text(); })
      .def("report_json", [](const CompiledFunction& f) { return f.report().json(); });
}

}  // namespace ember::python

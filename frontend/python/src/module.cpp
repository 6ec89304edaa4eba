// ember._C: the Python binding of ember's C++ core. The Python package (frontend/python/ember)
// builds on it; nothing here is meant to be called by users directly.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "arrays.h"
#include "frontend/compile.h"
#include "graph.h"
#include "dispatch_call.h"
#include "steady_call.h"
#include "tensors.h"
#include "ir/error.h"
#include "ir/symbolic.h"
#include "modes/mode.h"
#include "runtime/config.h"
#include "runtime/cuda_driver.h"
#include "runtime/disk_cache.h"
#include "runtime/tuning_db.h"
#include "torch_calls.h"

namespace py = pybind11;

namespace ember::python {

void register_errors(py::module_& m) {
  // An index out of range: PyTorch raises IndexError for some ops (embedding, x[idx]) and
  // RuntimeError for others (gather, scatter); ember's error is both, and a ValueError as before.
  static PyObject* index_error = [] {
    PyObject* bases = PyTuple_Pack(3, PyExc_IndexError, PyExc_RuntimeError, PyExc_ValueError);
    PyObject* type = PyErr_NewException("ember.IndexOutOfRange", bases, nullptr);
    Py_DECREF(bases);
    return type;
  }();
  m.attr("IndexOutOfRange") = py::handle(index_error);
  // Memory the machine cannot give: PyTorch raises RuntimeError; Python's own is MemoryError.
  static PyObject* memory_error = [] {
    PyObject* bases = PyTuple_Pack(2, PyExc_RuntimeError, PyExc_MemoryError);
    PyObject* type = PyErr_NewException("ember.OutOfMemoryError", bases, nullptr);
    Py_DECREF(bases);
    return type;
  }();
  m.attr("OutOfMemoryError") = py::handle(memory_error);
  // A device asked for and not here (no driver, no GPU): PyTorch raises RuntimeError for it.
  static PyObject* device_error = PyErr_NewException("ember.DeviceUnavailableError", PyExc_RuntimeError, nullptr);
  m.attr("DeviceUnavailableError") = py::handle(device_error);
  // Each kind of ember::Error as the Python exception a user expects for it.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      switch (e.kind()) {
        case ErrorKind::Value: PyErr_SetString(PyExc_ValueError, e.what()); return;
        case ErrorKind::Type: PyErr_SetString(PyExc_TypeError, e.what()); return;
        case ErrorKind::NotImplemented: PyErr_SetString(PyExc_NotImplementedError, e.what()); return;
        case ErrorKind::Runtime:
        case ErrorKind::Internal: PyErr_SetString(PyExc_RuntimeError, e.what()); return;
        case ErrorKind::Index: PyErr_SetString(index_error, e.what()); return;
        case ErrorKind::OutOfMemory: PyErr_SetString(memory_error, e.what()); return;
        case ErrorKind::DeviceUnavailable: PyErr_SetString(device_error, e.what()); return;
      }
    } catch (const SymbolicShapeError& e) {
      PyErr_SetString(PyExc_ValueError, (std::string("[symbolic] ") + e.what()).c_str());
    }
  });
}

void register_array(py::module_& m) {
  py::class_<Array>(m, "Array")
      .def_property_readonly("shape", &Array::shape)
      .def_property_readonly("strides", &Array::strides)
      .def_property_readonly("dtype", [](const Array& a) { return std::string(dtype_name(a.dtype())); })
      .def("__dlpack__", [](const Array& a, py::kwargs) { return array_to_dlpack(a); })
      .def("__dlpack_device__", [](const Array&) { return py::make_tuple(1, 0); })
      .def("__repr__", [](const Array& a) { return "<ember.Array " + a.str() + ">"; });
  m.def("from_dlpack", &array_from_dlpack, py::arg("tensor"),
        "An ember Array sharing the memory of a CPU tensor with __dlpack__ (no copy).");
}

}  // namespace ember::python

PYBIND11_MODULE(_C, m) {
  namespace ep = ember::python;
  m.doc() = "ember's C++ core";
  ep::register_errors(m);
  ep::register_array(m);
  ep::register_dispatch_call(m);
  ep::register_steady_call(m);
  ep::register_graph(m);
  ep::register_torch_calls(m);
  ep::register_tensors(m);
  m.def("mode_names", &ember::mode_names);
  m.def(
      "check_options", [](const std::map<std::string, std::string>& options) { ember::Options::from_map(options); },
      "Raises ValueError for an option ember does not know or a value it does not take (options as strings).");
  m.def(
      "tuning_entries",
      [] {
        pybind11::list out;
        for (const auto& e : ember::tuning_db::list()) out.append(pybind11::make_tuple(e.key, e.signature, e.choice));
        return out;
      },
      "max-autotune's tuning database: (key, signature, choice) per entry.");
  m.def(
      "cuda_unavailable_reason",
      [] {
        std::string why;
        ember::cuda::available(&why);
        return why;
      },
      "\"\" when a CUDA device can be used; else what is missing (loads the driver the first time).");
  m.def(
      "cuda_device",
      [](int ordinal) {
        ember::cuda::DeviceInfo d = ember::cuda::device(ordinal);
        pybind11::dict out;
        out["name"] = d.name;
        out["major"] = d.major;
        out["minor"] = d.minor;
        out["arch"] = d.arch();
        out["multi_processor_count"] = d.multiprocessors;
        out["total_memory"] = d.memory;
        out["driver_version"] = d.driver_version;
        return out;
      },
      pybind11::arg("ordinal") = 0, "A CUDA device's properties; raises DeviceUnavailableError without one.");
  m.def("cuda_device_count", &ember::cuda::device_count);
  m.def("tuning_clear", &ember::tuning_db::clear, "Removes every entry of the tuning database; returns how many.");
  // The disk cache for the Python side's own entries (the warm start's), under its rules.
  m.def(
      "cache_load",
      [](const std::string& kind, const std::string& key) -> pybind11::object {
        std::optional<std::string> payload = ember::disk_cache::load(kind, key);
        if (!payload) return pybind11::none();
        return pybind11::bytes(*payload);
      },
      pybind11::arg("kind"), pybind11::arg("key"), "The payload under `key` (hex) in `kind`, or None (a logged miss).");
  m.def(
      "cache_store",
      [](const std::string& kind, const std::string& key, const pybind11::bytes& payload) {
        ember::disk_cache::store(kind, key, std::string(payload));
      },
      pybind11::arg("kind"), pybind11::arg("key"), pybind11::arg("payload"), "Stores it (best effort).");
  m.def("cache_keys", &ember::disk_cache::keys, pybind11::arg("kind"));
  m.def("cache_clear", &ember::disk_cache::remove_all, pybind11::arg("kind"), "Removes every entry of `kind`.");
  m.def("log_enabled", &ember::config::log_enabled, pybind11::arg("topic"), "Whether EMBER_LOG names `topic`.");
  m.def("log", &ember::config::log, pybind11::arg("topic"), pybind11::arg("message"), "[ember:topic] message on stderr.");
  m.def(
      "canonical_dim",
      [](const std::string& text) -> pybind11::object {
        ember::Dim d = ember::parse_dim(text);
        if (d.is_static()) return pybind11::int_(d.value());
        return pybind11::str(d.str());
      },
      pybind11::arg("text"), "A dim's text as ember writes it (shapes compare as text), or its int.");
}

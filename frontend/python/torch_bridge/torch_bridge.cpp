// ember._torch_bridge: PyTorch tensors read and made in C++, for the steady call.
//
// [Note: the torch bridge] A tiny compiled call (x + 1) spent about 4 us in ember's part against
// Inductor's 1: each input and output went through DLPack (a capsule exported in Python,
// imported in C++) and each output was made in Python. This module is built against PyTorch's
// own headers and libraries, so it reads a tensor's data pointer, sizes and strides where
// PyTorch keeps them, and makes an output with the allocator Inductor's wrappers use, tens of
// nanoseconds each. It is its own module so that ember._C stays free of PyTorch: built only
// where PyTorch is found at configure time, loaded only after torch is imported (its symbols
// are torch's), and without it ember takes the DLPack path.
#include "torch_bridge.h"

#include <ATen/EmptyTensor.h>
#include <torch/csrc/autograd/python_variable.h>

#include <memory>
#include <optional>
#include <string>

namespace ember::python {

namespace {

std::optional<DType> ember_dtype(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Bool: return DType::Bool;
    case c10::ScalarType::Char: return DType::Int8;
    case c10::ScalarType::Short: return DType::Int16;
    case c10::ScalarType::Int: return DType::Int32;
    case c10::ScalarType::Long: return DType::Int64;
    case c10::ScalarType::Byte: return DType::UInt8;
    case c10::ScalarType::Half: return DType::Float16;
    case c10::ScalarType::BFloat16: return DType::BFloat16;
    case c10::ScalarType::Float: return DType::Float32;
    case c10::ScalarType::Double: return DType::Float64;
    default: return std::nullopt;
  }
}

c10::ScalarType torch_dtype(DType t) {
  switch (t) {
    case DType::Bool: return c10::ScalarType::Bool;
    case DType::Int8: return c10::ScalarType::Char;
    case DType::Int16: return c10::ScalarType::Short;
    case DType::Int32: return c10::ScalarType::Int;
    case DType::Int64: return c10::ScalarType::Long;
    case DType::UInt8: return c10::ScalarType::Byte;
    case DType::Float16: return c10::ScalarType::Half;
    case DType::BFloat16: return c10::ScalarType::BFloat16;
    case DType::Float32: return c10::ScalarType::Float;
    case DType::Float64: return c10::ScalarType::Double;
  }
  return c10::ScalarType::Undefined;
}

// Whether the storage reaches the last element any index can: a storage resized to nothing
// (FSDP frees unsharded parameters so) keeps its tensor's sizes.
bool storage_holds_elements(const at::Tensor& t) {
  if (t.numel() == 0) return true;
  int64_t last = t.storage_offset();
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.stride(d) < 0) return false;
    last += (t.size(d) - 1) * t.stride(d);
  }
  return static_cast<size_t>(last + 1) * t.element_size() <= t.storage().nbytes();
}

// The tensor's memory and layout, where `view` may read them.
bool read(PyObject* object, TorchTensorView* out) {
  const at::Tensor& t = THPVariable_Unpack(object);
  if (!t.defined() || !t.has_storage() || t.device().type() != c10::DeviceType::CPU || t.layout() != c10::kStrided ||
      t.is_neg() || t.is_conj() || t._is_zerotensor())
    return false;
  std::optional<DType> dtype = ember_dtype(t.scalar_type());
  if (!dtype || !storage_holds_elements(t)) return false;
  out->data = t.numel() == 0 ? nullptr : t.data_ptr();  // data_ptr() also materializes a lazy copy
  out->ndim = t.dim();
  out->sizes = t.sizes().data();
  out->strides = t.strides().data();
  out->dtype = *dtype;
  return true;
}

bool view(PyObject* object, TorchTensorView* out) {
  if (!THPVariable_CheckExact(object)) return false;
  try {
    return read(object, out);
  } catch (const std::exception&) {
    return false;  // a tensor whose sizes or memory cannot be read so (a wrapper of another kind)
  }
}

void* allocate(DType dtype, int64_t ndim, const int64_t* sizes, const int64_t* strides, void** data) {
  try {
    auto* t = new at::Tensor(at::detail::empty_strided_cpu(c10::IntArrayRef(sizes, ndim),
                                                           c10::IntArrayRef(strides, ndim), torch_dtype(dtype)));
    *data = t->numel() == 0 ? nullptr : t->data_ptr();
    return t;
  } catch (const std::exception&) {
    return nullptr;
  }
}

PyObject* wrap(void* handle) {
  std::unique_ptr<at::Tensor> t(static_cast<at::Tensor*>(handle));
  try {
    return THPVariable_Wrap(std::move(*t));
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
}

void discard(void* handle) { delete static_cast<at::Tensor*>(handle); }

const TorchBridge kBridge = {kTorchBridgeVersion, view, allocate, wrap, discard};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "_torch_bridge",
                       "PyTorch tensors read and made in C++ for ember._C's steady call", -1, nullptr};

}  // namespace

}  // namespace ember::python

namespace {

// The bridge reads PyTorch's structures as the headers it was built with lay them out: with
// another PyTorch (upgraded since the build) it must not load.
bool built_for_this_torch() {
  PyObject* torch = PyImport_ImportModule("torch");
  PyObject* version = torch ? PyObject_GetAttrString(torch, "__version__") : nullptr;
  PyObject* text = version ? PyObject_Str(version) : nullptr;
  const char* now = text ? PyUnicode_AsUTF8(text) : nullptr;
  bool same = now && std::string(now) == EMBER_TORCH_VERSION;
  if (now && !same)
    PyErr_Format(PyExc_ImportError, "ember._torch_bridge was built for torch %s, this is torch %s", EMBER_TORCH_VERSION, now);
  Py_XDECREF(text);
  Py_XDECREF(version);
  Py_XDECREF(torch);
  return same;
}

}  // namespace

PyMODINIT_FUNC PyInit__torch_bridge() {
  using namespace ember::python;
  if (!built_for_this_torch()) return nullptr;
  if (!THPVariableClass) {
    PyErr_SetString(PyExc_ImportError, "ember._torch_bridge needs torch imported first");
    return nullptr;
  }
  PyObject* module = PyModule_Create(&kModule);
  if (!module) return nullptr;
  PyObject* api = PyCapsule_New(const_cast<TorchBridge*>(&kBridge), kTorchBridgeCapsule, nullptr);
  if (!api || PyModule_AddObject(module, "api", api) < 0) {
    Py_XDECREF(api);
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}

#include "arrays.h"

#include <string>
#include <vector>

#include "dlpack.h"
#include "ir/error.h"

namespace py = pybind11;

namespace ember::python {

namespace {

constexpr const char* kCapsuleName = "dltensor";
constexpr const char* kUsedCapsuleName = "used_dltensor";

DType dtype_from_dl(DLDataType t) {
  if (t.lanes != 1) EMBER_THROW(Value, "[dlpack] vector dtypes (lanes=", int(t.lanes), ") are not supported");
  switch (t.code) {
    case kDLBool: if (t.bits == 8) return DType::Bool; break;
    case kDLInt:
      if (t.bits == 8) return DType::Int8;
      if (t.bits == 16) return DType::Int16;
      if (t.bits == 32) return DType::Int32;
      if (t.bits == 64) return DType::Int64;
      break;
    case kDLUInt: if (t.bits == 8) return DType::UInt8; break;
    case kDLFloat:
      if (t.bits == 16) return DType::Float16;
      if (t.bits == 32) return DType::Float32;
      if (t.bits == 64) return DType::Float64;
      break;
    case kDLBfloat: if (t.bits == 16) return DType::BFloat16; break;
  }
  EMBER_THROW(Value, "[dlpack] dtype code ", int(t.code), " with ", int(t.bits), " bits has no ember dtype");
}

DLDataType dtype_to_dl(DType t) {
  uint8_t bits = static_cast<uint8_t>(itemsize(t) * 8);
  switch (t) {
    case DType::Bool: return {kDLBool, 8, 1};
    case DType::UInt8: return {kDLUInt, 8, 1};
    case DType::Float16: case DType::Float32: case DType::Float64: return {kDLFloat, bits, 1};
    case DType::BFloat16: return {kDLBfloat, 16, 1};
    default: return {kDLInt, bits, 1};
  }
}

Array from_managed(DLManagedTensor* managed) {
  const DLTensor& t = managed->dl_tensor;
  auto release = [managed] { if (managed->deleter) managed->deleter(managed); };
  if (t.device.device_type != kDLCPU) {
    release();
    EMBER_THROW(Value, "[dlpack] only CPU tensors can be passed to ember (device type ", t.device.device_type, ")");
  }
  DType dtype;
  std::vector<int64_t> shape(t.shape, t.shape + t.ndim);
  std::vector<int64_t> strides = t.strides ? std::vector<int64_t>(t.strides, t.strides + t.ndim)
                                           : Array::contiguous_strides(shape);
  size_t nbytes = 0;
  try {
    dtype = dtype_from_dl(t.dtype);
    nbytes = extent_bytes(shape, strides, itemsize(dtype));
    // PyTorch's zero tensors (torch._efficientzerotensor, from some gradients) have elements
    // and no memory: reading them was a segfault.
    if (t.data == nullptr && nbytes > 0)
      EMBER_THROW(Value, "[dlpack] a tensor with elements and no memory (a PyTorch zero tensor?): "
                         "materialize it first");
  } catch (...) {
    release();
    throw;
  }
  char* data = static_cast<char*>(t.data) + t.byte_offset;
  auto storage = std::make_shared<Storage>(data, nbytes, release);
  return Array(dtype, std::move(shape), std::move(strides), 0, std::move(storage));
}

// What an exported capsule owns: the array (and so its storage) and the shape and strides
// DLTensor points into.
struct Export {
  Array array;
  std::vector<int64_t> shape, strides;
  DLManagedTensor managed;
};

void delete_export(DLManagedTensor* m) { delete static_cast<Export*>(m->manager_ctx); }

}  // namespace

size_t extent_bytes(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides, size_t item) {
  int64_t last = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) return 0;
    if (strides[d] < 0) EMBER_THROW(Value, "[dlpack] negative strides are not supported");
    last += (shape[d] - 1) * strides[d];
  }
  return static_cast<size_t>(last + 1) * item;
}

Array array_from_dlpack(const py::handle& obj) {
  py::object capsule;
  if (PyCapsule_CheckExact(obj.ptr())) capsule = py::reinterpret_borrow<py::object>(obj);
  else if (py::hasattr(obj, "__dlpack__")) capsule = obj.attr("__dlpack__")();
  else
    throw py::type_error("ember takes tensors with __dlpack__ (torch.Tensor, numpy.ndarray), not " +
                         std::string(py::str(py::type::of(obj))));
  if (std::string(PyCapsule_GetName(capsule.ptr()) ? PyCapsule_GetName(capsule.ptr()) : "") != kCapsuleName)
    throw py::value_error("[dlpack] expected an unused 'dltensor' capsule");
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), kCapsuleName));
  if (!managed) throw py::error_already_set();
  PyCapsule_SetName(capsule.ptr(), kUsedCapsuleName);  // ours now: the producer must not free it
  return from_managed(managed);
}

py::capsule array_to_dlpack(const Array& a) {
  auto* e = new Export{a, a.shape(), a.strides(), {}};
  DLTensor& t = e->managed.dl_tensor;
  t.data = a.numel() == 0 && !a.defined() ? nullptr : a.data();
  t.device = {kDLCPU, 0};
  t.ndim = static_cast<int32_t>(a.rank());
  t.dtype = dtype_to_dl(a.dtype());
  t.shape = e->shape.data();
  t.strides = e->strides.data();
  t.byte_offset = 0;
  e->managed.manager_ctx = e;
  e->managed.deleter = delete_export;
  // A capsule nobody consumed still frees what it owns; a consumed one was renamed.
  return py::capsule(&e->managed, kCapsuleName, [](PyObject* cap) {
    if (PyCapsule_IsValid(cap, kCapsuleName)) {
      auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, kCapsuleName));
      m->deleter(m);
    } else {
      PyErr_Clear();
    }
  });
}

}  // namespace ember::python

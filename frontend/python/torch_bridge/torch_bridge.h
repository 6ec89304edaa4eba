// ember._torch_bridge's table of functions, which ember._C reads from the module's `api`
// capsule ([Note: the torch bridge] in torch_bridge.cpp). Plain types only: the bridge is built
// against PyTorch's headers and ember._C is not, and neither sees the other's.
#pragma once

#include <Python.h>

#include <cstdint>

#include "ir/dtype.h"

namespace ember::python {

// A tensor's memory and layout, read in place: `sizes` and `strides` point into the tensor's
// own metadata, valid while the tensor lives and is not resized or restrided.
struct TorchTensorView {
  void* data = nullptr;  // the first element (the storage offset applied)
  int64_t ndim = 0;
  const int64_t* sizes = nullptr;
  const int64_t* strides = nullptr;
  DType dtype = DType::Float32;
};

struct TorchBridge {
  int version;
  // Fills `out` and returns true for a plain tensor: a torch.Tensor or Parameter (no subclass)
  // on the CPU, strided, of an ember dtype, without a lazy negation, conjugation or zero bit,
  // whose storage holds every element. False for anything else (the caller goes the long way).
  bool (*view)(PyObject* tensor, TorchTensorView* out);
  // A new CPU tensor of this dtype, shape and strides, made without the GIL (the plan asks for
  // its outputs' memory while it runs): a handle to it, and its first element in `data`; nullptr
  // when the allocation failed. Each handle goes to `wrap` or `discard` once.
  void* (*allocate)(DType dtype, int64_t ndim, const int64_t* sizes, const int64_t* strides, void** data);
  // With the GIL: the handle's tensor as a Python object (a new reference), or nullptr with a
  // Python error set. The handle is consumed either way.
  PyObject* (*wrap)(void* handle);
  void (*discard)(void* handle);
};

inline constexpr int kTorchBridgeVersion = 2;
inline constexpr const char* kTorchBridgeCapsule = "ember._torch_bridge.api";

}  // namespace ember::python

// ember arrays to and from Python objects through DLPack, without copies: a PyTorch or NumPy
// tensor's memory becomes an ember Array's storage (kept alive by it), and an ember Array
// becomes a capsule that torch.from_dlpack / numpy.from_dlpack read.
#pragma once

#include <pybind11/pybind11.h>

#include "runtime/array.h"

namespace ember::python {

// Any object with __dlpack__ (a CPU tensor of a dtype ember has), or a "dltensor" capsule. A
// TypeError for anything else, a ValueError for a device or dtype ember does not take.
Array array_from_dlpack(const pybind11::handle& obj);
// Bytes from the first element to one past the last one any index can reach (a ValueError for
// negative strides).
size_t extent_bytes(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides, size_t item);
// A "dltensor" capsule viewing `a` (strides and offset kept).
pybind11::capsule array_to_dlpack(const Array& a);

}  // namespace ember::python

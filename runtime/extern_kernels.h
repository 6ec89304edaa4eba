// CPU implementations of extern ops (ir/extern.h), registered by name.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "ir/attrs.h"
#include "runtime/array.h"

namespace ember {

// Reads `inputs` (any layout) and writes every output into `outputs`: contiguous arrays of the
// declared dtypes and shapes, allocated by the caller (a plan's buffers). Throws ember::Error
// for bad input.
using ExternCpuFn = std::function<void(std::span<const Array> inputs, std::span<const Array> outputs, const Attrs& attrs)>;

// Registers (or replaces) the CPU implementation of the extern op `name`. Thread-safe.
void register_extern_kernel(const std::string& name, ExternCpuFn fn);
// The implementation, or null.
std::shared_ptr<const ExternCpuFn> find_extern_kernel(std::string_view name);

}  // namespace ember

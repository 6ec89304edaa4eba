// Host memory for arrays: 64-byte aligned. Blocks of 64 KiB and up are kept when freed and
// handed out again for a request of the same size class, because fresh memory costs a page fault
// per 4 KiB on first touch (glibc maps and unmaps such blocks on every call): a fresh 512 MiB
// output costs about 170 ms here, several times what the kernel that fills it takes, and an MLP's
// 1 MiB activations doubled its call time in the default mode. The blocks kept stay under a bound (a quarter of the machine's
// memory, or EMBER_ALLOCATOR_CACHE_MB); past it, freed blocks go back to the system.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "ir/dtype.h"

namespace ember {

// Throws ember::Error(OutOfMemory) when the system refuses (after freeing the kept blocks), or
// when `bytes` could not be addressed at all.
void* allocate(size_t bytes);
void release(void* p, size_t bytes);  // `bytes` as given to allocate()

// The bytes of a new contiguous array of `shape` and `dtype`, checked: a Value error naming `op`
// for a negative dim or more elements than int64 holds, an OutOfMemory error for a byte count
// past the address space. Every allocation sized from a shape goes through it.
size_t checked_nbytes(std::string_view op, const std::vector<int64_t>& shape, DType dtype);

// Bytes held in freed blocks waiting for reuse (for tests).
int64_t allocator_cached_bytes();

}  // namespace ember

// ember_cuda_check --device: the recorded launches on a real GPU (tests/cuda/device_check.sh).
#pragma once

#include <string>
#include <vector>

#include "tests/unit/cuda_check.h"

namespace ember::cuda_check {

// Replays every recorded launch through its kernel compiled for device 0 (NVRTC, the cubin
// cache, the driver), with guard bytes around each operand, judged as the emulated replay is.
// Returns the number of failures (a kernel that did not compile or load, a launch that differed).
int replay_on_device(const std::vector<Kernel>& kernels);

// The bandwidth benchmark: up to `count` of the kernels (spread over them), each launched on its
// first record's data with the outermost dim grown to about 2^26 elements, timed by events, its
// bytes moved per second against the device's measured copy bandwidth. Writes a row per kernel
// to `table` (markdown) and prints a summary per kind of kernel.
void bench_on_device(const std::vector<Kernel>& kernels, size_t count, const std::string& table);

}  // namespace ember::cuda_check

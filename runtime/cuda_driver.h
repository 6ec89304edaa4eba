// The CUDA driver API, loaded at run time: devices, device memory, modules, launches, events.
//
// [Note: loading the driver]
// libcuda.so.1 comes with the NVIDIA driver, not with the toolkit, so ember never links it: it is
// opened by dlopen the first time something asks for a device (EMBER_CUDA_DRIVER_LIBRARY names
// another path), and a process that never asks never maps it; a CPU-only machine builds,
// imports and runs everything without it. When CUDA is asked for and cannot be had, the error is
// ErrorKind::DeviceUnavailable (ember.DeviceUnavailableError in Python, a RuntimeError) and says
// which of these is missing: the driver library, its entry points, a usable driver (cuInit's
// own error), or a device. Work runs in the device's primary context, the one PyTorch and the
// CUDA runtime use, so memory and streams are shared with them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ember::cuda {

// Whether a CUDA device can be used here; `why` says what is missing when not. Loads the driver
// the first time (and only then).
bool available(std::string* why = nullptr);

struct DeviceInfo {
  int ordinal = 0;
  std::string name;               // "NVIDIA H200"
  int major = 0, minor = 0;       // compute capability
  int multiprocessors = 0;
  size_t memory = 0;              // bytes
  int driver_version = 0;         // 13000 for CUDA 13.0
  std::string arch() const { return "sm_" + std::to_string(major) + std::to_string(minor); }
};
int device_count();
// Throws DeviceUnavailable (as every call below does when there is no device).
DeviceInfo device(int ordinal = 0);

// Device memory (device 0), freed with the object.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  uint64_t address() const { return address_; }
  size_t bytes() const { return bytes_; }

 private:
  uint64_t address_ = 0;
  size_t bytes_ = 0;
};

// Synchronous copies and fills (the null stream).
void copy_to_device(uint64_t dst, const void* src, size_t bytes);
void copy_to_host(void* dst, uint64_t src, size_t bytes);
void copy_on_device(uint64_t dst, uint64_t src, size_t bytes);
void fill_bytes(uint64_t dst, unsigned char value, size_t bytes);
void synchronize();

// A loaded cubin (or PTX, which the driver compiles) and the kernels in it.
class Module {
 public:
  explicit Module(const std::string& image);
  ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  // The kernel named `name` (an extern "C" __global__ function); throws when there is none.
  void* function(const std::string& name) const;

 private:
  void* module_ = nullptr;
};

// Launches `function` with `grid` blocks of `threads` on `stream` (null: the legacy default
// stream), passing one parameter by value: the `param_bytes` bytes at `param` (the kernel's
// parameter struct, [Note: the CUDA kernel ABI]). Asynchronous; a launch error throws.
void launch(void* function, int64_t grid, int threads, const void* param, size_t param_bytes, void* stream = nullptr,
            size_t shared_bytes = 0);

// Device time between two points of the null stream, by events.
class Timer {
 public:
  Timer();
  ~Timer();
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;
  void start();
  // Milliseconds since start(), waiting for the device to get there.
  double stop();

 private:
  void* start_ = nullptr;
  void* stop_ = nullptr;
};

}  // namespace ember::cuda

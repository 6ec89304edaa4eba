// Generated CUDA kernels on a device: NVRTC's cubins cached in memory and on disk, loaded
// through the driver (runtime/cuda_driver.h), launched on device addresses.
//
// [Note: the cubin cache]
// A cubin is keyed by the SHA-256 of everything that shapes it: the CUDA source (which holds the
// prelude and so the generator's numerics), the architecture, NVRTC's version, its options, and
// ember's version. It is kept in memory for the process and in the disk cache under the kind
// "cuda", with the disk cache's rules ([Note: the disk cache]): 0700/0600, written to a temporary
// name and renamed, a checksum, and anything unreadable or foreign is a logged miss. So a second
// process compiles no CUDA kernel it has compiled before.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "codegen/kernel_spec.h"
#include "runtime/cuda_driver.h"

namespace ember::codegen::cuda {

struct CubinBuild {
  std::shared_ptr<const std::string> image;
  bool compiled = false;   // by NVRTC, now
  bool from_disk = false;  // from the disk cache
  double ms = 0;           // compile or load time
};

// The cubin of `source` (its kernels' names inside it) for `arch` ("sm_90"). Throws NvrtcError.
CubinBuild cubin_for(const std::string& source, const std::string& name, const std::string& arch);

// One generated kernel loaded on device 0 (compiled for its architecture).
class DeviceKernel {
 public:
  DeviceKernel(const KernelSpec& spec, const std::string& name);
  // Launches it asynchronously on `stream`: `addresses` holds each input's then each output's
  // element 0 on the device, `meta` the sizes and strides ([Note: the CUDA kernel ABI]).
  void launch(const std::vector<uint64_t>& addresses, const std::vector<int64_t>& meta, void* stream = nullptr) const;
  const CubinBuild& build() const { return build_; }

 private:
  KernelSpec spec_;
  CubinBuild build_;
  std::unique_ptr<ember::cuda::Module> module_;
  void* function_ = nullptr;
};

// The kernel's one parameter, as its struct lays it out: the addresses, then meta.
std::vector<uint64_t> kernel_param(const std::vector<uint64_t>& addresses, const std::vector<int64_t>& meta);

}  // namespace ember::codegen::cuda

// NVRTC, loaded at run time: CUDA C++ source to PTX or a cubin, in process, with no GPU needed.
//
// The library is found by dlopen, in order: EMBER_NVRTC_LIBRARY (a path), the loader's own
// search (LD_LIBRARY_PATH) for libnvrtc.so.13 and .12, the NVIDIA wheel that the build found
// beside its Python (nvidia-cuda-nvrtc, whose folder CMake records), and /usr/local/cuda/lib64.
// Nothing is loaded until a compile is asked for, so a CPU-only process never maps it.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace ember::codegen::cuda {

// NVRTC is missing, or it rejected the source: the message says which, with NVRTC's log.
class NvrtcError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Compiled {
  std::string image;  // PTX text, or a cubin
  std::string log;    // NVRTC's messages (warnings)
  double ms = 0;      // compile time
};

// Whether NVRTC can be loaded here; `why` says what was tried when it cannot.
bool nvrtc_available(std::string* why = nullptr);
// NVRTC's version, "13.0".
std::string nvrtc_version();

// The options every compile passes besides the architecture (part of a cubin's cache key).
std::string nvrtc_options();

// Compiles `source` for an architecture ("sm_80", "sm_90"): a cubin when `cubin`, else PTX for
// the matching compute_XX. Throws NvrtcError.
Compiled nvrtc_compile(const std::string& source, const std::string& name, const std::string& arch, bool cubin,
                       const std::vector<std::string>& extra_options = {});

}  // namespace ember::codegen::cuda

#include "codegen/cuda/cuda_kernel.h"

#include <chrono>
#include <mutex>
#include <unordered_map>

#include "codegen/cuda/emit_cuda.h"
#include "codegen/cuda/nvrtc.h"
#include "ir/error.h"
#include "ir/sha256.h"
#include "runtime/config.h"
#include "runtime/disk_cache.h"

namespace ember::codegen::cuda {

namespace {

std::mutex cache_mu;
std::unordered_map<std::string, std::shared_ptr<const std::string>> memory_cache;  // by key

std::string cubin_key(const std::string& source, const std::string& arch) {
  return sha256_hex("cuda cubin 1\narch " + arch + "\nnvrtc " + nvrtc_version() + "\noptions " + nvrtc_options() +
                    "\nember " + EMBER_VERSION + "\n" + source);
}

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

CubinBuild cubin_for(const std::string& source, const std::string& name, const std::string& arch) {
  auto start = std::chrono::steady_clock::now();
  std::string key = cubin_key(source, arch);
  CubinBuild out;
  {
    std::lock_guard<std::mutex> lock(cache_mu);
    if (auto it = memory_cache.find(key); it != memory_cache.end()) {
      out.image = it->second;
      return out;
    }
  }
  if (std::optional<std::string> image = disk_cache::load("cuda", key)) {
    out.image = std::make_shared<const std::string>(std::move(*image));
    out.from_disk = true;
  } else {
    out.image = std::make_shared<const std::string>(nvrtc_compile(source, name, arch, true).image);
    out.compiled = true;
    disk_cache::store("cuda", key, *out.image);
  }
  out.ms = ms_since(start);
  if (config::log_enabled("compile"))
    config::log("compile", name + " for " + arch + (out.compiled ? ": compiled by NVRTC in " : ": from the disk cache in ") +
                               std::to_string(out.ms) + " ms");
  std::lock_guard<std::mutex> lock(cache_mu);
  memory_cache.emplace(key, out.image);
  return out;
}

std::vector<uint64_t> kernel_param(const std::vector<uint64_t>& addresses, const std::vector<int64_t>& meta) {
  std::vector<uint64_t> param(addresses);
  for (int64_t m : meta) param.push_back(static_cast<uint64_t>(m));
  return param;
}

DeviceKernel::DeviceKernel(const KernelSpec& spec, const std::string& name) : spec_(spec) {
  if (!can_emit_cuda(spec)) EMBER_THROW(NotImplemented, "[cuda] ", name, " has an instruction without a CUDA form");
  std::string arch = ember::cuda::device().arch();
  build_ = cubin_for(emit_cuda(spec, name), name, arch);
  module_ = std::make_unique<ember::cuda::Module>(*build_.image);
  function_ = module_->function(name);
}

void DeviceKernel::launch(const std::vector<uint64_t>& addresses, const std::vector<int64_t>& meta, void* stream) const {
  size_t operands = spec_.inputs.size() + spec_.outputs.size();
  EMBER_CHECK(addresses.size() == operands && meta.size() == static_cast<size_t>(spec_.rank) * (1 + operands),
              "a CUDA launch's arguments do not match its kernel");
  std::vector<uint64_t> param = kernel_param(addresses, meta);
  ember::cuda::launch(function_, grid_of(spec_, meta.data()), kBlockThreads, param.data(), param.size() * 8, stream);
}

}  // namespace ember::codegen::cuda

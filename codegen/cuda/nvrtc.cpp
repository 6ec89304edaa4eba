#include "codegen/cuda/nvrtc.h"

#include <dlfcn.h>
#include <glob.h>

#include <chrono>
#include <mutex>

#include "runtime/config.h"

namespace ember::codegen::cuda {

namespace {

// The few entry points ember calls, declared here so that building needs no CUDA header.
using Program = void*;
using Result = int;  // nvrtcResult: 0 is NVRTC_SUCCESS
struct Api {
  void* handle = nullptr;
  std::string why;  // what was tried, when nothing loaded
  Result (*version)(int*, int*) = nullptr;
  Result (*create)(Program*, const char*, const char*, int, const char* const*, const char* const*) = nullptr;
  Result (*compile)(Program, int, const char* const*) = nullptr;
  Result (*log_size)(Program, size_t*) = nullptr;
  Result (*log)(Program, char*) = nullptr;
  Result (*ptx_size)(Program, size_t*) = nullptr;
  Result (*ptx)(Program, char*) = nullptr;
  Result (*cubin_size)(Program, size_t*) = nullptr;
  Result (*cubin)(Program, char*) = nullptr;
  Result (*destroy)(Program*) = nullptr;
  const char* (*error)(Result) = nullptr;
};

std::vector<std::string> candidates() {
  std::vector<std::string> paths;
  std::string explicit_path = config::get("EMBER_NVRTC_LIBRARY");
  if (!explicit_path.empty()) paths.push_back(explicit_path);
  for (const char* name : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}) paths.push_back(name);
#ifdef EMBER_NVRTC_HINT
  for (const char* name : {"/libnvrtc.so.13", "/libnvrtc.so.12"}) paths.push_back(std::string(EMBER_NVRTC_HINT) + name);
#endif
  for (const char* name : {"/usr/local/cuda/lib64/libnvrtc.so.13", "/usr/local/cuda/lib64/libnvrtc.so.12"})
    paths.push_back(name);
  return paths;
}

// NVRTC opens libnvrtc-builtins by its soname when it compiles; loaded from a folder that is not
// on the loader's path, it would not find it there: loaded first from the same folder, it is.
void preload_builtins(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return;
  std::string dir = path.substr(0, slash + 1);
  glob_t found;
  if (glob((dir + "libnvrtc-builtins.so.*").c_str(), 0, nullptr, &found) == 0) {
    for (size_t i = 0; i < found.gl_pathc; ++i)
      if (std::string(found.gl_pathv[i]).find(".alt.") == std::string::npos) dlopen(found.gl_pathv[i], RTLD_NOW | RTLD_GLOBAL);
  }
  globfree(&found);
}

template <class F>
void bind(Api& api, F& fn, const char* symbol) {
  fn = reinterpret_cast<F>(dlsym(api.handle, symbol));
  if (!fn) api.why += std::string(" (no ") + symbol + ")";
}

const Api& api() {
  static Api a = [] {
    Api a;
    for (const std::string& path : candidates()) {
      preload_builtins(path);
      a.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (a.handle) break;
      a.why += (a.why.empty() ? "" : ", ") + path;
    }
    if (!a.handle) {
      a.why = "NVRTC not found (tried " + a.why + "); install the nvidia-cuda-nvrtc wheel or set EMBER_NVRTC_LIBRARY";
      return a;
    }
    a.why.clear();
    bind(a, a.version, "nvrtcVersion");
    bind(a, a.create, "nvrtcCreateProgram");
    bind(a, a.compile, "nvrtcCompileProgram");
    bind(a, a.log_size, "nvrtcGetProgramLogSize");
    bind(a, a.log, "nvrtcGetProgramLog");
    bind(a, a.ptx_size, "nvrtcGetPTXSize");
    bind(a, a.ptx, "nvrtcGetPTX");
    bind(a, a.cubin_size, "nvrtcGetCUBINSize");
    bind(a, a.cubin, "nvrtcGetCUBIN");
    bind(a, a.destroy, "nvrtcDestroyProgram");
    bind(a, a.error, "nvrtcGetErrorString");
    if (!a.why.empty()) {
      a.why = "NVRTC is missing entry points:" + a.why;
      a.handle = nullptr;
    }
    return a;
  }();
  return a;
}

const std::vector<std::string>& base_options() {
  // --fmad=false: a multiply and an add stay two roundings, as the CPU kernels and eager compute
  // them; contracted into an FMA, x / n * w + b, cancelling to nearly 0, differed from the CPU's
  // beyond the tolerance on an H200 (the first device replay).
  static const std::vector<std::string> options = {"--std=c++17", "-default-device", "--fmad=false"};
  return options;
}

const Api& loaded() {
  const Api& a = api();
  if (!a.handle) throw NvrtcError("[cuda] " + a.why);
  return a;
}

}  // namespace

bool nvrtc_available(std::string* why) {
  const Api& a = api();
  if (!a.handle && why) *why = a.why;
  return a.handle != nullptr;
}

std::string nvrtc_options() {
  std::string out;
  for (const std::string& o : base_options()) out += (out.empty() ? "" : " ") + o;
  return out;
}

std::string nvrtc_version() {
  const Api& a = loaded();
  int major = 0, minor = 0;
  a.version(&major, &minor);
  return std::to_string(major) + "." + std::to_string(minor);
}

Compiled nvrtc_compile(const std::string& source, const std::string& name, const std::string& arch, bool cubin,
                       const std::vector<std::string>& extra_options) {
  const Api& a = loaded();
  auto start = std::chrono::steady_clock::now();
  Program program = nullptr;
  if (Result r = a.create(&program, source.c_str(), (name + ".cu").c_str(), 0, nullptr, nullptr))
    throw NvrtcError(std::string("[cuda] nvrtcCreateProgram: ") + a.error(r));
  // A cubin is for the real architecture; PTX for its virtual one, which the driver compiles.
  std::string target = cubin ? arch : "compute_" + arch.substr(arch.find('_') + 1);
  std::vector<std::string> options = {"--gpu-architecture=" + target};
  options.insert(options.end(), base_options().begin(), base_options().end());
  options.insert(options.end(), extra_options.begin(), extra_options.end());
  std::vector<const char*> argv;
  for (const std::string& o : options) argv.push_back(o.c_str());
  Result r = a.compile(program, static_cast<int>(argv.size()), argv.data());
  Compiled out;
  size_t log_size = 0;
  a.log_size(program, &log_size);
  out.log.resize(log_size);
  if (log_size) a.log(program, out.log.data());
  while (!out.log.empty() && (out.log.back() == '\0' || out.log.back() == '\n')) out.log.pop_back();
  if (r != 0) {
    a.destroy(&program);
    throw NvrtcError("[cuda] NVRTC could not compile " + name + " for " + arch + ": " + a.error(r) + "\n" + out.log);
  }
  size_t size = 0;
  (cubin ? a.cubin_size : a.ptx_size)(program, &size);
  out.image.resize(size);
  (cubin ? a.cubin : a.ptx)(program, out.image.data());
  if (!cubin && !out.image.empty() && out.image.back() == '\0') out.image.pop_back();
  a.destroy(&program);
  out.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace ember::codegen::cuda

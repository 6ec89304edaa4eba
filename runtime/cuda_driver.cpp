#include "runtime/cuda_driver.h"

#include <dlfcn.h>

#include <utility>

#include "ir/error.h"
#include "runtime/config.h"

namespace ember::cuda {

namespace {

// The driver's types, declared here so that building needs no CUDA header.
using Result = int;  // CUresult: 0 is CUDA_SUCCESS
using Device = int;
using Context = void*;
using DevicePtr = unsigned long long;
constexpr int kAttrMultiprocessors = 16, kAttrMajor = 75, kAttrMinor = 76;

struct Api {
  void* handle = nullptr;
  std::string why;  // what is missing, when the driver cannot be used
  Context context = nullptr;
  Result (*init)(unsigned) = nullptr;
  Result (*driver_version)(int*) = nullptr;
  Result (*device_count)(int*) = nullptr;
  Result (*device_get)(Device*, int) = nullptr;
  Result (*device_name)(char*, int, Device) = nullptr;
  Result (*device_attribute)(int*, int, Device) = nullptr;
  Result (*device_memory)(size_t*, Device) = nullptr;
  Result (*primary_retain)(Context*, Device) = nullptr;
  Result (*set_current)(Context) = nullptr;
  Result (*mem_alloc)(DevicePtr*, size_t) = nullptr;
  Result (*mem_free)(DevicePtr) = nullptr;
  Result (*to_device)(DevicePtr, const void*, size_t) = nullptr;
  Result (*to_host)(void*, DevicePtr, size_t) = nullptr;
  Result (*on_device)(DevicePtr, DevicePtr, size_t) = nullptr;
  Result (*memset8)(DevicePtr, unsigned char, size_t) = nullptr;
  Result (*synchronize)() = nullptr;
  Result (*module_load)(void**, const void*) = nullptr;
  Result (*module_unload)(void*) = nullptr;
  Result (*module_function)(void**, void*, const char*) = nullptr;
  Result (*launch)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**,
                   void**) = nullptr;
  Result (*event_create)(void**, unsigned) = nullptr;
  Result (*event_destroy)(void*) = nullptr;
  Result (*event_record)(void*, void*) = nullptr;
  Result (*event_synchronize)(void*) = nullptr;
  Result (*event_elapsed)(float*, void*, void*) = nullptr;
  Result (*error_string)(Result, const char**) = nullptr;
};

std::string describe(const Api& a, Result r) {
  const char* text = nullptr;
  if (a.error_string) a.error_string(r, &text);
  return (text ? std::string(text) : "CUDA error") + " (" + std::to_string(r) + ")";
}

template <class F>
void bind(Api& a, F& fn, const char* symbol, const char* fallback = nullptr) {
  void* p = dlsym(a.handle, symbol);
  if (!p && fallback) p = dlsym(a.handle, fallback);
  fn = reinterpret_cast<F>(p);
  if (!fn) a.why += std::string(" ") + symbol;
}

void bind_all(Api& a) {
  bind(a, a.init, "cuInit");
  bind(a, a.driver_version, "cuDriverGetVersion");
  bind(a, a.device_count, "cuDeviceGetCount");
  bind(a, a.device_get, "cuDeviceGet");
  bind(a, a.device_name, "cuDeviceGetName");
  bind(a, a.device_attribute, "cuDeviceGetAttribute");
  bind(a, a.device_memory, "cuDeviceTotalMem_v2");
  bind(a, a.primary_retain, "cuDevicePrimaryCtxRetain");
  bind(a, a.set_current, "cuCtxSetCurrent");
  bind(a, a.mem_alloc, "cuMemAlloc_v2");
  bind(a, a.mem_free, "cuMemFree_v2");
  bind(a, a.to_device, "cuMemcpyHtoD_v2");
  bind(a, a.to_host, "cuMemcpyDtoH_v2");
  bind(a, a.on_device, "cuMemcpyDtoD_v2");
  bind(a, a.memset8, "cuMemsetD8_v2");
  bind(a, a.synchronize, "cuCtxSynchronize");
  bind(a, a.module_load, "cuModuleLoadData");
  bind(a, a.module_unload, "cuModuleUnload");
  bind(a, a.module_function, "cuModuleGetFunction");
  bind(a, a.launch, "cuLaunchKernel");
  bind(a, a.event_create, "cuEventCreate");
  bind(a, a.event_destroy, "cuEventDestroy_v2");
  bind(a, a.event_record, "cuEventRecord");
  bind(a, a.event_synchronize, "cuEventSynchronize");
  // CUDA 12.8 added the _v2 (which reports an error on events recorded with no timing); older
  // drivers have only the first.
  bind(a, a.event_elapsed, "cuEventElapsedTime_v2", "cuEventElapsedTime");
  bind(a, a.error_string, "cuGetErrorString");
}

// Opens the library, binds it, initialises the driver and takes device 0's primary context;
// a.why says what failed.
void open(Api& a) {
  std::string path = config::get("EMBER_CUDA_DRIVER_LIBRARY");
  if (path.empty()) path = "libcuda.so.1";
  a.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!a.handle) {
    const char* err = dlerror();
    a.why = "the CUDA driver library " + path + " could not be loaded (" + (err ? err : "not found") +
            "): is the NVIDIA driver installed? (EMBER_CUDA_DRIVER_LIBRARY names another path)";
    return;
  }
  bind_all(a);
  if (!a.why.empty()) {
    a.why = path + " is not a usable CUDA driver: it lacks" + a.why;
    return;
  }
  if (Result r = a.init(0)) {
    a.why = "the CUDA driver did not start: cuInit: " + describe(a, r);
    return;
  }
  int count = 0;
  if (Result r = a.device_count(&count); r || count == 0) {
    a.why = "the CUDA driver sees no device" + (r ? ": " + describe(a, r) : std::string());
    return;
  }
  Device dev = 0;
  if (Result r = a.device_get(&dev, 0); r || (r = a.primary_retain(&a.context, dev)))
    a.why = "device 0's context could not be made: " + describe(a, r);
}

const Api& api() {
  static Api a = [] {
    Api a;
    open(a);
    if (!a.why.empty() && config::log_enabled("cuda")) config::log("cuda", a.why);
    return a;
  }();
  return a;
}

// Makes the context current on this thread, once per thread; the driver's error, or 0.
Result make_current(const Api& a) {
  thread_local bool current = false;
  if (current) return 0;
  Result r = a.set_current(a.context);
  current = r == 0;
  return r;
}

// The driver, with its context current on this thread; throws DeviceUnavailable without one.
const Api& ready() {
  const Api& a = api();
  if (!a.why.empty()) EMBER_THROW(DeviceUnavailable, "[cuda] ", a.why);
  if (Result r = make_current(a)) EMBER_THROW(Runtime, "[cuda] cuCtxSetCurrent: ", describe(a, r));
  return a;
}

// For destructors, which must not throw: the driver with its context current, or null (a
// failure there has nowhere to go; the object only exists if the driver worked once).
const Api* ready_quietly() {
  const Api& a = api();
  return a.why.empty() && make_current(a) == 0 ? &a : nullptr;
}

void check(const Api& a, Result r, const char* what) {
  if (r == 2) EMBER_THROW(OutOfMemory, "[cuda] ", what, ": ", describe(a, r));  // CUDA_ERROR_OUT_OF_MEMORY
  if (r) EMBER_THROW(Runtime, "[cuda] ", what, ": ", describe(a, r));
}

}  // namespace

bool available(std::string* why) {
  const Api& a = api();
  if (why) *why = a.why;
  return a.why.empty();
}

int device_count() {
  const Api& a = ready();
  int count = 0;
  check(a, a.device_count(&count), "cuDeviceGetCount");
  return count;
}

DeviceInfo device(int ordinal) {
  const Api& a = ready();
  int count = device_count();
  if (ordinal < 0 || ordinal >= count)
    EMBER_THROW(DeviceUnavailable, "[cuda] no device ", ordinal, ": this machine has ", count);
  Device dev = 0;
  check(a, a.device_get(&dev, ordinal), "cuDeviceGet");
  DeviceInfo info;
  info.ordinal = ordinal;
  char name[256] = {};
  check(a, a.device_name(name, sizeof name - 1, dev), "cuDeviceGetName");
  info.name = name;
  check(a, a.device_attribute(&info.major, kAttrMajor, dev), "cuDeviceGetAttribute");
  check(a, a.device_attribute(&info.minor, kAttrMinor, dev), "cuDeviceGetAttribute");
  check(a, a.device_attribute(&info.multiprocessors, kAttrMultiprocessors, dev), "cuDeviceGetAttribute");
  check(a, a.device_memory(&info.memory, dev), "cuDeviceTotalMem");
  check(a, a.driver_version(&info.driver_version), "cuDriverGetVersion");
  return info;
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  const Api& a = ready();
  DevicePtr p = 0;
  if (bytes) check(a, a.mem_alloc(&p, bytes), "cuMemAlloc");
  address_ = p;
}

DeviceBuffer::~DeviceBuffer() {
  if (const Api* a = address_ ? ready_quietly() : nullptr) a->mem_free(address_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : address_(std::exchange(other.address_, 0)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  std::swap(address_, other.address_);
  std::swap(bytes_, other.bytes_);
  return *this;
}

void copy_to_device(uint64_t dst, const void* src, size_t bytes) {
  const Api& a = ready();
  if (bytes) check(a, a.to_device(dst, src, bytes), "cuMemcpyHtoD");
}

void copy_to_host(void* dst, uint64_t src, size_t bytes) {
  const Api& a = ready();
  if (bytes) check(a, a.to_host(dst, src, bytes), "cuMemcpyDtoH");
}

void copy_on_device(uint64_t dst, uint64_t src, size_t bytes) {
  const Api& a = ready();
  if (bytes) check(a, a.on_device(dst, src, bytes), "cuMemcpyDtoD");
}

void fill_bytes(uint64_t dst, unsigned char value, size_t bytes) {
  const Api& a = ready();
  if (bytes) check(a, a.memset8(dst, value, bytes), "cuMemsetD8");
}

void synchronize() {
  const Api& a = ready();
  check(a, a.synchronize(), "cuCtxSynchronize");
}

Module::Module(const std::string& image) {
  const Api& a = ready();
  check(a, a.module_load(&module_, image.c_str()), "cuModuleLoadData");
}

Module::~Module() {
  if (const Api* a = module_ ? ready_quietly() : nullptr) a->module_unload(module_);
}

void* Module::function(const std::string& name) const {
  const Api& a = ready();
  void* f = nullptr;
  check(a, a.module_function(&f, module_, name.c_str()), ("cuModuleGetFunction " + name).c_str());
  return f;
}

void launch(void* function, int64_t grid, int threads, const void* param, size_t param_bytes, void* stream,
            size_t shared_bytes) {
  const Api& a = ready();
  EMBER_CHECK(grid > 0 && grid <= 0x7fffffff && threads > 0, "launch geometry ", grid, " x ", threads);
  // One parameter: kernelParams[0] points at its bytes, which the driver copies at the launch.
  // The limit on a kernel's parameters since CUDA 12.1 on Volta and later (4 KiB before).
  EMBER_CHECK(param_bytes <= 32764, "a kernel parameter of ", param_bytes, " bytes");
  void* params[] = {const_cast<void*>(param)};
  check(a,
        a.launch(function, static_cast<unsigned>(grid), 1, 1, static_cast<unsigned>(threads), 1, 1,
                 static_cast<unsigned>(shared_bytes), stream, params, nullptr),
        "cuLaunchKernel");
}

Timer::Timer() {
  const Api& a = ready();
  check(a, a.event_create(&start_, 0), "cuEventCreate");
  check(a, a.event_create(&stop_, 0), "cuEventCreate");
}

Timer::~Timer() {
  const Api* a = ready_quietly();
  if (a && start_) a->event_destroy(start_);
  if (a && stop_) a->event_destroy(stop_);
}

void Timer::start() {
  const Api& a = ready();
  check(a, a.event_record(start_, nullptr), "cuEventRecord");
}

double Timer::stop() {
  const Api& a = ready();
  check(a, a.event_record(stop_, nullptr), "cuEventRecord");
  check(a, a.event_synchronize(stop_), "cuEventSynchronize");
  float ms = 0;
  check(a, a.event_elapsed(&ms, start_, stop_), "cuEventElapsedTime");
  return ms;
}

}  // namespace ember::cuda

#include "runtime/allocator.h"

#include <unistd.h>

#include <bit>
#include <cstdint>
#include <cstdlib>
#include <iomanip>
#include <map>
#include <mutex>
#include <new>
#include <string>

#include "ir/error.h"
#include "ir/symbolic.h"
#include "runtime/config.h"

namespace ember {

namespace {

constexpr size_t kMedium = size_t{64} << 10;  // from here blocks are kept for reuse
constexpr size_t kLarge = size_t{1} << 20;
constexpr size_t kClass = size_t{2} << 20;  // large blocks come in multiples of 2 MiB

// Small blocks as asked (64-byte multiples); medium ones in powers of two, so that the sizes of
// one model's activations share a few classes; large ones in multiples of 2 MiB.
size_t size_class(size_t bytes) {
  if (bytes < kMedium) return ((bytes + 63) / 64) * 64;
  if (bytes < kLarge) return std::bit_ceil(bytes);
  return ((bytes + kClass - 1) / kClass) * kClass;
}

class BlockCache {
 public:
  BlockCache() {
    std::string v = config::get("EMBER_ALLOCATOR_CACHE_MB");
    if (!v.empty()) limit_ = static_cast<size_t>(std::max(0LL, std::atoll(v.c_str()))) << 20;
    else limit_ = static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<size_t>(sysconf(_SC_PAGESIZE)) / 4;
  }

  void* take(size_t cls) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.find(cls);
    if (it == free_.end()) return nullptr;
    void* p = it->second;
    free_.erase(it);
    held_ -= cls;
    return p;
  }

  bool keep(void* p, size_t cls) {
    std::lock_guard<std::mutex> lock(mu_);
    if (held_ + cls > limit_) return false;
    free_.emplace(cls, p);
    held_ += cls;
    return true;
  }

  // Frees every kept block: an allocation the system refused is tried again after this.
  void trim() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [cls, p] : free_) std::free(p);
    free_.clear();
    held_ = 0;
  }

  int64_t held() {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int64_t>(held_);
  }

 private:
  std::mutex mu_;
  std::multimap<size_t, void*> free_;
  size_t held_ = 0, limit_ = 0;
};

BlockCache& blocks() {
  static BlockCache* cache = new BlockCache;  // never destroyed: arrays may outlive statics
  return *cache;
}

}  // namespace

[[noreturn]] void out_of_memory(std::string_view op, size_t bytes, std::string_view why) {
  EMBER_THROW(OutOfMemory, "[", op, "] cannot allocate ", bytes, " bytes (", std::fixed, std::setprecision(1),
              static_cast<double>(bytes) / double(1 << 30), " GiB): ", why);
}

void* allocate(size_t bytes) {
  // Kernels address elements with signed 64-bit offsets; nothing larger can be a real request.
  if (bytes > static_cast<size_t>(PTRDIFF_MAX)) out_of_memory("alloc", bytes, "larger than the address space");
  size_t cls = size_class(bytes == 0 ? 1 : bytes);
  if (cls >= kMedium)
    if (void* p = blocks().take(cls)) return p;
  void* p = std::aligned_alloc(64, cls);
  if (!p) {
    blocks().trim();  // memory kept for reuse may be what is missing
    p = std::aligned_alloc(64, cls);
  }
  if (!p) out_of_memory("alloc", bytes, "the system has no more memory for this process");
  return p;
}

size_t checked_nbytes(std::string_view op, const std::vector<int64_t>& shape, DType dtype) {
  auto n = static_cast<uint64_t>(checked_numel(op, shape));
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(n, uint64_t{itemsize(dtype)}, &bytes) || bytes > uint64_t{PTRDIFF_MAX})
    EMBER_THROW(OutOfMemory, "[", op, "] shape ", shape_str(to_shape(shape)), " of ", dtype_name(dtype),
                " needs more bytes than the address space holds (", n, " elements of ", itemsize(dtype), " bytes)");
  return static_cast<size_t>(bytes);
}

void release(void* p, size_t bytes) {
  if (!p) return;
  size_t cls = size_class(bytes == 0 ? 1 : bytes);
  if (cls >= kMedium && blocks().keep(p, cls)) return;
  std::free(p);
}

int64_t allocator_cached_bytes() { return blocks().held(); }

}  // namespace ember

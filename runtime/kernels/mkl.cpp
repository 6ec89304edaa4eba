#include "runtime/kernels/mkl.h"

#include <dlfcn.h>

#include <limits>

#include "runtime/config.h"

namespace ember::kernels {

namespace {

// MKL's Fortran interface (LP64: 32-bit integers), column-major.
using Sgemm = void (*)(const char* transa, const char* transb, const int* m, const int* n, const int* k,
                       const float* alpha, const float* a, const int* lda, const float* b, const int* ldb,
                       const float* beta, float* c, const int* ldc);
using SetThreadsLocal = int (*)(int);

struct Mkl {
  Sgemm sgemm = nullptr;
  SetThreadsLocal set_threads_local = nullptr;
};

void* find_library() {
  if (std::string path = config::get("EMBER_MKL_LIBRARY"); !path.empty()) {
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) config::warn("EMBER_MKL_LIBRARY=" + path + " could not be loaded: " + dlerror());
    return handle;
  }
  return dlopen("libtorch_cpu.so", RTLD_NOW | RTLD_NOLOAD);  // only if PyTorch is loaded already
}

const Mkl& mkl() {
  static const Mkl found = [] {
    Mkl m;
    void* handle = find_library();
    if (!handle) return m;
    m.sgemm = reinterpret_cast<Sgemm>(dlsym(handle, "sgemm_"));
    // The C entry point (by value); "mkl_set_num_threads_local" is the Fortran one, which takes
    // a pointer (MKL's header maps the lower-case name to this one).
    m.set_threads_local = reinterpret_cast<SetThreadsLocal>(dlsym(handle, "MKL_Set_Num_Threads_Local"));
    if (!m.set_threads_local) m.sgemm = nullptr;  // without it each call would start MKL's threads
    return m;
  }();
  return found;
}

bool fits(int64_t v) { return v >= 0 && v <= std::numeric_limits<int>::max(); }

}  // namespace

bool mkl_available() { return mkl().sgemm != nullptr; }

bool mkl_sgemm(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b,
               float beta, int64_t lda, int64_t ldb, int64_t ldc) {
  const Mkl& lib = mkl();
  if (!lib.sgemm) return false;
  for (int64_t v : {m, n, k, lda, ldb, ldc})
    if (!fits(v)) return false;
  thread_local bool one_thread = [&] {
    lib.set_threads_local(1);  // this thread's MKL calls run on it alone
    return true;
  }();
  (void)one_thread;
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: B first, then A.
  const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
  const int ldai = static_cast<int>(lda), ldbi = static_cast<int>(ldb), ldci = static_cast<int>(ldc);
  const char ta = trans_a ? 'T' : 'N', tb = trans_b ? 'T' : 'N';
  const float one = 1.0f;
  lib.sgemm(&tb, &ta, &ni, &mi, &ki, &one, b, &ldbi, a, &ldai, &beta, c, &ldci);
  return true;
}

}  // namespace ember::kernels

// float32 GEMM through the MKL that PyTorch's CPU build carries inside libtorch_cpu.so, for
// max-autotune to measure beside oneDNN and OpenBLAS where a process has PyTorch loaded: on the
// development VM, eager's MKL GEMMs ran 15-30 % faster than either (benchmarks/results/autotune.md).
//
// Nothing is linked: the library is found at run time, never loaded by ember itself, so a process
// without PyTorch has no MKL route. In order: EMBER_MKL_LIBRARY (a path, loaded: for the C++
// tests), then libtorch_cpu.so if this process already has it. MKL's own threads stay off: each
// call runs on one thread, and ember's pool splits the GEMM as it does for OpenBLAS.
#pragma once

#include <cstdint>

namespace ember::kernels {

// Whether an MKL sgemm can be called in this process (looked up once).
bool mkl_available();

// C[m, n] = A @ B + beta * C, row-major, with leading dimensions, A read transposed when trans_a
// and B when trans_b, as cblas_sgemm. Returns false (and writes nothing) when MKL is not
// available or a size does not fit MKL's 32-bit integers.
bool mkl_sgemm(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b,
               float beta, int64_t lda, int64_t ldb, int64_t ldc);

}  // namespace ember::kernels

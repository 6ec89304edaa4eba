// Internal to the interpreter: the kernel table and the helpers the kernel families share.
#pragma once

#include <array>
#include <functional>
#include <span>
#include <vector>

#include "ir/error.h"
#include "ir/op.h"
#include "runtime/array.h"
#include "runtime/element.h"

namespace ember::kernels {

struct Call {
  Op op;
  const Attrs& attrs;
  std::span<const Array> inputs;
  DType dtype;                  // output dtype (of output 0 for a multi-output op)
  std::vector<int64_t> shape;   // output shape, evaluated (of output 0 likewise)
  const SymbolValues& symbols;
  std::vector<DType> dtypes;                 // every output's dtype
  std::vector<std::vector<int64_t>> shapes;  // every output's shape, evaluated
  // Where each output goes: a contiguous array of the output's dtype and shape that the plan
  // gave (runtime/executable.h), or undefined for a kernel that allocates its own.
  std::span<const Array> destinations;
};

// The array output `k` is written into: the plan's destination, or a new one.
Array output(const Call& call, size_t k = 0);
// Makes `result` (any layout, any dtype) output `k`: converted into the destination when there
// is one (and returned as is when it already is the destination or nothing needs to change).
Array deliver(const Call& call, const Array& result, size_t k = 0);

using Kernel = Array (*)(const Call& call);
using KernelTable = std::array<Kernel, kNumOps>;
// Kernels of multi-output ops return one array per output, in order.
using MultiKernel = std::vector<Array> (*)(const Call& call);
using MultiKernelTable = std::array<MultiKernel, kNumOps>;

void register_elementwise(KernelTable& t);
void register_reductions(KernelTable& t);
void register_arg_extremes(KernelTable& t);
void register_contractions(KernelTable& t);
void register_conv_grads(KernelTable& t);
void register_movement(KernelTable& t);
// Whether the view op `op` (OpKind::View) gives `x` with `shape` as a copy rather than a view:
// a reshape whose strides cannot view x. Plans resolve views ahead of a call only where not.
bool view_copies(Op op, const Array& x, const std::vector<int64_t>& shape);
void register_scatter(KernelTable& t);
void register_scans(KernelTable& t);
void register_composites(KernelTable& t);
void register_creation(KernelTable& t);
void register_multi_reductions(MultiKernelTable& t);
void register_multi_arg_extremes(MultiKernelTable& t);
void register_native_norms(MultiKernelTable& t);
void register_sorting(MultiKernelTable& t);
void register_split(MultiKernelTable& t);
void register_extern(MultiKernelTable& t);

// Strides (in elements) of `a` broadcast to `shape` (0 along broadcast dims).
std::vector<int64_t> broadcast_strides(const Array& a, const std::vector<int64_t>& shape);

// Calls body(offsets, n, inner_strides) once per row of `shape` (all dims but the last), with
// each operand's element offset of the row start. Works for rank 0 (one row of one element).
template <size_t K, class F>
void for_each_row(const std::vector<int64_t>& shape, const std::array<std::vector<int64_t>, K>& strides, F&& body) {
  for (int64_t d : shape)
    if (d == 0) return;
  size_t rank = shape.size();
  std::array<int64_t, K> offsets{}, inner{};
  int64_t n = rank ? shape[rank - 1] : 1;
  for (size_t k = 0; k < K; ++k) inner[k] = rank ? strides[k][rank - 1] : 0;
  if (rank <= 1) { body(offsets, n, inner); return; }
  std::vector<int64_t> index(rank - 1, 0);
  while (true) {
    body(offsets, n, inner);
    int64_t d = static_cast<int64_t>(rank) - 2;
    for (; d >= 0; --d) {
      ++index[d];
      for (size_t k = 0; k < K; ++k) offsets[k] += strides[k][d];
      if (index[d] < shape[d]) break;
      for (size_t k = 0; k < K; ++k) offsets[k] -= strides[k][d] * shape[d];
      index[d] = 0;
    }
    if (d < 0) return;
  }
}

inline char* byte_ptr(const Array& a, int64_t element_offset) {
  return static_cast<char*>(a.data()) + element_offset * static_cast<int64_t>(itemsize(a.dtype()));
}

// Elements [start, start + len) of dim `axis` of `a`, as a view.
Array narrow(const Array& a, int64_t axis, int64_t start, int64_t len);
// The position an index names along a dim of `size`. A negative index counts from the end when
// the op's `wrap` is set (Python), and is out of range otherwise (PyTorch): a Value error.
int64_t checked_index(const char* op, int64_t idx, int64_t size, bool wrap);
// Copies `src` (any layout, any dtype) into `dst` (same shape), converting the dtype.
void copy_into(const Array& src, const Array& dst);
// Sets every element of the contiguous `out` to `value` (converted to its dtype).
void fill_with(const Array& out, double value);
// A contiguous copy of `a` converted to `dtype` (or `a` itself when nothing changes).
Array to_contiguous(const Array& a, DType dtype);

// Makes OpenBLAS single-threaded (once): its calls run on ember's thread pool (common.cpp).
void use_single_threaded_blas();

// The dtype a GEMM or convolution of `t` computes in: float64, or float32 (float16 and bfloat16
// too, converted).
DType gemm_dtype(DType t);

// C[m, n] = A[m, k] @ B[k, n] (row-major, contiguous), or B^T when trans_b; float or double.
// With trans_a, A is given as its [k, m] transpose (a weight gradient's x.t() @ grad), which
// the BLAS reads as it is.
void gemm(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k, bool trans_b,
          float beta = 0.0f, bool trans_a = false);
void gemm(const double* a, const double* b, double* c, int64_t m, int64_t n, int64_t k, bool trans_b,
          double beta = 0.0, bool trans_a = false);

// The float32 GEMM that GemmRoute::Generated runs: cblas_sgemm's arguments, row-major. The code
// generator installs ember's own (codegen/cpu/gemm.h) when the library loads; it returns false
// when it cannot run (its tile failed to compile), and the route falls back to OpenBLAS.
using OwnGemmFn = bool (*)(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k, bool trans_a,
                           bool trans_b, float beta, int64_t lda, int64_t ldb, int64_t ldc);
void set_own_gemm(OwnGemmFn fn);
// Whether one is installed.
bool has_own_gemm();

}  // namespace ember::kernels

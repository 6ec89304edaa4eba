// Helpers shared by the kernel families: broadcasting, copies with conversion, GEMM.
#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "runtime/kernels/kernel.h"
#include "runtime/kernels/mkl.h"
#include "runtime/kernels/onednn.h"
#include "runtime/step_settings.h"
#include "runtime/thread_pool.h"

namespace ember::kernels {

std::vector<int64_t> broadcast_strides(const Array& a, const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 0);
  size_t lead = shape.size() - a.shape().size();
  for (size_t i = 0; i < a.shape().size(); ++i)
    strides[lead + i] = a.shape()[i] == 1 ? 0 : a.strides()[i];
  return strides;
}

namespace {

template <class U>
void strided_copy(char* dst, int64_t dst_stride, const char* src, int64_t src_stride, int64_t n) {
  U* d = reinterpret_cast<U*>(dst);
  const U* s = reinterpret_cast<const U*>(src);
  for (int64_t j = 0; j < n; ++j) d[j * dst_stride] = s[j * src_stride];
}

// Copies and fills of at least this many bytes are split over the thread pool: one thread
// does not reach the memory bandwidth that two do (a pad in MobileNetV2 took 370 us on one).
constexpr size_t kParallelBytes = size_t(1) << 20;

void copy_serial(const Array& src, const Array& dst);

}  // namespace

Array narrow(const Array& a, int64_t axis, int64_t start, int64_t len) {
  std::vector<int64_t> shape = a.shape();
  shape[axis] = len;
  return a.view(std::move(shape), a.strides(), a.offset() + start * a.strides()[axis]);
}

int64_t checked_index(const char* op, int64_t idx, int64_t size, bool wrap) {
  if (idx >= size || idx < (wrap ? -size : 0))
    EMBER_THROW(Index, "[", op, "] index ", idx, " is out of range for a dim of size ", size);
  return idx < 0 ? idx + size : idx;
}

void copy_into(const Array& src, const Array& dst) {
  EMBER_CHECK(src.shape() == dst.shape(), "copy between different shapes");
  size_t bytes = static_cast<size_t>(src.numel()) * std::max(itemsize(src.dtype()), itemsize(dst.dtype()));
  auto outer = std::find_if(src.shape().begin(), src.shape().end(), [](int64_t d) { return d > 1; });
  if (bytes < kParallelBytes || num_threads() == 1 || outer == src.shape().end()) return copy_serial(src, dst);
  int64_t axis = outer - src.shape().begin();
  parallel_for(*outer, 1, [&](int64_t lo, int64_t hi) {
    copy_serial(narrow(src, axis, lo, hi - lo), narrow(dst, axis, lo, hi - lo));
  });
}

namespace {

// Between float32 and its 16-bit formats: element by element, without going through double
// (the same values: a widening is exact, a narrowing rounds once either way).
template <class S, class D, D (*convert)(S)>
void convert_serial(const Array& src, const Array& dst) {
  std::array<std::vector<int64_t>, 2> strides{src.strides(), dst.strides()};
  for_each_row<2>(src.shape(), strides, [&](auto off, int64_t n, auto inner) {
    const S* s = reinterpret_cast<const S*>(byte_ptr(src, off[0]));
    D* d = reinterpret_cast<D*>(byte_ptr(dst, off[1]));
    for (int64_t j = 0; j < n; ++j) d[j * inner[1]] = convert(s[j * inner[0]]);
  });
}

// Whether the conversion is one of convert_serial's, which it then did.
bool converted_directly(const Array& src, const Array& dst) {
  DType from = src.dtype(), to = dst.dtype();
  if (from == DType::BFloat16 && to == DType::Float32) convert_serial<uint16_t, float, bf16_to_float>(src, dst);
  else if (from == DType::Float32 && to == DType::BFloat16) convert_serial<float, uint16_t, float_to_bf16>(src, dst);
  else if (from == DType::Float16 && to == DType::Float32) convert_serial<uint16_t, float, half_to_float>(src, dst);
  else if (from == DType::Float32 && to == DType::Float16) convert_serial<float, uint16_t, float_to_half>(src, dst);
  else return false;
  return true;
}

// src and dst viewed with as few dims as their strides allow: a dim of size 1 goes, and a dim
// merges into the next where both operands step over it as over that whole next dim. Rows are
// then as long as the layouts allow: a KV cache's concat along the tokens, [8, 4, 150, 64] into
// [8, 4, 151, 64], is 32 rows of 9,600 floats, not 4,800 rows of 64: 46 us before, 22-33 after
// on two threads, 82 and 59 on one (the copy alone, in cache).
std::pair<Array, Array> coalesced(const Array& src, const Array& dst) {
  std::vector<int64_t> shape, s, d;
  for (int64_t i = 0; i < src.rank(); ++i) {
    int64_t n = src.shape()[i];
    if (n == 1) continue;
    if (!shape.empty() && s.back() == src.strides()[i] * n && d.back() == dst.strides()[i] * n) {
      shape.back() *= n, s.back() = src.strides()[i], d.back() = dst.strides()[i];
      continue;
    }
    shape.push_back(n), s.push_back(src.strides()[i]), d.push_back(dst.strides()[i]);
  }
  if (shape.empty()) shape = {1}, s = {1}, d = {1};  // one element (or none: a 0 stays in shape)
  if (src.numel() == 0) return {src, dst};
  return {src.view(shape, s, src.offset()), dst.view(shape, d, dst.offset())};
}

void copy_serial(const Array& src_in, const Array& dst_in) {
  const auto [src, dst] = coalesced(src_in, dst_in);
  DType from = src.dtype(), to = dst.dtype();
  size_t size = itemsize(from);
  std::array<std::vector<int64_t>, 2> strides{src.strides(), dst.strides()};
  if (from == to && src.rank() == 2 && strides[0][1] == 1 && strides[1][1] == 1 && src.numel() > 0) {
    // Rows of contiguous elements, the common case after coalescing (a concat's slot): a plain
    // loop of copies. The row walk cost 20 ns a row, and a concat along a head's last dim in Phi
    // ([2, 4, 32, 4] twice into [2, 4, 32, 8]: 512 rows of 16 bytes) took 10 us.
    const int64_t bytes = static_cast<int64_t>(size), rows = src.shape()[0], row_bytes = src.shape()[1] * bytes;
    const int64_t s_step = strides[0][0] * bytes, d_step = strides[1][0] * bytes;
    const char* s = byte_ptr(src, 0);
    char* d = byte_ptr(dst, 0);
    for (int64_t r = 0; r < rows; ++r) std::memcpy(d + r * d_step, s + r * s_step, row_bytes);
    return;
  }
  if (from == to) {
    for_each_row<2>(src.shape(), strides, [&](auto off, int64_t n, auto inner) {
      char* s = byte_ptr(src, off[0]);
      char* d = byte_ptr(dst, off[1]);
      if (inner[0] == 1 && inner[1] == 1) { std::memcpy(d, s, n * size); return; }
      switch (size) {  // typed strided copies: a memcpy call per element costs 10x (a transpose)
        case 1: return strided_copy<uint8_t>(d, inner[1], s, inner[0], n);
        case 2: return strided_copy<uint16_t>(d, inner[1], s, inner[0], n);
        case 4: return strided_copy<uint32_t>(d, inner[1], s, inner[0], n);
        case 8: return strided_copy<uint64_t>(d, inner[1], s, inner[0], n);
      }
      for (int64_t j = 0; j < n; ++j) std::memcpy(d + j * inner[1] * size, s + j * inner[0] * size, size);
    });
    return;
  }
  if (converted_directly(src, dst)) return;
  ComputeType ct = compute_type(from) == ComputeType::Int64 ? ComputeType::Int64 : ComputeType::Float64;
  size_t dsize = itemsize(to);
  for_each_row<2>(src.shape(), strides, [&](auto off, int64_t n, auto inner) {
    char* s = byte_ptr(src, off[0]);
    char* d = byte_ptr(dst, off[1]);
    for (int64_t j = 0; j < n; ++j) {
      const void* sp = s + j * inner[0] * size;
      void* dp = d + j * inner[1] * dsize;
      if (ct == ComputeType::Int64) element::store(dp, to, element::load<int64_t>(sp, from));
      else element::store(dp, to, element::load<double>(sp, from));
    }
  });
}

}  // namespace

void fill_with(const Array& out, double value) {
  size_t size = itemsize(out.dtype()), bytes = static_cast<size_t>(out.numel()) * size;
  if (bytes == 0) return;
  char* data = static_cast<char*>(out.data());
  // Doubling copies within each chunk: log(n) memcpy calls instead of n conversions.
  auto fill = [&](char* chunk, size_t n) {
    element::store<double>(chunk, out.dtype(), value);
    for (size_t done = size; done < n; done *= 2) std::memcpy(chunk + done, chunk, std::min(done, n - done));
  };
  const size_t chunk = kParallelBytes / 4 / size * size;  // whole elements
  if (bytes < kParallelBytes || num_threads() == 1) return fill(data, bytes);
  parallel_for(static_cast<int64_t>((bytes + chunk - 1) / chunk), 1, [&](int64_t lo, int64_t hi) {
    for (int64_t c = lo; c < hi; ++c) fill(data + c * chunk, std::min(chunk, bytes - c * chunk));
  });
}

Array output(const Call& call, size_t k) {
  if (k < call.destinations.size() && call.destinations[k].defined()) return call.destinations[k];
  return Array::empty(call.dtypes.empty() ? call.dtype : call.dtypes[k], call.shapes.empty() ? call.shape : call.shapes[k]);
}

Array deliver(const Call& call, const Array& result, size_t k) {
  if (k >= call.destinations.size() || !call.destinations[k].defined())
    return to_contiguous(result, call.dtypes.empty() ? call.dtype : call.dtypes[k]);
  const Array& dst = call.destinations[k];
  if (result.data() != dst.data() || result.dtype() != dst.dtype() || !result.is_contiguous()) copy_into(result, dst);
  return dst;
}

Array to_contiguous(const Array& a, DType dtype) {
  if (a.dtype() == dtype && a.is_contiguous()) return a;
  Array out = Array::empty(dtype, a.shape());
  copy_into(a, out);
  return out;
}

namespace {

// y = op(M) x + beta * y for a row-major M of `rows` x `cols` (leading dimension ld), read
// transposed when `trans`. Where beta is 0, y is zeroed first: BLAS scales y by beta, and 0 * NaN
// (a fresh buffer's garbage) is NaN in some OpenBLAS versions.
template <class T>
void blas_gemv(bool trans, int64_t rows, int64_t cols, const T* m, int64_t ld, const T* x, int64_t incx, T beta, T* y,
               int64_t incy) {
  const int64_t length = trans ? cols : rows;
  if (beta == T(0))
    for (int64_t i = 0; i < length; ++i) y[i * incy] = T(0);
  auto t = trans ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemv(CblasRowMajor, t, rows, cols, 1.0f, m, ld, x, incx, beta, y, incy);
  else
    cblas_dgemv(CblasRowMajor, t, rows, cols, 1.0, m, ld, x, incx, beta, y, incy);
}

template <class T>
void blas_gemm(const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b, T beta,
               int64_t lda, int64_t ldb, int64_t ldc) {
  // [Note: one row is a matrix-vector product] With one row of C (or one column), the product
  // streams the matrix once through gemv. OpenBLAS 0.3.21's sgemm packs the matrix first (copies
  // it whole, then reads the copy): in GPT-2's decode steps at batch 1 the packing was 22 % of the
  // process's samples, each weight read twice and written once per token.
  if (m == 1) {  // c = a @ op(B); a's elements lie lda apart when it is stored as a column
    const int64_t inc = trans_a ? lda : 1;
    if (trans_b) return blas_gemv(false, n, k, b, ldb, a, inc, beta, c, 1);  // B stored [n, k]
    return blas_gemv(true, k, n, b, ldb, a, inc, beta, c, 1);                 // B stored [k, n]
  }
  if (n == 1) {  // c = op(A) @ b, a column of C (ldc apart); b's elements ldb apart when stored as a column
    const int64_t inc = trans_b ? 1 : ldb;
    if (trans_a) return blas_gemv(true, k, m, a, lda, b, inc, beta, c, ldc);  // A stored [k, m]
    return blas_gemv(false, m, k, a, lda, b, inc, beta, c, ldc);              // A stored [m, k]
  }
  auto ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
  else
    cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, 1.0, a, lda, b, ldb, beta, c, ldc);
}

// Rows (or, for few rows, columns) of C per block: enough work per block to amortise a BLAS call.
constexpr int64_t kMinBlockFlops = int64_t{1} << 21;
constexpr int64_t kBlockAlign = 16;  // multiples of the microkernel's tile

std::atomic<OwnGemmFn> own_gemm{nullptr};  // GemmRoute::Generated's, set by the code generator

}  // namespace

void set_own_gemm(OwnGemmFn fn) { own_gemm.store(fn, std::memory_order_release); }
bool has_own_gemm() { return own_gemm.load(std::memory_order_acquire) != nullptr; }

// GEMMs run on ember's thread pool, each thread a single-threaded BLAS call on its own block of C.
// OpenBLAS's own threads busy-wait for a long time after each call (about 0.1 s); on a small
// machine they took the cores from the kernels and the PyTorch calls that ran next (a 0.1 ms
// max-pool took 13 ms inside ResNet-18's plan). With one pool, a thread is either working or asleep.
void use_single_threaded_blas() {
  static const bool once = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)once;
}

template <class T>
void gemm_impl(const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k, bool trans_b, T beta, bool trans_a) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum: C = beta * C, and BLAS may not accept k = 0
    if (beta == T(0)) std::memset(c, 0, sizeof(T) * m * n);
    return;
  }
  // oneDNN for A @ B^T, for A @ B with 64 columns or fewer, and for every A @ B on an AVX-512 CPU;
  // OpenBLAS on the pool for the rest. oneDNN's AVX2 kernels fall to 45-80 GFLOP/s on row-major
  // A @ B shapes that OpenBLAS runs at 90-140 (and the other way round for a skinny B); its
  // AVX-512 ones beat OpenBLAS's on every shape measured, 1.05-1.7x on 2 threads. A^T @ B (weight
  // gradients) stays with OpenBLAS: level with oneDNN there (docs/dependencies.md). A step that
  // max-autotune measured takes the route it chose (runtime/step_settings.h).
  // A matrix-vector product (one or two rows, or columns) whose matrix fits in L2 stays with
  // OpenBLAS: oneDNN 2.6 took 40-60 us for [1, 256] @ [256, 1024] (either layout of B), OpenBLAS
  // 10 us, and GPT-2's decode steps are made of them; from 4 MiB on oneDNN's two threads win
  // (126 us against 397 for 1 x 1024 x 1024). Measured by max-autotune's timings, 2 threads.
  constexpr int64_t kFewColumns = 64;
  constexpr int64_t kSmallVectorProductBytes = int64_t{2} << 20;
  const bool small_gemv =
      std::min(m, n) <= 2 && k * std::max(m, n) * static_cast<int64_t>(sizeof(T)) <= kSmallVectorProductBytes;
  // [Note: small GEMMs] Below a few tens of MFLOP the library's fixed cost per call counts:
  // oneDNN 2.6 spends 1.5-2 us finding its primitive, and on one thread of the AVX-512 host
  // PyTorch's MKL (there when PyTorch is loaded) was 1.1-1.5x faster than oneDNN from 32x64x64
  // to 256x1024x256 in either layout of B (5.2 against 7.1 us for the 32x192x64 of a small
  // transformer block's projection), level at 64x256x1024, and slower from 512^3 on. Without
  // MKL, OpenBLAS takes the tiny ones (8x64x64: 0.7 us against oneDNN's 2.3).
  // Not so a product of a few rows or columns whose matrix exceeds 1 MiB (the AMD EPYC host's L2):
  // it streams the matrix, which MKL packs first. On that host, 512 x 8 x 4608 (a 3 x 3
  // convolution at 2 x 2 pixels, two images) took MKL 2.8 ms and oneDNN 0.73 on one thread,
  // 8 x 4096 x 1024 with B stored [N, K] 2.5 and 1.9 (ember_bench_gemm).
  constexpr int64_t kSmallGemmFlops = int64_t{1} << 26, kTinyGemmFlops = int64_t{1} << 18;
  constexpr int64_t kStreamedRows = 16, kStreamedMatrixBytes = int64_t{1} << 20;
  const int64_t gemm_flops = 2 * m * n * k;
  const bool streams_matrix = std::min(m, n) <= kStreamedRows &&
                              std::max(m, n) * k * static_cast<int64_t>(sizeof(T)) > kStreamedMatrixBytes;
  bool mkl = false;
  if constexpr (std::is_same_v<T, float>) {
    GemmRoute route = current_gemm_route();
    if (route == GemmRoute::Auto && !small_gemv && !streams_matrix && gemm_flops <= kSmallGemmFlops && mkl_available())
      route = GemmRoute::Mkl;
    bool onednn = route == GemmRoute::OneDnn ||
                  (route == GemmRoute::Auto && !small_gemv && gemm_flops > kTinyGemmFlops &&
                   (trans_b || n <= kFewColumns || onednn_has_avx512()));
    if (!trans_a && onednn && onednn_gemm(DType::Float32, a, b, c, m, n, k, trans_b, beta)) return;
    OwnGemmFn own = own_gemm.load(std::memory_order_acquire);
    if (route == GemmRoute::Generated && own &&
        own(a, b, c, m, n, k, trans_a, trans_b, beta, trans_a ? m : k, trans_b ? k : n, n))
      return;
    mkl = route == GemmRoute::Mkl && mkl_available();
  }
  use_single_threaded_blas();
  // One block of C on one thread: MKL's sgemm where the step chose it (runtime/kernels/mkl.h).
  auto block_gemm = [mkl](const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b,
                         T beta, int64_t lda, int64_t ldb, int64_t ldc) {
    if constexpr (std::is_same_v<T, float>)
      if (mkl && mkl_sgemm(a, b, c, m, n, k, trans_a, trans_b, beta, lda, ldb, ldc)) return;
    blas_gemm(a, b, c, m, n, k, trans_a, trans_b, beta, lda, ldb, ldc);
  };
  const int64_t lda = trans_a ? m : k, ldb = trans_b ? k : n;
  const int64_t threads = num_threads();
  // A matrix-vector product is bound by reading the matrix: threads split it from 256 KiB on
  // (in a model's step the matrix comes from L3 or memory, at one core's bandwidth each).
  const int64_t work = small_gemv ? k * std::max(m, n) * static_cast<int64_t>(sizeof(T)) / (int64_t{256} << 10)
                                  : gemm_flops / kMinBlockFlops;
  const int64_t blocks = std::min<int64_t>(threads, std::max<int64_t>(1, work));
  const bool by_rows = m >= blocks * kBlockAlign || m >= n;
  const int64_t extent = by_rows ? m : n;
  const int64_t block = (extent / blocks + kBlockAlign - 1) / kBlockAlign * kBlockAlign;
  if (blocks <= 1 || block >= extent) return block_gemm(a, b, c, m, n, k, trans_a, trans_b, beta, lda, ldb, n);
  const int64_t count = (extent + block - 1) / block;
  parallel_for(count, 1, [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) {
      int64_t lo = i * block, len = std::min(extent, lo + block) - lo;
      if (by_rows) block_gemm(a + (trans_a ? lo : lo * k), b, c + lo * n, len, n, k, trans_a, trans_b, beta, lda, ldb, n);
      else block_gemm(a, b + (trans_b ? lo * k : lo), c + lo, m, len, k, trans_a, trans_b, beta, lda, ldb, n);
    }
  });
}

void gemm(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k, bool trans_b, float beta,
          bool trans_a) {
  gemm_impl(a, b, c, m, n, k, trans_b, beta, trans_a);
}

void gemm(const double* a, const double* b, double* c, int64_t m, int64_t n, int64_t k, bool trans_b, double beta,
          bool trans_a) {
  gemm_impl(a, b, c, m, n, k, trans_b, beta, trans_a);
}

}  // namespace ember::kernels

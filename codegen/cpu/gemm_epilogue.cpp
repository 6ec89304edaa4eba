#include "codegen/cpu/gemm_epilogue.h"

#include "codegen/cpu/gemm.h"
#include "codegen/cpu/jit.h"
#include "ir/error.h"
#include "runtime/interpreter.h"
#include "runtime/kernels/kernel.h"
#include "runtime/step_settings.h"

namespace ember::codegen::cpu {

namespace {

// A float32 matrix as the GEMMs read it: rows of `cols` elements `ld` apart, or, transposed,
// columns of `rows` elements `ld` apart.
struct Matrix {
  const float* data;
  int64_t ld;
  bool trans;
  Array keep;  // a contiguous copy, where the layout needed one
};

// x (its dims but the last flattened into rows) where it lies, when its layout is one of those;
// otherwise a contiguous copy.
Matrix as_matrix(const Array& x, int64_t rows, int64_t cols) {
  if (x.is_contiguous()) return {x.data_as<float>(), cols, false, {}};
  const auto& shape = x.shape();
  const auto& strides = x.strides();
  const int64_t r = x.rank();
  if (r == 2 && strides[0] == 1 && strides[1] >= std::max<int64_t>(rows, 1))
    return {x.data_as<float>(), strides[1], true, {}};
  // Rows evenly ld apart: ld the stride of the innermost leading dim of more than one, and each
  // such dim further out stepping over all the rows inside it (a size-1 dim's stride is anything).
  bool rows_apart = strides[r - 1] == 1 || cols <= 1;
  int64_t ld = std::max<int64_t>(cols, 1), expected = 0;  // ld stays so for one row (or none)
  bool found = false;
  for (int64_t d = r - 2; d >= 0 && rows_apart; --d) {
    if (shape[d] == 1) continue;
    if (!found) found = true, ld = expected = strides[d];
    rows_apart = strides[d] == expected;
    expected *= shape[d];
  }
  rows_apart = rows_apart && ld >= std::max<int64_t>(cols, 1);
  if (rows_apart) return {x.data_as<float>(), ld, false, {}};
  Array copy = kernels::to_contiguous(x, DType::Float32);
  return {copy.data_as<float>(), cols, false, copy};
}

// A's rows: its dims but the last, flattened.
int64_t rows_of(const Array& a) {
  int64_t m = 1;
  for (int64_t d = 0; d + 1 < a.rank(); ++d) m *= a.shape()[d];
  return m;
}

}  // namespace

GemmEpilogue::GemmEpilogue(std::shared_ptr<const CpuKernel> epilogue, int product)
    : epilogue_(std::move(epilogue)), product_(product) {}

std::pair<Array, std::vector<Array>> GemmEpilogue::product_and_args(std::span<const Array> inputs,
                                                                    std::span<const Array> outputs) const {
  const Array& a = inputs[0];
  const int64_t n = inputs[1].shape()[1], m = rows_of(a);
  const std::vector<int64_t>& domain = outputs[0].shape();
  EMBER_CHECK(!domain.empty() && domain.back() == n && outputs[0].numel() == m * n,
              "a GEMM's epilogue kernel does not cover its product");
  Array c = Array::empty(DType::Float32, domain);
  std::vector<Array> args(inputs.begin() + 2, inputs.end());
  args.insert(args.begin() + product_, c);
  return {c, std::move(args)};
}

Array GemmEpilogue::as_product(const Array& c, const Array& a, int64_t n) {
  std::vector<int64_t> product(a.shape().begin(), a.shape().end() - 1);
  product.push_back(n);
  return c.view(product, Array::contiguous_strides(product), c.offset());
}

void GemmEpilogue::run(std::span<const Array> inputs, std::span<const Array> outputs) const {
  const Array& a = inputs[0];
  const Array& b = inputs[1];
  const int64_t k = b.shape()[0], n = b.shape()[1];
  auto [c, args] = product_and_args(inputs, outputs);
  if (current_gemm_route() == GemmRoute::Generated && kernels::has_own_gemm()) {
    try {
      return run_inside(a, b, c, rows_of(a), n, k, args, outputs);
    } catch (const CodegenError&) {  // the tile did not compile (and wrote nothing): the library runs it
    }
  }
  // The interpreter's matmul into C, as the matmul's own step ran it, then the kernel.
  const Array into = as_product(c, a, n);
  const TensorType type{DType::Float32, Shape(into.shape().begin(), into.shape().end())};
  run_op(Op::MatMul, Attrs{}, std::vector<Array>{a, b}, std::span<const TensorType>(&type, 1), {},
         std::span<const Array>(&into, 1));
  epilogue_->run(args, outputs);
}

void GemmEpilogue::run_exact_product(std::span<const Array> inputs, std::span<const Array> outputs) const {
  const Array& a = inputs[0];
  const int64_t n = inputs[1].shape()[1];
  auto [c, args] = product_and_args(inputs, outputs);
  const Array into = as_product(c, a, n);
  const TensorType type{DType::Float64, Shape(into.shape().begin(), into.shape().end())};
  const std::vector<Array> wide{kernels::to_contiguous(a, DType::Float64),
                                kernels::to_contiguous(inputs[1], DType::Float64)};
  const std::vector<Array> exact = run_op(Op::MatMul, Attrs{}, wide, std::span<const TensorType>(&type, 1), {});
  kernels::copy_into(exact[0], into);
  epilogue_->run(args, outputs);
}

void GemmEpilogue::run_inside(const Array& a, const Array& b, const Array& c, int64_t m, int64_t n, int64_t k,
                              std::span<const Array> args, std::span<const Array> outputs) const {
  const Matrix A = as_matrix(a, m, k), B = as_matrix(b, k, n);
  // The caller's arguments, read (never written) by the threads that run the pieces.
  thread_local std::vector<int64_t> meta;
  thread_local std::vector<void*> buffers;
  epilogue_->bind(args, outputs, meta, buffers);
  KernelFn fn = epilogue_->fn();
  void* const* b_args = buffers.data();
  const int64_t* m_args = meta.data();
  generated_gemm(GemmTiling::with_tile(current_step_settings().tile), A.data, B.data, c.data_as<float>(), m, n, k,
                 A.trans, B.trans, 0.0f, A.ld, B.ld, n, [&](int64_t row, int64_t rows, int64_t col, int64_t cols) {
                   fn(row, row + rows, col, col + cols, b_args, m_args);
                 });
}

}  // namespace ember::codegen::cpu

// The public op functions. Each works on eager tensors (runs the reference interpreter now) and
// on traced tensors inside `compile` (records a node). Errors are ember::Error naming the op.
#pragma once

#include <optional>
#include <tuple>
#include <vector>

#include "frontend/tensor.h"

namespace ember {

// Creation. Inside `compile` these record nodes too, except from_vector: its data is a constant
// captured by the trace.
Tensor from_vector(const std::vector<double>& values, SymShape shape, DType dtype = DType::Float32);
Tensor scalar_tensor(Scalar value, std::optional<DType> dtype = std::nullopt);
Tensor full(SymShape shape, Scalar value, std::optional<DType> dtype = std::nullopt);
Tensor zeros(SymShape shape, DType dtype = DType::Float32);
Tensor ones(SymShape shape, DType dtype = DType::Float32);
Tensor arange(Scalar end);
Tensor arange(Scalar start, Scalar end, Scalar step = 1, std::optional<DType> dtype = std::nullopt);
Tensor uniform(SymShape shape, int64_t seed, double low = 0.0, double high = 1.0, DType dtype = DType::Float32);
Tensor normal(SymShape shape, int64_t seed, double mean = 0.0, double std = 1.0, DType dtype = DType::Float32);

// Unary elementwise.
Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor exp2(const Tensor& x);
Tensor log(const Tensor& x);
Tensor log2(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor expm1(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tan(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
Tensor silu(const Tensor& x);
Tensor erf(const Tensor& x);
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
Tensor round(const Tensor& x);
Tensor trunc(const Tensor& x);
Tensor sign(const Tensor& x);
Tensor reciprocal(const Tensor& x);
Tensor logical_not(const Tensor& x);
Tensor isnan(const Tensor& x);
Tensor isinf(const Tensor& x);
Tensor cast(const Tensor& x, DType dtype);

// Binary elementwise with broadcasting; a Scalar operand promotes as a Python number does.
#define EMBER_BINARY_DECL(name)                          \
  Tensor name(const Tensor& a, const Tensor& b);         \
  Tensor name(const Tensor& a, Scalar b);                \
  Tensor name(Scalar a, const Tensor& b);
EMBER_BINARY_DECL(add)
EMBER_BINARY_DECL(sub)
EMBER_BINARY_DECL(mul)
EMBER_BINARY_DECL(div)
EMBER_BINARY_DECL(floor_divide)
EMBER_BINARY_DECL(remainder)
EMBER_BINARY_DECL(pow)
EMBER_BINARY_DECL(maximum)
EMBER_BINARY_DECL(minimum)
EMBER_BINARY_DECL(eq)
EMBER_BINARY_DECL(ne)
EMBER_BINARY_DECL(lt)
EMBER_BINARY_DECL(le)
EMBER_BINARY_DECL(gt)
EMBER_BINARY_DECL(ge)
EMBER_BINARY_DECL(logical_and)
EMBER_BINARY_DECL(logical_or)
EMBER_BINARY_DECL(logical_xor)
EMBER_BINARY_DECL(bitwise_and)
EMBER_BINARY_DECL(bitwise_or)
EMBER_BINARY_DECL(bitwise_xor)
#undef EMBER_BINARY_DECL

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, Scalar b);
Tensor where(const Tensor& cond, Scalar a, const Tensor& b);
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max);
Tensor clamp(const Tensor& x, const Tensor& min, const Tensor& max);

// Operators.
Tensor operator-(const Tensor& x);
#define EMBER_OPERATOR_DECL(sym)                       \
  Tensor operator sym(const Tensor& a, const Tensor& b); \
  Tensor operator sym(const Tensor& a, Scalar b);        \
  Tensor operator sym(Scalar a, const Tensor& b);
EMBER_OPERATOR_DECL(+)
EMBER_OPERATOR_DECL(-)
EMBER_OPERATOR_DECL(*)
EMBER_OPERATOR_DECL(/)
EMBER_OPERATOR_DECL(<)
EMBER_OPERATOR_DECL(<=)
EMBER_OPERATOR_DECL(>)
EMBER_OPERATOR_DECL(>=)
EMBER_OPERATOR_DECL(==)
EMBER_OPERATOR_DECL(!=)
#undef EMBER_OPERATOR_DECL

// Reductions over `axes` (all when empty).
Tensor sum(const Tensor& x, std::vector<int64_t> axes = {}, bool keepdim = false);
Tensor mean(const Tensor& x, std::vector<int64_t> axes = {}, bool keepdim = false);
Tensor prod(const Tensor& x, std::vector<int64_t> axes = {}, bool keepdim = false);
Tensor max(const Tensor& x, std::vector<int64_t> axes = {}, bool keepdim = false);
Tensor min(const Tensor& x, std::vector<int64_t> axes = {}, bool keepdim = false);
Tensor argmax(const Tensor& x, std::vector<int64_t> axes = {}, bool keepdim = false);
Tensor argmin(const Tensor& x, std::vector<int64_t> axes = {}, bool keepdim = false);
Tensor var(const Tensor& x, std::vector<int64_t> axes = {}, double correction = 1.0, bool keepdim = false);
Tensor std(const Tensor& x, std::vector<int64_t> axes = {}, double correction = 1.0, bool keepdim = false);
Tensor logsumexp(const Tensor& x, std::vector<int64_t> axes = {}, bool keepdim = false);

// Contractions and pools.
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor linear(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt);
Tensor conv2d(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt,
              std::vector<int64_t> stride = {1, 1}, std::vector<int64_t> padding = {0, 0},
              std::vector<int64_t> dilation = {1, 1}, int64_t groups = 1);
// The gradients of y = conv2d(x, weight, ..., stride, padding, dilation, groups) given grad_y:
// with respect to x (x lends its shape) and to weight (weight lends its shape).
Tensor conv2d_input_grad(const Tensor& grad_y, const Tensor& weight, const Tensor& x,
                         std::vector<int64_t> stride = {1, 1}, std::vector<int64_t> padding = {0, 0},
                         std::vector<int64_t> dilation = {1, 1}, int64_t groups = 1);
Tensor conv2d_weight_grad(const Tensor& grad_y, const Tensor& x, const Tensor& weight,
                          std::vector<int64_t> stride = {1, 1}, std::vector<int64_t> padding = {0, 0},
                          std::vector<int64_t> dilation = {1, 1}, int64_t groups = 1);
Tensor max_pool2d(const Tensor& x, std::vector<int64_t> kernel, std::vector<int64_t> stride = {},
                  std::vector<int64_t> padding = {0, 0}, std::vector<int64_t> dilation = {1, 1},
                  bool ceil_mode = false);
Tensor avg_pool2d(const Tensor& x, std::vector<int64_t> kernel, std::vector<int64_t> stride = {},
                  std::vector<int64_t> padding = {0, 0}, bool ceil_mode = false, bool count_include_pad = true);
Tensor adaptive_avg_pool2d(const Tensor& x, std::vector<int64_t> output_size);

// Views and movement.
Tensor reshape(const Tensor& x, SymShape shape);
Tensor permute(const Tensor& x, std::vector<int64_t> dims);
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
Tensor expand(const Tensor& x, SymShape shape);
Tensor slice(const Tensor& x, int64_t axis, int64_t start = 0, int64_t end = INT64_MAX, int64_t step = 1);
Tensor squeeze(const Tensor& x, std::vector<int64_t> axes = {});
Tensor unsqueeze(const Tensor& x, int64_t axis);
Tensor flatten(const Tensor& x, int64_t start = 0, int64_t end = -1);
Tensor concat(const std::vector<Tensor>& xs, int64_t axis = 0);
Tensor stack(const std::vector<Tensor>& xs, int64_t axis = 0);
Tensor pad(const Tensor& x, std::vector<int64_t> pads, double value = 0.0);
Tensor index_select(const Tensor& x, int64_t axis, const Tensor& index);
Tensor gather(const Tensor& x, int64_t axis, const Tensor& index);
Tensor embedding(const Tensor& weight, const Tensor& index);
// x with its entries along `axis` at index[i] set to src's i-th (torch.index_copy), or increased by
// them when `accumulate` (torch.index_add); index is 1-d.
Tensor index_put(const Tensor& x, int64_t axis, const Tensor& index, const Tensor& src, bool accumulate = false);
// x with x[..., index[i][j], ...] along `axis` set to src[i][j] (torch.scatter), or increased by
// it when `accumulate` (torch.scatter_add).
Tensor scatter(const Tensor& x, int64_t axis, const Tensor& index, const Tensor& src, bool accumulate = false);
// Running sums along `axis` (torch.cumsum); integers and bool sum into int64.
Tensor cumsum(const Tensor& x, int64_t axis);

// Composites.
Tensor softmax(const Tensor& x, int64_t axis);
Tensor log_softmax(const Tensor& x, int64_t axis);
Tensor layer_norm(const Tensor& x, SymShape normalized_shape, const std::optional<Tensor>& weight = std::nullopt,
                  const std::optional<Tensor>& bias = std::nullopt, double eps = 1e-5);
// eps defaults to the machine epsilon of x's dtype, as torch.nn.functional.rms_norm.
Tensor rms_norm(const Tensor& x, SymShape normalized_shape, const std::optional<Tensor>& weight = std::nullopt,
                std::optional<double> eps = std::nullopt);
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const std::optional<Tensor>& weight = std::nullopt, const std::optional<Tensor>& bias = std::nullopt,
                  double eps = 1e-5);
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const std::optional<Tensor>& mask = std::nullopt, bool causal = false,
                                    std::optional<double> scale = std::nullopt);

// Ops with several outputs. Each output is a tensor of its own (inside `compile`, all come from
// one node).
// (values, int64 indices) of the largest / smallest element along `axis`, as torch.max(x, dim).
std::tuple<Tensor, Tensor> max_dim(const Tensor& x, int64_t axis, bool keepdim = false);
std::tuple<Tensor, Tensor> min_dim(const Tensor& x, int64_t axis, bool keepdim = false);
// (variance, mean), as torch.var_mean.
std::tuple<Tensor, Tensor> var_mean(const Tensor& x, std::vector<int64_t> axes = {},
                                    double correction = 1.0, bool keepdim = false);
// (values, int64 indices). `stable` is accepted as in PyTorch; ember's sort always is.
std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t axis = -1, bool descending = false,
                                bool stable = false);
std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t axis = -1, bool largest = true,
                                bool sorted = true);
// Consecutive parts of the given sizes along `axis` (torch.split with a list of sizes).
std::vector<Tensor> split(const Tensor& x, std::vector<int64_t> sizes, int64_t axis = 0);
// `chunks` parts of equal size (the last may be smaller, and there may be fewer), as torch.chunk.
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t axis = 0);
// The slices along `axis`, without it, as torch.unbind.
std::vector<Tensor> unbind(const Tensor& x, int64_t axis = 0);
// (out, mean, rstd) as aten.native_layer_norm; mean and rstd keep the normalised dims as size 1.
std::tuple<Tensor, Tensor, Tensor> native_layer_norm(
    const Tensor& x, SymShape normalized_shape, const std::optional<Tensor>& weight = std::nullopt,
    const std::optional<Tensor>& bias = std::nullopt, double eps = 1e-5);
// Training-mode batch norm, in aten.native_batch_norm's argument order: (out, batch mean, batch
// invstd, new running_mean, new running_var). The running statistics are returned, not updated.
std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> native_batch_norm(
    const Tensor& x, const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
    const Tensor& running_mean, const Tensor& running_var, double momentum = 0.1,
    double eps = 1e-5);

}  // namespace ember

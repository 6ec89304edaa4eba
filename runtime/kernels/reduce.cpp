// Reductions: for every kept index, walk the reduced elements in row-major order. Primitive
// reductions fold with their record's combiner and identity (ir/reduction.h), floats in double
// and integers in wrapping int64; the composite ones (mean, var, ...) run directly in double.
#include <cmath>
#include <cstring>
#include <limits>

#include "runtime/kernels/kernel.h"

namespace ember::kernels {

namespace {

// The input split into kept dims (outer) and reduced dims (inner), with their strides.
struct Split {
  std::vector<int64_t> outer_shape, outer_strides, inner_shape, inner_strides;
  int64_t inner_count = 1;
};

Split split_axes(const Array& x, const Attrs& attrs) {
  std::vector<int64_t> axes = normalize_axes("reduce", attr_ints(attrs, "axes"), x.rank());
  if (axes.empty())
    for (int64_t i = 0; i < x.rank(); ++i) axes.push_back(i);
  Split s;
  for (int64_t i = 0; i < x.rank(); ++i) {
    bool reduced = std::find(axes.begin(), axes.end(), i) != axes.end();
    (reduced ? s.inner_shape : s.outer_shape).push_back(x.shape()[i]);
    (reduced ? s.inner_strides : s.outer_strides).push_back(x.strides()[i]);
    if (reduced) s.inner_count *= x.shape()[i];
  }
  return s;
}

template <class T>
std::vector<T> gather_row(const Array& x, const Split& s, int64_t base) {
  std::vector<T> row(s.inner_count);
  const char* p = byte_ptr(x, base);
  size_t size = itemsize(x.dtype());
  for (int64_t j = 0; j < s.inner_count; ++j)
    row[j] = element::load<T>(p + strided_offset(j, s.inner_shape, s.inner_strides) * static_cast<int64_t>(size), x.dtype());
  return row;
}

// The record's semantics ([Note: reduction semantics]): fold the row into the identity with the
// combiner. T is double for floats (the reference accumulates wider than the declared float32)
// and int64_t for integers and bool.
template <class T>
T identity_as(const ReductionSemantics& r, DType input) {
  Literal id = r.identity(input);
  if constexpr (std::is_integral_v<T>) return id.ints.at(0);
  else return id.as_double(0);
}

template <class T>
T fold(const ReductionSemantics& r, DType input, const std::vector<T>& row) {
  T acc = identity_as<T>(r, input);
  for (T x : row) acc = combine(r.combiner, acc, x);
  return acc;
}

// The composite reductions, run directly in double (their decompositions are in ir/ops/).
double reduce_composite(Op op, const std::vector<double>& v, const Attrs& attrs) {
  size_t n = v.size();
  switch (op) {
    case Op::Mean: {
      double s = 0;
      for (double x : v) s += x;
      return s / static_cast<double>(n);
    }
    case Op::Var: case Op::Std: {
      double mean = 0;
      for (double x : v) mean += x;
      mean /= static_cast<double>(n);
      double ss = 0;
      for (double x : v) ss += (x - mean) * (x - mean);
      // PyTorch divides by max(0, n - correction): inf past the last degree of freedom, NaN
      // when every deviation is 0 (n <= 1).
      double denom = std::max(0.0, static_cast<double>(n) - attr_float(attrs, "correction"));
      double var = ss / denom;
      return op == Op::Var ? var : std::sqrt(var);
    }
    case Op::LogSumExp: {
      if (n == 0) return -std::numeric_limits<double>::infinity();
      double m = -std::numeric_limits<double>::infinity();
      for (double x : v) m = std::isnan(x) || x > m ? x : m;
      if (std::isnan(m)) return m;
      if (std::isinf(m)) return m;  // all -inf gives -inf; any +inf gives +inf
      double s = 0;
      for (double x : v) s += std::exp(x - m);
      return m + std::log(s);
    }
    default: EMBER_CHECK(false, "'", op_name(op), "' is not a composite reduction");
  }
  return 0;
}

Array reduce(const Call& call) {
  const Array& x = call.inputs[0];
  Split s = split_axes(x, call.attrs);
  Array out = output(call);
  const std::optional<ReductionSemantics>& semantics = op_info(call.op).reduction;
  // Primitive reductions of integers and bool fold in int64; everything else in double
  // (composites of integers, such as mean, give floats).
  bool as_int = semantics && !is_floating(x.dtype());
  int64_t outer = 1;
  for (int64_t d : s.outer_shape) outer *= d;
  size_t out_size = itemsize(out.dtype());
  char* dst = static_cast<char*>(out.data());
  for (int64_t i = 0; i < outer; ++i) {
    int64_t base = strided_offset(i, s.outer_shape, s.outer_strides);
    void* p = dst + i * out_size;
    if (as_int) {
      std::vector<int64_t> row = gather_row<int64_t>(x, s, base);
      element::store<int64_t>(p, out.dtype(), fold(*semantics, x.dtype(), row));
      continue;
    }
    std::vector<double> row = gather_row<double>(x, s, base);
    element::store<double>(p, out.dtype(), semantics ? fold(*semantics, x.dtype(), row)
                                                     : reduce_composite(call.op, row, call.attrs));
  }
  return out;
}

// (variance, mean) over the same axes, each as the single reductions compute them.
std::vector<Array> var_mean(const Call& call) {
  const Array& x = call.inputs[0];
  Split s = split_axes(x, call.attrs);
  Array var = output(call, 0);
  Array mean = output(call, 1);
  int64_t outer = 1;
  for (int64_t d : s.outer_shape) outer *= d;
  for (int64_t i = 0; i < outer; ++i) {
    int64_t base = strided_offset(i, s.outer_shape, s.outer_strides);
    std::vector<double> row = gather_row<double>(x, s, base);
    element::store<double>(byte_ptr(var, i), var.dtype(),
                           reduce_composite(Op::Var, row, call.attrs));
    element::store<double>(byte_ptr(mean, i), mean.dtype(),
                           reduce_composite(Op::Mean, row, call.attrs));
  }
  return {var, mean};
}

}  // namespace

void register_reductions(KernelTable& t) {
  for (int i = 0; i < kNumOps; ++i) {
    const OpInfo& info = op_info(static_cast<Op>(i));
    if (info.is_reduction() && !info.multi_output() && !(info.reduction && is_indexed(info.reduction->combiner))) t[i] = reduce;
  }
}

void register_multi_reductions(MultiKernelTable& t) {
  t[static_cast<size_t>(Op::VarMean)] = var_mean;
}

}  // namespace ember::kernels

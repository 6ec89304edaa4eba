// Elementwise kernels: broadcast the inputs, convert to the op's compute type, apply the op's
// scalar function from its registry record, convert to the output dtype.
#include "runtime/kernels/kernel.h"

namespace ember::kernels {

namespace {

template <class T, size_t K>
void apply(const Call& call, DType compute, T (*fn)(const T*, int), int variant, const Array& out) {
  std::array<std::vector<int64_t>, K + 1> strides;
  for (size_t k = 0; k < K; ++k) strides[k] = broadcast_strides(call.inputs[k], call.shape);
  strides[K] = out.strides();
  std::array<DType, K> dtypes;
  std::array<size_t, K> sizes;
  std::array<bool, K> convert;  // the operand's dtype differs from the one the op computes in
  for (size_t k = 0; k < K; ++k) {
    dtypes[k] = call.inputs[k].dtype();
    sizes[k] = itemsize(dtypes[k]);
    convert[k] = dtypes[k] != compute && !(call.op == Op::Where && k == 0);
  }
  size_t out_size = itemsize(out.dtype());
  for_each_row<K + 1>(call.shape, strides, [&](auto off, int64_t n, auto inner) {
    std::array<const char*, K> src;
    for (size_t k = 0; k < K; ++k) src[k] = byte_ptr(call.inputs[k], off[k]);
    char* dst = byte_ptr(out, off[K]);
    T args[K];
    for (int64_t j = 0; j < n; ++j) {
      for (size_t k = 0; k < K; ++k) {
        args[k] = element::load<T>(src[k] + j * inner[k] * sizes[k], dtypes[k]);
        if (convert[k]) args[k] = element::through<T>(args[k], compute);
      }
      element::store<T>(dst + j * inner[K] * out_size, out.dtype(), fn(args, variant));
    }
  });
}

template <size_t K>
Array elementwise(const Call& call) {
  const OpInfo& info = op_info(call.op);
  std::vector<TensorType> types;
  for (const Array& a : call.inputs) types.push_back({a.dtype(), to_shape(a.shape())});
  DType compute = elementwise_compute_dtype(call.op, types, call.dtype);
  int variant = scalar_variant(call.op, call.attrs);
  Array out = output(call);
  switch (compute_type(compute)) {
    case ComputeType::Float32: apply<float, K>(call, compute, info.scalar.f32, variant, out); break;
    case ComputeType::Float64: apply<double, K>(call, compute, info.scalar.f64, variant, out); break;
    case ComputeType::Int64:
      EMBER_CHECK(info.scalar.i64 != nullptr, "'", info.name, "' has no integer semantics");
      apply<int64_t, K>(call, compute, info.scalar.i64, variant, out);
      break;
  }
  return out;
}

}  // namespace

void register_elementwise(KernelTable& t) {
  for (int i = 0; i < kNumOps; ++i) {
    const OpInfo& info = op_info(static_cast<Op>(i));
    if (!info.is_elementwise()) continue;
    t[i] = info.min_arity == 1 ? elementwise<1> : info.min_arity == 2 ? elementwise<2> : elementwise<3>;
  }
}

}  // namespace ember::kernels

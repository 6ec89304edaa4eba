// The op sweep of `extern`: a custom op registered for the sweep, called eagerly and compiled,
// against its float64 reference. Custom ops as users write them are tested in
// test_custom_ops.cpp.
#include <ember/ember.h>

#include "runtime/element.h"
#include "tests/catch.h"
#include "tests/unit/sweep.h"

namespace ember::sweep {
namespace {

// out = a + alpha * b, computed in double and stored once, for two tensors of one shape.
void register_axpy() {
  static const bool done = [] {
    register_op({
        .name = "sweep.axpy",
        .shape =
            [](std::span<const TensorType> in, const Attrs&) {
              if (in.size() != 2 || in[0].dtype != in[1].dtype || in[0].shape.size() != in[1].shape.size())
                EMBER_THROW(Value, "[sweep.axpy] takes two tensors of one dtype and rank");
              for (size_t d = 0; d < in[0].shape.size(); ++d)
                require_equal_dims("sweep.axpy", in[0].shape[d], in[1].shape[d], "shapes differ");
              return std::vector<TensorType>{in[0]};
            },
        .cpu =
            [](std::span<const Array> in, std::span<const Array> out, const Attrs& attrs) {
              double alpha = attr_float(attrs, "alpha");
              char* dst = static_cast<char*>(out[0].data());
              for (int64_t i = 0; i < out[0].numel(); ++i)
                element::store<double>(dst + i * itemsize(out[0].dtype()), out[0].dtype(),
                                       in[0].get(i) + alpha * in[1].get(i));
            },
    });
    return true;
  }();
  (void)done;
}

}  // namespace

Case extern_case(Op op, DType dt, Gen& g) {
  if (op != Op::Extern) unlisted(op, "extern cases");
  register_axpy();
  Case c;
  Ints shape = g.case_shape();
  Ints other = shape;
  if (g.index() == 2) other.push_back(2);  // ranks differ: the shape function's error
  double alpha = g.pick<double>({2.0, -1.0, 0.5, 0.0});
  c.inputs.push_back(g.input(dt, shape, coarse()));
  c.inputs.push_back(g.input(dt, other, coarse()));
  c.note = "alpha=" + num(alpha);
  Ref a = c.inputs[0].ref, b = c.inputs[1].ref;
  c.call = [alpha](const std::vector<Tensor>& t) { return call_op("sweep.axpy", {t[0], t[1]}, {{"alpha", alpha}})[0]; };
  c.expect = [=] {
    if (shape != other) return raises(ErrorKind::Value);
    Ref out{shape, {}};
    for (size_t i = 0; i < a.v.size(); ++i) out.v.push_back(a.v[i] + alpha * b.v[i]);
    return result(dt, out);
  };
  return c;
}

TEST_CASE("op sweep: extern", "[sweep]") {
  sweep_family("extern");
}

}  // namespace ember::sweep

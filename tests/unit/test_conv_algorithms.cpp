// Every algorithm a float32 convolution step may take (runtime/step_settings.h, ConvAlgorithm;
// max-autotune measures them) computes the same convolution: oneDNN's direct kernel (the
// default), its brgemm one, and ember's own im2col and GEMM (or depthwise loop), each checked
// against the convolution's definition in float64 over strides, padding, dilation, groups, bias
// and images side by side.
#include <ember/ember.h>

#include "runtime/step_settings.h"
#include "tests/catch.h"
#include "tests/unit/helpers.h"

using namespace ember;
using test::check_close;

namespace {

struct Geometry {
  int64_t n, c, h, w, o, k;
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups;
  bool bias;
};

// The convolution by its definition, a sum per output in float64: a reference that shares no
// code with ember's paths (its own float64 convolution is the im2col and GEMM path under test).
Tensor direct_conv(const Tensor& x, const Tensor& w, const std::optional<Tensor>& b, const Geometry& g) {
  const std::vector<double> xs = x.to_vector(), ws = w.to_vector(), bs = b ? b->to_vector() : std::vector<double>();
  const int64_t cg = g.c / g.groups, og = g.o / g.groups;
  auto extent = [&](int64_t size, int d) {
    return (size + 2 * g.padding[d] - g.dilation[d] * (g.k - 1) - 1) / g.stride[d] + 1;
  };
  const int64_t oh = extent(g.h, 0), ow = extent(g.w, 1);
  std::vector<double> y(static_cast<size_t>(g.n * g.o * oh * ow));
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t o = 0; o < g.o; ++o)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double sum = b ? bs[o] : 0.0;
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t kh = 0; kh < g.k; ++kh)
              for (int64_t kw = 0; kw < g.k; ++kw) {
                const int64_t ih = i * g.stride[0] - g.padding[0] + kh * g.dilation[0];
                const int64_t iw = j * g.stride[1] - g.padding[1] + kw * g.dilation[1];
                if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
                const int64_t channel = o / og * cg + c;
                sum += xs[((n * g.c + channel) * g.h + ih) * g.w + iw] * ws[((o * cg + c) * g.k + kh) * g.k + kw];
              }
          y[((n * g.o + o) * oh + i) * ow + j] = sum;
        }
  return from_vector(y, {g.n, g.o, oh, ow}, DType::Float64);
}

void check_algorithm(ConvAlgorithm algorithm, GemmRoute route = GemmRoute::Auto) {
  const Geometry geometries[] = {{2, 16, 14, 14, 32, 3, {1, 1}, {1, 1}, {1, 1}, 1, false},
                                 {1, 8, 17, 11, 16, 3, {2, 2}, {1, 0}, {1, 1}, 1, true},
                                 {2, 8, 12, 12, 8, 3, {1, 1}, {2, 2}, {2, 2}, 2, true},
                                 {1, 24, 9, 9, 24, 3, {1, 1}, {1, 1}, {1, 1}, 24, false},  // depthwise
                                 {2, 32, 7, 7, 64, 1, {1, 1}, {0, 0}, {1, 1}, 1, true},    // pointwise
                                 {1, 16, 8, 8, 32, 1, {2, 2}, {0, 0}, {1, 1}, 1, false},
                                 {1, 3, 32, 32, 16, 7, {2, 2}, {3, 3}, {1, 1}, 1, false},  // a stem
                                 // Few pixels: images side by side in one GEMM (conv_unfold.h's
                                 // images_per_gemm), four and then one, ...
                                 {5, 16, 8, 8, 24, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},
                                 // ... all three, in each of two groups, ...
                                 {3, 8, 2, 2, 16, 3, {1, 1}, {1, 1}, {1, 1}, 2, true},
                                 // ... and a pointwise convolution's, copied side by side.
                                 {5, 8, 3, 3, 16, 1, {1, 1}, {0, 0}, {1, 1}, 1, true}};
  int seed = 1;
  for (const Geometry& g : geometries) {
    INFO("algorithm " << conv_name(algorithm) << ", route " << route_name(route) << ", N " << g.n
                      << ", C " << g.c << ", O " << g.o << ", k " << g.k << ", groups "
                      << g.groups);
    Tensor x = uniform({g.n, g.c, g.h, g.w}, seed++, -1, 1), w = uniform({g.o, g.c / g.groups, g.k, g.k}, seed++, -1, 1);
    std::optional<Tensor> b;
    if (g.bias) b = uniform({g.o}, seed++, -1, 1);
    Tensor want = direct_conv(x, w, b, g);
    ScopedStepSettings scoped(StepSettings{.gemm = route, .conv = algorithm});
    Tensor got = conv2d(x, w, b, g.stride, g.padding, g.dilation, g.groups);
    check_close(got, want, 1e-4, 1e-5);
  }
}

}  // namespace

TEST_CASE("conv algorithms: every algorithm computes the same convolution", "[conv]") {
  for (ConvAlgorithm a : {ConvAlgorithm::Auto, ConvAlgorithm::Brgemm, ConvAlgorithm::Im2col}) check_algorithm(a);
}

TEST_CASE("conv algorithms: ember's own computes the same convolution through every GEMM route", "[conv]") {
  for (GemmRoute r : {GemmRoute::OneDnn, GemmRoute::Blas, GemmRoute::Mkl, GemmRoute::Generated})
    check_algorithm(ConvAlgorithm::Im2col, r);
}

TEST_CASE("conv algorithms: an algorithm's name is its settings' text", "[conv]") {
  for (ConvAlgorithm a : {ConvAlgorithm::Brgemm, ConvAlgorithm::Im2col}) {
    StepSettings s{.threads = 2, .conv = a};
    REQUIRE(StepSettings::parse(s.str()) == s);
    REQUIRE(s.str() == std::string("threads=2 conv=") + conv_name(a));
  }
  REQUIRE_THROWS(StepSettings::parse("conv=winograd"));
}

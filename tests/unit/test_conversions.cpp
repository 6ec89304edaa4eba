// copy_into's direct conversions between float32 and float16/bfloat16 give, bit for bit, what
// the element-wise rule (element::store of the value as double) gives: NaN stays NaN and
// quiet, infinities, signed zeros, subnormals, overflow to infinity and ties to even.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "runtime/array.h"
#include "runtime/element.h"
#include "runtime/kernels/kernel.h"
#include "tests/catch.h"

using namespace ember;

namespace {

std::vector<float> awkward_floats() {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {0.0f, -0.0f, 1.0f, -1.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(),
                          -std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min(),
                          std::numeric_limits<float>::min(), std::numeric_limits<float>::max(), 65504.0f, 65520.0f,
                          65519.99f, 6.0e-8f, 3.0e-8f, 1.0e-9f, 3.14159265f, 1.0f + 1.0f / 256, 1.0f + 3.0f / 512};
  uint32_t signalling = 0x7f800001u;  // a signalling NaN: converts to a quiet one
  float s;
  std::memcpy(&s, &signalling, 4);
  v.push_back(s);
  for (uint32_t bits = 0x3f800000u; bits < 0x3f800000u + 0x30000u; bits += 0x1001u) {  // around ties
    float f;
    std::memcpy(&f, &bits, 4);
    v.push_back(f);
    v.push_back(-f);
  }
  return v;
}

void check_round_trip(DType narrow) {
  std::vector<float> values = awkward_floats();
  int64_t n = static_cast<int64_t>(values.size());
  Array wide = Array::empty(DType::Float32, {n});
  std::memcpy(wide.data(), values.data(), sizeof(float) * values.size());
  Array got = Array::empty(narrow, {n});
  kernels::copy_into(wide, got);
  for (int64_t i = 0; i < n; ++i) {
    uint16_t want;
    element::store<double>(&want, narrow, static_cast<double>(values[i]));
    INFO(dtype_name(narrow) << " of " << values[i]);
    CHECK(got.data_as<uint16_t>()[i] == want);
  }
  // Back to float32, from a strided view (every other element, reversed order of rows).
  Array two_rows = got.view({2, n / 2}, {1, 2}, 0);
  Array back = Array::empty(DType::Float32, {2, n / 2});
  kernels::copy_into(two_rows, back);
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t j = 0; j < n / 2; ++j) {
      double want = element::load<double>(got.data_as<uint16_t>() + r + 2 * j, narrow);
      float b = back.data_as<float>()[r * (n / 2) + j];
      CHECK((b == want || (std::isnan(b) && std::isnan(want))));
      if (b == 0) CHECK(std::signbit(b) == std::signbit(want));
    }
}

}  // namespace

TEST_CASE("copy_into: float32 to and from bfloat16 and float16, directly, as the element rule", "[kernels][dtype]") {
  check_round_trip(DType::BFloat16);
  check_round_trip(DType::Float16);
}

namespace {

// The element of `a` at a multi-index, through its strides (data() is its element 0).
float at(const Array& a, const std::vector<int64_t>& index) {
  int64_t off = 0;
  for (size_t d = 0; d < index.size(); ++d) off += index[d] * a.strides()[d];
  return static_cast<const float*>(a.data())[off];
}

}  // namespace

// copy_into merges dims whose strides allow it in both operands (and drops dims of size 1), so
// rows run as long as the layouts do; every element must still land at its own place.
TEST_CASE("copy_into: layouts whose dims merge, partly or not at all", "[kernels]") {
  Array src = Array::empty(DType::Float32, {3, 4, 5, 6});
  for (int64_t i = 0; i < src.numel(); ++i) src.data_as<float>()[i] = static_cast<float>(i);
  auto check = [&](const Array& from, const Array& to) {
    kernels::copy_into(from, to);
    for (int64_t a = 0; a < from.shape()[0]; ++a)
      for (int64_t b = 0; b < from.shape()[1]; ++b)
        for (int64_t c = 0; c < from.shape()[2]; ++c)
          for (int64_t d = 0; d < from.shape()[3]; ++d) REQUIRE(at(to, {a, b, c, d}) == at(from, {a, b, c, d}));
  };
  // Into a slot of a concat along dim 2 (dims 0-1 and 2-3 merge in both; 1-2 do not in the output).
  Array cat = Array::zeros(DType::Float32, {3, 4, 7, 6});
  check(src, kernels::narrow(cat, 2, 1, 5));
  // From a permuted view (nothing merges), from a slice with a dim of size 1, into a strided view.
  check(src.view({3, 4, 6, 5}, {120, 30, 1, 6}, 0), Array::zeros(DType::Float32, {3, 4, 6, 5}));
  check(kernels::narrow(src, 1, 2, 1), Array::zeros(DType::Float32, {3, 1, 5, 6}));
  Array wide = Array::zeros(DType::Float32, {3, 4, 5, 12});
  check(src, wide.view({3, 4, 5, 6}, {240, 60, 12, 2}, 1));
  // A broadcast source (stride 0) and an empty copy.
  check(src.view({3, 4, 5, 6}, {0, 30, 6, 1}, 0), Array::zeros(DType::Float32, {3, 4, 5, 6}));
  kernels::copy_into(Array::empty(DType::Float32, {3, 0, 5, 6}), Array::empty(DType::Float32, {3, 0, 5, 6}));
}

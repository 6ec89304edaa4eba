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

#include "tests/catch.h"
#include <ember/ember.h>
TEST_CASE("smoke: eager add", "[smoke]") {
  ember::Tensor a = ember::full({2}, 1.5);
  REQUIRE((a + a).to_vector() == std::vector<double>{3.0, 3.0});
}

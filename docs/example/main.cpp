// The smallest program that uses ember from another CMake project.
#include <ember/ember.h>

#include <cmath>
#include <iostream>

int main() {
  using namespace ember;
  Tensor w = normal({8, 4}, /*seed=*/1);
  auto f = compile([&](Tensor x) { return gelu(matmul(x, w)) + 1.0; });
  Tensor x = uniform({2, 8}, /*seed=*/2);
  std::vector<double> compiled = f(x).to_vector(), eager = (gelu(matmul(x, w)) + 1.0).to_vector();
  for (size_t i = 0; i < eager.size(); ++i)
    if (std::abs(compiled[i] - eager[i]) > 1e-6) {
      std::cout << "mismatch at " << i << "\n";
      return 1;
    }
  std::cout << "compiled result matches eager (" << f.report().graph_count() << " graph)\n";
  return 0;
}

// The passes by name.
#include <functional>

#include "ir/error.h"
#include "passes/pass.h"

namespace ember {

namespace {

const std::vector<std::pair<std::string, std::function<std::unique_ptr<Pass>()>>>& passes() {
  static const std::vector<std::pair<std::string, std::function<std::unique_ptr<Pass>()>>> table = {
      {"dce", make_dce},
      {"cse", make_cse},
      {"constant-fold", make_constant_fold},
      {"simplify", make_simplify},
      {"decompose", make_decompose},
      {"decompose-fusible", make_decompose_fusible},
      {"split-reductions", make_split_reductions},
  };
  return table;
}

}  // namespace

std::vector<std::string> pass_names() {
  std::vector<std::string> names;
  for (const auto& [name, make] : passes()) names.push_back(name);
  return names;
}

std::unique_ptr<Pass> make_pass(std::string_view name) {
  for (const auto& [n, make] : passes())
    if (n == name) return make();
  std::string valid;
  for (const auto& n : pass_names()) valid += (valid.empty() ? "" : ", ") + n;
  EMBER_THROW(Value, "[pipeline] unknown pass '", name, "' (valid: ", valid, ")");
}

}  // namespace ember

// The op sweep of the op table itself: every op of ir/ops.def is swept, failures are well formed.
#include <algorithm>
#include <cstdio>
#include <set>
#include <string>

#include "tests/catch.h"
#include "tests/unit/sweep.h"

namespace ember::sweep {

TEST_CASE("op sweep: the table covers every op of ir/ops.def", "[sweep]") {
  std::set<Op> covered;
  for (const Spec& s : specs()) {
    INFO("op " << op_text(s.op));
    CHECK(covered.insert(s.op).second);  // one entry per op
  }
#define EMBER_OP(name, text, min_arity, max_arity, kind) \
  if (Op::name != Op::Input) {                           \
    INFO("op " text " is in ir/ops.def but not swept");  \
    CHECK(covered.count(Op::name) == 1);                 \
  }
#include "ir/ops.def"
#undef EMBER_OP
  // Expected failures name a swept op (or a sub-case of one) with a dtype it supports, and a
  // reason.
  CHECK(kExpectedFailures.size() <= 12);
  for (const ExpectedFailure& e : kExpectedFailures) {
    std::string name = e.op, base = name.substr(0, name.find('['));
    INFO("expected failure (" << name << ", " << dname(e.dtype) << ")");
    auto it = std::find_if(specs().begin(), specs().end(),
                           [&](const Spec& s) { return op_text(s.op) == base; });
    bool mixed =
        name.find("[mixed]") != std::string::npos || name.find("[number]") != std::string::npos;
    bool promotion = name.rfind("promotion[", 0) == 0;  // a group of the type-promotion test
    CHECK((promotion || (it != specs().end() && (mixed || it->supports(e.dtype)))));
    CHECK(std::string(e.why).size() > 0);
  }
  int supported = 0, total = 0;
  for (const Spec& s : specs())
    for (DType dt : kAllDTypes) supported += s.supports(dt), ++total;
  std::printf(
      "op sweep: %zu ops, %d (op, dtype) pairs swept, %d checked to raise a Type error, %zu "
      "expected failures\n",
      specs().size(), supported, total - supported, kExpectedFailures.size());
}

TEST_CASE("op sweep: a builder given an op it does not list fails instead of testing another op",
          "[sweep]") {
  // The builders that serve several ops switch over them; handed an op they do not list, they
  // must throw rather than fall through to one of their own.
  const Builder shared[] = {&reduction, &view_case, &movement_case, &softmax_case, &norm_case, &pool_case};
  for (Builder build : shared) {
    Op stranger = Op::Add;
    auto run = [&] {
      Gen g(1, 3);
      Case c = build(stranger, DType::Float32, g);
      std::vector<Tensor> args;
      for (const Input& in : c.inputs) args.push_back(in.tensor);
      c.expect();
      c.call(args);
    };
    CHECK_THROWS_AS(run(), std::logic_error);
  }
}

}  // namespace ember::sweep

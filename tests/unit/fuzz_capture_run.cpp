// Running a case: each call eagerly (the program's lambda called directly), then through
// compile() under one dynamic setting, the outcomes compared call by call.
#include <stdexcept>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include "tests/unit/fuzz_capture.h"

namespace ember::capture_fuzz {
namespace {

// One closure type for every program: it reads the program (and its captured tensors) by
// reference, and takes any mix of tensor and scalar arguments.
auto program_lambda(const Program& p) {
  return [&p](const auto&... a) -> std::vector<Tensor> {
    std::vector<Arg> args{Arg(std::in_place_type<std::decay_t<decltype(a)>>, a)...};
    return p.run(args);
  };
}
using ProgramLambda = decltype(program_lambda(std::declval<const Program&>()));

// ---------------------------------------------------------------------------------------------
// Calling with a runtime list of arguments: one instantiation per signature (at most 3 tensors,
// 2 scalars, 4 arguments).

template <int NT, int NS, class F, class... A>
std::vector<Tensor> invoke(F& f, const std::vector<Arg>& args, const A&... a) {
  constexpr size_t k = sizeof...(A);
  if constexpr (k > 0)
    if (args.size() == k) return f(a...);
  if constexpr (k < 4) {
    const Arg& next = args.at(k);
    switch (next.index()) {
      case 0:
        if constexpr (NT < 3) return invoke<NT + 1, NS>(f, args, a..., std::get<0>(next));
        break;
      case 1:
        if constexpr (NS < 2) return invoke<NT, NS + 1>(f, args, a..., std::get<1>(next));
        break;
      case 2:
        if constexpr (NS < 2) return invoke<NT, NS + 1>(f, args, a..., std::get<2>(next));
        break;
      case 3:
        if constexpr (NS < 2) return invoke<NT, NS + 1>(f, args, a..., std::get<3>(next));
        break;
      case 4:
        if constexpr (NS < 2) return invoke<NT, NS + 1>(f, args, a..., std::get<4>(next));
        break;
      case 5:
        if constexpr (NS < 2) return invoke<NT, NS + 1>(f, args, a..., std::get<5>(next));
        break;
    }
  }
  throw std::logic_error("fuzz: unsupported signature");
}

template <class F>
Outcome run_call(F& f, const std::vector<Arg>& args) {
  Outcome o;
  try {
    o.outs = invoke<0, 0>(f, args);
  } catch (const Error& e) {
    o.status = Outcome::EmberError;
    o.kind = e.kind();
    o.message = e.what();
  } catch (const std::exception& e) {
    o.status = Outcome::OtherError;
    o.message = std::string(typeid(e).name()) + ": " + e.what();
  }
  return o;
}

}  // namespace

Prepared prepare(const Case& cs) {
  Prepared pr;
  ProgramLambda fn = program_lambda(cs.prog);
  for (const CallSpec& c : cs.calls) {
    pr.args.push_back(materialize(cs.prog, c));
    pr.eager.push_back(run_call(fn, pr.args.back()));
  }
  return pr;
}

std::optional<Failure> run_compiled(const Case& cs, const Prepared& pr, std::optional<bool> dynamic) {
  auto f = compile(program_lambda(cs.prog), Options{.dynamic = dynamic, .recompile_limit = cs.prog.recompile_limit});
  for (size_t i = 0; i < cs.calls.size(); ++i) {
    Outcome got = run_call(f, pr.args[i]);
    if (auto m = compare(pr.eager[i], got, pr.args[i]))
      return Failure{cs.seed, dynamic, i, *m, outcome_str(pr.eager[i]), outcome_str(got)};
  }
  return std::nullopt;
}

std::optional<Failure> check(const Case& cs, std::optional<bool> dynamic) {
  Prepared pr = prepare(cs);
  return run_compiled(cs, pr, dynamic);
}

}  // namespace ember::capture_fuzz

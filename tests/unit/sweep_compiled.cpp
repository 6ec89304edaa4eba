// The op sweep through compile(): every case also runs as a compiled function (fullgraph, so a
// break is an error), static on even cases and dynamic=true on odd ones, called twice (a trace,
// then a replay). The compiled result must equal eager's bit for bit (the passes are exact and
// the backend is the interpreter), or raise an error of the same kind; and a compiled graph
// must really have run. A case of an op with a decomposition runs a third time with the op
// decomposed, checked against the reference within the tolerances.
#include <cstring>

#include <ember/ember.h>

#include "codegen/plan.h"
#include "ir/builder.h"
#include "tests/unit/helpers.h"
#include "tests/unit/sweep.h"

namespace ember::sweep {

namespace {

// Calls `f` with the case's tensors as separate arguments, so each is a graph input.
template <class F>
std::vector<Tensor> call_spread(F& f, const std::vector<Tensor>& a) {
  switch (a.size()) {
    case 0: return f();
    case 1: return f(a[0]);
    case 2: return f(a[0], a[1]);
    case 3: return f(a[0], a[1], a[2]);
    case 4: return f(a[0], a[1], a[2], a[3]);
    case 5: return f(a[0], a[1], a[2], a[3], a[4]);
  }
  throw std::logic_error("the sweep has a case with more than 5 inputs: extend call_spread");
}

// The composites left in a decomposed graph that its decomposition did not decline, and the
// declines other than the known one (causal attention over a symbolic length).
std::string undecomposed(const std::string& ir) {
  auto g = parse_graph(ir);
  std::string left;
  for (Node* n : g->nodes()) {
    if (!n->info().has_decomposition()) continue;
    ember::Builder b(*g, n);
    bool declined = n->info().decompose(b, n->inputs(), n->attrs).empty();
    bool known = n->op == Op::ScaledDotProductAttention && attr_bool(n->attrs, "causal");
    if (!declined || !known) left += " " + std::string(n->info().name);
  }
  return left;
}

// Whether the optimised graph holds a node the CPU backend computes in a kernel.
bool expects_kernel(const std::string& ir) {
  auto g = parse_graph(ir);
  for (Node* n : g->nodes())
    if (codegen::cpu_can_compute(n)) return true;
  return false;
}

}  // namespace

void check_compiled(const Case& c, const std::vector<Tensor>& args, const std::vector<Tensor>* eager,
                    const Expected* e, std::optional<ErrorKind> eager_error, int index,
                    const std::function<void(const std::string&)>& fail) {
  if (c.not_compiled) return;
  // Cases alternate static / dynamic, and the interpreter / generated code (two bits of index).
  bool dynamic = index % 2 == 1, generated = (index / 2) % 2 == 0;
  std::string how = std::string(dynamic ? "compiled (dynamic=true" : "compiled (static") +
                    (generated ? ", generated code)" : ", interpreter)");
  test::ScopedEnv backend("EMBER_CODEGEN", generated ? "1" : "0");
  std::vector<Tensor> traced_eager;
  if (c.traced && !eager_error) {
    traced_eager = {c.traced(args)};
    eager = &traced_eager;
  }
  auto body = [&](const auto&... xs) -> std::vector<Tensor> {
    std::vector<Tensor> in{xs...};
    if (c.traced) return {c.traced(in)};
    return invoke(c, in);
  };
  auto f = compile(body, Options{.fullgraph = true, .dynamic = dynamic});
  for (int call = 0; call < 2; ++call) {
    std::string when = how + (call == 0 ? ", first call" : ", replay");
    std::vector<Tensor> y;
    try {
      y = call_spread(f, args);
    } catch (const Error& err) {
      if (eager_error && err.kind() == *eager_error) continue;
      fail(when + " threw ember::Error(" + error_kind_name(err.kind()) + "): " + err.what() +
           (eager_error ? std::string(", eager threw kind ") + error_kind_name(*eager_error) : ", eager did not throw"));
      return;
    } catch (const std::exception& err) {
      fail(when + " threw a non-ember exception: " + err.what());
      return;
    }
    if (eager_error) {
      fail(when + " returned a result where eager threw ember::Error(" + error_kind_name(*eager_error) + ")");
      return;
    }
    if (y.size() != eager->size()) {
      fail(when + " returned " + std::to_string(y.size()) + " outputs, eager " + std::to_string(eager->size()));
      return;
    }
    if (generated && !c.traced && e && !e->error) {
      // Generated code rounds differently (polynomial exp, log, ...): as eager is checked.
      for (size_t k = 0; k < y.size(); ++k) {
        const ExpectedOutput want = k == 0 ? ExpectedOutput{e->dtype, e->out} : e->more[k - 1];
        for (const std::string& failure : check_output(y[k].array(), want.dtype, want.out, *e))
          fail(when + " output " + std::to_string(k) + ": " + failure + "\n" + f.report().graphs.back().ir);
      }
      continue;
    }
    for (size_t k = 0; k < y.size(); ++k)
      if (!test::same_bits(y[k].array(), (*eager)[k].array())) {
        fail(when + " output " + std::to_string(k) + " differs from eager: " + y[k].array().str(8) + " vs " +
             (*eager)[k].array().str(8));
        return;
      }
  }
  if (eager_error) return;
  // A compiled graph ran, unless the result is an input itself (a view that changes nothing).
  Report r = f.report();
  bool is_input = false;
  for (const Tensor& a : args)
    for (const Tensor& e : *eager) is_input = is_input || a.array().storage() == e.array().storage();
  if (r.graph_count() != 1 && !(r.graph_count() == 0 && is_input))
    fail(how + " ran " + std::to_string(r.graph_count()) + " graphs, expected 1");
  if (r.graph_break_count() != 0) fail(how + " broke the graph");
  // An op the CPU backend lowers must really have run as generated code.
  if (generated && r.graph_count() == 1 && expects_kernel(r.graphs[0].ir) && r.graphs[0].kernels == 0)
    fail(how + " ran no generated kernel for an op the backend lowers:\n" + r.graphs[0].ir);
  if (!generated && r.graph_count() == 1 && r.graphs[0].kernels != 0) fail(how + " ran generated code with EMBER_CODEGEN=0");
}

void check_decomposed(const Case& c, const std::vector<Tensor>& args, const Expected& e,
                      std::optional<ErrorKind> eager_error, int index,
                      const std::function<void(const std::string&)>& fail) {
  if (!c.decomposes || c.not_compiled) return;
  bool dynamic = index % 2 == 1;
  std::string how = std::string("decomposed (") + (dynamic ? "dynamic=true)" : "static)");
  // The cleanups after it are the default mode's: what a pipeline with decompose would run.
  test::ScopedEnv extra("EMBER_EXTRA_PASSES", "decompose,constant-fold,simplify,cse,dce");
  auto body = [&](const auto&... xs) -> std::vector<Tensor> {
    return invoke(c, std::vector<Tensor>{xs...});
  };
  auto f = compile(body, Options{.fullgraph = true, .dynamic = dynamic, .strict = true});
  std::vector<Tensor> y;
  try {
    y = call_spread(f, args);
  } catch (const Error& err) {
    if (eager_error && err.kind() == *eager_error) return;
    fail(how + " threw ember::Error(" + error_kind_name(err.kind()) + "): " + err.what());
    return;
  }
  if (eager_error) return fail(how + " returned a result where eager threw");
  if (e.error) return;  // eager's result was already reported as wrong
  if (y.size() != 1 + e.more.size())
    return fail(how + " returned " + std::to_string(y.size()) + " outputs");
  for (size_t k = 0; k < y.size(); ++k) {
    const ExpectedOutput want = k == 0 ? ExpectedOutput{e.dtype, e.out} : e.more[k - 1];
    for (const std::string& failure : check_output(y[k].array(), want.dtype, want.out, e))
      fail(how + " output " + std::to_string(k) + ": " + failure);
  }
  Report r = f.report();
  if (r.graph_count() != 1) return fail(how + " ran " + std::to_string(r.graph_count()) + " graphs");
  std::string left = undecomposed(r.graphs[0].ir);
  if (!left.empty()) fail(how + " left composites:" + left + "\n" + r.graphs[0].ir);
  if (!dynamic && r.graphs[0].ops.count(op_text(*c.decomposes)))
    fail(how + " kept '" + op_text(*c.decomposes) + "' with static shapes");
}

}  // namespace ember::sweep

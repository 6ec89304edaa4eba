// Minimising a failing case: fewer calls, outputs, steps, arguments and argument features, while
// the failure keeps its category.
#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/unit/fuzz_capture.h"

namespace ember::capture_fuzz {
namespace {

// Replaces Copy steps by their source; with `drop_dead`, also drops the steps no output needs
// (not always wanted: a dead step can be the one that raises).
void compact(Program& p, bool drop_dead) {
  int nt = p.first_step_tensor(), nn = p.num_args();
  std::vector<int> value_of(p.steps.size());  // the pool index of each step's value
  {
    int t = nt, n = nn;
    for (size_t k = 0; k < p.steps.size(); ++k) value_of[k] = p.steps[k].makes_num() ? n++ : t++;
  }
  std::map<int, int> alias;
  auto resolve = [&](int t) {
    while (alias.count(t)) t = alias[t];
    return t;
  };
  for (size_t k = 0; k < p.steps.size(); ++k) {
    Step& s = p.steps[k];
    for (int& t : s.t) t = resolve(t);
    if (s.kind == K::Copy) alias[value_of[k]] = s.t[0];
  }
  for (int& o : p.outputs) o = resolve(o);
  std::set<int> live_t(p.outputs.begin(), p.outputs.end()), live_n;
  std::vector<bool> keep(p.steps.size(), false);
  for (size_t k = p.steps.size(); k-- > 0;) {
    const Step& s = p.steps[k];
    if (s.kind == K::Copy) continue;
    bool live = s.makes_num() ? live_n.count(value_of[k]) > 0 : live_t.count(value_of[k]) > 0;
    if (!live && (drop_dead || s.kind == K::ConstNum)) continue;  // an unused constant never matters
    keep[k] = true;
    live_t.insert(s.t.begin(), s.t.end());
    live_n.insert(s.n.begin(), s.n.end());
  }
  std::map<int, int> new_t, new_n;
  for (int i = 0; i < nt; ++i) new_t[i] = i;
  for (int i = 0; i < nn; ++i) new_n[i] = i;
  std::vector<Step> steps;
  int t = nt, n = nn;
  for (size_t k = 0; k < p.steps.size(); ++k) {
    if (!keep[k]) continue;
    Step s = p.steps[k];
    for (int& i : s.t) i = new_t.at(i);
    for (int& i : s.n) i = new_n.at(i);
    if (s.makes_num()) new_n[value_of[k]] = n++;
    else new_t[value_of[k]] = t++;
    steps.push_back(s);
  }
  for (int& o : p.outputs) o = new_t.at(o);
  p.steps = steps;
}

// Removes tensor pool entry `index` (an argument or a captured tensor) when no step or output
// reads it; later entries move down.
bool drop_tensor_index(Program& p, int index) {
  for (const Step& s : p.steps)
    if (std::count(s.t.begin(), s.t.end(), index)) return false;
  if (std::count(p.outputs.begin(), p.outputs.end(), index)) return false;
  for (Step& s : p.steps)
    for (int& t : s.t) t -= t > index;
  for (int& o : p.outputs) o -= o > index;
  return true;
}

bool drop_num_index(Program& p, int index) {
  for (const Step& s : p.steps)
    if (std::count(s.n.begin(), s.n.end(), index)) return false;
  for (Step& s : p.steps)
    for (int& n : s.n) n -= n > index;
  return true;
}

// Removes argument position `slot` when nothing reads it.
bool drop_slot(Case& cs, size_t slot) {
  Program& p = cs.prog;
  if (p.sig.size() <= 1) return false;
  for (const CallSpec& c : cs.calls)
    for (const auto& a : c.args)
      if (auto* t = std::get_if<TensorSpec>(&a); t && t->source == TensorSpec::Alias && t->ref == static_cast<int>(slot))
        return false;
  int before = 0;
  for (size_t i = 0; i < slot; ++i) before += (p.sig[i] == Slot::Tensor) == (p.sig[slot] == Slot::Tensor);
  if (p.sig[slot] == Slot::Tensor ? !drop_tensor_index(p, before) : !drop_num_index(p, before)) return false;
  p.sig.erase(p.sig.begin() + static_cast<long>(slot));
  for (CallSpec& c : cs.calls) {
    c.args.erase(c.args.begin() + static_cast<long>(slot));
    for (auto& a : c.args)
      if (auto* t = std::get_if<TensorSpec>(&a); t && t->source == TensorSpec::Alias && t->ref > static_cast<int>(slot)) --t->ref;
  }
  return true;
}

bool drop_captured(Case& cs, size_t k) {
  Program& p = cs.prog;
  for (const CallSpec& c : cs.calls)
    for (const auto& a : c.args)
      if (auto* t = std::get_if<TensorSpec>(&a); t && t->source == TensorSpec::Captured && t->ref == static_cast<int>(k))
        return false;
  if (!drop_tensor_index(p, p.tensor_args() + static_cast<int>(k))) return false;
  p.captured.erase(p.captured.begin() + static_cast<long>(k));
  p.captured_specs.erase(p.captured_specs.begin() + static_cast<long>(k));
  for (CallSpec& c : cs.calls)
    for (auto& a : c.args)
      if (auto* t = std::get_if<TensorSpec>(&a); t && t->source == TensorSpec::Captured && t->ref > static_cast<int>(k)) --t->ref;
  return true;
}

// The steps that may replace step `s`: a copy of one of its operands, or for a number a
// constant.
std::vector<Step> replacements(const Step& s, const Program& p) {
  std::vector<Step> candidates;
  if (s.makes_num()) {
    for (Num v : {Num::f64(1.0), Num::i64(1), Num::boolean(true)}) {
      Step r;
      r.kind = K::ConstNum;
      r.c = {v};
      candidates.push_back(r);
    }
    return candidates;
  }
  std::set<int> seen;
  for (int t : s.t)
    if (seen.insert(t).second) {
      Step r;
      r.kind = K::Copy;
      r.t = {t};
      candidates.push_back(r);
    }
  if (s.t.empty() && p.first_step_tensor() > 0) {  // full({}, c) and the like: any value will do
    Step r;
    r.kind = K::Copy;
    r.t = {0};
    candidates.push_back(r);
  }
  return candidates;
}

bool distinct(const std::vector<int>& v) { return std::set<int>(v.begin(), v.end()).size() == v.size(); }

// Tries changes to a failing case one at a time, keeping each after which the case still fails
// with the same category. Each pass returns whether it kept a change.
class Minimizer {
 public:
  Minimizer(Case cs, std::optional<bool> dynamic, std::string category)
      : cs_(std::move(cs)), dynamic_(dynamic), category_(std::move(category)),
        distinct_outputs_(distinct(cs_.prog.outputs)) {}

  Case run() {
    drop_calls_after_failure();
    bool changed = true;
    for (int round = 0; changed && round < 8; ++round) {
      changed = drop_calls();  // every pass runs each round, whatever the passes before it did
      changed |= drop_outputs();
      changed |= drop_dead_steps();
      changed |= replace_steps();
      changed |= plain_arguments();
      changed |= default_recompile_limit();
      changed |= drop_unused_inputs();
    }
    return cs_;
  }

 private:
  bool attempt(const std::function<bool(Case&)>& change) {
    Case c = cs_;
    if (!change(c)) return false;
    // A smaller case must not gain a feature that is a bug of its own: the same output twice.
    if (distinct_outputs_ && !distinct(c.prog.outputs)) {
      std::vector<int> outs;
      for (int o : c.prog.outputs)
        if (!std::count(outs.begin(), outs.end(), o)) outs.push_back(o);
      c.prog.outputs = outs;
    }
    if (category_of(c, dynamic_) != category_) return false;
    cs_ = std::move(c);
    return true;
  }

  // The calls after the failing one.
  void drop_calls_after_failure() {
    for (size_t n = 1; n < cs_.calls.size(); ++n)
      if (attempt([&](Case& c) { c.calls.resize(n); return true; })) break;
  }

  bool drop_calls() {
    bool changed = false;
    for (size_t i = 0; i + 1 < cs_.calls.size();)
      if (attempt([&](Case& c) { c.calls.erase(c.calls.begin() + static_cast<long>(i)); return true; })) changed = true;
      else ++i;
    return changed;
  }

  bool drop_outputs() {
    bool changed = false;
    for (size_t i = 0; i < cs_.prog.outputs.size() && cs_.prog.outputs.size() > 1;)
      if (attempt([&](Case& c) { c.prog.outputs.erase(c.prog.outputs.begin() + static_cast<long>(i)); return true; }))
        changed = true;
      else ++i;
    return changed;
  }

  // All at once.
  bool drop_dead_steps() {
    return attempt([&](Case& c) {
      size_t n = c.prog.steps.size();
      compact(c.prog, true);
      return c.prog.steps.size() < n;
    });
  }

  // Each step by a copy of one of its operands (a number by a constant), last step first.
  bool replace_steps() {
    bool changed = false;
    for (size_t k = cs_.prog.steps.size(); k-- > 0;) {
      if (k >= cs_.prog.steps.size()) continue;
      const Step s = cs_.prog.steps[k];
      if (s.kind == K::Copy || s.kind == K::ConstNum) continue;
      for (const Step& r : replacements(s, cs_.prog))
        if (attempt([&](Case& c) { c.prog.steps[k] = r; compact(c.prog, false); return true; })) {
          changed = true;
          break;
        }
    }
    return changed;
  }

  // Arguments: no aliasing, no captured tensor passed (a fresh tensor with the same values
  // instead), plain layouts.
  bool plain_arguments() {
    bool changed = false;
    for (size_t i = 0; i < cs_.calls.size(); ++i)
      for (size_t a = 0; a < cs_.calls[i].args.size(); ++a)
        if (plain_argument(i, a)) changed = true;
    return changed;
  }

  bool plain_argument(size_t i, size_t a) {
    auto* t = std::get_if<TensorSpec>(&cs_.calls[i].args[a]);
    if (!t) return false;
    TensorSpec plain = *t;
    if (t->source == TensorSpec::Alias) plain = std::get<TensorSpec>(cs_.calls[i].args[static_cast<size_t>(t->ref)]);
    else if (t->source == TensorSpec::Captured) plain = cs_.prog.captured_specs[static_cast<size_t>(t->ref)];
    plain.source = TensorSpec::Fresh;
    plain.ref = -1;
    std::vector<int> layouts = {0};
    if (t->source != TensorSpec::Fresh && plain.layout != 0) layouts.push_back(plain.layout);
    if (t->source == TensorSpec::Fresh && t->layout == 0) return false;
    for (int layout : layouts) {
      plain.layout = layout;
      if (attempt([&](Case& c) { c.calls[i].args[a] = plain; return true; })) return true;
    }
    return false;
  }

  bool default_recompile_limit() {
    return cs_.prog.recompile_limit != 8 && attempt([](Case& c) { c.prog.recompile_limit = 8; return true; });
  }

  // Unused arguments and captured tensors.
  bool drop_unused_inputs() {
    bool changed = false;
    for (size_t slot = cs_.prog.sig.size(); slot-- > 0;)
      if (attempt([&](Case& c) { return drop_slot(c, slot); })) changed = true;
    for (size_t k = cs_.prog.captured.size(); k-- > 0;)
      if (attempt([&](Case& c) { return drop_captured(c, k); })) changed = true;
    return changed;
  }

  Case cs_;
  std::optional<bool> dynamic_;
  std::string category_;
  bool distinct_outputs_;  // the failing case returns no tensor twice
};

}  // namespace

Case minimize(Case cs, std::optional<bool> dynamic, const std::string& category) {
  return Minimizer(std::move(cs), dynamic, category).run();
}

}  // namespace ember::capture_fuzz

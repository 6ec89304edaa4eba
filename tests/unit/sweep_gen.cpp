// The op sweep's random inputs: values per domain, shapes, and strided views over larger storage.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "tests/unit/sweep.h"

namespace ember::sweep {
namespace {

constexpr int kNumLayouts = 6;
const char* layout_name(Layout l) {
  static const char* names[] = {"contiguous", "offset",   "transposed",
                                "stepped",    "expanded", "mixed"};
  return names[static_cast<int>(l)];
}

}  // namespace

Domain dom(double lo, double hi, int64_t ilo, int64_t ihi) {
  Domain d;
  d.lo = lo, d.hi = hi, d.ilo = ilo, d.ihi = ihi;
  return d;
}
Domain coarse() {
  Domain d = dom(-2, 2, -3, 3);
  d.quantum = 0.5;
  return d;
}
Domain nonzero(Domain d, double min_abs) {
  d.min_abs = min_abs;
  return d;
}

double Gen::value(DType dt, const Domain& d) {
  if (dt == DType::Bool) return d.min_abs > 0 ? 1 : coin() ? 1 : 0;
  if (ref::is_int(dt)) {
    int64_t lo = d.ilo, hi = d.ihi;
    if (dt != DType::Int64) {  // the bounds of narrower types are exact doubles
      lo = std::max<int64_t>(lo, static_cast<int64_t>(ref::int_min(dt)));
      hi = std::min<int64_t>(hi, static_cast<int64_t>(ref::int_max(dt)));
    }
    while (true) {
      int64_t v = integer(lo, hi);
      if (!(d.min_abs > 0 && v == 0)) return static_cast<double>(v);
    }
  }
  if (d.specials > 0 && coin(d.specials)) return pick<double>({ref::kNaN, ref::kInf, -ref::kInf});
  while (true) {
    double v = real(d.lo, d.hi);
    if (d.quantum > 0) v = std::round(v / d.quantum) * d.quantum + 0.0;
    v = ref::round_float(v, dt);
    if (std::fabs(v) >= d.min_abs && v >= d.lo && v <= d.hi) return v;
  }
}

Ref Gen::values(DType dt, const Ints& shape, const Domain& d) {
  Ref r{shape, {}};
  for (int64_t i = 0; i < ref::numel(shape); ++i) r.v.push_back(value(dt, d));
  return r;
}

Ints Gen::shape(int min_rank, int max_rank, int64_t max_dim) {
  Ints s(integer(min_rank, max_rank));
  for (int64_t& d : s) d = coin(0.2) ? 1 : integer(2, max_dim);
  return s;
}

Ints Gen::case_shape(int max_rank, int64_t max_dim) {
  if (index_ == 0) return {};
  Ints s = shape(1, max_rank, max_dim);
  if (index_ == 1) s[integer(0, static_cast<int64_t>(s.size()) - 1)] = 0;
  return s;
}

Ints Gen::broadcast_operand(const Ints& out) {
  Ints s = out;
  if (coin(0.3)) s.erase(s.begin(), s.begin() + integer(0, static_cast<int64_t>(s.size())));
  for (int64_t& d : s)
    if (coin(0.25)) d = 1;
  return s;
}

Layout Gen::next_layout() {
  return static_cast<Layout>((index_ + 2 * slot_++) % kNumLayouts);
}

Input Gen::input(DType dt, const Ints& shape, const Domain& d) {
  Layout layout = next_layout();
  std::vector<bool> expanded(shape.size(), false);
  if (layout == Layout::Expanded || layout == Layout::Mixed) {
    // One dim of size > 1 always; of two or more, one always stays whole, the rest 1 in 3.
    std::vector<size_t> candidates;
    for (size_t i = 0; i < shape.size(); ++i)
      if (shape[i] > 1) candidates.push_back(i);
    std::shuffle(candidates.begin(), candidates.end(), rng_);
    for (size_t k = 0; k < candidates.size(); ++k)
      expanded[candidates[k]] = k == 0 || (k + 1 < candidates.size() && coin(1.0 / 3));
  }
  Ints base = shape;
  for (size_t i = 0; i < shape.size(); ++i)
    if (expanded[i]) base[i] = 1;
  Ref r = ref::broadcast_to(values(dt, base, d), shape);
  return build(dt, std::move(r), layout, expanded, d);
}

Input Gen::input_of(DType dt, Ref r, const Domain& garbage) {
  Layout layout = next_layout();
  if (layout == Layout::Expanded) layout = Layout::Stepped;
  std::vector<bool> expanded(r.shape.size(), false);
  return build(dt, std::move(r), layout, expanded, garbage);
}

Input Gen::build(DType dt, Ref r, Layout layout, const std::vector<bool>& expanded,
                 const Domain& d) {
  const Ints shape = r.shape;  // a copy: r moves into the Input below
  size_t rank = shape.size();
  Ints perm(rank);
  std::iota(perm.begin(), perm.end(), 0);
  bool permuted = (layout == Layout::Transposed || layout == Layout::Mixed) && rank >= 2;
  if (permuted) {
    if (layout == Layout::Transposed)
      std::reverse(perm.begin(), perm.end());
    else
      while (std::is_sorted(perm.begin(), perm.end())) std::shuffle(perm.begin(), perm.end(), rng_);
  }
  Ints step(rank, 1);
  if ((layout == Layout::Stepped || layout == Layout::Mixed) && rank >= 1) {
    for (int64_t& s : step) s = coin(0.4) ? integer(2, 3) : 1;
    step[integer(0, static_cast<int64_t>(rank) - 1)] = integer(2, 3);
  }
  int64_t offset = (layout == Layout::Offset || layout == Layout::Mixed) ? integer(1, 9) : 0;
  // Physical dims are the logical ones in `perm` order, each `step` times larger.
  Ints phys(rank), pstride(rank), strides(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t dim = perm[i];
    phys[i] = expanded[dim] ? 1 : std::max<int64_t>(shape[dim], 1) * step[dim];
  }
  int64_t s = 1;
  for (size_t i = rank; i-- > 0;) {
    pstride[i] = s;
    s *= phys[i];
  }
  for (size_t i = 0; i < rank; ++i) {
    int64_t dim = perm[i];
    strides[dim] = expanded[dim] ? 0 : pstride[i] * step[dim];
  }
  int64_t count = offset + s + integer(0, 3);
  size_t item = itemsize(dt);
  Array base = Array::empty(dt, {count});  // the larger storage the view looks into
  Input in{dt, std::move(r), Tensor(), base.storage(), {}, ""};
  auto* bytes = static_cast<unsigned char*>(in.storage->data);
  for (int64_t i = 0; i < count; ++i) ref::encode(bytes + i * item, dt, value(dt, d));  // garbage
  for (int64_t i = 0; i < ref::numel(shape); ++i) {
    Ints idx = ref::unravel(i, shape);
    int64_t off = offset;
    for (size_t k = 0; k < rank; ++k) off += idx[k] * strides[k];
    ref::encode(bytes + off * item, dt, in.ref.v[i]);
  }
  in.tensor = Tensor(base.view(shape, strides, offset));
  in.snapshot.assign(bytes, bytes + count * item);
  in.desc = dname(dt) + ref::shape_text(shape) + " " + layout_name(layout) +
            " strides=" + ref::shape_text(strides) + " offset=" + std::to_string(offset);
  return in;
}

}  // namespace ember::sweep

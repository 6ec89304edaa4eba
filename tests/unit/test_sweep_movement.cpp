// The op sweep of views (reshape, permute, slice, ...) and data movement (concat, gather, ...).
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "frontend/ops.h"
#include "tests/catch.h"
#include "tests/unit/helpers.h"
#include "tests/unit/reference_movement.h"
#include "tests/unit/sweep.h"

namespace ember::sweep {
namespace {

// A random shape with `n` elements (n > 0), or with a zero dim when n == 0.
Ints shape_with_numel(Gen& g, int64_t n) {
  if (n == 0) {
    Ints s = g.shape(1, 3, 4);
    s[g.integer(0, static_cast<int64_t>(s.size()) - 1)] = 0;
    return s;
  }
  Ints factors;
  for (int64_t p = 2; n > 1; ++p)
    while (n % p == 0) factors.push_back(p), n /= p;
  Ints s(g.integer(factors.empty() ? 0 : 1, 4), 1);
  for (int64_t f : factors) {
    if (s.empty()) s.push_back(1);
    s[g.integer(0, static_cast<int64_t>(s.size()) - 1)] *= f;
  }
  return s;
}

DType index_dtype(Gen& g) {
  static const DType kinds[] = {DType::Int64, DType::Int32, DType::Int16, DType::Int8,
                                DType::UInt8};
  return kinds[g.index() % 5];
}

}  // namespace

Case view_case(Op op, DType dt, Gen& g) {
  Case c;
  Ints shape = g.case_shape();
  int64_t rank = static_cast<int64_t>(shape.size());
  auto axis_in = [&](int64_t r) {  // an axis of a rank-r tensor, sometimes negative
    int64_t a = g.integer(0, std::max<int64_t>(r, 1) - 1);
    return g.coin(0.3) ? a - std::max<int64_t>(r, 1) : a;
  };
  if (op == Op::Expand) {
    Ints src = shape;
    for (int64_t& d : src)
      if (g.coin(0.5)) d = 1;
    shape = src;
  }
  c.inputs.push_back(g.input(dt, shape, Domain()));
  Ref x = c.inputs[0].ref;
  c.shares_storage = op != Op::Reshape && op != Op::Flatten;
  switch (op) {
    case Op::Reshape: {
      Ints target = shape_with_numel(g, ref::numel(shape));
      Ints given = target;
      if (!given.empty() && ref::numel(target) > 0 && g.coin(0.4))
        given[g.integer(0, static_cast<int64_t>(given.size()) - 1)] = -1;
      c.note = "shape=" + ref::shape_text(given);
      c.call = [given](const std::vector<Tensor>& t) {
        return reshape(t[0], SymShape(given.begin(), given.end()));
      };
      c.expect = [=] { return result(dt, {target, x.v}); };
      break;
    }
    case Op::Permute: {
      Ints dims(rank);
      std::iota(dims.begin(), dims.end(), 0);
      std::shuffle(dims.begin(), dims.end(), g.rng());
      Ints given = dims;
      for (int64_t& d : given)
        if (g.coin(0.3)) d -= rank;
      c.note = "dims=" + ref::shape_text(given);
      c.call = [given](const std::vector<Tensor>& t) { return permute(t[0], given); };
      c.expect = [=] { return result(dt, ref::permute(x, dims)); };
      break;
    }
    case Op::Transpose: {
      int64_t a = axis_in(rank), b = axis_in(rank);
      c.note = "dim0=" + std::to_string(a) + " dim1=" + std::to_string(b);
      c.call = [a, b](const std::vector<Tensor>& t) { return transpose(t[0], a, b); };
      c.expect = [=] {
        Ints dims(rank);
        std::iota(dims.begin(), dims.end(), 0);
        if (rank) std::swap(dims[ref::norm_axis(a, rank)], dims[ref::norm_axis(b, rank)]);
        return result(dt, ref::permute(x, dims));
      };
      break;
    }
    case Op::Expand: {
      Ints target = g.shape(0, 2, 3);  // new leading dims
      Ints full = target;
      for (int64_t d : shape) {
        int64_t size = d == 1 ? g.pick<int64_t>({1, 2, 3, 4, 0}) : d;
        full.push_back(size);
        target.push_back(size == d && g.coin(0.3) ? -1 : size);
      }
      c.note = "shape=" + ref::shape_text(target);
      c.call = [target](const std::vector<Tensor>& t) {
        return expand(t[0], SymShape(target.begin(), target.end()));
      };
      c.expect = [=] { return result(dt, ref::broadcast_to(x, full)); };
      break;
    }
    case Op::Slice: {
      if (rank == 0) {
        c.note = "axis=0";
        c.call = [](const std::vector<Tensor>& t) { return slice(t[0], 0); };
        c.expect = [=] { return raises(ErrorKind::Value); };
        break;
      }
      int64_t axis = axis_in(rank), n = shape[ref::norm_axis(axis, rank)];
      int64_t start = g.integer(-n - 2, n + 2),
              end = g.coin(0.3) ? INT64_MAX : g.integer(-n - 2, n + 2);
      int64_t step = g.integer(1, 3);
      c.note = "axis=" + std::to_string(axis) + " start=" + std::to_string(start) +
               " end=" + (end == INT64_MAX ? std::string("max") : std::to_string(end)) +
               " step=" + std::to_string(step);
      c.call = [=](const std::vector<Tensor>& t) { return slice(t[0], axis, start, end, step); };
      c.expect = [=] {
        return result(dt, ref::slice(x, ref::norm_axis(axis, rank), start, end, step));
      };
      break;
    }
    case Op::Squeeze: {
      Ints axes;
      for (int64_t i = 0; i < rank; ++i)
        if (g.coin(0.4)) axes.push_back(g.coin() ? i : i - rank);
      c.note = "axes=" + ref::shape_text(axes);
      c.call = [axes](const std::vector<Tensor>& t) { return squeeze(t[0], axes); };
      c.expect = [=] {
        Ints out;
        for (int64_t i = 0; i < rank; ++i) {
          bool named = axes.empty();
          for (int64_t a : axes) named = named || ref::norm_axis(a, rank) == i;
          if (!(named && shape[i] == 1)) out.push_back(shape[i]);
        }
        return result(dt, {out, x.v});
      };
      break;
    }
    case Op::Unsqueeze: {
      int64_t axis = g.integer(-(rank + 1), rank);
      c.note = "axis=" + std::to_string(axis);
      c.call = [axis](const std::vector<Tensor>& t) { return unsqueeze(t[0], axis); };
      c.expect = [=] {
        Ints out = shape;
        out.insert(out.begin() + (axis < 0 ? axis + rank + 1 : axis), 1);
        return result(dt, {out, x.v});
      };
      break;
    }
    case Op::Flatten: {
      int64_t start = axis_in(rank), end = axis_in(rank);
      if (ref::norm_axis(start, rank) > ref::norm_axis(end, rank)) std::swap(start, end);
      c.note = "start=" + std::to_string(start) + " end=" + std::to_string(end);
      c.call = [start, end](const std::vector<Tensor>& t) { return flatten(t[0], start, end); };
      c.expect = [=] {
        if (rank == 0) return result(dt, {{1}, x.v});
        int64_t s = ref::norm_axis(start, rank), e = ref::norm_axis(end, rank);
        if (s > e) return raises(ErrorKind::Value);
        Ints out(shape.begin(), shape.begin() + s);
        out.push_back(ref::numel(Ints(shape.begin() + s, shape.begin() + e + 1)));
        out.insert(out.end(), shape.begin() + e + 1, shape.end());
        return result(dt, {out, x.v});
      };
      break;
    }
    default:
      unlisted(op, "view cases");
  }
  return c;
}

Case movement_case(Op op, DType dt, Gen& g) {
  Case c;
  Ints shape = g.case_shape();
  int64_t rank = static_cast<int64_t>(shape.size());
  switch (op) {
    case Op::Concat:
    case Op::Stack: {
      bool is_stack = op == Op::Stack;
      int64_t axis =
          is_stack ? g.integer(-(rank + 1), rank) : (rank ? g.integer(-rank, rank - 1) : 0);
      int64_t count = g.integer(1, 3);
      std::vector<Ref> refs;
      for (int64_t k = 0; k < count; ++k) {
        Ints s = shape;
        if (!is_stack && rank) s[ref::norm_axis(axis, rank)] = g.integer(0, 3);
        c.inputs.push_back(g.input(dt, s, Domain()));
        refs.push_back(c.inputs.back().ref);
      }
      c.note = "axis=" + std::to_string(axis) + " count=" + std::to_string(count);
      c.call = [=](const std::vector<Tensor>& t) {
        return is_stack ? stack(t, axis) : concat(t, axis);
      };
      c.expect = [=] {
        if (!is_stack && rank == 0) return raises(ErrorKind::Value);
        if (is_stack) return result(dt, ref::stack(refs, axis < 0 ? axis + rank + 1 : axis));
        return result(dt, ref::concat(refs, ref::norm_axis(axis, rank)));
      };
      return c;
    }
    case Op::Pad: {
      Ints pads;
      int64_t pairs = g.integer(0, rank);
      for (int64_t p = 0; p < pairs; ++p) {
        int64_t size = shape[rank - 1 - p];
        int64_t before = g.integer(-std::min<int64_t>(size, 2), 3);
        int64_t after = g.integer(-std::min<int64_t>(size + before, 2), 3);  // keeps the dim >= 0
        pads.push_back(before);
        pads.push_back(after);
      }
      double value = g.pick<double>({0.0, 1.0, -2.0, 2.5});
      c.inputs.push_back(g.input(dt, shape, Domain()));
      Ref x = c.inputs[0].ref;
      c.note = "pads=" + ref::shape_text(pads) + " value=" + num(value);
      c.call = [=](const std::vector<Tensor>& t) { return pad(t[0], pads, value); };
      c.expect = [=] { return result(dt, ref::pad(x, pads, ref::cast_value(value, dt))); };
      return c;
    }
    case Op::IndexSelect: {
      int64_t axis = rank ? g.integer(-rank, rank - 1) : 0;
      int64_t size = rank ? shape[ref::norm_axis(axis, rank)] : 1;
      bool zero_d_index = g.coin(0.2) && size > 0;
      Ints ishape = zero_d_index ? Ints{} : Ints{size == 0 ? 0 : rank == 0 ? 1 : g.integer(0, 5)};
      bool out_of_range = g.index() == kCases - 1 && size > 0;
      Ref idx{ishape, {}};
      for (int64_t i = 0; i < ref::numel(ishape); ++i)
        idx.v.push_back(static_cast<double>(g.integer(0, size - 1)));
      if (out_of_range && !idx.v.empty()) idx.v[0] = static_cast<double>(size);
      out_of_range = out_of_range && !idx.v.empty();
      DType it = index_dtype(g);
      c.inputs.push_back(g.input(dt, shape, Domain()));
      c.inputs.push_back(g.input_of(it, idx));
      Ref x = c.inputs[0].ref;
      c.note = "axis=" + std::to_string(axis);
      c.call = [axis](const std::vector<Tensor>& t) { return index_select(t[0], axis, t[1]); };
      c.expect = [=] {
        if (out_of_range) return raises(ErrorKind::Index);
        return result(dt, ref::index_select(x, ref::norm_axis(axis, rank), idx));
      };
      return c;
    }
    case Op::Gather: {
      int64_t axis = rank ? g.integer(-rank, rank - 1) : 0;
      int64_t na = rank ? ref::norm_axis(axis, rank) : 0;
      Ints ishape = shape;
      for (int64_t d = 0; d < rank; ++d)
        ishape[d] = d == na ? (shape[d] == 0 ? 0 : g.integer(0, 4)) : g.integer(0, shape[d]);
      if (g.index() > 1)  // only case 1 has zero-size dims
        for (int64_t& d : ishape) d = std::max<int64_t>(d, 1);
      Ref idx{ishape, {}};
      for (int64_t i = 0; i < ref::numel(ishape); ++i)
        idx.v.push_back(static_cast<double>(g.integer(0, rank ? shape[na] - 1 : 0)));
      c.inputs.push_back(g.input(dt, shape, Domain()));
      c.inputs.push_back(g.input_of(index_dtype(g), idx));
      Ref x = c.inputs[0].ref;
      c.note = "axis=" + std::to_string(axis);
      c.call = [axis](const std::vector<Tensor>& t) { return gather(t[0], axis, t[1]); };
      c.expect = [=] { return result(dt, ref::gather(x, na, idx)); };
      return c;
    }
    case Op::Embedding: {
      int64_t rows = g.integer(1, 6), dim = g.index() == 2 ? 0 : g.integer(1, 5);
      Ints ishape = g.case_shape(3);
      Ref idx{ishape, {}};
      for (int64_t i = 0; i < ref::numel(ishape); ++i)
        idx.v.push_back(static_cast<double>(g.integer(0, rows - 1)));
      c.inputs.push_back(g.input(dt, {rows, dim}, Domain()));
      c.inputs.push_back(g.input_of(index_dtype(g), idx));
      Ref w = c.inputs[0].ref;
      c.call = [](const std::vector<Tensor>& t) { return embedding(t[0], t[1]); };
      c.expect = [=] { return result(dt, ref::embedding(w, idx)); };
      return c;
    }
    // Without `accumulate` a duplicate index's winner is the last write, which eager leaves
    // undefined: those cases keep their targets apart. Values lie on a grid: every sum is exact.
    case Op::IndexPut: {
      if (rank == 0) shape = {g.integer(1, 4)}, rank = 1;
      int64_t axis = g.integer(-rank, rank - 1), na = ref::norm_axis(axis, rank);
      bool accumulate = g.coin(0.5);
      int64_t n = shape[na] == 0 ? 0 : g.integer(0, 5), shift = g.integer(0, 3);
      if (!accumulate) n = std::min(n, shape[na]);
      Ref idx{{n}, {}};
      for (int64_t i = 0; i < n; ++i)
        idx.v.push_back(static_cast<double>(accumulate ? g.integer(0, shape[na] - 1) : (i + shift) % shape[na]));
      Ints sshape = shape;
      sshape[na] = n;
      c.inputs.push_back(g.input(dt, shape, coarse()));
      c.inputs.push_back(g.input_of(index_dtype(g), idx));
      c.inputs.push_back(g.input(dt, sshape, coarse()));
      Ref x = c.inputs[0].ref, src = c.inputs[2].ref;
      c.note = "axis=" + std::to_string(axis) + (accumulate ? " accumulate" : "");
      c.call = [=](const std::vector<Tensor>& t) { return index_put(t[0], axis, t[1], t[2], accumulate); };
      c.expect = [=] { return result(dt, ref::index_put(x, na, idx, src, accumulate)); };
      return c;
    }
    case Op::Scatter: {
      int64_t axis = rank ? g.integer(-rank, rank - 1) : 0;
      int64_t na = rank ? ref::norm_axis(axis, rank) : 0;
      bool accumulate = g.coin(0.5);
      int64_t shift = g.integer(0, 3);
      Ints ishape = shape, sshape = shape;
      for (int64_t d = 0; d < rank; ++d) {
        ishape[d] = d == na ? (shape[d] == 0 ? 0 : g.integer(0, 4)) : g.integer(0, shape[d]);
        if (d == na && !accumulate) ishape[d] = std::min(ishape[d], shape[d]);
        sshape[d] = ishape[d] + g.integer(0, 1);
      }
      Ref idx{ishape, {}};
      for (int64_t i = 0; i < ref::numel(ishape); ++i) {
        int64_t along = rank ? ref::unravel(i, ishape)[na] : 0, size = rank ? shape[na] : 1;
        idx.v.push_back(static_cast<double>(accumulate ? g.integer(0, size - 1) : (along + shift) % size));
      }
      c.inputs.push_back(g.input(dt, shape, coarse()));
      c.inputs.push_back(g.input_of(index_dtype(g), idx));
      c.inputs.push_back(g.input(dt, sshape, coarse()));
      Ref x = c.inputs[0].ref, src = c.inputs[2].ref;
      c.note = "axis=" + std::to_string(axis) + (accumulate ? " accumulate" : "");
      c.call = [=](const std::vector<Tensor>& t) { return scatter(t[0], axis, t[1], t[2], accumulate); };
      c.expect = [=] { return result(dt, ref::scatter(x, na, idx, src, accumulate)); };
      return c;
    }
    case Op::Cumsum: {
      int64_t axis = rank ? g.integer(-rank, rank - 1) : g.integer(-1, 0);
      int64_t na = rank ? ref::norm_axis(axis, rank) : 0;
      c.inputs.push_back(g.input(dt, shape, coarse()));
      Ref x = c.inputs[0].ref;
      DType out = ref::is_float(dt) ? dt : DType::Int64;
      c.note = "axis=" + std::to_string(axis);
      c.call = [=](const std::vector<Tensor>& t) { return cumsum(t[0], axis); };
      c.expect = [=] { return result(out, ref::cumsum(x, na)); };
      return c;
    }
    default:
      unlisted(op, "movement cases");
  }
}

TEST_CASE("op sweep: views", "[sweep]") {
  sweep_family("view");
}
TEST_CASE("op sweep: movement", "[sweep]") {
  sweep_family("movement");
}

TEST_CASE("pad of a contiguous input copies rows to their place: the same as through strides", "[movement]") {
  // The row copy (contiguous input, no crop) against the general strided copy (every other
  // element of a wider input), over ranks 1 to 4, pads of fewer dims than the rank, and dtypes.
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{7}, {2, 3}}, {{3, 5}, {1, 0, 0, 2}}, {{2, 3, 4}, {0, 1}}, {{2, 4, 3, 3}, {0, 1, 0, 1}},
      {{2, 3, 5, 6}, {1, 1, 2, 2, 1, 0, 0, 1}}, {{40, 3, 2}, {1, 1, 1, 1}},
  };
  for (DType dt : {DType::Float32, DType::Float64, DType::Int8, DType::Float16}) {
    for (const auto& [shape, pads] : cases) {
      INFO(dtype_name(dt) << ", rank " << shape.size() << ", " << pads.size() / 2 << " padded dims");
      std::vector<int64_t> doubled = shape;
      doubled.back() *= 2;
      Tensor t = uniform(SymShape(doubled.begin(), doubled.end()), 1, -3.0, 3.0).to(dt);
      Tensor strided = slice(t, static_cast<int64_t>(shape.size()) - 1, 0, INT64_MAX, 2);  // `shape`, stride 2
      Tensor contiguous = pad(strided, {});  // a copy, contiguous
      REQUIRE(contiguous.dtype() == dt);
      CHECK(test::same_bits(pad(contiguous, pads, 0.5), pad(strided, pads, 0.5)));
    }
  }
}

}  // namespace ember::sweep

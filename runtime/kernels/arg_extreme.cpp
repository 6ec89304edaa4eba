// argmax, argmin, max_dim and min_dim: the position of each line's extreme, on typed loops over
// the threads.
//
// [Note: indexed reductions in two steps]
// The combiner (ir/reduction.h) keeps the first largest element, or the first NaN if there is
// one. Carrying an index beside each value in the loop keeps the compiler from vectorising it
// (two widths of lanes), so the value comes first and the index after: the extreme value of a
// stretch of the line, folded in W lanes with one type throughout, then the first position that
// holds it, a second reading of the stretch while it is in cache. A contiguous line goes in
// chunks, and a chunk is searched only when its extreme beats the chunks before it (rarely, on
// most data). When the line runs across memory (argmax over the channels of [N, C, H, W]), the
// lanes are W neighbouring lines instead, each lane a line of its own. A value beats another
// when it is strictly beyond it or is the first NaN over a number, so the answer is the
// combiner's exactly; several threads' parts of one line combine with combine_indexed, whose
// ties go to the smaller index.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "runtime/kernels/kernel.h"
#include "runtime/thread_pool.h"

namespace ember::kernels {

namespace {

constexpr int64_t kGrainElements = 1 << 15;  // elements a task reads, at least

// Whether v beats best: strictly beyond it, or the first NaN over a number.
template <bool Max, class T>
inline bool beats(T v, T best) {
  bool beyond = Max ? v > best : v < best;
  if constexpr (std::is_floating_point_v<T>) return beyond || (v != v && best == best);
  else return beyond;
}

// 16 bytes of T as one value (GCC's vector extension, the width of the baseline x86-64
// registers), so that the lanes' loops are vector code. Each loop keeps four of them, so that
// four selects are in flight at once.
template <class T>
struct Lanes {
  typedef T V __attribute__((vector_size(16)));
  static constexpr int64_t kCount = 16 / sizeof(T);
  static constexpr int64_t kQuad = 4 * kCount;
  struct Quad {
    V v[4];
  };
  static inline __attribute__((always_inline)) Quad load(const T* p) {
    Quad q;
    std::memcpy(&q, p, sizeof q);
    return q;
  }
  // beats(), lane by lane, for integers (floats: extreme_value).
  template <bool Max>
  static inline __attribute__((always_inline)) void keep_better(const Quad& x, Quad& best) {
    static_assert(!std::is_floating_point_v<T>);
    for (int i = 0; i < 4; ++i) best.v[i] = (Max ? x.v[i] > best.v[i] : x.v[i] < best.v[i]) ? x.v[i] : best.v[i];
  }
  static T lane(const Quad& q, int64_t k) { return q.v[k / kCount][k % kCount]; }
};

// The larger (Max) or smaller of v and b, lane by lane, b on a tie or where either is NaN: one
// maxps or minps (SSE, the baseline).
template <bool Max, class V>
inline __attribute__((always_inline)) V ordered_extreme(V v, V b) {
  if constexpr (sizeof(v[0]) == 4) return Max ? (V)_mm_max_ps((__m128)v, (__m128)b) : (V)_mm_min_ps((__m128)v, (__m128)b);
  else return Max ? (V)_mm_max_pd((__m128d)v, (__m128d)b) : (V)_mm_min_pd((__m128d)v, (__m128d)b);
}

// The extreme value of p[0, n), n > 0 (contiguous), folded in lanes. Floats fold with an
// ordered maxps, which passes over a NaN, and note a NaN apart, off the lanes' chains: a NaN's
// three compares on the chain made an argmax over rows of 8192 float32 a third slower than
// torch.compile's. Any NaN is the extreme then (first_equal finds the first).
template <bool Max, class T>
T extreme_value(const T* p, int64_t n) {
  using L = Lanes<T>;
  T m = p[0];
  int64_t j = 0;
  if (n >= 2 * L::kQuad) {
    typename L::Quad best = L::load(p);
    if constexpr (std::is_floating_point_v<T>) {
      // A NaN among the first quad's lanes stays in `best`: maxps keeps its second operand.
      decltype(best.v[0] != best.v[0]) nan{};
      for (j = L::kQuad; j + L::kQuad <= n; j += L::kQuad) {
        typename L::Quad x = L::load(p + j);
        for (int i = 0; i < 4; ++i) {
          nan |= x.v[i] != x.v[i];
          best.v[i] = ordered_extreme<Max>(x.v[i], best.v[i]);
        }
      }
      for (int64_t k = 0; k < L::kCount; ++k)
        if (nan[k]) return std::numeric_limits<T>::quiet_NaN();
    } else {
      for (j = L::kQuad; j + L::kQuad <= n; j += L::kQuad) L::template keep_better<Max>(L::load(p + j), best);
    }
    for (int64_t k = 0; k < L::kQuad; ++k) m = beats<Max>(L::lane(best, k), m) ? L::lane(best, k) : m;
  }
  for (; j < n; ++j) m = beats<Max>(p[j], m) ? p[j] : m;
  return m;
}

// Whether v is the extreme m: equal, or both NaN.
template <class T>
inline bool is_extreme(T v, T m) {
  return v == m || (v != v && m != m);
}

// The first j in [lo, hi) where p[j * stride] is `m` (a NaN matches a NaN).
template <class T>
int64_t first_equal(const T* p, int64_t lo, int64_t hi, int64_t stride, T m) {
  for (int64_t j = lo; j < hi; ++j)
    if (is_extreme(p[j * stride], m)) return j;
  return hi;  // not reached: m is one of the elements
}

// The extreme of p[lo], p[lo + s], ..., p[hi - s] (s = stride), positions counted from p: each
// chunk's extreme value, and where it first is only when it beats the chunks before it (so the
// first of equal extremes wins, and the second reading of the chunk is from the cache).
template <bool Max, class T>
Indexed<T> scan(const T* p, int64_t lo, int64_t hi, int64_t stride) {
  constexpr int64_t kChunk = 2048;
  Indexed<T> acc{p[lo * stride], lo};
  if (stride != 1) {
    for (int64_t j = lo + 1; j < hi; ++j)
      if (beats<Max>(p[j * stride], acc.value)) acc = {p[j * stride], j};
    return acc;
  }
  for (int64_t from = lo; from < hi; from += kChunk) {
    int64_t to = std::min(hi, from + kChunk);
    T m = extreme_value<Max>(p + from, to - from);
    if (beats<Max>(m, acc.value)) acc = {m, first_equal(p, from, to, 1, m)};
  }
  return acc;
}

// Lines side by side: line b (0 <= b < width) has its elements at p[b + j * stride], j < n.
// Writes each line's extreme position to at[b]. The lines go down the rows together (at most
// kAcross of them: 8 KiB of float32 per row, so the walk streams through memory nearly as a
// copy does, and the lanes stay in L1 and L2). For 4- and 8-byte elements each lane carries
// the index of its best beside it, in an integer lane of the same width, so one walk finds
// both; narrower elements take their extremes first and then a second walk for where each
// first is. Walking one quad of lines down all the rows, then again for the positions, visited
// a new page at every step: a max over dim 0 of [16384, 8192] took 538 ms on 2 threads
// (torch.compile 62 ms); now 53 ms (torch.compile 65 ms).
constexpr int64_t kAcross = 2048;

template <class T>
using IndexLane = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;

template <bool Max, class T>
void scan_across_indexed(const T* p, int64_t width, int64_t n, int64_t stride, int64_t* at) {
  using I = IndexLane<T>;
  typedef T V __attribute__((vector_size(16)));
  typedef I IV __attribute__((vector_size(16)));
  constexpr int64_t kCount = 16 / sizeof(T);
  std::vector<T> best_lanes(p, p + width);
  std::vector<I> index_lanes(width, 0);
  T* best = best_lanes.data();
  I* index = index_lanes.data();
  int64_t whole = width - width % kCount;
  for (int64_t j = 1; j < n; ++j) {
    const T* row = p + j * stride;
    IV jv = IV{} + static_cast<I>(j);
    for (int64_t k = 0; k < whole; k += kCount) {
      V v, b;
      IV ix;
      std::memcpy(&v, row + k, sizeof v);
      std::memcpy(&b, best + k, sizeof b);
      std::memcpy(&ix, index + k, sizeof ix);
      auto take = Max ? v > b : v < b;
      if constexpr (std::is_floating_point_v<T>) take = take | ((v != v) & (b == b));
      b = take ? v : b;
      ix = take ? jv : ix;
      std::memcpy(best + k, &b, sizeof b);
      std::memcpy(index + k, &ix, sizeof ix);
    }
    for (int64_t k = whole; k < width; ++k)
      if (beats<Max>(row[k], best[k])) best[k] = row[k], index[k] = static_cast<I>(j);
  }
  for (int64_t k = 0; k < width; ++k) at[k] = index[k];
}

template <bool Max, class T>
void scan_across(const T* p, int64_t width, int64_t n, int64_t stride, int64_t* at) {
  if constexpr (sizeof(T) == 4 || sizeof(T) == 8) {
    if (sizeof(T) == 8 || n <= INT32_MAX) return scan_across_indexed<Max>(p, width, n, stride, at);
  }
  std::vector<T> best(p, p + width);
  for (int64_t j = 1; j < n; ++j) {
    const T* row = p + j * stride;
    for (int64_t k = 0; k < width; ++k) best[k] = beats<Max>(row[k], best[k]) ? row[k] : best[k];
  }
  std::fill(at, at + width, -1);
  int64_t left = width;
  for (int64_t j = 0; j < n && left > 0; ++j) {
    const T* row = p + j * stride;
    for (int64_t k = 0; k < width; ++k) {
      if (at[k] < 0 && is_extreme(row[k], best[k])) {
        at[k] = j;
        --left;
      }
    }
  }
}

// The input as lines: `outer` (shape and strides over the kept dims) and the reduced line of n
// elements at `stride`. Every extreme's position goes to index[i] for the kept index i (row-major).
struct Lines {
  std::vector<int64_t> outer_shape, outer_strides;
  int64_t n = 1, stride = 0;
  int64_t count() const {
    int64_t c = 1;
    for (int64_t d : outer_shape) c *= d;
    return c;
  }
};

template <bool Max, class T>
void positions(const Array& x, const Lines& lines, int64_t* index) {
  const T* base = static_cast<const T*>(x.data());
  int64_t count = lines.count(), n = lines.n;
  if (count == 0 || n == 0) return;
  size_t rank = lines.outer_shape.size();
  // Neighbouring lines side by side when the last kept dim is contiguous and the line is not.
  if (rank > 0 && lines.outer_strides[rank - 1] == 1 && lines.stride != 1) {
    int64_t width = lines.outer_shape[rank - 1], groups = count / width;
    std::vector<int64_t> shape(lines.outer_shape.begin(), lines.outer_shape.end() - 1);
    std::vector<int64_t> strides(lines.outer_strides.begin(), lines.outer_strides.end() - 1);
    // Tasks are blocks of kAcross lines, so that a single group (a max over dim 0) is shared
    // among the threads too.
    int64_t blocks = (width + kAcross - 1) / kAcross;
    parallel_for(groups * blocks, std::max<int64_t>(1, kGrainElements / std::max<int64_t>(1, kAcross * n)),
                 [&](int64_t lo, int64_t hi) {
                   for (int64_t t = lo; t < hi; ++t) {
                     int64_t g = t / blocks, b0 = (t % blocks) * kAcross;
                     scan_across<Max>(base + strided_offset(g, shape, strides) + b0, std::min(kAcross, width - b0), n,
                                      lines.stride, index + g * width + b0);
                   }
                 });
    return;
  }
  // Otherwise line by line; a few long lines are cut into parts that combine afterwards.
  int64_t parts = count >= 2 * num_threads() ? 1 : std::clamp<int64_t>(n / kGrainElements, 1, 4 * num_threads());
  int64_t span = (n + parts - 1) / parts;
  std::vector<Indexed<T>> partial(count * parts);
  parallel_for(count * parts, std::max<int64_t>(1, kGrainElements / std::max<int64_t>(1, span)), [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      int64_t i = t / parts, from = (t % parts) * span;
      const T* p = base + strided_offset(i, lines.outer_shape, lines.outer_strides);
      if (from < n) partial[t] = scan<Max>(p, from, std::min(n, from + span), lines.stride);
      else partial[t] = {p[0], 0};  // an empty part: the line's first element, never ahead of it
    }
  });
  constexpr Combiner c = Max ? Combiner::ArgMax : Combiner::ArgMin;
  for (int64_t i = 0; i < count; ++i) {
    Indexed<T> acc = partial[i * parts];
    for (int64_t k = 1; k < parts; ++k) acc = combine_indexed(c, acc, partial[i * parts + k]);
    index[i] = acc.index;
  }
}

template <bool Max>
void positions_of(const Array& x, const Lines& lines, int64_t* index) {
  switch (x.dtype()) {
    case DType::Bool: case DType::UInt8: return positions<Max, uint8_t>(x, lines, index);
    case DType::Int8: return positions<Max, int8_t>(x, lines, index);
    case DType::Int16: return positions<Max, int16_t>(x, lines, index);
    case DType::Int32: return positions<Max, int32_t>(x, lines, index);
    case DType::Int64: return positions<Max, int64_t>(x, lines, index);
    case DType::Float32: return positions<Max, float>(x, lines, index);
    case DType::Float64: return positions<Max, double>(x, lines, index);
    case DType::Float16: case DType::BFloat16: break;  // see comparable()
  }
  EMBER_CHECK(false, "no extreme of ", dtype_name(x.dtype()), " without a float32 copy");
}

// x, or for float16 and bfloat16 a float32 copy (exact), which the loops compare in.
Array comparable(const Array& x) {
  return x.dtype() == DType::Float16 || x.dtype() == DType::BFloat16 ? to_contiguous(x, DType::Float32) : x;
}

bool is_max(Op op) { return op == Op::ArgMax || op == Op::MaxDim; }

void find_positions(Op op, const Array& x, const Lines& lines, int64_t* index) {
  if (is_max(op)) positions_of<true>(x, lines, index);
  else positions_of<false>(x, lines, index);
}

// One reduced axis (a 0-d input is one line of one element).
Lines lines_along(const Array& x, int64_t axis) {
  Lines l{x.shape(), x.strides(), 1, 0};
  if (x.rank() == 0) return l;
  l.n = x.shape()[axis], l.stride = x.strides()[axis];
  l.outer_shape.erase(l.outer_shape.begin() + axis);
  l.outer_strides.erase(l.outer_strides.begin() + axis);
  return l;
}

// argmax / argmin over `axes` (all of them when empty): the row-major position within the
// reduced dims. Several reduced dims are moved last, in a contiguous copy, and make one line.
Array arg_extreme(const Call& call) {
  Array x = comparable(call.inputs[0]);
  int64_t rank = x.rank();
  std::vector<int64_t> axes = normalize_axes(op_name(call.op), attr_ints(call.attrs, "axes"), rank);
  if (axes.empty())
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  std::sort(axes.begin(), axes.end());
  Array out = output(call);
  if (axes.size() <= 1) {
    find_positions(call.op, x, lines_along(x, axes.empty() ? 0 : axes[0]), out.data_as<int64_t>());
    return out;
  }
  std::vector<int64_t> shape, strides;
  for (int64_t i = 0; i < rank; ++i)
    if (!std::binary_search(axes.begin(), axes.end(), i)) shape.push_back(x.shape()[i]), strides.push_back(x.strides()[i]);
  Lines lines{shape, {}, 1, 1};
  for (int64_t a : axes) shape.push_back(x.shape()[a]), strides.push_back(x.strides()[a]), lines.n *= x.shape()[a];
  Array moved = x.view(shape, strides, x.offset()).contiguous();
  lines.outer_strides = Array::contiguous_strides(lines.outer_shape);
  for (int64_t& s : lines.outer_strides) s *= lines.n;
  find_positions(call.op, moved, lines, out.data_as<int64_t>());
  return out;
}

// (values, indices) of max_dim / min_dim along one axis.
std::vector<Array> extreme_along(const Call& call) {
  const Array& x = call.inputs[0];
  int64_t axis = x.rank() == 0 ? 0 : normalize_axis(op_name(call.op), attr_int(call.attrs, "axis"), x.rank());
  Lines lines = lines_along(x, axis);
  Array values = output(call, 0);
  Array indices = output(call, 1);
  int64_t* index = indices.data_as<int64_t>();
  Array cx = comparable(x);
  find_positions(call.op, cx, lines_along(cx, axis), index);
  size_t size = itemsize(x.dtype());
  for (int64_t i = 0, count = lines.count(); i < count; ++i) {
    int64_t at = strided_offset(i, lines.outer_shape, lines.outer_strides) + index[i] * lines.stride;
    std::memcpy(byte_ptr(values, i), byte_ptr(x, at), size);
  }
  return {values, indices};
}

}  // namespace

void register_arg_extremes(KernelTable& t) {
  t[static_cast<size_t>(Op::ArgMax)] = arg_extreme;
  t[static_cast<size_t>(Op::ArgMin)] = arg_extreme;
}

void register_multi_arg_extremes(MultiKernelTable& t) {
  t[static_cast<size_t>(Op::MaxDim)] = extreme_along;
  t[static_cast<size_t>(Op::MinDim)] = extreme_along;
}

}  // namespace ember::kernels

#include "codegen/cpu/gemm.h"

// GCC 12's intrinsics start some results from a deliberately uninitialised value (`__Y = __Y`),
// and inlined here they warn of it.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "codegen/cpu/cpu_kernel.h"
#include "codegen/cpu/mlir_text.h"
#include "ir/error.h"
#include "ir/symbolic.h"
#include "runtime/allocator.h"
#include "runtime/config.h"
#include "runtime/kernels/kernel.h"
#include "runtime/thread_pool.h"

namespace ember::codegen::cpu {

std::string GemmTiling::code_str() const {
  return "mr=" + std::to_string(mr) + " nr=" + std::to_string(nr) + " unroll=" + std::to_string(unroll);
}

GemmTiling GemmTiling::with_tile(const GemmTile& tile) {
  GemmTiling t;
  if (!tile.is_default()) t.mr = tile.rows, t.nr = tile.cols;
  return t;
}

void GemmTiling::check() const {
  if (!GemmTile{mr, nr}.valid() || unroll < 1 || unroll > 16 || kc < 1 || mc < 1 || nc < 1)
    EMBER_THROW(Value, "a GEMM tiling needs 1 <= mr, nr a multiple of 16, 2 to 32 accumulators (mr * nr / 16), ",
                "1 <= unroll <= 16, positive blocks; got ", code_str(), " kc=", kc, " mc=", mc, " nc=", nc);
}

namespace {

constexpr int kLanes = 16;  // float32 lanes of a 512-bit register

// The tile's MLIR, one statement at a time.
class TileWriter {
 public:
  TileWriter(const GemmTiling& t, const std::string& name) : t_(t), name_(name), vectors_(t.nr / kLanes) {}

  std::string write() {
    m_.open("func.func @" + name_ + "(%depth: i64, %a: !llvm.ptr, %b: !llvm.ptr, %ldb: i64, %c: !llvm.ptr, %ldc: i64, " +
            "%accumulate: i64) {");
    zero_ = m_.int_constant(0, i64());
    // The accumulators start at zero and C's tile is added once, after the depth: a slice of kc
    // is one chain of sums, and a depth of many slices adds each slice's sum to C, as blocked BLAS
    // does. Started from C, a product was one chain over its whole depth, with 3.7x the float32
    // error of PyTorch's at a depth of 4096, and 6.9x at 16384.
    std::vector<Val> acc(count(), m_.let("arith.constant dense<0.000000e+00> : " + vec().str(), vec()));
    // Whole groups of `unroll` steps, then the steps left one at a time.
    Val unroll = m_.int_constant(t_.unroll, i64());
    Val left = m_.binary("arith.remsi", Val{"%depth", i64()}, unroll);
    Val whole = m_.binary("arith.subi", Val{"%depth", i64()}, left);
    acc = depth_loop(acc, zero_.name, whole.name, unroll, t_.unroll);
    acc = depth_loop(acc, whole.name, "%depth", m_.int_constant(1, i64()), 1);
    acc = added_to_c(acc);
    for (int r = 0; r < t_.mr; ++r)
      for (int v = 0; v < vectors_; ++v)
        m_.line("llvm.store " + acc[r * vectors_ + v].name + ", " + c_at(r, v).name +
                " {alignment = 4 : i64} : " + vec().str() + ", !llvm.ptr");
    m_.line("return");
    m_.close();
    return "module {\n" + m_.text() + "}\n";
  }

 private:
  static Ty i64() { return {"i64", 0}; }
  static Ty ptr() { return {"!llvm.ptr", 0}; }
  static Ty vec() { return {"f32", kLanes}; }
  int count() const { return t_.mr * vectors_; }

  std::string types() const {
    std::string s;
    for (int i = 0; i < count(); ++i) s += (i ? ", " : "") + vec().str();
    return s;
  }
  static std::string names(const std::vector<Val>& vals) {
    std::string s;
    for (size_t i = 0; i < vals.size(); ++i) s += (i ? ", " : "") + vals[i].name;
    return s;
  }
  // The results %name#0 .. of an op that yields the accumulators.
  std::vector<Val> results(const std::string& name) const {
    std::vector<Val> out;
    for (int i = 0; i < count(); ++i) out.push_back({name + "#" + std::to_string(i), vec()});
    return out;
  }

  Val gep(const std::string& base, const std::string& index) {
    return m_.let("llvm.getelementptr " + base + "[" + index + "] : (!llvm.ptr, i64) -> !llvm.ptr, f32", ptr());
  }
  Val gep(const std::string& base, int64_t index) {
    return m_.let("llvm.getelementptr " + base + "[" + std::to_string(index) + "] : (!llvm.ptr) -> !llvm.ptr, f32", ptr());
  }
  // Where vector v of row r of C starts.
  Val c_at(int r, int v) {
    Val row = m_.binary("arith.muli", m_.int_constant(r, i64()), Val{"%ldc", i64()});
    return gep(gep("%c", row.name).name, int64_t{v} * kLanes);
  }

  // The accumulators plus C's tile where the call accumulates, else the accumulators.
  std::vector<Val> added_to_c(const std::vector<Val>& acc) {
    Val flag = m_.cmp("arith.cmpi", "ne", Val{"%accumulate", i64()}, zero_);
    std::string name = m_.fresh();
    m_.line(name + ":" + std::to_string(count()) + " = scf.if " + flag.name + " -> (" + types() + ") {");
    m_.indent_more();
    std::vector<Val> sums;
    for (int r = 0; r < t_.mr; ++r)
      for (int v = 0; v < vectors_; ++v) {
        Val loaded =
            m_.let("llvm.load " + c_at(r, v).name + " {alignment = 4 : i64} : !llvm.ptr -> " + vec().str(), vec());
        sums.push_back(m_.binary("arith.addf", loaded, acc[r * vectors_ + v]));
      }
    m_.line("scf.yield " + names(sums) + " : " + types());
    m_.middle("} else {");
    m_.line("scf.yield " + names(acc) + " : " + types());
    m_.close();
    return results(name);
  }

  // The accumulators after the depth steps [from, to), `steps` of them per iteration.
  std::vector<Val> depth_loop(const std::vector<Val>& acc, const std::string& from, const std::string& to,
                              const Val& stride, int steps) {
    std::string name = m_.fresh();
    std::string args;
    std::vector<Val> carried;
    for (int i = 0; i < count(); ++i) {
      carried.push_back({"%acc" + name.substr(1) + "_" + std::to_string(i), vec()});
      args += (i ? ", " : "") + carried.back().name + " = " + acc[i].name;
    }
    m_.line(name + ":" + std::to_string(count()) + " = scf.for %p" + name.substr(1) + " = " + from + " to " + to +
            " step " + stride.name + " iter_args(" + args + ") -> (" + types() + ") : i64 {");
    m_.indent_more();
    Val p{"%p" + name.substr(1), i64()};
    for (int s = 0; s < steps; ++s) carried = step(carried, s ? m_.binary("arith.addi", p, m_.int_constant(s, i64())) : p);
    m_.line("scf.yield " + names(carried) + " : " + types());
    m_.close();
    return results(name);
  }

  // One depth step p: acc[r][v] += a[p * mr + r] * b[p * ldb + 16 v .. +16].
  std::vector<Val> step(std::vector<Val> acc, const Val& p) {
    Val a_row = gep("%a", m_.binary("arith.muli", p, m_.int_constant(t_.mr, i64())).name);
    Val b_row = gep("%b", m_.binary("arith.muli", p, Val{"%ldb", i64()}).name);
    std::vector<Val> b;
    for (int v = 0; v < vectors_; ++v)
      b.push_back(m_.let("llvm.load " + gep(b_row.name, int64_t{v} * kLanes).name + " {alignment = 4 : i64} : !llvm.ptr -> " +
                         vec().str(), vec()));
    for (int r = 0; r < t_.mr; ++r) {
      Val scalar = m_.let("llvm.load " + gep(a_row.name, r).name + " : !llvm.ptr -> f32", {"f32", 0});
      Val splat = m_.let("vector.broadcast " + scalar.name + " : f32 to " + vec().str(), vec());
      for (int v = 0; v < vectors_; ++v) {
        Val& x = acc[r * vectors_ + v];
        x = m_.let("vector.fma " + splat.name + ", " + b[v].name + ", " + x.name + " : " + vec().str(), vec());
      }
    }
    return acc;
  }

  const GemmTiling& t_;
  std::string name_;
  int vectors_;
  MlirText m_;
  Val zero_;
};

// Float storage (ember's allocator: 64-byte aligned) that a thread keeps from call to call: the
// packing buffers.
struct Panels {
  float* data = nullptr;
  size_t floats = 0;
  Panels() = default;
  Panels(const Panels&) = delete;
  Panels& operator=(const Panels&) = delete;
  ~Panels() {
    if (data) release(data, floats * sizeof(float));
  }
  float* at_least(size_t n) {
    if (n > floats) {
      float* fresh = static_cast<float*>(allocate(n * sizeof(float)));  // throws, the old block kept
      if (data) release(data, floats * sizeof(float));
      data = fresh, floats = n;
    }
    return data;
  }
};

int64_t round_up(int64_t x, int64_t multiple) { return ceil_div(x, multiple) * multiple; }

// op(X)[i][p] of a row-major X with leading dimension ld, read transposed when `trans`.
inline float element(const float* x, int64_t ld, bool trans, int64_t i, int64_t p) {
  return trans ? x[p * ld + i] : x[i * ld + p];
}

// dst[i * ld_dst + j] = src[j * ld_src + i] for i, j < 16, in 64 shuffles (AVX-512).
__attribute__((target("avx512f"))) void transpose16(const float* src, int64_t ld_src, float* dst, int64_t ld_dst) {
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * ld_src);
  for (int i = 0; i < 8; ++i) {  // pairs of rows interleaved by element
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {  // then by pairs of elements
    r[4 * i + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[4 * i + 0]), _mm512_castps_pd(t[4 * i + 2])));
    r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[4 * i + 0]), _mm512_castps_pd(t[4 * i + 2])));
    r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[4 * i + 1]), _mm512_castps_pd(t[4 * i + 3])));
    r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[4 * i + 1]), _mm512_castps_pd(t[4 * i + 3])));
  }
  for (int i = 0; i < 2; ++i)  // then by 128-bit lanes, four rows apart
    for (int j = 0; j < 4; ++j) {
      t[8 * i + j] = _mm512_shuffle_f32x4(r[8 * i + j], r[8 * i + j + 4], 0x88);
      t[8 * i + j + 4] = _mm512_shuffle_f32x4(r[8 * i + j], r[8 * i + j + 4], 0xdd);
    }
  for (int j = 0; j < 8; ++j) {  // and eight rows apart
    r[j] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0x88);
    r[j + 8] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0xdd);
  }
  for (int i = 0; i < 16; ++i) _mm512_storeu_ps(dst + i * ld_dst, r[i]);
}

// B's columns [col, col + width) over the depth [depth, depth + kc), in panels of nr columns
// ([Note: ember's own GEMM]): panel q at packed + q * kc * nr.
void pack_b(const float* b, int64_t ldb, bool trans_b, int64_t depth, int64_t kc, int64_t col, int64_t width, int nr,
            float* packed) {
  const int64_t panels = ceil_div(width, nr);
  parallel_for(panels, std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(kc * nr, 1)), [&](int64_t lo, int64_t hi) {
    for (int64_t q = lo; q < hi; ++q) {
      float* out = packed + q * kc * nr;
      const int64_t first = col + q * nr, cols = std::min<int64_t>(nr, col + width - first);
      if (!trans_b) {
        for (int64_t p = 0; p < kc; ++p) {
          std::memcpy(out + p * nr, b + (depth + p) * ldb + first, cols * sizeof(float));
          std::fill(out + p * nr + cols, out + (p + 1) * nr, 0.0f);
        }
        continue;
      }
      if (cols < nr) std::fill(out, out + kc * nr, 0.0f);
      // B is stored transposed: column j of op(B) is a row of it. Squares of 16 columns by 16
      // depth steps, transposed in registers: element by element, the packing took 4-5 ms of a
      // 28 ms GEMM (256 x 4096 x 1024, a linear layer's weight, one thread).
      static const bool avx512 = __builtin_cpu_supports("avx512f");
      for (int64_t j0 = 0; j0 < cols; j0 += 16) {  // along 16 rows of the stored B at a time
        for (int64_t p0 = 0; p0 < kc; p0 += 16) {
          const int64_t steps = std::min<int64_t>(16, kc - p0);
          const float* src = b + (first + j0) * ldb + depth + p0;
          if (avx512 && steps == 16 && j0 + 16 <= cols) {
            transpose16(src, ldb, out + p0 * nr + j0, nr);
            continue;
          }
          for (int64_t j = 0; j < std::min<int64_t>(16, cols - j0); ++j)
            for (int64_t p = 0; p < steps; ++p) out[(p0 + p) * nr + j0 + j] = src[j * ldb + p];
        }
      }
    }
  });
}

// A's rows [row, row + rows) over the depth [depth, depth + kc), in panels of mr rows.
void pack_a(const float* a, int64_t lda, bool trans_a, int64_t row, int64_t rows, int64_t depth, int64_t kc, int mr,
            float* packed) {
  for (int64_t i = 0; i < rows; i += mr) {
    float* out = packed + i * kc;
    const int64_t live = std::min<int64_t>(mr, rows - i);
    for (int64_t p = 0; p < kc; ++p, out += mr) {
      for (int64_t r = 0; r < live; ++r) out[r] = element(a, lda, trans_a, row + i + r, depth + p);
      for (int64_t r = live; r < mr; ++r) out[r] = 0.0f;
    }
  }
}

// One tile of C at `c`: whole, or `rows` x `cols` of it at C's edge through a buffer.
void run_tile(GemmTileFn tile, const GemmTiling& t, int64_t depth, const float* a, const float* b, int64_t ldb,
              float* c, int64_t ldc, bool accumulate, int64_t rows, int64_t cols) {
  if (rows == t.mr && cols == t.nr) return tile(depth, a, b, ldb, c, ldc, accumulate);
  alignas(64) float edge[32 * 16];  // at most 32 accumulators of 16 lanes (GemmTiling::check)
  if (accumulate)
    for (int64_t r = 0; r < rows; ++r) std::memcpy(edge + r * t.nr, c + r * ldc, cols * sizeof(float));
  tile(depth, a, b, ldb, edge, t.nr, accumulate);
  for (int64_t r = 0; r < rows; ++r) std::memcpy(c + r * ldc, edge + r * t.nr, cols * sizeof(float));
}

}  // namespace

std::string emit_gemm_tile(const GemmTiling& tiling, const std::string& name) {
  tiling.check();
  return TileWriter(tiling, name).write();
}

GemmTileFn gemm_tile(const GemmTiling& tiling) {
  // A GEMM of a few microseconds asks for its tile on every call: each thread keeps the ones it
  // asked for, without the text key and the lock of jit_function.
  thread_local std::unordered_map<int64_t, GemmTileFn> known;
  const int64_t id = (int64_t{tiling.mr} << 32) | (int64_t{tiling.nr} << 8) | tiling.unroll;
  if (auto it = known.find(id); it != known.end()) return it->second;
  tiling.check();
  // The tile's own version, in its cache key beside the code generator's: bumped whenever its
  // emitted code or signature changes (an object of the old signature would crash).
  constexpr const char* kTileVersion = "tile-3";
  const std::string what = std::string("gemm ") + kTileVersion + " f32 " + tiling.code_str();
  const std::string name = "ember_gemm_tile_" + std::to_string(tiling.mr) + "x" + std::to_string(tiling.nr) + "u" +
                           std::to_string(tiling.unroll);
  GemmTileFn fn = reinterpret_cast<GemmTileFn>(jit_function(what, name, [&] { return emit_gemm_tile(tiling, name); }));
  known.emplace(id, fn);
  return fn;
}

void generated_gemm(const GemmTiling& t, const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k,
                    bool trans_a, bool trans_b, float beta, int64_t lda, int64_t ldb, int64_t ldc,
                    const GemmPieceDone& done) {
  if (m == 0 || n == 0) return;
  GemmTileFn tile = gemm_tile(t);  // first: a tile that fails to compile leaves C as it was
  if (beta != 0.0f && beta != 1.0f)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] *= beta;
  if (k == 0) {  // an empty sum
    if (beta == 0.0f)
      for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
    if (done) done(0, m, 0, n);
    return;
  }
  // Row blocks: as many as mc gives, rounded up to a multiple of the threads and then evened
  // out, so that no thread waits on another's extra block (200 rows on 2 threads: 6 of 36, not 5
  // of 48). Where they are fewer than the threads, each column block is split into groups too.
  const int64_t threads = num_threads();
  int64_t row_blocks = ceil_div(m, t.mc);
  if (row_blocks > 1 && threads > 1) row_blocks = round_up(row_blocks, threads);
  const int64_t mc = round_up((m + row_blocks - 1) / row_blocks, t.mr);
  row_blocks = ceil_div(m, mc);
  const int64_t nc = round_up(t.nc, t.nr);
  const bool in_place = !trans_b && m < t.in_place_rows;  // B's whole panels read where they lie
  thread_local Panels packed_b;  // the caller's: every thread reads it
  for (int64_t col0 = 0; col0 < n; col0 += nc) {
    const int64_t width = std::min(nc, n - col0);
    const int64_t splits = std::max<int64_t>(1, threads / row_blocks);
    const int64_t group = round_up(ceil_div(width, splits), t.nr), groups = ceil_div(width, group);
    for (int64_t depth = 0; depth < k; depth += t.kc) {
      const int64_t kc = std::min(t.kc, k - depth);
      // B's panels: packed, or where B lies (rows ldb apart) but for a last panel cut by n.
      const int64_t packed_from = in_place ? width / t.nr * t.nr : 0;
      float* bp = packed_b.at_least(static_cast<size_t>(round_up(width - packed_from, t.nr) * kc));
      if (packed_from < width) pack_b(b, ldb, trans_b, depth, kc, col0 + packed_from, width - packed_from, t.nr, bp);
      auto b_panel = [&](int64_t j) -> std::pair<const float*, int64_t> {
        if (j < packed_from) return {b + depth * ldb + col0 + j, ldb};
        return {bp + (j - packed_from) * kc, t.nr};
      };
      const bool accumulate = depth > 0 || beta != 0.0f, last = depth + kc == k;
      // One even share of the blocks per thread: claimed in chunks of several blocks, 22 blocks
      // went 12 to one thread and 10 to the other, and the region waited on the last chunk.
      const int64_t tasks = row_blocks * groups, shares = std::min(threads, tasks);
      parallel_for(shares, 1, [&](int64_t first_share, int64_t end_share) {
        thread_local Panels packed_a;
        for (int64_t task = first_share * tasks / shares; task < end_share * tasks / shares; ++task) {
          const int64_t row = task / groups * mc, rows = std::min(mc, m - row);
          const int64_t first = task % groups * group, cols = std::min(group, width - first);
          float* ap = packed_a.at_least(static_cast<size_t>(round_up(rows, t.mr) * kc));
          pack_a(a, lda, trans_a, row, rows, depth, kc, t.mr, ap);
          for (int64_t j = first; j < first + cols; j += t.nr) {
            const int64_t live = std::min<int64_t>(t.nr, first + cols - j);
            const auto [panel, step] = b_panel(j);
            for (int64_t i = 0; i < rows; i += t.mr)
              run_tile(tile, t, kc, ap + i * kc, panel, step, c + (row + i) * ldc + col0 + j, ldc, accumulate,
                       std::min<int64_t>(t.mr, rows - i), live);
            if (done && last) done(row, rows, col0 + j, live);
          }
        }
      });
    }
  }
}

namespace {

// GemmRoute::Generated's GEMM (runtime/kernels/kernel.h), installed when the library loads. A tile
// that fails to compile leaves the route to OpenBLAS, with one warning.
bool own_gemm(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b,
              float beta, int64_t lda, int64_t ldb, int64_t ldc) {
  try {
    generated_gemm(GemmTiling::with_tile(current_step_settings().tile), a, b, c, m, n, k, trans_a, trans_b, beta, lda,
                   ldb, ldc);
    return true;
  } catch (const CodegenError& e) {
    static std::once_flag warned;
    std::call_once(warned, [&] { config::warn(std::string("ember's own GEMM is unavailable; OpenBLAS runs it: ") + e.what()); });
    return false;
  }
}

const bool installed = [] {
  if (jit_available()) kernels::set_own_gemm(own_gemm);
  return true;
}();

}  // namespace

}  // namespace ember::codegen::cpu

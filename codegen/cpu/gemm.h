// ember's own float32 GEMM: a register tile generated through MLIR, and the blocking and packing
// around it in C++.
//
// [Note: ember's own GEMM]
// C = op(A) op(B) + beta C is computed by tiles of mr rows and nr columns (nr a multiple of 16,
// one AVX-512 register of float32). The tile is an MLIR function (emit_gemm_tile): mr x nr/16
// accumulators held in registers across the whole depth kc, each step of the depth loading nr/16
// vectors of B and broadcasting mr scalars of A into fused multiply-adds; the depth loop is
// unrolled by hand (the JIT's LLVM pipeline does not unroll). The tile reads packed panels, so it
// never sees strides, transposes or edges:
//   A's panel of mr rows:    a[p * mr + r]  = op(A)[row + r][depth + p]   (rows past m are 0)
//   B's panel of nr columns: b[p * nr + j]  = op(B)[depth + p][col + j]   (columns past n are 0)
// The driver (generated_gemm) packs all of op(B) once per call into panels of nr columns, each
// panel's whole depth contiguous, then splits C into blocks of mc rows over the thread pool (and
// of columns too where the row blocks are fewer than the threads). A block walks the depth in
// slices of kc: it packs its rows of op(A) for the slice (mc x kc, kept in L2 while every panel of
// B passes over it), so op(A) is packed once in all, and runs the tile on each mr x nr piece of
// the block: its accumulators start at zero, and the slice's sum is added to C after it (each
// element a chain of kc sums, not of the whole depth: blocked BLAS's error). A piece at C's edge
// goes through a small buffer of a whole tile. So every size and layout runs the same code. The
// tile's inner loop is what a hand-written AVX-512 kernel would be: 24 FMAs, 4 loads and 6
// broadcasts per depth step.
// When A was packed per block of 256 columns (four times for 1024^3), the 1024^3 GEMM ran at
// 70 % of oneDNN's speed; packed once, level with it (benchmarks/results/autotune.md).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "runtime/step_settings.h"

namespace ember::codegen::cpu {

struct GemmTiling {
  int mr = 6;       // rows of a tile
  int nr = 64;      // columns of a tile: a multiple of 16
  int unroll = 4;   // depth steps per iteration of the tile's loop
  int64_t kc = 512;  // depth of a slice
  int64_t mc = 48;   // rows of a block (rounded up to whole tiles)
  int64_t nc = 1024;  // columns of a block (rounded up to whole tiles): B's packed block is kc x nc
  // B not stored transposed is read where it lies (rows ldb apart; a last panel cut by n is still
  // packed) when op(A) has fewer rows than this: packing costs K x N per call, which few rows do
  // not repay. One thread: 128 x 768 x 768 2.08 -> 1.85 ms in place; at 256 rows and more, in
  // place was 20-30 % slower (1024^3, 256 x 4096 x 1024: rows 4 and 16 KiB apart alias in L1).
  int64_t in_place_rows = 160;

  // The default tiling with `tile`'s rows and columns where it names some (a step's tuned tile).
  static GemmTiling with_tile(const GemmTile& tile);

  // The fields that decide the tile's code ("mr=6 nr=64 unroll=4"), a part of its cache key.
  std::string code_str() const;
  // Throws ember::Error(Value) on fields the tile cannot take.
  void check() const;
};

// The tile as an MLIR module: a function `name` with the C signature of GemmTileFn.
std::string emit_gemm_tile(const GemmTiling& tiling, const std::string& name);

// C[r * ldc + j] = (accumulate ? C[r * ldc + j] : 0) + sum over p < depth of a[p * mr + r] * b[p * ldb + j],
// for the r < mr and j < nr of one tile (ldb: nr for a packed panel).
using GemmTileFn = void (*)(int64_t depth, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc,
                            int64_t accumulate);

// The compiled tile (memory, then disk cache, else compiled now). Throws CodegenError.
GemmTileFn gemm_tile(const GemmTiling& tiling);

// Called with each piece of C (rows [row, row + rows), columns [col, col + cols)) as soon as it is
// final, on the thread that computed it, while it is still in that core's cache: a GEMM's
// epilogue ([Note: GEMM epilogues] in codegen/cpu/gemm_epilogue.h). Pieces never overlap.
using GemmPieceDone = std::function<void(int64_t row, int64_t rows, int64_t col, int64_t cols)>;

// C = op(A) op(B) + beta C on ember's thread pool, row-major with leading dimensions, op
// transposing A when trans_a and B when trans_b (cblas_sgemm's arguments). Where beta is 0, C is
// not read (it may hold anything, NaN included). `done`, when given, sees every piece of C once.
void generated_gemm(const GemmTiling& tiling, const float* a, const float* b, float* c, int64_t m, int64_t n,
                    int64_t k, bool trans_a, bool trans_b, float beta, int64_t lda, int64_t ldb, int64_t ldc,
                    const GemmPieceDone& done = {});

}  // namespace ember::codegen::cpu

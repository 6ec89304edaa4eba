#include "codegen/cpu/emit_kernel.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <optional>
#include <vector>

#include "codegen/cpu/emit_ops.h"
#include "ir/error.h"
#include "passes/fuse.h"

namespace ember::codegen::cpu {

// 16 lanes when every value the vector loop computes fits 32 bits, else 8 (a 512-bit register of
// 64-bit lanes). An input broadcast along the last dim does not count: it is one scalar for the
// whole loop (a float64 Python constant of a float32 kernel), converted once.
int vector_width(const KernelSpec& spec) {
  bool wide = false;
  for (const KernelInput& in : spec.inputs) wide = wide || (register_type(in.dtype) != "f32" && !in.broadcast.back());
  for (const KernelInstr& b : spec.body)
    wide = wide || register_type(b.dtype) != "f32" || register_type(b.compute) != "f32";
  return wide ? 8 : 16;
}

// A row kernel's folds are chains of dependent adds (or compares and selects for max and min):
// four registers of independent accumulators keep the loads busy. Measured on one thread against
// one register (max-autotune's timings, 2026-12-07, benchmarks/results/autotune.md): softmax
// [4096, 1024] about 2100 -> 1830 us, a row max of [1024, 1024] 175 -> 74, layer norm
// [2048, 768] 356 -> 335; row sums level within the noise.
int default_lanes(const KernelSpec& spec) {
  int w = vector_width(spec);
  return spec.reduces() && !spec.columns ? 4 * w : w;
}

namespace {

// Steps a reduction folds into one partial before adding it to the running total: summing in
// blocks keeps the rounding error of a long row or column near that of the block and the number of
// blocks, instead of growing with the whole length. (KernelConfig::fold_block changes it.)
constexpr int64_t kFoldBlock = 256;

class KernelWriter {
 public:
  KernelWriter(const KernelSpec& spec, const std::string& name, const KernelConfig& config)
      : spec_(spec), name_(name), operands_(spec.inputs.size() + spec.outputs.size()),
        row_(spec.line_values()), config_(config) {
    for (int v : spec.outputs) row_output_.push_back(spec.reduces() && row_[v]);
  }

  std::string write() {
    if (spec_.reduces()) return spec_.columns ? write_columns() : write_rows();
    Val fast = begin_function();
    m_.open("scf.for %row = %row_begin to %row_end step " + c1_.name + " : i64 {");
    std::vector<Val> base = row_offsets();
    over_inner(fast, lanes(), [&](const std::string& j, int width) { body(base, j, width); });
    m_.close();
    m_.line("return");
    m_.close();
    return "module {\n" + m_.text() + "}\n";
  }

 private:
  static Ty i64() { return {"i64", 0}; }

  // The function's header, its constants and meta reads; returns the fast-path condition.
  Val begin_function() {
    m_.open("func.func @" + name_ + "(%row_begin: i64, %row_end: i64, %inner_begin: i64, %inner_end: i64, " +
            "%buffers: !llvm.ptr, %meta: !llvm.ptr) {");
    c0_ = m_.int_constant(0, i64());
    c1_ = m_.int_constant(1, i64());
    read_meta();
    return fast_path_condition();
  }

  // Where the whole vectors of `w` lanes from %inner_begin end.
  // The end of the whole vectors of `w` in [from, %inner_end).
  Val whole_vectors_end(const Val& w, const std::string& from = "%inner_begin") {
    Val span = m_.binary("arith.subi", Val{"%inner_end", i64()}, Val{from, i64()});
    return m_.binary("arith.addi", Val{from, i64()}, m_.binary("arith.muli", m_.binary("arith.divsi", span, w), w));
  }
  int rank() const { return spec_.rank; }
  // The vector loops' steps, widest first: the configured lanes (several registers' worth, which
  // unrolls the loop) then one register's, or one register's alone.
  std::vector<int> lanes() const {
    int w = vector_width(spec_), n = config_.lanes > 0 ? config_.lanes : default_lanes(spec_);
    if (n > w) return {n, w};
    return {n};
  }
  int64_t fold_block() const { return config_.fold_block > 0 ? config_.fold_block : kFoldBlock; }
  int column_vectors() const { return config_.column_vectors > 0 ? config_.column_vectors : kColumnVectors; }
  size_t num_inputs() const { return spec_.inputs.size(); }

  Val load_i64(const std::string& base, int index) {
    Val p = m_.let("llvm.getelementptr " + base + "[" + std::to_string(index) + "] : (!llvm.ptr) -> !llvm.ptr, i64", {"!llvm.ptr", 0});
    return m_.let("llvm.load " + p.name + " : !llvm.ptr -> i64", i64());
  }

  void read_meta() {
    for (int d = 0; d < rank(); ++d) sizes_.push_back(load_i64("%meta", d));
    for (size_t k = 0; k < operands_.size(); ++k) {
      Val p = m_.let("llvm.getelementptr %buffers[" + std::to_string(k) + "] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr", {"!llvm.ptr", 0});
      operands_[k].base = m_.let("llvm.load " + p.name + " : !llvm.ptr -> !llvm.ptr", {"!llvm.ptr", 0}).name;
      for (int d = 0; d < rank(); ++d)
        operands_[k].strides.push_back(load_i64("%meta", rank() * static_cast<int>(1 + k) + d));
    }
  }

  // Whether operand k moves along the last dim: a row kernel stores its row outputs once per row;
  // a column kernel stores every output along the last dim.
  bool reads_along_inner(size_t k) const {
    if (k >= num_inputs()) return spec_.columns || !row_output_[k - num_inputs()];
    return !spec_.inputs[k].broadcast[rank() - 1];
  }

  Val fast_path_condition() {
    Val all = m_.let("arith.constant true", {"i1", 0});
    for (size_t k = 0; k < operands_.size(); ++k) {
      if (!reads_along_inner(k)) continue;
      Val unit = m_.cmp("arith.cmpi", "eq", operands_[k].strides[rank() - 1], c1_);
      all = m_.binary("arith.andi", all, unit);
    }
    return all;
  }

  // Each operand's offset at the start of the row: the row's index split over the outer dims
  // (those before the last; a column kernel's, before its reduced dim).
  std::vector<Val> row_offsets() {
    std::vector<Val> offsets(operands_.size(), c0_);
    Val rest{"%row", i64()};
    for (int d = rank() - (spec_.columns ? 3 : 2); d >= 0; --d) {
      // The outermost dim's index is what is left: a row is within the rows (a division per
      // row, for every row of a 2-d kernel, was tens of cycles of a short row's time).
      Val i = d == 0 ? rest : m_.binary("arith.remsi", rest, sizes_[d]);
      if (d > 0) rest = m_.binary("arith.divsi", rest, sizes_[d]);
      for (size_t k = 0; k < operands_.size(); ++k)
        offsets[k] = m_.binary("arith.addi", offsets[k], m_.binary("arith.muli", i, operands_[k].strides[d]));
    }
    return offsets;
  }

  // Over [%inner_begin, %inner_end): on the fast path, whole vectors of each of `widths` in
  // turn (widest first) while they fit, then scalars over what is left (everything, off the
  // fast path). `at(j, w)` emits the body at position j, a vector of w there or (w = 0) a scalar.
  void over_inner(const Val& fast, const std::vector<int>& widths,
                  const std::function<void(const std::string&, int)>& at) {
    Val scalar_from = m_.let("scf.if " + fast.name + " -> (i64) {", i64());
    m_.indent_more();
    std::string from = "%inner_begin";
    for (int width : widths) {
      Val w = m_.int_constant(width, i64());
      Val vector_end = whole_vectors_end(w, from);
      std::string jv = m_.fresh();
      m_.open("scf.for " + jv + " = " + from + " to " + vector_end.name + " step " + w.name + " : i64 {");
      at(jv, width);
      m_.close();
      from = vector_end.name;
    }
    m_.line("scf.yield " + from + " : i64");
    m_.middle("} else {");
    m_.line("scf.yield %inner_begin : i64");
    m_.close();
    std::string js = m_.fresh();
    m_.open("scf.for " + js + " = " + scalar_from.name + " to %inner_end step " + c1_.name + " : i64 {");
    at(js, 0);
    m_.close();
  }

  // An instruction's value from its arguments' (emit_op), with pow to a small constant integer
  // power as multiplications (GPT-2's gelu cubes its input).
  Val compute(const KernelInstr& instr, std::span<const Val> args, std::span<const DType> dtypes) {
    if (instr.op == Op::Pow && is_floating(instr.compute) && instr.args[1] >= static_cast<int>(num_inputs())) {
      const KernelInstr& e = spec_.body[instr.args[1] - num_inputs()];
      if (e.op == Op::Constant && is_floating(e.dtype)) {
        double p = attr_literal(e.attrs, "value").floats.at(0);
        if (p == 2.0 || p == 3.0 || p == 4.0) return emit_integer_power(m_, instr, args[0], dtypes[0], static_cast<int>(p));
      }
    }
    return emit_op(m_, instr, args, dtypes);
  }

  // The element address of operand k at inner position j: stride 1 on the vector path.
  Val address(size_t k, const Val& base, const std::string& j, int width, const std::string& elem) {
    Val jv{j, i64()};
    Val offset = base;
    if (reads_along_inner(k))
      offset = m_.binary("arith.addi", base, width ? jv : m_.binary("arith.muli", jv, operands_[k].strides[rank() - 1]));
    return m_.let("llvm.getelementptr " + operands_[k].base + "[" + offset.name + "] : (!llvm.ptr, i64) -> !llvm.ptr, " + elem,
                  {"!llvm.ptr", 0});
  }

  // The op that widens a stored element to its register type.
  static const char* widen(DType dt) {
    if (is_floating(dt)) return "arith.extf";  // float16: exact
    return dt == DType::Bool || dt == DType::UInt8 ? "arith.extui" : "arith.extsi";
  }

  Val load(size_t k, const Val& base, const std::string& j, int width) {
    DType dt = spec_.inputs[k].dtype;
    std::string elem = storage_type(dt);
    Val p = address(k, base, j, width, elem);
    int lanes = reads_along_inner(k) ? width : 0;
    Ty stored{elem, lanes};
    Val v = m_.let("llvm.load " + p.name + " {alignment = " + std::to_string(itemsize(dt)) + " : i64} : !llvm.ptr -> " + stored.str(), stored);
    Ty reg{register_type(dt), lanes};
    if (dt == DType::BFloat16) v = bf16_value(m_, v);
    else if (elem != reg.elem) v = m_.convert(widen(dt), v, reg);
    if (lanes != width) v = m_.let("vector.broadcast " + v.name + " : " + reg.str() + " to " + Ty{reg.elem, width}.str(), {reg.elem, width});
    return v;
  }

  void store(size_t out, const Val& v, const Val& base, const std::string& j, int width) {
    size_t k = num_inputs() + out;
    DType dt = spec_.dtype_of(spec_.outputs[out]);
    std::string elem = storage_type(dt);
    Val s = v;
    if (dt == DType::BFloat16) s = bf16_bits(m_, v);
    else if (elem != v.ty.elem) s = m_.convert(is_floating(dt) ? "arith.truncf" : "arith.trunci", v, v.ty.with(elem));
    Val p = address(k, base, j, width, elem);
    m_.line("llvm.store " + s.name + ", " + p.name + " {alignment = " + std::to_string(itemsize(dt)) + " : i64} : " +
            s.ty.str() + ", !llvm.ptr");
  }

  // Output `out` (float32 or float64, stored along the row) as the store pass reads it back.
  Val load_output(size_t out, const Val& base, const std::string& j, int width) {
    Ty ty{storage_type(spec_.dtype_of(spec_.outputs[out])), width};
    Val p = address(num_inputs() + out, base, j, width, ty.elem);
    return m_.let("llvm.load " + p.name + " {alignment = " + std::to_string(itemsize(spec_.dtype_of(spec_.outputs[out]))) +
                      " : i64} : !llvm.ptr -> " + ty.str(),
                  ty);
  }

  void body(const std::vector<Val>& base, const std::string& j, int width) {
    std::vector<Val> values;
    for (size_t k = 0; k < num_inputs(); ++k) values.push_back(load(k, base[k], j, width));
    for (const KernelInstr& instr : spec_.body) {
      if (instr.op == Op::Constant) {
        values.push_back(emit_constant(m_, instr, width));
        continue;
      }
      std::vector<Val> args;
      std::vector<DType> dtypes;
      for (int a : instr.args) {
        args.push_back(values[a]);
        dtypes.push_back(spec_.dtype_of(a));
      }
      values.push_back(compute(instr, args, dtypes));
    }
    for (size_t out = 0; out < spec_.outputs.size(); ++out)
      store(out, values[spec_.outputs[out]], base[num_inputs() + out], j, width);
  }

  // [Note: row kernels]
  // A kernel with reductions over the last dim runs, per row: the row values that need no
  // reduction (inputs broadcast along the row and what is computed from them alone); then for
  // each level of reductions (level 1 folds values of the row, level 2 folds values that need a
  // level-1 result, as a variance needs its mean) one pass over the row, on vectors with one
  // accumulator per reduction per lane when the strides allow, then on scalars over the rest;
  // after each, the row values its results make ready; then one pass that computes and stores
  // the outputs over the row, and the row outputs once. Values of the row are recomputed in
  // each pass that needs them: loads and arithmetic are cheaper than memory for a temporary.
  // One exception, store-then-scale: an output that is a value of the last reduction pass times
  // (or over) a row value, as softmax's exp(x - max) / sum, stores that value in the last pass
  // and the store pass scales it in place, instead of computing the exponentials twice.
  std::string write_rows() {
    Val fast = begin_function();
    std::vector<int> levels = value_levels();
    int max_level = *std::max_element(levels.begin(), levels.end());
    find_scaled_outputs(levels, max_level);
    m_.open("scf.for %row = %row_begin to %row_end step " + c1_.name + " : i64 {");
    std::vector<Val> base = row_offsets();
    row_vals_.assign(row_.size(), Val{});
    ready_row_values(base, levels, 0, "%inner_begin", 0);
    for (int level = 1; level <= max_level; ++level) {
      std::vector<int> reductions;
      for (size_t v = num_inputs(); v < row_.size(); ++v)
        if (levels[v] == level && is_row_reduction(instr(v).op)) reductions.push_back(static_cast<int>(v));
      std::vector<Val> folded =
          overflow_safe(reductions, [&] { return reduce_pass(base, fast, reductions, level == max_level); });
      for (size_t i = 0; i < reductions.size(); ++i) row_vals_[reductions[i]] = folded[i];
      ready_row_values(base, levels, level, "%inner_begin", 0);
    }
    store_pass(base, fast);
    for (size_t out = 0; out < spec_.outputs.size(); ++out)
      if (row_output_[out]) store(out, row_vals_[spec_.outputs[out]], base[num_inputs() + out], "%inner_begin", 0);
    m_.close();
    m_.line("return");
    m_.close();
    return "module {\n" + m_.text() + "}\n";
  }

  // [Note: column kernels]
  // A kernel with reductions over the dim before the last (a sum over the batch of a [B, C]
  // gradient) runs, per outer index and per vector of columns (adjacent positions along the last
  // dim): for each level of reductions a pass down the columns, one vector accumulator per
  // reduction, each step loading a whole vector of adjacent elements; then a pass down the
  // columns storing the outputs over the domain, and the column outputs once. Every cache line is
  // read whole by one step, so no transpose is needed; the columns left over from the whole
  // vectors (or all of them, when a stride along the last dim is not 1) run the same way on
  // scalars. Line values here are vectors, one lane per column.
  std::string write_columns() {
    Val fast = begin_function();
    std::vector<int> levels = value_levels();
    scaled_.assign(spec_.outputs.size(), -1);
    m_.open("scf.for %row = %row_begin to %row_end step " + c1_.name + " : i64 {");
    std::vector<Val> base = row_offsets();
    int w = vector_width(spec_);
    over_inner(fast, {column_vectors() * w, w}, [&](const std::string& j, int width) { columns_at(base, levels, j, width); });
    m_.close();
    m_.line("return");
    m_.close();
    return "module {\n" + m_.text() + "}\n";
  }

  // Columns per step: several vectors' worth, so that each walk down the columns reads that many
  // neighbouring bytes of every row it visits (fewer walks over the pages: a row of 8192 float32
  // is 32 KiB, so each step of a walk is another page), then single vectors over the rest, so
  // that few columns are left to scalars. Measured against 2 and 8 vectors (stop 20), 4 was as
  // fast or faster everywhere: a column sum of [4096, 1000] 2.1 -> 0.9 ms on 2 threads.
  static constexpr int kColumnVectors = 4;

  // The columns at inner position j (a vector of `width` of them, or one): their reductions,
  // level by level, then their outputs.
  void columns_at(const std::vector<Val>& base, const std::vector<int>& levels, const std::string& j, int width) {
    int max_level = *std::max_element(levels.begin(), levels.end());
    row_vals_.assign(row_.size(), Val{});
    ready_row_values(base, levels, 0, j, width);
    for (int level = 1; level <= max_level; ++level) {
      std::vector<int> reductions;
      for (size_t v = num_inputs(); v < row_.size(); ++v)
        if (levels[v] == level && is_row_reduction(instr(v).op)) reductions.push_back(static_cast<int>(v));
      std::vector<Val> folded = overflow_safe(reductions, [&] {
        std::vector<Val> inits;
        for (int r : reductions) inits.push_back(identity(instr(r).op, {accumulator_type(r), width}));
        return fold_down(base, reductions, j, width, inits);
      });
      for (size_t i = 0; i < reductions.size(); ++i) row_vals_[reductions[i]] = folded[i];
      ready_row_values(base, levels, level, j, width);
    }
    bool any = false;
    for (bool line : row_output_) any = any || !line;
    if (any) {
      std::string r = m_.fresh();
      m_.open("scf.for " + r + " = " + c0_.name + " to " + sizes_[rank() - 2].name + " step " + c1_.name + " : i64 {");
      store_outputs(down_offsets(base, r), j, width);
      m_.close();
    }
    for (size_t out = 0; out < spec_.outputs.size(); ++out)
      if (row_output_[out]) store(out, row_vals_[spec_.outputs[out]], base[num_inputs() + out], j, width);
  }

  // Each operand's offset at step r down the columns.
  std::vector<Val> down_offsets(const std::vector<Val>& base, const std::string& r) {
    std::vector<Val> offsets = base;
    for (size_t k = 0; k < operands_.size(); ++k) {
      bool moves = k < num_inputs() ? !spec_.inputs[k].broadcast[rank() - 2] : !row_output_[k - num_inputs()];
      if (moves) offsets[k] = m_.binary("arith.addi", base[k], m_.binary("arith.muli", Val{r, i64()}, operands_[k].strides[rank() - 2]));
    }
    return offsets;
  }

  // Folds each of `reductions` down the columns (vectors of `width`, or scalars), in blocks of
  // kFoldBlock rows: each block from the identity, then into the running total. A column of a
  // million float32 values summed one by one into one total drifts by 5e-4 (a variance's
  // squares all round one way); by blocks, the error grows with the block and the block count.
  std::vector<Val> fold_down(const std::vector<Val>& base, const std::vector<int>& reductions, const std::string& j,
                             int width, const std::vector<Val>& inits) {
    // The second fold of [Note: overflow-safe folds] goes down each column in order, unblocked.
    if (wide_) return fold_column(base, reductions, c0_.name, sizes_[rank() - 2].name, j, width, inits);
    return in_blocks(reductions, c0_.name, sizes_[rank() - 2].name, m_.int_constant(fold_block(), i64()), inits,
                     [&](const std::string& from, const std::string& to, const std::vector<Val>& identities) {
                       return fold_column(base, reductions, from, to, j, width, identities);
                     });
  }

  // scf.for down the columns over rows [from, to) folding each reduction's argument into its
  // accumulator.
  std::vector<Val> fold_column(const std::vector<Val>& base, const std::vector<int>& reductions, const std::string& from,
                               const std::string& to, const std::string& j, int width, const std::vector<Val>& inits) {
    std::string r = m_.fresh();
    Carried loop = open_carrying(r, from, to, c1_.name, inits);
    std::vector<Val> offsets = down_offsets(base, r);
    std::vector<Val> memo(row_.size()), next;
    for (size_t i = 0; i < reductions.size(); ++i) {
      const KernelInstr& red = instr(reductions[i]);
      Val x = in_accumulator(value_at(red.args[0], offsets, j, width, memo), inits[i].ty);
      EMBER_CHECK(x.ty.str() == inits[i].ty.str(), "a column reduction folds ", x.ty.str(), " into ", inits[i].ty.str());
      next.push_back(combine(red.op, loop.inside[i], x));
    }
    return close_carrying(loop, next);
  }

  // [from, to) in blocks of `span`: `fold(block_from, block_to, identities)` folds a block from the
  // identities (its partial results), which are then combined into the running totals, starting
  // from `inits`.
  using FoldBlock = std::function<std::vector<Val>(const std::string&, const std::string&, const std::vector<Val>&)>;
  std::vector<Val> in_blocks(const std::vector<int>& reductions, const std::string& from, const std::string& to,
                             const Val& span, const std::vector<Val>& inits, const FoldBlock& fold) {
    std::string block = m_.fresh();
    Carried loop = open_carrying(block, from, to, span.name, inits);
    Val end = m_.let("arith.minsi " + m_.binary("arith.addi", Val{block, i64()}, span).name + ", " + to + " : i64", i64());
    std::vector<Val> identities, next;
    for (size_t i = 0; i < reductions.size(); ++i)
      identities.push_back(identity(instr(reductions[i]).op, inits[i].ty));
    std::vector<Val> partial = fold(block, end.name, identities);
    for (size_t i = 0; i < reductions.size(); ++i)
      next.push_back(combine(instr(reductions[i]).op, loop.inside[i], partial[i]));
    return close_carrying(loop, next);
  }

  // An scf.for carrying values: open_carrying emits its header and gives the carried values as its
  // body sees them; close_carrying yields the next ones and gives the loop's results.
  struct Carried {
    std::string loop;
    std::vector<Val> inside;
  };
  Carried open_carrying(const std::string& var, const std::string& from, const std::string& to, const std::string& step,
                        const std::vector<Val>& inits) {
    Carried c{m_.fresh(), {}};
    std::vector<std::string> names = fresh_names(inits.size());
    std::vector<Ty> types;
    for (size_t i = 0; i < inits.size(); ++i) {
      types.push_back(inits[i].ty);
      c.inside.push_back({names[i], inits[i].ty});
    }
    m_.open(results_decl(c.loop, inits.size()) + " = scf.for " + var + " = " + from + " to " + to + " step " + step +
            " iter_args(" + bind(names, inits) + ") -> (" + type_list(types) + ") : i64 {");
    return c;
  }
  std::vector<Val> close_carrying(const Carried& c, const std::vector<Val>& next) {
    std::vector<std::string> names;
    std::vector<Ty> types;
    for (size_t i = 0; i < next.size(); ++i) {
      names.push_back(next[i].name);
      types.push_back(c.inside[i].ty);
    }
    m_.line("scf.yield " + join(names) + " : " + type_list(types));
    m_.close();
    std::vector<Val> out;
    for (size_t i = 0; i < next.size(); ++i) out.push_back({result(c.loop, next.size(), i), types[i]});
    return out;
  }

  std::vector<std::string> fresh_names(size_t n) {
    std::vector<std::string> names;
    for (size_t i = 0; i < n; ++i) names.push_back(m_.fresh());
    return names;
  }
  // "%a = %x, %b = %y": loop-carried values and their initial values.
  static std::string bind(const std::vector<std::string>& names, const std::vector<Val>& values) {
    std::vector<std::string> parts;
    for (size_t i = 0; i < names.size(); ++i) parts.push_back(names[i] + " = " + values[i].name);
    return join(parts);
  }

  const KernelInstr& instr(size_t v) const { return spec_.body[v - num_inputs()]; }

  // The pass after which each value is known: inputs 0, a reduction one more than its argument,
  // anything else its latest argument's.
  std::vector<int> value_levels() const {
    std::vector<int> levels(num_inputs(), 0);
    for (const KernelInstr& b : spec_.body) {
      int level = 0;
      for (int a : b.args) level = std::max(level, levels[a]);
      levels.push_back(is_row_reduction(b.op) ? level + 1 : level);
    }
    return levels;
  }

  // Per output: the value the last reduction pass stores for the store pass to scale (see
  // [Note: row kernels]), or -1. It must be an argument of a last-level reduction (so that pass
  // computes it anyway), and held in the output's dtype as computed (float32 or float64), so
  // that the scaled result is the one computing it again would give, bit for bit.
  void find_scaled_outputs(const std::vector<int>& levels, int max_level) {
    scaled_.assign(spec_.outputs.size(), -1);
    std::vector<bool> last_pass_arg(row_.size(), false);
    for (size_t v = num_inputs(); v < row_.size(); ++v)
      if (levels[v] == max_level && is_row_reduction(instr(v).op)) last_pass_arg[instr(v).args[0]] = true;
    for (size_t out = 0; out < spec_.outputs.size(); ++out) {
      int v = spec_.outputs[out];
      if (row_output_[out] || v < static_cast<int>(num_inputs())) continue;
      const KernelInstr& b = instr(v);
      if ((b.op != Op::Mul && b.op != Op::Div) || b.args.size() != 2) continue;
      int value = b.args[0], other = b.args[1];
      if (b.op == Op::Mul && row_[value]) std::swap(value, other);
      DType dt = spec_.dtype_of(v);
      bool exact = (dt == DType::Float32 || dt == DType::Float64) && spec_.dtype_of(value) == dt;
      if (!row_[value] && row_[other] && last_pass_arg[value] && exact) scaled_[out] = value;
    }
  }

  // Computes the line values (not reductions) that level `level` makes ready: a row's as
  // scalars, a column kernel's at inner position j (a vector of `width` from there, or a scalar).
  void ready_row_values(const std::vector<Val>& base, const std::vector<int>& levels, int level, const std::string& j,
                        int width) {
    for (size_t v = 0; v < row_.size(); ++v) {
      if (!row_[v] || !row_vals_[v].name.empty() || levels[v] > level) continue;
      if (v < num_inputs()) {
        row_vals_[v] = load(v, base[v], j, width);
        continue;
      }
      if (is_row_reduction(instr(v).op)) continue;
      if (instr(v).op == Op::Constant) {
        row_vals_[v] = emit_constant(m_, instr(v), width);
        continue;
      }
      std::vector<Val> args;
      std::vector<DType> dtypes;
      for (int a : instr(v).args) {
        args.push_back(row_vals_[a]);
        dtypes.push_back(spec_.dtype_of(a));
      }
      row_vals_[v] = compute(instr(v), args, dtypes);
    }
  }

  // Value v at inner position j (a vector of `width` from there, or a scalar): row values
  // broadcast, the rest loaded or computed, each once per position (memo).
  Val value_at(int v, const std::vector<Val>& base, const std::string& j, int width, std::vector<Val>& memo) {
    if (!memo[v].name.empty()) return memo[v];
    Val out;
    if (row_[v]) {
      out = row_vals_[v];
      if (width && out.ty.width == 0) out = broadcast(out, width);
    } else if (v < static_cast<int>(num_inputs())) {
      out = load(v, base[v], j, width);
    } else if (static_cast<size_t>(v) < by_reciprocal_.size() && by_reciprocal_[v]) {
      Val scale = reciprocals_[instr(v).args[1]];  // [Note: reciprocals of row divisors]
      out = m_.binary("arith.mulf", value_at(instr(v).args[0], base, j, width, memo), width ? broadcast(scale, width) : scale);
    } else {
      std::vector<Val> args;
      std::vector<DType> dtypes;
      for (int a : instr(v).args) {
        args.push_back(value_at(a, base, j, width, memo));
        dtypes.push_back(spec_.dtype_of(a));
      }
      out = compute(instr(v), args, dtypes);
    }
    return memo[v] = out;
  }

  Val broadcast(const Val& scalar, int width) {
    Ty ty{scalar.ty.elem, width};
    return m_.let("vector.broadcast " + scalar.name + " : " + scalar.ty.str() + " to " + ty.str(), ty);
  }

  // acc folded with x as the interpreter folds them ([Note: reduction semantics]): a sum adds, a
  // product multiplies; max and min take x when it is NaN or beyond acc, and keep acc when it is
  // NaN or on a tie, so -0.0 and 0.0 give whichever came first, as in eager, where
  // arith.maximumf would pick 0.0. Integers (held as i64, whatever their dtype) wrap as int64.
  // A float max or min folds so only in the second fold; the first is [Note: fast max folds].
  Val combine(Op op, const Val& acc, const Val& x, bool x_is_number = false) {
    bool fp = acc.ty.is_float();
    if (op == Op::Prod) return m_.binary(fp ? "arith.mulf" : "arith.muli", acc, x);
    if (op != Op::Max && op != Op::Min) return m_.binary(fp ? "arith.addf" : "arith.addi", acc, x);
    if (!fp) return m_.binary(op == Op::Max ? "arith.maxsi" : "arith.minsi", acc, x);
    if (!wide_) {
      Val y = x_is_number ? x : m_.select(m_.cmp("arith.cmpf", "uno", x, x), far_end(op, x.ty), x);
      return m_.select(m_.cmp("arith.cmpf", op == Op::Max ? "ogt" : "olt", y, acc), y, acc);
    }
    Val beyond = m_.cmp("arith.cmpf", op == Op::Max ? "ugt" : "ult", x, acc);  // or x is NaN
    Val take = m_.binary("arith.andi", beyond, m_.cmp("arith.cmpf", "ord", acc, acc));
    return m_.select(take, x, acc);
  }
  // [Note: fast max folds]
  // The exact fold of a float max (above) is two compares and a select on the accumulator's
  // chain: a row max of 256 float32 ran at half eager's speed (0.24 against 0.14 ms for 8192
  // rows), its time in the chain and in halving the register at the row's end. The first fold
  // reads a NaN as +infinity (-infinity for a min), off the chain, and folds with an ordered
  // compare and select, one vmaxps (which keeps acc on a tie, as the exact fold does); its
  // accumulators are never NaN, so halving them is one vmaxps a step too. A row (or column)
  // whose result is then infinite may have held a NaN, and is folded again, exactly, in order
  // ([Note: overflow-safe folds]), so the result is the exact fold's, bit for bit.
  Val far_end(Op op, const Ty& ty) {
    return m_.constant((op == Op::Max ? 1 : -1) * std::numeric_limits<double>::infinity(), ty);
  }
  static std::string horizontal_kind(Op op, const Ty& ty) {
    if (op == Op::Prod) return "mul";
    if (op != Op::Max && op != Op::Min) return "add";
    return std::string(op == Op::Max ? "max" : "min") + (ty.is_float() ? "imumf" : "si");
  }
  // The value that folds to nothing: the start of every block and lane.
  Val identity(Op op, const Ty& ty) {
    if (op == Op::Sum || op == Op::Mean) return ty.is_float() ? m_.constant(0.0, ty) : m_.int_constant(0, ty);
    if (op == Op::Prod) return ty.is_float() ? m_.constant(1.0, ty) : m_.int_constant(1, ty);
    bool max = op == Op::Max;
    if (ty.is_float()) return m_.constant((max ? -1 : 1) * std::numeric_limits<double>::infinity(), ty);
    return m_.int_constant(max ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max(), ty);
  }

  // The name of result i of a multi-result op named `name` with `count` results.
  static std::string result(const std::string& name, size_t count, size_t i) {
    return count == 1 ? name : name + "#" + std::to_string(i);
  }
  static std::string results_decl(const std::string& name, size_t count) {
    return count == 1 ? name : name + ":" + std::to_string(count);
  }
  static std::string type_list(const std::vector<Ty>& types) {
    std::string s;
    for (const Ty& t : types) s += (s.empty() ? "" : ", ") + t.str();
    return s;
  }

  // One pass over the row folding each of `reductions`; returns their scalar results (in the
  // accumulator's register type, not yet finished).
  std::vector<Val> reduce_pass(const std::vector<Val>& base, const Val& fast, const std::vector<int>& reductions,
                               bool last) {
    const size_t n = reductions.size();
    if (wide_) return fold_in_order(base, reductions, last);
    std::vector<Ty> scalar_types;
    for (int r : reductions) scalar_types.push_back({accumulator_type(r), 0});
    std::vector<Ty> if_types = scalar_types;
    if_types.push_back(i64());
    std::string split = m_.fresh();
    m_.open(results_decl(split, n + 1) + " = scf.if " + fast.name + " -> (" + type_list(if_types) + ") {");
    // Whole vectors of each width in turn, widest first (several registers' worth: independent
    // accumulators), each width's accumulators narrowed into the next's.
    std::string vector_end = "%inner_begin";
    std::vector<Val> accs;
    for (int width : lanes()) {
      Val w = m_.int_constant(width, i64());
      Val end = whole_vectors_end(w, vector_end);
      std::vector<Val> inits;
      for (size_t i = 0; i < n; ++i)
        inits.push_back(accs.empty() ? identity(instr(reductions[i]).op, scalar_types[i].with_width(width))
                                     : narrowed(instr(reductions[i]).op, accs[i], width));
      accs = fold_blocks(base, reductions, vector_end, end.name, w, width, inits, last);
      vector_end = end.name;
    }
    std::vector<std::string> yields;
    for (size_t i = 0; i < n; ++i) yields.push_back(horizontal(instr(reductions[i]).op, accs[i]).name);
    yields.push_back(vector_end);
    m_.line("scf.yield " + join(yields) + " : " + type_list(if_types));
    m_.middle("} else {");
    std::vector<std::string> identities;
    for (size_t i = 0; i < n; ++i) identities.push_back(identity(instr(reductions[i]).op, scalar_types[i]).name);
    identities.push_back("%inner_begin");
    m_.line("scf.yield " + join(identities) + " : " + type_list(if_types));
    m_.close();
    std::vector<Val> partial;
    for (size_t i = 0; i < n; ++i) partial.push_back({result(split, n + 1, i), scalar_types[i]});
    return fold_blocks(base, reductions, result(split, n + 1, n), "%inner_end", c1_, 0, partial, last);
  }

  // A vector accumulator's lanes folded into one value. A float max or min halves the vector with
  // the loop's own compare and select: LLVM's fmaximum reduction orders signed zeros at each of
  // its steps, about 40 instructions for 16 lanes, which cost a row max of 256 floats more than
  // its loop.
  Val horizontal(Op op, const Val& acc) {
    Ty scalar = acc.ty.with_width(0);
    if (!acc.ty.is_float() || (op != Op::Max && op != Op::Min))
      return m_.let("vector.reduction <" + horizontal_kind(op, acc.ty) + ">, " + acc.name + " : " + acc.ty.str() +
                        " into " + scalar.str(), scalar);
    Val one = acc;
    while (one.ty.width > 1) one = narrowed(op, one, one.ty.width / 2);
    return m_.let("vector.extract " + one.name + "[0] : " + scalar.str() + " from " + one.ty.str(), scalar);
  }

  // A vector accumulator folded into `width` lanes: its slices of that width combined as a tree.
  Val narrowed(Op op, const Val& acc, int width) {
    std::vector<Val> parts;
    for (int at = 0; at < acc.ty.width; at += width)
      parts.push_back(m_.let("vector.extract_strided_slice " + acc.name + " {offsets = [" + std::to_string(at) +
                                 "], sizes = [" + std::to_string(width) + "], strides = [1]} : " + acc.ty.str() + " to " +
                                 acc.ty.with_width(width).str(),
                             acc.ty.with_width(width)));
    while (parts.size() > 1) {
      std::vector<Val> next;
      for (size_t i = 0; i + 1 < parts.size(); i += 2)
        next.push_back(combine(op, parts[i], parts[i + 1], /*x_is_number=*/!wide_));
      if (parts.size() % 2) next.push_back(parts.back());
      parts = next;
    }
    return parts.front();
  }

  // The second fold of [Note: overflow-safe folds]: on scalars in the row's order, without blocks,
  // as the interpreter folds (a product's lanes or blocks in float64 could still overflow where
  // the whole row's running product does not).
  std::vector<Val> fold_in_order(const std::vector<Val>& base, const std::vector<int>& reductions, bool last) {
    std::vector<Val> inits;
    for (int r : reductions) inits.push_back(identity(instr(r).op, {accumulator_type(r), 0}));
    return fold_loop(base, reductions, "%inner_begin", "%inner_end", c1_.name, 0, inits, last);
  }

  // [from, to) of the row by steps of `w` (vectors of `width`, or scalars) folded in blocks of
  // kFoldBlock steps, each from the identity and then into the running totals (see fold_down).
  std::vector<Val> fold_blocks(const std::vector<Val>& base, const std::vector<int>& reductions, const std::string& from,
                               const std::string& to, const Val& w, int width, const std::vector<Val>& inits, bool last) {
    Val span = m_.binary("arith.muli", w, m_.int_constant(fold_block(), i64()));
    return in_blocks(reductions, from, to, span, inits,
                     [&](const std::string& block_from, const std::string& block_to, const std::vector<Val>& identities) {
                       return fold_loop(base, reductions, block_from, block_to, w.name, width, identities, last);
                     });
  }

  // scf.for over [from, to) by `step` folding each reduction's argument into its accumulator; in
  // the last pass, also storing the values of scaled outputs.
  std::vector<Val> fold_loop(const std::vector<Val>& base, const std::vector<int>& reductions, const std::string& from,
                             const std::string& to, const std::string& step, int width, const std::vector<Val>& inits,
                             bool last) {
    std::string j = m_.fresh();
    Carried loop = open_carrying(j, from, to, step, inits);
    std::vector<Val> memo(row_.size()), next;
    for (size_t i = 0; i < reductions.size(); ++i) {
      const KernelInstr& r = instr(reductions[i]);
      Val x = in_accumulator(value_at(r.args[0], base, j, width, memo), inits[i].ty);
      EMBER_CHECK(x.ty.elem == inits[i].ty.elem, "a row reduction folds ", x.ty.str(), " into ", inits[i].ty.str());
      next.push_back(combine(r.op, loop.inside[i], x));
    }
    for (size_t out = 0; last && out < scaled_.size(); ++out)
      if (scaled_[out] >= 0)
        store(out, value_at(scaled_[out], base, j, width, memo), base[num_inputs() + out], j, width);
    return close_carrying(loop, next);
  }

  // [Note: overflow-safe folds]
  // A float32 sum or product (a float16 or bfloat16 one too: they compute in float32) folds in
  // float32 registers for speed. Its partial results can overflow (3e38 + 3e38 - 3e38) or, for
  // a product, underflow where the whole does not, which the reference never shows: the
  // interpreter folds in float64 ([Note: reduction semantics]). So a fold whose float32 result
  // is not finite (a sum) or not a normal number (a product) is folded again with float64
  // accumulators, on scalars (or one lane per column) in the reference's order, and that result
  // is kept: the reference's own. The check is a compare per row (or vector of columns); the
  // second fold runs only for lines that hold an infinity or NaN, a product's zero, or partial
  // results past float32's range.
  std::vector<Val> overflow_safe(const std::vector<int>& reductions, const std::function<std::vector<Val>()>& fold) {
    std::vector<Val> narrow = fold(), finished;
    std::optional<Val> suspect;
    for (size_t i = 0; i < reductions.size(); ++i) {
      finished.push_back(finish(reductions[i], narrow[i]));
      if (!refolds(reductions[i])) continue;
      Val s = suspect_fold(instr(reductions[i]).op, narrow[i]);
      suspect = suspect ? m_.binary("arith.ori", *suspect, s) : s;
    }
    if (!suspect) return finished;
    std::vector<Ty> types;
    std::vector<std::string> narrow_names, wide_names;
    for (const Val& f : finished) {
      types.push_back(f.ty);
      narrow_names.push_back(f.name);
    }
    std::string branch = m_.fresh();
    m_.open(results_decl(branch, types.size()) + " = scf.if " + suspect->name + " -> (" + type_list(types) + ") {");
    wide_ = true;
    std::vector<Val> wide = fold();
    wide_ = false;
    for (size_t i = 0; i < reductions.size(); ++i) wide_names.push_back(finish(reductions[i], wide[i]).name);
    m_.line("scf.yield " + join(wide_names) + " : " + type_list(types));
    m_.middle("} else {");
    m_.line("scf.yield " + join(narrow_names) + " : " + type_list(types));
    m_.close();
    std::vector<Val> out;
    for (size_t i = 0; i < types.size(); ++i) out.push_back({result(branch, types.size(), i), types[i]});
    return out;
  }

  // Whether reduction v folds again when its first fold's result is suspect: in float64 (widens),
  // or a float max or min exactly ([Note: fast max folds]).
  bool refolds(int v) const {
    Op op = instr(v).op;
    return widens(v) || ((op == Op::Max || op == Op::Min) && register_type(instr(v).compute)[0] == 'f');
  }
  // Whether reduction v folds again in float64 when its float32 result is suspect.
  bool widens(int v) const {
    Op op = instr(v).op;
    return register_type(instr(v).compute) == "f32" && (op == Op::Sum || op == Op::Mean || op == Op::Prod);
  }
  // The register type reduction v accumulates in: its compute dtype's, float64 in a second fold.
  std::string accumulator_type(int v) const { return wide_ && widens(v) ? "f64" : register_type(instr(v).compute); }
  Val in_accumulator(const Val& x, const Ty& acc) {
    return x.ty.elem == acc.elem ? x : m_.convert("arith.extf", x, x.ty.with(acc.elem));
  }
  // Whether a float32 fold's result may be its accumulator's overflow (or a product's underflow)
  // rather than the value's: true for any lane of a vector.
  Val suspect_fold(Op op, const Val& folded) {
    Val magnitude = m_.unary("math.absf", folded);
    Val suspect = m_.cmp("arith.cmpf", "ueq", magnitude, m_.constant(std::numeric_limits<double>::infinity(), folded.ty));
    if (op == Op::Prod) {
      Val tiny = m_.cmp("arith.cmpf", "ult", magnitude, m_.constant(std::numeric_limits<float>::min(), folded.ty));
      suspect = m_.binary("arith.ori", suspect, tiny);
    }
    if (!folded.ty.width) return suspect;
    return m_.let("vector.reduction <or>, " + suspect.name + " : " + suspect.ty.str() + " into i1", {"i1", 0});
  }

  // A reduction's folded value as its instruction's result: a mean divides by the row's length;
  // then the value is held as its dtype holds it.
  Val finish(int v, Val folded) {
    const KernelInstr& r = instr(v);
    if (r.op == Op::Mean) {
      Val count = m_.convert("arith.sitofp", sizes_[spec_.reduced_dim()], Ty{folded.ty.elem, 0});
      if (folded.ty.width) count = broadcast(count, folded.ty.width);
      folded = m_.binary("arith.divf", folded, count);
    }
    return convert_dtype(m_, folded, r.dtype);
  }

  // The pass that stores the outputs over the row (if any is not a row output).
  // [Note: reciprocals of row divisors]
  // A division by a row value (softmax's sum) runs as a multiplication by the row's reciprocal,
  // as PyTorch's own softmax kernel computes it: a vector division cost more than the rest of
  // the pass (softmax reached half the copy bandwidth on one thread). The row takes that loop
  // only when every such reciprocal is a normal number (the divisor's magnitude within
  // [2^-m, 2^m] for the float's smallest normal exponent -m), else the dividing one: a
  // reciprocal that overflowed or went subnormal would lose what the division keeps. The
  // product can differ from the quotient in the last place, so the rule keeps to divisions that
  // PyTorch computes so and that no other pass computes: the divisor comes from a reduction
  // (a sum, a norm; not an input broadcast along the row, `x / t` with t a scalar, which PyTorch
  // divides), and the quotient is not an argument of a reduction. A quotient that a reduction
  // pass computed by dividing and the store pass by multiplying differed in the last place
  // between the two: `(x / t).softmax(-1)` subtracted a max of 9000 from 8999.999 and its
  // largest probability came out 0.99902 for 1.
  bool reciprocal_allowed(int v, int divisor, const std::vector<int>& levels, const std::vector<bool>& reduced) const {
    return levels[divisor] > 0 && !reduced[v];
  }
  // Per value: whether a reduction pass computes it (an argument of a reduction, or of one).
  std::vector<bool> reduced_values() const {
    std::vector<bool> reduced(row_.size(), false);
    for (size_t v = row_.size(); v-- > num_inputs();) {
      const KernelInstr& b = instr(v);
      if (!reduced[v] && !is_row_reduction(b.op)) continue;
      for (int a : b.args) reduced[a] = true;
    }
    return reduced;
  }

  void store_pass(const std::vector<Val>& base, const Val& fast) {
    bool any = false;
    for (bool row : row_output_) any = any || !row;
    if (!any) return;
    auto pass = [&] {
      over_inner(fast, lanes(), [&](const std::string& j, int width) { store_outputs(base, j, width); });
    };
    std::optional<Val> safe = row_reciprocals();
    if (!safe) return pass();
    m_.open("scf.if " + safe->name + " {");
    pass();
    m_.middle("} else {");
    by_reciprocal_.assign(row_.size(), false);
    pass();
    m_.close();
  }

  // For each row value that a float division in the store pass divides by, its reciprocal
  // (reciprocals_); and whether all of them are normal numbers. None when there is no such
  // division.
  std::optional<Val> row_reciprocals() {
    reciprocals_.assign(row_.size(), Val{});
    by_reciprocal_.assign(row_.size(), false);
    std::optional<Val> safe;
    const std::vector<int> levels = value_levels();
    const std::vector<bool> reduced = reduced_values();
    for (size_t v = num_inputs(); v < row_.size(); ++v) {
      const KernelInstr& b = instr(v);
      if (row_[v] || b.op != Op::Div || b.args.size() != 2) continue;
      int divisor = b.args[1];
      DType dt = b.compute;
      bool plain = (dt == DType::Float32 || dt == DType::Float64) && spec_.dtype_of(v) == dt &&
                   spec_.dtype_of(b.args[0]) == dt && spec_.dtype_of(divisor) == dt;
      if (!row_[divisor] || !plain || !reciprocal_allowed(static_cast<int>(v), divisor, levels, reduced)) continue;
      const Val& d = row_vals_[divisor];
      if (d.name.empty() || d.ty.width != 0) continue;
      by_reciprocal_[v] = true;
      if (!reciprocals_[divisor].name.empty()) continue;  // made for an earlier division by it
      reciprocals_[divisor] = m_.binary("arith.divf", m_.constant(1.0, d.ty), d);
      double limit = dt == DType::Float32 ? 0x1p126 : 0x1p1022;
      Val magnitude = m_.unary("math.absf", d);
      Val ok = m_.binary("arith.andi", m_.cmp("arith.cmpf", "oge", magnitude, m_.constant(1.0 / limit, d.ty)),
                         m_.cmp("arith.cmpf", "ole", magnitude, m_.constant(limit, d.ty)));
      safe = safe ? m_.binary("arith.andi", *safe, ok) : ok;
    }
    return safe;
  }

  void store_outputs(const std::vector<Val>& base, const std::string& j, int width) {
    std::vector<Val> memo(row_.size());
    // A scaled output's value was stored by the last reduction pass: read back, not recomputed.
    for (size_t out = 0; out < scaled_.size(); ++out)
      if (scaled_[out] >= 0) memo[scaled_[out]] = load_output(out, base[num_inputs() + out], j, width);
    for (size_t out = 0; out < spec_.outputs.size(); ++out)
      if (!row_output_[out])
        store(out, value_at(spec_.outputs[out], base, j, width, memo), base[num_inputs() + out], j, width);
  }

  static std::string join(const std::vector<std::string>& parts) {
    std::string s;
    for (const std::string& p : parts) s += (s.empty() ? "" : ", ") + p;
    return s;
  }

  struct Operand {
    std::string base;
    std::vector<Val> strides;
  };
  const KernelSpec& spec_;
  std::string name_;
  MlirText m_;
  Val c0_, c1_;
  std::vector<Val> sizes_;
  std::vector<Operand> operands_;
  std::vector<bool> by_reciprocal_;  // per value: a division the store pass computes by reciprocals_
  std::vector<bool> row_;         // per value: a row value (row kernels)
  std::vector<bool> row_output_;  // per output: stored once per row
  std::vector<Val> row_vals_;     // the current row's row values, as computed
  std::vector<int> scaled_;       // per output: the value stored before scaling, or -1
  std::vector<Val> reciprocals_;  // per row value: its reciprocal, in the store pass's fast loop
  bool wide_ = false;             // folding again in float64 ([Note: overflow-safe folds])
  KernelConfig config_;
};

}  // namespace

std::string emit_kernel(const KernelSpec& spec, const std::string& name, const KernelConfig& config) {
  return KernelWriter(spec, name, config).write();
}

bool can_emit_reduction(const Node* n) {
  const TensorType& x = n->inputs()[0].type();
  // Integer and bool sums, products, max and min fold in int64 registers; a mean of them is no
  // op of PyTorch's, nor a float output of an integer fold.
  bool integer = !is_floating(x.dtype) && !is_floating(n->type().dtype) && n->op != Op::Mean;
  if (!integer && (!is_floating(x.dtype) || !is_floating(n->type().dtype))) return false;
  // The max of nothing is an error in eager: an empty line stays with the interpreter.
  const Dim& folded = x.shape[folded_dim(n)];
  return !((n->op == Op::Max || n->op == Op::Min) && folded.is_static() && folded.value() == 0);
}

}  // namespace ember::codegen::cpu

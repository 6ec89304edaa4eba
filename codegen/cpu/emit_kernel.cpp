#include "codegen/cpu/emit_kernel.h"

#include <vector>

#include "codegen/cpu/emit_ops.h"

namespace ember::codegen::cpu {

int vector_width(const KernelSpec& spec) {
  bool wide = false;
  for (const KernelInput& in : spec.inputs) wide = wide || register_type(in.dtype) != "f32";
  for (const KernelInstr& b : spec.body) wide = wide || register_type(b.dtype) != "f32";
  return wide ? 8 : 16;
}

namespace {

class KernelWriter {
 public:
  KernelWriter(const KernelSpec& spec, const std::string& name)
      : spec_(spec), name_(name), operands_(spec.inputs.size() + spec.outputs.size()) {}

  std::string write() {
    m_.open("func.func @" + name_ + "(%row_begin: i64, %row_end: i64, %inner_begin: i64, %inner_end: i64, " +
            "%buffers: !llvm.ptr, %meta: !llvm.ptr) {");
    c0_ = m_.int_constant(0, i64());
    c1_ = m_.int_constant(1, i64());
    read_meta();
    Val fast = fast_path_condition();
    m_.open("scf.for %row = %row_begin to %row_end step " + c1_.name + " : i64 {");
    std::vector<Val> base = row_offsets();
    // Whole vectors on the fast path; then scalars over what is left (everything otherwise).
    Val scalar_from = m_.let("scf.if " + fast.name + " -> (i64) {", i64());
    m_.indent_more();
    Val vector_end = vector_loop(base);
    m_.line("scf.yield " + vector_end.name + " : i64");
    m_.middle("} else {");
    m_.line("scf.yield %inner_begin : i64");
    m_.close();
    inner_loop(base, scalar_from.name, "%inner_end");
    m_.close();
    m_.line("return");
    m_.close();
    return "module {\n" + m_.text() + "}\n";
  }

 private:
  static Ty i64() { return {"i64", 0}; }
  int rank() const { return spec_.rank; }
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

  bool reads_along_inner(size_t k) const { return k >= num_inputs() || !spec_.inputs[k].broadcast[rank() - 1]; }

  Val fast_path_condition() {
    Val all = m_.let("arith.constant true", {"i1", 0});
    for (size_t k = 0; k < operands_.size(); ++k) {
      if (!reads_along_inner(k)) continue;
      Val unit = m_.cmp("arith.cmpi", "eq", operands_[k].strides[rank() - 1], c1_);
      all = m_.binary("arith.andi", all, unit);
    }
    return all;
  }

  // Each operand's offset at the start of the row: the row's index split over the outer dims.
  std::vector<Val> row_offsets() {
    std::vector<Val> offsets(operands_.size(), c0_);
    Val rest{"%row", i64()};
    for (int d = rank() - 2; d >= 0; --d) {
      Val i = m_.binary("arith.remsi", rest, sizes_[d]);
      rest = m_.binary("arith.divsi", rest, sizes_[d]);
      for (size_t k = 0; k < operands_.size(); ++k)
        offsets[k] = m_.binary("arith.addi", offsets[k], m_.binary("arith.muli", i, operands_[k].strides[d]));
    }
    return offsets;
  }

  // Vectors over the whole vectors of [inner_begin, inner_end); returns where they end.
  Val vector_loop(const std::vector<Val>& base) {
    int width = vector_width(spec_);
    Val w = m_.int_constant(width, i64());
    Val span = m_.binary("arith.subi", Val{"%inner_end", i64()}, Val{"%inner_begin", i64()});
    Val whole = m_.binary("arith.muli", m_.binary("arith.divsi", span, w), w);
    Val vector_end = m_.binary("arith.addi", Val{"%inner_begin", i64()}, whole);
    m_.open("scf.for %j = %inner_begin to " + vector_end.name + " step " + w.name + " : i64 {");
    body(base, "%j", width);
    m_.close();
    return vector_end;
  }

  void inner_loop(const std::vector<Val>& base, const std::string& from, const std::string& to) {
    std::string j = m_.fresh();
    m_.open("scf.for " + j + " = " + from + " to " + to + " step " + c1_.name + " : i64 {");
    body(base, j, 0);
    m_.close();
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

  void body(const std::vector<Val>& base, const std::string& j, int width) {
    std::vector<Val> values;
    for (size_t k = 0; k < num_inputs(); ++k) values.push_back(load(k, base[k], j, width));
    for (const KernelInstr& instr : spec_.body) {
      std::vector<Val> args;
      std::vector<DType> dtypes;
      for (int a : instr.args) {
        args.push_back(values[a]);
        dtypes.push_back(spec_.dtype_of(a));
      }
      values.push_back(emit_op(m_, instr, args, dtypes));
    }
    for (size_t out = 0; out < spec_.outputs.size(); ++out)
      store(out, values[spec_.outputs[out]], base[num_inputs() + out], j, width);
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
};

}  // namespace

std::string emit_kernel(const KernelSpec& spec, const std::string& name) { return KernelWriter(spec, name).write(); }

}  // namespace ember::codegen::cpu

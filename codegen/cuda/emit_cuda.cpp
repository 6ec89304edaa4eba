#include "codegen/cuda/emit_cuda.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <vector>

#include "ir/error.h"

namespace ember::codegen::cuda {

namespace {

// A value's register type: float (float16 and bfloat16 too), double, or i64 (integers, bool).
std::string reg(DType t) {
  switch (compute_type(t)) {
    case ComputeType::Float32: return "float";
    case ComputeType::Float64: return "double";
    case ComputeType::Int64: return "i64";
  }
  return "?";
}
bool is_float_reg(const std::string& r) { return r != "i64"; }

std::string storage(DType t) {
  switch (t) {
    case DType::Float32: return "float";
    case DType::Float64: return "double";
    case DType::Float16:
    case DType::BFloat16: return "unsigned short";
    case DType::Bool:
    case DType::UInt8: return "unsigned char";
    case DType::Int8: return "signed char";
    case DType::Int16: return "short";
    case DType::Int32: return "int";
    case DType::Int64: return "i64";
  }
  return "?";
}

std::string int_literal(int64_t v) {
  if (v == std::numeric_limits<int64_t>::min()) return "((i64)0x8000000000000000ULL)";
  return "((i64)" + std::to_string(v) + "LL)";
}

// A float constant by its bits, so that it is exact whatever the printing.
std::string float_literal(double v, const std::string& r) {
  char buf[64];
  if (r == "float") {
    float f = static_cast<float>(v);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    std::snprintf(buf, sizeof buf, "ember_float(0x%08" PRIx32 "u)", bits);
  } else {
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    std::snprintf(buf, sizeof buf, "ember_double(0x%016" PRIx64 "ULL)", bits);
  }
  return buf;
}

std::string constant(double v, const std::string& r) { return is_float_reg(r) ? float_literal(v, r) : int_literal(int64_t(v)); }

// `e` (of register type `from`) in register type `to`, as element::load reads a value.
std::string to_register(const std::string& e, const std::string& from, const std::string& to) {
  if (from == to) return e;
  if (is_float_reg(to)) return "((" + to + ")(" + e + "))";
  return "ember_saturate(" + e + ")";
}

// `e` (register type `from`) converted to dtype `to` as the interpreter stores it, held in
// `to`'s register type: floats round, float to integer truncates and saturates (NaN to 0), an
// integer wraps to its width, anything to bool is != 0.
std::string convert_dtype(const std::string& e, const std::string& from, DType to) {
  if (to == DType::Float16) return "ember_round_f16(" + to_register(e, from, "float") + ")";
  if (to == DType::BFloat16) return "ember_round_bf16(" + to_register(e, from, "float") + ")";
  if (is_floating(to)) return to_register(e, from, reg(to));
  if (to == DType::Bool) return "((" + e + ") != 0 ? (i64)1 : (i64)0)";
  std::string i = to_register(e, from, "i64");
  switch (to) {
    case DType::Int8: return "((i64)(signed char)(" + i + "))";
    case DType::UInt8: return "((i64)(unsigned char)(" + i + "))";
    case DType::Int16: return "((i64)(short)(" + i + "))";
    case DType::Int32: return "((i64)(int)(" + i + "))";
    default: return i;
  }
}

std::string identity(Op op, const std::string& r) {
  if (op == Op::Sum || op == Op::Mean) return constant(0, r);
  if (op == Op::Prod) return constant(1, r);
  bool max = op == Op::Max;
  if (is_float_reg(r)) return max ? "(-EMBER_INF)" : "EMBER_INF";
  return int_literal(max ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max());
}

// acc folded with x as the interpreter folds them ([Note: reduction semantics]); `x` is a name.
std::string combine(Op op, const std::string& acc, const std::string& x, const std::string& r) {
  bool f = is_float_reg(r);
  if (op == Op::Sum || op == Op::Mean) return f ? acc + " + " + x : "ember_wrap_add(" + acc + ", " + x + ")";
  if (op == Op::Prod) return f ? acc + " * " + x : "ember_wrap_mul(" + acc + ", " + x + ")";
  const char* beyond = op == Op::Max ? " > " : " < ";
  if (!f) return "(" + x + beyond + acc + " ? " + x + " : " + acc + ")";
  return "((" + x + beyond + acc + " || ember_nan(" + x + ")) && !ember_nan(" + acc + ") ? " + x + " : " + acc + ")";
}

// The op on arguments already in the compute register type `t`.
std::string op_expr(const KernelInstr& instr, const std::vector<std::string>& a, const std::string& t) {
  const bool f = is_float_reg(t);
  auto call = [&](const char* fn) { return std::string(fn) + "(" + a[0] + ")"; };
  auto call2 = [&](const char* fn) { return std::string(fn) + "(" + a[0] + ", " + a[1] + ")"; };
  auto boolean = [&](const std::string& c) { return "((" + t + ")(" + c + "))"; };
  auto infix = [&](const char* o) { return "(" + a[0] + " " + o + " " + a[1] + ")"; };
  switch (instr.op) {
    case Op::Neg: return call("ember_neg");
    case Op::Abs: return call("ember_abs");
    case Op::Exp: return call("ember_exp");
    case Op::Exp2: return call("ember_exp2");
    case Op::Log: return call("ember_log");
    case Op::Log2: return call("ember_log2");
    case Op::Log1p: return call("ember_log1p");
    case Op::Expm1: return call("ember_expm1");
    case Op::Sqrt: return call("ember_sqrt");
    case Op::Rsqrt: return "((" + t + ")1 / ember_sqrt(" + a[0] + "))";
    case Op::Sin: return call("ember_sin");
    case Op::Cos: return call("ember_cos");
    case Op::Tan: return call("ember_tan");
    case Op::Tanh: return call("ember_tanh");
    case Op::Erf: return call("ember_erf");
    case Op::Sigmoid: return call("ember_sigmoid");
    case Op::Silu: return "(" + a[0] + " * ember_sigmoid(" + a[0] + "))";
    case Op::Gelu: return call(attr_string(instr.attrs, "approximate") == "tanh" ? "ember_gelu_tanh" : "ember_gelu");
    case Op::Relu: return call("ember_relu");
    case Op::Floor: return call("ember_floor");
    case Op::Ceil: return call("ember_ceil");
    case Op::Round: return call("ember_round");
    case Op::Trunc: return call("ember_trunc");
    case Op::Sign: return call("ember_sign");
    case Op::Reciprocal: return "((" + t + ")1 / " + a[0] + ")";
    case Op::LogicalNot: return boolean(a[0] + " == 0");
    case Op::IsNan: return boolean("ember_nan(" + a[0] + ")");
    case Op::IsInf: return f ? boolean("ember_isinf(" + a[0] + ")") : boolean("false");
    case Op::Cast: return a[0];
    case Op::Add: return f ? infix("+") : call2("ember_wrap_add");
    case Op::Sub: return f ? infix("-") : call2("ember_wrap_sub");
    case Op::Mul: return f ? infix("*") : call2("ember_wrap_mul");
    case Op::Div: return infix("/");
    case Op::Pow: return call2("ember_pow");
    case Op::Maximum: return call2("ember_maximum");
    case Op::Minimum: return call2("ember_minimum");
    case Op::Eq: return boolean(a[0] + " == " + a[1]);
    case Op::Ne: return boolean(a[0] + " != " + a[1]);
    case Op::Lt: return boolean(a[0] + " < " + a[1]);
    case Op::Le: return boolean(a[0] + " <= " + a[1]);
    case Op::Gt: return boolean(a[0] + " > " + a[1]);
    case Op::Ge: return boolean(a[0] + " >= " + a[1]);
    case Op::LogicalAnd: return boolean("(" + a[0] + " != 0) && (" + a[1] + " != 0)");
    case Op::LogicalOr: return boolean("(" + a[0] + " != 0) || (" + a[1] + " != 0)");
    case Op::LogicalXor: return boolean("(" + a[0] + " != 0) != (" + a[1] + " != 0)");
    case Op::BitwiseAnd: return infix("&");
    case Op::BitwiseOr: return infix("|");
    case Op::BitwiseXor: return infix("^");
    case Op::Where: return "((" + a[0] + ") != 0 ? " + a[1] + " : " + a[2] + ")";
    case Op::Clamp: return "ember_clamp(" + a[0] + ", " + a[1] + ", " + a[2] + ")";
    default: break;
  }
  EMBER_CHECK(false, "the CUDA backend cannot emit '", op_name(instr.op), "'");
  return a[0];
}

bool has_cuda_form(const KernelInstr& instr) {
  if (is_row_reduction(instr.op) || instr.op == Op::Constant) return true;
  if (!op_info(instr.op).is_elementwise()) return false;
  bool integer = compute_type(instr.compute) == ComputeType::Int64;
  switch (instr.op) {
    case Op::FloorDivide:
    case Op::Remainder: return false;  // Python's rounding; integers raise on zero
    case Op::Pow: return !integer;     // integers raise on negative powers
    case Op::BitwiseAnd:
    case Op::BitwiseOr:
    case Op::BitwiseXor: return integer;
    default: break;
  }
  std::vector<std::string> a(instr.args.size(), "x");
  try {
    (void)op_expr(instr, a, reg(instr.compute));
  } catch (const Error&) {
    return false;
  }
  return true;
}

// Where values live while a piece of the kernel runs: each operand's offset there, and the
// values already computed (by name), falling back to the enclosing scope (a row's line values
// inside its element loop).
struct Scope {
  const Scope* parent = nullptr;
  std::vector<std::string> offsets;  // per operand: an expression
  std::map<int, std::string> values;
  std::vector<std::string> elements;  // per operand, when set: its element itself (a vector's lane)
  const std::string* find(int v) const {
    for (const Scope* s = this; s; s = s->parent)
      if (auto it = s->values.find(v); it != s->values.end()) return &it->second;
    return nullptr;
  }
};

class CudaWriter {
 public:
  CudaWriter(const KernelSpec& spec, const std::string& name)
      : spec_(spec), name_(name), inputs_(static_cast<int>(spec.inputs.size())),
        operands_(inputs_ + static_cast<int>(spec.outputs.size())),
        line_(spec.reduces() ? spec.line_values() : std::vector<bool>(inputs_ + spec.body.size(), false)) {}

  std::string write() {
    out_ += "\nstruct " + name_ + "_params {\n  void* buffer[" + std::to_string(operands_) + "];\n  i64 meta[" +
            std::to_string(spec_.rank * (1 + operands_)) + "];\n};\n\n";
    open("extern \"C\" __global__ void __launch_bounds__(" + std::to_string(kBlockThreads) + ") " + name_ + "(" +
         name_ + "_params p) {");
    if (!spec_.reduces()) elementwise();
    else if (spec_.columns) columns();
    else rows();
    close();
    emulation_shim();
    return out_;
  }

 private:
  int rank() const { return spec_.rank; }
  std::string size(int d) const { return "p.meta[" + std::to_string(d) + "]"; }
  std::string stride(int k, int d) const { return "p.meta[" + std::to_string(rank() * (1 + k) + d) + "]"; }
  const KernelInstr& instr(int v) const { return spec_.body[v - inputs_]; }
  std::string value_reg(int v) const { return reg(spec_.dtype_of(v)); }

  void line(const std::string& s) { out_ += std::string(2 * indent_, ' ') + s + "\n"; }
  void open(const std::string& s) {
    line(s);
    ++indent_;
  }
  void close(const std::string& s = "}") {
    --indent_;
    line(s);
  }
  std::string fresh(const char* stem) { return stem + std::to_string(next_++); }

  // Operand k's offset at index `i` (a row or element index) split over dims [0, end) of the
  // domain, added to `base`; emitted as one loop.
  void offsets_of(const std::string& index, int end, std::vector<std::string>& offsets) {
    line("i64 rest_" + index + " = " + index + ";");
    for (int k = 0; k < operands_; ++k) line("i64 " + offsets[k] + " = 0;");
    open("for (int d = " + std::to_string(end - 1) + "; d >= 0; --d) {");
    line("i64 at = rest_" + index + " % p.meta[d];");
    line("rest_" + index + " /= p.meta[d];");
    for (int k = 0; k < operands_; ++k)
      line(offsets[k] + " += at * p.meta[" + std::to_string(rank()) + " * " + std::to_string(1 + k) + " + d];");
    close();
  }

  // The name of value v in `scope`, computing it (and what it needs) there first.
  std::string value(int v, Scope& scope) {
    if (const std::string* known = scope.find(v)) return *known;
    std::string name = fresh("v");
    if (v < inputs_) {
      DType dt = spec_.inputs[v].dtype;
      std::string at = element(v, scope);
      std::string loaded = dt == DType::Float16  ? "ember_f16_to_f32(" + at + ")"
                           : dt == DType::BFloat16 ? "ember_bf16_to_f32(" + at + ")"
                                                   : "(" + reg(dt) + ")" + at;
      line(reg(dt) + " " + name + " = " + loaded + ";");
    } else {
      const KernelInstr& in = instr(v);
      EMBER_CHECK(!is_row_reduction(in.op), "a reduction's value is a line value, computed per line");
      line(reg(in.dtype) + " " + name + " = " + compute(in, scope) + ";");
    }
    scope.values[v] = name;
    return name;
  }

  // An instruction's result: its arguments in its compute type, the op, the result as its dtype.
  std::string compute(const KernelInstr& in, Scope& scope) {
    std::string t = reg(in.compute);
    if (in.op == Op::Constant) {
      const Literal& lit = attr_literal(in.attrs, "value");
      return is_floating(in.dtype) ? constant(lit.floats.at(0), reg(in.dtype)) : int_literal(lit.ints.at(0));
    }
    std::vector<std::string> a;
    for (size_t i = 0; i < in.args.size(); ++i) {
      int arg = in.args[i];
      std::string e = value(arg, scope), from = value_reg(arg);
      if (in.op == Op::Where && i == 0) {  // the condition is read as it is
        a.push_back(e);
        continue;
      }
      e = to_register(e, from, t);
      if (spec_.dtype_of(arg) != in.compute) e = convert_dtype(e, t, in.compute);
      a.push_back(e);
    }
    return convert_dtype(op_expr(in, a, t), t, in.dtype);
  }

  void store(int out, Scope& scope) {
    int v = spec_.outputs[out];
    DType dt = spec_.dtype_of(v);
    std::string e = value(v, scope);
    std::string stored = dt == DType::Float16    ? "ember_f32_to_f16(" + e + ")"
                         : dt == DType::BFloat16 ? "ember_f32_to_bf16(" + e + ")"
                         : dt == DType::Bool     ? "(unsigned char)(" + e + " != 0)"
                                                 : "(" + storage(dt) + ")(" + e + ")";
    line(element(inputs_ + out, scope) + " = " + stored + ";");
  }

  // Operand k's element where `scope` is, as stored (an lvalue for an output).
  std::string element(int k, const Scope& scope) const {
    if (!scope.elements.empty()) return scope.elements[k];
    std::string type = k < inputs_ ? "const " + storage(operand_dtype(k)) : storage(operand_dtype(k));
    return "((" + type + "*)p.buffer[" + std::to_string(k) + "])[" + scope.offsets[k] + "]";
  }
  DType operand_dtype(int k) const {
    return k < inputs_ ? spec_.inputs[k].dtype : spec_.dtype_of(spec_.outputs[k - inputs_]);
  }

  // ---- elementwise: a grid-stride loop over the domain's elements

  // [Note: flat elementwise kernels]
  // Most launches read and write whole contiguous arrays, where an element's offset in every
  // operand is its index in the domain: the kernel checks that first (each operand's strides are
  // the domain's contiguous strides, or, for an input, all 0: one value for every element) and
  // then skips the per-dim division that a strided or broadcast operand needs. When, in
  // addition, every array starts on a multiple of its vector's size, each thread moves
  // `lanes` elements at once (16 bytes of the widest operand: one ld.global.v4 for float32), the
  // tail that is not a whole vector element by element.
  void elementwise() {
    line("i64 count = 1;");
    line("for (int d = 0; d < " + std::to_string(rank()) + "; ++d) count *= p.meta[d];");
    line("const i64 first = (i64)blockIdx.x * (i64)blockDim.x + (i64)threadIdx.x, step = (i64)gridDim.x * (i64)blockDim.x;");
    if (inputs_ <= kMaxFlatInputs) flat_paths();
    open("for (i64 i = first; i < count; i += step) {");
    Scope scope;
    for (int k = 0; k < operands_; ++k) scope.offsets.push_back(fresh("o"));
    offsets_of("i", rank(), scope.offsets);
    for (size_t out = 0; out < spec_.outputs.size(); ++out) store(static_cast<int>(out), scope);
    close();
  }

  // The flat launches' paths, which return; the strided loop follows them.
  void flat_paths() {
    layout_checks();
    open("if (flat && aligned) {");
    flat_vectors();
    close("}");
    open("if (flat) {");
    open(std::string("for (i64 i = aligned ? count / ") + std::to_string(lanes()) + " * " + std::to_string(lanes()) +
         " + first : first; i < count; i += step) {");
    Scope flat_scope;
    for (int k = 0; k < operands_; ++k)
      flat_scope.offsets.push_back(k < inputs_ ? "(" + is_splat(k) + " ? 0 : i)" : "i");
    for (size_t out = 0; out < spec_.outputs.size(); ++out) store(static_cast<int>(out), flat_scope);
    close();
    line("return;");
    close();
  }

  // Whether input k is one value for every element: a bit of `splat`, which has 64.
  static constexpr int kMaxFlatInputs = 64;
  static std::string is_splat(int k) { return "((splat >> " + std::to_string(k) + ") & 1ull)"; }

  // Elements per vector: 16 bytes of the widest operand.
  int lanes() const {
    size_t widest = 1;
    for (int k = 0; k < operands_; ++k) widest = std::max(widest, itemsize(operand_dtype(k)));
    return static_cast<int>(16 / widest);
  }

  // Defines `flat` (every operand contiguous over the domain, or an input of one value, whose
  // bit is set in `splat`) and `aligned` (every array but those starts on its vector's size).
  void layout_checks() {
    line("u64 splat = 0ull;");
    line("bool flat = true, aligned = true;");
    open("for (int k = 0; k < " + std::to_string(operands_) + "; ++k) {");
    line("i64 want = 1;");
    line("bool contiguous = true, single = true;");
    open("for (int d = " + std::to_string(rank() - 1) + "; d >= 0; --d) {");
    line("const i64 s = p.meta[" + std::to_string(rank()) + " * (1 + k) + d];");
    line("if (p.meta[d] != 1) { contiguous = contiguous && s == want; single = single && s == 0; }");
    line("want *= p.meta[d];");
    close();
    line("if (!contiguous && single && k < " + std::to_string(inputs_) + ") splat |= 1ull << k;");
    line("flat = flat && (contiguous || (single && k < " + std::to_string(inputs_) + "));");
    close();
    for (int k = 0; k < operands_; ++k) {
      size_t bytes = itemsize(operand_dtype(k)) * static_cast<size_t>(lanes());
      std::string check = "(u64)p.buffer[" + std::to_string(k) + "] % " + std::to_string(bytes) + " == 0";
      if (k < inputs_) check = "(" + is_splat(k) + " || " + check + ")";
      line("aligned = aligned && " + check + ";");
    }
  }

  std::string vector_type(int k) const {
    return "ember_vec<" + storage(operand_dtype(k)) + ", " + std::to_string(lanes()) + ">";
  }

  // The whole vectors of a flat, aligned launch: each input's vector loaded (or its one value),
  // each lane computed, each output's vector stored.
  void flat_vectors() {
    const int n = lanes();
    std::vector<std::string> one(inputs_);
    for (int k = 0; k < inputs_; ++k) {
      one[k] = fresh("one");
      line(storage(operand_dtype(k)) + " " + one[k] + " = " + is_splat(k) + " ? ((const " +
           storage(operand_dtype(k)) + "*)p.buffer[" + std::to_string(k) + "])[0] : (" + storage(operand_dtype(k)) + ")0;");
    }
    open("for (i64 q = first; q < count / " + std::to_string(n) + "; q += step) {");
    std::vector<std::string> vec(operands_);
    for (int k = 0; k < operands_; ++k) {
      vec[k] = fresh("vec");
      line(vector_type(k) + " " + vec[k] + ";");
      if (k < inputs_)
        line("if (!" + is_splat(k) + ") " + vec[k] + " = ember_vec_at((const " + vector_type(k) +
             "*)p.buffer[" + std::to_string(k) + "], q);");
    }
    open("for (int l = 0; l < " + std::to_string(n) + "; ++l) {");
    Scope lane;
    for (int k = 0; k < operands_; ++k)
      lane.elements.push_back(k < inputs_ ? "(" + is_splat(k) + " ? " + one[k] + " : " + vec[k] + ".v[l])"
                                          : vec[k] + ".v[l]");
    for (size_t out = 0; out < spec_.outputs.size(); ++out) store(static_cast<int>(out), lane);
    close();
    for (int k = inputs_; k < operands_; ++k)
      line("ember_vec_at((" + vector_type(k) + "*)p.buffer[" + std::to_string(k) + "], q) = " + vec[k] + ";");
    close();
  }

  // ---- levels of reductions ([Note: row kernels] in codegen/cpu/emit_kernel.cpp)

  // The outputs stored at every element of the line (`along`), and those stored once per line.
  std::pair<std::vector<int>, std::vector<int>> outputs_by_line() const {
    std::vector<int> along, once;
    for (size_t out = 0; out < spec_.outputs.size(); ++out)
      (line_[spec_.outputs[out]] ? once : along).push_back(static_cast<int>(out));
    return {along, once};
  }

  std::vector<int> levels() const {
    std::vector<int> level(inputs_, 0);
    for (const KernelInstr& b : spec_.body) {
      int l = 0;
      for (int a : b.args) l = std::max(l, level[a]);
      level.push_back(is_row_reduction(b.op) ? l + 1 : l);
    }
    return level;
  }
  std::vector<int> reductions_at(const std::vector<int>& level, int l) const {
    std::vector<int> r;
    for (int v = inputs_; v < static_cast<int>(level.size()); ++v)
      if (level[v] == l && is_row_reduction(instr(v).op)) r.push_back(v);
    return r;
  }
  // Line values of level l (not reductions), computed in the line's scope.
  void line_values_at(const std::vector<int>& level, int l, Scope& line_scope) {
    for (int v = 0; v < static_cast<int>(level.size()); ++v)
      if (line_[v] && level[v] == l && (v < inputs_ || !is_row_reduction(instr(v).op))) value(v, line_scope);
  }
  std::string acc_reg(int r) const { return reg(instr(r).compute); }
  // Whether reduction r folds again in float64 when its float32 result is suspect.
  bool widens(int r) const {
    Op op = instr(r).op;
    return acc_reg(r) == "float" && (op == Op::Sum || op == Op::Mean || op == Op::Prod);
  }
  std::string suspect(int r, const std::string& acc) const {
    std::string a = "ember_abs(" + acc + ")";
    if (instr(r).op == Op::Prod) return "!(" + a + " >= 1.1754943508222875e-38f && " + a + " < EMBER_INF)";
    return "!(" + a + " < EMBER_INF)";
  }
  // A reduction's folded value as its instruction's result: a mean divides by the line's length,
  // then the value is held as its dtype holds it.
  std::string finish(int r, const std::string& acc, const std::string& acc_type, const std::string& length) {
    std::string e = acc;
    if (instr(r).op == Op::Mean) e = "(" + acc + " / (" + acc_type + ")" + length + ")";
    return convert_dtype(e, acc_type, instr(r).dtype);
  }
  // A loop (`header`, over index `index`) folding each reduction's argument into its accumulator
  // (of type types[i]); `at` sets the operands' offsets at the index.
  using At = std::function<void(Scope&, const std::string&)>;
  void fold_loop(const std::vector<int>& reds, const std::vector<std::string>& accs, const std::vector<std::string>& types,
                 const std::string& header, const std::string& index, const At& at, Scope& line_scope) {
    open(header);
    Scope element{&line_scope, {}, {}, {}};
    at(element, index);
    for (size_t i = 0; i < reds.size(); ++i) {
      std::string x = value(instr(reds[i]).args[0], element);
      x = to_register(x, value_reg(instr(reds[i]).args[0]), types[i]);
      std::string xn = fresh("x");
      line(types[i] + " " + xn + " = " + x + ";");
      line(accs[i] + " = " + combine(instr(reds[i]).op, accs[i], xn, types[i]) + ";");
    }
    close();
  }

  // ---- row kernels: a warp or a block per row

  // [Note: a warp or a block per row]
  // A row of at most kWarpRowLimit elements is folded by one warp: its 32 lanes combine by
  // shuffles alone, with no shared memory and no barrier, and a block of 256 threads serves 8
  // rows at once, as softmax over short rows wants. A longer row takes the whole block, whose
  // warps combine through shared memory. Both are in every row kernel and the row's length
  // (an argument) picks one per launch, so one kernel still serves every size; grid_of sizes
  // the grid to match. In the emulated tests each launch runs both ways.
  struct RowTeam {
    bool warp;
    std::string lane() const { return warp ? "(threadIdx.x & 31)" : "threadIdx.x"; }
    std::string width() const { return warp ? "32" : "blockDim.x"; }
  };

  std::vector<std::string> row_offsets_at(const std::vector<std::string>& base, const std::string& j) const {
    std::vector<std::string> o;
    for (int k = 0; k < operands_; ++k) o.push_back("(" + base[k] + " + " + j + " * " + stride(k, rank() - 1) + ")");
    return o;
  }

  // Every lane of the warp ends with the warp's total.
  void warp_reduce(int r, const std::string& acc) {
    std::string t = acc_reg(r);
    open("for (int o = 16; o > 0; o >>= 1) {");
    line(t + " other = __shfl_xor_sync(0xffffffffu, " + acc + ", o);");
    line(acc + " = " + combine(instr(r).op, acc, "other", t) + ";");
    close();
  }

  // Every thread of the block ends with the block's total.
  void block_reduce(int r, const std::string& acc) {
    std::string t = acc_reg(r), shared = t == "float" ? "ember_red_f" : t == "double" ? "ember_red_d" : "ember_red_i";
    Op op = instr(r).op;
    warp_reduce(r, acc);
    line("if ((threadIdx.x & 31) == 0) " + shared + "[threadIdx.x >> 5] = " + acc + ";");
    line("__syncthreads();");
    line(acc + " = " + identity(op, t) + ";");
    open("for (int w = 0; w < (int)(blockDim.x >> 5); ++w) {");
    line(t + " other = " + shared + "[w];");
    line(acc + " = " + combine(op, acc, "other", t) + ";");
    close();
    line("__syncthreads();");
  }

  void rows() {
    const int r = rank();
    line("__shared__ float ember_red_f[32];");
    line("__shared__ double ember_red_d[32];");
    line("__shared__ i64 ember_red_i[32];");
    line("__shared__ double ember_redo;");
    line("const i64 inner = " + size(r - 1) + ";");
    line("i64 rows = 1;");
    line("for (int d = 0; d < " + std::to_string(r - 1) + "; ++d) rows *= p.meta[d];");
    open("if (inner <= ember_warp_row_limit(" + std::to_string(kWarpRowLimit) + ")) {");
    row_loop(RowTeam{true});
    line("return;");
    close();
    row_loop(RowTeam{false});
  }

  void row_loop(const RowTeam& team) {
    const int r = rank();
    if (team.warp)
      open("for (i64 row = (i64)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); row < rows; "
           "row += (i64)gridDim.x * (blockDim.x >> 5)) {");
    else
      open("for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {");
    std::vector<std::string> base;
    for (int k = 0; k < operands_; ++k) base.push_back(fresh("b"));
    offsets_of("row", r - 1, base);
    Scope row_scope;
    row_scope.offsets = base;
    std::vector<int> level = levels();
    int max_level = *std::max_element(level.begin(), level.end());
    line_values_at(level, 0, row_scope);
    auto at = [&](Scope& s, const std::string& j) { s.offsets = row_offsets_at(base, j); };
    const std::string over_row = "for (i64 j = " + team.lane() + "; j < inner; j += " + team.width() + ") {";
    for (int l = 1; l <= max_level; ++l) {
      std::vector<int> reds = reductions_at(level, l);
      std::vector<std::string> accs, types;
      for (int red : reds) {
        accs.push_back(fresh("acc"));
        types.push_back(acc_reg(red));
        line(types.back() + " " + accs.back() + " = " + identity(instr(red).op, types.back()) + ";");
      }
      fold_loop(reds, accs, types, over_row, "j", at, row_scope);
      for (size_t i = 0; i < reds.size(); ++i) {
        if (team.warp) warp_reduce(reds[i], accs[i]);
        else block_reduce(reds[i], accs[i]);
        finish_line_value(reds[i], accs[i], "inner", row_scope, [&](const std::string& acc) {
          // The second fold in the row's order, as the interpreter folds: each lane of a warp
          // folds the row itself (rows are short, and this is the rare path); in a block,
          // thread 0 alone, and the block reads its result.
          if (team.warp) {
            line("double " + acc + " = " + identity(instr(reds[i]).op, "double") + ";");
            fold_loop({reds[i]}, {acc}, {"double"}, "for (i64 j = 0; j < inner; ++j) {", "j", at, row_scope);
            return;
          }
          open("if (threadIdx.x == 0) {");
          line("ember_redo = " + identity(instr(reds[i]).op, "double") + ";");
          fold_loop({reds[i]}, {"ember_redo"}, {"double"}, "for (i64 j = 0; j < inner; ++j) {", "j", at, row_scope);
          close();
          line("__syncthreads();");
          line("double " + acc + " = ember_redo;");
          line("__syncthreads();");
        });
      }
      line_values_at(level, l, row_scope);
    }
    // The outputs over the row, then the row outputs once.
    auto [along, once] = outputs_by_line();
    if (!along.empty()) {
      open(over_row);
      Scope element{&row_scope, row_offsets_at(base, "j"), {}, {}};
      for (int out : along) store(out, element);
      close();
    }
    if (!once.empty()) {
      open("if (" + team.lane() + " == 0) {");
      Scope here{&row_scope, base, {}, {}};
      for (int out : once) store(out, here);
      close();
    }
    if (!team.warp) line("__syncthreads();  // the shared arrays serve the next row");
    close();
  }

  // Defines reduction `red`'s line value from its folded accumulator; a widening reduction whose
  // result is suspect takes the second fold that `refold` emits (defining a double of the name
  // it is given) instead ([Note: overflow-safe folds]).
  void finish_line_value(int red, const std::string& acc, const std::string& length, Scope& line_scope,
                         const std::function<void(const std::string&)>& refold) {
    std::string name = fresh("v"), t = reg(instr(red).dtype);
    line(t + " " + name + " = " + finish(red, acc, acc_reg(red), length) + ";");
    if (widens(red)) {
      open("if (" + suspect(red, acc) + ") {");
      std::string wide = fresh("wide");
      refold(wide);
      line(name + " = " + finish(red, wide, "double", length) + ";");
      close();
    }
    line_scope.values[red] = name;
  }

  // ---- column kernels: a thread per column

  void columns() {
    const int r = rank();
    line("const i64 down = " + size(r - 2) + ", inner = " + size(r - 1) + ";");
    line("i64 outer = 1;");
    line("for (int d = 0; d < " + std::to_string(r - 2) + "; ++d) outer *= p.meta[d];");
    open("for (i64 t = (i64)blockIdx.x * (i64)blockDim.x + (i64)threadIdx.x; t < outer * inner; "
         "t += (i64)gridDim.x * (i64)blockDim.x) {");
    line("i64 column = t % inner, row = t / inner;");
    std::vector<std::string> base;
    for (int k = 0; k < operands_; ++k) base.push_back(fresh("b"));
    offsets_of("row", r - 2, base);
    for (int k = 0; k < operands_; ++k) line(base[k] + " += column * " + stride(k, r - 1) + ";");
    Scope column_scope;
    column_scope.offsets = base;
    std::vector<int> level = levels();
    int max_level = *std::max_element(level.begin(), level.end());
    line_values_at(level, 0, column_scope);
    auto at = [&](Scope& s, const std::string& i) {
      for (int k = 0; k < operands_; ++k) s.offsets.push_back("(" + base[k] + " + " + i + " * " + stride(k, r - 2) + ")");
    };
    for (int l = 1; l <= max_level; ++l) {
      std::vector<int> reds = reductions_at(level, l);
      std::vector<std::string> accs, parts, types;
      for (int red : reds) {
        accs.push_back(fresh("acc"));
        parts.push_back(fresh("part"));
        types.push_back(acc_reg(red));
        line(types.back() + " " + accs.back() + " = " + identity(instr(red).op, types.back()) + ";");
      }
      // In blocks of 256 rows, each from the identity, then into the total (the CPU's blocks).
      open("for (i64 r0 = 0; r0 < down; r0 += 256) {");
      for (size_t i = 0; i < reds.size(); ++i)
        line(types[i] + " " + parts[i] + " = " + identity(instr(reds[i]).op, types[i]) + ";");
      fold_loop(reds, parts, types, "for (i64 i = r0; i < (r0 + 256 < down ? r0 + 256 : down); ++i) {", "i", at,
                column_scope);
      for (size_t i = 0; i < reds.size(); ++i)
        line(accs[i] + " = " + combine(instr(reds[i]).op, accs[i], parts[i], types[i]) + ";");
      close();
      for (size_t i = 0; i < reds.size(); ++i)
        finish_line_value(reds[i], accs[i], "down", column_scope, [&](const std::string& wide) {
          line("double " + wide + " = " + identity(instr(reds[i]).op, "double") + ";");
          fold_loop({reds[i]}, {wide}, {"double"}, "for (i64 i = 0; i < down; ++i) {", "i", at, column_scope);
        });
      line_values_at(level, l, column_scope);
    }
    auto [along, once] = outputs_by_line();
    if (!along.empty()) {
      open("for (i64 i = 0; i < down; ++i) {");
      Scope element{&column_scope, {}, {}, {}};
      at(element, "i");
      for (int out : along) store(out, element);
      close();
    }
    for (int out : once) store(out, column_scope);
    close();
  }

  // Under EMBER_CUDA_EMULATION: NAME_emulate(buffers, meta, grid, threads, warp_row_limit) runs
  // the kernel with tests/unit/cuda_emulation.h, in blocks of `threads` (a multiple of 32), rows
  // of at most `warp_row_limit` elements a warp each (a negative limit: the kernel's own).
  void emulation_shim() {
    int meta = rank() * (1 + operands_);
    out_ += "\n#ifdef EMBER_CUDA_EMULATION\nextern \"C\" void " + name_ +
            "_emulate(void* const* buffers, const long long* meta, long long grid, int threads, long long warp_row_limit) {\n  " +
            name_ + "_params p;\n" +
            "  ember_emulation::warp_row_limit = warp_row_limit;\n" +
            "  for (int k = 0; k < " + std::to_string(operands_) + "; ++k) p.buffer[k] = buffers[k];\n" +
            "  for (int m = 0; m < " + std::to_string(meta) + "; ++m) p.meta[m] = meta[m];\n" +
            "  ember_emulation::launch((unsigned)grid, (unsigned)threads, [](void* a) { " + name_ +
            "(*(" + name_ + "_params*)a); }, &p);\n}\n#endif\n";
  }

  const KernelSpec& spec_;
  std::string name_;
  int inputs_, operands_;
  std::vector<bool> line_;
  std::string out_;
  int indent_ = 0;
  int next_ = 0;
};

}  // namespace

std::string emit_cuda_kernel(const KernelSpec& spec, const std::string& name) { return CudaWriter(spec, name).write(); }

std::string emit_cuda(const KernelSpec& spec, const std::string& name) { return prelude() + emit_cuda_kernel(spec, name); }

bool can_emit_cuda(const KernelSpec& spec) {
  return std::all_of(spec.body.begin(), spec.body.end(), has_cuda_form);
}

int64_t grid_of(const KernelSpec& spec, const int64_t* sizes, int64_t max_blocks) {
  int64_t count = 1;
  for (int d = 0; d < spec.rank; ++d) count *= sizes[d];
  const bool rows = spec.reduces() && !spec.columns;
  if (rows) count /= std::max<int64_t>(sizes[spec.rank - 1], 1);
  else if (spec.reduces()) count = count / std::max<int64_t>(sizes[spec.rank - 2], 1);  // a thread per column
  int64_t blocks = ceil_div(count, kBlockThreads);
  if (rows) blocks = sizes[spec.rank - 1] <= kWarpRowLimit ? ceil_div(count, kBlockThreads / 32) : count;
  return std::clamp<int64_t>(blocks, 1, max_blocks);
}

}  // namespace ember::codegen::cuda

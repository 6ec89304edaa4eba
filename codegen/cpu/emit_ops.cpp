#include "codegen/cpu/emit_ops.h"

#include <iterator>
#include <limits>
#include <vector>

#include "codegen/cpu/jit.h"
#include "ir/error.h"

namespace ember::codegen::cpu {

namespace {

int width_of(DType t) {
  switch (t) {
    case DType::Bool: return 1;
    case DType::Int8:
    case DType::UInt8: return 8;
    case DType::Int16: return 16;
    case DType::Int32: return 32;
    default: return 64;
  }
}

// An exact integer (i64) wrapped to an integer dtype's width and back: sign- or zero-extended.
Val wrap_to(MlirText& m, const Val& v, DType to) {
  if (to == DType::Int64) return v;
  if (to == DType::Bool) {
    Val zero = m.int_constant(0, v.ty);
    return m.convert("arith.extui", m.cmp("arith.cmpi", "ne", v, zero), v.ty);
  }
  Ty narrow = v.ty.with("i" + std::to_string(width_of(to)));
  Val n = m.convert("arith.trunci", v, narrow);
  return m.convert(to == DType::UInt8 ? "arith.extui" : "arith.extsi", n, v.ty);
}

// A float to int64 as the interpreter does: toward zero, saturating, NaN to 0.
Val saturate_to_i64(MlirText& m, const Val& v) {
  Ty i64 = v.ty.with("i64");
  Val raw = m.convert("arith.fptosi", v, i64);  // poison out of range: selected away below
  double limit = 9223372036854775808.0;         // 2^63
  Val hi = m.cmp("arith.cmpf", "oge", v, m.constant(limit, v.ty));
  Val lo = m.cmp("arith.cmpf", "olt", v, m.constant(-limit, v.ty));
  Val nan = m.cmp("arith.cmpf", "uno", v, v);
  Val r = m.select(hi, m.int_constant(std::numeric_limits<int64_t>::max(), i64), raw);
  r = m.select(lo, m.int_constant(std::numeric_limits<int64_t>::min(), i64), r);
  return m.select(nan, m.int_constant(0, i64), r);
}

// A value in register type `from` (any) as register type `to`, exactly as element::load<To> reads
// a value (floats round to nearest, integers convert exactly or round).
Val to_register(MlirText& m, const Val& v, const std::string& to) {
  if (v.ty.elem == to) return v;
  Ty t = v.ty.with(to);
  bool from_float = v.ty.is_float(), to_float = t.is_float();
  if (from_float && to_float) return m.convert(to == "f64" ? "arith.extf" : "arith.truncf", v, t);
  if (!from_float && to_float) return m.convert("arith.sitofp", v, t);
  if (from_float && !to_float) return saturate_to_i64(m, v);
  return v;
}

Val as_bool(MlirText& m, const Val& v) {  // v != 0 (true for NaN)
  if (v.ty.is_float()) return m.cmp("arith.cmpf", "une", v, m.constant(0, v.ty));
  return m.cmp("arith.cmpi", "ne", v, m.int_constant(0, v.ty));
}

// An i1 as 0 or 1 in type `t`.
Val from_bool(MlirText& m, const Val& b, Ty t) {
  return m.convert(t.is_float() ? "arith.uitofp" : "arith.extui", b, t);
}

struct Emitter {
  MlirText& m;
  Ty t;  // the compute register type
  bool is_float() const { return t.is_float(); }
  Val k(double v) { return m.constant(v, t); }

  Val cmp(const char* float_pred, const char* int_pred, const Val& a, const Val& b) {
    return is_float() ? m.cmp("arith.cmpf", float_pred, a, b) : m.cmp("arith.cmpi", int_pred, a, b);
  }
  Val nan(const Val& a) { return m.cmp("arith.cmpf", "uno", a, a); }
  Val sigmoid(const Val& x) {  // 1 / (1 + e^-x)
    Val e = exp(m.unary("arith.negf", x));
    return m.binary("arith.divf", k(1), m.binary("arith.addf", k(1), e));
  }
  Val gelu(const Val& x, bool tanh_form) {
    Val half_x = m.binary("arith.mulf", k(0.5), x);
    Val inner;
    if (tanh_form) {
      Val cube = m.binary("arith.mulf", m.binary("arith.mulf", m.binary("arith.mulf", k(0.044715), x), x), x);
      inner = m.unary("math.tanh", m.binary("arith.mulf", k(0.7978845608028654), m.binary("arith.addf", x, cube)));
    } else {
      inner = erf(m.binary("arith.mulf", x, k(0.7071067811865476)));
    }
    return m.binary("arith.mulf", half_x, m.binary("arith.addf", k(1), inner));
  }
  Val fma(const Val& a, const Val& b, const Val& c) {
    return m.let("math.fma " + a.name + ", " + b.name + ", " + c.name + " : " + a.ty.str(), a.ty);
  }
  // erf. In float32 one rational function on [-4, 4] (beyond it erf is +-1 in float32): an odd
  // numerator over an even denominator, both polynomials in x^2, evaluated with FMAs, and one
  // division. MLIR's approximation selects coefficients per interval and costs about twice as
  // much, which made GELU compute-bound. The coefficients are a minimax fit (as in Eigen's
  // fast float erf); the codegen accuracy tests hold it to the float64 reference. NaN stays
  // NaN through the clamp. float64 keeps math.erf (a libm call).
  Val erf(const Val& a) {
    if (t.elem != "f32") return m.unary("math.erf", a);
    Val x = m.binary("arith.maximumf", m.binary("arith.minimumf", a, k(4.0)), k(-4.0));
    Val x2 = m.binary("arith.mulf", x, x);
    static constexpr double kNumerator[] = {-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06,
                                            -5.69250639462346e-05, -7.34990630326855e-04, -2.95459980854025e-03,
                                            -1.60960333262415e-02};
    static constexpr double kDenominator[] = {-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03,
                                              -7.37332916720468e-03, -1.42647390514189e-02};
    Val p = k(kNumerator[0]);
    for (size_t i = 1; i < std::size(kNumerator); ++i) p = fma(p, x2, k(kNumerator[i]));
    Val q = k(kDenominator[0]);
    for (size_t i = 1; i < std::size(kDenominator); ++i) q = fma(q, x2, k(kDenominator[i]));
    // Rounding can leave |erf| an ulp above 1 near the clamp.
    Val r = m.binary("arith.divf", m.binary("arith.mulf", x, p), q);
    return m.binary("arith.maximumf", m.binary("arith.minimumf", r, k(1.0)), k(-1.0));
  }
  // exp in float32: e^x = 2^n * e^r with n = round(x / ln 2), r = x - n ln 2 in two FMAs (ln 2's
  // high part has few bits, so n times it is exact), e^r by a degree-7 polynomial (Cephes' expf
  // coefficients, 7 FMAs), then times 2^n (scale_by_power_of_two). MLIR's expansion costs about
  // twice the instructions (a softmax's exp pass was compute-bound on one thread), flushes
  // results below 2^-126 to zero, and was 3 ulp off near overflow. x is clamped to [-104, 89]
  // (beyond, e^x is 0 or infinity in float32) so that infinities do not meet in r; the selects
  // keep NaN.
  Val exp(const Val& x) {
    if (t.elem != "f32") return m.unary("math.exp", x);
    if (x.ty.width == 0 && has_avx512()) {  // a row's tail: lane 0 of the body's instructions
      Ty wide{"f32", 16};
      Val lanes = m.let("vector.broadcast " + x.name + " : f32 to " + wide.str(), wide);
      Val r = Emitter{m, wide}.exp(lanes);
      return m.let("vector.extract " + r.name + "[0] : f32 from " + wide.str(), t);
    }
    Val c = m.select(m.cmp("arith.cmpf", "ogt", x, k(89.0)), k(89.0), x);
    c = m.select(m.cmp("arith.cmpf", "olt", c, k(-104.0)), k(-104.0), c);
    Val n = m.unary("math.roundeven", m.binary("arith.mulf", c, k(1.4426950408889634)));
    Val r = fma(n, k(-0.693359375), c);
    r = fma(n, k(2.12194440e-4), r);
    static constexpr double kPoly[] = {1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3,
                                       4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1};
    Val p = k(kPoly[0]);
    for (size_t i = 1; i < std::size(kPoly); ++i) p = fma(p, r, k(kPoly[i]));
    p = fma(fma(p, r, k(1.0)), r, k(1.0));  // p r^2 + r + 1
    return scale_by_power_of_two(p, n);
  }
  static bool has_avx512() {
    static const bool avx512 = host_target().find("+avx512f") != std::string::npos;
    return avx512;
  }
  // p * 2^n for an integral n in [-150, 129], rounded once, into subnormals and to infinity as the
  // exact product would be. AVX-512 has it in one instruction (vscalefps, on 16 lanes). Elsewhere
  // 2^n is two powers built from exponent bits, 2^(n/2) and 2^(n - n/2), each a normal float;
  // times p (in [0.7, 1.5]) the first product is exact and the second rounds. A NaN n (x was NaN)
  // takes 0: p is NaN already, and converting NaN to an integer is undefined.
  Val scale_by_power_of_two(const Val& p, const Val& n) {
    if (has_avx512() && t.width == 16) {
      Val all = m.int_constant(-1, {"i16", 0}), current_rounding = m.int_constant(4, {"i32", 0});
      return m.let("llvm.call_intrinsic \"llvm.x86.avx512.mask.scalef.ps.512\"(" + p.name + ", " + n.name + ", " +
                       p.name + ", " + all.name + ", " + current_rounding.name + ") : (" + t.str() + ", " + t.str() +
                       ", " + t.str() + ", i16, i32) -> " + t.str(),
                   t);
    }
    Ty i32 = t.with("i32");
    Val whole = m.convert("arith.fptosi", m.select(m.cmp("arith.cmpf", "uno", n, n), k(0.0), n), i32);
    Val half = m.binary("arith.shrsi", whole, m.int_constant(1, i32));
    auto power = [&](const Val& e) {
      Val bits = m.binary("arith.shli", m.binary("arith.addi", e, m.int_constant(127, i32)), m.int_constant(23, i32));
      return m.let("arith.bitcast " + bits.name + " : " + i32.str() + " to " + t.str(), t);
    };
    Val once = m.binary("arith.mulf", p, power(half));
    return m.binary("arith.mulf", once, power(m.binary("arith.subi", whole, half)));
  }
  // (a is NaN or a `pred` b) ? a : b: maximum and minimum, NaN from either side.
  Val pick(const char* float_pred, const char* int_pred, const Val& a, const Val& b) {
    Val c = cmp(float_pred, int_pred, a, b);
    if (is_float()) c = m.binary("arith.ori", nan(a), c);
    return m.select(c, a, b);
  }
  Val clamp(const Val& x, const Val& lo, const Val& hi) {
    Val below = cmp("olt", "slt", x, lo), above;
    if (is_float()) below = m.binary("arith.ori", below, nan(lo));
    Val r = m.select(below, lo, x);
    above = cmp("ogt", "sgt", r, hi);
    if (is_float()) above = m.binary("arith.ori", above, nan(hi));
    r = m.select(above, hi, r);
    return is_float() ? m.select(nan(x), x, r) : r;
  }
  Val sign(const Val& a) {
    Val pos = from_bool(m, cmp("ogt", "sgt", a, k(0)), t), neg = from_bool(m, cmp("olt", "slt", a, k(0)), t);
    Val s = is_float() ? m.binary("arith.subf", pos, neg) : m.binary("arith.subi", pos, neg);
    return is_float() ? m.select(nan(a), a, s) : s;
  }
  // log or log2, with denormal f32 inputs scaled up by 2^23 first: the polynomial approximation
  // treats them as the smallest normal (log(1e-45) came out as -87.3, not -103.3).
  Val logarithm(const char* op, const Val& x, double log_of_2) {
    if (t.elem != "f32") return m.unary(op, x);
    Val tiny = m.binary("arith.andi", m.cmp("arith.cmpf", "olt", x, k(1.1754943508222875e-38)),
                        m.cmp("arith.cmpf", "ogt", x, k(0)));
    Val scaled = m.select(tiny, m.binary("arith.mulf", x, k(8388608.0)), x);
    Val r = m.unary(op, scaled);
    return m.select(tiny, m.binary("arith.subf", r, k(23 * log_of_2)), r);
  }
  // a < 0 ? -a : (a == 0 ? 0 : a), as the interpreter: a NaN keeps its sign (absf would clear it).
  Val abs(const Val& a) {
    if (!is_float()) return m.select(cmp("olt", "slt", a, k(0)), m.binary("arith.subi", k(0), a), a);
    Val positive = m.select(m.cmp("arith.cmpf", "oeq", a, k(0)), k(0), a);
    return m.select(m.cmp("arith.cmpf", "olt", a, k(0)), m.unary("arith.negf", a), positive);
  }

  Val op(const KernelInstr& instr, const std::vector<Val>& a) {
    const bool f = is_float();
    auto arith = [&](const char* fop, const char* iop) { return m.binary(f ? fop : iop, a[0], a[1]); };
    switch (instr.op) {
      case Op::Neg: return f ? m.unary("arith.negf", a[0]) : m.binary("arith.subi", k(0), a[0]);
      case Op::Abs: return abs(a[0]);
      case Op::Exp: return exp(a[0]);
      case Op::Exp2: return m.unary("math.exp2", a[0]);
      case Op::Log: return logarithm("math.log", a[0], 0.6931471805599453);
      case Op::Log2: return logarithm("math.log2", a[0], 1.0);
      case Op::Log1p: return m.unary("math.log1p", a[0]);
      case Op::Expm1: return m.unary("math.expm1", a[0]);
      case Op::Sqrt: return m.unary("math.sqrt", a[0]);
      case Op::Rsqrt: return m.binary("arith.divf", k(1), m.unary("math.sqrt", a[0]));
      case Op::Sin: return m.unary("math.sin", a[0]);
      case Op::Cos: return m.unary("math.cos", a[0]);
      case Op::Tan: return m.unary("math.tan", a[0]);
      case Op::Tanh: return m.unary("math.tanh", a[0]);
      case Op::Erf: return erf(a[0]);
      case Op::Sigmoid: return sigmoid(a[0]);
      case Op::Silu: return m.binary("arith.mulf", a[0], sigmoid(a[0]));
      case Op::Gelu: return gelu(a[0], attr_string(instr.attrs, "approximate") == "tanh");
      case Op::Relu: {  // (a > 0 or NaN) ? a : 0
        Val keep = f ? m.cmp("arith.cmpf", "ugt", a[0], k(0)) : m.cmp("arith.cmpi", "sgt", a[0], k(0));
        return m.select(keep, a[0], k(0));
      }
      case Op::Floor: return f ? m.unary("math.floor", a[0]) : a[0];
      case Op::Ceil: return f ? m.unary("math.ceil", a[0]) : a[0];
      case Op::Round: return f ? m.unary("math.roundeven", a[0]) : a[0];
      case Op::Trunc: return f ? m.unary("math.trunc", a[0]) : a[0];
      case Op::Sign: return sign(a[0]);
      case Op::Reciprocal: return m.binary("arith.divf", k(1), a[0]);
      case Op::LogicalNot: return from_bool(m, cmp("oeq", "eq", a[0], k(0)), t);
      case Op::IsNan: return f ? from_bool(m, nan(a[0]), t) : k(0);
      case Op::IsInf:
        return f ? from_bool(m, m.cmp("arith.cmpf", "oeq", m.unary("math.absf", a[0]), k(std::numeric_limits<double>::infinity())), t) : k(0);
      case Op::Cast: return a[0];
      case Op::Add: return arith("arith.addf", "arith.addi");
      case Op::Sub: return arith("arith.subf", "arith.subi");
      case Op::Mul: return arith("arith.mulf", "arith.muli");
      case Op::Div: return m.binary("arith.divf", a[0], a[1]);
      case Op::Pow: return m.binary("math.powf", a[0], a[1]);
      case Op::Maximum: return pick("ogt", "sgt", a[0], a[1]);
      case Op::Minimum: return pick("olt", "slt", a[0], a[1]);
      case Op::Eq: return from_bool(m, cmp("oeq", "eq", a[0], a[1]), t);
      case Op::Ne: return from_bool(m, cmp("une", "ne", a[0], a[1]), t);
      case Op::Lt: return from_bool(m, cmp("olt", "slt", a[0], a[1]), t);
      case Op::Le: return from_bool(m, cmp("ole", "sle", a[0], a[1]), t);
      case Op::Gt: return from_bool(m, cmp("ogt", "sgt", a[0], a[1]), t);
      case Op::Ge: return from_bool(m, cmp("oge", "sge", a[0], a[1]), t);
      case Op::LogicalAnd: return from_bool(m, m.binary("arith.andi", as_bool(m, a[0]), as_bool(m, a[1])), t);
      case Op::LogicalOr: return from_bool(m, m.binary("arith.ori", as_bool(m, a[0]), as_bool(m, a[1])), t);
      case Op::LogicalXor: return from_bool(m, m.binary("arith.xori", as_bool(m, a[0]), as_bool(m, a[1])), t);
      case Op::BitwiseAnd: return m.binary("arith.andi", a[0], a[1]);
      case Op::BitwiseOr: return m.binary("arith.ori", a[0], a[1]);
      case Op::BitwiseXor: return m.binary("arith.xori", a[0], a[1]);
      case Op::Where: return m.select(as_bool(m, a[0]), a[1], a[2]);
      case Op::Clamp: return clamp(a[0], a[1], a[2]);
      default: break;
    }
    EMBER_CHECK(false, "the CPU backend cannot emit '", op_name(instr.op), "'");
    return a[0];
  }
};

}  // namespace

bool can_emit(Op op, DType compute) {
  if (!op_info(op).is_elementwise()) return false;
  bool integer = compute_type(compute) == ComputeType::Int64;
  switch (op) {
    case Op::FloorDivide:
    case Op::Remainder: return false;  // Python's rounding; integers raise on zero
    case Op::Pow: return !integer;     // integers raise on negative powers
    default: return true;
  }
}

Val bf16_bits(MlirText& m, const Val& f) {
  Ty i32 = f.ty.with("i32");
  Val x = m.let("arith.bitcast " + f.name + " : " + f.ty.str() + " to " + i32.str(), i32);
  Val high = m.binary("arith.shrui", x, m.int_constant(16, i32));
  Val odd = m.binary("arith.andi", high, m.int_constant(1, i32));
  Val rounded = m.binary("arith.shrui", m.binary("arith.addi", x, m.binary("arith.addi", m.int_constant(0x7fff, i32), odd)),
                         m.int_constant(16, i32));
  Val quiet = m.binary("arith.ori", high, m.int_constant(0x40, i32));
  Val r = m.select(m.cmp("arith.cmpf", "uno", f, f), quiet, rounded);
  return m.convert("arith.trunci", r, f.ty.with("i16"));
}

Val bf16_value(MlirText& m, const Val& bits) {
  Ty i32 = bits.ty.with("i32"), f32 = bits.ty.with("f32");
  Val wide = m.binary("arith.shli", m.convert("arith.extui", bits, i32), m.int_constant(16, i32));
  return m.let("arith.bitcast " + wide.name + " : " + i32.str() + " to " + f32.str(), f32);
}

Val convert_dtype(MlirText& m, const Val& v, DType to) {
  std::string reg = register_type(to);
  if (to == DType::Float16) {  // round to it (through f32), held in f32
    Val f = to_register(m, v, "f32");
    return m.convert("arith.extf", m.convert("arith.truncf", f, f.ty.with("f16")), f.ty);
  }
  if (to == DType::BFloat16) return bf16_value(m, bf16_bits(m, to_register(m, v, "f32")));
  if (reg != "i64") return to_register(m, v, reg);  // floats: round to nearest
  if (to == DType::Bool) return from_bool(m, as_bool(m, v), v.ty.with("i64"));  // v != 0, NaN too
  // An integer holds its exact value whatever its dtype: wrap it to the new width.
  return wrap_to(m, v.ty.is_float() ? saturate_to_i64(m, v) : v, to);
}

Val emit_constant(MlirText& m, const KernelInstr& instr, int width) {
  const Literal& value = attr_literal(instr.attrs, "value");
  Ty t{register_type(instr.dtype), width};
  return is_floating(instr.dtype) ? m.constant(value.floats.at(0), t) : m.int_constant(value.ints.at(0), t);
}

Val emit_integer_power(MlirText& m, const KernelInstr& instr, const Val& base, DType base_dtype, int exponent) {
  DType compute = instr.compute;
  Val x = to_register(m, base, register_type(compute));
  if (base_dtype != compute) x = convert_dtype(m, x, compute);
  Val r = x;
  for (int i = 1; i < exponent; ++i) r = m.binary("arith.mulf", r, x);
  return convert_dtype(m, r, instr.dtype);
}

Val emit_op(MlirText& m, const KernelInstr& instr, std::span<const Val> args, std::span<const DType> arg_dtypes) {
  DType compute = instr.compute;
  Ty t = args[0].ty.with(register_type(compute));
  std::vector<Val> a;
  for (size_t i = 0; i < args.size(); ++i) {
    if (instr.op == Op::Where && i == 0) {  // the condition is read as it is
      a.push_back(args[0]);
      continue;
    }
    // Loaded into the compute register type, then through the compute dtype when it differs.
    Val v = to_register(m, args[i], t.elem);
    if (arg_dtypes[i] != compute) v = convert_dtype(m, v, compute);
    a.push_back(v);
  }
  Val r = Emitter{m, t}.op(instr, a);
  return convert_dtype(m, r, instr.dtype);
}

}  // namespace ember::codegen::cpu

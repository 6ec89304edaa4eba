// Printing: a program as pseudo-C++ with its calls, a call's outcome, a failure report, and the
// keys that group failures in triage.
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/array.h"
#include "tests/unit/fuzz_capture.h"

namespace ember::capture_fuzz {

std::string Num::str() const {
  if (kind == Bool) return i ? "true" : "false";
  if (kind == I64) return "int64_t{" + std::to_string(i) + "}";
  if (kind == I32) return "int32_t{" + std::to_string(i) + "}";
  const char* suffix = kind == F32 ? "f" : "";
  std::string lim = kind == F32 ? "std::numeric_limits<float>::" : "std::numeric_limits<double>::";
  if (std::isnan(f)) return std::string(std::signbit(f) ? "-" : "") + lim + "quiet_NaN()";
  if (std::isinf(f)) return std::string(f < 0 ? "-" : "") + lim + "infinity()";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", f);
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s + suffix;
}

std::string dtype_str(DType t) { return std::string(dtype_name(t)); }

namespace {

std::string ints_str(const std::vector<int64_t>& v) {
  std::string s = "{";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + (v[i] == kToEnd ? std::string("INT64_MAX") : std::to_string(v[i]));
  return s + "}";
}

std::string dtype_cpp(DType t) {
  switch (t) {
    case DType::Bool: return "DType::Bool";
    case DType::Int8: return "DType::Int8";
    case DType::Int16: return "DType::Int16";
    case DType::Int32: return "DType::Int32";
    case DType::Int64: return "DType::Int64";
    case DType::UInt8: return "DType::UInt8";
    case DType::Float16: return "DType::Float16";
    case DType::BFloat16: return "DType::BFloat16";
    case DType::Float32: return "DType::Float32";
    case DType::Float64: return "DType::Float64";
  }
  return "?";
}

// The names of a program's values, by pool index: arguments a<position> and s<position>,
// captured tensors w<k>, step values t<k> and n<k>.
struct Names {
  std::vector<std::string> t, n;
};

Names names_of(const Program& p) {
  Names names;
  int slot = 0;
  for (Slot s : p.sig) {
    if (s == Slot::Tensor) names.t.push_back("a" + std::to_string(slot));
    else names.n.push_back("s" + std::to_string(slot));
    ++slot;
  }
  for (size_t k = 0; k < p.captured.size(); ++k) names.t.push_back("w" + std::to_string(k));
  for (const Step& s : p.steps) {
    if (s.makes_num()) names.n.push_back("n" + std::to_string(names.n.size()));
    else names.t.push_back("t" + std::to_string(names.t.size()));
  }
  return names;
}

std::string step_str(const Step& s, const Names& nm, const std::string& out) {
  auto x = [&](size_t k) { return nm.t[s.t[k]]; };
  auto num = [&](size_t k) { return nm.n[s.n[k]]; };
  std::ostringstream o;
  auto tensor = [&]() -> std::ostream& { return o << "Tensor " << out << " = "; };
  switch (s.kind) {
    case K::Unary: tensor() << kUnaryNames[s.op] << "(" << x(0) << ")"; break;
    case K::Binary: tensor() << kBinaryNames[s.op] << "(" << x(0) << ", " << x(1) << ")"; break;
    case K::BinaryConst:
      tensor() << kBinaryNames[s.op] << "(" << (s.flag ? s.c[0].str() + ", " + x(0) : x(0) + ", " + s.c[0].str()) << ")";
      break;
    case K::BinaryNum:
      tensor() << kBinaryNames[s.op] << "(" << (s.flag ? num(0) + ", " + x(0) : x(0) + ", " + num(0)) << ")";
      break;
    case K::Where:
      tensor() << "where(" << kCompareNames[s.op] << "(" << x(0) << (s.op == 4 ? "" : ", " + x(1)) << "), " << x(2)
               << ", " << x(3) << ")";
      break;
    case K::WhereConst:
      tensor() << "where(" << x(0) << " > 0.0, " << (s.flag ? s.c[0].str() + ", " + x(1) : x(1) + ", " + s.c[0].str()) << ")";
      break;
    case K::Clamp: {
      auto b = [&](int which) -> std::string {
        if (!(s.ints[0] & (1 << which))) return "std::nullopt";
        if (which == 0 && !s.n.empty()) return num(0);
        return s.c[which].str();
      };
      tensor() << "clamp(" << x(0) << ", " << b(0) << ", " << b(1) << ")";
      break;
    }
    case K::ClampTensor: tensor() << "clamp(" << x(0) << ", " << x(1) << ", " << x(2) << ")"; break;
    case K::Reduce:
      tensor() << kReduceNames[s.op] << "(" << x(0) << ", " << ints_str(s.ints) << ", /*keepdim=*/" << (s.flag ? "true" : "false") << ")";
      break;
    case K::Slice:
      tensor() << "slice(" << x(0) << ", " << s.ints[0] << ", " << s.ints[1] << ", "
               << (s.ints[2] == kToEnd ? std::string("INT64_MAX") : std::to_string(s.ints[2])) << ", " << s.ints[3] << ")";
      break;
    case K::SliceSized:
      if (s.op == 0)
        tensor() << "slice(" << x(0) << ", " << s.ints[0] << ", " << s.ints[1] << ", int64_t(" << x(0) << ".size("
                 << s.ints[0] << ")) + " << s.ints[2] << ")";
      else
        tensor() << "slice(" << x(0) << ", " << s.ints[0] << ", int64_t(" << x(0) << ".size(" << s.ints[0] << ") / 2) + "
                 << s.ints[2] << ")";
      break;
    case K::SliceNum: tensor() << "slice(" << x(0) << ", " << s.ints[0] << ", 0, clamp_to_20(" << num(0) << "))"; break;
    case K::Reshape:
      switch (s.op) {
        case 0: tensor() << "reshape(" << x(0) << ", {-1})"; break;
        case 1: tensor() << "flatten(" << x(0) << ", " << s.ints[0] << ", " << s.ints[1] << ")"; break;
        case 2: tensor() << "reshape(" << x(0) << ", {" << x(0) << ".size(0) * " << x(0) << ".size(1), <" << x(0) << ".sizes() from 2>})"; break;
        case 3: tensor() << "reshape(" << x(0) << ", {1, -1})"; break;
        case 4: tensor() << "reshape(" << x(0) << ", " << ints_str(s.ints) << ")"; break;
        case 5: tensor() << "reshape(" << x(0) << ", reversed(" << x(0) << ".shape()))"; break;
        default: tensor() << "reshape(" << x(0) << ", {" << x(0) << ".size(-1), -1})"; break;
      }
      break;
    case K::Permute: tensor() << "permute(" << x(0) << ", " << ints_str(s.ints) << ")"; break;
    case K::Transpose: tensor() << "transpose(" << x(0) << ", " << s.ints[0] << ", " << s.ints[1] << ")"; break;
    case K::Expand:
      if (s.op == 0) tensor() << "expand(" << x(0) << ", " << x(1) << ".sizes())";
      else if (s.op == 1) tensor() << "expand(unsqueeze(" << x(0) << ", 0), {" << s.ints[0] << ", <" << x(0) << ".sizes()>})";
      else tensor() << "expand(" << x(0) << ", " << ints_str(s.ints) << ")";
      break;
    case K::Squeeze: tensor() << "squeeze(" << x(0) << ", " << ints_str(s.ints) << ")"; break;
    case K::Unsqueeze: tensor() << "unsqueeze(" << x(0) << ", " << s.ints[0] << ")"; break;
    case K::Concat:
    case K::Stack: {
      tensor() << (s.kind == K::Concat ? "concat({" : "stack({");
      for (size_t i = 0; i < s.t.size(); ++i) o << (i ? ", " : "") << x(i);
      o << "}, " << s.ints[0] << ")";
      break;
    }
    case K::Pool: {
      const auto& v = s.ints;
      std::string stride = v[2] < 0 ? "{}" : "{" + std::to_string(v[2]) + ", " + std::to_string(v[3]) + "}";
      std::string kernel = "{" + std::to_string(v[0]) + ", " + std::to_string(v[1]) + "}";
      std::string pad = "{" + std::to_string(v[4]) + ", " + std::to_string(v[5]) + "}";
      if (s.op == 0)
        tensor() << "max_pool2d(" << x(0) << ", " << kernel << ", " << stride << ", " << pad << ", {" << v[6] << ", " << v[6]
                 << "}, /*ceil_mode=*/" << s.flag << ")";
      else if (s.op == 1)
        tensor() << "avg_pool2d(" << x(0) << ", " << kernel << ", " << stride << ", " << pad << ", /*ceil_mode=*/" << s.flag
                 << ", /*count_include_pad=*/" << s.flag2 << ")";
      else tensor() << "adaptive_avg_pool2d(" << x(0) << ", " << kernel << ")";
      break;
    }
    case K::MatMul:
      if (s.op == 0) tensor() << "matmul(" << x(0) << ", " << x(1) << ")";
      else if (s.op == 1) tensor() << "matmul(" << x(0) << ", transpose(" << x(0) << ", -1, -2))";
      else if (s.op == 2) tensor() << "linear(" << x(0) << ", " << x(1) << ")";
      else tensor() << "linear(" << x(0) << ", " << x(1) << ", " << x(2) << ")";
      break;
    case K::Cast: tensor() << "cast(" << x(0) << ", " << dtype_cpp(s.dtype) << ")"; break;
    case K::Softmax:
      if (s.op == 0) tensor() << "softmax(" << x(0) << ", " << s.ints[0] << ")";
      else if (s.op == 1) tensor() << "log_softmax(" << x(0) << ", " << s.ints[0] << ")";
      else tensor() << "layer_norm(" << x(0) << ", {" << x(0) << ".size(-1)})";
      break;
    case K::Create:
      if (s.op == 0) tensor() << "zeros(" << x(0) << ".sizes(), " << dtype_cpp(s.dtype) << ")";
      else if (s.op == 1) tensor() << "full(" << x(0) << ".sizes(), " << s.c[0].str() << ")";
      else if (s.op == 2) tensor() << "arange(int64_t(" << x(0) << ".size(0)))";
      else if (s.op == 3) tensor() << "uniform(" << x(0) << ".sizes(), /*seed=*/" << s.ints[0] << ")";
      else tensor() << "full({}, " << s.c[0].str() << ", " << dtype_cpp(s.dtype) << ")";
      break;
    case K::NumTensor:
      if (s.op == 0) tensor() << "scalar_tensor(" << num(0) << ", dtype_of<decltype(" << num(0) << ")>)";
      else tensor() << "full(" << x(0) << ".sizes(), " << num(0) << ")";
      break;
    case K::Branch: tensor() << num(0) << " ? " << x(0) << " : " << x(1) << "  // control flow on a value"; break;
    case K::Gather:
      if (s.op == 0) tensor() << "gather(" << x(0) << ", " << s.ints[0] << ", argmax(" << x(1) << ", {" << s.ints[0] << "}, true))";
      else if (s.op == 1) tensor() << "index_select(" << x(0) << ", " << s.ints[0] << ", argmax(" << x(1) << "))";
      else if (s.op == 2)
        tensor() << "index_select(" << x(0) << ", " << s.ints[0] << ", reshape(cast(" << x(1) << ", DType::Int64), {-1}))";
      else tensor() << "embedding(" << x(0) << ", cast(" << x(1) << ", DType::Int64))";
      break;
    case K::Pad: tensor() << "pad(" << x(0) << ", " << ints_str(s.ints) << ", " << s.c[0].str() << ")"; break;
    case K::Conv:
      tensor() << "conv2d(" << x(0) << ", " << x(1) << ", std::nullopt, /*stride=*/{" << s.ints[0] << ", " << s.ints[0]
               << "}, /*padding=*/{" << s.ints[1] << ", " << s.ints[1] << "}, /*dilation=*/{" << s.ints[2] << ", " << s.ints[2] << "})";
      break;
    case K::Item: {
      static const char* kinds[] = {"double", "float", "int64_t", "bool", "double", "int32_t", "double"};
      o << kinds[s.op] << " " << out << " = ";
      switch (s.op) {
        case 0: o << "sum(" << x(0) << ").item<double>()"; break;
        case 1: o << "max(" << x(0) << ").item<float>()"; break;
        case 2: o << "argmax(" << x(0) << ").item<int64_t>()"; break;
        case 3: o << "(sum(" << x(0) << ") > 0.0).to_bool()"; break;
        case 4: o << x(0) << ".item<double>()"; break;
        case 5: o << "mean(" << x(0) << ").item<int32_t>()"; break;
        default: o << x(0) << ".to_vector().back()  /* -1.0 when empty */"; break;
      }
      o << ";  // graph break";
      return o.str();
    }
    case K::Copy: tensor() << x(0); break;
    case K::ConstNum: o << s.c[0].type_name() << " " << out << " = " << s.c[0].str(); break;
  }
  o << ";";
  return o.str();
}

std::string spec_str(const TensorSpec& t) {
  static const char* layouts[] = {"contiguous", "transposed", "every other row", "expanded"};
  return dtype_str(t.dtype) + shape_str(to_shape(t.shape)) + " " + layouts[t.layout];
}

// The values of a small tensor, with their bits where they matter (-0.0, NaN).
std::string values_str(const Tensor& t) {
  const Array& a = t.array();
  if (a.numel() > 16) return "(" + std::to_string(a.numel()) + " values)";
  std::string s = "[";
  for (int64_t i = 0; i < a.numel(); ++i) {
    double v = a.get(i);
    char buf[48];
    if (std::isnan(v)) std::snprintf(buf, sizeof buf, "%snan", std::signbit(v) ? "-" : "");
    else std::snprintf(buf, sizeof buf, "%.6g", v);
    s += (i ? ", " : "") + std::string(buf);
  }
  return s + "]";
}

std::string program_str(const Program& p, std::optional<bool> dynamic) {
  Names nm = names_of(p);
  std::ostringstream o;
  for (size_t k = 0; k < p.captured.size(); ++k)
    o << "Tensor w" << k << " = " << spec_str(p.captured_specs[k]) << " " << values_str(p.captured[k])
      << ";  // captured by reference\n";
  o << "auto f = compile([&](";
  int slot = 0;
  for (Slot s : p.sig) {
    o << (slot ? ", " : "");
    if (s == Slot::Tensor) o << "const Tensor& a" << slot;
    else o << "auto s" << slot << " /*" << (s == Slot::Floating ? "double or float" : s == Slot::Integer ? "int64_t or int32_t" : "bool") << "*/";
    ++slot;
  }
  o << ") {\n";
  size_t t_index = p.first_step_tensor(), n_index = p.num_args();
  for (const Step& s : p.steps) {
    std::string out = s.makes_num() ? nm.n[n_index++] : nm.t[t_index++];
    o << "  " << step_str(s, nm, out) << "\n";
  }
  o << "  return std::vector<Tensor>{";
  for (size_t i = 0; i < p.outputs.size(); ++i) o << (i ? ", " : "") << nm.t[p.outputs[i]];
  o << "};\n}, Options{.dynamic = " << (dynamic ? (*dynamic ? "true" : "false") : "std::nullopt");
  if (p.recompile_limit != 8) o << ", .recompile_limit = " << p.recompile_limit;
  o << "});\n";
  return o.str();
}

std::string call_str(const CallSpec& c, const std::vector<Arg>& args, bool values) {
  std::ostringstream o;
  o << "f(";
  for (size_t i = 0; i < c.args.size(); ++i) {
    o << (i ? ", " : "");
    if (auto* n = std::get_if<Num>(&c.args[i])) {
      o << n->str();
      continue;
    }
    const TensorSpec& t = std::get<TensorSpec>(c.args[i]);
    if (t.source == TensorSpec::Alias) o << "<the same tensor as argument " << t.ref << ">";
    else if (t.source == TensorSpec::Captured) o << "w" << t.ref;
    else {
      o << spec_str(t);
      if (values) o << " " << values_str(std::get<Tensor>(args[i]));
    }
  }
  o << ")";
  return o.str();
}

}  // namespace

std::string outcome_str(const Outcome& o) {
  if (o.status == Outcome::EmberError) return std::string("ember::Error(") + error_kind_name(o.kind) + "): " + o.message;
  if (o.status == Outcome::OtherError) return "exception: " + o.message;
  std::string s = std::to_string(o.outs.size()) + " outputs";
  for (const Tensor& t : o.outs) {
    try {
      s += "\n      " + dtype_str(t.dtype()) + shape_str(to_shape(t.array().shape())) + " " + values_str(t);
    } catch (const std::exception& e) {
      s += std::string("\n      <unreadable: ") + e.what() + ">";
    }
  }
  return s;
}

std::string dynamic_str(std::optional<bool> d) { return d ? (*d ? "true" : "false") : "unset"; }

std::string case_str(const Case& cs, const Failure& f, bool values) {
  std::ostringstream o;
  std::string avoided = env_str("EMBER_FUZZ_AVOID");
  o << "seed " << cs.seed << " (" << (avoided.empty() ? "" : "EMBER_FUZZ_AVOID=" + avoided + " ") << "EMBER_FUZZ_SEED=" << cs.seed
    << "), dynamic=" << dynamic_str(f.dynamic) << "\n";
  o << program_str(cs.prog, f.dynamic);
  Prepared pr;
  for (const CallSpec& c : cs.calls) pr.args.push_back(materialize(cs.prog, c));
  for (size_t i = 0; i < cs.calls.size(); ++i)
    o << "  call " << i << ": " << call_str(cs.calls[i], pr.args[i], values) << (i == f.call ? "   <-- fails" : "")
      << "\n";
  o << "  failure: " << f.mismatch.category << "\n    " << f.mismatch.detail << "\n";
  o << "  eager:    " << f.eager << "\n  compiled: " << f.compiled << "\n";
  return o.str();
}

// The ops of a (minimised) program in order, e.g. "sqrt pow": with the category, a key to group
// failures by likely cause (EMBER_FUZZ_TRIAGE=1).
std::string ops_key(const Program& p) {
  Names nm = names_of(p);
  std::string key;
  size_t t_index = p.first_step_tensor(), n_index = p.num_args();
  for (const Step& s : p.steps) {
    std::string out = s.makes_num() ? nm.n[n_index++] : nm.t[t_index++];
    std::string line = step_str(s, nm, out);
    size_t eq = line.find(" = ");
    std::string rhs = eq == std::string::npos ? line : line.substr(eq + 3);
    size_t end = rhs.find_first_of("(;. ");
    key += (key.empty() ? "" : " ") + (s.kind == K::Item ? "item" : rhs.substr(0, end));
  }
  return key;
}

// Features of a (minimised) case, to tell classes apart at a glance.
std::string features(const Case& cs) {
  std::set<std::string> f;
  const Program& p = cs.prog;
  for (const CallSpec& c : cs.calls)
    for (const auto& a : c.args) {
      if (auto* t = std::get_if<TensorSpec>(&a)) {
        if (t->source == TensorSpec::Alias) f.insert("aliased arguments");
        if (t->source == TensorSpec::Captured) f.insert("captured tensor passed as argument");
        if (t->source == TensorSpec::Fresh && t->layout) f.insert("strided argument");
        for (int64_t d : t->shape)
          if (d == 0) f.insert("zero-size argument");
      }
    }
  std::set<int> outs;
  for (int o : p.outputs) {
    if (!outs.insert(o).second) f.insert("same output twice");
    if (o < p.tensor_args()) f.insert("argument returned");
    else if (o < p.first_step_tensor()) f.insert("captured returned");
  }
  if (p.num_args() > 0) f.insert("scalar arguments");
  std::map<K, const char*> kinds = {{K::Item, "item()"}, {K::Branch, "branch on a value"}, {K::Slice, "slice"},
                                    {K::SliceSized, "slice by size"}, {K::SliceNum, "slice by value"},
                                    {K::Pool, "pool"}, {K::Reduce, "reduce"}, {K::BinaryNum, "op with a number"},
                                    {K::NumTensor, "tensor from a number"}, {K::MatMul, "matmul"}};
  for (const Step& s : p.steps)
    if (kinds.count(s.kind)) f.insert(kinds[s.kind]);
  std::string out;
  for (const auto& s : f) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace ember::capture_fuzz

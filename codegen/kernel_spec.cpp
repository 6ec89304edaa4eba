#include "codegen/kernel_spec.h"

#include <algorithm>
#include <cctype>
#include <sstream>
#include <unordered_map>

#include "ir/error.h"
#include "ir/sha256.h"

namespace ember::codegen {

std::string KernelSpec::str() const {
  std::string out = "kernel rank=" + std::to_string(rank) + (columns ? " columns" : "") + " {\n";
  for (size_t i = 0; i < inputs.size(); ++i) {
    out += "  %" + std::to_string(i) + " = load in" + std::to_string(i) + " : " +
           std::string(dtype_name(inputs[i].dtype)) + "[";
    for (size_t d = 0; d < inputs[i].broadcast.size(); ++d)
      out += std::string(d ? ", " : "") + (inputs[i].broadcast[d] ? "1" : "*");
    out += "]\n";
  }
  for (size_t i = 0; i < body.size(); ++i) {
    const KernelInstr& b = body[i];
    out += "  %" + std::to_string(inputs.size() + i) + " = " + std::string(op_name(b.op)) + "(";
    for (size_t k = 0; k < b.args.size(); ++k) out += (k ? ", %" : "%") + std::to_string(b.args[k]);
    out += ")" + attrs_str(b.attrs) + " : " + std::string(dtype_name(b.dtype)) + " compute=" +
           std::string(dtype_name(b.compute)) + "\n";
  }
  for (size_t k = 0; k < outputs.size(); ++k)
    out += "  store out" + std::to_string(k) + " = %" + std::to_string(outputs[k]) + "\n";
  return out + "}\n";
}

std::string KernelSpec::hash() const { return sha256_hex(str()); }

bool is_row_reduction(Op op) { return is_plain_fold(op); }

bool KernelSpec::reduces() const {
  return std::any_of(body.begin(), body.end(), [](const KernelInstr& b) { return is_row_reduction(b.op); });
}

std::vector<bool> KernelSpec::line_values() const {
  std::vector<bool> row;
  for (const KernelInput& in : inputs) row.push_back(in.broadcast[reduced_dim()]);
  for (const KernelInstr& b : body) {
    bool all = true;
    for (int a : b.args) all = all && row[a];
    row.push_back(is_row_reduction(b.op) || all);
  }
  return row;
}

namespace {

// A line-oriented reader: each call takes what it needs from the front of the line.
class LineReader {
 public:
  LineReader(std::string line, int number) : line_(std::move(line)), number_(number) {}
  [[noreturn]] void fail(const std::string& why) const {
    EMBER_THROW(Value, "[kernel spec] line ", number_, ": ", why, ": '", line_, "'");
  }
  void skip() { while (pos_ < line_.size() && line_[pos_] == ' ') ++pos_; }
  bool accept(std::string_view s) {
    skip();
    if (line_.compare(pos_, s.size(), s) != 0) return false;
    pos_ += s.size();
    return true;
  }
  void expect(std::string_view s) {
    if (!accept(s)) fail("expected '" + std::string(s) + "'");
  }
  std::string word() {
    skip();
    size_t start = pos_;
    while (pos_ < line_.size() && (std::isalnum(static_cast<unsigned char>(line_[pos_])) || line_[pos_] == '_')) ++pos_;
    if (start == pos_) fail("expected a name");
    return line_.substr(start, pos_ - start);
  }
  int number() {
    std::string w = word();
    try {
      return std::stoi(w);
    } catch (const std::exception&) {
      fail("expected a number, got '" + w + "'");
    }
  }
  int value() {
    expect("%");
    return number();
  }
  DType dtype() {
    std::string w = word();
    for (DType t : kAllDTypes)
      if (dtype_name(t) == w) return t;
    fail("unknown dtype '" + w + "'");
  }
  // The text up to the matching close, for the IR's attribute parser.
  std::string braced() {
    skip();
    size_t start = pos_, depth = 0;
    for (; pos_ < line_.size(); ++pos_) {
      if (line_[pos_] == '{' || line_[pos_] == '[') ++depth;
      if ((line_[pos_] == '}' || line_[pos_] == ']') && --depth == 0) break;
    }
    if (pos_ == line_.size()) fail("unclosed '{'");
    ++pos_;
    return line_.substr(start, pos_ - start);
  }
  bool peek(char c) {
    skip();
    return pos_ < line_.size() && line_[pos_] == c;
  }
  bool done() {
    skip();
    return pos_ == line_.size();
  }

 private:
  std::string line_;
  size_t pos_ = 0;
  int number_;
};

class SpecParser {
 public:
  KernelSpec parse(const std::string& text) {
    std::istringstream lines(text);
    std::string line;
    int number = 0;
    bool closed = false;
    while (std::getline(lines, line)) {
      ++number;
      LineReader r(line, number);
      if (r.done() || r.accept("//")) continue;
      if (number_of_header_ == 0) {
        header(r);
        number_of_header_ = number;
      } else if (closed) {
        r.fail("text after the closing '}'");
      } else if (r.accept("}")) {
        closed = true;
      } else {
        body_line(r);
      }
      if (!r.done()) r.fail("unexpected text at the end of the line");
    }
    if (!closed) EMBER_THROW(Value, "[kernel spec] the kernel is not closed with '}'");
    if (spec_.outputs.empty()) EMBER_THROW(Value, "[kernel spec] the kernel stores nothing");
    return std::move(spec_);
  }

 private:
  void header(LineReader& r) {
    r.expect("kernel");
    r.expect("rank=");
    spec_.rank = r.number();
    if (spec_.rank < 1) r.fail("the rank must be at least 1");
    spec_.columns = r.accept("columns");
    if (spec_.columns && spec_.rank < 2) r.fail("a column kernel has rank 2 or more");
    r.expect("{");
  }

  void body_line(LineReader& r) {
    if (r.accept("store")) {
      r.expect("out" + std::to_string(spec_.outputs.size()));
      r.expect("=");
      spec_.outputs.push_back(defined(r, r.value()));
      return;
    }
    if (!spec_.outputs.empty()) r.fail("an instruction after a store");
    int id = r.value();
    if (id != static_cast<int>(spec_.inputs.size() + spec_.body.size())) r.fail("values are numbered in order from %0");
    r.expect("=");
    if (r.accept("load")) return load(r);
    std::string name = r.word();
    auto op = parse_op(name);
    if (!op || !(op_info(*op).is_elementwise() || is_row_reduction(*op) || *op == Op::Constant))
      r.fail("'" + name + "' is not an elementwise op, a row reduction or a constant");
    KernelInstr instr{*op, {}, {}, DType::Float32, DType::Float32};
    r.expect("(");
    if (!r.accept(")")) {
      do instr.args.push_back(defined(r, r.value()));
      while (r.accept(","));
      r.expect(")");
    }
    const OpInfo& info = op_info(*op);
    if (static_cast<int>(instr.args.size()) < info.min_arity || static_cast<int>(instr.args.size()) > info.max_arity)
      r.fail("'" + name + "' takes " + std::to_string(info.min_arity) + " operands");
    if (r.peek('{')) instr.attrs = parse_attrs(r.braced(), *op);  // the IR's attribute syntax
    if (*op == Op::Constant && (!instr.attrs.count("value") || attr_literal(instr.attrs, "value").size() != 1))
      r.fail("a constant holds one value");
    r.expect(":");
    instr.dtype = r.dtype();
    r.expect("compute=");
    instr.compute = r.dtype();
    spec_.body.push_back(std::move(instr));
  }

  void load(LineReader& r) {
    if (!spec_.body.empty()) r.fail("a load after an instruction");
    r.expect("in" + std::to_string(spec_.inputs.size()));
    r.expect(":");
    KernelInput in{r.dtype(), {}};
    r.expect("[");
    for (int d = 0; d < spec_.rank; ++d) {
      if (d) r.expect(",");
      if (r.accept("*")) in.broadcast.push_back(false);
      else if (r.accept("1")) in.broadcast.push_back(true);
      else r.fail("a dim is * or 1");
    }
    r.expect("]");
    spec_.inputs.push_back(std::move(in));
  }

  int defined(LineReader& r, int value) {
    if (value < 0 || value >= static_cast<int>(spec_.inputs.size() + spec_.body.size()))
      r.fail("%" + std::to_string(value) + " is used before it is defined");
    return value;
  }

  KernelSpec spec_;
  int number_of_header_ = 0;
};

}  // namespace

KernelSpec parse_kernel_spec(const std::string& text) { return SpecParser().parse(text); }

namespace {

// What a row reduction accumulates in: sums, means and products in the registry's accumulator
// (float32 for float16/bfloat16/float32, float64 for float64, int64 for integers and bool); max
// and min pick, in the register type.
DType reduction_compute_dtype(Op op, DType input) {
  if (op == Op::Sum || op == Op::Prod) return op_info(op).reduction->accumulator(input);
  if (!is_floating(input)) return op == Op::Mean ? DType::Float32 : input;
  return input == DType::Float64 ? DType::Float64 : DType::Float32;
}

}  // namespace

KernelSpec spec_of_group(const std::vector<Node*>& nodes, const Shape& domain, const std::vector<Value>& outputs,
                         std::vector<Value>& inputs) {
  KernelSpec spec;
  spec.rank = std::max<int>(1, static_cast<int>(domain.size()));
  std::unordered_map<const Node*, int> number;  // a group node's value number, once defined
  std::unordered_map<Value, int, ValueHash> input_number;
  // Constant exponents of pow that the backend specialises on (2, 3, 4) are in the spec's text,
  // not loaded. No other constant is: LLVM would fold x * 1.0 to x, which is not the
  // interpreter's answer for a signalling NaN.
  std::vector<Value> immediates;
  auto is_immediate = [&](const Value& v) {
    if (v.node->op != Op::Constant || !is_static(v.type().shape) || numel(v.type().shape) != Dim(1)) return false;
    const Literal& value = attr_literal(v.node->attrs, "value");
    if (!is_floating(value.dtype) || (value.floats[0] != 2.0 && value.floats[0] != 3.0 && value.floats[0] != 4.0))
      return false;
    for (const Use& u : v.node->uses())
      if (u.user && std::find(nodes.begin(), nodes.end(), u.user) != nodes.end() &&
          (u.user->op != Op::Pow || u.operand != 1))
        return false;
    return true;
  };
  auto operand = [&](const Value& v) {
    if (auto it = number.find(v.node); it != number.end()) return it->second;
    auto [it, added] = input_number.try_emplace(v, static_cast<int>(inputs.size()));
    if (added) inputs.push_back(v);
    return it->second;
  };
  // Inputs first: number them in the order the nodes read them.
  for (Node* n : nodes) {
    for (const Value& in : n->inputs()) {
      if (std::find(nodes.begin(), nodes.end(), in.node) != nodes.end()) continue;
      if (!is_immediate(in)) operand(in);
      else if (std::find(immediates.begin(), immediates.end(), in) == immediates.end()) immediates.push_back(in);
    }
  }
  for (const Value& v : inputs) {
    const Shape& s = v.type().shape;
    KernelInput in{v.type().dtype, std::vector<bool>(spec.rank, false)};
    // Right-aligned against the domain, as broadcasting is; missing leading dims broadcast.
    size_t lead = domain.size() - s.size();
    for (size_t d = 0; d < domain.size(); ++d)
      in.broadcast[d] = d < lead || (s[d - lead] == Dim(1) && domain[d] != Dim(1));
    spec.inputs.push_back(std::move(in));
  }
  for (const Value& v : immediates) {
    DType dt = v.type().dtype;
    number[v.node] = static_cast<int>(spec.inputs.size() + spec.body.size());
    spec.body.push_back({Op::Constant, {{"value", attr_literal(v.node->attrs, "value")}}, {}, dt, dt});
  }
  for (Node* n : nodes) {
    std::vector<TensorType> types;
    for (const Value& in : n->inputs()) types.push_back(in.type());
    DType compute = is_row_reduction(n->op) ? reduction_compute_dtype(n->op, types[0].dtype)
                                            : elementwise_compute_dtype(n->op, types, n->type().dtype);
    KernelInstr instr{n->op, n->attrs, {}, n->type().dtype, compute};
    for (const Value& in : n->inputs()) instr.args.push_back(operand(in));
    number[n] = static_cast<int>(spec.inputs.size() + spec.body.size());
    spec.body.push_back(std::move(instr));
  }
  for (const Value& v : outputs) spec.outputs.push_back(number.at(v.node));
  return spec;
}

}  // namespace ember::codegen

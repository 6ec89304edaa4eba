// Parser for the IR text form written by print(). Lines starting with "//" are comments, so
// test files can carry FileCheck directives.
#include <bit>
#include <cctype>
#include <cstdlib>
#include <limits>
#include <map>
#include <sstream>

#include "ir/error.h"
#include "ir/graph.h"

namespace ember {

namespace {

class Cursor {
 public:
  Cursor(std::string_view text, int line) : text_(text), line_(line) {}

  [[noreturn]] void fail(const std::string& why) const {
    EMBER_THROW(Value, "[parse] line ", line_, ": ", why, " at '", text_.substr(pos_, 40), "'");
  }
  void skip() { while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_; }
  bool done() { skip(); return pos_ >= text_.size(); }
  bool peek(std::string_view s) { skip(); return text_.substr(pos_, s.size()) == s; }
  bool accept(std::string_view s) {
    if (!peek(s)) return false;
    pos_ += s.size();
    return true;
  }
  void expect(std::string_view s) { if (!accept(s)) fail("expected '" + std::string(s) + "'"); }
  std::string word() {  // identifiers, numbers, and names like f32 or -inf
    skip();
    size_t start = pos_;
    while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) ||
                                   std::string_view("_.+-").find(text_[pos_]) != std::string_view::npos))
      ++pos_;
    if (start == pos_) fail("expected a word");
    return std::string(text_.substr(start, pos_ - start));
  }
  // Text up to the next top-level ',' or the closing bracket `close` (not consumed).
  std::string until(char close) {
    skip();
    size_t start = pos_;
    int depth = 0;
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c == '(' || c == '[') ++depth;
      if (depth == 0 && (c == ',' || c == close)) break;
      if (c == ')' || c == ']') --depth;
      ++pos_;
    }
    return std::string(text_.substr(start, pos_ - start));
  }
  int64_t integer() {
    std::string w = word();
    char* end = nullptr;
    long long v = std::strtoll(w.c_str(), &end, 10);
    if (*end) fail("expected an integer, got '" + w + "'");
    return v;
  }
  double number() {
    std::string w = word();
    char* end = nullptr;
    if (w.rfind("nan_0x", 0) == 0) {  // a NaN with its sign and payload, as the printer writes it
      unsigned long long bits = std::strtoull(w.c_str() + 6, &end, 16);
      if (*end || w.size() == 6) fail("expected a number, got '" + w + "'");
      return std::bit_cast<double>(static_cast<uint64_t>(bits));
    }
    double v = std::strtod(w.c_str(), &end);
    if (*end || w.empty()) fail("expected a number, got '" + w + "'");
    return v;
  }
  DType dtype() {
    std::string w = word();
    auto t = parse_dtype(w);
    if (!t) fail("unknown dtype '" + w + "'");
    return *t;
  }
  template <class F>
  void list(char close, F&& item) {  // after the opening bracket
    if (accept(std::string(1, close))) return;
    do item(); while (accept(","));
    expect(std::string(1, close));
  }
  Shape shape() {
    expect("[");
    Shape s;
    list(']', [&] { s.push_back(parse_dim(until(']'))); });
    return s;
  }
  TensorType type() {
    DType t = dtype();
    return {t, shape()};
  }
  int value_ref() {
    expect("%");
    return static_cast<int>(integer());
  }
  // The type of an attribute the op does not declare (an extern op's own), from its text:
  // "text", true/false, [ints], f32[literal], a dtype, a float (with '.', 'e', nan or inf), an
  // integer. Extern ops take no shape attributes, so [2, 3] is unambiguous.
  AttrType guess_attr_type() {
    skip();
    std::string_view rest = text_.substr(pos_);
    if (rest.starts_with("\"")) return AttrType::String;
    if (rest.starts_with("[")) return AttrType::Ints;
    size_t end = 0;
    while (end < rest.size() && (std::isalnum(static_cast<unsigned char>(rest[end])) ||
                                 std::string_view("_.+-").find(rest[end]) != std::string_view::npos))
      ++end;
    std::string_view w = rest.substr(0, end);
    if (w == "true" || w == "false") return AttrType::Bool;
    if (parse_dtype(w)) return end < rest.size() && rest[end] == '[' ? AttrType::Literal : AttrType::DType;
    if (w.find_first_of(".eEni") != std::string_view::npos) return AttrType::Float;
    return AttrType::Int;
  }

  Attr attr(AttrType type) {
    switch (type) {
      case AttrType::Int: return integer();
      case AttrType::Float: return number();
      case AttrType::Bool: {
        std::string w = word();
        if (w != "true" && w != "false") fail("expected true or false");
        return w == "true";
      }
      case AttrType::DType: return dtype();
      case AttrType::Ints: {
        std::vector<int64_t> v;
        expect("[");
        list(']', [&] { v.push_back(integer()); });
        return v;
      }
      case AttrType::Shape: return shape();
      case AttrType::String: {
        expect("\"");
        size_t end = text_.find('"', pos_);
        if (end == std::string_view::npos) fail("unterminated string");
        std::string s(text_.substr(pos_, end - pos_));
        pos_ = end + 1;
        return s;
      }
      case AttrType::Literal: {
        Literal lit;
        lit.dtype = dtype();
        expect("[");
        list(']', [&] {
          if (is_floating(lit.dtype)) lit.floats.push_back(number());
          else lit.ints.push_back(integer());
        });
        return lit;
      }
    }
    fail("unknown attribute type");
  }

 private:
  std::string_view text_;
  int line_;
  size_t pos_ = 0;
};

// The parse of one graph, line by line.
class GraphParser {
 public:
  Attrs attributes(Cursor& c, const OpInfo& info) {
    Attrs attrs;
    if (!c.accept("{")) return attrs;
    c.list('}', [&] {
      std::string key = c.word();
      c.expect("=");
      auto spec = std::find_if(info.attrs.begin(), info.attrs.end(),
                               [&](const AttrSpec& s) { return s.name == key; });
      if (spec == info.attrs.end() && info.open_attributes) {
        attrs[key] = c.attr(c.guess_attr_type());
        return;
      }
      if (spec == info.attrs.end())
        c.fail("op '" + std::string(info.name) + "' has no attribute '" + key + "'");
      attrs[key] = c.attr(spec->type);
    });
    return attrs;
  }

  std::unique_ptr<Graph> parse(const std::string& text) {
    std::istringstream lines(text);
    std::string line;
    int number = 0;
    while (std::getline(lines, line)) {
      Cursor c(line, ++number);
      if (c.done() || c.peek("//")) continue;
      if (state_ == Done) c.fail("text after the end of the graph");
      if (state_ == Header) header(c);
      else body_line(c);
    }
    if (state_ != Done) EMBER_THROW(Value, "[parse] the graph is not closed with '}'");
    for (const auto& [id, r] : ranges_) highest_symbol_ = std::max(highest_symbol_, id);
    for (int s = 0; s <= highest_symbol_; ++s)
      g_->add_symbol(ranges_.count(s) ? ranges_[s] : SymbolRange{});
    return std::move(g_);
  }

 private:
  void header(Cursor& c) {
    c.expect("graph");
    c.expect("(");
    c.list(')', [&] {
      int id = c.value_ref();
      c.expect(":");
      TensorType t = c.type();
      note_symbols(t.shape);
      define(c, id, g_->add_input(t));
    });
    c.expect("{");
    state_ = Body;
  }

  void body_line(Cursor& c) {
    if (c.accept("}")) {
      state_ = Done;
    } else if (c.accept("symbol")) {
      symbol(c);
    } else if (c.accept("return")) {
      if (!c.done()) {
        do g_->add_output(use(c)); while (c.accept(","));
      }
      if (!c.done()) c.fail("unexpected text after return");
    } else {
      node_line(c);
    }
  }

  void symbol(Cursor& c) {
    c.expect("s");
    int id = static_cast<int>(c.integer());
    c.expect("in");
    c.expect("[");
    SymbolRange r;
    r.min = c.integer();
    c.expect(",");
    std::string max = c.word();
    r.max = max == "max" ? std::numeric_limits<int64_t>::max() : std::stoll(max);
    c.expect("]");
    ranges_[id] = r;
  }

  // %N = op(...) {...} : type, or %N:K = op(...) {...} : type0, ..., typeK-1
  void node_line(Cursor& c) {
    int id = c.value_ref();
    int count = c.accept(":") ? static_cast<int>(c.integer()) : 1;
    c.expect("=");
    std::string name = c.word();
    auto op = parse_op(name);
    if (!op) c.fail("unknown op '" + name + "'");
    if (*op == Op::Input) c.fail("inputs are declared in the graph header");
    c.expect("(");
    std::vector<Value> inputs;
    c.list(')', [&] { inputs.push_back(use(c)); });
    Attrs attrs = attributes(c, op_info(*op));
    c.expect(":");
    std::vector<TensorType> declared;
    do declared.push_back(c.type()); while (c.accept(","));
    for (const TensorType& t : declared) note_symbols(t.shape);
    if (!c.done()) c.fail("unexpected text after the type");
    if (static_cast<int>(declared.size()) != count)
      c.fail(detail::concat("%", id, " names ", count, " outputs but ", declared.size(),
                            " types follow"));
    Node* node = *op == Op::Constant ? constant(c, attrs, declared) : build(c, *op, inputs, attrs);
    if (node->types != declared)
      c.fail("declared type " + types_str(declared) + " differs from the inferred " +
             types_str(node->types));
    define(c, id, node);
  }

  Node* constant(Cursor& c, const Attrs& attrs, const std::vector<TensorType>& declared) {
    auto it = attrs.find("value");
    if (it == attrs.end() || attr_type(it->second) != AttrType::Literal)
      c.fail("constant needs a value");
    const Literal& lit = std::get<Literal>(it->second);
    const TensorType& t = declared[0];
    if (declared.size() != 1 || !is_static(t.shape) || lit.dtype != t.dtype ||
        static_cast<int64_t>(lit.size()) != numel(t.shape).value())
      c.fail("constant value does not match its type " + types_str(declared));
    return g_->add_constant(lit, t.shape);
  }

  Node* build(Cursor& c, Op op, std::vector<Value> inputs, Attrs attrs) {
    try {
      return g_->add(op, std::move(inputs), std::move(attrs));
    } catch (const Error& e) {
      c.fail(e.what());
    } catch (const SymbolicShapeError& e) {
      c.fail(e.what());
    }
  }

  void define(Cursor& c, int id, Node* node) {
    if (!values_.emplace(id, node).second) c.fail("%" + std::to_string(id) + " is defined twice");
  }

  // %N for a single-output node, %N#i for output i of any node.
  Value use(Cursor& c) {
    int id = c.value_ref();
    auto it = values_.find(id);
    if (it == values_.end()) c.fail("%" + std::to_string(id) + " is not defined");
    Node* node = it->second;
    if (!c.accept("#")) {
      if (node->num_outputs() != 1)
        c.fail(detail::concat("%", id, " has ", node->num_outputs(), " outputs: name one as %", id,
                              "#i"));
      return {node, 0};
    }
    int64_t index = c.integer();
    if (index < 0 || index >= node->num_outputs())
      c.fail(detail::concat("%", id, " has no output ", index, " (it has ", node->num_outputs(),
                            ")"));
    return {node, static_cast<int>(index)};
  }

  void note_symbols(const Shape& s) {
    for (const Dim& d : s)
      for (int sym : d.symbols()) highest_symbol_ = std::max(highest_symbol_, sym);
  }

  std::unique_ptr<Graph> g_ = std::make_unique<Graph>();
  std::map<int, Node*> values_;
  std::map<int, SymbolRange> ranges_;
  int highest_symbol_ = -1;
  enum { Header, Body, Done } state_ = Header;
};

}  // namespace

std::unique_ptr<Graph> parse_graph(const std::string& text) { return GraphParser().parse(text); }

Attrs parse_attrs(std::string_view text, Op op) {
  Cursor c(text, 1);
  Attrs attrs = GraphParser().attributes(c, op_info(op));
  if (!c.done()) c.fail("unexpected text after the attributes");
  return attrs;
}

}  // namespace ember

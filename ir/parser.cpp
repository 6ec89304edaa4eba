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

}  // namespace

std::unique_ptr<Graph> parse_graph(const std::string& text) {
  auto g = std::make_unique<Graph>();
  std::map<int, Node*> values;
  std::map<int, SymbolRange> ranges;
  std::istringstream lines(text);
  std::string line;
  int number = 0;
  enum { Header, Body, Done } state = Header;
  auto lookup = [&](Cursor& c) {
    int id = c.value_ref();
    auto it = values.find(id);
    if (it == values.end()) c.fail("%" + std::to_string(id) + " is not defined");
    return it->second;
  };
  auto max_symbol = [](const Shape& s, int& m) {
    for (const Dim& d : s)
      for (int sym : d.symbols()) m = std::max(m, sym);
  };
  int highest_symbol = -1;
  while (std::getline(lines, line)) {
    ++number;
    Cursor c(line, number);
    if (c.done() || c.peek("//")) continue;
    if (state == Done) c.fail("text after the end of the graph");
    if (state == Header) {
      c.expect("graph");
      c.expect("(");
      c.list(')', [&] {
        int id = c.value_ref();
        c.expect(":");
        TensorType t = c.type();
        max_symbol(t.shape, highest_symbol);
        if (values.count(id)) c.fail("%" + std::to_string(id) + " is defined twice");
        values[id] = g->add_input(t);
      });
      c.expect("{");
      state = Body;
      continue;
    }
    if (c.accept("}")) { state = Done; continue; }
    if (c.accept("symbol")) {
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
      ranges[id] = r;
      continue;
    }
    if (c.accept("return")) {
      if (!c.done()) {
        do g->outputs().push_back(lookup(c)); while (c.accept(","));
      }
      if (!c.done()) c.fail("unexpected text after return");
      continue;
    }
    int id = c.value_ref();
    if (values.count(id)) c.fail("%" + std::to_string(id) + " is defined twice");
    c.expect("=");
    std::string name = c.word();
    auto op = parse_op(name);
    if (!op) c.fail("unknown op '" + name + "'");
    const OpInfo& info = op_info(*op);
    c.expect("(");
    std::vector<Node*> inputs;
    c.list(')', [&] { inputs.push_back(lookup(c)); });
    Attrs attrs;
    if (c.accept("{")) {
      c.list('}', [&] {
        std::string key = c.word();
        c.expect("=");
        auto spec = std::find_if(info.attrs.begin(), info.attrs.end(), [&](const AttrSpec& s) { return s.name == key; });
        if (spec == info.attrs.end()) c.fail("op '" + name + "' has no attribute '" + key + "'");
        attrs[key] = c.attr(spec->type);
      });
    }
    c.expect(":");
    TensorType declared = c.type();
    max_symbol(declared.shape, highest_symbol);
    if (!c.done()) c.fail("unexpected text after the type");
    Node* node = nullptr;
    if (*op == Op::Constant) {
      auto it = attrs.find("value");
      if (it == attrs.end() || attr_type(it->second) != AttrType::Literal) c.fail("constant needs a value");
      const Literal& lit = std::get<Literal>(it->second);
      if (!is_static(declared.shape) || lit.dtype != declared.dtype ||
          static_cast<int64_t>(lit.size()) != numel(declared.shape).value())
        c.fail("constant value does not match its type " + declared.str());
      node = g->add_constant(lit, declared.shape);
    } else if (*op == Op::Input) {
      c.fail("inputs are declared in the graph header");
    } else {
      try {
        node = g->add(*op, inputs, attrs);
      } catch (const Error& e) {
        c.fail(e.what());
      } catch (const SymbolicShapeError& e) {
        c.fail(e.what());
      }
      if (!(node->type == declared))
        c.fail("declared type " + declared.str() + " differs from the inferred " + node->type.str());
    }
    values[id] = node;
  }
  if (state != Done) EMBER_THROW(Value, "[parse] the graph is not closed with '}'");
  for (const auto& [id, r] : ranges) highest_symbol = std::max(highest_symbol, id);
  for (int s = 0; s <= highest_symbol; ++s) g->add_symbol(ranges.count(s) ? ranges[s] : SymbolRange{});
  return g;
}

}  // namespace ember

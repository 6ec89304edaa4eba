// The ops, each in one place: exec_step runs a step for eager calls, traced calls and the
// generator alike, and Program::run, the body of every fuzzed program, runs them all.
#include <algorithm>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <vector>

#include "tests/unit/fuzz_capture.h"

namespace ember::capture_fuzz {

// The names of each switch's cases below, in order: a step's `op` indexes both.
const char* const kUnaryNames[] = {"neg", "abs", "exp", "log", "sqrt", "sin", "tanh", "sigmoid", "relu",
                                   "floor", "round", "sign", "reciprocal", "isnan", "isinf", "logical_not",
                                   "gelu", "silu", "erf", "rsqrt", "expm1", "log1p", "trunc", "ceil"};
const int kUnaryCount = static_cast<int>(std::size(kUnaryNames));

const char* const kBinaryNames[] = {"add", "sub", "mul", "div", "pow", "maximum", "minimum", "floor_divide",
                                    "remainder", "eq", "ne", "lt", "le", "gt", "ge", "logical_and",
                                    "logical_or", "bitwise_and", "bitwise_xor"};
const int kBinaryCount = static_cast<int>(std::size(kBinaryNames));

const char* const kCompareNames[] = {"gt", "lt", "eq", "ne", "isnan"};

const char* const kReduceNames[] = {"sum", "mean", "prod", "max", "min", "argmax", "argmin", "var", "std", "logsumexp"};
const int kReduceCount = static_cast<int>(std::size(kReduceNames));

namespace {

Tensor unary_op(int op, const Tensor& x) {
  switch (op) {
    case 0: return ember::neg(x);
    case 1: return ember::abs(x);
    case 2: return ember::exp(x);
    case 3: return ember::log(x);
    case 4: return ember::sqrt(x);
    case 5: return ember::sin(x);
    case 6: return ember::tanh(x);
    case 7: return ember::sigmoid(x);
    case 8: return ember::relu(x);
    case 9: return ember::floor(x);
    case 10: return ember::round(x);
    case 11: return ember::sign(x);
    case 12: return ember::reciprocal(x);
    case 13: return ember::isnan(x);
    case 14: return ember::isinf(x);
    case 15: return ember::logical_not(x);
    case 16: return ember::gelu(x);
    case 17: return ember::silu(x);
    case 18: return ember::erf(x);
    case 19: return ember::rsqrt(x);
    case 20: return ember::expm1(x);
    case 21: return ember::log1p(x);
    case 22: return ember::trunc(x);
    default: return ember::ceil(x);
  }
}

template <class A, class B>
Tensor binary_op(int op, const A& a, const B& b) {
  switch (op) {
    case 0: return ember::add(a, b);
    case 1: return ember::sub(a, b);
    case 2: return ember::mul(a, b);
    case 3: return ember::div(a, b);
    case 4: return ember::pow(a, b);
    case 5: return ember::maximum(a, b);
    case 6: return ember::minimum(a, b);
    case 7: return ember::floor_divide(a, b);
    case 8: return ember::remainder(a, b);
    case 9: return ember::eq(a, b);
    case 10: return ember::ne(a, b);
    case 11: return ember::lt(a, b);
    case 12: return ember::le(a, b);
    case 13: return ember::gt(a, b);
    case 14: return ember::ge(a, b);
    case 15: return ember::logical_and(a, b);
    case 16: return ember::logical_or(a, b);
    case 17: return ember::bitwise_and(a, b);
    default: return ember::bitwise_xor(a, b);
  }
}

Tensor compare_op(int op, const Tensor& x, const Tensor& y) {
  switch (op) {
    case 0: return ember::gt(x, y);
    case 1: return ember::lt(x, y);
    case 2: return ember::eq(x, y);
    case 3: return ember::ne(x, y);
    default: return ember::isnan(x);
  }
}

Tensor reduce_op(int op, const Tensor& x, std::vector<int64_t> axes, bool keepdim) {
  switch (op) {
    case 0: return ember::sum(x, axes, keepdim);
    case 1: return ember::mean(x, axes, keepdim);
    case 2: return ember::prod(x, axes, keepdim);
    case 3: return ember::max(x, axes, keepdim);
    case 4: return ember::min(x, axes, keepdim);
    case 5: return ember::argmax(x, axes, keepdim);
    case 6: return ember::argmin(x, axes, keepdim);
    case 7: return ember::var(x, axes, 1.0, keepdim);
    case 8: return ember::std(x, axes, 1.0, keepdim);
    default: return ember::logsumexp(x, axes, keepdim);
  }
}

std::optional<Scalar> bound(const Step& s, int which, const std::vector<Num>& nums) {
  // ints[0]: bit 0 a lower bound, bit 1 an upper bound; a number operand replaces the first one.
  if (!(s.ints[0] & (1 << which))) return std::nullopt;
  if (which == 0 && !s.n.empty()) return nums[s.n[0]].scalar();
  return s.c[which].scalar();
}

}  // namespace

Num num_of(const Arg& a) {
  switch (a.index()) {
    case 1: return Num::f64(std::get<double>(a));
    case 2: return Num::f32(std::get<float>(a));
    case 3: return Num::i64(std::get<int64_t>(a));
    case 4: return Num::i32(std::get<int32_t>(a));
    case 5: return Num::boolean(std::get<bool>(a));
  }
  throw std::logic_error("num_of: a tensor");
}

Arg arg_of(const Num& n) {
  switch (n.kind) {
    case Num::F64: return n.f;
    case Num::F32: return static_cast<float>(n.f);
    case Num::I64: return n.i;
    case Num::I32: return static_cast<int32_t>(n.i);
    case Num::Bool: return n.i != 0;
  }
  return n.f;
}

void exec_step(const Step& s, std::vector<Tensor>& T, std::vector<Num>& N) {
  auto x = [&](size_t k) -> const Tensor& { return T[s.t[k]]; };
  switch (s.kind) {
    case K::Unary: T.push_back(unary_op(s.op, x(0))); return;
    case K::Binary: T.push_back(binary_op(s.op, x(0), x(1))); return;
    case K::BinaryConst:
      T.push_back(s.flag ? binary_op(s.op, s.c[0].scalar(), x(0)) : binary_op(s.op, x(0), s.c[0].scalar()));
      return;
    case K::BinaryNum: {
      Scalar v = N[s.n[0]].scalar();
      T.push_back(s.flag ? binary_op(s.op, v, x(0)) : binary_op(s.op, x(0), v));
      return;
    }
    case K::Where: T.push_back(where(compare_op(s.op, x(0), x(1)), x(2), x(3))); return;
    case K::WhereConst: {
      Tensor cond = gt(x(0), 0.0);
      T.push_back(s.flag ? where(cond, s.c[0].scalar(), x(1)) : where(cond, x(1), s.c[0].scalar()));
      return;
    }
    case K::Clamp: T.push_back(clamp(x(0), bound(s, 0, N), bound(s, 1, N))); return;
    case K::ClampTensor: T.push_back(clamp(x(0), x(1), x(2))); return;
    case K::Reduce: T.push_back(reduce_op(s.op, x(0), s.ints, s.flag)); return;
    case K::Slice: T.push_back(slice(x(0), s.ints[0], s.ints[1], s.ints[2], s.ints[3])); return;
    case K::SliceSized: {
      int64_t axis = s.ints[0], start = s.ints[1], off = s.ints[2];
      if (s.op == 0) T.push_back(slice(x(0), axis, start, static_cast<int64_t>(x(0).size(axis)) + off));
      else T.push_back(slice(x(0), axis, static_cast<int64_t>(x(0).size(axis) / 2) + off));
      return;
    }
    case K::SliceNum:
      T.push_back(slice(x(0), s.ints[0], 0, avoid("neg-slice") ? std::max<int64_t>(0, N[s.n[0]].as_index()) : N[s.n[0]].as_index()));
      return;
    case K::Reshape:
      switch (s.op) {
        case 0: T.push_back(reshape(x(0), {-1})); return;
        case 1: T.push_back(flatten(x(0), s.ints[0], s.ints[1])); return;
        case 2: {  // merge the first two dims, keeping sizes symbolic
          SymShape sz = x(0).sizes();
          if (sz.size() < 2) EMBER_THROW(Value, "[fuzz] needs two dims");  // raised alike on both paths
          SymShape target{sz[0] * sz[1]};
          target.insert(target.end(), sz.begin() + 2, sz.end());
          T.push_back(reshape(x(0), target));
          return;
        }
        case 3: T.push_back(reshape(x(0), {1, -1})); return;
        case 4: {  // fixed sizes (as the generator saw them)
          SymShape target(s.ints.begin(), s.ints.end());
          T.push_back(reshape(x(0), target));
          return;
        }
        case 5: {  // the concrete shape reversed: specialises every dim
          std::vector<int64_t> shape = x(0).shape();
          std::reverse(shape.begin(), shape.end());
          T.push_back(reshape(x(0), SymShape(shape.begin(), shape.end())));
          return;
        }
        default: T.push_back(reshape(x(0), {x(0).size(-1), -1})); return;
      }
    case K::Permute: T.push_back(permute(x(0), s.ints)); return;
    case K::Transpose: T.push_back(transpose(x(0), s.ints[0], s.ints[1])); return;
    case K::Expand:
      switch (s.op) {
        case 0: T.push_back(expand(x(0), x(1).sizes())); return;
        case 1: {
          SymShape sz = x(0).sizes();
          sz.insert(sz.begin(), SymInt(s.ints[0]));
          T.push_back(expand(unsqueeze(x(0), 0), sz));
          return;
        }
        default: T.push_back(expand(x(0), SymShape(s.ints.begin(), s.ints.end()))); return;
      }
    case K::Squeeze: T.push_back(squeeze(x(0), s.ints)); return;
    case K::Unsqueeze: T.push_back(unsqueeze(x(0), s.ints[0])); return;
    case K::Concat:
    case K::Stack: {
      std::vector<Tensor> xs;
      for (int i : s.t) xs.push_back(T[i]);
      T.push_back(s.kind == K::Concat ? concat(xs, s.ints[0]) : stack(xs, s.ints[0]));
      return;
    }
    case K::Pool: {
      const auto& v = s.ints;  // kh, kw, sh, sw (sh < 0: stride = kernel), ph, pw, dilation
      std::vector<int64_t> stride = v[2] < 0 ? std::vector<int64_t>{} : std::vector<int64_t>{v[2], v[3]};
      if (s.op == 0) T.push_back(max_pool2d(x(0), {v[0], v[1]}, stride, {v[4], v[5]}, {v[6], v[6]}, s.flag));
      else if (s.op == 1) T.push_back(avg_pool2d(x(0), {v[0], v[1]}, stride, {v[4], v[5]}, s.flag, s.flag2));
      else T.push_back(adaptive_avg_pool2d(x(0), {v[0], v[1]}));
      return;
    }
    case K::MatMul:
      switch (s.op) {
        case 0: T.push_back(matmul(x(0), x(1))); return;
        case 1: T.push_back(matmul(x(0), transpose(x(0), -1, -2))); return;
        case 2: T.push_back(linear(x(0), x(1))); return;
        default: T.push_back(linear(x(0), x(1), x(2))); return;
      }
    case K::Cast: T.push_back(cast(x(0), s.dtype)); return;
    case K::Softmax:
      switch (s.op) {
        case 0: T.push_back(softmax(x(0), s.ints[0])); return;
        case 1: T.push_back(log_softmax(x(0), s.ints[0])); return;
        default: T.push_back(layer_norm(x(0), {x(0).size(-1)})); return;
      }
    case K::Create:
      switch (s.op) {
        case 0: T.push_back(zeros(x(0).sizes(), s.dtype)); return;
        case 1: T.push_back(full(x(0).sizes(), s.c[0].scalar())); return;
        case 2: T.push_back(arange(static_cast<int64_t>(x(0).size(0)))); return;
        case 3: T.push_back(uniform(x(0).sizes(), s.ints[0])); return;
        default: T.push_back(full({}, s.c[0].scalar(), s.dtype)); return;
      }
    case K::NumTensor: {
      const Num& v = N[s.n[0]];
      if (s.op == 0) T.push_back(scalar_tensor(v.scalar(), v.dtype()));
      else T.push_back(full(x(0).sizes(), v.scalar()));
      return;
    }
    case K::Branch: T.push_back(N[s.n[0]].truthy() ? x(0) : x(1)); return;
    case K::Gather:
      switch (s.op) {
        case 0: T.push_back(gather(x(0), s.ints[0], argmax(x(1), {s.ints[0]}, true))); return;
        case 1: T.push_back(index_select(x(0), s.ints[0], argmax(x(1)))); return;
        case 2: T.push_back(index_select(x(0), s.ints[0], reshape(cast(x(1), DType::Int64), {-1}))); return;
        default: T.push_back(embedding(x(0), cast(x(1), DType::Int64))); return;
      }
    case K::Pad: T.push_back(pad(x(0), s.ints, s.c[0].f)); return;
    case K::Conv:
      T.push_back(conv2d(x(0), x(1), std::nullopt, {s.ints[0], s.ints[0]}, {s.ints[1], s.ints[1]}, {s.ints[2], s.ints[2]}));
      return;
    case K::Item:
      switch (s.op) {
        case 0: N.push_back(Num::f64(sum(x(0)).item<double>())); return;
        case 1: N.push_back(Num::f32(max(x(0)).item<float>())); return;
        case 2: N.push_back(Num::i64(argmax(x(0)).item<int64_t>())); return;
        case 3: N.push_back(Num::boolean((sum(x(0)) > 0.0).to_bool())); return;
        case 4: N.push_back(Num::f64(x(0).item<double>())); return;
        case 5: N.push_back(Num::i32(mean(x(0)).item<int32_t>())); return;
        default: {
          std::vector<double> v = x(0).to_vector();
          N.push_back(Num::f64(v.empty() ? -1.0 : v.back()));
          return;
        }
      }
    case K::Copy: T.push_back(x(0)); return;
    case K::ConstNum: N.push_back(s.c[0]); return;
  }
}

std::vector<Tensor> Program::run(const std::vector<Arg>& args) const {
  std::vector<Tensor> T;
  std::vector<Num> N;
  T.reserve(args.size() + captured.size() + steps.size());
  for (const Arg& a : args) {
    if (auto* t = std::get_if<Tensor>(&a)) T.push_back(*t);
    else N.push_back(num_of(a));
  }
  for (const Tensor& w : captured) T.push_back(w);
  for (const Step& s : steps) exec_step(s, T, N);
  std::vector<Tensor> out;
  for (int o : outputs) {
    // Triage: control flow (n ? a : b) can return the same tensor twice, or an input, at run time.
    auto same = [&](const Tensor& t) { return t.impl() == T[o].impl(); };
    if (avoid("dup-outputs") && std::any_of(out.begin(), out.end(), same)) continue;
    if (avoid("arg-outputs") && std::any_of(T.begin(), T.begin() + first_step_tensor(), same)) continue;
    out.push_back(T[o]);
  }
  if (avoid("dead-code"))  // every value computed is returned too
    for (size_t t = static_cast<size_t>(first_step_tensor()); t < T.size(); ++t)
      if (std::none_of(out.begin(), out.end(), [&](const Tensor& o) { return o.impl() == T[t].impl(); })) out.push_back(T[t]);
  return out;
}

}  // namespace ember::capture_fuzz

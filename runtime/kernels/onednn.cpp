#include "runtime/kernels/onednn.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "runtime/step_settings.h"
#include "runtime/thread_pool.h"

namespace ember::kernels {

namespace {

using dnnl::memory;
using Tag = memory::format_tag;

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// Primitives by geometry, made on first use. A geometry oneDNN cannot run is remembered as null.
// Dynamic sizes make a geometry per size: past kMaxPlans the cache starts over (a plan in use
// stays alive through its shared pointer).
constexpr size_t kMaxPlans = 256;

template <class Plan>
std::shared_ptr<const Plan> cached(const std::vector<int64_t>& key,
                                   std::unique_ptr<Plan> (*make)(const std::vector<int64_t>&)) {
  static std::mutex mu;
  static std::map<std::vector<int64_t>, std::shared_ptr<const Plan>> plans;
  std::lock_guard<std::mutex> lock(mu);
  auto it = plans.find(key);
  if (it == plans.end()) {
    std::shared_ptr<const Plan> plan;
    try {
      plan = make(key);
    } catch (const dnnl::error&) {
    }
    if (plans.size() >= kMaxPlans) plans.clear();
    it = plans.emplace(key, std::move(plan)).first;
  }
  return it->second;
}

// The oneDNN type of ember's float32 or bfloat16.
memory::data_type data_type(DType t) { return t == DType::BFloat16 ? memory::data_type::bf16 : memory::data_type::f32; }

// A geometry's key: its shape (conv_of_key reads it back), the algorithm, the dtype last.
std::vector<int64_t> conv_key(const ConvShape& c, bool bias, ConvAlgorithm algorithm, DType t) {
  std::vector<int64_t> k{c.N, c.C, c.H, c.W, c.O, c.KH, c.KW, c.OH, c.OW, c.groups, bias};
  for (const auto* v : {&c.stride, &c.pad, &c.dil, &c.pad_end}) k.insert(k.end(), v->begin(), v->end());
  k.push_back(static_cast<int64_t>(algorithm));
  k.push_back(static_cast<int64_t>(t));
  return k;
}

ConvShape conv_of_key(const std::vector<int64_t>& k) {
  return {k[0], k[1], k[2], k[3], k[4], k[1] / k[9], k[5], k[6], k[7], k[8], k[9], k[4] / k[9],
          {k[11], k[12]}, {k[13], k[14]}, {k[15], k[16]}, {k[17], k[18]}};
}

// An operand of a convolution in ember's layout (NCHW, OIHW) and in the blocked layout the
// primitive chose, with the reorders between them.
struct Layout {
  memory::desc user, blocked;
  std::optional<dnnl::reorder> to_blocked, to_user;  // absent when the two are the same
};

// One convolution geometry's primitive and its operands' layouts.
struct ConvPlan {
  dnnl::convolution_forward conv;
  Layout src, weights, dst;
  memory::desc bias, scratchpad;
};

Layout layout(const memory::desc& user, const memory::desc& blocked) {
  Layout l{user, blocked, std::nullopt, std::nullopt};
  if (user != blocked) {
    l.to_blocked = dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), user, cpu_engine(), blocked));
    l.to_user = dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), blocked, cpu_engine(), user));
  }
  return l;
}

memory::dims weight_dims(const ConvShape& c) {
  if (c.groups == 1) return {c.O, c.C, c.KH, c.KW};
  return {c.groups, c.O / c.groups, c.C / c.groups, c.KH, c.KW};
}

// Moves to oneDNN's first implementation whose name does (`brgemm`) or does not start with
// "brg", its brgemm convolutions; keeps its first choice where there is none.
void prefer_brgemm(dnnl::convolution_forward::primitive_desc& pd, bool brgemm) {
  dnnl::convolution_forward::primitive_desc first = pd;
  while ((std::string(pd.impl_info_str()).rfind("brg", 0) == 0) != brgemm)
    if (!pd.next_impl()) {
      pd = first;
      return;
    }
}

std::unique_ptr<ConvPlan> make_conv(const std::vector<int64_t>& key) {
  const memory::data_type dt = data_type(static_cast<DType>(key.back()));
  const ConvShape c = conv_of_key(key);
  const bool bias = key[10] != 0;
  auto plan = std::make_unique<ConvPlan>();
  memory::dims src{c.N, c.C, c.H, c.W}, dst{c.N, c.O, c.OH, c.OW}, wts = weight_dims(c);
  // oneDNN's dilation counts the gaps between taps (0 for a dense window).
  memory::dims strides{c.stride[0], c.stride[1]}, dilation{c.dil[0] - 1, c.dil[1] - 1};
  memory::dims pad_l{c.pad[0], c.pad[1]}, pad_r{c.pad_end[0], c.pad_end[1]};
  auto any = [&](const memory::dims& d) { return memory::desc(d, dt, Tag::any); };
  memory::desc bias_desc = bias ? memory::desc({c.O}, dt, Tag::x) : memory::desc();
  auto desc = dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                              any(src), any(wts), bias_desc, any(dst), strides, dilation, pad_l,
                                              pad_r);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // per call: concurrent plans share primitives
  auto pd = dnnl::convolution_forward::primitive_desc(desc, attr, cpu_engine());
  // By default oneDNN's direct JIT kernels rather than its brgemm ones. With AVX-512, oneDNN 2.6
  // picks brgconv first, which sums each output in another order than the direct kernel PyTorch's
  // own oneDNN runs: over non-negative inputs (after a ReLU) its float32 error was twice eager's,
  // and through a ResNet's training step four times (docs/testing.md's model rule allows two).
  // The direct kernel gives eager's results bit for bit on those layers. max-autotune may still
  // choose brgconv for a step, checked against the default's values (ConvAlgorithm::Brgemm).
  const auto algorithm = static_cast<ConvAlgorithm>(key[key.size() - 2]);
  prefer_brgemm(pd, algorithm == ConvAlgorithm::Brgemm);
  plan->conv = dnnl::convolution_forward(pd);
  plan->src = layout(memory::desc(src, dt, Tag::nchw), pd.src_desc());
  plan->weights = layout(memory::desc(wts, dt, c.groups == 1 ? Tag::oihw : Tag::goihw), pd.weights_desc());
  plan->dst = layout(memory::desc(dst, dt, Tag::nchw), pd.dst_desc());
  plan->bias = bias_desc;
  plan->scratchpad = pd.scratchpad_desc();
  return plan;
}

// C = A @ B (+ beta * C through a sum post-op).
struct GemmPlan {
  dnnl::matmul matmul;
  memory::desc a, b, c, scratchpad;
};

std::unique_ptr<GemmPlan> make_gemm(const std::vector<int64_t>& key) {
  const memory::data_type dt = data_type(static_cast<DType>(key[5]));
  int64_t m = key[0], n = key[1], k = key[2];
  bool trans_b = key[3] != 0;
  float beta = key[4] ? 1.0f : 0.0f;
  auto plan = std::make_unique<GemmPlan>();
  plan->a = memory::desc({m, k}, dt, memory::dims{k, 1});
  plan->b = memory::desc({k, n}, dt, trans_b ? memory::dims{1, k} : memory::dims{n, 1});
  plan->c = memory::desc({m, n}, dt, memory::dims{n, 1});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (beta != 0.0f) {
    dnnl::post_ops ops;
    ops.append_sum(beta);
    attr.set_post_ops(ops);
  }
  auto pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(plan->a, plan->b, plan->c), attr, cpu_engine());
  plan->matmul = dnnl::matmul(pd);
  plan->scratchpad = pd.scratchpad_desc();
  return plan;
}

// Ember's array `data` in the primitive's layout: itself, or reordered into `buffer`.
memory blocked(const Layout& l, const void* data, std::vector<float>& buffer, dnnl::stream& stream) {
  memory user(l.user, cpu_engine(), const_cast<void*>(data));
  if (!l.to_blocked) return user;
  buffer.resize(l.blocked.get_size() / sizeof(float) + 1);
  memory out(l.blocked, cpu_engine(), buffer.data());
  l.to_blocked->execute(stream, user, out);
  return out;
}

}  // namespace

dnnl::stream& thread_stream() {
  thread_local dnnl::stream stream(cpu_engine());
  return stream;
}

bool onednn_has_avx512() {
  // The ISA values are bit sets, each holding the ones it extends (avx2_vnni's is above avx512_core's).
  const auto want = static_cast<unsigned>(dnnl::cpu_isa::avx512_core);
  static const bool avx512 = (static_cast<unsigned>(dnnl::get_effective_cpu_isa()) & want) == want;
  return avx512;
}

bool onednn_gemm(DType t, const void* a, const void* b, void* c, int64_t m, int64_t n, int64_t k, bool trans_b,
                 float beta) {
  if (beta != 0.0f && beta != 1.0f) return false;
  OpenMPThreads threads;
  std::shared_ptr<const GemmPlan> plan = cached({m, n, k, trans_b, beta != 0.0f, static_cast<int64_t>(t)}, make_gemm);
  if (!plan) return false;
  std::vector<char> scratchpad(plan->scratchpad.get_size());
  dnnl::engine& e = cpu_engine();
  plan->matmul.execute(thread_stream(), {{DNNL_ARG_SRC, memory(plan->a, e, const_cast<void*>(a))},
                                         {DNNL_ARG_WEIGHTS, memory(plan->b, e, const_cast<void*>(b))},
                                         {DNNL_ARG_DST, memory(plan->c, e, c)},
                                         {DNNL_ARG_SCRATCHPAD, memory(plan->scratchpad, e, scratchpad.data())}});
  thread_stream().wait();
  return true;
}

bool onednn_conv2d(DType t, const ConvShape& c, const void* x, const void* w, const void* bias, void* y) {
  OpenMPThreads threads;
  ConvAlgorithm algorithm = current_step_settings().conv == ConvAlgorithm::Brgemm ? ConvAlgorithm::Brgemm
                                                                                  : ConvAlgorithm::Auto;
  std::shared_ptr<const ConvPlan> plan = cached(conv_key(c, bias != nullptr, algorithm, t), make_conv);
  if (!plan) return false;
  dnnl::stream& stream = thread_stream();
  thread_local std::vector<float> src_buf, weight_buf, dst_buf;
  std::vector<char> scratchpad(plan->scratchpad.get_size());
  memory user_dst(plan->dst.user, cpu_engine(), y);
  memory dst = user_dst;
  if (plan->dst.to_user) {
    dst_buf.resize(plan->dst.blocked.get_size() / sizeof(float) + 1);
    dst = memory(plan->dst.blocked, cpu_engine(), dst_buf.data());
  }
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, blocked(plan->src, x, src_buf, stream)},
                                       {DNNL_ARG_WEIGHTS, blocked(plan->weights, w, weight_buf, stream)},
                                       {DNNL_ARG_DST, dst},
                                       {DNNL_ARG_SCRATCHPAD, memory(plan->scratchpad, cpu_engine(), scratchpad.data())}};
  if (bias) args.emplace(DNNL_ARG_BIAS, memory(plan->bias, cpu_engine(), const_cast<void*>(bias)));
  plan->conv.execute(stream, args);
  if (plan->dst.to_user) plan->dst.to_user->execute(stream, dst, user_dst);
  stream.wait();
  return true;
}

}  // namespace ember::kernels

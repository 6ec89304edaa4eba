// The op sweep's float64 reference for contractions and pools, summing in long double.
#include "tests/unit/reference_contractions.h"

#include <algorithm>

namespace ember::ref {
namespace {

int64_t conv_out(int64_t size, int64_t k, int64_t s, int64_t p, int64_t d) {
  return (size + 2 * p - d * (k - 1) - 1) / s + 1;
}

// PyTorch's pooling output size, with the ceil_mode rule that the last window starts inside the
// input or its left padding.
int64_t pool_out(int64_t size, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  int64_t span = size + 2 * p - d * (k - 1) - 1;
  int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  if (ceil_mode && (out - 1) * s >= size + p) --out;
  return out;
}

}  // namespace

// torch.matmul: 1-D operands become a row (a) or a column (b) and that dim is dropped again.
Ref matmul(const Ref& a, const Ref& b) {
  Ints sa = a.shape, sb = b.shape;
  bool va = sa.size() == 1, vb = sb.size() == 1;
  if (va) sa.insert(sa.begin(), 1);
  if (vb) sb.push_back(1);
  int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
  Ints ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  Ints batch = *broadcast(ba, bb);
  Ref A{sa, a.v}, B{sb, b.v};
  Ints out_shape = batch;
  if (!va) out_shape.push_back(m);
  if (!vb) out_shape.push_back(n);
  Ref out{out_shape, {}};
  for (int64_t bi = 0; bi < numel(batch); ++bi) {
    Ints idx = unravel(bi, batch);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        long double s = 0;
        for (int64_t p = 0; p < k; ++p) {
          Ints ia = idx, ib = idx;
          ia.push_back(i);
          ia.push_back(p);
          ib.push_back(p);
          ib.push_back(j);
          s += static_cast<long double>(at_broadcast(A, ia)) * at_broadcast(B, ib);
        }
        out.v.push_back(static_cast<double>(s));
      }
  }
  return out;
}

Ref linear(const Ref& x, const Ref& w, const Ref* bias) {
  int64_t in = w.shape[1], out_f = w.shape[0], rows = numel(x.shape) / std::max<int64_t>(in, 1);
  if (in == 0) rows = numel(Ints(x.shape.begin(), x.shape.end() - 1));
  Ref out{x.shape, {}};
  out.shape.back() = out_f;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out_f; ++o) {
      long double s = bias ? bias->v[o] : 0.0;
      for (int64_t i = 0; i < in; ++i)
        s += static_cast<long double>(x.v[r * in + i]) * w.v[o * in + i];
      out.v.push_back(static_cast<double>(s));
    }
  return out;
}

namespace {

// Visits every product x[xi] * w[wi] of conv2d's sum for output yi ([N, O, OH, OW], row-major),
// outputs in order, each output's products in (c, kh, kw) order; taps in the padding are skipped.
template <class Visit>
void for_each_product(const Ints& xs, const Ints& ws, int64_t OH, int64_t OW, Window win, int64_t groups,
                      Visit&& visit) {
  int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3];
  int64_t O = ws[0], Cg = ws[1], KH = ws[2], KW = ws[3], Og = O / groups;
  for (int64_t n = 0, yi = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow, ++yi)
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                int64_t ih = oh * win.stride_h - win.pad_h + kh * win.dil_h;
                int64_t iw = ow * win.stride_w - win.pad_w + kw * win.dil_w;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                visit(yi, ((n * C + o / Og * Cg + c) * H + ih) * W + iw, ((o * Cg + c) * KH + kh) * KW + kw);
              }
}

}  // namespace

Ref conv2d(const Ref& x, const Ref& w, const Ref* bias, Window win, int64_t groups) {
  int64_t N = x.shape[0], O = w.shape[0], P = 1;
  int64_t OH = conv_out(x.shape[2], w.shape[2], win.stride_h, win.pad_h, win.dil_h);
  int64_t OW = conv_out(x.shape[3], w.shape[3], win.stride_w, win.pad_w, win.dil_w);
  P = OH * OW;
  std::vector<long double> y(static_cast<size_t>(N * O * P));
  for (size_t i = 0; i < y.size(); ++i) y[i] = bias ? bias->v[i / P % O] : 0.0;
  for_each_product(x.shape, w.shape, OH, OW, win, groups, [&](int64_t yi, int64_t xi, int64_t wi) {
    y[yi] += static_cast<long double>(x.v[xi]) * w.v[wi];
  });
  return Ref{{N, O, OH, OW}, std::vector<double>(y.begin(), y.end())};
}

// Every product of conv2d's sum, x * w, sends grad_y's value back to both factors.
std::pair<Ref, Ref> conv2d_grads(const Ref& x, const Ref& w, const Ref& grad_y, Window win, int64_t groups) {
  std::vector<long double> dx(x.v.size()), dw(w.v.size());
  for_each_product(x.shape, w.shape, grad_y.shape[2], grad_y.shape[3], win, groups,
                   [&](int64_t yi, int64_t xi, int64_t wi) {
                     long double gy = grad_y.v[yi];
                     dx[xi] += gy * w.v[wi];
                     dw[wi] += gy * x.v[xi];
                   });
  return {Ref{x.shape, std::vector<double>(dx.begin(), dx.end())}, Ref{w.shape, std::vector<double>(dw.begin(), dw.end())}};
}

// max_pool2d / avg_pool2d over the last two dims. `empty_window` is set when some window holds no
// input element (the test then draws other parameters).
Ref pool2d(const Ref& x, bool is_max, const Pool& p, bool* empty_window) {
  size_t r = x.shape.size();
  int64_t H = x.shape[r - 2], W = x.shape[r - 1],
          planes = numel(x.shape) / std::max<int64_t>(H * W, 1);
  int64_t OH = pool_out(H, p.kh, p.win.stride_h, p.win.pad_h, p.win.dil_h, p.ceil_mode);
  int64_t OW = pool_out(W, p.kw, p.win.stride_w, p.win.pad_w, p.win.dil_w, p.ceil_mode);
  Ref out{x.shape, {}};
  out.shape[r - 2] = OH;
  out.shape[r - 1] = OW;
  planes = numel(out.shape) / std::max<int64_t>(OH * OW, 1);
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        int64_t h0 = oh * p.win.stride_h - p.win.pad_h, w0 = ow * p.win.stride_w - p.win.pad_w;
        if (is_max) {
          double m = -kInf;
          bool any = false;
          for (int64_t i = 0; i < p.kh; ++i)
            for (int64_t j = 0; j < p.kw; ++j) {
              int64_t ih = h0 + i * p.win.dil_h, iw = w0 + j * p.win.dil_w;
              if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
              any = true;
              m = std::max(m, x.v[(pl * H + ih) * W + iw]);
            }
          if (!any && empty_window) *empty_window = true;
          out.v.push_back(m);
          continue;
        }
        int64_t h1 = std::min(h0 + p.kh, H + p.win.pad_h),
                w1 = std::min(w0 + p.kw, W + p.win.pad_w);
        int64_t pool_size = (h1 - h0) * (w1 - w0);
        h0 = std::max<int64_t>(h0, 0);
        w0 = std::max<int64_t>(w0, 0);
        h1 = std::min(h1, H);
        w1 = std::min(w1, W);
        if (h0 >= h1 || w0 >= w1) {
          if (empty_window) *empty_window = true;
          out.v.push_back(0);
          continue;
        }
        long double s = 0;
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) s += x.v[(pl * H + ih) * W + iw];
        int64_t divisor = p.count_include_pad ? pool_size : (h1 - h0) * (w1 - w0);
        out.v.push_back(static_cast<double>(s / divisor));
      }
  return out;
}

Ref adaptive_avg_pool2d(const Ref& x, int64_t OH, int64_t OW) {
  size_t r = x.shape.size();
  int64_t H = x.shape[r - 2], W = x.shape[r - 1];
  Ref out{x.shape, {}};
  out.shape[r - 2] = OH;
  out.shape[r - 1] = OW;
  int64_t planes = numel(out.shape) / (OH * OW);
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        int64_t h0 = oh * H / OH, h1 = ((oh + 1) * H + OH - 1) / OH;
        int64_t w0 = ow * W / OW, w1 = ((ow + 1) * W + OW - 1) / OW;
        long double s = 0;
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) s += x.v[(pl * H + ih) * W + iw];
        out.v.push_back(static_cast<double>(s / ((h1 - h0) * (w1 - w0))));
      }
  return out;
}

}  // namespace ember::ref

#include "check.hpp"

#include <algorithm>
#include <cmath>

#include "buffers.hpp"
#include "common/params.hpp"
#include "reference/naive_same_dtype.hpp"
#include "reference/reference.hpp"
#include "reference/rule.hpp"

namespace fa_cli {
namespace {

using flashattn::reference::Problem;

// Copies heads [h0, h0 + nh) of a [B, S, H, D] dtype tensor at batch b into a
// dense [1, S, nh, D] float array, times `mul` (an fp8 tensor's descale).
std::vector<double> slice(const std::vector<char>& t, flashattn::DType dt, int64_t b, int64_t S,
                          int64_t H, int64_t D, int64_t h0, int64_t nh, double mul = 1.0) {
  std::vector<double> r(size_t(S * nh * D));
  for (int64_t s = 0; s < S; ++s)
    for (int64_t h = 0; h < nh; ++h)
      for (int64_t d = 0; d < D; ++d)
        r[size_t((s * nh + h) * D + d)] =
            mul * to_float(t.data(), dt, size_t(((b * S + s) * H + h0 + h) * D + d));
  return r;
}

CheckLine line(const std::string& what, const flashattn::reference::ErrorStats& s) {
  return {what, s.max_err, s.naive_err, s.tol, s.pass()};
}

}  // namespace

std::vector<CheckLine> check_against_reference(const HostProblem& hp, bool backward, int groups) {
  std::vector<CheckLine> lines;
  const int64_t G = hp.Hq / hp.Hkv;
  const int64_t total = hp.B * hp.Hkv;
  const double scale = hp.opt.softmax_scale > 0 ? hp.opt.softmax_scale : 1.0 / std::sqrt(double(hp.D));
  Problem pb;
  pb.batch = 1;
  pb.seqlen_q = hp.Sq;
  pb.seqlen_k = hp.Sk;
  pb.heads_q = G;
  pb.heads_kv = 1;
  pb.head_dim = hp.D;
  pb.head_dim_v = hp.Dv;
  pb.scale = scale;
  pb.causal = hp.opt.causal;
  pb.window_left = hp.opt.window_left;
  pb.window_right = hp.opt.window_right;
  pb.softcap = hp.opt.softcap;
  namespace ref = flashattn::reference;
  for (int g = 0; g < groups && g < total; ++g) {
    // Spread the sampled groups over the batch and heads.
    const int64_t idx = groups == 1 ? total / 2 : g * (total - 1) / (groups - 1);
    const int64_t b = idx / hp.Hkv, hk = idx % hp.Hkv;
    const std::string where = "b" + std::to_string(b) + " kv-head " + std::to_string(hk);
    auto q = slice(hp.q, hp.dtype, b, hp.Sq, hp.Hq, hp.D, hk * G, G, hp.q_descale);
    auto k = slice(hp.k, hp.dtype, b, hp.Sk, hp.Hkv, hp.D, hk, 1, hp.k_descale);
    auto v = slice(hp.v, hp.dtype, b, hp.Sk, hp.Hkv, hp.Dv, hk, 1, hp.v_descale);
    auto dout = backward ? slice(hp.dout, hp.dtype, b, hp.Sq, hp.Hq, hp.Dv, hk * G, G)
                         : std::vector<double>{};
    const ref::Magnitudes m = ref::magnitudes(q, k, v, dout, hp.D, scale, hp.Dv);
    const size_t nq = q.size(), nk = k.size(), nl = size_t(G * hp.Sq);
    const size_t no = size_t(hp.Sq * G * hp.Dv), nv = v.size();
    const int64_t rule_d = std::max(hp.D, hp.Dv);  // the longer dot product bounds the rounding

    std::vector<double> ref_out(no), ref_lse(nl), naive_out, naive_lse;
    ref::forward(pb, q.data(), k.data(), v.data(), ref_out.data(), ref_lse.data());
    if (hp.dtype == flashattn::DType::F8E4M3) {
      ref::naive_forward_fp8(pb, q, k, v, ref_out, &naive_out, &naive_lse);
    } else {
      ref::naive_forward(pb, hp.dtype, q, k, v, &naive_out, &naive_lse);
    }
    // fp8: O is bf16 and judged as bf16 against the fp8 naive (P rounded to
    // e4m3 too); the LSE allows the fp8 MMA's score error (rule.hpp).
    const flashattn::DType out_dt = flashattn::detail::out_dtype_for(hp.dtype);
    auto out = slice(hp.out, out_dt, b, hp.Sq, hp.Hq, hp.Dv, hk * G, G);
    lines.push_back(line("out  " + where, ref::judge(out_dt, out, ref_out, naive_out, hp.Sk, rule_d, m.out)));
    if (!hp.lse.empty()) {
      std::vector<double> lse(hp.lse.begin() + (b * hp.Hq + hk * G) * hp.Sq,
                              hp.lse.begin() + (b * hp.Hq + hk * G + G) * hp.Sq);
      const double score_err = hp.dtype == flashattn::DType::F8E4M3
                                   ? ref::fp8_score_error(q, k, 1, hp.Sq, hp.Sk, G, 1, hp.D, scale)
                                   : 0.0;
      lines.push_back(line("lse  " + where, ref::judge_lse(lse, ref_lse, naive_lse, hp.D, score_err)));
    }
    if (!backward) continue;
    std::vector<double> rdq(nq), rdk(nk), rdv(nv), ndq, ndk, ndv;
    ref::backward(pb, q.data(), k.data(), v.data(), dout.data(), rdq.data(), rdk.data(), rdv.data());
    ref::naive_backward(pb, hp.dtype, q, k, v, dout, &ndq, &ndk, &ndv);
    const int64_t col = std::max(hp.Sk, hp.Sq * G);  // the rule's L for dK/dV
    lines.push_back(line("dq   " + where, ref::judge(hp.dtype, slice(hp.dq, hp.dtype, b, hp.Sq, hp.Hq, hp.D, hk * G, G),
                                                   rdq, ndq, hp.Sk, rule_d, m.dq)));
    lines.push_back(line("dk   " + where, ref::judge(hp.dtype, slice(hp.dk, hp.dtype, b, hp.Sk, hp.Hkv, hp.D, hk, 1),
                                                   rdk, ndk, col, rule_d, m.dk)));
    lines.push_back(line("dv   " + where, ref::judge(hp.dtype, slice(hp.dv, hp.dtype, b, hp.Sk, hp.Hkv, hp.Dv, hk, 1),
                                                   rdv, ndv, col, rule_d, m.dv)));
  }
  return lines;
}

}  // namespace fa_cli

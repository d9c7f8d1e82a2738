#include "check.hpp"

#include <cmath>

#include "buffers.hpp"
#include "reference/naive_lowp.hpp"
#include "reference/reference.hpp"
#include "reference/rule.hpp"

namespace fa_cli {
namespace {

using flashattn::reference::Problem;

// Copies heads [h0, h0 + nh) of a [B, S, H, D] dtype tensor at batch b into a
// dense [1, S, nh, D] float array.
std::vector<float> slice(const std::vector<char>& t, flashattn::DType dt, int64_t b, int64_t S,
                         int64_t H, int64_t D, int64_t h0, int64_t nh) {
  std::vector<float> r(size_t(S * nh * D));
  for (int64_t s = 0; s < S; ++s)
    for (int64_t h = 0; h < nh; ++h)
      for (int64_t d = 0; d < D; ++d)
        r[size_t((s * nh + h) * D + d)] =
            to_float(t.data(), dt, size_t(((b * S + s) * H + h0 + h) * D + d));
  return r;
}

std::vector<double> widen(const std::vector<float>& x) { return {x.begin(), x.end()}; }

CheckLine judge_line(const std::string& what, const std::vector<float>& out,
                     const std::vector<float>& naive, const std::vector<double>& ref, bool fp32,
                     int64_t Sk, int64_t D) {
  auto v = flashattn::reference::judge(
      out.size(), [&](size_t i) { return double(out[i]); },
      [&](size_t i) { return double(naive[i]); }, [&](size_t i) { return ref[i]; }, fp32, Sk, D);
  return {what, v.max_err, v.naive_err, v.tolerance, v.pass};
}

}  // namespace

std::vector<CheckLine> check_against_reference(const HostProblem& hp, bool backward, int groups) {
  std::vector<CheckLine> lines;
  const int64_t G = hp.Hq / hp.Hkv;
  const int64_t total = hp.B * hp.Hkv;
  const bool fp32 = hp.dtype == flashattn::DType::F32;
  const int dt = static_cast<int>(hp.dtype);
  Problem pb;
  pb.batch = 1;
  pb.seqlen_q = hp.Sq;
  pb.seqlen_k = hp.Sk;
  pb.heads_q = G;
  pb.heads_kv = 1;
  pb.head_dim = hp.D;
  pb.scale = hp.opt.softmax_scale;
  pb.causal = hp.opt.causal;
  pb.window_left = hp.opt.window_left;
  pb.window_right = hp.opt.window_right;
  pb.softcap = hp.opt.softcap;
  for (int g = 0; g < groups && g < total; ++g) {
    // Spread the sampled groups over the batch and heads.
    const int64_t idx = groups == 1 ? total / 2 : g * (total - 1) / (groups - 1);
    const int64_t b = idx / hp.Hkv, hk = idx % hp.Hkv;
    const std::string where = "b" + std::to_string(b) + " kv-head " + std::to_string(hk);
    auto q = slice(hp.q, hp.dtype, b, hp.Sq, hp.Hq, hp.D, hk * G, G);
    auto k = slice(hp.k, hp.dtype, b, hp.Sk, hp.Hkv, hp.D, hk, 1);
    auto v = slice(hp.v, hp.dtype, b, hp.Sk, hp.Hkv, hp.D, hk, 1);
    auto out = slice(hp.out, hp.dtype, b, hp.Sq, hp.Hq, hp.D, hk * G, G);
    const size_t nq = q.size(), nk = k.size(), nl = size_t(G * hp.Sq);

    std::vector<double> ref_out(nq), ref_lse(nl);
    flashattn::reference::forward(pb, widen(q).data(), widen(k).data(), widen(v).data(),
                                  ref_out.data(), ref_lse.data());
    std::vector<float> naive_out(nq), naive_lse(nl);
    flashattn::reference::naive_lowp_forward(pb, dt, q.data(), k.data(), v.data(),
                                             naive_out.data(), naive_lse.data());
    lines.push_back(judge_line("out  " + where, out, naive_out, ref_out, fp32, hp.Sk, hp.D));
    if (!hp.lse.empty()) {
      std::vector<float> lse(hp.lse.begin() + (b * hp.Hq + hk * G) * hp.Sq,
                             hp.lse.begin() + (b * hp.Hq + hk * G + G) * hp.Sq);
      lines.push_back(judge_line("lse  " + where, lse, naive_lse, ref_lse, true, hp.Sk, hp.D));
    }
    if (!backward) continue;
    auto dout = slice(hp.dout, hp.dtype, b, hp.Sq, hp.Hq, hp.D, hk * G, G);
    std::vector<double> rdq(nq), rdk(nk), rdv(nk);
    flashattn::reference::backward(pb, widen(q).data(), widen(k).data(), widen(v).data(),
                                   widen(dout).data(), rdq.data(), rdk.data(), rdv.data());
    std::vector<float> ndq(nq), ndk(nk), ndv(nk);
    flashattn::reference::naive_lowp_backward(pb, dt, q.data(), k.data(), v.data(), dout.data(),
                                              ndq.data(), ndk.data(), ndv.data());
    lines.push_back(judge_line("dq   " + where, slice(hp.dq, hp.dtype, b, hp.Sq, hp.Hq, hp.D, hk * G, G),
                               ndq, rdq, fp32, hp.Sk, hp.D));
    lines.push_back(judge_line("dk   " + where, slice(hp.dk, hp.dtype, b, hp.Sk, hp.Hkv, hp.D, hk, 1),
                               ndk, rdk, fp32, hp.Sq * G, hp.D));
    lines.push_back(judge_line("dv   " + where, slice(hp.dv, hp.dtype, b, hp.Sk, hp.Hkv, hp.D, hk, 1),
                               ndv, rdv, fp32, hp.Sq * G, hp.D));
  }
  return lines;
}

}  // namespace fa_cli

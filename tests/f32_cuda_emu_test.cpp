// The fp32 CUDA kernels (src/cuda/f32) executed on the CPU by src/cuda/emu
// (CI has no GPU): forward and the three backward kernels, launched as
// f32/launch_f32.cuh launches them, against the fp64 reference under
// DESIGN.md's fp32 rule. Padded batches with GQA, Sq != Sk, causal rows
// that see no key, windows, softcap, ALiBi and dropout (its mask must equal
// the documented Philox formula), every tile head dim, and a varlen batch
// with an empty sequence. The H200 runs the full sweep on the real kernels
// (label gpu); this keeps CI able to catch an indexing error.
#include "cuda_emu.hpp"  // first: the CUDA keywords for the host compiler

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/philox.hpp"
#include "f32/bwd_kernel.cuh"
#include "f32/fwd_kernel.cuh"
#include "f32/launch_f32.hpp"
#include "reference/reference.hpp"
#include "reference/rule.hpp"
#include "support/naive_variants.hpp"

EMU_DEFINE_SMEM
namespace flashattn::detail::cuda::f32 {
alignas(128) unsigned char smem_raw[::emu::kSmemBytes];
}

namespace {

namespace f32 = flashattn::detail::cuda::f32;
namespace s8 = flashattn::detail::cuda::sm80;
namespace fd = flashattn::detail;
namespace R = flashattn::reference;
using flashattn::DType;

template <int DT>
void emu_forward(const fd::FwdParams& p) {
  using Tile = f32::FwdTile<DT>;
  if (p.dropout_mask) std::memset(p.dropout_mask, 0, size_t(p.batch * p.heads_q * p.seqlen_q * p.seqlen_k) * 4);
  const s8::FwdSeqArgs a(p);
  emu::launch({unsigned((p.seqlen_q + Tile::BM - 1) / Tile::BM), unsigned(p.heads_q), unsigned(p.batch)},
              f32::kThreads, [&] { f32::fwd_kernel<DT>(a); });
}

template <int DT>
void emu_backward(const fd::BwdParams& p) {
  using Tile = f32::BwdTile<DT>;
  std::vector<float> dsum(f32::bwd_workspace_bytes(p) / 4 + 1, std::nanf(""));
  s8::BwdArgs a(p);
  a.dsum = dsum.data();
  const unsigned hq = unsigned(p.heads_q), hkv = unsigned(p.heads_kv), b = unsigned(p.batch);
  emu::launch({unsigned((p.seqlen_q + 3) / 4), hq, b}, f32::kThreads, [&] { f32::bwd_dsum_kernel<DT>(a); });
  emu::launch({unsigned((p.seqlen_k + Tile::BK - 1) / Tile::BK), hkv, b}, f32::kThreads,
              [&] { f32::bwd_dkdv_kernel<DT>(a); });
  emu::launch({unsigned((p.seqlen_q + Tile::DQ_BQ - 1) / Tile::DQ_BQ), hq, b}, f32::kThreads,
              [&] { f32::bwd_dq_kernel<DT>(a); });
}

void run_forward(const fd::FwdParams& p) {
  switch (f32::tile_head_dim(p.head_dim)) {
    case 64: return emu_forward<64>(p);
    case 128: return emu_forward<128>(p);
    default: return emu_forward<256>(p);
  }
}
void run_backward(const fd::BwdParams& p) {
  switch (f32::tile_head_dim(p.head_dim)) {
    case 64: return emu_backward<64>(p);
    case 128: return emu_backward<128>(p);
    default: return emu_backward<256>(p);
  }
}

struct Case {
  int B = 1, Sq = 1, Sk = 1, Hq = 1, Hkv = 1, D = 32;
  bool causal = false;
  int wl = -1, wr = -1;
  float softcap = 0.f;
  int alibi = 0;  // 0 off, 1 [Hq], 2 [B, Hq]
  float p = 0.f;
  uint64_t seed = 0x0123456789abcdefull, offset = 0x500000003ull;
};

std::vector<float> randn(size_t n, std::mt19937& g) {
  std::normal_distribution<float> nd;
  std::vector<float> x(n);
  for (auto& e : x) e = nd(g);
  return x;
}
std::vector<double> dbl(const std::vector<float>& x) { return {x.begin(), x.end()}; }

::testing::AssertionResult judged(const char* what, const R::ErrorStats& e) {
  if (e.pass()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": max err " << e.judged_err << " > tol " << e.tol << " (max|ref| "
                                       << e.max_ref << ", bad " << e.bad << ", worst index " << e.worst_index << ")";
}

void run_case(const Case& c, uint32_t seed) {
  SCOPED_TRACE("B" + std::to_string(c.B) + " Sq" + std::to_string(c.Sq) + " Sk" + std::to_string(c.Sk) + " H" +
               std::to_string(c.Hq) + "/" + std::to_string(c.Hkv) + " D" + std::to_string(c.D));
  std::mt19937 g(seed);
  const size_t nq = size_t(c.B) * c.Sq * c.Hq * c.D, nk = size_t(c.B) * c.Sk * c.Hkv * c.D;
  std::vector<float> q = randn(nq, g), k = randn(nk, g), v = randn(nk, g), dout = randn(nq, g);
  std::vector<float> slopes;
  for (int b = 0; b < (c.alibi == 2 ? c.B : 1); ++b)
    for (int h = 0; h < c.Hq; ++h) slopes.push_back(std::exp2(-8.f * float(h + 1) / float(c.Hq)) * (1.f + 0.5f * b));
  // The documented mask (common/philox.hpp) on the keys each row sees.
  std::vector<int32_t> keep;
  if (c.p > 0.f)
    keep = fa_test::naive_variants::formula_keep_mask(c.B, c.Hq, c.Sq, c.Sk, c.causal, c.wl, c.wr, c.seed, c.offset,
                                                      c.p);

  fd::AttnParams ap;
  ap.dtype = DType::F32;
  ap.batch = c.B, ap.seqlen_q = c.Sq, ap.seqlen_k = c.Sk, ap.heads_q = c.Hq, ap.heads_kv = c.Hkv, ap.head_dim = c.D;
  ap.q = q.data(), ap.k = k.data(), ap.v = v.data();
  ap.q_str = {int64_t(c.Sq) * c.Hq * c.D, int64_t(c.Hq) * c.D, c.D};
  ap.k_str = ap.v_str = {int64_t(c.Sk) * c.Hkv * c.D, int64_t(c.Hkv) * c.D, c.D};
  ap.scale = 1.f / std::sqrt(float(c.D));
  ap.softcap = c.softcap;
  ap.causal = c.causal;
  ap.window_left = c.wl;
  ap.window_right = c.causal ? 0 : c.wr;
  if (c.alibi) ap.alibi_slopes = slopes.data(), ap.alibi_batch_stride = c.alibi == 2 ? c.Hq : 0;
  ap.dropout_p = c.p, ap.dropout_seed = c.seed, ap.dropout_offset = c.offset;

  std::vector<float> out(nq, std::nanf("")), lse(size_t(c.B) * c.Hq * c.Sq, std::nanf(""));
  std::vector<int32_t> mask(keep.size(), -1);
  fd::FwdParams fp;
  static_cast<fd::AttnParams&>(fp) = ap;
  fp.out = out.data(), fp.o_str = fp.q_str, fp.lse = lse.data();
  fp.lse_batch_stride = int64_t(c.Hq) * c.Sq, fp.lse_head_stride = c.Sq;
  if (c.p > 0.f) fp.dropout_mask = mask.data();
  run_forward(fp);
  if (c.p > 0.f) EXPECT_EQ(mask, keep) << "kernel mask != documented formula";

  std::vector<float> dq(nq, std::nanf("")), dk(nk, std::nanf("")), dv(nk, std::nanf(""));
  fd::BwdParams bp;
  static_cast<fd::AttnParams&>(bp) = ap;
  bp.out = out.data(), bp.o_str = bp.q_str, bp.dout = dout.data(), bp.do_str = bp.q_str, bp.lse = lse.data();
  bp.lse_batch_stride = int64_t(c.Hq) * c.Sq, bp.lse_head_stride = c.Sq;
  bp.dq = dq.data(), bp.dk = dk.data(), bp.dv = dv.data();
  bp.dq_str = bp.q_str, bp.dk_str = bp.k_str, bp.dv_str = bp.v_str;
  run_backward(bp);

  std::vector<double> slopes_d(slopes.begin(), slopes.end());
  R::Problem rp;
  rp.batch = c.B, rp.seqlen_q = c.Sq, rp.seqlen_k = c.Sk, rp.heads_q = c.Hq, rp.heads_kv = c.Hkv, rp.head_dim = c.D;
  rp.causal = c.causal, rp.window_left = c.wl, rp.window_right = c.wr, rp.softcap = c.softcap;
  if (c.alibi) rp.alibi_slopes = slopes_d.data(), rp.alibi_per_batch = c.alibi == 2;
  if (c.p > 0.f) rp.dropout_mask = keep.data(), rp.dropout_p = c.p;
  const auto qd = dbl(q), kd = dbl(k), vd = dbl(v), dod = dbl(dout);
  std::vector<double> ro(nq), rl(lse.size()), rdq(nq), rdk(nk), rdv(nk);
  R::forward(rp, qd.data(), kd.data(), vd.data(), ro.data(), rl.data());
  R::backward(rp, qd.data(), kd.data(), vd.data(), dod.data(), rdq.data(), rdk.data(), rdv.data());
  const auto m = R::magnitudes(qd, kd, vd, dod, c.D, 1.0 / std::sqrt(double(c.D)));
  const double ds = 1.0 / (1.0 - double(c.p));
  const int64_t col = std::max(c.Sk, c.Sq * (c.Hq / c.Hkv));
  EXPECT_TRUE(judged("out", R::judge(DType::F32, dbl(out), ro, {}, c.Sk, c.D, m.out * ds)));
  EXPECT_TRUE(judged("lse", R::judge_lse(dbl(lse), rl, {}, c.D)));
  EXPECT_TRUE(judged("dq", R::judge(DType::F32, dbl(dq), rdq, {}, c.Sk, c.D, m.dq * ds)));
  EXPECT_TRUE(judged("dk", R::judge(DType::F32, dbl(dk), rdk, {}, col, c.D, m.dk * ds)));
  EXPECT_TRUE(judged("dv", R::judge(DType::F32, dbl(dv), rdv, {}, col, c.D, m.dv * ds)));
}

Case make(int B, int Sq, int Sk, int Hq, int Hkv, int D) {
  Case c;
  c.B = B, c.Sq = Sq, c.Sk = Sk, c.Hq = Hq, c.Hkv = Hkv, c.D = D;
  return c;
}

TEST(F32Emu, GqaOddLengthsTile64) { run_case(make(2, 37, 71, 4, 2, 32), 1); }

TEST(F32Emu, CausalSqGreaterThanSkSoftcapAlibiTile64) {
  Case c = make(1, 70, 40, 2, 1, 64);  // rows that see no key
  c.causal = true;
  c.softcap = 5.f;
  c.alibi = 1;
  run_case(c, 2);
}

TEST(F32Emu, WindowDropoutTile128) {
  Case c = make(1, 77, 77, 2, 1, 96);
  c.wl = 20, c.wr = 5;
  c.p = 0.3f;
  run_case(c, 3);
}

TEST(F32Emu, CausalAlibiPerBatchTile256) {
  Case c = make(2, 33, 50, 2, 2, 200);
  c.causal = true;
  c.alibi = 2;
  run_case(c, 4);
}

// Whole query and key tiles without softcap or ALiBi take the forward's
// branch-free score loop: below the causal diagonal (with dropout, whose mask
// must still stop at the last row), and a non-causal call of whole tiles.
TEST(F32Emu, CausalDropoutWholeTilesTile128) {
  Case c = make(1, 130, 130, 2, 1, 128);
  c.causal = true;
  c.p = 0.2f;
  run_case(c, 6);
}

TEST(F32Emu, WholeTilesTile64) { run_case(make(1, 128, 128, 2, 2, 64), 7); }

// Varlen: sequences of 5 / 0 / 40 queries and 9 / 3 / 70 keys, causal, in
// packed rows; each sequence is checked against the reference run alone.
TEST(F32Emu, VarlenCausalEmptySequence) {
  const int Hq = 2, Hkv = 1, D = 40;
  const std::vector<int32_t> cu_q = {0, 5, 5, 45}, cu_k = {0, 9, 12, 82};
  const int tq = cu_q.back(), tk = cu_k.back(), B = 3;
  std::mt19937 g(5);
  std::vector<float> q = randn(size_t(tq) * Hq * D, g), k = randn(size_t(tk) * Hkv * D, g),
                     v = randn(size_t(tk) * Hkv * D, g), dout = randn(size_t(tq) * Hq * D, g);
  fd::AttnParams ap;
  ap.dtype = DType::F32;
  ap.batch = B, ap.seqlen_q = 40, ap.seqlen_k = 70, ap.heads_q = Hq, ap.heads_kv = Hkv, ap.head_dim = D;
  ap.q = q.data(), ap.k = k.data(), ap.v = v.data();
  ap.q_str = {0, int64_t(Hq) * D, D};
  ap.k_str = ap.v_str = {0, int64_t(Hkv) * D, D};
  ap.scale = 1.f / std::sqrt(float(D));
  ap.causal = true, ap.window_right = 0;
  ap.cu_seqlens_q = cu_q.data(), ap.cu_seqlens_k = cu_k.data(), ap.total_q = tq, ap.total_k = tk;
  std::vector<float> out(q.size(), std::nanf("")), lse(size_t(Hq) * tq, std::nanf(""));
  fd::FwdParams fp;
  static_cast<fd::AttnParams&>(fp) = ap;
  fp.out = out.data(), fp.o_str = fp.q_str, fp.lse = lse.data(), fp.lse_batch_stride = 0, fp.lse_head_stride = tq;
  run_forward(fp);
  std::vector<float> dq(q.size(), std::nanf("")), dk(k.size(), std::nanf("")), dv(v.size(), std::nanf(""));
  fd::BwdParams bp;
  static_cast<fd::AttnParams&>(bp) = ap;
  bp.out = out.data(), bp.o_str = bp.q_str, bp.dout = dout.data(), bp.do_str = bp.q_str, bp.lse = lse.data();
  bp.lse_batch_stride = 0, bp.lse_head_stride = tq;
  bp.dq = dq.data(), bp.dk = dk.data(), bp.dv = dv.data();
  bp.dq_str = bp.q_str, bp.dk_str = bp.k_str, bp.dv_str = bp.v_str;
  run_backward(bp);

  for (int b = 0; b < B; ++b) {
    SCOPED_TRACE("sequence " + std::to_string(b));
    const int lq = cu_q[b + 1] - cu_q[b], lk = cu_k[b + 1] - cu_k[b];
    auto rows = [&](const std::vector<float>& x, int first, int n, int h) {
      return std::vector<double>(x.begin() + size_t(first) * h * D, x.begin() + size_t(first + n) * h * D);
    };
    const auto qd = rows(q, cu_q[b], lq, Hq), dod = rows(dout, cu_q[b], lq, Hq);
    const auto kd = rows(k, cu_k[b], lk, Hkv), vd = rows(v, cu_k[b], lk, Hkv);
    R::Problem rp;
    rp.batch = 1, rp.seqlen_q = lq, rp.seqlen_k = lk, rp.heads_q = Hq, rp.heads_kv = Hkv, rp.head_dim = D;
    rp.causal = true;
    std::vector<double> ro(qd.size()), rl(size_t(Hq) * lq), rdq(qd.size()), rdk(kd.size()), rdv(vd.size());
    R::forward(rp, qd.data(), kd.data(), vd.data(), ro.data(), rl.data());
    R::backward(rp, qd.data(), kd.data(), vd.data(), dod.data(), rdq.data(), rdk.data(), rdv.data());
    std::vector<double> l;
    for (int h = 0; h < Hq; ++h)
      for (int i = 0; i < lq; ++i) l.push_back(lse[size_t(h) * tq + cu_q[b] + i]);
    const auto m = R::magnitudes(qd, kd, vd, dod, D, 1.0 / std::sqrt(double(D)));
    const int64_t col = std::max(lk, lq * Hq / Hkv);
    EXPECT_TRUE(judged("out", R::judge(DType::F32, rows(out, cu_q[b], lq, Hq), ro, {}, lk, D, m.out)));
    EXPECT_TRUE(judged("lse", R::judge_lse(l, rl, {}, D)));
    EXPECT_TRUE(judged("dq", R::judge(DType::F32, rows(dq, cu_q[b], lq, Hq), rdq, {}, lk, D, m.dq)));
    EXPECT_TRUE(judged("dk", R::judge(DType::F32, rows(dk, cu_k[b], lk, Hkv), rdk, {}, col, D, m.dk)));
    EXPECT_TRUE(judged("dv", R::judge(DType::F32, rows(dv, cu_k[b], lk, Hkv), rdv, {}, col, D, m.dv)));
  }
}

}  // namespace

// ALiBi and dropout in the sm80 CUDA kernels (sm80/variants.cuh), executed
// on the CPU by src/cuda/emu (CI has no GPU): the forward's VAR kernel (split
// KV and varlen included), the backward's VAR main kernel with atomic dQ and
// the VAR deterministic dQ kernel, against the fp64 reference under
// DESIGN.md's rule (the same-dtype yardstick: support/naive_variants.hpp).
// The returned dropout mask must equal, element for element, both the
// documented Philox formula (common/philox.hpp, pinned by known answers in
// variants_test.cpp) and what the CPU backend returns for the same seed and
// offset. Small shapes: the emulator runs one thread per CUDA thread.
#include "cuda_emu.hpp"  // first: the CUDA keywords for the host compiler

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/philox.hpp"
#include "flashattn/flashattn.hpp"
#include "reference/reference.hpp"
#include "reference/rule.hpp"
#include "sm80/bwd_dq_kernel.cuh"
#include "sm80/bwd_kernel.cuh"
#include "sm80/bwd_postprocess.cuh"
#include "sm80/bwd_preprocess.cuh"
#include "sm80/combine_kernel.cuh"
#include "sm80/fwd_kernel.cuh"
#include "sm80/fwd_plan.hpp"
#include "sm80/launch.hpp"
#include "support/half.hpp"
#include "support/naive_variants.hpp"

EMU_DEFINE_SMEM

namespace {

namespace s8 = flashattn::detail::cuda::sm80;
namespace fd = flashattn::detail;
namespace nv = fa_test::naive_variants;
using flashattn::DType;

uint16_t to16(float x, DType dt) { return fa_test::to_bits16(dt, x); }
float from16(uint16_t u, DType dt) { return fa_test::from_bits16(dt, u); }

struct Case {
  DType dt = DType::BF16;
  int B = 1, Sq = 1, Sk = 1, Hq = 1, Hkv = 1, D = 32;
  bool causal = false;
  int wl = -1, wr = -1;
  float softcap = 0.f;
  int alibi = 0;  // 0 off, 1 [Hq], 2 [B, Hq]
  float p = 0.f;
  bool det = false;
  int nsplit = 0;  // forward split-KV pieces (0: the heuristic)
  int group_units = 0;  // the backward grid's (kernel_traits.hpp grid_block); 0: all units
  int full_groups = -1;  // groups of group_units before the last (grid_block); -1: units / group_units
  s8::BwdWalk walk = s8::BwdWalk::rotate;  // a backward block's query-tile order (BwdSteps)
  uint64_t seed = 0x0123456789abcdefull, offset = 0x500000003ull;
};

std::string describe(const Case& c) {
  return std::string(c.dt == DType::BF16 ? "bf16" : "fp16") + " B" + std::to_string(c.B) + " Sq" +
         std::to_string(c.Sq) + " Sk" + std::to_string(c.Sk) + " H" + std::to_string(c.Hq) + "/" +
         std::to_string(c.Hkv) + " D" + std::to_string(c.D) + (c.causal ? " causal" : "") + " win(" +
         std::to_string(c.wl) + "," + std::to_string(c.wr) + ") cap" + std::to_string(c.softcap) + " alibi" +
         std::to_string(c.alibi) + " p" + std::to_string(c.p) + (c.det ? " det" : "") +
         (c.group_units > 0 ? " groups of " + std::to_string(c.group_units) : std::string()) + " walk" +
         std::to_string(static_cast<int>(c.walk)) + " split" +
         std::to_string(c.nsplit);
}

// The launcher's steps (launch_fwd.cuh / launch_bwd.cuh) with emu launches.
template <class T>
void emu_forward(const fd::FwdParams& p) {
  using Cfg = s8::FwdCfg<64>;
  const s8::FwdPlan plan = s8::fwd_plan(p, 132, Cfg::BM, Cfg::BN);
  ASSERT_EQ(plan.pack, 1);
  ASSERT_FALSE(plan.decode);
  std::vector<unsigned char> ws(plan.workspace_bytes + 256);
  s8::FwdSeqArgs args(p);
  args.pack = plan.pack, args.nsplit = plan.nsplit, args.max_q = int(p.seqlen_q);
  if (plan.nsplit > 1) {
    args.o_accum = reinterpret_cast<float*>(ws.data());
    args.lse_accum = reinterpret_cast<float*>(ws.data() + plan.o_accum_bytes);
  }
  if (p.dropout_mask) std::memset(p.dropout_mask, 0, size_t(p.batch * p.heads_q * p.seqlen_q * p.seqlen_k) * 4);
  const emu::Dim3 grid{unsigned(plan.m_blocks), unsigned(plan.heads_y), unsigned(p.batch * plan.nsplit)};
  auto* kernel = s8::fwd_kernel_for<T, 64>(p, plan);  // the launcher's choice (VAR here)
  emu::launch(grid, Cfg::NW * 32, [&] { kernel(args); });
  if (plan.nsplit > 1) {
    const int64_t rows = p.batch * p.heads_q * p.seqlen_q;
    emu::launch({s8::combine_blocks(rows), 1, 1}, s8::kCombineThreads,
                [&] { s8::combine_kernel<T>(args); });
  }
}

template <class T>
void emu_backward(const fd::BwdParams& p, int group_units, int full_groups, s8::BwdWalk walk) {
  const s8::BwdWorkspace ws = s8::bwd_workspace(p, 64);
  std::vector<unsigned char> buf(ws.total + 16);
  s8::BwdArgs args(p);
  const int64_t rows = p.batch * p.heads_q * p.seqlen_q;
  args.dsum = reinterpret_cast<float*>(buf.data() + ws.dsum_offset);
  if (!p.deterministic) {
    args.dq_accum = reinterpret_cast<float*>(buf.data() + ws.dq_offset);
    std::memset(args.dq_accum, 0, ws.total - ws.dq_offset);
  }
  emu::launch({unsigned((rows + 7) / 8), 1, 1}, 256, [&] { s8::bwd_preprocess_kernel<T>(args); });
  using Cfg = s8::BwdCfg<64>;
  args.n_blocks = static_cast<int>((p.seqlen_k + Cfg::BN - 1) / Cfg::BN);
  args.group_units = group_units > 0 ? group_units : static_cast<int>(p.heads_kv * p.batch);
  args.full_groups = full_groups >= 0 ? full_groups : static_cast<int>(p.heads_kv * p.batch) / args.group_units;
  args.walk = static_cast<int>(walk);
  const emu::Dim3 grid{unsigned(s8::bwd_blocks(args.n_blocks, p.heads_kv, p.batch)), 1, 1};
  // The launcher's choice: the one VAR main kernel serves both modes.
  auto* kernel = s8::bwd_kernel_for<T, 64>(p);
  emu::launch(grid, Cfg::NW * 32, [&] { kernel(args); });
  if (p.deterministic) {
    using Dq = s8::DqCfg<64>;
    emu::launch({unsigned((p.seqlen_q + Dq::BM - 1) / Dq::BM), unsigned(p.heads_q), unsigned(p.batch)},
                Dq::NW * 32, [&] { s8::bwd_dq_kernel_for<T, 64>(p)(args); });
  } else {
    const int64_t chunks = rows * (p.head_dim / 8);
    emu::launch({unsigned((chunks + 255) / 256), 1, 1}, 256, [&] { s8::bwd_dq_convert_kernel<T>(args, 64); });
  }
}

struct Data {
  Case c;
  std::vector<float> q, k, v, dout, slopes;
  std::vector<uint16_t> pq, pk, pv, pdo;
  std::vector<int32_t> keep;  // the formula's mask: Z on visible keys, 0 elsewhere

  Data(const Case& cs, uint32_t seed) : c(cs) {
    std::mt19937 g(seed);
    std::normal_distribution<float> nd;
    auto fill = [&](std::vector<float>& x, std::vector<uint16_t>& px, size_t n) {
      x.resize(n);
      px.resize(n);
      for (size_t i = 0; i < n; ++i) {
        x[i] = nv::round_to(c.dt, nd(g));
        px[i] = to16(x[i], c.dt);
      }
    };
    fill(q, pq, size_t(c.B) * c.Sq * c.Hq * c.D);
    fill(k, pk, size_t(c.B) * c.Sk * c.Hkv * c.D);
    fill(v, pv, size_t(c.B) * c.Sk * c.Hkv * c.D);
    fill(dout, pdo, size_t(c.B) * c.Sq * c.Hq * c.D);
    const int rows = c.alibi == 2 ? c.B : 1;
    for (int b = 0; b < rows; ++b)
      for (int h = 0; h < c.Hq; ++h) slopes.push_back(std::exp2(-8.f * float(h + 1) / float(c.Hq)) * (1.f + 0.5f * b));
    if (c.p > 0.f) keep = nv::formula_keep_mask(c.B, c.Hq, c.Sq, c.Sk, c.causal, c.wl, c.wr, c.seed, c.offset, c.p);
  }
  fd::AttnParams params() const {
    fd::AttnParams p;
    p.dtype = c.dt;
    p.batch = c.B, p.seqlen_q = c.Sq, p.seqlen_k = c.Sk, p.heads_q = c.Hq, p.heads_kv = c.Hkv, p.head_dim = c.D;
    p.q = pq.data(), p.k = pk.data(), p.v = pv.data();
    p.q_str = {int64_t(c.Sq) * c.Hq * c.D, int64_t(c.Hq) * c.D, c.D};
    p.k_str = p.v_str = {int64_t(c.Sk) * c.Hkv * c.D, int64_t(c.Hkv) * c.D, c.D};
    p.scale = 1.f / std::sqrt(float(c.D));
    p.softcap = c.softcap;
    p.causal = c.causal;
    p.window_left = c.wl;
    p.window_right = c.causal ? 0 : c.wr;
    if (c.alibi) {
      p.alibi_slopes = slopes.data();
      p.alibi_batch_stride = c.alibi == 2 ? c.Hq : 0;
    }
    p.dropout_p = c.p, p.dropout_seed = c.seed, p.dropout_offset = c.offset;
    return p;
  }
  nv::Shape shape() const {
    nv::Shape s;
    s.B = c.B, s.Sq = c.Sq, s.Sk = c.Sk, s.Hq = c.Hq, s.Hkv = c.Hkv, s.D = c.D;
    s.scale = 1.f / std::sqrt(float(c.D));
    s.causal = c.causal, s.wl = c.wl, s.wr = c.wr, s.softcap = c.softcap;
    if (c.alibi) s.slopes = slopes.data(), s.per_batch = c.alibi == 2;
    if (c.p > 0.f) s.keep = keep.data(), s.p = c.p;
    return s;
  }
};

std::vector<double> dbl(const std::vector<float>& x) { return {x.begin(), x.end()}; }
std::vector<double> dbl16(const std::vector<uint16_t>& x, DType dt) {
  std::vector<double> r(x.size());
  for (size_t i = 0; i < x.size(); ++i) r[i] = from16(x[i], dt);
  return r;
}

::testing::AssertionResult judged(const char* what, const flashattn::reference::ErrorStats& e) {
  if (e.pass()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": max err " << e.judged_err << " (less half an ulp) > tol " << e.tol << " (naive "
                                       << e.naive_err << ", max|ref| " << e.max_ref << ", bad " << e.bad << ")";
}

// The CPU backend's mask for the same problem (fp32 inputs: the mask depends
// on the shape, seed and offset only).
std::vector<int32_t> cpu_mask(const Data& d) {
  const Case& c = d.c;
  std::vector<float> q(d.q), k(d.k), v(d.v), out(q.size()), lse(size_t(c.B) * c.Hq * c.Sq);
  std::vector<int32_t> mask(size_t(c.B) * c.Hq * c.Sq * c.Sk, -1);
  flashattn::ForwardArgs a;
  using flashattn::TensorView;
  a.q = TensorView::contiguous(q.data(), DType::F32, {c.B, c.Sq, c.Hq, c.D});
  a.k = TensorView::contiguous(k.data(), DType::F32, {c.B, c.Sk, c.Hkv, c.D});
  a.v = TensorView::contiguous(v.data(), DType::F32, {c.B, c.Sk, c.Hkv, c.D});
  a.out = TensorView::contiguous(out.data(), DType::F32, {c.B, c.Sq, c.Hq, c.D});
  a.lse = TensorView::contiguous(lse.data(), DType::F32, {c.B, c.Hq, c.Sq});
  a.dropout_mask = TensorView::contiguous(mask.data(), DType::I32, {c.B, c.Hq, c.Sq, c.Sk});
  a.options.causal = c.causal;
  a.options.window_left = c.wl;
  a.options.window_right = c.wr;
  a.options.softcap = c.softcap;
  a.options.dropout_p = c.p;
  a.options.dropout_seed = c.seed;
  a.options.dropout_offset = c.offset;
  const flashattn::Status st = flashattn::forward(a);
  EXPECT_TRUE(st.ok()) << st.message;
  return mask;
}

void run_case(const Case& c, uint32_t seed) {
  SCOPED_TRACE(describe(c));
  Data d(c, seed);
  const bool bf = c.dt == DType::BF16;
  std::vector<uint16_t> out(d.q.size(), 0xFFFF), gq(d.q.size(), 0xFFFF), gk(d.k.size(), 0xFFFF),
      gv(d.v.size(), 0xFFFF);
  std::vector<float> lse(size_t(c.B) * c.Hq * c.Sq, std::nanf(""));
  std::vector<int32_t> mask(c.p > 0.f ? d.keep.size() : 0, -1);

  fd::FwdParams fp;
  static_cast<fd::AttnParams&>(fp) = d.params();
  fp.out = out.data(), fp.o_str = fp.q_str, fp.lse = lse.data();
  fp.lse_batch_stride = int64_t(c.Hq) * c.Sq, fp.lse_head_stride = c.Sq;
  fp.num_splits = c.nsplit;
  if (c.p > 0.f) fp.dropout_mask = mask.data();
  if (bf)
    emu_forward<__nv_bfloat16>(fp);
  else
    emu_forward<__half>(fp);

  if (c.p > 0.f) {
    EXPECT_EQ(mask, d.keep) << "kernel mask != documented formula";
    EXPECT_EQ(mask, cpu_mask(d)) << "kernel mask != CPU backend's mask";
  }

  // Reference (fp64) and yardstick (same dtype), both given the formula's mask.
  std::vector<double> slopes_d(d.slopes.begin(), d.slopes.end());
  flashattn::reference::Problem rp;
  rp.batch = c.B, rp.seqlen_q = c.Sq, rp.seqlen_k = c.Sk, rp.heads_q = c.Hq, rp.heads_kv = c.Hkv, rp.head_dim = c.D;
  rp.causal = c.causal, rp.window_left = c.wl, rp.window_right = c.wr, rp.softcap = c.softcap;
  if (c.alibi) rp.alibi_slopes = slopes_d.data(), rp.alibi_per_batch = c.alibi == 2;
  if (c.p > 0.f) rp.dropout_mask = d.keep.data(), rp.dropout_p = c.p;
  const auto q = dbl(d.q), k = dbl(d.k), v = dbl(d.v), dO = dbl(d.dout);
  std::vector<double> ro(q.size()), rl(lse.size()), rdq(q.size()), rdk(k.size()), rdv(v.size());
  flashattn::reference::forward(rp, q.data(), k.data(), v.data(), ro.data(), rl.data());
  flashattn::reference::backward(rp, q.data(), k.data(), v.data(), dO.data(), rdq.data(), rdk.data(), rdv.data());
  std::vector<float> no, nl, ndq, ndk, ndv;
  const nv::Shape sh = d.shape();
  nv::forward(sh, c.dt, d.q, d.k, d.v, &no, &nl);
  nv::backward(sh, c.dt, d.q, d.k, d.v, d.dout, &ndq, &ndk, &ndv);
  const auto m = flashattn::reference::magnitudes(q, k, v, dO, c.D, 1.0 / std::sqrt(double(c.D)));
  const double ds = 1.0 / (1.0 - double(c.p));
  const int64_t col = std::max(c.Sk, c.Sq * (c.Hq / c.Hkv));
  namespace R = flashattn::reference;
  EXPECT_TRUE(judged("out", R::judge(c.dt, dbl16(out, c.dt), ro, dbl(no), c.Sk, c.D, m.out * ds)));
  EXPECT_TRUE(judged("lse", R::judge_lse(dbl(lse), rl, dbl(nl), c.D)));

  fd::BwdParams bp;
  static_cast<fd::AttnParams&>(bp) = d.params();
  bp.out = out.data(), bp.o_str = bp.q_str, bp.dout = d.pdo.data(), bp.do_str = bp.q_str, bp.lse = lse.data();
  bp.lse_batch_stride = int64_t(c.Hq) * c.Sq, bp.lse_head_stride = c.Sq;
  bp.dq = gq.data(), bp.dk = gk.data(), bp.dv = gv.data();
  bp.dq_str = bp.q_str, bp.dk_str = bp.k_str, bp.dv_str = bp.v_str;
  bp.deterministic = c.det;
  if (bf)
    emu_backward<__nv_bfloat16>(bp, c.group_units, c.full_groups, c.walk);
  else
    emu_backward<__half>(bp, c.group_units, c.full_groups, c.walk);
  EXPECT_TRUE(judged("dq", R::judge(c.dt, dbl16(gq, c.dt), rdq, dbl(ndq), c.Sk, c.D, m.dq * ds)));
  EXPECT_TRUE(judged("dk", R::judge(c.dt, dbl16(gk, c.dt), rdk, dbl(ndk), col, c.D, m.dk * ds)));
  EXPECT_TRUE(judged("dv", R::judge(c.dt, dbl16(gv, c.dt), rdv, dbl(ndv), col, c.D, m.dv * ds)));
}

Case make(DType dt, int B, int Sq, int Sk, int Hq, int Hkv, int D) {
  Case c;
  c.dt = dt, c.B = B, c.Sq = Sq, c.Sk = Sk, c.Hq = Hq, c.Hkv = Hkv, c.D = D;
  return c;
}

TEST(Sm80EmuVariants, AlibiGqaOddLengths) {
  Case c = make(DType::BF16, 2, 37, 71, 2, 1, 32);  // Sq != Sk, GQA, tail tiles
  c.alibi = 2;
  run_case(c, 1);
}

// The backward grid in groups of (batch, kv head) units (grid_block): two
// batch entries, two kv heads and three key tiles (128, 128, 4), so a wrong
// (key tile, batch, head) decode writes some block's dK / dV to another's
// rows: groups of three units (a last group of one; Sm80Plan's
// BackwardGridGroupsCoverEveryBlockOnce checks every group size on the host).
TEST(Sm80EmuVariants, GridInGroupsOfUnits) {
  Case c = make(DType::BF16, 2, 19, 260, 2, 2, 32);
  c.alibi = 2;
  c.causal = true;
  c.group_units = 3;
  run_case(c, 8);
}

// Each order of a backward block's steps (kernel_traits.hpp BwdSteps): two
// query tiles of 128 rows (the second partial) for each of two query heads,
// two key tiles, so that the walks differ (rotate: 0 1 in the first block, 1 0
// in the second; first: 0 1 in both) and cross from one head to the next; a
// walk that skips a step or takes one twice leaves dK / dV (and dQ) wrong.
// (About 12 s a walk; the third, last, is Sm80EmuVarlenBackward's
// WalkDownFromLastTile, and Sm80Plan.BackwardWalksVisitEveryStepOnce checks
// all three on more shapes.)
TEST(Sm80EmuVariants, BackwardWalks) {
  for (s8::BwdWalk w : {s8::BwdWalk::rotate, s8::BwdWalk::first}) {
    Case c = make(DType::BF16, 1, 140, 133, 2, 1, 32);
    c.alibi = 1;
    c.walk = w;
    run_case(c, 20 + static_cast<int>(w));
  }
}

TEST(Sm80EmuVariants, AlibiCausalSqGreaterThanSkSoftcapDeterministic) {
  Case c = make(DType::F16, 1, 70, 40, 2, 1, 64);  // rows that see no key
  c.alibi = 1;
  c.causal = true;
  c.softcap = 5.f;
  c.det = true;
  run_case(c, 2);
}

TEST(Sm80EmuVariants, DropoutGqaMaskEqualsCpu) {
  Case c = make(DType::BF16, 2, 33, 90, 2, 1, 32);
  c.p = 0.3f;
  run_case(c, 3);
}

TEST(Sm80EmuVariants, DropoutCausalWindowDeterministic) {
  Case c = make(DType::F16, 1, 77, 77, 1, 1, 64);
  c.p = 0.5f;
  c.causal = true;
  c.wl = 20;
  c.det = true;
  run_case(c, 4);
}

TEST(Sm80EmuVariants, AlibiAndDropoutSplitKv) {
  Case c = make(DType::BF16, 1, 3, 150, 2, 1, 48);  // decode-like: split KV with the combine kernel
  c.alibi = 1;
  c.p = 0.2f;
  c.nsplit = 3;
  run_case(c, 5);
}

// The comparison can fail: a backward that regenerates another mask than the
// forward's (another offset) breaks dV.
TEST(Sm80EmuVariants, BackwardWithAnotherOffsetFails) {
  Case c = make(DType::BF16, 1, 40, 64, 1, 1, 32);
  c.p = 0.3f;
  Data d(c, 6);
  std::vector<uint16_t> out(d.q.size()), gq(d.q.size()), gk(d.k.size()), gv(d.v.size());
  std::vector<float> lse(size_t(c.Sq));
  fd::FwdParams fp;
  static_cast<fd::AttnParams&>(fp) = d.params();
  fp.out = out.data(), fp.o_str = fp.q_str, fp.lse = lse.data(), fp.lse_batch_stride = c.Sq, fp.lse_head_stride = c.Sq;
  emu_forward<__nv_bfloat16>(fp);
  fd::BwdParams bp;
  static_cast<fd::AttnParams&>(bp) = d.params();
  bp.dropout_offset += 1;
  bp.out = out.data(), bp.o_str = bp.q_str, bp.dout = d.pdo.data(), bp.do_str = bp.q_str, bp.lse = lse.data();
  bp.lse_batch_stride = c.Sq, bp.lse_head_stride = c.Sq;
  bp.dq = gq.data(), bp.dk = gk.data(), bp.dv = gv.data();
  bp.dq_str = bp.q_str, bp.dk_str = bp.k_str, bp.dv_str = bp.v_str;
  emu_backward<__nv_bfloat16>(bp, 0, -1, s8::BwdWalk::rotate);
  const auto q = dbl(d.q), k = dbl(d.k), v = dbl(d.v), dO = dbl(d.dout);
  flashattn::reference::Problem rp;
  rp.seqlen_q = c.Sq, rp.seqlen_k = c.Sk, rp.head_dim = c.D, rp.dropout_mask = d.keep.data(), rp.dropout_p = c.p;
  std::vector<double> rdq(q.size()), rdk(k.size()), rdv(v.size());
  flashattn::reference::backward(rp, q.data(), k.data(), v.data(), dO.data(), rdq.data(), rdk.data(), rdv.data());
  std::vector<float> ndq, ndk, ndv;
  nv::backward(d.shape(), c.dt, d.q, d.k, d.v, d.dout, &ndq, &ndk, &ndv);
  const auto m = flashattn::reference::magnitudes(q, k, v, dO, c.D, 1.0 / std::sqrt(double(c.D)));
  EXPECT_FALSE(flashattn::reference::judge(c.dt, dbl16(gv, c.dt), rdv, dbl(ndv), c.Sk, c.D, m.dv / 0.7).pass());
}

}  // namespace

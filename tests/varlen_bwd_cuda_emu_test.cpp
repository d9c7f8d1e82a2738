// The sm80 varlen backward (issue 8: cu_seqlens read inside the kernels, one
// launch per kernel for the packed batch; sm80/bwd_seq.cuh) executed on the
// CPU by src/cuda/emu (CI has no GPU): the preprocess, the main kernel (SEQ
// instantiation, and the VAR one with ALiBi / dropout), the atomic-dQ
// postprocess and the deterministic dQ kernel, launched as launch_bwd.cuh
// launches them. Each sequence's dQ / dK / dV is compared with the fp64
// reference run on that sequence alone, under DESIGN.md's rule (yardstick:
// support/naive_variants.hpp). Packed rows that belong to no sequence must
// stay untouched, and a sequence's gradients must not change when every row
// of every other sequence is NaN (any read across a sequence boundary would
// carry the NaN in). Small shapes: the emulator runs one thread per CUDA
// thread; the kernels are the head-dim-64 ones (128-row / 128-key tiles, and
// 64 x 64 in the dQ kernel), with lengths on both sides of the tiles.
#include "cuda_emu.hpp"  // first: the CUDA keywords for the host compiler

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/philox.hpp"
#include "reference/reference.hpp"
#include "reference/rule.hpp"
#include "sm80/bwd_dq_kernel.cuh"
#include "sm80/bwd_kernel.cuh"
#include "sm80/bwd_postprocess.cuh"
#include "sm80/bwd_preprocess.cuh"
#include "sm80/launch.hpp"
#include "support/half.hpp"
#include "support/naive_variants.hpp"

EMU_DEFINE_SMEM

namespace {

namespace s8 = flashattn::detail::cuda::sm80;
namespace fd = flashattn::detail;
namespace nv = fa_test::naive_variants;
namespace R = flashattn::reference;
using flashattn::DType;

constexpr int kTile = 64;  // the kernels' head dim; problems use d <= 64
constexpr uint16_t kPoison = 0xFFFF;  // NaN in fp16 and bf16

uint16_t to16(float x, DType dt) { return fa_test::to_bits16(dt, x); }
float from16(uint16_t u, DType dt) { return fa_test::from_bits16(dt, u); }

struct Case {
  DType dt = DType::F16;
  std::vector<int> lens_q, lens_k;
  int Hq = 2, Hkv = 1, D = 64;
  int gap_q = 0, gap_k = 0;  // packed rows after the last sequence (belong to none)
  bool causal = false;
  int wl = -1, wr = -1;
  float softcap = 0.f;
  bool alibi = false;  // slopes [B, Hq]
  float p = 0.f;       // dropout
  bool det = false;
  int group_units = 0;  // the backward grid's (kernel_traits.hpp grid_block); 0: all units
  int full_groups = -1;  // groups of group_units before the last (grid_block); -1: units / group_units
  s8::BwdWalk walk = s8::BwdWalk::rotate;  // a backward block's query-tile order (BwdSteps)
  uint64_t seed = 0x9e3779b97f4a7c15ull, offset = 0x300000011ull;
};

std::string describe(const Case& c) {
  std::string s = c.dt == DType::BF16 ? "bf16" : "fp16";
  s += " lens_q";
  for (int l : c.lens_q) s += " " + std::to_string(l);
  s += " lens_k";
  for (int l : c.lens_k) s += " " + std::to_string(l);
  s += " H" + std::to_string(c.Hq) + "/" + std::to_string(c.Hkv) + " D" + std::to_string(c.D);
  if (c.causal) s += " causal";
  if (c.group_units > 0) s += " groups of " + std::to_string(c.group_units);
  if (c.full_groups >= 0) s += " x " + std::to_string(c.full_groups) + " then the rest";
  s += " walk " + std::to_string(static_cast<int>(c.walk));
  if (c.wl >= 0 || c.wr >= 0) s += " win(" + std::to_string(c.wl) + "," + std::to_string(c.wr) + ")";
  if (c.softcap > 0.f) s += " softcap";
  if (c.alibi) s += " alibi";
  if (c.p > 0.f) s += " dropout";
  if (c.det) s += " det";
  return s;
}

// The packed problem: inputs [T, H, D] as floats (exact in the dtype) and in
// the dtype, with O and the LSE of the fp64 forward of each sequence.
struct Packed {
  Case c;
  int B = 0, Tq = 0, Tk = 0, max_q = 0, max_k = 0;
  std::vector<int32_t> cu_q, cu_k;
  std::vector<float> q, k, v, dout, out, lse, slopes;  // slopes [B, Hq]
  std::vector<double> slopes_d;
  std::vector<uint16_t> pq, pk, pv, pdo, pout;
  std::vector<std::vector<int32_t>> keep;  // per sequence [Hq, len_q, len_k]

  Packed(const Case& cs, uint32_t seed) : c(cs) {
    B = int(c.lens_q.size());
    cu_q.assign(1, 0);
    cu_k.assign(1, 0);
    for (int b = 0; b < B; ++b) {
      cu_q.push_back(cu_q.back() + c.lens_q[size_t(b)]);
      cu_k.push_back(cu_k.back() + c.lens_k[size_t(b)]);
      max_q = std::max(max_q, c.lens_q[size_t(b)]);
      max_k = std::max(max_k, c.lens_k[size_t(b)]);
    }
    Tq = cu_q.back() + c.gap_q;
    Tk = cu_k.back() + c.gap_k;
    std::mt19937 g(seed);
    std::normal_distribution<float> nd;
    auto fill = [&](std::vector<float>& x, size_t n) {
      x.resize(n);
      for (auto& e : x) e = nv::round_to(c.dt, nd(g));
    };
    fill(q, size_t(Tq) * c.Hq * c.D);
    fill(k, size_t(Tk) * c.Hkv * c.D);
    fill(v, size_t(Tk) * c.Hkv * c.D);
    fill(dout, size_t(Tq) * c.Hq * c.D);
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < c.Hq; ++h) slopes.push_back(std::exp2(-8.f * float(h + 1) / float(c.Hq)) * (1.f + 0.3f * b));
    slopes_d.assign(slopes.begin(), slopes.end());
    keep.resize(size_t(B));
    if (c.p > 0.f) {
      const fd::DropoutRng rng(c.seed, c.offset, c.p, c.Hq);
      for (int b = 0; b < B; ++b) {
        const int lq = c.lens_q[size_t(b)], lk = c.lens_k[size_t(b)], off = lk - lq, right = c.causal ? 0 : c.wr;
        auto& m = keep[size_t(b)];
        m.resize(size_t(c.Hq) * lq * lk);
        for (int h = 0; h < c.Hq; ++h)
          for (int i = 0; i < lq; ++i)
            for (int j = 0; j < lk; ++j) {
              const bool seen = (c.wl < 0 || j >= i + off - c.wl) && (right < 0 || j <= i + off + right);
              m[(size_t(h) * lq + i) * lk + j] = seen && rng.keep(b, h, i, j);  // the sequence's own (b, i, j)
            }
      }
    }
    // O and LSE of the exact forward, per sequence (rows of no sequence: 0).
    out.assign(q.size(), 0.f);
    lse.assign(size_t(c.Hq) * Tq, 0.f);
    for (int b = 0; b < B; ++b) {
      const int lq = c.lens_q[size_t(b)], lk = c.lens_k[size_t(b)];
      if (lq == 0) continue;
      const R::Problem pb = problem(b);
      const auto sq = dbl(rows(q, cu_q[size_t(b)], lq, c.Hq)), sk = dbl(rows(k, cu_k[size_t(b)], lk, c.Hkv)),
                 sv = dbl(rows(v, cu_k[size_t(b)], lk, c.Hkv));
      std::vector<double> o(sq.size()), l(size_t(c.Hq) * lq);
      R::forward(pb, sq.data(), sk.data(), sv.data(), o.data(), l.data());
      for (size_t x = 0; x < o.size(); ++x)
        out[size_t(cu_q[size_t(b)]) * c.Hq * c.D + x] = nv::round_to(c.dt, float(o[x]));
      for (int h = 0; h < c.Hq; ++h)
        for (int i = 0; i < lq; ++i) lse[size_t(h) * Tq + cu_q[size_t(b)] + i] = float(l[size_t(h) * lq + i]);
    }
    auto conv = [&](const std::vector<float>& x, std::vector<uint16_t>& px) {
      px.resize(x.size());
      for (size_t i = 0; i < x.size(); ++i) px[i] = to16(x[i], c.dt);
    };
    conv(q, pq), conv(k, pk), conv(v, pv), conv(dout, pdo), conv(out, pout);
  }

  static std::vector<double> dbl(const std::vector<float>& x) { return {x.begin(), x.end()}; }
  // Rows [r0, r0 + n) of a packed [T, H, D] array.
  std::vector<float> rows(const std::vector<float>& x, int r0, int n, int H) const {
    const size_t w = size_t(H) * c.D;
    return {x.begin() + ptrdiff_t(r0 * w), x.begin() + ptrdiff_t((r0 + n) * w)};
  }
  // Sequence b as a problem of its own (what the CPU backend and the old
  // per-sequence CUDA path ran): its ALiBi row, its dropout mask.
  R::Problem problem(int b) const {
    R::Problem pb;
    pb.batch = 1, pb.seqlen_q = c.lens_q[size_t(b)], pb.seqlen_k = c.lens_k[size_t(b)];
    pb.heads_q = c.Hq, pb.heads_kv = c.Hkv, pb.head_dim = c.D;
    pb.causal = c.causal, pb.window_left = c.wl, pb.window_right = c.wr, pb.softcap = c.softcap;
    if (c.alibi) pb.alibi_slopes = slopes_d.data() + size_t(b) * c.Hq;
    if (c.p > 0.f) pb.dropout_mask = keep[size_t(b)].data(), pb.dropout_p = c.p;
    return pb;
  }
  nv::Shape shape(int b) const {
    nv::Shape s;
    s.B = 1, s.Sq = c.lens_q[size_t(b)], s.Sk = c.lens_k[size_t(b)], s.Hq = c.Hq, s.Hkv = c.Hkv, s.D = c.D;
    s.scale = 1.f / std::sqrt(float(c.D));
    s.causal = c.causal, s.wl = c.wl, s.wr = c.wr, s.softcap = c.softcap;
    if (c.alibi) s.slopes = slopes.data() + size_t(b) * c.Hq;
    if (c.p > 0.f) s.keep = keep[size_t(b)].data(), s.p = c.p;
    return s;
  }
};

// What the CUDA varlen backward receives (src/api: packed views with batch
// stride 0, seqlen_q / seqlen_k the maxima, LSE [Hq, total_q]).
struct Grads {
  std::vector<uint16_t> dq, dk, dv;
};
fd::BwdParams params(const Packed& d, const std::vector<uint16_t>* in[5], const float* lse, Grads& gr) {
  const Case& c = d.c;
  fd::BwdParams p;
  p.dtype = c.dt;
  p.batch = d.B, p.seqlen_q = d.max_q, p.seqlen_k = d.max_k, p.total_q = d.Tq;
  p.heads_q = c.Hq, p.heads_kv = c.Hkv, p.head_dim = c.D;
  p.q = in[0]->data(), p.k = in[1]->data(), p.v = in[2]->data(), p.dout = in[3]->data(), p.out = in[4]->data();
  p.q_str = p.o_str = p.do_str = p.dq_str = {0, int64_t(c.Hq) * c.D, c.D};
  p.k_str = p.v_str = p.dk_str = p.dv_str = {0, int64_t(c.Hkv) * c.D, c.D};
  p.scale = 1.f / std::sqrt(float(c.D));
  p.softcap = c.softcap;
  p.causal = c.causal;
  p.window_left = c.wl;
  p.window_right = c.causal ? 0 : c.wr;
  if (c.alibi) p.alibi_slopes = d.slopes.data(), p.alibi_batch_stride = c.Hq;
  p.dropout_p = c.p, p.dropout_seed = c.seed, p.dropout_offset = c.offset;
  p.cu_seqlens_q = d.cu_q.data(), p.cu_seqlens_k = d.cu_k.data();
  p.lse = lse, p.lse_batch_stride = 0, p.lse_head_stride = d.Tq;
  gr.dq.assign(size_t(d.Tq) * c.Hq * c.D, kPoison);
  gr.dk.assign(size_t(d.Tk) * c.Hkv * c.D, kPoison);
  gr.dv.assign(size_t(d.Tk) * c.Hkv * c.D, kPoison);
  p.dq = gr.dq.data(), p.dk = gr.dk.data(), p.dv = gr.dv.data();
  p.deterministic = c.det;
  return p;
}

// run_bwd's launches (launch_bwd.cuh) for a varlen batch, on the emulator.
template <class T>
void emu_backward_varlen(const fd::BwdParams& p, int group_units, int full_groups, s8::BwdWalk walk) {
  ASSERT_TRUE(p.varlen());
  const s8::BwdWorkspace ws = s8::bwd_workspace(p, kTile);
  std::vector<float> buf(ws.total / 4 + 64, std::nanf(""));  // garbage where not written, as on a GPU
  s8::BwdArgs args(p);
  const int64_t rows = p.heads_q * p.total_q;
  ASSERT_EQ(ws.dq_offset % 16, 0u);
  if (rows > 0) {
    args.dsum = buf.data() + ws.dsum_offset / 4;
    if (!p.deterministic) {
      args.dq_accum = buf.data() + ws.dq_offset / 4;
      std::fill(args.dq_accum, args.dq_accum + (ws.total - ws.dq_offset) / 4, 0.f);
    }
    emu::launch({unsigned((rows + 7) / 8), 1, 1}, 256, [&] { s8::bwd_preprocess_kernel<T, true>(args); });
  }
  if (p.seqlen_k > 0) {
    using Cfg = s8::BwdCfg<kTile>;
    args.n_blocks = static_cast<int>((p.seqlen_k + Cfg::BN - 1) / Cfg::BN);
    args.group_units = group_units > 0 ? group_units : static_cast<int>(p.heads_kv * p.batch);
    args.full_groups = full_groups >= 0 ? full_groups : static_cast<int>(p.heads_kv * p.batch) / args.group_units;
    args.walk = static_cast<int>(walk);
    const emu::Dim3 grid{unsigned(s8::bwd_blocks(args.n_blocks, p.heads_kv, p.batch)), 1, 1};
    auto* kernel = s8::bwd_kernel_for<T, kTile>(p);  // the launcher's choice (VAR or SEQ)
    emu::launch(grid, Cfg::NW * 32, [&] { kernel(args); });
  }
  if (rows > 0 && p.seqlen_q > 0) {
    if (p.deterministic) {
      using Dq = s8::DqCfg<kTile>;
      const emu::Dim3 grid{unsigned((p.seqlen_q + Dq::BM - 1) / Dq::BM), unsigned(p.heads_q), unsigned(p.batch)};
      auto* kernel = s8::bwd_dq_kernel_for<T, kTile>(p);
      emu::launch(grid, Dq::NW * 32, [&] { kernel(args); });
    } else {
      const int64_t chunks = rows * (p.head_dim / 8);
      emu::launch({unsigned((chunks + 255) / 256), 1, 1}, 256,
                  [&] { s8::bwd_dq_convert_kernel<T, true>(args, kTile); });
    }
  }
}

void run(const Packed& d, const std::vector<uint16_t>* in[5], const float* lse, Grads& gr) {
  const fd::BwdParams p = params(d, in, lse, gr);
  if (d.c.dt == DType::BF16)
    emu_backward_varlen<__nv_bfloat16>(p, d.c.group_units, d.c.full_groups, d.c.walk);
  else
    emu_backward_varlen<__half>(p, d.c.group_units, d.c.full_groups, d.c.walk);
}

::testing::AssertionResult judged(const std::string& what, const R::ErrorStats& e) {
  if (e.pass()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": max err " << e.judged_err << " (less half an ulp) > tol " << e.tol << " (naive "
                                       << e.naive_err << ", max|ref| " << e.max_ref << ", bad " << e.bad << ")";
}

// Rows [r0, r0 + n) of a packed 16-bit [T, H, D] array, as doubles.
std::vector<double> rows16(const std::vector<uint16_t>& x, int r0, int n, int H, int D, DType dt) {
  std::vector<double> r(size_t(n) * H * D);
  for (size_t i = 0; i < r.size(); ++i) r[i] = from16(x[size_t(r0) * H * D + i], dt);
  return r;
}
bool all_zero(const std::vector<double>& x) {
  return std::all_of(x.begin(), x.end(), [](double e) { return e == 0.0; });
}
bool all_poison(const std::vector<uint16_t>& x, size_t from) {
  return std::all_of(x.begin() + ptrdiff_t(from), x.end(), [](uint16_t e) { return e == kPoison; });
}

// Sequence b's gradients against the reference (or exactly zero where the
// sequence has no queries / no keys).
void check_sequence(const Packed& d, const Grads& gr, int b) {
  const Case& c = d.c;
  SCOPED_TRACE("sequence " + std::to_string(b));
  const int lq = c.lens_q[size_t(b)], lk = c.lens_k[size_t(b)], q0 = d.cu_q[size_t(b)], k0 = d.cu_k[size_t(b)];
  const auto gq = rows16(gr.dq, q0, lq, c.Hq, c.D, c.dt);
  const auto gk = rows16(gr.dk, k0, lk, c.Hkv, c.D, c.dt), gv = rows16(gr.dv, k0, lk, c.Hkv, c.D, c.dt);
  if (lq == 0 || lk == 0) {
    EXPECT_TRUE(all_zero(gq)) << "dq of a sequence without keys must be 0";
    EXPECT_TRUE(all_zero(gk) && all_zero(gv)) << "dk/dv of a sequence without queries must be 0";
    return;
  }
  const auto sq = d.rows(d.q, q0, lq, c.Hq), sk = d.rows(d.k, k0, lk, c.Hkv), sv = d.rows(d.v, k0, lk, c.Hkv),
             sdo = d.rows(d.dout, q0, lq, c.Hq);
  const auto q = Packed::dbl(sq), k = Packed::dbl(sk), v = Packed::dbl(sv), dO = Packed::dbl(sdo);
  const R::Problem pb = d.problem(b);
  std::vector<double> rdq(q.size()), rdk(k.size()), rdv(v.size());
  R::backward(pb, q.data(), k.data(), v.data(), dO.data(), rdq.data(), rdk.data(), rdv.data());
  std::vector<float> ndq, ndk, ndv;
  nv::backward(d.shape(b), c.dt, sq, sk, sv, sdo, &ndq, &ndk, &ndv);
  const auto m = R::magnitudes(q, k, v, dO, c.D, 1.0 / std::sqrt(double(c.D)));
  const double ds = 1.0 / (1.0 - double(c.p));
  const int64_t col = std::max<int64_t>(lk, int64_t(lq) * (c.Hq / c.Hkv));
  EXPECT_TRUE(judged("dq", R::judge(c.dt, gq, rdq, Packed::dbl(ndq), lk, c.D, m.dq * ds)));
  EXPECT_TRUE(judged("dk", R::judge(c.dt, gk, rdk, Packed::dbl(ndk), col, c.D, m.dk * ds)));
  EXPECT_TRUE(judged("dv", R::judge(c.dt, gv, rdv, Packed::dbl(ndv), col, c.D, m.dv * ds)));
}

void run_case(const Case& c, uint32_t seed) {
  SCOPED_TRACE(describe(c));
  const Packed d(c, seed);
  const std::vector<uint16_t>* in[5] = {&d.pq, &d.pk, &d.pv, &d.pdo, &d.pout};
  Grads gr;
  run(d, in, d.lse.data(), gr);
  for (int b = 0; b < d.B; ++b) check_sequence(d, gr, b);
  // Packed rows after the last sequence belong to none: never written.
  EXPECT_TRUE(all_poison(gr.dq, size_t(d.cu_q.back()) * c.Hq * c.D)) << "dq rows of no sequence were written";
  EXPECT_TRUE(all_poison(gr.dk, size_t(d.cu_k.back()) * c.Hkv * c.D)) << "dk rows of no sequence were written";
  EXPECT_TRUE(all_poison(gr.dv, size_t(d.cu_k.back()) * c.Hkv * c.D)) << "dv rows of no sequence were written";
}

// Every packed row outside sequence b (inputs, O, LSE) set to NaN: sequence
// b's gradients must still pass, so no kernel read across its boundaries.
void run_isolated(const Case& c, int b, uint32_t seed) {
  SCOPED_TRACE(describe(c));
  const Packed d(c, seed);
  const uint16_t nan16 = kPoison;
  {
    SCOPED_TRACE("NaN outside sequence " + std::to_string(b));
    auto isolate = [&](const std::vector<uint16_t>& x, const std::vector<int32_t>& cu, int H) {
      std::vector<uint16_t> r(x.size(), nan16);
      const size_t w = size_t(H) * c.D;
      std::copy(x.begin() + ptrdiff_t(cu[size_t(b)] * w), x.begin() + ptrdiff_t(cu[size_t(b) + 1] * w),
                r.begin() + ptrdiff_t(cu[size_t(b)] * w));
      return r;
    };
    const auto q = isolate(d.pq, d.cu_q, c.Hq), k = isolate(d.pk, d.cu_k, c.Hkv), v = isolate(d.pv, d.cu_k, c.Hkv),
               dout = isolate(d.pdo, d.cu_q, c.Hq), out = isolate(d.pout, d.cu_q, c.Hq);
    std::vector<float> lse(d.lse.size(), std::nanf(""));
    for (int h = 0; h < c.Hq; ++h)
      for (int i = d.cu_q[size_t(b)]; i < d.cu_q[size_t(b) + 1]; ++i)
        lse[size_t(h) * d.Tq + i] = d.lse[size_t(h) * d.Tq + i];
    const std::vector<uint16_t>* in[5] = {&q, &k, &v, &dout, &out};
    Grads gr;
    run(d, in, lse.data(), gr);
    check_sequence(d, gr, b);
  }
}

Case make(DType dt, std::vector<int> lq, std::vector<int> lk, int hq, int hkv, int dim) {
  Case c;
  c.dt = dt, c.lens_q = std::move(lq), c.lens_k = std::move(lk), c.Hq = hq, c.Hkv = hkv, c.D = dim;
  return c;
}

// Zero-length sequences on either side, a 1-token one, Sq != Sk per
// sequence (causal rows that see no key: sequence 4), GQA 2:1, rows of no
// sequence at the end. Atomic dQ.
TEST(Sm80EmuVarlenBackward, CausalGqaZeroLengths) {
  Case c = make(DType::F16, {0, 1, 17, 70, 3}, {9, 0, 20, 100, 1}, 2, 1, 64);
  c.causal = true;
  c.gap_q = 5, c.gap_k = 3;
  run_case(c, 1);
}

// The deterministic dQ kernel; odd head dim (40 on the 64 kernels), not
// causal, a sequence across the 128-row tile (and the dQ kernel's 64 keys).
TEST(Sm80EmuVarlenBackward, DeterministicOddHeadDim) {
  Case c = make(DType::BF16, {0, 1, 130, 3}, {9, 0, 70, 1}, 1, 1, 40);
  c.det = true;
  c.gap_q = 2, c.gap_k = 7;
  run_case(c, 2);
}

// The backward grid in groups of (sequence, kv head) units (grid_block) on a
// varlen batch: 8 units in groups of 3, 3 and 2; the grid covers the longest
// sequence's key tiles, so blocks past a shorter sequence's keys exit in the
// middle of a group. (Batch 4 with 2 kv heads: a decode that mixes up the
// two counts is no bijection.)
TEST(Sm80EmuVarlenBackward, GridInGroupsOfUnits) {
  Case c = make(DType::F16, {0, 17, 70, 3}, {9, 260, 100, 0}, 4, 2, 64);
  c.causal = true;
  c.gap_q = 5, c.gap_k = 3;
  c.group_units = 3;
  run_case(c, 8);
}

// FlashAttention-2's walk (BwdSteps, down from each head's last query tile)
// on the grouped varlen batch above: sequences of 0-3 query tiles, so blocks
// with one, several and no steps; one group of 3 and a last group of the
// other 5 units (grid_full_groups under a mask).
TEST(Sm80EmuVarlenBackward, WalkDownFromLastTile) {
  Case c = make(DType::F16, {0, 17, 290, 3}, {9, 260, 100, 0}, 4, 2, 64);
  c.causal = true;
  c.gap_q = 5, c.gap_k = 3;
  c.group_units = 3;
  c.full_groups = 1;
  c.walk = s8::BwdWalk::last;
  run_case(c, 9);
}

// Window and softcap per sequence (the mask's diagonal moves with each
// sequence's lengths); a sequence across the 128-key tile.
TEST(Sm80EmuVarlenBackward, WindowSoftcap) {
  Case c = make(DType::F16, {70, 140}, {90, 129}, 1, 1, 64);
  c.wl = 16, c.wr = 3;
  c.softcap = 20.f;
  run_case(c, 3);
}

// ALiBi ([B, Hq] slopes, row b per sequence) and dropout (the generator's b
// is the sequence, (i, j) its own rows): the VAR kernels take varlen too.
TEST(Sm80EmuVarlenBackward, AlibiDropoutVarKernels) {
  Case c = make(DType::F16, {37, 0, 70}, {64, 12, 129}, 1, 1, 32);
  c.causal = true;
  c.alibi = true;
  c.p = 0.25f;
  run_case(c, 4);
  c = make(DType::BF16, {5, 0, 9}, {8, 12, 30}, 2, 1, 32);
  c.alibi = true;
  c.p = 0.25f;
  c.det = true;
  run_case(c, 5);
}

// Sequences must not bleed into each other: NaN everywhere but the middle
// sequence (neighbours on both sides), with atomic and deterministic dQ.
TEST(Sm80EmuVarlenBackward, NoReadsAcrossSequences) {
  Case c = make(DType::F16, {20, 45, 7}, {30, 3, 50}, 1, 1, 32);
  c.causal = true;
  c.gap_q = 3, c.gap_k = 2;
  run_isolated(c, 1, 6);
  c.det = true;
  run_isolated(c, 1, 7);
}

}  // namespace

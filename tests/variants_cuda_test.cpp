// ALiBi and dropout on the CUDA backend (label gpu; sm80 kernels, and on
// Hopper the sm90 kernels for ALiBi without dropout): forward and
// backward through the public API against the fp64 reference under
// DESIGN.md's rule (same-dtype yardstick: support/naive_variants.hpp), the
// returned keep mask equal element for element to the CPU backend's and to
// the documented Philox formula, the keep rate, varlen (forward and
// backward) and the KV cache. The CPU side of the same semantics is
// variants_test.cpp; the kernels' layouts are also checked without a GPU by
// variants_cuda_emu_test.cpp.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "common/philox.hpp"
#include "flashattn/flashattn.hpp"
#include "reference/reference.hpp"
#include "reference/rule.hpp"
#include "support/naive_variants.hpp"
#include "support/tensor.hpp"

namespace {

using flashattn::Device;
using flashattn::DType;
using flashattn::TensorView;
using fa_test::Tensor;
namespace nv = fa_test::naive_variants;
namespace R = flashattn::reference;

bool have_cuda() { return fa_test::device_usable(Device::CUDA); }

struct Case {
  DType dt = DType::BF16;
  int64_t B = 1, Sq = 1, Sk = 1, Hq = 1, Hkv = 1, D = 128;
  bool causal = false;
  int64_t wl = -1, wr = -1;
  float softcap = 0.f;
  int alibi = 0;  // 0 off, 1 [Hq], 2 [B, Hq]
  float p = 0.f;
  bool det = false;
  uint64_t seed = 0xfeedfacecafebeefull, offset = 0x300000011ull;
};

std::string describe(const Case& c) {
  return std::string(c.dt == DType::BF16 ? "bf16" : "fp16") + " B" + std::to_string(c.B) + " Sq" +
         std::to_string(c.Sq) + " Sk" + std::to_string(c.Sk) + " H" + std::to_string(c.Hq) + "/" +
         std::to_string(c.Hkv) + " D" + std::to_string(c.D) + (c.causal ? " causal" : "") + " win(" +
         std::to_string(c.wl) + "," + std::to_string(c.wr) + ") cap" + std::to_string(c.softcap) + " alibi" +
         std::to_string(c.alibi) + " p" + std::to_string(c.p) + (c.det ? " det" : "");
}

std::vector<double> randn(size_t n, std::mt19937& g) {
  std::normal_distribution<double> nd;
  std::vector<double> x(n);
  for (double& e : x) e = nd(g);
  return x;
}
std::vector<float> fl(const std::vector<double>& x) { return {x.begin(), x.end()}; }
std::vector<double> dbl(const std::vector<float>& x) { return {x.begin(), x.end()}; }

::testing::AssertionResult judged(const char* what, const R::ErrorStats& e) {
  if (e.pass()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": max err " << e.judged_err << " (less half an ulp) > tol " << e.tol << " (naive "
                                       << e.naive_err << ", max|ref| " << e.max_ref << ", bad " << e.bad << ")";
}

std::vector<float> slopes_for(const Case& c) {
  std::vector<float> s;
  const int64_t rows = c.alibi == 2 ? c.B : 1;
  for (int64_t b = 0; b < rows; ++b)
    for (int64_t h = 0; h < c.Hq; ++h) s.push_back(std::exp2(-8.f * float(h + 1) / float(c.Hq)) * (1.f + 0.5f * b));
  return s;
}

// Z of the documented formula on visible keys, 0 elsewhere.
std::vector<int32_t> formula_mask(const Case& c) {
  return nv::formula_keep_mask(c.B, c.Hq, c.Sq, c.Sk, c.causal, c.wl, c.wr, c.seed, c.offset, c.p);
}

flashattn::Options options(const Case& c, const Tensor* slopes) {
  flashattn::Options o;
  o.causal = c.causal;
  o.window_left = c.wl;
  o.window_right = c.wr;
  o.softcap = c.softcap;
  o.deterministic = c.det;
  if (slopes) o.alibi_slopes = slopes->view();
  o.dropout_p = c.p;
  o.dropout_seed = c.seed;
  o.dropout_offset = c.offset;
  return o;
}

// The CPU backend's mask for the same shape, seed and offset (fp32 inputs).
std::vector<int32_t> cpu_mask(const Case& c, const std::vector<double>& q, const std::vector<double>& k,
                              const std::vector<double>& v) {
  std::vector<float> qf = fl(q), kf = fl(k), vf = fl(v), out(q.size()), lse(size_t(c.B * c.Hq * c.Sq));
  std::vector<int32_t> mask(size_t(c.B * c.Hq * c.Sq * c.Sk), -1);
  flashattn::ForwardArgs a;
  a.q = TensorView::contiguous(qf.data(), DType::F32, {c.B, c.Sq, c.Hq, c.D});
  a.k = TensorView::contiguous(kf.data(), DType::F32, {c.B, c.Sk, c.Hkv, c.D});
  a.v = TensorView::contiguous(vf.data(), DType::F32, {c.B, c.Sk, c.Hkv, c.D});
  a.out = TensorView::contiguous(out.data(), DType::F32, {c.B, c.Sq, c.Hq, c.D});
  a.lse = TensorView::contiguous(lse.data(), DType::F32, {c.B, c.Hq, c.Sq});
  a.dropout_mask = TensorView::contiguous(mask.data(), DType::I32, {c.B, c.Hq, c.Sq, c.Sk});
  a.options = options(c, nullptr);
  const flashattn::Status st = flashattn::forward(a);
  EXPECT_TRUE(st.ok()) << st.message;
  return mask;
}

void run_case(const Case& c, uint32_t seed) {
  SCOPED_TRACE(describe(c));
  std::mt19937 g(seed);
  const Device dev = Device::CUDA;
  Tensor q = fa_test::make_contiguous(dev, c.dt, {c.B, c.Sq, c.Hq, c.D});
  Tensor k = fa_test::make_contiguous(dev, c.dt, {c.B, c.Sk, c.Hkv, c.D});
  Tensor v = fa_test::make_contiguous(dev, c.dt, {c.B, c.Sk, c.Hkv, c.D});
  Tensor dout = fa_test::make_contiguous(dev, c.dt, {c.B, c.Sq, c.Hq, c.D});
  q.write(randn(size_t(q.numel()), g));
  k.write(randn(size_t(k.numel()), g));
  v.write(randn(size_t(v.numel()), g));
  dout.write(randn(size_t(dout.numel()), g));
  const std::vector<double> hq = q.read(), hk = k.read(), hv = v.read(), hdo = dout.read();  // dtype-rounded
  const std::vector<float> slopes = slopes_for(c);
  Tensor ts;
  if (c.alibi) {
    ts = c.alibi == 2 ? fa_test::make_contiguous(dev, DType::F32, {c.B, c.Hq})
                      : fa_test::make_contiguous(dev, DType::F32, {c.Hq});
    ts.write(dbl(slopes));
  }
  Tensor out = fa_test::make_contiguous(dev, c.dt, {c.B, c.Sq, c.Hq, c.D});
  Tensor lse = fa_test::make_lse(dev, c.B, c.Hq, c.Sq);
  Tensor mask;
  if (c.p > 0.f) mask = fa_test::make_contiguous(dev, DType::I32, {c.B, c.Hq, c.Sq, c.Sk});
  flashattn::ForwardArgs fa;
  fa.q = q.view(), fa.k = k.view(), fa.v = v.view(), fa.out = out.view(), fa.lse = lse.view();
  if (c.p > 0.f) fa.dropout_mask = mask.view();
  fa.options = options(c, c.alibi ? &ts : nullptr);
  {
    fa_test::CallGuard guard({&q, &k, &v}, {&out, &lse});
    const flashattn::Status st = flashattn::forward(fa);
    ASSERT_TRUE(st.ok()) << st.message;
    EXPECT_TRUE(guard.wrote_exactly_outputs());
  }
  std::vector<int32_t> keep;
  if (c.p > 0.f) {
    const std::vector<double> m = mask.read();
    std::vector<int32_t> got(m.begin(), m.end());
    keep = formula_mask(c);
    EXPECT_EQ(got, keep) << "CUDA mask != documented formula";
    EXPECT_EQ(got, cpu_mask(c, hq, hk, hv)) << "CUDA mask != CPU backend's mask";
  }

  std::vector<double> slopes_d = dbl(slopes);
  R::Problem rp;
  rp.batch = c.B, rp.seqlen_q = c.Sq, rp.seqlen_k = c.Sk, rp.heads_q = c.Hq, rp.heads_kv = c.Hkv, rp.head_dim = c.D;
  rp.causal = c.causal, rp.window_left = c.wl, rp.window_right = c.wr, rp.softcap = c.softcap;
  if (c.alibi) rp.alibi_slopes = slopes_d.data(), rp.alibi_per_batch = c.alibi == 2;
  if (c.p > 0.f) rp.dropout_mask = keep.data(), rp.dropout_p = c.p;
  std::vector<double> ro(hq.size()), rl(size_t(c.B * c.Hq * c.Sq)), rdq(hq.size()), rdk(hk.size()), rdv(hv.size());
  R::forward(rp, hq.data(), hk.data(), hv.data(), ro.data(), rl.data());
  R::backward(rp, hq.data(), hk.data(), hv.data(), hdo.data(), rdq.data(), rdk.data(), rdv.data());
  nv::Shape sh;
  sh.B = c.B, sh.Sq = c.Sq, sh.Sk = c.Sk, sh.Hq = c.Hq, sh.Hkv = c.Hkv, sh.D = c.D;
  sh.scale = 1.f / std::sqrt(float(c.D)), sh.causal = c.causal, sh.wl = c.wl, sh.wr = c.wr, sh.softcap = c.softcap;
  if (c.alibi) sh.slopes = slopes.data(), sh.per_batch = c.alibi == 2;
  if (c.p > 0.f) sh.keep = keep.data(), sh.p = c.p;
  std::vector<float> no, nl, ndq, ndk, ndv;
  nv::forward(sh, c.dt, fl(hq), fl(hk), fl(hv), &no, &nl);
  nv::backward(sh, c.dt, fl(hq), fl(hk), fl(hv), fl(hdo), &ndq, &ndk, &ndv);
  const auto m = R::magnitudes(hq, hk, hv, hdo, c.D, 1.0 / std::sqrt(double(c.D)));
  const double ds = 1.0 / (1.0 - double(c.p));
  const int64_t col = std::max(c.Sk, c.Sq * (c.Hq / c.Hkv));
  EXPECT_TRUE(judged("out", R::judge(c.dt, out.read(), ro, dbl(no), c.Sk, c.D, m.out * ds)));
  EXPECT_TRUE(judged("lse", R::judge_lse(lse.read(), rl, dbl(nl), c.D)));

  Tensor dq = fa_test::make_contiguous(dev, c.dt, {c.B, c.Sq, c.Hq, c.D});
  Tensor dk = fa_test::make_contiguous(dev, c.dt, {c.B, c.Sk, c.Hkv, c.D});
  Tensor dv = fa_test::make_contiguous(dev, c.dt, {c.B, c.Sk, c.Hkv, c.D});
  flashattn::BackwardArgs ba;
  ba.q = q.view(), ba.k = k.view(), ba.v = v.view(), ba.out = out.view(), ba.dout = dout.view(), ba.lse = lse.view();
  ba.dq = dq.view(), ba.dk = dk.view(), ba.dv = dv.view();
  ba.options = fa.options;
  {
    fa_test::CallGuard guard({&q, &k, &v, &out, &dout, &lse}, {&dq, &dk, &dv});
    const flashattn::Status st = flashattn::backward(ba);
    ASSERT_TRUE(st.ok()) << st.message;
    EXPECT_TRUE(guard.wrote_exactly_outputs());
  }
  EXPECT_TRUE(judged("dq", R::judge(c.dt, dq.read(), rdq, dbl(ndq), c.Sk, c.D, m.dq * ds)));
  EXPECT_TRUE(judged("dk", R::judge(c.dt, dk.read(), rdk, dbl(ndk), col, c.D, m.dk * ds)));
  EXPECT_TRUE(judged("dv", R::judge(c.dt, dv.read(), rdv, dbl(ndv), col, c.D, m.dv * ds)));
  if (c.det) {  // deterministic: the same bits again
    const std::vector<double> dq1 = dq.read(), dk1 = dk.read();
    ASSERT_TRUE(flashattn::backward(ba).ok());
    EXPECT_EQ(dq.read(), dq1);
    EXPECT_EQ(dk.read(), dk1);
  }
}

Case make(DType dt, int64_t B, int64_t Sq, int64_t Sk, int64_t Hq, int64_t Hkv) {
  Case c;
  c.dt = dt, c.B = B, c.Sq = Sq, c.Sk = Sk, c.Hq = Hq, c.Hkv = Hkv;
  return c;
}

TEST(CudaVariants, Alibi) {
  if (!have_cuda()) GTEST_SKIP() << "no CUDA device";
  Case c = make(DType::BF16, 2, 113, 267, 4, 2);
  c.alibi = 1;
  run_case(c, 1);
  c.alibi = 2;
  c.causal = true;
  run_case(c, 2);
  Case s = make(DType::F16, 1, 267, 113, 2, 1);  // Sq > Sk: rows without keys
  s.alibi = 2;
  s.causal = true;
  s.softcap = 5.f;
  s.det = true;
  run_case(s, 3);
  Case w = make(DType::BF16, 1, 1030, 1030, 2, 2);
  w.alibi = 1;
  w.wl = 100;
  w.wr = 17;
  run_case(w, 4);
  // The Hopper kernels' other tiles (head dims 64, 176 and 256; on Hopper ALiBi
  // without dropout runs there), GQA, Sq != Sk, one with a softcap too.
  Case d64 = make(DType::F16, 2, 300, 181, 4, 2);
  d64.D = 64;
  d64.alibi = 2;
  d64.causal = true;
  run_case(d64, 5);
  d64.causal = false;  // unmasked head dim 64: the 192-row tile
  d64.dt = DType::BF16;
  run_case(d64, 7);
  Case d256 = make(DType::BF16, 1, 130, 301, 4, 1);
  d256.D = 256;
  d256.alibi = 1;
  d256.softcap = 20.f;
  run_case(d256, 6);
  Case d176 = make(DType::F16, 2, 131, 260, 4, 2);  // the 192 tiles, their last 16 columns zero
  d176.D = 176;
  d176.alibi = 2;
  d176.softcap = 15.f;
  d176.causal = true;
  run_case(d176, 8);
}

TEST(CudaVariants, Dropout) {
  if (!have_cuda()) GTEST_SKIP() << "no CUDA device";
  Case c = make(DType::BF16, 2, 113, 267, 4, 2);
  c.p = 0.25f;
  run_case(c, 11);
  Case s = make(DType::F16, 1, 267, 267, 2, 1);
  s.p = 0.5f;
  s.causal = true;
  s.det = true;
  run_case(s, 12);
  Case w = make(DType::BF16, 1, 300, 500, 2, 2);
  w.p = 0.1f;
  w.wl = 64;
  w.wr = 0;
  w.softcap = 10.f;
  run_case(w, 13);
}

TEST(CudaVariants, AlibiAndDropout) {
  if (!have_cuda()) GTEST_SKIP() << "no CUDA device";
  Case c = make(DType::BF16, 2, 129, 129, 4, 1);
  c.alibi = 2;
  c.p = 0.3f;
  c.causal = true;
  run_case(c, 21);
  Case d = make(DType::F16, 3, 1, 1500, 8, 1);  // a decode shape (the variants bypass the decode tiles)
  d.alibi = 1;
  d.p = 0.2f;
  run_case(d, 22);
}

TEST(CudaVariants, KeepRateBinomial) {
  if (!have_cuda()) GTEST_SKIP() << "no CUDA device";
  Case c = make(DType::BF16, 1, 1000, 1000, 4, 4);
  c.p = 0.3f;
  std::mt19937 g(31);
  const Device dev = Device::CUDA;
  Tensor q = fa_test::make_contiguous(dev, c.dt, {c.B, c.Sq, c.Hq, c.D});
  Tensor k = fa_test::make_contiguous(dev, c.dt, {c.B, c.Sk, c.Hkv, c.D});
  Tensor v = fa_test::make_contiguous(dev, c.dt, {c.B, c.Sk, c.Hkv, c.D});
  q.write(randn(size_t(q.numel()), g));
  k.write(randn(size_t(k.numel()), g));
  v.write(randn(size_t(v.numel()), g));
  Tensor out = fa_test::make_contiguous(dev, c.dt, {c.B, c.Sq, c.Hq, c.D});
  Tensor mask = fa_test::make_contiguous(dev, DType::I32, {c.B, c.Hq, c.Sq, c.Sk});
  flashattn::ForwardArgs fa;
  fa.q = q.view(), fa.k = k.view(), fa.v = v.view(), fa.out = out.view(), fa.dropout_mask = mask.view();
  fa.options = options(c, nullptr);
  ASSERT_TRUE(flashattn::forward(fa).ok());
  double kept = 0;
  for (double z : mask.read()) kept += z;
  const double n = double(c.Hq * c.Sq * c.Sk), keep = 1.0 - double(c.p);
  const double z = (kept - n * keep) / std::sqrt(n * keep * (1.0 - keep));
  EXPECT_LT(std::fabs(z), 5.0) << "kept " << kept << " of " << n;
}

// Varlen: sequence b uses slopes row b and dropout stream b with its own
// lengths; forward and backward against the reference on each sequence.
TEST(CudaVariants, VarlenForwardBackward) {
  if (!have_cuda()) GTEST_SKIP() << "no CUDA device";
  const std::vector<int64_t> lq{37, 0, 200, 5}, lk{50, 9, 170, 3};
  const int64_t B = 4, Hq = 4, Hkv = 2, D = 128;
  const float p_drop = 0.3f;
  const DType dt = DType::BF16;
  std::vector<double> cq{0}, ck{0};
  for (int64_t b = 0; b < B; ++b) cq.push_back(cq.back() + double(lq[size_t(b)])), ck.push_back(ck.back() + double(lk[size_t(b)]));
  const int64_t Tq = int64_t(cq.back()), Tk = int64_t(ck.back());
  const Device dev = Device::CUDA;
  std::mt19937 g(41);
  Tensor q = fa_test::make_contiguous(dev, dt, {Tq, Hq, D}), k = fa_test::make_contiguous(dev, dt, {Tk, Hkv, D}),
         v = fa_test::make_contiguous(dev, dt, {Tk, Hkv, D}), dout = fa_test::make_contiguous(dev, dt, {Tq, Hq, D});
  q.write(randn(size_t(q.numel()), g));
  k.write(randn(size_t(k.numel()), g));
  v.write(randn(size_t(v.numel()), g));
  dout.write(randn(size_t(dout.numel()), g));
  const auto hq = q.read(), hk = k.read(), hv = v.read(), hdo = dout.read();
  std::vector<double> slopes;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) slopes.push_back(0.05 * double(h + 1) + 0.1 * double(b));
  Tensor ts = fa_test::make_contiguous(dev, DType::F32, {B, Hq});
  ts.write(slopes);
  Tensor cuq = fa_test::make_contiguous(dev, DType::I32, {B + 1}), cuk = fa_test::make_contiguous(dev, DType::I32, {B + 1});
  cuq.write(cq);
  cuk.write(ck);
  Tensor out = fa_test::make_contiguous(dev, dt, {Tq, Hq, D}), lse = fa_test::make_contiguous(dev, DType::F32, {Hq, Tq});
  flashattn::Options o;
  o.causal = true;
  o.alibi_slopes = ts.view();
  o.dropout_p = p_drop;
  o.dropout_seed = 77;
  o.dropout_offset = 5;
  flashattn::Varlen vl;
  vl.cu_seqlens_q = cuq.view(), vl.cu_seqlens_k = cuk.view();
  vl.max_seqlen_q = 200, vl.max_seqlen_k = 170;
  flashattn::ForwardArgs fa;
  fa.q = q.view(), fa.k = k.view(), fa.v = v.view(), fa.out = out.view(), fa.lse = lse.view();
  fa.options = o, fa.varlen = vl;
  flashattn::Status st = flashattn::forward(fa);
  ASSERT_TRUE(st.ok()) << st.message;
  Tensor dq = fa_test::make_contiguous(dev, dt, {Tq, Hq, D}), dk = fa_test::make_contiguous(dev, dt, {Tk, Hkv, D}),
         dv = fa_test::make_contiguous(dev, dt, {Tk, Hkv, D});
  flashattn::BackwardArgs ba;
  ba.q = fa.q, ba.k = fa.k, ba.v = fa.v, ba.out = fa.out, ba.lse = fa.lse, ba.dout = dout.view();
  ba.dq = dq.view(), ba.dk = dk.view(), ba.dv = dv.view();
  ba.options = o, ba.varlen = vl;
  st = flashattn::backward(ba);
  ASSERT_TRUE(st.ok()) << st.message;
  const auto go = out.read(), gl = lse.read(), gdq = dq.read(), gdk = dk.read(), gdv = dv.read();
  const flashattn::detail::DropoutRng rng(77, 5, p_drop, Hq);
  for (int64_t b = 0; b < B; ++b) {
    SCOPED_TRACE("sequence " + std::to_string(b));
    const int64_t nq = lq[size_t(b)], nk = lk[size_t(b)], q0 = int64_t(cq[size_t(b)]), k0 = int64_t(ck[size_t(b)]);
    if (nq == 0) continue;
    auto cut = [](const std::vector<double>& x, int64_t r0, int64_t rows, int64_t w) {
      return std::vector<double>(x.begin() + r0 * w, x.begin() + (r0 + rows) * w);
    };
    const auto qb = cut(hq, q0, nq, Hq * D), kb = cut(hk, k0, nk, Hkv * D), vb = cut(hv, k0, nk, Hkv * D),
               db = cut(hdo, q0, nq, Hq * D);
    std::vector<int32_t> keep(size_t(Hq * nq * nk));
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t i = 0; i < nq; ++i)
        for (int64_t j = 0; j < nk; ++j)
          keep[size_t((h * nq + i) * nk + j)] = j <= i + nk - nq && rng.keep(b, h, i, j);
    std::vector<double> sl(slopes.begin() + b * Hq, slopes.begin() + (b + 1) * Hq);
    const std::vector<float> slf = fl(sl);
    R::Problem rp;
    rp.seqlen_q = nq, rp.seqlen_k = nk, rp.heads_q = Hq, rp.heads_kv = Hkv, rp.head_dim = D, rp.causal = true;
    rp.alibi_slopes = sl.data(), rp.dropout_mask = keep.data(), rp.dropout_p = p_drop;
    std::vector<double> ro(qb.size()), rl(size_t(Hq * nq)), rdq(qb.size()), rdk(kb.size()), rdv(vb.size());
    R::forward(rp, qb.data(), kb.data(), vb.data(), ro.data(), rl.data());
    R::backward(rp, qb.data(), kb.data(), vb.data(), db.data(), rdq.data(), rdk.data(), rdv.data());
    nv::Shape sh;
    sh.Sq = nq, sh.Sk = nk, sh.Hq = Hq, sh.Hkv = Hkv, sh.D = D, sh.scale = 1.f / std::sqrt(float(D)), sh.causal = true;
    sh.slopes = slf.data(), sh.keep = keep.data(), sh.p = p_drop;
    std::vector<float> no, nl, ndq, ndk, ndv;
    nv::forward(sh, dt, fl(qb), fl(kb), fl(vb), &no, &nl);
    nv::backward(sh, dt, fl(qb), fl(kb), fl(vb), fl(db), &ndq, &ndk, &ndv);
    std::vector<double> gl_b;
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t i = 0; i < nq; ++i) gl_b.push_back(gl[size_t(h * Tq + q0 + i)]);
    const auto m = R::magnitudes(qb, kb, vb, db, D, 1.0 / std::sqrt(double(D)));
    const double ds = 1.0 / (1.0 - double(p_drop));
    const int64_t col = std::max(nk, nq * (Hq / Hkv));
    EXPECT_TRUE(judged("out", R::judge(dt, cut(go, q0, nq, Hq * D), ro, dbl(no), std::max<int64_t>(nk, 1), D, m.out * ds)));
    EXPECT_TRUE(judged("lse", R::judge_lse(gl_b, rl, dbl(nl), D)));
    EXPECT_TRUE(judged("dq", R::judge(dt, cut(gdq, q0, nq, Hq * D), rdq, dbl(ndq), std::max<int64_t>(nk, 1), D, m.dq * ds)));
    if (nk > 0) {
      EXPECT_TRUE(judged("dk", R::judge(dt, cut(gdk, k0, nk, Hkv * D), rdk, dbl(ndk), col, D, m.dk * ds)));
      EXPECT_TRUE(judged("dv", R::judge(dt, cut(gdv, k0, nk, Hkv * D), rdv, dbl(ndv), col, D, m.dv * ds)));
    }
  }
}

// KV cache (decode): sequence b sees cache rows [0, cache_seqlens[b]),
// slopes row b, dropout stream b.
TEST(CudaVariants, KvCacheForward) {
  if (!have_cuda()) GTEST_SKIP() << "no CUDA device";
  const int64_t B = 3, cap = 700, Sq = 2, Hq = 8, Hkv = 2, D = 128;
  const DType dt = DType::F16;
  const std::vector<double> lens{5, 700, 333};
  const float p_drop = 0.2f;
  const Device dev = Device::CUDA;
  std::mt19937 g(51);
  Tensor q = fa_test::make_contiguous(dev, dt, {B, Sq, Hq, D}), kc = fa_test::make_contiguous(dev, dt, {B, cap, Hkv, D}),
         vc = fa_test::make_contiguous(dev, dt, {B, cap, Hkv, D});
  q.write(randn(size_t(q.numel()), g));
  kc.write(randn(size_t(kc.numel()), g));
  vc.write(randn(size_t(vc.numel()), g));
  const auto hq = q.read(), hk = kc.read(), hv = vc.read();
  std::vector<double> slopes;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) slopes.push_back(0.02 * double(h + 1) + 0.01 * double(b));
  Tensor ts = fa_test::make_contiguous(dev, DType::F32, {B, Hq}), tl = fa_test::make_contiguous(dev, DType::I32, {B});
  ts.write(slopes);
  tl.write(lens);
  Tensor out = fa_test::make_contiguous(dev, dt, {B, Sq, Hq, D}), lse = fa_test::make_lse(dev, B, Hq, Sq);
  flashattn::KvCacheArgs a;
  a.q = q.view(), a.k_cache = kc.view(), a.v_cache = vc.view(), a.cache_seqlens = tl.view();
  a.out = out.view(), a.lse = lse.view();
  a.options.causal = true;
  a.options.alibi_slopes = ts.view();
  a.options.dropout_p = p_drop;
  a.options.dropout_seed = 9;
  const flashattn::Status st = flashattn::forward_kvcache(a);
  ASSERT_TRUE(st.ok()) << st.message;
  const auto go = out.read(), gl = lse.read();
  const flashattn::detail::DropoutRng rng(9, 0, p_drop, Hq);
  for (int64_t b = 0; b < B; ++b) {
    SCOPED_TRACE("sequence " + std::to_string(b));
    const int64_t nk = int64_t(lens[size_t(b)]);
    const std::vector<double> qb(hq.begin() + b * Sq * Hq * D, hq.begin() + (b + 1) * Sq * Hq * D);
    const std::vector<double> kb(hk.begin() + b * cap * Hkv * D, hk.begin() + (b * cap + nk) * Hkv * D);
    const std::vector<double> vb(hv.begin() + b * cap * Hkv * D, hv.begin() + (b * cap + nk) * Hkv * D);
    std::vector<int32_t> keep(size_t(Hq * Sq * nk));
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t i = 0; i < Sq; ++i)
        for (int64_t j = 0; j < nk; ++j) keep[size_t((h * Sq + i) * nk + j)] = j <= i + nk - Sq && rng.keep(b, h, i, j);
    std::vector<double> sl(slopes.begin() + b * Hq, slopes.begin() + (b + 1) * Hq);
    const std::vector<float> slf = fl(sl);
    R::Problem rp;
    rp.seqlen_q = Sq, rp.seqlen_k = nk, rp.heads_q = Hq, rp.heads_kv = Hkv, rp.head_dim = D, rp.causal = true;
    rp.alibi_slopes = sl.data(), rp.dropout_mask = keep.data(), rp.dropout_p = p_drop;
    std::vector<double> ro(qb.size()), rl(size_t(Hq * Sq));
    R::forward(rp, qb.data(), kb.data(), vb.data(), ro.data(), rl.data());
    nv::Shape sh;
    sh.Sq = Sq, sh.Sk = nk, sh.Hq = Hq, sh.Hkv = Hkv, sh.D = D, sh.scale = 1.f / std::sqrt(float(D)), sh.causal = true;
    sh.slopes = slf.data(), sh.keep = keep.data(), sh.p = p_drop;
    std::vector<float> no, nl;
    nv::forward(sh, dt, fl(qb), fl(kb), fl(vb), &no, &nl);
    const std::vector<double> gob(go.begin() + b * Sq * Hq * D, go.begin() + (b + 1) * Sq * Hq * D);
    const std::vector<double> glb(gl.begin() + b * Hq * Sq, gl.begin() + (b + 1) * Hq * Sq);
    const auto m = R::magnitudes(qb, kb, vb, {}, D, 1.0 / std::sqrt(double(D)));
    EXPECT_TRUE(judged("out", R::judge(dt, gob, ro, dbl(no), nk, D, m.out / (1.0 - p_drop))));
    EXPECT_TRUE(judged("lse", R::judge_lse(glb, rl, dbl(nl), D)));
  }
}

// Cost of the variants beside the plain kernels (FA_VARIANTS_TIMING=1 only;
// prints, asserts nothing but success): bf16, head dim 128, batch 2 x 16
// heads x 4096 tokens, not causal; median of 10 timed calls after 3 warm-ups.
TEST(CudaVariants, TimingReport) {
  if (!have_cuda()) GTEST_SKIP() << "no CUDA device";
  const char* e = std::getenv("FA_VARIANTS_TIMING");
  if (e == nullptr || e[0] != '1') GTEST_SKIP() << "set FA_VARIANTS_TIMING=1";
  const int64_t B = 2, S = 4096, H = 16, D = 128;
  const DType dt = DType::BF16;
  const Device dev = Device::CUDA;
  std::mt19937 g(61);
  Tensor q = fa_test::make_contiguous(dev, dt, {B, S, H, D}), k = fa_test::make_contiguous(dev, dt, {B, S, H, D}),
         v = fa_test::make_contiguous(dev, dt, {B, S, H, D}), dout = fa_test::make_contiguous(dev, dt, {B, S, H, D});
  for (Tensor* t : {&q, &k, &v, &dout}) t->write(randn(size_t(t->numel()), g));
  Tensor out = fa_test::make_contiguous(dev, dt, {B, S, H, D}), lse = fa_test::make_lse(dev, B, H, S);
  Tensor dq = fa_test::make_contiguous(dev, dt, {B, S, H, D}), dk = fa_test::make_contiguous(dev, dt, {B, S, H, D}),
         dv = fa_test::make_contiguous(dev, dt, {B, S, H, D});
  Tensor ts = fa_test::make_contiguous(dev, DType::F32, {H});
  ts.write(dbl(slopes_for(make(dt, 1, 1, 1, H, H))));
  auto median_ms = [](auto&& call) {
    std::vector<double> t;
    for (int r = 0; r < 13; ++r) {
      cudaDeviceSynchronize();
      const auto t0 = std::chrono::steady_clock::now();
      EXPECT_TRUE(call());
      cudaDeviceSynchronize();
      if (r >= 3) t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  const double flops = 4.0 * B * H * double(S) * S * D;
  double base_f = 0, base_b = 0;
  for (int variant = 0; variant < 4; ++variant) {
    flashattn::Options o;
    if (variant & 1) o.alibi_slopes = ts.view();
    if (variant & 2) o.dropout_p = 0.1f, o.dropout_seed = 3;
    flashattn::ForwardArgs fa;
    fa.q = q.view(), fa.k = k.view(), fa.v = v.view(), fa.out = out.view(), fa.lse = lse.view(), fa.options = o;
    flashattn::BackwardArgs ba;
    ba.q = q.view(), ba.k = k.view(), ba.v = v.view(), ba.out = out.view(), ba.dout = dout.view(), ba.lse = lse.view();
    ba.dq = dq.view(), ba.dk = dk.view(), ba.dv = dv.view(), ba.options = o;
    const double f = median_ms([&] { return flashattn::forward(fa).ok(); });
    const double b = median_ms([&] { return flashattn::backward(ba).ok(); });
    if (variant == 0) base_f = f, base_b = b;
    static const char* names[] = {"plain", "alibi", "dropout 0.1", "alibi+dropout"};
    std::printf("[timing] %-14s fwd %7.3f ms (%6.1f TFLOP/s, x%.2f)  bwd %7.3f ms (%6.1f TFLOP/s, x%.2f)\n",
                names[variant], f, flops / f * 1e-9, f / base_f, b, 2.5 * flops / b * 1e-9, b / base_b);
  }
}

}  // namespace

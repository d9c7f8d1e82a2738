// The correctness rule is not vacuous: answers with the typical kernel bugs
// (computed exactly, with the fp64 reference on a wrong problem, then rounded
// to the dtype) must fail it at the sizes the sweeps use, while the rounded
// exact answer passes. Needs no kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "reference/reference.hpp"
#include "reference/rule.hpp"
#include "support/check.hpp"
#include "support/half.hpp"
#include "reference/naive_same_dtype.hpp"
#include "support/rng.hpp"

namespace fa_test {
namespace {

using flashattn::reference::Problem;
using Vec = std::vector<double>;

struct Data {
  Problem p;
  DType dt;
  Vec q, k, v, dout;
};

Vec rounded_randn(size_t n, DType dt) {
  Vec v = randn(n, next_seed());
  for (double& x : v) x = round_to(dt, static_cast<float>(x));
  return v;
}

Data make(DType dt, int64_t sq, int64_t sk, int64_t hq, int64_t hkv, int64_t d, bool causal) {
  Data x;
  x.dt = dt;
  x.p.seqlen_q = sq;
  x.p.seqlen_k = sk;
  x.p.heads_q = hq;
  x.p.heads_kv = hkv;
  x.p.head_dim = d;
  x.p.causal = causal;
  x.q = rounded_randn(size_t(sq * hq * d), dt);
  x.k = rounded_randn(size_t(sk * hkv * d), dt);
  x.v = rounded_randn(size_t(sk * hkv * d), dt);
  x.dout = rounded_randn(size_t(sq * hq * d), dt);
  return x;
}

struct Fwd {
  Vec out, lse;
};
Fwd ref_fwd(const Problem& p, const Vec& q, const Vec& k, const Vec& v) {
  Fwd f{Vec(q.size()), Vec(size_t(p.batch * p.heads_q * p.seqlen_q))};
  flashattn::reference::forward(p, q.data(), k.data(), v.data(), f.out.data(), f.lse.data());
  return f;
}
struct Bwd {
  Vec dq, dk, dv;
};
Bwd ref_bwd(const Problem& p, const Vec& q, const Vec& k, const Vec& v, const Vec& dout) {
  Bwd b{Vec(q.size()), Vec(k.size()), Vec(v.size())};
  flashattn::reference::backward(p, q.data(), k.data(), v.data(), dout.data(), b.dq.data(),
                                 b.dk.data(), b.dv.data());
  return b;
}
Vec rounded(Vec x, DType dt) {
  for (double& e : x) e = round_to(dt, static_cast<float>(e));
  return x;
}
Vec as_float(Vec x) {  // LSE is fp32 for every dtype
  for (double& e : x) e = static_cast<float>(e);
  return x;
}
double max_abs(const Vec& x) {
  double m = 0;
  for (double e : x) m = std::max(m, std::abs(e));
  return m;
}

// Checks a candidate forward answer under the rule, as check_forward does.
::testing::AssertionResult fwd_ok(const Data& x, const Fwd& cand) {
  const Fwd ref = ref_fwd(x.p, x.q, x.k, x.v);
  Vec nout, nlse;
  flashattn::reference::naive_forward(x.p, x.dt, x.q, x.k, x.v, &nout, &nlse);
  auto a = within_rule("out", x.dt, cand.out, ref.out, nout, x.p.seqlen_k, x.p.head_dim, max_abs(x.v));
  auto b = lse_within_rule("lse", cand.lse, ref.lse, nlse, x.p.head_dim);
  if (a && b) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << (a ? "" : a.message()) << " " << (b ? "" : b.message());
}

::testing::AssertionResult bwd_ok(const Data& x, const Bwd& cand, const char* which) {
  const Bwd ref = ref_bwd(x.p, x.q, x.k, x.v, x.dout);
  Vec ndq, ndk, ndv;
  flashattn::reference::naive_backward(x.p, x.dt, x.q, x.k, x.v, x.dout, &ndq, &ndk, &ndv);
  const int64_t g = x.p.heads_q / x.p.heads_kv;
  const int64_t col = std::max(x.p.seqlen_k, x.p.seqlen_q * g);
  const double s = 1.0 / std::sqrt(double(x.p.head_dim));
  // Same magnitudes as harness.cpp, from max |element| * sqrt(D) as row norms.
  const double rn = std::sqrt(double(x.p.head_dim));
  const double dp = s * max_abs(x.dout) * rn * max_abs(x.v) * rn;
  const std::string w = which;
  if (w == "dq") return within_rule("dq", x.dt, cand.dq, ref.dq, ndq, x.p.seqlen_k, x.p.head_dim, dp * max_abs(x.k));
  if (w == "dk") return within_rule("dk", x.dt, cand.dk, ref.dk, ndk, col, x.p.head_dim, dp * max_abs(x.q));
  return within_rule("dv", x.dt, cand.dv, ref.dv, ndv, col, x.p.head_dim, max_abs(x.dout));
}

class RuleSensitivity : public ::testing::TestWithParam<DType> {};

TEST_P(RuleSensitivity, RoundedExactAnswerPasses) {
  for (auto [sq, sk] : {std::pair<int64_t, int64_t>{17, 17}, {113, 267}, {267, 113}}) {
    const Data x = make(GetParam(), sq, sk, 4, 2, 64, true);
    Fwd f = ref_fwd(x.p, x.q, x.k, x.v);
    EXPECT_TRUE(fwd_ok(x, {rounded(f.out, x.dt), as_float(f.lse)}));
    const Bwd b = ref_bwd(x.p, x.q, x.k, x.v, x.dout);
    const Bwd r{rounded(b.dq, x.dt), rounded(b.dk, x.dt), rounded(b.dv, x.dt)};
    EXPECT_TRUE(bwd_ok(x, r, "dq"));
    EXPECT_TRUE(bwd_ok(x, r, "dk"));
    EXPECT_TRUE(bwd_ok(x, r, "dv"));
  }
}

// Causal off by one: each row also sees the key right of its diagonal.
TEST_P(RuleSensitivity, CausalOffByOneFails) {
  for (auto [sq, sk] : {std::pair<int64_t, int64_t>{17, 17}, {113, 267}, {267, 113}}) {
    const Data x = make(GetParam(), sq, sk, 4, 2, 64, true);
    Problem bug = x.p;
    bug.causal = false;
    bug.window_right = 1;
    const Fwd f = ref_fwd(bug, x.q, x.k, x.v);
    EXPECT_FALSE(fwd_ok(x, {rounded(f.out, x.dt), as_float(f.lse)})) << sq << "x" << sk;
    const Bwd b = ref_bwd(bug, x.q, x.k, x.v, x.dout);
    const Bwd r{rounded(b.dq, x.dt), rounded(b.dk, x.dt), rounded(b.dv, x.dt)};
    EXPECT_FALSE(bwd_ok(x, r, "dq"));
    EXPECT_FALSE(bwd_ok(x, r, "dk"));
    EXPECT_FALSE(bwd_ok(x, r, "dv"));
  }
}

// The last key of a long row skipped (a tail-tile bug), 1 key of 1030.
TEST_P(RuleSensitivity, DroppedLastKeyFails) {
  const Data x = make(GetParam(), 64, 1030, 1, 1, 64, false);
  Problem bug = x.p;
  bug.seqlen_k = 1029;
  const Vec k(x.k.begin(), x.k.end() - 64), v(x.v.begin(), x.v.end() - 64);
  const Fwd f = ref_fwd(bug, x.q, k, v);
  EXPECT_FALSE(fwd_ok(x, {rounded(f.out, x.dt), as_float(f.lse)}));
  // The output alone (a kernel without LSE output) must fail too.
  const Fwd ref = ref_fwd(x.p, x.q, x.k, x.v);
  EXPECT_FALSE(fwd_ok(x, {rounded(f.out, x.dt), as_float(ref.lse)}));
}

TEST_P(RuleSensitivity, Log2LseFails) {
  const Data x = make(GetParam(), 113, 113, 2, 2, 64, false);
  Fwd f = ref_fwd(x.p, x.q, x.k, x.v);
  f.out = rounded(f.out, x.dt);
  for (double& l : f.lse) l /= std::log(2.0);
  EXPECT_FALSE(fwd_ok(x, f));
}

// A mild softcap (30: scores of size ~3 bend by ~1%) ignored.
TEST_P(RuleSensitivity, IgnoredSoftcapFails) {
  Data x = make(GetParam(), 113, 267, 2, 2, 64, false);
  x.p.softcap = 30.0;
  x.p.scale = 0.5;  // scores of size ~4
  Problem bug = x.p;
  bug.softcap = 0;
  const Fwd f = ref_fwd(bug, x.q, x.k, x.v);
  EXPECT_FALSE(fwd_ok(x, {rounded(f.out, x.dt), as_float(f.lse)}));
  // Backward: forward right but the softcap's derivative ignored equals the
  // uncapped backward at nearly the same P: must fail on dq.
  const Bwd b = ref_bwd(bug, x.q, x.k, x.v, x.dout);
  EXPECT_FALSE(bwd_ok(x, {rounded(b.dq, x.dt), rounded(b.dk, x.dt), rounded(b.dv, x.dt)}, "dq"));
}

// GQA: dK / dV taken from the group's first query head only.
TEST_P(RuleSensitivity, GqaGradientNotSummedFails) {
  const Data x = make(GetParam(), 113, 113, 8, 2, 64, true);
  const int64_t g = 4, D = 64, S = 113;
  Problem mha = x.p;
  mha.heads_q = 2;
  Vec q1(size_t(S * 2 * D)), do1(q1.size());
  for (int64_t s = 0; s < S; ++s)
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t d = 0; d < D; ++d) {
        q1[(s * 2 + h) * D + d] = x.q[(s * 8 + h * g) * D + d];
        do1[(s * 2 + h) * D + d] = x.dout[(s * 8 + h * g) * D + d];
      }
  const Bwd one = ref_bwd(mha, q1, x.k, x.v, do1);
  const Bwd full = ref_bwd(x.p, x.q, x.k, x.v, x.dout);
  EXPECT_FALSE(bwd_ok(x, {rounded(full.dq, x.dt), rounded(one.dk, x.dt), rounded(one.dv, x.dt)}, "dk"));
  EXPECT_FALSE(bwd_ok(x, {rounded(full.dq, x.dt), rounded(one.dk, x.dt), rounded(one.dv, x.dt)}, "dv"));
}

TEST(RuleSensitivityNaN, NaNNeverPasses) {
  Vec ref{1.0, 2.0, 3.0}, out{1.0, NAN, 3.0};
  EXPECT_FALSE(within_rule("x", DType::F16, out, ref, ref, 3, 8, 1.0));
  EXPECT_FALSE(within_rule("x", DType::F32, out, ref, ref, 3, 8, 1.0));
  Vec lse_ref{-INFINITY, 0.5}, lse_out{0.0, 0.5};
  EXPECT_FALSE(lse_within_rule("lse", lse_out, lse_ref, lse_ref, 8));  // -inf row must stay -inf
  lse_out = {-INFINITY, NAN};
  EXPECT_FALSE(lse_within_rule("lse", lse_out, lse_ref, lse_ref, 8));
  lse_out = {-INFINITY, 0.5};
  EXPECT_TRUE(lse_within_rule("lse", lse_out, lse_ref, lse_ref, 8));
  Vec inf_out{1.0, INFINITY, 3.0};
  EXPECT_FALSE(within_rule("x", DType::BF16, inf_out, ref, ref, 3, 8, 1.0));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, RuleSensitivity,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16),
                         [](const ::testing::TestParamInfo<DType>& i) {
                           return std::string(i.param == DType::F32   ? "f32"
                                              : i.param == DType::F16 ? "f16"
                                                                      : "bf16");
                         });

// The fp16/bf16 rule's allowance for the output's own rounding (rule.hpp):
// half an ulp at each element. The H200 case passes; two ulps, or one ulp of
// the largest element on a small element, still fail; fp32 has none.
TEST(CorrectnessRule, HalfUlpOfOutputRoundingOnly) {
  using flashattn::reference::judge;
  const double m = 0;  // no fp32 noise floor
  // The H200 dQ element (bf16 ulp at 1.19 = 2^-7), the naive 0.0025 off elsewhere.
  const Vec ref = {-1.1875278444636244, 0.0123, 0.5};
  const Vec naive = {-1.1875, 0.0123 + 0.0025, 0.5};
  EXPECT_TRUE(judge(DType::BF16, {-1.1796875, 0.0123, 0.5}, ref, naive, 113, 64, m).pass());
  EXPECT_FALSE(judge(DType::BF16, {-1.171875, 0.0123, 0.5}, ref, naive, 113, 64, m).pass());  // 2 ulp
  EXPECT_FALSE(judge(DType::BF16, {-1.1875, 0.0123 + 0.0078, 0.5}, ref, naive, 113, 64, m).pass());
  // fp16 (ulp at 0.5 = 2^-11): exact 0.3 ulp above 0.5, the naive rounded down.
  const double u = std::ldexp(1.0, -11);
  const Vec ref16 = {-1.1875, 0.0123, 0.5 + 0.3 * u}, naive16 = {-1.1875, 0.0123, 0.5};
  EXPECT_TRUE(judge(DType::F16, {-1.1875, 0.0123, 0.5 + u}, ref16, naive16, 113, 64, m).pass());
  EXPECT_FALSE(judge(DType::F16, {-1.1875, 0.0123, 0.5 + 2 * u}, ref16, naive16, 113, 64, m).pass());
  // fp32: judged on |out - ref| itself.
  EXPECT_FALSE(judge(DType::F32, {-1.1796875, 0.0123, 0.5}, ref, {}, 113, 64, m).pass());
}

}  // namespace
}  // namespace fa_test

// Tests of the fp64 oracle itself (src/reference) and of the test support's
// fp16/bf16 conversions. These need neither the kernels nor the API, so they
// guard the ground truth every other test compares against:
//  - the backward is checked against central finite differences of the
//    forward, so kernel gradients that match the reference are right too;
//  - masks, GQA, LSE, softcap and empty rows against hand-derived values.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "reference/reference.hpp"
#include "support/half.hpp"

namespace {

using flashattn::reference::Problem;
using Vec = std::vector<double>;

constexpr double kInf = std::numeric_limits<double>::infinity();

Vec randn(size_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> nd(0.0, 1.0);
  Vec v(n);
  for (double& x : v) x = nd(gen);
  return v;
}

struct Sizes {
  size_t q, kv, o, lse;
};
Sizes sizes(const Problem& p) {
  return {static_cast<size_t>(p.batch * p.seqlen_q * p.heads_q * p.head_dim),
          static_cast<size_t>(p.batch * p.seqlen_k * p.heads_kv * p.head_dim),
          static_cast<size_t>(p.batch * p.seqlen_q * p.heads_q * p.head_dim),
          static_cast<size_t>(p.batch * p.heads_q * p.seqlen_q)};
}

struct Fwd {
  Vec out, lse;
};
Fwd run_fwd(const Problem& p, const Vec& q, const Vec& k, const Vec& v) {
  const Sizes s = sizes(p);
  Fwd f{Vec(s.o, 123.0), Vec(s.lse, 123.0)};
  flashattn::reference::forward(p, q.data(), k.data(), v.data(), f.out.data(), f.lse.data());
  return f;
}

double loss(const Problem& p, const Vec& q, const Vec& k, const Vec& v, const Vec& dout) {
  const Fwd f = run_fwd(p, q, k, v);
  double l = 0.0;
  for (size_t i = 0; i < f.out.size(); ++i) l += f.out[i] * dout[i];
  return l;
}

// ---------------------------------------------------------------------------
// Finite differences: L = sum(out * dout); dL/dx by central differences with
// step h = 1e-5 has truncation error O(h^2 * |L'''|) ~ 1e-10 and round-off
// O(eps64 * |L| / h) ~ 1e-11 for these tiny O(1)-valued problems, so 1e-7
// absolute + 1e-6 relative is loose for a right backward and tight for a
// wrong one (a missing term is O(1e-2..1)).
struct FdCase {
  std::string name;
  Problem p;
  friend void PrintTo(const FdCase& c, std::ostream* os) { *os << c.name; }
};

std::vector<FdCase> fd_cases() {
  std::vector<FdCase> c;
  auto add = [&](std::string name, Problem p) { c.push_back({std::move(name), p}); };
  Problem base;
  base.batch = 2;
  base.seqlen_q = 3;
  base.seqlen_k = 5;
  base.heads_q = 2;
  base.heads_kv = 2;
  base.head_dim = 8;
  add("plain", base);
  Problem p = base;
  p.causal = true;
  add("causal", p);
  p = base;
  p.heads_q = 4;
  p.heads_kv = 2;
  add("gqa2", p);
  p = base;
  p.heads_q = 4;
  p.heads_kv = 1;
  p.causal = true;
  add("mqa4_causal", p);
  p = base;
  p.seqlen_q = 6;
  p.seqlen_k = 3;
  p.causal = true;  // rows 0..2 see nothing
  add("sq_gt_sk_causal_empty_rows", p);
  p = base;
  p.window_left = 1;
  p.window_right = 1;
  add("window_1_1", p);
  p = base;
  p.window_left = 2;
  p.causal = true;
  add("window_left2_causal", p);
  p = base;
  p.softcap = 0.7;  // small cap: tanh well into its non-linear range
  p.scale = 1.3;
  add("softcap_scale", p);
  p = base;
  p.softcap = 2.0;
  p.causal = true;
  p.heads_q = 4;
  p.heads_kv = 1;
  p.window_left = 3;
  add("softcap_causal_window_mqa", p);
  p = base;
  p.seqlen_q = 4;
  p.seqlen_k = 4;
  p.head_dim = 16;
  p.batch = 1;
  add("square_d16", p);
  return c;
}

class ReferenceFiniteDifference : public ::testing::TestWithParam<FdCase> {};

TEST_P(ReferenceFiniteDifference, BackwardMatchesCentralDifferences) {
  const Problem& p = GetParam().p;
  const Sizes s = sizes(p);
  Vec q = randn(s.q, 11), k = randn(s.kv, 12), v = randn(s.kv, 13), dout = randn(s.o, 14);
  Vec dq(s.q, 7.0), dk(s.kv, 7.0), dv(s.kv, 7.0);
  flashattn::reference::backward(p, q.data(), k.data(), v.data(), dout.data(), dq.data(), dk.data(),
                                 dv.data());
  const double h = 1e-5;
  auto check = [&](const char* name, Vec& x, const Vec& grad) {
    double worst = 0.0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double x0 = x[i];
      x[i] = x0 + h;
      const double lp = loss(p, q, k, v, dout);
      x[i] = x0 - h;
      const double lm = loss(p, q, k, v, dout);
      x[i] = x0;
      const double fd = (lp - lm) / (2 * h);
      const double err = std::abs(fd - grad[i]);
      worst = std::max(worst, err);
      EXPECT_LE(err, 1e-7 + 1e-6 * std::abs(fd)) << name << "[" << i << "]: fd " << fd
                                                  << " vs backward " << grad[i];
      EXPECT_TRUE(std::isfinite(grad[i])) << name << "[" << i << "]";
    }
    return worst;
  };
  check("dq", q, dq);
  check("dk", k, dk);
  check("dv", v, dv);
}

INSTANTIATE_TEST_SUITE_P(Reference, ReferenceFiniteDifference, ::testing::ValuesIn(fd_cases()),
                         [](const ::testing::TestParamInfo<FdCase>& i) { return i.param.name; });

// ---------------------------------------------------------------------------
// Hand-derived semantics.

// Which keys each query row sees, read off the forward itself: key j is
// visible to row i iff perturbing v[j] changes out[i].
std::vector<std::vector<int>> observed_visibility(Problem p) {
  p.batch = 1;
  p.heads_q = p.heads_kv = 1;
  p.head_dim = 8;
  const Sizes s = sizes(p);
  Vec q = randn(s.q, 1), k = randn(s.kv, 2), v = randn(s.kv, 3);
  const Fwd base = run_fwd(p, q, k, v);
  std::vector<std::vector<int>> vis(p.seqlen_q, std::vector<int>(p.seqlen_k, 0));
  for (int64_t j = 0; j < p.seqlen_k; ++j) {
    Vec v2 = v;
    v2[j * 8] += 1.0;
    const Fwd f = run_fwd(p, q, k, v2);
    for (int64_t i = 0; i < p.seqlen_q; ++i) vis[i][j] = f.out[i * 8] != base.out[i * 8];
  }
  return vis;
}

std::vector<std::vector<int>> parse(std::initializer_list<const char*> rows) {
  std::vector<std::vector<int>> m;
  for (const char* r : rows) {
    std::vector<int> row;
    for (const char* c = r; *c; ++c) row.push_back(*c == 'x');
    m.push_back(row);
  }
  return m;
}

TEST(ReferenceMask, CausalSquareIsLowerTriangular) {
  Problem p;
  p.seqlen_q = p.seqlen_k = 4;
  p.causal = true;
  EXPECT_EQ(observed_visibility(p), parse({"x...", "xx..", "xxx.", "xxxx"}));
}

TEST(ReferenceMask, CausalIsBottomRightAlignedWhenSkGreater) {
  Problem p;
  p.seqlen_q = 2;
  p.seqlen_k = 5;
  p.causal = true;
  EXPECT_EQ(observed_visibility(p), parse({"xxxx.", "xxxxx"}));
}

TEST(ReferenceMask, CausalWithSqGreaterLeavesTopRowsEmpty) {
  Problem p;
  p.seqlen_q = 5;
  p.seqlen_k = 2;
  p.causal = true;
  EXPECT_EQ(observed_visibility(p), parse({"..", "..", "..", "x.", "xx"}));
}

TEST(ReferenceMask, SlidingWindowBothSides) {
  Problem p;
  p.seqlen_q = p.seqlen_k = 5;
  p.window_left = 1;
  p.window_right = 2;
  EXPECT_EQ(observed_visibility(p), parse({"xxx..", "xxxx.", ".xxxx", "..xxx", "...xx"}));
}

TEST(ReferenceMask, SlidingWindowLeftOnlyWithCausal) {
  Problem p;
  p.seqlen_q = 3;
  p.seqlen_k = 5;  // offset 2
  p.window_left = 1;
  p.causal = true;
  p.window_right = 3;  // causal forces the right side to 0
  EXPECT_EQ(observed_visibility(p), parse({".xx..", "..xx.", "...xx"}));
}

TEST(ReferenceMask, WindowRightOnly) {
  Problem p;
  p.seqlen_q = p.seqlen_k = 4;
  p.window_right = 0;  // same as causal
  EXPECT_EQ(observed_visibility(p), parse({"x...", "xx..", "xxx.", "xxxx"}));
  p.window_right = 1;
  EXPECT_EQ(observed_visibility(p), parse({"xx..", "xxx.", "xxxx", "xxxx"}));
}

TEST(ReferenceMask, WindowThatExcludesEverything) {
  Problem p;
  p.seqlen_q = 4;
  p.seqlen_k = 2;  // offset -2
  p.window_left = 0;
  p.window_right = 0;  // only the diagonal key i - 2
  EXPECT_EQ(observed_visibility(p), parse({"..", "..", "x.", ".x"}));
}

TEST(ReferenceForward, EmptyRowsGiveZeroAndMinusInfinity) {
  Problem p;
  p.seqlen_q = 4;
  p.seqlen_k = 2;
  p.causal = true;
  p.heads_q = p.heads_kv = 1;
  p.head_dim = 8;
  const Sizes s = sizes(p);
  const Fwd f = run_fwd(p, randn(s.q, 1), randn(s.kv, 2), randn(s.kv, 3));
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(f.lse[i], -kInf);
    for (int d = 0; d < 8; ++d) EXPECT_EQ(f.out[i * 8 + d], 0.0);
  }
  for (int i = 2; i < 4; ++i) EXPECT_TRUE(std::isfinite(f.lse[i]));
  Vec dq(s.q, 5.0), dk(s.kv, 5.0), dv(s.kv, 5.0);
  const Vec q = randn(s.q, 1), k = randn(s.kv, 2), v = randn(s.kv, 3), dout = randn(s.o, 4);
  flashattn::reference::backward(p, q.data(), k.data(), v.data(), dout.data(), dq.data(), dk.data(),
                                 dv.data());
  for (int i = 0; i < 16; ++i) EXPECT_EQ(dq[i], 0.0) << i;  // rows 0, 1 see nothing
  for (double x : dq) EXPECT_TRUE(std::isfinite(x));
}

TEST(ReferenceForward, SingleKeyCopiesValueAndLseIsScaledScore) {
  Problem p;
  p.seqlen_q = 3;
  p.seqlen_k = 1;
  p.head_dim = 16;
  const Sizes s = sizes(p);
  const Vec q = randn(s.q, 5), k = randn(s.kv, 6), v = randn(s.kv, 7);
  const Fwd f = run_fwd(p, q, k, v);
  for (int i = 0; i < 3; ++i) {
    double dot = 0;
    for (int d = 0; d < 16; ++d) {
      EXPECT_DOUBLE_EQ(f.out[i * 16 + d], v[d]);
      dot += q[i * 16 + d] * k[d];
    }
    EXPECT_NEAR(f.lse[i], dot / 4.0, 1e-12);  // default scale 1/sqrt(16)
  }
}

TEST(ReferenceForward, MatchesDirectSoftmaxWithScaleAndSoftcap) {
  Problem p;
  p.seqlen_q = 2;
  p.seqlen_k = 3;
  p.head_dim = 8;
  p.scale = 0.9;
  p.softcap = 1.5;
  const Sizes s = sizes(p);
  const Vec q = randn(s.q, 8), k = randn(s.kv, 9), v = randn(s.kv, 10);
  const Fwd f = run_fwd(p, q, k, v);
  for (int i = 0; i < 2; ++i) {
    double sc[3], sum = 0;
    for (int j = 0; j < 3; ++j) {
      double dot = 0;
      for (int d = 0; d < 8; ++d) dot += q[i * 8 + d] * k[j * 8 + d];
      sc[j] = 1.5 * std::tanh(0.9 * dot / 1.5);
      sum += std::exp(sc[j]);
    }
    EXPECT_NEAR(f.lse[i], std::log(sum), 1e-12);
    for (int d = 0; d < 8; ++d) {
      double o = 0;
      for (int j = 0; j < 3; ++j) o += std::exp(sc[j]) / sum * v[j * 8 + d];
      EXPECT_NEAR(f.out[i * 8 + d], o, 1e-12);
    }
  }
}

TEST(ReferenceForward, GqaEqualsRepeatedKvHeads) {
  Problem g;
  g.batch = 2;
  g.seqlen_q = 5;
  g.seqlen_k = 7;
  g.heads_q = 6;
  g.heads_kv = 2;
  g.head_dim = 8;
  g.causal = true;
  Problem m = g;
  m.heads_kv = 6;
  const Sizes sg = sizes(g), sm = sizes(m);
  const Vec q = randn(sg.q, 1), k = randn(sg.kv, 2), v = randn(sg.kv, 3), dout = randn(sg.o, 4);
  // Expand: MHA head h uses GQA kv head h / 3.
  Vec km(sm.kv), vm(sm.kv);
  for (int b = 0; b < 2; ++b)
    for (int s = 0; s < 7; ++s)
      for (int h = 0; h < 6; ++h)
        for (int d = 0; d < 8; ++d) {
          km[((b * 7 + s) * 6 + h) * 8 + d] = k[((b * 7 + s) * 2 + h / 3) * 8 + d];
          vm[((b * 7 + s) * 6 + h) * 8 + d] = v[((b * 7 + s) * 2 + h / 3) * 8 + d];
        }
  const Fwd fg = run_fwd(g, q, k, v), fm = run_fwd(m, q, km, vm);
  EXPECT_EQ(fg.out, fm.out);
  EXPECT_EQ(fg.lse, fm.lse);
  // dK of the GQA problem is the sum of the MHA dK over the group's heads.
  Vec dqg(sg.q), dkg(sg.kv), dvg(sg.kv), dqm(sm.q), dkm(sm.kv), dvm(sm.kv);
  flashattn::reference::backward(g, q.data(), k.data(), v.data(), dout.data(), dqg.data(),
                                 dkg.data(), dvg.data());
  flashattn::reference::backward(m, q.data(), km.data(), vm.data(), dout.data(), dqm.data(),
                                 dkm.data(), dvm.data());
  for (size_t i = 0; i < dqg.size(); ++i) EXPECT_NEAR(dqg[i], dqm[i], 1e-12);
  for (int b = 0; b < 2; ++b)
    for (int s = 0; s < 7; ++s)
      for (int hk = 0; hk < 2; ++hk)
        for (int d = 0; d < 8; ++d) {
          double sk = 0, sv = 0;
          for (int h = hk * 3; h < hk * 3 + 3; ++h) {
            sk += dkm[((b * 7 + s) * 6 + h) * 8 + d];
            sv += dvm[((b * 7 + s) * 6 + h) * 8 + d];
          }
          EXPECT_NEAR(dkg[((b * 7 + s) * 2 + hk) * 8 + d], sk, 1e-12);
          EXPECT_NEAR(dvg[((b * 7 + s) * 2 + hk) * 8 + d], sv, 1e-12);
        }
}

// given_out: D_i = rowsum(dO o O_given). With the exact O the gradients are
// unchanged; with O_i moved by e the shift of D_i is delta_i = dO_i . e, and
// dS_ij = P_ij (dP_ij - D_i) moves by -P_ij delta_i: dQ_i by -scale delta_i
// sum_j P_ij K_j, dK_j by -scale sum_i P_ij delta_i Q_i, dV not at all.
TEST(ReferenceBackward, GivenOutSetsRowsumTerm) {
  Problem p;
  p.batch = 1;
  p.seqlen_q = 5;
  p.seqlen_k = 6;
  p.heads_q = 2;
  p.heads_kv = 1;
  p.head_dim = 4;
  p.causal = true;
  const Sizes s = sizes(p);
  const Vec q = randn(s.q, 11), k = randn(s.kv, 12), v = randn(s.kv, 13), dout = randn(s.o, 14);
  const Fwd f = run_fwd(p, q, k, v);
  Vec dq(s.q), dk(s.kv), dv(s.kv), dq1(s.q), dk1(s.kv), dv1(s.kv), dq2(s.q), dk2(s.kv), dv2(s.kv);
  namespace R = flashattn::reference;
  R::backward(p, q.data(), k.data(), v.data(), dout.data(), dq.data(), dk.data(), dv.data());
  R::backward(p, q.data(), k.data(), v.data(), dout.data(), dq1.data(), dk1.data(), dv1.data(), f.out.data());
  for (size_t i = 0; i < dq.size(); ++i) EXPECT_NEAR(dq1[i], dq[i], 1e-12);
  for (size_t i = 0; i < dk.size(); ++i) EXPECT_NEAR(dk1[i], dk[i], 1e-12);
  const Vec e = randn(s.o, 15);
  Vec moved = f.out;
  for (size_t i = 0; i < moved.size(); ++i) moved[i] += 1e-3 * e[i];
  R::backward(p, q.data(), k.data(), v.data(), dout.data(), dq2.data(), dk2.data(), dv2.data(), moved.data());
  EXPECT_EQ(dv2, dv);
  const int64_t Sq = p.seqlen_q, Sk = p.seqlen_k, H = p.heads_q, D = p.head_dim;
  const double scale = 1.0 / std::sqrt(double(D));
  Vec want_dk = dk;
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < Sq; ++i) {
      const size_t qi = size_t((i * H + h) * D);
      double delta = 0;
      for (int64_t d = 0; d < D; ++d) delta += dout[qi + d] * 1e-3 * e[qi + d];
      // P_ij from the exact forward's LSE (causal, Sk > Sq: keys j <= i + 1).
      const double lse = f.lse[size_t(h * Sq + i)];
      Vec shift(size_t(D), 0.0);
      for (int64_t j = 0; j <= i + Sk - Sq; ++j) {
        double sc = 0;
        for (int64_t d = 0; d < D; ++d) sc += q[qi + d] * k[size_t(j * D + d)];
        const double pij = std::exp(scale * sc - lse);
        for (int64_t d = 0; d < D; ++d) {
          shift[size_t(d)] -= scale * delta * pij * k[size_t(j * D + d)];
          want_dk[size_t(j * D + d)] -= scale * delta * pij * q[qi + d];
        }
      }
      for (int64_t d = 0; d < D; ++d) EXPECT_NEAR(dq2[qi + d], dq[qi + d] + shift[size_t(d)], 1e-12);
    }
  for (size_t i = 0; i < dk.size(); ++i) EXPECT_NEAR(dk2[i], want_dk[i], 1e-12);
}

// ---------------------------------------------------------------------------
// The test support's own fp16/bf16 conversions.

TEST(SupportHalf, Fp16ExactValuesAndRounding) {
  using fa_test::float_to_half;
  using fa_test::half_to_float;
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);  // tie rounds to even = inf
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0x0000);  // tie to even (0)
  EXPECT_EQ(float_to_half(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 ulp -> 2
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie -> even
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(3.0f, -11)), 0x3c02);  // tie -> even (up)
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3c01);
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(std::nanf("")))));
  EXPECT_EQ(float_to_half(INFINITY), 0x7c00);
  // Every fp16 value survives a round trip.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = half_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_half(f), h) << std::hex << h;
  }
}

TEST(SupportHalf, Bf16ExactValuesAndRounding) {
  using fa_test::bf16_to_float;
  using fa_test::float_to_bf16;
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);  // tie -> even
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(3.0f, -8)), 0x3f82);  // tie -> even (up)
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3f81);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const float f = bf16_to_float(static_cast<uint16_t>(b));
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_bf16(f), b) << std::hex << b;
  }
}

}  // namespace

// ALiBi and dropout on the CPU backend (issue 9): the Philox generator
// against published known-answer vectors, the keep rate, the returned mask
// against the documented indexing, its independence of the thread count, and
// forward / backward against the fp64 reference given the kernel's mask
// (the oracle applies the mask it is handed; it has no generator of its own,
// which is why the generator itself is pinned by the known answers).
//
// fp32 only: the variants live in the kernels' fp32 arithmetic, and the
// same-dtype yardstick (naive_same_dtype) that fp16/bf16 comparisons need
// does not implement them.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "common/philox.hpp"
#include "flashattn/flashattn.hpp"
#include "flashattn/ring.hpp"
#include "reference/reference.hpp"
#include "reference/rule.hpp"
#include "support/check.hpp"

namespace {

using flashattn::DType;
using flashattn::ErrorCode;
using flashattn::TensorView;
using flashattn::detail::DropoutRng;
using flashattn::detail::Philox4x32;

// Random123's kat_vectors, "philox4x32 10" lines: counter, key, expected.
TEST(Philox, KnownAnswerVectors) {
  struct Kat {
    uint32_t ctr[4], key[2], out[4];
  } kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& k : kats) {
    uint32_t out[4];
    Philox4x32::generate(k.ctr, k.key, out);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], k.out[i]) << "word " << i;
  }
}

// Dense fp32 problem on the host with everything the tests need.
struct Problem {
  int64_t B = 1, Sq = 1, Sk = 1, Hq = 1, Hkv = 1, D = 16;
  bool causal = false;
  int64_t wl = -1, wr = -1;
  float softcap = 0.0f;
  int alibi = 0;  // 0 off, 1 = [Hq], 2 = [B, Hq]
  float p = 0.0f;
  uint64_t seed = 0x1234567887654321ull, offset = 0;
};

struct Data {
  Problem pb;
  std::vector<float> q, k, v, out, lse, dout, dq, dk, dv, slopes;
  std::vector<int32_t> mask;

  explicit Data(const Problem& p, uint32_t rng_seed) : pb(p) {
    std::mt19937 g(rng_seed);
    std::normal_distribution<float> n(0.0f, 1.0f);
    auto fill = [&](std::vector<float>& x, int64_t count) {
      x.resize(size_t(count));
      for (float& e : x) e = n(g);
    };
    fill(q, p.B * p.Sq * p.Hq * p.D);
    fill(k, p.B * p.Sk * p.Hkv * p.D);
    fill(v, p.B * p.Sk * p.Hkv * p.D);
    fill(dout, p.B * p.Sq * p.Hq * p.D);
    out.assign(q.size(), -7.0f);
    dq.assign(q.size(), -7.0f);
    dk.assign(k.size(), -7.0f);
    dv.assign(v.size(), -7.0f);
    lse.assign(size_t(p.B * p.Hq * p.Sq), -7.0f);
    mask.assign(size_t(p.B * p.Hq * p.Sq * p.Sk), -7);
    // Slopes of the usual geometric family 2^(-8 h / H), times a per-batch factor.
    const int64_t rows = p.alibi == 2 ? p.B : 1;
    for (int64_t b = 0; b < rows; ++b)
      for (int64_t h = 0; h < p.Hq; ++h)
        slopes.push_back(float(std::pow(2.0, -8.0 * double(h + 1) / double(p.Hq)) * (1.0 + 0.5 * double(b))));
  }

  flashattn::Options options() {
    flashattn::Options o;
    o.causal = pb.causal;
    o.window_left = pb.wl;
    o.window_right = pb.wr;
    o.softcap = pb.softcap;
    if (pb.alibi == 1) o.alibi_slopes = TensorView::contiguous(slopes.data(), DType::F32, {pb.Hq});
    if (pb.alibi == 2) o.alibi_slopes = TensorView::contiguous(slopes.data(), DType::F32, {pb.B, pb.Hq});
    o.dropout_p = pb.p;
    o.dropout_seed = pb.seed;
    o.dropout_offset = pb.offset;
    return o;
  }
  flashattn::ForwardArgs fwd(bool with_mask = true) {
    flashattn::ForwardArgs a;
    a.q = TensorView::contiguous(q.data(), DType::F32, {pb.B, pb.Sq, pb.Hq, pb.D});
    a.k = TensorView::contiguous(k.data(), DType::F32, {pb.B, pb.Sk, pb.Hkv, pb.D});
    a.v = TensorView::contiguous(v.data(), DType::F32, {pb.B, pb.Sk, pb.Hkv, pb.D});
    a.out = TensorView::contiguous(out.data(), DType::F32, {pb.B, pb.Sq, pb.Hq, pb.D});
    a.lse = TensorView::contiguous(lse.data(), DType::F32, {pb.B, pb.Hq, pb.Sq});
    if (with_mask && pb.p > 0.0f)
      a.dropout_mask = TensorView::contiguous(mask.data(), DType::I32, {pb.B, pb.Hq, pb.Sq, pb.Sk});
    a.options = options();
    return a;
  }
  flashattn::BackwardArgs bwd() {
    flashattn::BackwardArgs a;
    flashattn::ForwardArgs f = fwd(false);
    a.q = f.q;
    a.k = f.k;
    a.v = f.v;
    a.out = f.out;
    a.lse = f.lse;
    a.dout = TensorView::contiguous(dout.data(), DType::F32, {pb.B, pb.Sq, pb.Hq, pb.D});
    a.dq = TensorView::contiguous(dq.data(), DType::F32, {pb.B, pb.Sq, pb.Hq, pb.D});
    a.dk = TensorView::contiguous(dk.data(), DType::F32, {pb.B, pb.Sk, pb.Hkv, pb.D});
    a.dv = TensorView::contiguous(dv.data(), DType::F32, {pb.B, pb.Sk, pb.Hkv, pb.D});
    a.options = options();
    return a;
  }

  // The oracle's view: fp64 copies, and the kernel's returned mask.
  std::vector<double> slopes_d;
  flashattn::reference::Problem ref_problem() {
    flashattn::reference::Problem r;
    r.batch = pb.B;
    r.seqlen_q = pb.Sq;
    r.seqlen_k = pb.Sk;
    r.heads_q = pb.Hq;
    r.heads_kv = pb.Hkv;
    r.head_dim = pb.D;
    r.causal = pb.causal;
    r.window_left = pb.wl;
    r.window_right = pb.wr;
    r.softcap = pb.softcap;
    slopes_d.assign(slopes.begin(), slopes.end());
    if (pb.alibi) {
      r.alibi_slopes = slopes_d.data();
      r.alibi_per_batch = pb.alibi == 2;
    }
    if (pb.p > 0.0f) {
      r.dropout_mask = mask.data();
      r.dropout_p = pb.p;  // float -> double: the value the kernel got
    }
    return r;
  }
};

std::vector<double> dbl(const std::vector<float>& x) { return {x.begin(), x.end()}; }

// The visibility rule of flashattn.hpp, restated for the mask check.
bool visible(const Problem& p, int64_t i, int64_t j) {
  const int64_t off = p.Sk - p.Sq;
  const int64_t right = p.causal ? 0 : p.wr;
  if (p.wl >= 0 && j < i + off - p.wl) return false;
  if (right >= 0 && j > i + off + right) return false;
  return true;
}

std::string describe(const Problem& p) {
  return "B" + std::to_string(p.B) + " Sq" + std::to_string(p.Sq) + " Sk" + std::to_string(p.Sk) +
         " H" + std::to_string(p.Hq) + "x" + std::to_string(p.Hkv) + " D" + std::to_string(p.D) +
         (p.causal ? " causal" : "") + " win(" + std::to_string(p.wl) + "," + std::to_string(p.wr) +
         ") cap" + std::to_string(p.softcap) + " alibi" + std::to_string(p.alibi) + " p" +
         std::to_string(p.p);
}

// The returned mask is Z of the documented formula on visible entries, 0 elsewhere.
void expect_mask_matches_formula(const Data& d) {
  const Problem& p = d.pb;
  const DropoutRng rng(p.seed, p.offset, p.p, p.Hq);
  int64_t wrong = 0;
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t h = 0; h < p.Hq; ++h)
      for (int64_t i = 0; i < p.Sq; ++i)
        for (int64_t j = 0; j < p.Sk; ++j) {
          const int32_t want = visible(p, i, j) && rng.keep(b, h, i, j) ? 1 : 0;
          wrong += d.mask[size_t(((b * p.Hq + h) * p.Sq + i) * p.Sk + j)] != want;
        }
  EXPECT_EQ(wrong, 0) << describe(p);
}

TEST(Dropout, KeepRateBinomial) {
  // 4 heads x 500 x 500 = 1e6 draws at p = 0.3; z of the kept count.
  Problem p;
  p.Hq = p.Hkv = 4;
  p.Sq = p.Sk = 500;
  p.p = 0.3f;
  Data d(p, 1);
  ASSERT_TRUE(flashattn::forward(d.fwd()).ok());
  double kept = 0;
  for (int32_t z : d.mask) kept += z;
  const double n = double(d.mask.size()), keep = 1.0 - double(p.p);
  const double z = (kept - n * keep) / std::sqrt(n * keep * (1.0 - keep));
  EXPECT_LT(std::fabs(z), 5.0) << "kept " << kept << " of " << n;
  expect_mask_matches_formula(d);
}

TEST(Dropout, MaskIndependentOfThreadsAndFollowsFormula) {
  Problem p;
  p.B = 2;
  p.Hq = 4;
  p.Hkv = 2;
  p.Sq = 133;
  p.Sk = 201;
  p.D = 24;
  p.causal = true;
  p.p = 0.2f;
  p.offset = 0x100000005ull;  // the high word goes into the key
  const int saved = omp_get_max_threads();
  std::vector<int32_t> mask1;
  std::vector<float> out1;
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    Data d(p, 7);
    ASSERT_TRUE(flashattn::forward(d.fwd()).ok());
    if (threads == 1) {
      mask1 = d.mask;
      out1 = d.out;
      expect_mask_matches_formula(d);
    } else {
      EXPECT_EQ(d.mask, mask1) << threads << " threads";
      EXPECT_EQ(d.out, out1) << threads << " threads";
    }
  }
  omp_set_num_threads(saved);
}

TEST(Dropout, SeedAndOffsetChangeTheMaskLseIsUndropped) {
  Problem p;
  p.Hq = p.Hkv = 2;
  p.Sq = 64;
  p.Sk = 96;
  p.p = 0.5f;
  Data a(p, 3), b(p, 3), none(p, 3);
  b.pb.offset = 1;
  none.pb.p = 0.0f;
  ASSERT_TRUE(flashattn::forward(a.fwd()).ok());
  ASSERT_TRUE(flashattn::forward(b.fwd()).ok());
  ASSERT_TRUE(flashattn::forward(none.fwd()).ok());
  EXPECT_NE(a.mask, b.mask);
  EXPECT_NE(a.out, none.out);
  EXPECT_EQ(a.lse, none.lse);  // the same undropped softmax, the same arithmetic
  EXPECT_EQ(a.lse, b.lse);
}

// Forward and backward against the reference, which applies the kernel's mask.
void check_against_reference(const Problem& p, uint32_t seed) {
  SCOPED_TRACE(describe(p));
  Data d(p, seed);
  ASSERT_TRUE(flashattn::forward(d.fwd()).ok());
  if (p.p > 0.0f) expect_mask_matches_formula(d);
  const auto rp = d.ref_problem();
  const auto q = dbl(d.q), k = dbl(d.k), v = dbl(d.v), dO = dbl(d.dout);
  std::vector<double> out(q.size()), lse(d.lse.size());
  flashattn::reference::forward(rp, q.data(), k.data(), v.data(), out.data(), lse.data());
  const double scale = 1.0 / std::sqrt(double(p.D));
  const auto m = flashattn::reference::magnitudes(q, k, v, dO, p.D, scale);
  // Dropout scales kept terms by 1 / (1 - p): so do the magnitudes.
  const double dscale = 1.0 / (1.0 - double(p.p));
  EXPECT_TRUE(fa_test::within_rule("out", DType::F32, dbl(d.out), out, {}, p.Sk, p.D, m.out * dscale));
  EXPECT_TRUE(fa_test::lse_within_rule("lse", dbl(d.lse), lse, {}, p.D));

  ASSERT_TRUE(flashattn::backward(d.bwd()).ok());
  std::vector<double> dq(q.size()), dk(k.size()), dv(v.size());
  flashattn::reference::backward(rp, q.data(), k.data(), v.data(), dO.data(), dq.data(), dk.data(),
                                 dv.data());
  const int64_t col_len = std::max(p.Sk, p.Sq * (p.Hq / p.Hkv));
  EXPECT_TRUE(fa_test::within_rule("dq", DType::F32, dbl(d.dq), dq, {}, p.Sk, p.D, m.dq * dscale));
  EXPECT_TRUE(fa_test::within_rule("dk", DType::F32, dbl(d.dk), dk, {}, col_len, p.D, m.dk * dscale));
  EXPECT_TRUE(fa_test::within_rule("dv", DType::F32, dbl(d.dv), dv, {}, col_len, p.D, m.dv * dscale));
}

Problem base(int64_t Sq, int64_t Sk, int64_t Hq, int64_t Hkv, int64_t D) {
  Problem p;
  p.B = 2;
  p.Sq = Sq;
  p.Sk = Sk;
  p.Hq = Hq;
  p.Hkv = Hkv;
  p.D = D;
  return p;
}

TEST(Alibi, ForwardBackwardAgainstReference) {
  Problem p = base(77, 131, 4, 2, 32);  // odd lengths, Sq != Sk, GQA
  p.alibi = 1;
  check_against_reference(p, 11);
  p.alibi = 2;  // per-batch slopes
  check_against_reference(p, 12);
  p.causal = true;
  check_against_reference(p, 13);
  p.causal = false;
  p.softcap = 5.0f;  // bias after the cap
  check_against_reference(p, 14);
  p.softcap = 0.0f;
  p.wl = 20;
  p.wr = 9;
  check_against_reference(p, 15);
  Problem s = base(150, 40, 2, 2, 64);  // Sq > Sk: rows without keys under causal
  s.alibi = 1;
  s.causal = true;
  check_against_reference(s, 16);
  Problem one = base(1, 300, 8, 1, 64);  // decode-like shape (the decode path is bypassed)
  one.alibi = 2;
  check_against_reference(one, 17);
}

TEST(Dropout, ForwardBackwardAgainstReference) {
  Problem p = base(77, 131, 4, 2, 32);
  p.p = 0.25f;
  check_against_reference(p, 21);
  p.causal = true;
  p.p = 0.5f;
  check_against_reference(p, 22);
  p.causal = false;
  p.wl = 17;
  p.wr = 3;
  p.softcap = 4.0f;
  check_against_reference(p, 23);
  Problem s = base(150, 40, 2, 2, 64);
  s.causal = true;
  s.p = 0.1f;
  check_against_reference(s, 24);
  Problem one = base(3, 200, 6, 3, 40);
  one.p = 0.4f;
  check_against_reference(one, 25);
}

// The comparison above can fail: a backward whose mask differs from the
// forward's (another offset) gives dV outside the rule.
TEST(Dropout, BackwardWithAnotherMaskFailsTheRule) {
  Problem p = base(64, 80, 2, 2, 32);
  p.p = 0.3f;
  Data d(p, 51);
  ASSERT_TRUE(flashattn::forward(d.fwd()).ok());
  auto b = d.bwd();
  b.options.dropout_offset += 1;
  ASSERT_TRUE(flashattn::backward(b).ok());
  const auto rp = d.ref_problem();
  const auto q = dbl(d.q), k = dbl(d.k), v = dbl(d.v), dO = dbl(d.dout);
  std::vector<double> dq(q.size()), dk(k.size()), dv(v.size());
  flashattn::reference::backward(rp, q.data(), k.data(), v.data(), dO.data(), dq.data(), dk.data(),
                                 dv.data());
  const auto m = flashattn::reference::magnitudes(q, k, v, dO, p.D, 1.0 / std::sqrt(double(p.D)));
  EXPECT_FALSE(fa_test::within_rule("dv", DType::F32, dbl(d.dv), dv, {}, p.Sk, p.D, m.dv / 0.7));
}

TEST(AlibiDropout, CombinedAgainstReference) {
  Problem p = base(129, 129, 4, 1, 64);
  p.alibi = 2;
  p.p = 0.3f;
  p.causal = true;
  check_against_reference(p, 31);
  p.causal = false;
  p.softcap = 10.0f;
  p.wl = 40;
  p.wr = 40;
  check_against_reference(p, 32);
}

// Bad input: a clear error naming the argument, outputs untouched.
void expect_refused(Data& d, const flashattn::ForwardArgs& a, ErrorCode code, const std::string& name) {
  const std::vector<float> before = d.out;
  const flashattn::Status st = flashattn::forward(a);
  EXPECT_EQ(st.code, code) << st.message;
  EXPECT_NE(st.message.find(name), std::string::npos) << st.message;
  EXPECT_EQ(d.out, before);
}

TEST(Variants, InvalidArguments) {
  Problem p = base(8, 8, 2, 2, 16);
  p.alibi = 1;
  p.p = 0.1f;
  Data d(p, 41);
  {
    auto a = d.fwd();
    a.options.dropout_p = 1.0f;
    expect_refused(d, a, ErrorCode::InvalidArgument, "options.dropout_p");
    a.options.dropout_p = -0.1f;
    expect_refused(d, a, ErrorCode::InvalidArgument, "options.dropout_p");
    a.options.dropout_p = NAN;
    expect_refused(d, a, ErrorCode::InvalidArgument, "options.dropout_p");
  }
  {
    auto a = d.fwd();
    a.options.alibi_slopes.shape[0] = 3;
    expect_refused(d, a, ErrorCode::InvalidArgument, "options.alibi_slopes");
    a = d.fwd();
    a.options.alibi_slopes.dtype = DType::F16;
    expect_refused(d, a, ErrorCode::InvalidArgument, "options.alibi_slopes");
    a = d.fwd();
    a.options.alibi_slopes.device = flashattn::Device::CUDA;
    expect_refused(d, a, ErrorCode::InvalidArgument, "options.alibi_slopes");
    a = d.fwd();
    a.options.alibi_slopes = TensorView::contiguous(d.slopes.data(), DType::F32, {1, 2, 1});
    expect_refused(d, a, ErrorCode::InvalidArgument, "options.alibi_slopes");
  }
  {
    auto a = d.fwd();
    a.dropout_mask.shape[3] = 7;
    expect_refused(d, a, ErrorCode::InvalidArgument, "dropout_mask");
    a = d.fwd();
    a.dropout_mask.dtype = DType::F32;
    expect_refused(d, a, ErrorCode::InvalidArgument, "dropout_mask");
    a = d.fwd();
    a.options.dropout_p = 0.0f;  // a mask without dropout
    expect_refused(d, a, ErrorCode::InvalidArgument, "dropout_mask");
    a = d.fwd();
    a.dropout_mask.data = d.out.data();  // overlaps an output
    expect_refused(d, a, ErrorCode::InvalidArgument, "dropout_mask");
  }
  {
    // Varlen: slopes are [batch (sequences), heads_q]; no returned mask.
    std::vector<int32_t> cu{0, 8};
    auto a = d.fwd(false);
    a.q = TensorView::contiguous(d.q.data(), DType::F32, {8, 2, 16});
    a.k = TensorView::contiguous(d.k.data(), DType::F32, {8, 2, 16});
    a.v = TensorView::contiguous(d.v.data(), DType::F32, {8, 2, 16});
    a.out = TensorView::contiguous(d.out.data(), DType::F32, {8, 2, 16});
    a.lse = TensorView{};
    a.varlen.cu_seqlens_q = TensorView::contiguous(cu.data(), DType::I32, {2});
    a.varlen.cu_seqlens_k = TensorView::contiguous(cu.data(), DType::I32, {2});
    a.varlen.max_seqlen_q = a.varlen.max_seqlen_k = 8;
    a.options.alibi_slopes = TensorView::contiguous(d.slopes.data(), DType::F32, {2, 2});
    expect_refused(d, a, ErrorCode::InvalidArgument, "options.alibi_slopes");
    a.options.alibi_slopes = TensorView{};
    a.dropout_mask = TensorView::contiguous(d.mask.data(), DType::I32, {1, 2, 8, 8});
    expect_refused(d, a, ErrorCode::InvalidArgument, "dropout_mask");
  }
  {
    auto b = d.bwd();
    b.options.dropout_p = 2.0f;
    const std::vector<float> before = d.dq;
    const flashattn::Status st = flashattn::backward(b);
    EXPECT_EQ(st.code, ErrorCode::InvalidArgument);
    EXPECT_NE(st.message.find("options.dropout_p"), std::string::npos) << st.message;
    EXPECT_EQ(d.dq, before);
  }
}

// The ring sees the keys a chunk at a time: it refuses the variants rather
// than computing chunk-local ALiBi distances and dropout indices.
TEST(Variants, RingRefusesThem) {
  Problem p = base(8, 8, 2, 2, 16);
  p.B = 1;
  p.alibi = 1;
  Data d(p, 61);
  auto transports = flashattn::ring::make_local_ring(1, 5000);
  flashattn::ring::RingForwardArgs a;
  const auto f = d.fwd(false);
  a.q = f.q;
  a.k = f.k;
  a.v = f.v;
  a.out = f.out;
  a.seqlens_k = {p.Sk};
  a.options = d.options();
  const std::vector<float> before = d.out;
  flashattn::Status st = flashattn::ring::ring_forward(a, *transports[0]);
  EXPECT_EQ(st.code, ErrorCode::Unsupported) << st.message;
  EXPECT_NE(st.message.find("options.alibi_slopes"), std::string::npos) << st.message;
  a.options.alibi_slopes = TensorView{};
  a.options.dropout_p = 0.1f;
  st = flashattn::ring::ring_forward(a, *transports[0]);
  EXPECT_EQ(st.code, ErrorCode::Unsupported) << st.message;
  EXPECT_NE(st.message.find("options.dropout_p"), std::string::npos) << st.message;
  EXPECT_EQ(d.out, before);
}

// Varlen: sequence b draws the dropout stream of batch entry b and uses
// slopes row b, with its own lengths (bottom-right aligned per sequence). The
// expected mask comes from the formula (Philox pinned by the known answers),
// the expected results from the reference run on each sequence cut out.
void check_varlen(const std::vector<int64_t>& lq, const std::vector<int64_t>& lk, int64_t Hq,
                  int64_t Hkv, int64_t D, bool causal, float p_drop, bool alibi, uint32_t seed) {
  const int64_t B = int64_t(lq.size());
  std::vector<int32_t> cq{0}, ck{0};
  for (int64_t b = 0; b < B; ++b) {
    cq.push_back(cq.back() + int32_t(lq[size_t(b)]));
    ck.push_back(ck.back() + int32_t(lk[size_t(b)]));
  }
  const int64_t Tq = cq.back(), Tk = ck.back();
  std::mt19937 g(seed);
  std::normal_distribution<float> nd;
  auto randn = [&](int64_t n) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& e : x) e = nd(g);
    return x;
  };
  std::vector<float> q = randn(Tq * Hq * D), k = randn(Tk * Hkv * D), v = randn(Tk * Hkv * D),
                     dout = randn(Tq * Hq * D);
  std::vector<float> out(q.size(), -7.0f), lse(size_t(Hq * Tq), -7.0f), dq(q.size(), -7.0f),
      dk(k.size(), -7.0f), dv(v.size(), -7.0f), slopes;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) slopes.push_back(0.05f * float(h + 1) + 0.3f * float(b));
  flashattn::Options o;
  o.causal = causal;
  if (alibi) o.alibi_slopes = TensorView::contiguous(slopes.data(), DType::F32, {B, Hq});
  o.dropout_p = p_drop;
  o.dropout_seed = 99;
  o.dropout_offset = 7;
  flashattn::Varlen vl;
  vl.cu_seqlens_q = TensorView::contiguous(cq.data(), DType::I32, {B + 1});
  vl.cu_seqlens_k = TensorView::contiguous(ck.data(), DType::I32, {B + 1});
  vl.max_seqlen_q = *std::max_element(lq.begin(), lq.end());
  vl.max_seqlen_k = *std::max_element(lk.begin(), lk.end());
  flashattn::ForwardArgs fa;
  fa.q = TensorView::contiguous(q.data(), DType::F32, {Tq, Hq, D});
  fa.k = TensorView::contiguous(k.data(), DType::F32, {Tk, Hkv, D});
  fa.v = TensorView::contiguous(v.data(), DType::F32, {Tk, Hkv, D});
  fa.out = TensorView::contiguous(out.data(), DType::F32, {Tq, Hq, D});
  fa.lse = TensorView::contiguous(lse.data(), DType::F32, {Hq, Tq});
  fa.options = o;
  fa.varlen = vl;
  flashattn::Status st = flashattn::forward(fa);
  ASSERT_TRUE(st.ok()) << st.message;
  flashattn::BackwardArgs ba;
  ba.q = fa.q;
  ba.k = fa.k;
  ba.v = fa.v;
  ba.out = fa.out;
  ba.lse = fa.lse;
  ba.dout = TensorView::contiguous(dout.data(), DType::F32, {Tq, Hq, D});
  ba.dq = TensorView::contiguous(dq.data(), DType::F32, {Tq, Hq, D});
  ba.dk = TensorView::contiguous(dk.data(), DType::F32, {Tk, Hkv, D});
  ba.dv = TensorView::contiguous(dv.data(), DType::F32, {Tk, Hkv, D});
  ba.options = o;
  ba.varlen = vl;
  st = flashattn::backward(ba);
  ASSERT_TRUE(st.ok()) << st.message;

  std::vector<double> rout(q.size()), rlse(lse.size()), rdq(q.size()), rdk(k.size()), rdv(v.size());
  const DropoutRng rng(99, 7, p_drop, Hq);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t nq = lq[size_t(b)], nk = lk[size_t(b)];
    flashattn::reference::Problem r;
    r.seqlen_q = nq;
    r.seqlen_k = nk;
    r.heads_q = Hq;
    r.heads_kv = Hkv;
    r.head_dim = D;
    r.causal = causal;
    std::vector<double> sl(slopes.begin() + b * Hq, slopes.begin() + (b + 1) * Hq);
    if (alibi) r.alibi_slopes = sl.data();
    std::vector<int32_t> mask(size_t(Hq * nq * nk));
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t i = 0; i < nq; ++i)
        for (int64_t j = 0; j < nk; ++j) mask[size_t((h * nq + i) * nk + j)] = rng.keep(b, h, i, j);
    if (p_drop > 0.0f) {
      r.dropout_mask = mask.data();
      r.dropout_p = p_drop;
    }
    auto cut = [](const std::vector<float>& x, int64_t row0, int64_t rows, int64_t width) {
      return std::vector<double>(x.begin() + row0 * width, x.begin() + (row0 + rows) * width);
    };
    const auto qb = cut(q, cq[size_t(b)], nq, Hq * D), kb = cut(k, ck[size_t(b)], nk, Hkv * D),
               vb = cut(v, ck[size_t(b)], nk, Hkv * D), db = cut(dout, cq[size_t(b)], nq, Hq * D);
    std::vector<double> ob(qb.size()), lb(size_t(Hq * nq)), dqb(qb.size()), dkb(kb.size()), dvb(vb.size());
    flashattn::reference::forward(r, qb.data(), kb.data(), vb.data(), ob.data(), lb.data());
    flashattn::reference::backward(r, qb.data(), kb.data(), vb.data(), db.data(), dqb.data(),
                                   dkb.data(), dvb.data());
    std::copy(ob.begin(), ob.end(), rout.begin() + cq[size_t(b)] * Hq * D);
    std::copy(dqb.begin(), dqb.end(), rdq.begin() + cq[size_t(b)] * Hq * D);
    std::copy(dkb.begin(), dkb.end(), rdk.begin() + ck[size_t(b)] * Hkv * D);
    std::copy(dvb.begin(), dvb.end(), rdv.begin() + ck[size_t(b)] * Hkv * D);
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t i = 0; i < nq; ++i) rlse[size_t(h * Tq + cq[size_t(b)] + i)] = lb[size_t(h * nq + i)];
  }
  const auto m = flashattn::reference::magnitudes(dbl(q), dbl(k), dbl(v), dbl(dout), D,
                                                  1.0 / std::sqrt(double(D)));
  const double ds = 1.0 / (1.0 - double(p_drop));
  const int64_t L = vl.max_seqlen_k, col = std::max(L, vl.max_seqlen_q * (Hq / Hkv));
  EXPECT_TRUE(fa_test::within_rule("out", DType::F32, dbl(out), rout, {}, L, D, m.out * ds));
  EXPECT_TRUE(fa_test::lse_within_rule("lse", dbl(lse), rlse, {}, D));
  EXPECT_TRUE(fa_test::within_rule("dq", DType::F32, dbl(dq), rdq, {}, L, D, m.dq * ds));
  EXPECT_TRUE(fa_test::within_rule("dk", DType::F32, dbl(dk), rdk, {}, col, D, m.dk * ds));
  EXPECT_TRUE(fa_test::within_rule("dv", DType::F32, dbl(dv), rdv, {}, col, D, m.dv * ds));
}

TEST(Varlen, AlibiAndDropoutAgainstReference) {
  check_varlen({37, 0, 70, 5}, {50, 9, 70, 0}, 4, 2, 32, false, 0.0f, true, 71);
  check_varlen({37, 0, 70, 5}, {50, 9, 70, 3}, 4, 2, 32, true, 0.3f, false, 72);
  check_varlen({129, 1, 64}, {100, 130, 64}, 2, 1, 64, true, 0.2f, true, 73);
}

// KV cache (decode shapes; the decode path is bypassed with the variants):
// sequence b sees cache rows [0, cache_seqlens[b]) with Sq new queries at
// the end (bottom-right), slopes row b, dropout stream b.
TEST(KvCache, AlibiAndDropoutAgainstReference) {
  const int64_t B = 3, cap = 96, Sq = 2, Hq = 4, Hkv = 2, D = 32;
  std::vector<int32_t> lens{5, 96, 40};
  std::mt19937 g(81);
  std::normal_distribution<float> nd;
  auto randn = [&](int64_t n) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& e : x) e = nd(g);
    return x;
  };
  std::vector<float> q = randn(B * Sq * Hq * D), kc = randn(B * cap * Hkv * D),
                     vc = randn(B * cap * Hkv * D), out(q.size(), -7.0f), lse(size_t(B * Hq * Sq));
  std::vector<float> slopes;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) slopes.push_back(0.1f * float(h + 1) + 0.05f * float(b));
  const float p_drop = 0.2f;
  flashattn::KvCacheArgs a;
  a.q = TensorView::contiguous(q.data(), DType::F32, {B, Sq, Hq, D});
  a.k_cache = TensorView::contiguous(kc.data(), DType::F32, {B, cap, Hkv, D});
  a.v_cache = TensorView::contiguous(vc.data(), DType::F32, {B, cap, Hkv, D});
  a.cache_seqlens = TensorView::contiguous(lens.data(), DType::I32, {B});
  a.out = TensorView::contiguous(out.data(), DType::F32, {B, Sq, Hq, D});
  a.lse = TensorView::contiguous(lse.data(), DType::F32, {B, Hq, Sq});
  a.options.causal = true;
  a.options.alibi_slopes = TensorView::contiguous(slopes.data(), DType::F32, {B, Hq});
  a.options.dropout_p = p_drop;
  a.options.dropout_seed = 5;
  const flashattn::Status st = flashattn::forward_kvcache(a);
  ASSERT_TRUE(st.ok()) << st.message;
  const DropoutRng rng(5, 0, p_drop, Hq);
  std::vector<double> rout(q.size()), rlse(lse.size());
  for (int64_t b = 0; b < B; ++b) {
    const int64_t nk = lens[size_t(b)];
    flashattn::reference::Problem r;
    r.seqlen_q = Sq;
    r.seqlen_k = nk;
    r.heads_q = Hq;
    r.heads_kv = Hkv;
    r.head_dim = D;
    r.causal = true;
    std::vector<double> sl(slopes.begin() + b * Hq, slopes.begin() + (b + 1) * Hq);
    r.alibi_slopes = sl.data();
    std::vector<int32_t> mask(size_t(Hq * Sq * nk));
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t i = 0; i < Sq; ++i)
        for (int64_t j = 0; j < nk; ++j) mask[size_t((h * Sq + i) * nk + j)] = rng.keep(b, h, i, j);
    r.dropout_mask = mask.data();
    r.dropout_p = p_drop;
    const std::vector<double> qb(q.begin() + b * Sq * Hq * D, q.begin() + (b + 1) * Sq * Hq * D);
    const std::vector<double> kb(kc.begin() + b * cap * Hkv * D, kc.begin() + (b * cap + nk) * Hkv * D);
    const std::vector<double> vb(vc.begin() + b * cap * Hkv * D, vc.begin() + (b * cap + nk) * Hkv * D);
    flashattn::reference::forward(r, qb.data(), kb.data(), vb.data(), rout.data() + b * Sq * Hq * D,
                                  rlse.data() + b * Hq * Sq);
  }
  const auto m = flashattn::reference::magnitudes(dbl(q), dbl(kc), dbl(vc), dbl(q), D,
                                                  1.0 / std::sqrt(double(D)));
  EXPECT_TRUE(fa_test::within_rule("out", DType::F32, dbl(out), rout, {}, cap, D, m.out / (1.0 - p_drop)));
  EXPECT_TRUE(fa_test::lse_within_rule("lse", dbl(lse), rlse, {}, D));
}

}  // namespace


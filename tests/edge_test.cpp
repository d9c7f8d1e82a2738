// Numerical edge cases, on the backend of this binary (CPU here, CUDA in the
// gpu binary): logits of magnitude 1e4, inputs holding NaN / Inf, rows that
// see no key, seqlen 1 and 65536, head dims at the limits.
//
// Non-finite inputs (the semantics, also in README "Reliability"):
//  - Isolation: a NaN/Inf in q, k or v of batch b never reaches another batch
//    or another head: every output there is bit-identical to a run without it
//    (forward and backward).
//  - Forward, inside one (batch, head): a NaN in q row i, or in a k row that
//    row i sees, makes O row i and LSE_i NaN; rows that do not see that key
//    (causal / window) are bit-identical to a clean run. A NaN/Inf in v row j,
//    column d reaches O[i, d] only for rows i that see key j; every other
//    element stays finite and equal to a clean run up to rounding (the
//    kernel may sum that tile another way), and LSE is bit-identical.
//  - The backward gives no within-(batch, head) guarantee (gradients of a NaN
//    loss are NaN in practice), only the isolation above.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "support/check.hpp"
#include "support/harness.hpp"

namespace fa_test {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<DType> dtypes() { return {DType::F32, DType::F16, DType::BF16}; }

// Forward on an instance; false (and a skip) where the CUDA backend does not
// implement the case.
bool run_forward(const Instance& in, bool* skipped) {
  const flashattn::Status st = flashattn::forward(in.fwd_args());
  *skipped = skip_if_unsupported(in.dev, st);
  if (*skipped) return false;
  EXPECT_TRUE(st.ok()) << st.message;
  return st.ok();
}

// Index helpers for dense [B, S, H, D] and [B, H, S].
struct Dims {
  int64_t B, Sq, Sk, Hq, Hkv, D;
  explicit Dims(const Case& c)
      : B(c.batch), Sq(c.seqlen_q), Sk(c.seqlen_k), Hq(c.heads_q), Hkv(c.heads_kv), D(c.head_dim) {}
  int64_t o(int64_t b, int64_t i, int64_t h, int64_t d) const { return ((b * Sq + i) * Hq + h) * D + d; }
  int64_t kv(int64_t b, int64_t j, int64_t h, int64_t d) const { return ((b * Sk + j) * Hkv + h) * D + d; }
  int64_t l(int64_t b, int64_t h, int64_t i) const { return (b * Hq + h) * Sq + i; }
};

Case nan_case(DType dt) {
  Case c;
  c.dtype = dt;
  c.batch = 2;
  c.seqlen_q = c.seqlen_k = 37;  // one KV tile: seen and unseen keys share it
  c.heads_q = 4;
  c.heads_kv = 2;
  c.head_dim = 64;
  c.causal = true;  // query i sees keys 0..i
  return c;
}

bool same(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

class EdgeNonFinite : public ::testing::TestWithParam<std::tuple<Device, DType, int>> {};

// where: 0 = NaN in q, 1 = NaN in k, 2 = NaN in v, 3 = +Inf in v, 4 = -Inf in q.
TEST_P(EdgeNonFinite, ForwardPropagatesOnlyToRowsThatSeeIt) {
  const auto [dev, dt, where] = GetParam();
  if (!device_usable(dev)) GTEST_SKIP() << "no usable device";
  const Case c = nan_case(dt);
  const Dims z(c);
  Instance in = make_instance(dev, c, false);
  bool skipped = false;
  if (!run_forward(in, &skipped)) {
    if (skipped) GTEST_SKIP() << "unsupported on this backend";
    return;
  }
  const std::vector<double> out0 = in.out.read(), lse0 = in.lse.read();

  const int64_t b = 1, row = 20, kvh = 1, col = 3;  // kv head 1 serves query heads 2, 3
  std::vector<double> vals = where == 0 || where == 4 ? in.q : (where == 1 ? in.k : in.v);
  const double bad = where == 3 ? INFINITY : (where == 4 ? -INFINITY : kNaN);
  const int64_t at = where == 0 || where == 4 ? z.o(b, row, 2, col) : z.kv(b, row, kvh, col);
  vals[size_t(at)] = bad;
  const Tensor& t = where == 0 || where == 4 ? in.in.q : (where == 1 ? in.in.k : in.in.v);
  t.write(vals);
  ASSERT_TRUE(run_forward(in, &skipped));
  const std::vector<double> out = in.out.read(), lse = in.lse.read();
  double vmax = 0;
  for (double x : in.v) vmax = std::max(vmax, std::fabs(x));
  const double ulp = dt == DType::F32 ? std::ldexp(1.0, -23) : std::ldexp(1.0, dt == DType::F16 ? -10 : -7);
  const double tol = 4 * ulp * vmax;

  for (int64_t bb = 0; bb < z.B; ++bb)
    for (int64_t h = 0; h < z.Hq; ++h)
      for (int64_t i = 0; i < z.Sq; ++i) {
        // Which rows the bad value reaches, and how.
        bool row_nan = false, col_bad = false;
        if (bb == b) {
          if (where == 0 || where == 4) row_nan = h == 2 && i == row;
          if (where == 1) row_nan = h / 2 == kvh && i >= row;
          if (where == 2 || where == 3) col_bad = h / 2 == kvh && i >= row;
        }
        const std::string at_s = "b" + std::to_string(bb) + " h" + std::to_string(h) + " i" +
                                 std::to_string(i);
        const double l = lse[size_t(z.l(bb, h, i))];
        if (row_nan) {
          EXPECT_TRUE(std::isnan(l)) << "LSE should be NaN at " << at_s << ", got " << l;
          for (int64_t d = 0; d < z.D; ++d)
            ASSERT_TRUE(std::isnan(out[size_t(z.o(bb, i, h, d))])) << "O not NaN at " << at_s << " d" << d;
          continue;
        }
        ASSERT_TRUE(same(l, lse0[size_t(z.l(bb, h, i))])) << "LSE changed at " << at_s;
        for (int64_t d = 0; d < z.D; ++d) {
          const double o = out[size_t(z.o(bb, i, h, d))];
          if (col_bad && d == col) {
            ASSERT_FALSE(std::isfinite(o)) << "O[" << at_s << ", " << d << "] should be non-finite";
            if (where == 2) ASSERT_TRUE(std::isnan(o)) << at_s;
          } else if (bb == b && h / 2 == kvh && (where == 2 || where == 3)) {
            // Same tiles as the bad V value: the kernel may take another
            // summation path there (CPU: P == 0 terms skipped), so equal to
            // the clean run up to rounding, and finite.
            const double o0 = out0[size_t(z.o(bb, i, h, d))];
            // CUDA: a masked P is an exact 0 inside the tensor-core P·V, and
            // 0·Inf = NaN there, so a non-finite V value also reaches the rows
            // of its query tile that cannot see it (as in flash-attn); only
            // its own column, and never another head or batch (checked below).
            if (dev == Device::CUDA && d == col && !std::isfinite(o)) continue;
            ASSERT_TRUE(std::isfinite(o)) << "O[" << at_s << ", " << d << "] reached by a V value it cannot see";
            ASSERT_NEAR(o, o0, tol) << "O changed at " << at_s << " d" << d;
          } else {
            ASSERT_TRUE(same(o, out0[size_t(z.o(bb, i, h, d))]))
                << "O changed at " << at_s << " d" << d << ": " << o << " vs "
                << out0[size_t(z.o(bb, i, h, d))];
          }
        }
      }
}

// Backward: a NaN in batch 1 leaves every gradient of batch 0 bit-identical.
TEST_P(EdgeNonFinite, BackwardIsolatesBatches) {
  const auto [dev, dt, where] = GetParam();
  if (!device_usable(dev)) GTEST_SKIP() << "no usable device";
  Case c = nan_case(dt);
  c.causal = where % 2 == 0;
  const Dims z(c);
  Instance in = make_instance(dev, c, true);
  auto grads = [&](bool* ok) {
    flashattn::Status st = flashattn::forward(in.fwd_args());
    if (st.ok()) st = flashattn::backward(in.bwd_args());
    *ok = st.ok();
    return std::vector<std::vector<double>>{in.grad.q.read(), in.grad.k.read(), in.grad.v.read()};
  };
  bool ok = false;
  const auto clean = grads(&ok);
  if (!ok && dev == Device::CUDA) GTEST_SKIP() << "unsupported on this backend";
  ASSERT_TRUE(ok);
  std::vector<double> vals = where == 0 || where == 4 ? in.q : (where == 1 ? in.k : in.v);
  vals[size_t(where == 0 || where == 4 ? z.o(1, 20, 2, 3) : z.kv(1, 20, 1, 3))] =
      where == 3 ? INFINITY : (where == 4 ? -INFINITY : kNaN);
  (where == 0 || where == 4 ? in.in.q : (where == 1 ? in.in.k : in.in.v)).write(vals);
  const auto dirty = grads(&ok);
  ASSERT_TRUE(ok);
  const char* names[] = {"dq", "dk", "dv"};
  for (int g = 0; g < 3; ++g) {
    const size_t half = clean[size_t(g)].size() / 2;  // batch 0 is the first half
    bool any_bad_b1 = false;
    for (size_t e = 0; e < clean[size_t(g)].size(); ++e) {
      if (e < half) {
        ASSERT_TRUE(same(dirty[size_t(g)][e], clean[size_t(g)][e])) << names[g] << " batch 0 changed at " << e;
      } else {
        any_bad_b1 = any_bad_b1 || !std::isfinite(dirty[size_t(g)][e]);
      }
    }
    if (g == 0) EXPECT_TRUE(any_bad_b1) << "the NaN/Inf should reach some dq of batch 1";
  }
}

std::string nonfinite_name(const ::testing::TestParamInfo<std::tuple<Device, DType, int>>& info) {
  static const char* w[] = {"nan_q", "nan_k", "nan_v", "inf_v", "neginf_q"};
  return std::string(device_name(std::get<0>(info.param))) + "_" +
         dtype_tag(std::get<1>(info.param)) + "_" + w[std::get<2>(info.param)];
}
INSTANTIATE_TEST_SUITE_P(Edge, EdgeNonFinite,
                         ::testing::Combine(::testing::ValuesIn(test_devices()),
                                            ::testing::ValuesIn(dtypes()),
                                            ::testing::Values(0, 1, 2, 3, 4)),
                         nonfinite_name);

// ---- logits of magnitude 1e4 ---------------------------------------------------

// One batch, one KV head: the logit tests' shapes.
Case logits_case(DType dt, int64_t seqlen_q, int64_t seqlen_k, int64_t heads_q, int64_t head_dim) {
  Case c;
  c.dtype = dt;
  c.batch = 1;
  c.seqlen_q = seqlen_q;
  c.seqlen_k = seqlen_k;
  c.heads_q = heads_q;
  c.heads_kv = 1;
  c.head_dim = head_dim;
  return c;
}

// Writes the edited in.q and in.k to the tensors and reads back what was
// stored (rounded to the dtype): the reference takes those values.
void store_qk(Instance& in) {
  in.in.q.write(in.q);
  in.in.k.write(in.k);
  in.q = in.in.q.read();
  in.k = in.in.k.read();
}

// Every logit is +-1e4 plus an O(1) part: q[.., 0] = +-100 and k[.., 0] = 100
// (exact in every dtype), scale 1. Softmax is shift-invariant, so the answer
// is that of the O(1) part alone; a kernel that exponentiates before
// subtracting the row max overflows (+1e4) or underflows to 0/0 (-1e4).
class EdgeLargeLogits : public ::testing::TestWithParam<std::tuple<Device, DType, bool>> {};

TEST_P(EdgeLargeLogits, NoOverflowAndMatchesReference) {
  const auto [dev, dt, negative] = GetParam();
  if (!device_usable(dev)) GTEST_SKIP() << "no usable device";
  Case c = logits_case(dt, 45, 77, 2, 64);
  c.scale = 1.0f / 8.0f;  // the O(1) part: 63 products of N(0,1), / 8
  const bool backward = dt != DType::F32;
  Instance in = make_instance(dev, c, backward);
  const double big = std::sqrt(1e4 * 8.0);  // (big * big) * scale = 1e4
  for (int64_t r = 0; r < int64_t(in.q.size()) / c.head_dim; ++r) in.q[size_t(r * c.head_dim)] = negative ? -big : big;
  for (int64_t r = 0; r < int64_t(in.k.size()) / c.head_dim; ++r) in.k[size_t(r * c.head_dim)] = big;
  store_qk(in);  // big rounds in fp16 / bf16: still ~1e4
  bool skipped = false;
  if (!run_forward(in, &skipped)) {
    if (skipped) GTEST_SKIP() << "unsupported on this backend";
    return;
  }
  const Expected e = expected_forward(in);
  const std::vector<double> out = in.out.read(), lse = in.lse.read();
  for (double x : out) ASSERT_TRUE(std::isfinite(x));
  for (double x : lse) ASSERT_TRUE(std::isfinite(x));
  if (dt == DType::F32) {
    // No naive yardstick in fp32: the logits themselves carry fp32 rounding
    // of ~eps * 1e4 (4 ulps of slack), which moves each P by as much.
    const double eps = std::ldexp(1.0, -23), slack = 4 * eps * 1e4;
    double vmax = 0;
    for (double x : in.v) vmax = std::max(vmax, std::fabs(x));
    for (size_t i = 0; i < out.size(); ++i)
      ASSERT_NEAR(out[i], e.out[i], 2 * slack * vmax) << "out " << i;
    for (size_t i = 0; i < lse.size(); ++i) ASSERT_NEAR(lse[i], e.lse[i], slack) << "lse " << i;
    return;
  }
  EXPECT_TRUE(within_rule("out", dt, out, e.out, e.naive_out, c.seqlen_k, c.head_dim, magnitudes(in).out));
  EXPECT_TRUE(lse_within_rule("lse", lse, e.lse, e.naive_lse, c.head_dim));
  // Backward through the same logits.
  const flashattn::Status st = flashattn::backward(in.bwd_args());
  if (skip_if_unsupported(dev, st)) return;
  ASSERT_TRUE(st.ok()) << st.message;
  const ExpectedGrads g = expected_backward(in);
  const Magnitudes m = magnitudes(in);
  const int64_t col = std::max(c.seqlen_k, c.seqlen_q * c.heads_q / c.heads_kv);
  EXPECT_TRUE(within_rule("dq", dt, in.grad.q.read(), g.dq, g.naive_dq, c.seqlen_k, c.head_dim, m.dq));
  EXPECT_TRUE(within_rule("dk", dt, in.grad.k.read(), g.dk, g.naive_dk, col, c.head_dim, m.dk));
  EXPECT_TRUE(within_rule("dv", dt, in.grad.v.read(), g.dv, g.naive_dv, col, c.head_dim, m.dv));
}

std::string logits_name(const ::testing::TestParamInfo<std::tuple<Device, DType, bool>>& info) {
  return std::string(device_name(std::get<0>(info.param))) + "_" + dtype_tag(std::get<1>(info.param)) +
         (std::get<2>(info.param) ? "_minus1e4" : "_plus1e4");
}
INSTANTIATE_TEST_SUITE_P(Edge, EdgeLargeLogits,
                         ::testing::Combine(::testing::ValuesIn(test_devices()),
                                            ::testing::ValuesIn(dtypes()), ::testing::Bool()),
                         logits_name);

// ---- logits that climb key tile after key tile ---------------------------------

// The kernels visit key tiles from the last; here the logits of most rows
// climb by `climb` log2 units per 128 keys in that order: q[i, 0] = a in
// rows 8..23 of every 32 (others 0: their maxima stay put, and a GPU
// thread's two rows, i and i + 8, move apart) and k[j, 0] = -b * j. Online
// softmaxes that keep a row's reference max while it stays within 2^8 of
// the true one (the Hopper forward's lazy rescale and its first pass
// without the max, which must fall back to the full step here) are checked
// on both sides of the overflow of that first pass: 20 log2 units per tile
// (P up to 2^20 against the kept reference) and 400 (exp2 overflows to
// +inf). Head dims 64, 192 and 256 (the Hopper kernels that take that first
// pass by default: 192-row tiles at 64, 128-row at 192 and 256) and 128
// with more than 192 query rows (the three-warpgroup tile, which takes it
// where a build turns it on: FLASHATTN_SM90_EXP_FIRST=1, with the forward
// tests forcing that tile by FLASHATTN_SM90_HD128_BLOCKM=192). Key tiles of
// 64 climb half as far, still past the 2^8 lag. 16-bit inputs (fp32 logits
// this large carry more rounding than fp32's rule allows: EdgeLargeLogits).
class EdgeClimbingLogits : public ::testing::TestWithParam<std::tuple<Device, DType, int, int>> {};

TEST_P(EdgeClimbingLogits, MatchesReference) {
  const auto [dev, dt, climb, head_dim] = GetParam();
  if (!device_usable(dev)) GTEST_SKIP() << "no usable device";
  const Case c = logits_case(dt, 203, 645, 3, head_dim);  // six key tiles of 128, the first one partial
  Instance in = make_instance(dev, c, false);
  const double scale_log2 = 1.4426950408889634 / std::sqrt(double(c.head_dim));
  const double a = climb > 100 ? 16.0 : 4.0, b = climb / (a * 128.0 * scale_log2);
  for (int64_t r = 0; r < int64_t(in.q.size()) / c.head_dim; ++r) {
    const int64_t i = (r / c.heads_q) % c.seqlen_q;
    in.q[size_t(r * c.head_dim)] = (i / 8) % 4 == 1 || (i / 8) % 4 == 2 ? a : 0.0;
  }
  for (int64_t r = 0; r < int64_t(in.k.size()) / c.head_dim; ++r)
    in.k[size_t(r * c.head_dim)] = -b * static_cast<double>((r / c.heads_kv) % c.seqlen_k);
  store_qk(in);
  bool skipped = false;
  if (!run_forward(in, &skipped)) {
    if (skipped) GTEST_SKIP() << "unsupported on this backend";
    return;
  }
  const Expected e = expected_forward(in);
  EXPECT_TRUE(within_rule("out", dt, in.out.read(), e.out, e.naive_out, c.seqlen_k, c.head_dim, magnitudes(in).out));
  EXPECT_TRUE(lse_within_rule("lse", in.lse.read(), e.lse, e.naive_lse, c.head_dim));
}

INSTANTIATE_TEST_SUITE_P(Edge, EdgeClimbingLogits,
                         ::testing::Combine(::testing::ValuesIn(test_devices()),
                                            ::testing::Values(DType::F16, DType::BF16),
                                            ::testing::Values(20, 400), ::testing::Values(64, 128, 192, 256)),
                         [](const ::testing::TestParamInfo<std::tuple<Device, DType, int, int>>& info) {
                           return std::string(device_name(std::get<0>(info.param))) + "_" +
                                  dtype_tag(std::get<1>(info.param)) + "_climb" +
                                  std::to_string(std::get<2>(info.param)) + "_d" +
                                  std::to_string(std::get<3>(info.param));
                         });

// ---- rows that see no key, lengths 1 and 65536, head dims at the limits -------

class EdgeShapes : public ::testing::TestWithParam<std::tuple<Device, DType>> {};

// Causal with Sq > Sk: the first Sq - Sk rows see nothing (O = 0, LSE = -inf,
// dq = 0); the harness compares every row, these included, with the reference
// (0 / -inf there). Then the other extreme: a window of 0 + 0, one key per row.
TEST_P(EdgeShapes, RowsWithoutKeys) {
  const auto [dev, dt] = GetParam();
  Case c;
  c.dtype = dt;
  c.batch = 2;
  c.seqlen_q = 70;
  c.seqlen_k = 19;
  c.heads_q = 2;
  c.heads_kv = 2;
  c.head_dim = 64;
  c.causal = true;
  check_forward(dev, c);
  if (HasFatalFailure() || IsSkipped()) return;
  check_backward(dev, c);
  if (HasFatalFailure() || IsSkipped()) return;
  c.causal = false;
  c.seqlen_q = c.seqlen_k = 40;
  c.window_left = 0;
  c.window_right = 0;  // each row sees exactly its own diagonal key
  check_forward(dev, c);
}

TEST_P(EdgeShapes, SeqlenOne) {
  const auto [dev, dt] = GetParam();
  Case c;
  c.dtype = dt;
  c.batch = 3;
  c.heads_q = 4;
  c.heads_kv = 1;
  c.head_dim = 128;
  check_forward(dev, c);  // Sq = Sk = 1
  if (HasFatalFailure() || IsSkipped()) return;
  check_backward(dev, c);
  if (HasFatalFailure() || IsSkipped()) return;
  c.seqlen_q = 1;
  c.seqlen_k = 300;
  c.causal = true;  // decode: the one query sees every key
  check_backward(dev, c);
}

// A few queries against 65536 keys (a long prefill's last rows / a decode
// against a long cache), forward and backward, every row against the fp64
// reference.
TEST_P(EdgeShapes, KeysBeyond65536) {
  const auto [dev, dt] = GetParam();
  Case c;
  c.dtype = dt;
  c.seqlen_q = 3;
  c.seqlen_k = 65536 + 77;
  c.heads_q = 2;
  c.heads_kv = 1;
  c.head_dim = 64;
  c.causal = true;
  check_forward(dev, c);
  if (HasFatalFailure() || IsSkipped()) return;
  check_backward(dev, c);
}

// Deterministic backward (its own dQ path on CUDA) on small odd shapes, GQA,
// causal and Sq != Sk both ways, against the reference; small enough for the
// compute-sanitizer runs (bench/gpu/h200_run.sh).
TEST_P(EdgeShapes, DeterministicBackwardSmall) {
  const auto [dev, dt] = GetParam();
  Case c;
  c.dtype = dt;
  c.batch = 2;
  c.heads_q = 4;
  c.heads_kv = 2;
  c.head_dim = 64;
  c.causal = true;
  c.deterministic = true;
  for (auto [sq, sk] : {std::pair<int64_t, int64_t>{113, 17}, {17, 113}}) {
    c.seqlen_q = sq;
    c.seqlen_k = sk;
    check_backward(dev, c);
    if (HasFatalFailure() || IsSkipped()) return;
  }
}

// Backward over several key tiles per query tile at head dims 64, 128 and
// 256 (on the H200 the sm90 kernels: 64-row query tiles at 128 and 256,
// 128-row at 64; 128-key tiles, 64-key at 256), against the reference:
// non-causal Sq < Sk, causal with a left window Sq > Sk. In deterministic
// mode (the sm90 kernel's adds to each dQ tile wait for the key tiles before
// them; head dim 256 runs the sm80 kernels) also the same bits when run again.
void check_multi_tile_backward(Device dev, DType dt, int64_t head_dim, bool deterministic,
                               int64_t heads_q = 4, int64_t heads_kv = 2) {
  Case c;
  c.dtype = dt;
  c.batch = 2;
  c.heads_q = heads_q;
  c.heads_kv = heads_kv;
  c.head_dim = head_dim;
  c.deterministic = deterministic;
  struct Shape {
    int64_t sq, sk;
    bool causal;
    int64_t left;
  };
  for (const Shape& sh : {Shape{113, 1030, false, -1}, Shape{300, 260, true, 200}}) {
    c.seqlen_q = sh.sq;
    c.seqlen_k = sh.sk;
    c.causal = sh.causal;
    c.window_left = sh.left;
    SCOPED_TRACE("sq " + std::to_string(sh.sq) + " sk " + std::to_string(sh.sk));
    check_backward(dev, c);
    if (testing::Test::HasFatalFailure() || testing::Test::IsSkipped()) return;
    if (!deterministic) continue;
    Instance in = make_instance(dev, c, true);
    ASSERT_TRUE(flashattn::forward(in.fwd_args()).ok());
    ASSERT_TRUE(flashattn::backward(in.bwd_args()).ok());
    const std::vector<uint8_t> dq = in.grad.q.buf->to_host(), dk = in.grad.k.buf->to_host();
    ASSERT_TRUE(flashattn::backward(in.bwd_args()).ok());
    EXPECT_TRUE(dq == in.grad.q.buf->to_host()) << "dq differs between runs";
    EXPECT_TRUE(dk == in.grad.k.buf->to_host()) << "dk differs between runs";
  }
}

TEST_P(EdgeShapes, DeterministicBackwardHeadDim128) {
  const auto [dev, dt] = GetParam();
  check_multi_tile_backward(dev, dt, 128, true);
}

TEST_P(EdgeShapes, DeterministicBackwardHeadDim64) {
  const auto [dev, dt] = GetParam();
  check_multi_tile_backward(dev, dt, 64, true);
}

TEST_P(EdgeShapes, DeterministicBackwardHeadDim256) {
  const auto [dev, dt] = GetParam();
  check_multi_tile_backward(dev, dt, 256, true);
}

// Four kv heads: the sm90 kernels' deterministic grid then interleaves four
// heads (two with 2 kv heads above; bwd_sm90.cu det_interleave_log2), so a
// key tile's CTA waits for one four blocks before it.
TEST_P(EdgeShapes, DeterministicBackwardFourKvHeads) {
  const auto [dev, dt] = GetParam();
  check_multi_tile_backward(dev, dt, 128, true, 8, 4);
  if (testing::Test::HasFatalFailure() || testing::Test::IsSkipped()) return;
  check_multi_tile_backward(dev, dt, 256, true, 8, 4);
}

// Eight kv heads: without a mask bound (the first shape above) and with
// short sequences the deterministic grid interleaves eight heads
// (det_interleave_log2), so a key tile's CTA waits for one eight blocks
// before it; the causal shape interleaves four. A property of the sm90 grid:
// the CPU's fixed-order backward has FourKvHeads above (and this would add
// minutes to the sanitizer stage).
TEST_P(EdgeShapes, DeterministicBackwardEightKvHeads) {
  const auto [dev, dt] = GetParam();
  if (dev == Device::CPU) GTEST_SKIP() << "tests the CUDA grid's head interleave";
  check_multi_tile_backward(dev, dt, 64, true, 16, 8);
  if (testing::Test::HasFatalFailure() || testing::Test::IsSkipped()) return;
  check_multi_tile_backward(dev, dt, 256, true, 8, 8);
}

// Six and ten kv heads: the deterministic grid interleaves four and eight
// (powers of two up to heads_kv, bwd_sm90.cu), so its last group of heads is
// partly empty and those CTAs leave at once. The sm90 grid's property, as
// above.
TEST_P(EdgeShapes, DeterministicBackwardUnevenKvHeads) {
  const auto [dev, dt] = GetParam();
  if (dev == Device::CPU) GTEST_SKIP() << "tests the CUDA grid's head interleave";
  check_multi_tile_backward(dev, dt, 64, true, 12, 6);
  if (testing::Test::HasFatalFailure() || testing::Test::IsSkipped()) return;
  check_multi_tile_backward(dev, dt, 192, true, 10, 10);
}

TEST_P(EdgeShapes, BackwardHeadDim256MultiTile) {
  const auto [dev, dt] = GetParam();
  check_multi_tile_backward(dev, dt, 256, false);
}

// Head dim 192 on the Hopper backward's own tile (its consumer warpgroups
// take 128 and 64 columns of dK, dV and dQ; bwd_kernel_split.cuh), and 160
// on it with 32 zero columns; default and deterministic (four kv heads
// interleaved at 160). The CPU runs head dim 192 in the Large sweep.
TEST_P(EdgeShapes, BackwardHeadDim192MultiTile) {
  const auto [dev, dt] = GetParam();
  if (dev == Device::CPU) GTEST_SKIP() << "tests the CUDA backward's head-dim-192 tile";
  for (bool det : {false, true}) {
    SCOPED_TRACE(det ? "deterministic" : "default");
    check_multi_tile_backward(dev, dt, 192, det);
    if (testing::Test::HasFatalFailure() || testing::Test::IsSkipped()) return;
  }
  check_multi_tile_backward(dev, dt, 160, true, 8, 4);
}

// Head dims at the limits: 1, 4, 12 (not multiples of 8: padded copies), 8
// and 256 run (both backends where supported); 0 and 264 are refused, naming
// head_dim, with the outputs untouched.
TEST_P(EdgeShapes, HeadDimLimits) {
  const auto [dev, dt] = GetParam();
  for (int64_t d : {1, 4, 8, 12, 256}) {
    Case c;
    c.dtype = dt;
    c.seqlen_q = 33;
    c.seqlen_k = 65;
    c.head_dim = d;
    c.causal = true;
    SCOPED_TRACE("head_dim " + std::to_string(d));
    check_forward(dev, c);
    if (HasFatalFailure() || IsSkipped()) return;
    check_backward(dev, c);
    if (HasFatalFailure() || IsSkipped()) return;
  }
  if (!device_usable(dev)) return;
  for (int64_t d : {0, 264}) {
    Case c;
    c.dtype = dt;
    c.seqlen_q = c.seqlen_k = 5;
    c.head_dim = d;
    Instance in = make_instance(dev, c, false);
    CallGuard guard({&in.in.q, &in.in.k, &in.in.v}, {&in.out, &in.lse});
    const flashattn::Status st = flashattn::forward(in.fwd_args());
    EXPECT_EQ(st.code, flashattn::ErrorCode::InvalidArgument) << "head_dim " << d;
    EXPECT_NE(st.message.find("head_dim"), std::string::npos) << st.message;
    EXPECT_TRUE(guard.untouched());
  }
}

#ifndef FA_TEST_ON_CUDA
// Causal self-attention over 65,536 tokens on the CPU (fp16, one head, d 64:
// ~275 GFLOP): finite everywhere, and rows across the whole range (first,
// tile edges, last) against a per-row fp64 reference. CPU only: the GPU runs
// longer sequences in its benchmarks.
TEST(EdgeLong, CausalSelfAttention65536) {
  Case c;
  c.dtype = DType::F16;
  c.seqlen_q = c.seqlen_k = 65536;
  c.head_dim = 64;
  c.causal = true;
  Instance in = make_instance(Device::CPU, c, false);
  const flashattn::Status st = flashattn::forward(in.fwd_args());
  ASSERT_TRUE(st.ok()) << st.message;
  const std::vector<double> out = in.out.read(), lse = in.lse.read();
  for (double x : lse) ASSERT_TRUE(std::isfinite(x));
  const double scale = 1.0 / 8.0;
  for (int64_t i : {int64_t(0), int64_t(255), int64_t(256), int64_t(40000), int64_t(65535)}) {
    std::vector<double> s(size_t(i + 1)), ref(64, 0.0);
    double m = -INFINITY, sum = 0;
    for (int64_t j = 0; j <= i; ++j) {
      double dot = 0;
      for (int64_t d = 0; d < 64; ++d) dot += in.q[size_t(i * 64 + d)] * in.k[size_t(j * 64 + d)];
      s[size_t(j)] = scale * dot;
      m = std::max(m, s[size_t(j)]);
    }
    for (int64_t j = 0; j <= i; ++j) sum += std::exp(s[size_t(j)] - m);
    for (int64_t j = 0; j <= i; ++j)
      for (int64_t d = 0; d < 64; ++d) ref[size_t(d)] += std::exp(s[size_t(j)] - m) / sum * in.v[size_t(j * 64 + d)];
    const std::vector<double> got(out.begin() + i * 64, out.begin() + (i + 1) * 64);
    // fp16 output: half an fp16 ulp of |ref|, plus the fp32 sums' noise over
    // up to 65,536 terms (~eps32 * sqrt(L) * max|v| ~ 7e-5).
    for (int64_t d = 0; d < 64; ++d)
      ASSERT_NEAR(got[size_t(d)], ref[size_t(d)], std::ldexp(1.0, -11) * std::fabs(ref[size_t(d)]) + 7e-5)
          << "row " << i << " d " << d;
    ASSERT_NEAR(lse[size_t(i)], m + std::log(sum), 1e-4 * std::max(1.0, std::fabs(m))) << "row " << i;
  }
}
#endif

std::string shapes_name(const ::testing::TestParamInfo<std::tuple<Device, DType>>& info) {
  return std::string(device_name(std::get<0>(info.param))) + "_" + dtype_tag(std::get<1>(info.param));
}
// A view of `like`'s shape in a fresh buffer, `shift` elements past its start
// (shift 2: 4 or 8 bytes, never 16-byte aligned).
Tensor shifted_like(const Tensor& like, int64_t shift) {
  Tensor t = make_contiguous(like.device(), like.dtype, {like.numel() + shift});
  t.offset = shift;
  t.ndim = 4;
  int64_t st = 1;
  for (int i = 3; i >= 0; --i) {
    t.shape[i] = like.shape[i];
    t.stride[i] = st;
    st *= like.shape[i];
  }
  return t;
}

// v with its own head dim and an out (forward) or dv (backward) that is not
// 16-byte aligned: the CPU takes any strides and gives the aligned call's
// bits; CUDA refuses it naming the tensor, as it refuses such a tensor with
// one head dim (its kernels and the padding copies move 16-byte chunks), and
// writes nothing.
TEST_P(EdgeShapes, HeadDimVUnalignedOutputs) {
  const auto [dev, dt] = GetParam();
  if (!device_usable(dev)) GTEST_SKIP() << "no usable " << device_name(dev) << " device";
  Case c;
  c.dtype = dt;
  c.seqlen_q = c.seqlen_k = 33;
  c.heads_q = 4;
  c.heads_kv = 2;
  c.head_dim = 192;
  c.head_dim_v = 128;
  c.causal = true;
  Instance in = make_instance(dev, c, /*backward=*/true);
  flashattn::Status st = flashattn::forward(in.fwd_args());
  if (skip_if_unsupported(dev, st)) GTEST_SKIP() << "Unsupported: " << st.message;
  ASSERT_TRUE(st.ok()) << st.message;
  const std::vector<double> out = in.out.read();
  st = flashattn::backward(in.bwd_args());
  if (skip_if_unsupported(dev, st)) GTEST_SKIP() << "Unsupported: " << st.message;
  ASSERT_TRUE(st.ok()) << st.message;
  const std::vector<double> dv = in.grad.v.read();

  Tensor out2 = shifted_like(in.out, 2);
  flashattn::ForwardArgs fa = in.fwd_args();
  fa.out = out2.view();
  Tensor dv2 = shifted_like(in.grad.v, 2);
  flashattn::BackwardArgs ba = in.bwd_args();
  ba.dv = dv2.view();
  if (dev == Device::CPU) {
    ASSERT_TRUE(flashattn::forward(fa).ok());
    EXPECT_EQ(out2.read(), out);
    ASSERT_TRUE(flashattn::backward(ba).ok());
    EXPECT_EQ(dv2.read(), dv);
    return;
  }
  {
    CallGuard guard({&in.in.q, &in.in.k, &in.in.v}, {&out2, &in.lse});
    st = flashattn::forward(fa);
    EXPECT_EQ(st.code, flashattn::ErrorCode::InvalidArgument) << st.message;
    EXPECT_NE(st.message.find("out"), std::string::npos) << st.message;
    EXPECT_NE(st.message.find("16-byte"), std::string::npos) << st.message;
    EXPECT_TRUE(guard.untouched());
  }
  CallGuard guard({&in.in.q, &in.in.k, &in.in.v, &in.out, &in.dout, &in.lse},
                  {&in.grad.q, &in.grad.k, &dv2});
  st = flashattn::backward(ba);
  EXPECT_EQ(st.code, flashattn::ErrorCode::InvalidArgument) << st.message;
  EXPECT_NE(st.message.find("dv"), std::string::npos) << st.message;
  EXPECT_TRUE(guard.untouched());
}

INSTANTIATE_TEST_SUITE_P(Edge, EdgeShapes,
                         ::testing::Combine(::testing::ValuesIn(test_devices()),
                                            ::testing::ValuesIn(dtypes())),
                         shapes_name);

}  // namespace
}  // namespace fa_test

// FP8 (e4m3) forward (issue 9): the attention of the dequantised inputs
// q * q_descale, k * k_descale, v * v_descale, written as bf16. Checked
// against the fp64 reference of the dequantised values under DESIGN.md's
// rule, with the fp8 naive as the yardstick (P = exp(s - m) rounded to e4m3
// before P V, O rounded to bf16: naive_same_dtype.hpp). Runs on the CPU
// (fp32 kernels over dequantised copies) and, in the GPU binary, on the
// Hopper fp8 kernel, which must take head dims 128 and 256 on an sm_90
// device (no silent skip there; 64 is Unsupported on CUDA and skips). Also:
// varlen batches (packed rows, cu_seqlens; checked per sequence, and the C
// ABI's fa_forward_varlen_fp8 giving the C++ API's bits), and the argument
// checks that are fp8's own.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/fp8.hpp"
#include "flashattn/flashattn.h"
#include "flashattn/flashattn.hpp"
#include "reference/naive_same_dtype.hpp"
#include "reference/reference.hpp"
#include "reference/rule.hpp"
#include "support/c_abi.hpp"
#include "support/check.hpp"
#include "support/half.hpp"
#include "support/harness.hpp"
#include "support/rng.hpp"
#include "support/tensor.hpp"
#include "support/varlen.hpp"

#ifdef FA_TEST_ON_CUDA
#include <cuda_runtime_api.h>
#endif

namespace fa_test {
namespace {

using flashattn::ErrorCode;

struct Fp8Case {
  int64_t batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim;
  bool causal = false;
  int64_t window_left = -1, window_right = -1;
  bool descale = true;  // pass descale tensors (else all factors are 1)
  Layout layout = Layout::BSHD;
  bool ramp = false;  // steeply rising scores (ramp_scores)

  std::string name() const {
    std::string n = "b" + std::to_string(batch) + "_q" + std::to_string(seqlen_q) + "_k" +
                    std::to_string(seqlen_k) + "_h" + std::to_string(heads_q) + "x" +
                    std::to_string(heads_kv) + "_d" + std::to_string(head_dim);
    if (causal) n += "_causal";
    if (window_left >= 0 || window_right >= 0) {
      n += "_win" + std::to_string(window_left + 1) + "_" + std::to_string(window_right + 1);
    }
    if (!descale) n += "_nodescale";
    n += std::string("_") + layout_name(layout);
    if (ramp) n += "_ramp";
    return n;
  }
};

// The GPU binary expects the Hopper fp8 kernel to take these head dims (the
// ones below a tile run on it, zero-filled past head_dim; those that are not
// a multiple of 16 reach it on zero-padded copies).
bool gpu_must_support(const Fp8Case& c) {
#ifdef FA_TEST_ON_CUDA
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0) != cudaSuccess) {
    return false;
  }
  return major == 9 && minor == 0 && c.head_dim >= 1 && c.head_dim <= 256;
#else
  (void)c;
  return false;
#endif
}

// A [1] fp32 tensor holding `value`.
Tensor scalar_tensor(Device dev, float value) {
  Tensor t = make_contiguous(dev, DType::F32, {1});
  t.write({value});
  return t;
}

// The forward's tensors; options and descales are the caller's.
flashattn::ForwardArgs forward_args(const QKV& in, const Tensor& out, const Tensor& lse) {
  flashattn::ForwardArgs a;
  a.q = in.q.view();
  a.k = in.k.view();
  a.v = in.v.view();
  a.out = out.view();
  a.lse = lse.view();
  return a;
}

std::vector<double> scaled(std::vector<double> v, double s) {
  for (double& x : v) x *= s;
  return v;
}

// Scores that climb by tens of log2 units per key tile in the order the
// kernels visit the tiles (last first): k[.., j, .., 0] falls with j, and in
// rows 8..23 of every 32 q[.., 0] is 64, elsewhere 0 (flat rows), so that
// the two rows a GPU thread holds (r, r + 8) move their maxima apart. The
// softmax lets its reference max lag the true one by at most 2^8 in P (e4m3
// saturates at 448): a lag that grew without bound would saturate P here,
// and an O rescale skipped for a row that moved would leave O wrong.
void ramp_scores(const QKV& in, const Fp8Case& c) {
  std::vector<double> q = in.q.read(), k = in.k.read();
  const int64_t d = c.head_dim;
  for (int64_t r = 0; r < int64_t(q.size()) / d; ++r) {
    const int64_t i = (r / c.heads_q) % c.seqlen_q;  // dense [B, S, H, D]
    q[size_t(r * d)] = (i / 8) % 4 == 1 || (i / 8) % 4 == 2 ? 64.0 : 0.0;
  }
  for (int64_t r = 0; r < int64_t(k.size()) / d; ++r) {
    const int64_t j = (r / c.heads_kv) % c.seqlen_k;
    k[size_t(r * d)] = -448.0 * static_cast<double>(j) / static_cast<double>(c.seqlen_k);
  }
  in.q.write(q);  // rounds to e4m3; the check reads the stored values back
  in.k.write(k);
}

void check_fp8(Device dev, const Fp8Case& c) {
  if (!device_usable(dev)) GTEST_SKIP() << "no usable " << device_name(dev) << " device";
  // Stored e4m3 values spread over its range (sigma 8), dequantised back to
  // about unit size by factors that are not powers of two.
  const double dq = c.descale ? 0.125 : 1.0, dk = c.descale ? 0.1171875 : 1.0,
               dv = c.descale ? 0.2109375 : 1.0;
  const double sigma = c.descale ? 8.0 : 1.0;
  QKV in = make_qkv(dev, DType::F8E4M3, c.layout, c.batch, c.seqlen_q, c.seqlen_k, c.heads_q,
                    c.heads_kv, c.head_dim);
  fill_randn(in.q, sigma);
  fill_randn(in.k, sigma);
  if (c.ramp) ramp_scores(in, c);
  const std::vector<double> q = scaled(in.q.read(), dq);
  const std::vector<double> k = scaled(in.k.read(), dk);
  const std::vector<double> v = scaled(fill_randn(in.v, sigma), dv);
  Tensor out = make_bshd(dev, DType::BF16, c.layout, c.batch, c.seqlen_q, c.heads_q, c.head_dim);
  Tensor lse = make_lse(dev, c.batch, c.heads_q, c.seqlen_q);
  const Tensor tq = scalar_tensor(dev, static_cast<float>(dq));
  const Tensor tk = scalar_tensor(dev, static_cast<float>(dk));
  const Tensor tv = scalar_tensor(dev, static_cast<float>(dv));

  flashattn::ForwardArgs a = forward_args(in, out, lse);
  a.options.causal = c.causal;
  a.options.window_left = c.window_left;
  a.options.window_right = c.window_right;
  if (c.descale) {
    a.fp8_descale.q = tq.view();
    a.fp8_descale.k = tk.view();
    a.fp8_descale.v = tv.view();
  }
  CallGuard guard({&in.q, &in.k, &in.v, &tq, &tk, &tv}, {&out, &lse});
  const flashattn::Status st = flashattn::forward(a);
  if (dev == Device::CUDA && st.code == ErrorCode::Unsupported && !gpu_must_support(c)) {
    GTEST_SKIP() << "Unsupported: " << st.message;
  }
  ASSERT_TRUE(st.ok()) << "forward failed: " << st.message;
  EXPECT_TRUE(guard.wrote_exactly_outputs());

  flashattn::reference::Problem pb;
  pb.batch = c.batch;
  pb.seqlen_q = c.seqlen_q;
  pb.seqlen_k = c.seqlen_k;
  pb.heads_q = c.heads_q;
  pb.heads_kv = c.heads_kv;
  pb.head_dim = c.head_dim;
  pb.causal = c.causal;
  pb.window_left = c.window_left;
  pb.window_right = c.window_right;
  std::vector<double> ref(q.size()), ref_lse(static_cast<size_t>(c.batch * c.heads_q * c.seqlen_q));
  flashattn::reference::forward(pb, q.data(), k.data(), v.data(), ref.data(), ref_lse.data());
  std::vector<double> naive, naive_lse;
  flashattn::reference::naive_forward_fp8(pb, q, k, v, ref, &naive, &naive_lse);
  double max_v = 0;
  for (double x : v) max_v = std::max(max_v, std::abs(x));
  EXPECT_TRUE(within_rule("out", DType::BF16, out.read(), ref, naive, c.seqlen_k, c.head_dim, max_v));
  const double score_err = flashattn::reference::fp8_score_error(
      q, k, c.batch, c.seqlen_q, c.seqlen_k, c.heads_q, c.heads_kv, c.head_dim,
      1.0 / std::sqrt(static_cast<double>(c.head_dim)));
  EXPECT_TRUE(lse_within_rule("lse", lse.read(), ref_lse, naive_lse, c.head_dim, score_err));
}

class Fp8Forward : public ::testing::TestWithParam<std::tuple<Device, Fp8Case>> {};

TEST_P(Fp8Forward, MatchesReference) {
  check_fp8(std::get<0>(GetParam()), std::get<1>(GetParam()));
}

std::vector<Fp8Case> fp8_cases() {
  std::vector<Fp8Case> cs;
  for (int64_t d : {64, 128, 256}) {
    cs.push_back({1, 1, 1, 1, 1, d});
    cs.push_back({2, 113, 267, 4, 2, d});              // Sq != Sk, GQA 2:1
    cs.push_back({1, 267, 113, 3, 1, d, true});        // causal, rows that see no key, MQA
    cs.push_back({1, 1030, 1030, 2, 2, d, true});      // many key tiles, diagonal
    cs.push_back({1, 17, 1030, 2, 1, d});              // long keys, few queries
    cs.push_back({1, 300, 300, 2, 2, d, false, 64, 0});  // sliding window
  }
  cs.push_back({2, 129, 257, 2, 2, 128, false, -1, -1, false});   // no descale tensors
  cs.push_back({1, 200, 333, 4, 2, 128, false, -1, -1, true, Layout::Padded});
  cs.push_back({1, 200, 333, 4, 2, 256, true, -1, -1, true, Layout::BHSD});
  cs.push_back({3, 1, 700, 8, 1, 128, true});  // decode-like: one query, MQA
  // Head dims below the 128 and 256 tiles (V^T's last 64-row block partial at 96, 112, 208).
  for (int64_t d : {16, 96, 112, 192, 208}) {
    cs.push_back({2, 113, 267, 4, 2, d});          // Sq != Sk, GQA 2:1
    cs.push_back({1, 1030, 1030, 2, 2, d, true});  // many key tiles, diagonal
  }
  cs.push_back({1, 200, 333, 4, 2, 96, true, -1, -1, true, Layout::BHSD});
  cs.push_back({2, 333, 333, 2, 2, 192, true, -1, -1, true, Layout::BSHD, true});  // rising scores
  // Head dims that are not a multiple of 16 (padded copies on the GPU).
  cs.push_back({2, 113, 267, 4, 2, 40});
  cs.push_back({1, 267, 113, 3, 1, 100, true});
  cs.push_back({1, 200, 333, 4, 2, 100, false, -1, -1, true, Layout::Padded});
  cs.push_back({1, 33, 65, 2, 2, 3, true});
  for (int64_t d : {128, 256}) {  // scores rising tile after tile
    cs.push_back({1, 64, 300, 2, 1, d, false, -1, -1, true, Layout::BSHD, true});
    cs.push_back({2, 333, 333, 2, 2, d, true, -1, -1, true, Layout::BSHD, true});
  }
  return cs;
}

std::vector<std::tuple<Device, Fp8Case>> fp8_params() {
  std::vector<std::tuple<Device, Fp8Case>> ps;
  for (Device d : test_devices()) {
    for (const Fp8Case& c : fp8_cases()) ps.emplace_back(d, c);
  }
  return ps;
}

INSTANTIATE_TEST_SUITE_P(Sweep, Fp8Forward, ::testing::ValuesIn(fp8_params()),
                         [](const ::testing::TestParamInfo<std::tuple<Device, Fp8Case>>& i) {
                           return std::string(device_name(std::get<0>(i.param))) + "_" +
                                  std::get<1>(i.param).name();
                         });

// ---- varlen batches ----------------------------------------------------------

struct Fp8VarlenCase {
  std::vector<int64_t> lens_q, lens_k;
  int64_t heads_q = 4, heads_kv = 2, head_dim = 128;
  bool causal = false;
  int64_t tail_q = 0, tail_k = 0;  // packed rows past the last sequence (out 0, LSE -inf there)
  std::string name() const {
    std::string n = "q";
    for (int64_t l : lens_q) n += "_" + std::to_string(l);
    n += "_k";
    for (int64_t l : lens_k) n += "_" + std::to_string(l);
    n += "_h" + std::to_string(heads_q) + "x" + std::to_string(heads_kv) + "_d" + std::to_string(head_dim);
    if (tail_q || tail_k) n += "_tail" + std::to_string(tail_q) + "_" + std::to_string(tail_k);
    return causal ? n + "_causal" : n;
  }
};

// Rows [r0, r0 + n) of packed [total, width] doubles.
std::vector<double> packed_rows(const std::vector<double>& x, int64_t r0, int64_t n, int64_t width) {
  return {x.begin() + r0 * width, x.begin() + (r0 + n) * width};
}

// Packed fp8 q, k, v with descale factors, run through forward() and
// checked per sequence against the reference and the fp8 naive of that
// sequence under the rule: every sequence's rows must be what the padded rule
// allows, whatever its neighbours (zero lengths, a last key tile shared with
// the next sequence's rows in the packed tensor). also_c_abi: then
// fa_forward_varlen_fp8 on the same tensors must give the same bits.
void check_fp8_varlen(Device dev, const Fp8VarlenCase& c, bool also_c_abi = false) {
  const int64_t B = static_cast<int64_t>(c.lens_q.size()), D = c.head_dim;
  int64_t tq = c.tail_q, tk = c.tail_k;
  for (int64_t l : c.lens_q) tq += l;
  for (int64_t l : c.lens_k) tk += l;
  const double dq = 0.125, dk = 0.1171875, dv = 0.2109375;
  Tensor q = make_contiguous(dev, DType::F8E4M3, {tq, c.heads_q, D});
  Tensor k = make_contiguous(dev, DType::F8E4M3, {tk, c.heads_kv, D});
  Tensor v = make_contiguous(dev, DType::F8E4M3, {tk, c.heads_kv, D});
  const std::vector<double> qd = scaled(fill_randn(q, 8.0), dq), kd = scaled(fill_randn(k, 8.0), dk),
                            vd = scaled(fill_randn(v, 8.0), dv);
  Tensor out = make_contiguous(dev, DType::BF16, {tq, c.heads_q, D});
  Tensor lse = make_contiguous(dev, DType::F32, {c.heads_q, tq});
  Tensor cu_q = make_i32(dev, cumulative(c.lens_q), {B + 1});
  Tensor cu_k = make_i32(dev, cumulative(c.lens_k), {B + 1});
  const Tensor sq = scalar_tensor(dev, static_cast<float>(dq)), sk = scalar_tensor(dev, static_cast<float>(dk)),
               sv = scalar_tensor(dev, static_cast<float>(dv));
  flashattn::ForwardArgs a;
  a.q = q.view();
  a.k = k.view();
  a.v = v.view();
  a.out = out.view();
  a.lse = lse.view();
  a.options.causal = c.causal;
  a.varlen.cu_seqlens_q = cu_q.view();
  a.varlen.cu_seqlens_k = cu_k.view();
  for (int64_t l : c.lens_q) a.varlen.max_seqlen_q = std::max(a.varlen.max_seqlen_q, l);
  for (int64_t l : c.lens_k) a.varlen.max_seqlen_k = std::max(a.varlen.max_seqlen_k, l);
  a.fp8_descale.q = sq.view();
  a.fp8_descale.k = sk.view();
  a.fp8_descale.v = sv.view();
  CallGuard guard({&q, &k, &v, &cu_q, &cu_k, &sq, &sk, &sv}, {&out, &lse});
  const flashattn::Status st = flashattn::forward(a);
  if (dev == Device::CUDA && st.code == ErrorCode::Unsupported &&
      !gpu_must_support(Fp8Case{1, 1, 1, c.heads_q, c.heads_kv, D})) {
    GTEST_SKIP() << "Unsupported: " << st.message;
  }
  ASSERT_TRUE(st.ok()) << "forward failed: " << st.message;
  EXPECT_TRUE(guard.wrote_exactly_outputs());
  const std::vector<double> got = out.read(), got_lse = lse.read();
  if (also_c_abi) {
    out.write(std::vector<double>(got.size(), 0.0));
    const fa_forward_args ca = to_c(a);
    fa_varlen cv{};
    cv.cu_seqlens_q = to_c(a.varlen.cu_seqlens_q);
    cv.cu_seqlens_k = to_c(a.varlen.cu_seqlens_k);
    cv.max_seqlen_q = a.varlen.max_seqlen_q;
    cv.max_seqlen_k = a.varlen.max_seqlen_k;
    const fa_fp8_descale cs{to_c(a.fp8_descale.q), to_c(a.fp8_descale.k), to_c(a.fp8_descale.v)};
    ASSERT_EQ(fa_forward_varlen_fp8(&ca, &cv, &cs), FA_OK) << fa_last_error();
    EXPECT_EQ(out.read(), got);
    EXPECT_EQ(lse.read(), got_lse);
    EXPECT_EQ(fa_forward_varlen_fp8(&ca, nullptr, &cs), FA_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(fa_last_error()).find("varlen"), std::string::npos) << fa_last_error();
  }

  const int64_t wq = c.heads_q * D, wk = c.heads_kv * D;
  // Rows past the last sequence see no key: O = 0, LSE = -inf.
  std::vector<double> ref(qd.size(), 0.0), naive(qd.size(), 0.0),
      ref_lse(size_t(c.heads_q * tq), -std::numeric_limits<double>::infinity()), naive_lse = ref_lse;
  double score_err = 0, max_v = 0;
  for (double x : vd) max_v = std::max(max_v, std::abs(x));
  int64_t oq = 0, ok = 0;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t lq = c.lens_q[size_t(b)], lk = c.lens_k[size_t(b)];
    if (lq > 0) {
      flashattn::reference::Problem pb;
      pb.batch = 1;
      pb.seqlen_q = lq;
      pb.seqlen_k = lk;
      pb.heads_q = c.heads_q;
      pb.heads_kv = c.heads_kv;
      pb.head_dim = D;
      pb.causal = c.causal;
      const auto qb = packed_rows(qd, oq, lq, wq), kb = packed_rows(kd, ok, lk, wk), vb = packed_rows(vd, ok, lk, wk);
      std::vector<double> r(qb.size()), rl(size_t(c.heads_q * lq)), n, nl;
      flashattn::reference::forward(pb, qb.data(), kb.data(), vb.data(), r.data(), rl.data());
      flashattn::reference::naive_forward_fp8(pb, qb, kb, vb, r, &n, &nl);
      std::copy(r.begin(), r.end(), ref.begin() + oq * wq);
      std::copy(n.begin(), n.end(), naive.begin() + oq * wq);
      for (int64_t h = 0; h < c.heads_q; ++h) {
        for (int64_t i = 0; i < lq; ++i) {
          ref_lse[size_t(h * tq + oq + i)] = rl[size_t(h * lq + i)];
          naive_lse[size_t(h * tq + oq + i)] = nl[size_t(h * lq + i)];
        }
      }
      if (lk > 0) {
        score_err = std::max(score_err, flashattn::reference::fp8_score_error(
                                            qb, kb, 1, lq, lk, c.heads_q, c.heads_kv, D,
                                            1.0 / std::sqrt(static_cast<double>(D))));
      }
    }
    oq += lq;
    ok += lk;
  }
  int64_t max_k = 1;
  for (int64_t l : c.lens_k) max_k = std::max(max_k, l);
  EXPECT_TRUE(within_rule("out", DType::BF16, got, ref, naive, max_k, D, max_v));
  EXPECT_TRUE(lse_within_rule("lse", got_lse, ref_lse, naive_lse, D, score_err));
}

std::vector<Fp8VarlenCase> fp8_varlen_cases() {
  std::vector<Fp8VarlenCase> cs;
  for (int64_t d : {128, 256, 96}) {
    // Odd lengths, a zero-length sequence, a last key tile that the next
    // sequence's packed rows fill, Sq != Sk, GQA 2:1.
    cs.push_back({{37, 0, 300, 129}, {100, 7, 261, 129}, 4, 2, d, false});
    cs.push_back({{37, 0, 300, 129}, {100, 7, 261, 129}, 4, 2, d, true});  // causal per sequence
  }
  cs.push_back({{1, 1, 1}, {700, 1, 300}, 8, 1, 128, true});  // decode-like rows, MQA
  cs.push_back({{37, 5}, {100, 0}, 4, 2, 128, false});        // a last sequence with no keys
  cs.push_back({{0, 37}, {7, 100}, 4, 2, 128, true});         // a first one with no queries
  cs.push_back({{513, 257}, {513, 257}, 2, 2, 128, true});    // several key tiles
  cs.push_back({{37, 50}, {45, 70}, 4, 2, 128, true, 30, 3});  // rows past the last sequence
  cs.push_back({{5, 0}, {60, 9}, 2, 1, 256, false, 1, 40});
  cs.push_back({{37, 0, 300}, {100, 7, 261}, 4, 2, 100, true, 5, 2});  // a head dim of padded copies
  return cs;
}

class Fp8Varlen : public ::testing::TestWithParam<std::tuple<Device, Fp8VarlenCase>> {};

TEST_P(Fp8Varlen, MatchesReferencePerSequence) {
  const Device dev = std::get<0>(GetParam());
  if (!device_usable(dev)) GTEST_SKIP() << "no usable " << device_name(dev) << " device";
  check_fp8_varlen(dev, std::get<1>(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Sweep, Fp8Varlen,
                         ::testing::Combine(::testing::ValuesIn(test_devices()),
                                            ::testing::ValuesIn(fp8_varlen_cases())),
                         [](const ::testing::TestParamInfo<std::tuple<Device, Fp8VarlenCase>>& i) {
                           return std::string(device_name(std::get<0>(i.param))) + "_" +
                                  std::get<1>(i.param).name();
                         });

// ---- argument checks -------------------------------------------------------

struct Fp8Args {
  QKV in;
  Tensor out, lse, scale;
  flashattn::ForwardArgs args() const { return forward_args(in, out, lse); }
};

Fp8Args small_fp8(Device dev) {
  Fp8Args f;
  f.in = make_qkv(dev, DType::F8E4M3, Layout::BSHD, 1, 33, 33, 2, 2, 128);
  fill_randn(f.in.q);
  fill_randn(f.in.k);
  fill_randn(f.in.v);
  f.out = make_bshd(dev, DType::BF16, Layout::BSHD, 1, 33, 2, 128);
  f.lse = make_lse(dev, 1, 2, 33);
  f.scale = scalar_tensor(dev, 0.5f);
  return f;
}

// Each call fails with the given code and a message naming `needle`, and
// writes nothing.
void expect_refused(const Fp8Args& f, const flashattn::ForwardArgs& a, ErrorCode code,
                    const std::string& needle) {
  CallGuard guard({&f.in.q, &f.in.k, &f.in.v, &f.scale}, {&f.out, &f.lse});
  const flashattn::Status st = flashattn::forward(a);
  EXPECT_EQ(st.code, code) << st.message;
  EXPECT_NE(st.message.find(needle), std::string::npos) << st.message;
  EXPECT_TRUE(guard.untouched());
}

class Fp8Invalid : public ::testing::TestWithParam<Device> {};

// fa_forward_varlen_fp8 gives forward()'s bits on the same tensors, and
// refuses a null varlen descriptor.
TEST_P(Fp8Invalid, VarlenCAbiSameBitsAsCpp) {
  const Device dev = GetParam();
  if (!device_usable(dev)) GTEST_SKIP();
  check_fp8_varlen(dev, Fp8VarlenCase{{37, 0, 130}, {90, 5, 200}, 4, 2, 128, true}, true);
}

TEST_P(Fp8Invalid, OutputMustBeBf16) {
  const Device dev = GetParam();
  if (!device_usable(dev)) GTEST_SKIP();
  Fp8Args f = small_fp8(dev);
  f.out = make_bshd(dev, DType::F16, Layout::BSHD, 1, 33, 2, 128);
  expect_refused(f, f.args(), ErrorCode::InvalidArgument, "out: expected dtype bfloat16");
}

TEST_P(Fp8Invalid, KAndVMustBeFp8Too) {
  const Device dev = GetParam();
  if (!device_usable(dev)) GTEST_SKIP();
  Fp8Args f = small_fp8(dev);
  f.in.v = make_bshd(dev, DType::BF16, Layout::BSHD, 1, 33, 2, 128);
  expect_refused(f, f.args(), ErrorCode::InvalidArgument, "v: expected dtype float8_e4m3");
}

TEST_P(Fp8Invalid, OneHeadDimForQKAndV) {
  const Device dev = GetParam();
  if (!device_usable(dev)) GTEST_SKIP();
  Fp8Args f = small_fp8(dev);
  f.in.v = make_bshd(dev, DType::F8E4M3, Layout::BSHD, 1, 33, 2, 64);
  f.out = make_bshd(dev, DType::BF16, Layout::BSHD, 1, 33, 2, 64);
  expect_refused(f, f.args(), ErrorCode::Unsupported, "v: float8_e4m3 inputs need v's head_dim equal to q's");
}

// The Hopper kernel takes head dims in whole 16-byte e4m3 rows; others (72
// here) run on zero-padded copies (common/head_dim_pad.hpp), which give the
// bits of the same call on tensors the caller padded with zeros to 80 (same
// kernel, same data; the scale stays 1/sqrt(72)), and write only the
// caller's 72 columns.
TEST_P(Fp8Invalid, HopperHeadDimsOffSixteenRunOnPaddedCopies) {
  const Device dev = GetParam();
  if (!device_usable(dev)) GTEST_SKIP();
  if (!gpu_must_support(Fp8Case{1, 33, 33, 2, 2, 128})) GTEST_SKIP() << "no Hopper fp8 kernel here";
  const int64_t S = 33, H = 2, D = 72, P = 80;
  Fp8Args f = small_fp8(dev);
  f.in = make_qkv(dev, DType::F8E4M3, Layout::BSHD, 1, S, S, H, H, D);
  fill_randn(f.in.q);
  fill_randn(f.in.k);
  fill_randn(f.in.v);
  f.out = make_bshd(dev, DType::BF16, Layout::BSHD, 1, S, H, D);
  CallGuard guard({&f.in.q, &f.in.k, &f.in.v}, {&f.out, &f.lse});
  const flashattn::Status st = flashattn::forward(f.args());
  ASSERT_TRUE(st.ok()) << st.message;
  EXPECT_TRUE(guard.wrote_exactly_outputs());

  Fp8Args g = small_fp8(dev);
  g.in = make_qkv(dev, DType::F8E4M3, Layout::BSHD, 1, S, S, H, H, P);
  g.out = make_bshd(dev, DType::BF16, Layout::BSHD, 1, S, H, P);
  auto widen = [&](const std::vector<double>& x) {  // [rows, D] -> [rows, P], zeros past D
    std::vector<double> w(x.size() / D * P, 0.0);
    for (size_t r = 0; r < x.size() / D; ++r)
      for (int64_t c = 0; c < D; ++c) w[r * P + c] = x[r * D + c];
    return w;
  };
  g.in.q.write(widen(f.in.q.read()));
  g.in.k.write(widen(f.in.k.read()));
  g.in.v.write(widen(f.in.v.read()));
  flashattn::ForwardArgs a = g.args();
  a.options.softmax_scale = float(1.0 / std::sqrt(double(D)));
  ASSERT_TRUE(flashattn::forward(a).ok());
  EXPECT_EQ(widen(f.out.read()), g.out.read());
  EXPECT_EQ(f.lse.read(), g.lse.read());
}

TEST_P(Fp8Invalid, DescaleShapeDtypeAndInputDtype) {
  const Device dev = GetParam();
  if (!device_usable(dev)) GTEST_SKIP();
  Fp8Args f = small_fp8(dev);
  flashattn::ForwardArgs a = f.args();
  const Tensor two = make_contiguous(dev, DType::F32, {2});
  a.fp8_descale.k = two.view();
  expect_refused(f, a, ErrorCode::InvalidArgument, "fp8_descale.k: expected shape [1]");
  const Tensor half = make_contiguous(dev, DType::BF16, {1});
  a = f.args();
  a.fp8_descale.v = half.view();
  expect_refused(f, a, ErrorCode::InvalidArgument, "fp8_descale.v: expected dtype float32");
  // Descale factors with bf16 inputs are a mistake, not something to ignore.
  Fp8Args g;
  g.in = make_qkv(dev, DType::BF16, Layout::BSHD, 1, 33, 33, 2, 2, 128);
  g.out = make_bshd(dev, DType::BF16, Layout::BSHD, 1, 33, 2, 128);
  g.lse = make_lse(dev, 1, 2, 33);
  g.scale = scalar_tensor(dev, 0.5f);
  a = g.args();
  a.fp8_descale.q = g.scale.view();
  expect_refused(g, a, ErrorCode::InvalidArgument, "fp8_descale.q: only for float8_e4m3 inputs");
}

TEST_P(Fp8Invalid, ForwardOnly) {
  const Device dev = GetParam();
  if (!device_usable(dev)) GTEST_SKIP();
  Fp8Args f = small_fp8(dev);
  // Backward: fp8 tensors everywhere, so only the dtype can be the reason.
  flashattn::BackwardArgs b;
  b.q = f.in.q.view();
  b.k = f.in.k.view();
  b.v = f.in.v.view();
  b.out = f.in.q.view();
  b.dout = f.in.q.view();
  b.lse = f.lse.view();
  Tensor dq = make_bshd(dev, DType::F8E4M3, Layout::BSHD, 1, 33, 2, 128);
  Tensor dk = make_bshd(dev, DType::F8E4M3, Layout::BSHD, 1, 33, 2, 128);
  Tensor dv = make_bshd(dev, DType::F8E4M3, Layout::BSHD, 1, 33, 2, 128);
  b.dq = dq.view();
  b.dk = dk.view();
  b.dv = dv.view();
  CallGuard guard({&f.in.q, &f.in.k, &f.in.v, &f.lse}, {&dq, &dk, &dv});
  const flashattn::Status st = flashattn::backward(b);
  EXPECT_EQ(st.code, ErrorCode::Unsupported) << st.message;
  EXPECT_NE(st.message.find("float8_e4m3"), std::string::npos) << st.message;
  EXPECT_TRUE(guard.untouched());
}

INSTANTIATE_TEST_SUITE_P(Devices, Fp8Invalid, ::testing::ValuesIn(test_devices()),
                         [](const ::testing::TestParamInfo<Device>& i) {
                           return std::string(device_name(i.param));
                         });

// The library's host encoder (src/common/fp8.hpp: the command-line program's
// fp8 inputs) against the test support's independent one (nearest of the
// 127 magnitudes by search), on every code's value, every midpoint between
// neighbours (ties to even), saturation, NaN and random floats.
TEST(Fp8Encode, MatchesIndependentEncoder) {
  using flashattn::detail::e4m3_to_float;
  using flashattn::detail::float_to_e4m3;
  for (int c = 0; c < 256; ++c) {
    const float x = e4m3_to_float(static_cast<uint8_t>(c));
    if (std::isnan(x)) continue;
    EXPECT_EQ(float_to_e4m3(x), float_to_e4m3_bits(x)) << "code " << c;
    EXPECT_EQ(e4m3_to_float(float_to_e4m3(x)), x) << "code " << c;  // round trip
    if ((c & 0x7f) < 0x7e) {
      const float next = e4m3_to_float(static_cast<uint8_t>(c + 1));
      const float mid = 0.5f * (x + next);
      EXPECT_EQ(float_to_e4m3(mid), float_to_e4m3_bits(mid)) << "midpoint above code " << c;
    }
  }
  for (float x : {448.f, 449.f, 464.f, 1e6f, -500.f, 1e-10f, -1e-10f, 0.f, -0.f, 0.0009765625f}) {
    EXPECT_EQ(float_to_e4m3(x), float_to_e4m3_bits(x)) << x;
  }
  EXPECT_EQ(float_to_e4m3(std::nanf("")), 0x7f);
  std::mt19937 gen(7);
  std::normal_distribution<float> normal(0.f, 64.f);
  for (int i = 0; i < 100000; ++i) {
    const float x = normal(gen) * (i % 3 == 0 ? 1e-3f : 1.f);
    ASSERT_EQ(float_to_e4m3(x), float_to_e4m3_bits(x)) << x;
  }
}

}  // namespace
}  // namespace fa_test

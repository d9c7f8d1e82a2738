// Varlen (cu_seqlens) forward and backward against the fp64 reference run per
// sequence (support/varlen.hpp), under DESIGN.md's rule: odd lengths,
// zero-length sequences (no queries, no keys, both), GQA, causal per
// sequence (bottom-right aligned, rows that see nothing), windows, softcap.
// Also: the C ABI gives the same bits as the C++ API, and a varlen batch of
// equal lengths matches the padded call bit for bit on the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "flashattn/flashattn.h"
#include "support/c_abi.hpp"
#include "support/harness.hpp"
#include "support/varlen.hpp"

namespace fa_test {
namespace {

std::vector<VarlenCase> varlen_cases() {
  std::vector<VarlenCase> v;
  auto add = [&](DType dt, std::vector<int64_t> lq, std::vector<int64_t> lk, int64_t hq, int64_t hkv,
                 int64_t d, bool causal) {
    VarlenCase c;
    c.dtype = dt;
    c.lens_q = lq;
    c.lens_k = lk;
    c.heads_q = hq;
    c.heads_kv = hkv;
    c.head_dim = d;
    c.causal = causal;
    v.push_back(c);
  };
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    add(dt, {17, 1, 113}, {17, 1, 113}, 2, 2, 64, false);
    add(dt, {17, 1, 113}, {33, 267, 5}, 4, 2, 128, true);  // Sq > Sk rows see nothing
  }
  add(DType::F16, {0, 31, 0, 7}, {9, 0, 0, 300}, 4, 1, 128, true);   // zero lengths
  add(DType::BF16, {300, 2, 1030}, {301, 2, 1030}, 6, 2, 128, true);  // many tiles, GQA 3:1
  add(DType::F32, {5, 260}, {600, 260}, 2, 1, 72, false);            // odd head_dim
  add(DType::F16, {1, 1, 1, 1, 1}, {700, 3, 0, 65, 129}, 8, 1, 128, false);  // decode-like, MQA
  add(DType::F16, {16, 3}, {1000, 40}, 16, 2, 128, true);  // packed-GQA decode path, causal
  // Hopper forward tile shapes (64: 192/128 rows, 256: 80 keys), ends in
  // mid-tile both ways, a zero-length query sequence.
  add(DType::BF16, {70, 200, 0, 1}, {150, 64, 9, 300}, 4, 2, 256, false);
  add(DType::F16, {129, 300}, {129, 300}, 4, 1, 64, true);
  // Every sm80 backward tile (head dims 72 -> 96, 160 -> 192, 256; on Hopper
  // 72 and 160 take the sm90 tiles 128 and 192, the sm80 ones with
  // FLASHATTN_DISABLE_SM90=1) and the
  // deterministic backward's own dQ kernel at each tile, fp16 and bf16: the
  // GPU's varlen kernel instantiations (h200_sanitize_all.sh's launch
  // coverage found these unlaunched; causal at head dim 64 for the Hopper
  // forward's 128-row tile). Lengths 23/0/70 name them there.
  for (DType dt : {DType::F16, DType::BF16}) {
    for (int64_t d : {64, 72, 128, 160, 256}) {
      for (bool det : {false, true}) {
        if (!det && d == 128) continue;  // the cases above have it
        add(dt, {23, 0, 70}, {41, 9, 70}, 4, 2, d, d != 128 && d != 256);
        v.back().deterministic = det;
      }
    }
  }
  // v with a head dim of its own (DeepSeek's 192 / 128, and v the wider side),
  // zero-length sequences, the deterministic backward.
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    add(dt, {23, 0, 70}, {41, 9, 70}, 4, 2, 192, true);
    v.back().head_dim_v = 128;
    add(dt, {5, 31}, {60, 0}, 2, 1, 64, false);
    v.back().head_dim_v = 128;
    v.back().deterministic = true;
  }
  // GQA packed into the Hopper forward's tiles (longest query sequence at
  // most 64 rows; the cases above with groups of 2, 4 and 8 too): 16 heads
  // on one KV head, causal, a zero-length sequence.
  add(DType::BF16, {64, 17, 0}, {500, 17, 3}, 16, 1, 128, true);
  add(DType::F16, {33, 64}, {33, 2000}, 8, 2, 64, false);
  add(DType::BF16, {30, 5, 0}, {400, 5, 9}, 14, 2, 128, true);  // a group of 7
  // Head dim 128 at a length the 128-row tile pads less than the 192-row one.
  add(DType::F16, {250, 7, 620}, {250, 700, 600}, 4, 1, 128, true);
  // Packed rows past the last sequence (a buffer sized for more tokens):
  // every dtype, GQA, causal, the deterministic backward, v's own head dim
  // (the padded-head-dim path), a last sequence that ends mid-tile with the
  // tail filling the tile, a tail on one side only.
  add(DType::F32, {17, 1, 113}, {17, 1, 113}, 2, 2, 64, false);
  v.back().tail_q = 5;
  v.back().tail_k = 9;
  add(DType::BF16, {37, 50}, {45, 70}, 4, 2, 128, true);
  v.back().tail_q = 30;
  v.back().tail_k = 3;
  add(DType::F16, {23, 0, 70}, {41, 9, 70}, 4, 2, 64, false);
  v.back().tail_q = 1;
  v.back().tail_k = 64;
  v.back().deterministic = true;
  add(DType::BF16, {5, 31}, {60, 0}, 2, 1, 192, true);
  v.back().head_dim_v = 128;
  v.back().tail_q = 11;
  add(DType::F16, {0, 3}, {7, 0}, 8, 1, 256, false);
  v.back().tail_k = 17;
  // Head dims that are not a multiple of 8 (zero-padded copies of the packed
  // tensors), rows past the last sequence, the deterministic backward.
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    add(dt, {23, 0, 70}, {41, 9, 70}, 4, 2, 100, true);
    v.back().tail_q = 3;
    v.back().tail_k = 5;
    add(dt, {5, 31}, {60, 17}, 2, 1, 36, false);
    v.back().head_dim_v = 20;
    v.back().deterministic = true;
  }
  VarlenCase w;
  w.dtype = DType::F16;
  w.lens_q = {40, 129};
  w.lens_k = {90, 129};
  w.heads_q = 2;
  w.heads_kv = 1;
  w.head_dim = 64;
  w.window_left = 16;
  w.window_right = 3;
  w.softcap = 20.0f;
  v.push_back(w);
  VarlenCase win;  // a window without softcap (the Hopper forward takes it)
  win.dtype = DType::BF16;
  win.lens_q = {300, 45};
  win.lens_k = {280, 90};
  win.heads_q = 2;
  win.heads_kv = 1;
  win.head_dim = 128;
  win.window_left = 64;
  win.window_right = 0;
  v.push_back(win);
  return v;
}

using VarlenParam = std::tuple<Device, VarlenCase>;
std::string varlen_name(const ::testing::TestParamInfo<VarlenParam>& info) {
  return std::string(device_name(std::get<0>(info.param))) + "_" + std::get<1>(info.param).name();
}

class VarlenForward : public ::testing::TestWithParam<VarlenParam> {};
TEST_P(VarlenForward, MatchesReference) {
  check_varlen_forward(std::get<0>(GetParam()), std::get<1>(GetParam()));
}
INSTANTIATE_TEST_SUITE_P(Sweep, VarlenForward,
                         ::testing::Combine(::testing::ValuesIn(test_devices()),
                                            ::testing::ValuesIn(varlen_cases())),
                         varlen_name);

class VarlenBackward : public ::testing::TestWithParam<VarlenParam> {};
TEST_P(VarlenBackward, MatchesReference) {
  check_varlen_backward(std::get<0>(GetParam()), std::get<1>(GetParam()));
}
INSTANTIATE_TEST_SUITE_P(Sweep, VarlenBackward,
                         ::testing::Combine(::testing::ValuesIn(test_devices()),
                                            ::testing::ValuesIn(varlen_cases())),
                         varlen_name);

VarlenCase small_case() {
  VarlenCase c;
  c.dtype = DType::F16;
  c.lens_q = {7, 0, 19};
  c.lens_k = {12, 5, 19};
  c.heads_q = 4;
  c.heads_kv = 2;
  c.head_dim = 128;
  c.causal = true;
  return c;
}

fa_varlen varlen_to_c(const flashattn::Varlen& v) {
  fa_varlen r{};
  r.cu_seqlens_q = to_c(v.cu_seqlens_q);
  r.cu_seqlens_k = to_c(v.cu_seqlens_k);
  r.max_seqlen_q = v.max_seqlen_q;
  r.max_seqlen_k = v.max_seqlen_k;
  return r;
}

TEST(VarlenCAbi, SameBitsAsCpp) {
  const Device dev = test_devices()[0];
  if (!device_usable(dev)) GTEST_SKIP() << "no usable device";
  VarlenInstance in = make_varlen(dev, small_case(), true);
  const flashattn::Status st = flashattn::forward(in.fwd_args());
  if (skip_if_unsupported(dev, st)) GTEST_SKIP() << st.message;
  ASSERT_TRUE(st.ok()) << st.message;
  const auto out_cpp = in.out.read(), lse_cpp = in.lse.read();
  ASSERT_TRUE(flashattn::backward(in.bwd_args()).ok() ||
              dev == Device::CUDA);  // CUDA: varlen backward may be Unsupported
  const auto dq_cpp = in.dq.read();
  in.out.write(std::vector<double>(out_cpp.size(), 0.0));
  const flashattn::ForwardArgs a = in.fwd_args();
  const fa_forward_args ca = to_c(a);
  const fa_varlen cv = varlen_to_c(a.varlen);
  ASSERT_EQ(fa_forward_varlen(&ca, &cv), FA_OK) << fa_last_error();
  EXPECT_EQ(in.out.read(), out_cpp);
  EXPECT_EQ(in.lse.read(), lse_cpp);
  const flashattn::BackwardArgs b = in.bwd_args();
  const fa_backward_args cb{to_c(b.q),  to_c(b.k),  to_c(b.v),  to_c(b.out), to_c(b.dout),
                            to_c(b.lse), to_c(b.dq), to_c(b.dk), to_c(b.dv),  to_c(b.options)};
  const fa_status s = fa_backward_varlen(&cb, &cv);
  if (dev == Device::CPU) {
    ASSERT_EQ(s, FA_OK) << fa_last_error();
    EXPECT_EQ(in.dq.read(), dq_cpp);
  }
  // A null varlen descriptor is an argument error, not a crash.
  EXPECT_EQ(fa_forward_varlen(&ca, nullptr), FA_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(fa_last_error(), "varlen"), nullptr);
}

// A sequence's keys and values that are not finite stay out of the other
// sequences: with sequence 1's K and V all NaN, sequence 0's output (whose
// last key tile is partial: 45 keys) is finite and bit for bit what it was
// with finite data, and sequence 1's is NaN, as the reference has it. (On
// the H200 the Hopper forward loads sequence 0's last key tile from the
// packed rows, sequence 1's included, and must zero those V rows: P is 0
// there, 0 * NaN is not.) Head dims 64, 128, 192, 256: each tile shape.
TEST(VarlenIsolation, NonFiniteNextSequenceStaysOut) {
  const Device dev = test_devices()[0];
  if (!device_usable(dev)) GTEST_SKIP() << "no usable device";
  for (int64_t d : {64, 128, 192, 256}) {
    SCOPED_TRACE("head_dim " + std::to_string(d));
    VarlenCase c;
    c.dtype = DType::BF16;
    c.lens_q = {37, 50};
    c.lens_k = {45, 70};
    c.heads_q = 2;
    c.heads_kv = 1;
    c.head_dim = d;
    VarlenInstance in = make_varlen(dev, c, false);
    flashattn::Status st = flashattn::forward(in.fwd_args());
    if (skip_if_unsupported(dev, st)) GTEST_SKIP() << st.message;
    ASSERT_TRUE(st.ok()) << st.message;
    const std::vector<double> finite_out = in.out.read();
    const size_t row = static_cast<size_t>(c.heads_q * d), rows0 = 37;
    std::vector<double> k = in.kd, v = in.vd;
    const size_t kv_row = static_cast<size_t>(c.heads_kv * d);
    for (size_t i = 45 * kv_row; i < k.size(); ++i) k[i] = v[i] = std::nan("");
    in.k.write(k);
    in.v.write(v);
    st = flashattn::forward(in.fwd_args());
    ASSERT_TRUE(st.ok()) << st.message;
    const std::vector<double> out = in.out.read();
    for (size_t i = 0; i < rows0 * row; ++i) {
      ASSERT_TRUE(std::isfinite(out[i])) << "sequence 0, element " << i;
      ASSERT_EQ(out[i], finite_out[i]) << "sequence 0, element " << i;
    }
    for (size_t i = rows0 * row; i < out.size(); ++i) {
      ASSERT_TRUE(std::isnan(out[i])) << "sequence 1, element " << i;
    }
  }
}

// The backward's isolation: with sequence 1's Q, K, V and dO all NaN,
// sequence 0's dQ, dK and dV are finite and bit for bit what they were with
// finite data, and sequence 1's are NaN. Sequence 0 ends inside a query tile
// (37 queries) and inside a key tile (45 keys) at every tile shape, so the
// Hopper backward's TMA loads bring sequence 1's rows into both; it must
// zero them before its products (0 * NaN is NaN). Head dims 64, 128, 192,
// 256: each tile shape, deterministic or not.
TEST(VarlenIsolation, BackwardNonFiniteNextSequenceStaysOut) {
  const Device dev = test_devices()[0];
  if (!device_usable(dev)) GTEST_SKIP() << "no usable device";
  for (int64_t d : {64, 128, 192, 256}) {
    for (bool det : {false, true}) {
      SCOPED_TRACE("head_dim " + std::to_string(d) + (det ? ", deterministic" : ""));
      VarlenCase c;
      c.dtype = DType::BF16;
      c.lens_q = {37, 50};
      c.lens_k = {45, 70};
      c.heads_q = 4;
      c.heads_kv = 2;
      c.head_dim = d;
      c.deterministic = det;
      VarlenInstance in = make_varlen(dev, c, true);
      flashattn::Status st = flashattn::forward(in.fwd_args());
      if (skip_if_unsupported(dev, st)) GTEST_SKIP() << st.message;
      ASSERT_TRUE(st.ok()) << st.message;
      st = flashattn::backward(in.bwd_args());
      if (skip_if_unsupported(dev, st)) GTEST_SKIP() << st.message;
      ASSERT_TRUE(st.ok()) << st.message;
      const std::vector<double> dq0 = in.dq.read(), dk0 = in.dk.read(), dv0 = in.dv.read();

      const size_t q_row = static_cast<size_t>(c.heads_q * d), k_row = static_cast<size_t>(c.heads_kv * d);
      const size_t q_end = 37 * q_row, k_end = 45 * k_row;  // sequence 0's elements
      std::vector<double> q = in.qd, dout = in.dod, k = in.kd, v = in.vd;
      for (size_t i = q_end; i < q.size(); ++i) q[i] = dout[i] = std::nan("");
      for (size_t i = k_end; i < k.size(); ++i) k[i] = v[i] = std::nan("");
      in.q.write(q);
      in.dout.write(dout);
      in.k.write(k);
      in.v.write(v);
      st = flashattn::forward(in.fwd_args());
      ASSERT_TRUE(st.ok()) << st.message;
      st = flashattn::backward(in.bwd_args());
      ASSERT_TRUE(st.ok()) << st.message;
      const std::vector<double> dq = in.dq.read(), dk = in.dk.read(), dv = in.dv.read();
      auto same_then_nan = [](const char* what, const std::vector<double>& got,
                              const std::vector<double>& finite, size_t end) {
        for (size_t i = 0; i < end; ++i) {
          ASSERT_TRUE(std::isfinite(got[i])) << what << ", sequence 0, element " << i;
          ASSERT_EQ(got[i], finite[i]) << what << ", sequence 0, element " << i;
        }
        for (size_t i = end; i < got.size(); ++i) {
          ASSERT_TRUE(std::isnan(got[i])) << what << ", sequence 1, element " << i;
        }
      };
      same_then_nan("dq", dq, dq0, q_end);
      same_then_nan("dk", dk, dk0, k_end);
      same_then_nan("dv", dv, dv0, k_end);
    }
  }
}

// Equal lengths: the varlen call and the padded call do the same arithmetic.
TEST(VarlenMatchesPadded, EqualLengthsSameBits) {
  const Device dev = test_devices()[0];
  // On CUDA the padded call may take the Hopper kernel, the varlen one the sm80 kernel.
  if (dev != Device::CPU) GTEST_SKIP() << "same-kernel comparison: CPU only";
  VarlenCase c = small_case();
  c.lens_q = {300, 300};
  c.lens_k = {300, 300};
  VarlenInstance in = make_varlen(dev, c, false);
  ASSERT_TRUE(flashattn::forward(in.fwd_args()).ok());
  const auto out_v = in.out.read();
  flashattn::ForwardArgs a = in.fwd_args();
  a.varlen = {};
  auto as4 = [](flashattn::TensorView t, int64_t B) {
    flashattn::TensorView r = t;
    r.ndim = 4;
    r.shape[0] = B;
    r.shape[1] = t.shape[0] / B;
    r.shape[2] = t.shape[1];
    r.shape[3] = t.shape[2];
    r.stride[0] = t.stride[0] * r.shape[1];
    r.stride[1] = t.stride[0];
    r.stride[2] = t.stride[1];
    r.stride[3] = 1;
    return r;
  };
  a.q = as4(a.q, 2);
  a.k = as4(a.k, 2);
  a.v = as4(a.v, 2);
  a.out = as4(a.out, 2);
  a.lse = {};
  ASSERT_TRUE(flashattn::forward(a).ok());
  EXPECT_EQ(in.out.read(), out_v);
}

}  // namespace
}  // namespace fa_test

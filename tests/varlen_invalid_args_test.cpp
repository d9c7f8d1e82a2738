// Invalid varlen and KV-cache arguments: each returns InvalidArgument, names
// the argument, and writes nothing (outputs and the caches keep every byte;
// in particular no append happens before a failed check). Each case starts
// from a valid call (checked to succeed) and breaks one thing. CPU tensors:
// the index values are validated on the host there.
#include <gtest/gtest.h>

#include <cctype>
#include <functional>
#include <string>
#include <vector>

#include "flashattn/flashattn.hpp"
#include "support/harness.hpp"
#include "support/rng.hpp"
#include "support/varlen.hpp"

namespace fa_test {
namespace {

using flashattn::ErrorCode;

bool names(const std::string& msg, const std::string& name) {
  auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t p = msg.find(name); p != std::string::npos; p = msg.find(name, p + 1)) {
    const bool left = p == 0 || !ident(msg[p - 1]);
    const bool right = p + name.size() >= msg.size() || !ident(msg[p + name.size()]);
    if (left && right) return true;
  }
  return false;
}

VarlenCase base_varlen() {
  VarlenCase c;
  c.dtype = DType::F16;
  c.lens_q = {5, 0, 9};
  c.lens_k = {7, 3, 9};
  c.heads_q = 4;
  c.heads_kv = 2;
  c.head_dim = 64;
  c.causal = true;
  return c;
}

struct VarlenBad {
  std::string label;
  std::function<void(VarlenInstance&, flashattn::ForwardArgs&, flashattn::BackwardArgs&)> edit;
  std::string arg;
};

std::vector<VarlenBad> varlen_bad() {
  using FA = flashattn::ForwardArgs;
  using BA = flashattn::BackwardArgs;
  std::vector<VarlenBad> v;
  auto both = [&](std::string l, std::function<void(flashattn::Varlen&, VarlenInstance&)> f, std::string arg) {
    v.push_back({l, [f](VarlenInstance& in, FA& a, BA& b) { f(a.varlen, in); f(b.varlen, in); }, arg});
  };
  both("cu_k_missing", [](flashattn::Varlen& vl, VarlenInstance&) { vl.cu_seqlens_k = {}; }, "cu_seqlens_k");
  both("cu_q_float", [](flashattn::Varlen& vl, VarlenInstance&) { vl.cu_seqlens_q.dtype = DType::F32; },
       "cu_seqlens_q");
  both("cu_k_short", [](flashattn::Varlen& vl, VarlenInstance&) { vl.cu_seqlens_k.shape[0] -= 1; },
       "cu_seqlens_k");
  both("cu_q_2d", [](flashattn::Varlen& vl, VarlenInstance&) { vl.cu_seqlens_q.ndim = 2; }, "cu_seqlens_q");
  both("max_q_small", [](flashattn::Varlen& vl, VarlenInstance&) { vl.max_seqlen_q = 8; }, "max_seqlen_q");
  both("max_k_negative", [](flashattn::Varlen& vl, VarlenInstance&) { vl.max_seqlen_k = -1; }, "max_seqlen_k");
  auto with_cu = [&](std::string l, std::vector<int32_t> cu, bool q_side, std::string arg) {
    v.push_back({l, [cu, q_side](VarlenInstance& in, FA& a, BA& b) {
                   Tensor& t = q_side ? in.cu_q : in.cu_k;
                   t.write(std::vector<double>(cu.begin(), cu.end()));
                   (void)a;
                   (void)b;
                 },
                 arg});
  };
  with_cu("cu_q_not_monotone", {0, 5, 4, 14}, true, "cu_seqlens_q");
  with_cu("cu_q_not_from_zero", {1, 5, 5, 14}, true, "cu_seqlens_q");
  with_cu("cu_k_past_end", {0, 7, 10, 20}, false, "cu_seqlens_k");
  v.push_back({"q_4d", [](VarlenInstance&, FA& a, BA& b) { a.q.ndim = 4; b.q.ndim = 4; }, "q"});
  v.push_back({"k_heads", [](VarlenInstance&, FA& a, BA& b) { a.k.shape[1] = 3; b.k.shape[1] = 3; }, "v"});
  v.push_back({"lse_padded_shape", [](VarlenInstance&, FA& a, BA& b) {
                 a.lse.ndim = b.lse.ndim = 3;
                 a.lse.shape[2] = b.lse.shape[2] = 1;
               },
               "lse"});
  v.push_back({"dk_total", [](VarlenInstance&, FA&, BA& b) { b.dk.shape[0] -= 1; }, "dk"});
  return v;
}

class VarlenInvalid : public ::testing::TestWithParam<VarlenBad> {};

TEST_P(VarlenInvalid, ErrorNamesArgumentAndWritesNothing) {
  VarlenInstance in = make_varlen(Device::CPU, base_varlen(), true);
  ASSERT_TRUE(flashattn::forward(in.fwd_args()).ok());
  ASSERT_TRUE(flashattn::backward(in.bwd_args()).ok());
  flashattn::ForwardArgs a = in.fwd_args();
  flashattn::BackwardArgs b = in.bwd_args();
  GetParam().edit(in, a, b);
  {
    CallGuard g({&in.q, &in.k, &in.v, &in.cu_q, &in.cu_k}, {&in.out, &in.lse});
    const flashattn::Status st = flashattn::forward(a);
    const bool fwd_case = GetParam().label != "dk_total";
    if (fwd_case) {
      EXPECT_EQ(st.code, ErrorCode::InvalidArgument) << st.message;
      EXPECT_TRUE(names(st.message, GetParam().arg)) << st.message;
      EXPECT_TRUE(g.untouched());
    }
  }
  CallGuard g({&in.q, &in.k, &in.v, &in.out, &in.dout, &in.lse, &in.cu_q, &in.cu_k},
              {&in.dq, &in.dk, &in.dv});
  const flashattn::Status st = flashattn::backward(b);
  EXPECT_EQ(st.code, ErrorCode::InvalidArgument) << st.message;
  EXPECT_TRUE(names(st.message, GetParam().arg)) << st.message;
  EXPECT_TRUE(g.untouched());
}

INSTANTIATE_TEST_SUITE_P(Cases, VarlenInvalid, ::testing::ValuesIn(varlen_bad()),
                         [](const ::testing::TestParamInfo<VarlenBad>& i) { return i.param.label; });

// ---- KV cache -------------------------------------------------------------------

// A valid call with append: B = 2, Sq = 1, Hq = 4, Hkv = 2, D = 64. Paged:
// page 16, 3 pages per sequence (capacity 48), 8 pages. Or contiguous, with
// flash-attn's optional inputs: 5 cache entries of capacity 48 picked by
// cache_batch_idx, cache_leftpad, and rotary tables for rotary_dim 32 over
// 64 positions.
struct KvSetup {
  Tensor q, kc, vc, lens, table, kn, vn, out, lse, idx, left, cos, sin;
  flashattn::KvCacheArgs args() const {
    flashattn::KvCacheArgs a;
    a.q = q.view();
    a.k_cache = kc.view();
    a.v_cache = vc.view();
    a.cache_seqlens = lens.view();
    a.block_table = table.view();
    a.k_new = kn.view();
    a.v_new = vn.view();
    a.out = out.view();
    a.lse = lse.view();
    a.cache_batch_idx = idx.view();
    a.cache_leftpad = left.view();
    a.rotary_cos = cos.view();
    a.rotary_sin = sin.view();
    return a;
  }
  std::vector<const Tensor*> inputs() const {
    std::vector<const Tensor*> r;
    for (const Tensor* t : {&q, &kc, &vc, &lens, &table, &kn, &vn, &idx, &left, &cos, &sin})
      if (t->buf) r.push_back(t);
    return r;
  }
};

KvSetup kv_setup(bool paged) {
  const Device d = Device::CPU;
  KvSetup s;
  s.q = make_bshd(d, DType::F16, Layout::BSHD, 2, 1, 4, 64);
  const int64_t entries = paged ? 8 : 5, rows = paged ? 16 : 48;
  s.kc = make_bshd(d, DType::F16, Layout::BSHD, entries, rows, 2, 64);
  s.vc = make_bshd(d, DType::F16, Layout::BSHD, entries, rows, 2, 64);
  s.kn = make_bshd(d, DType::F16, Layout::BSHD, 2, 2, 2, 64);
  s.vn = make_bshd(d, DType::F16, Layout::BSHD, 2, 2, 2, 64);
  for (const Tensor* t : {&s.q, &s.kc, &s.vc, &s.kn, &s.vn}) fill_randn(*t);
  s.lens = make_i32(d, {30, 46}, {2});
  if (paged) {
    s.table = make_i32(d, {7, 0, 3, 5, 1, 2}, {2, 3});
  } else {
    s.idx = make_i32(d, {3, 1}, {2});
    s.left = make_i32(d, {2, 46}, {2});
    s.cos = make_contiguous(d, DType::F16, {64, 16});
    s.sin = make_contiguous(d, DType::F16, {64, 16});
    fill_randn(s.cos);
    fill_randn(s.sin);
  }
  s.out = make_bshd(d, DType::F16, Layout::BSHD, 2, 1, 4, 64);
  s.lse = make_lse(d, 2, 4, 1);
  return s;
}

struct KvBad {
  std::string label;
  std::function<void(KvSetup&, flashattn::KvCacheArgs&)> edit;
  std::string arg;
  bool paged = true;  // which kv_setup the edit starts from
};

std::vector<KvBad> kv_bad() {
  using A = flashattn::KvCacheArgs;
  return {
      {"capacity_overflow", [](KvSetup& s, A&) { s.lens.write({30, 47}); }, "cache_seqlens"},
      {"negative_len", [](KvSetup& s, A&) { s.lens.write({-1, 3}); }, "cache_seqlens"},
      {"page_out_of_range", [](KvSetup& s, A&) { s.table.write({7, 0, 3, 5, 8, 2}); }, "block_table"},
      {"page_negative", [](KvSetup& s, A&) { s.table.write({7, -2, 3, 5, 1, 2}); }, "block_table"},
      {"table_batch", [](KvSetup&, A& a) { a.block_table.shape[0] = 1; }, "block_table"},
      {"table_float", [](KvSetup&, A& a) { a.block_table.dtype = DType::F32; }, "block_table"},
      {"page_size_not_16", [](KvSetup&, A& a) {
         a.k_cache.shape[1] = a.v_cache.shape[1] = 12;
       }, "k_cache"},
      {"v_cache_shape", [](KvSetup&, A& a) { a.v_cache.shape[0] = 7; }, "v_cache"},
      // forward() takes v with a head dim of its own; the KV cache does not.
      {"v_cache_head_dim", [](KvSetup&, A& a) { a.v_cache.shape[3] = a.out.shape[3] = 32; }, "v_cache"},
      {"k_new_alone", [](KvSetup&, A& a) { a.v_new = {}; }, "v_new"},
      {"k_new_heads", [](KvSetup&, A& a) { a.k_new.shape[2] = 1; }, "k_new"},
      {"lens_float", [](KvSetup&, A& a) { a.cache_seqlens.dtype = DType::F32; }, "cache_seqlens"},
      {"lens_batch", [](KvSetup&, A& a) { a.cache_seqlens.shape[0] = 3; }, "cache_seqlens"},
      {"q_dtype", [](KvSetup&, A& a) { a.k_cache.dtype = DType::BF16; a.v_cache.dtype = DType::BF16; },
       "k_cache"},
      {"out_overlaps_cache", [](KvSetup&, A& a) { a.out.data = a.k_cache.data; }, "out"},
      {"k_new_in_cache", [](KvSetup&, A& a) { a.k_new.data = a.k_cache.data; }, "k_cache"},
      {"num_splits", [](KvSetup&, A& a) { a.num_splits = -3; }, "num_splits"},
      {"contiguous_batch", [](KvSetup&, A& a) { a.block_table = {}; }, "k_cache"},
      {"idx_with_pages", [](KvSetup& s, A& a) { a.cache_batch_idx = s.lens.view(); }, "cache_batch_idx"},
      {"leftpad_with_pages", [](KvSetup& s, A& a) { a.cache_leftpad = s.lens.view(); }, "cache_leftpad"},
      // Contiguous cache with cache_batch_idx, cache_leftpad and rotary.
      {"idx_out_of_range", [](KvSetup& s, A&) { s.idx.write({3, 5}); }, "cache_batch_idx", false},
      {"idx_negative", [](KvSetup& s, A&) { s.idx.write({-1, 0}); }, "cache_batch_idx", false},
      {"idx_shared_when_appending", [](KvSetup& s, A&) { s.idx.write({4, 4}); }, "cache_batch_idx", false},
      {"idx_batch", [](KvSetup&, A& a) { a.cache_batch_idx.shape[0] = 1; }, "cache_batch_idx", false},
      {"idx_float", [](KvSetup&, A& a) { a.cache_batch_idx.dtype = DType::F32; }, "cache_batch_idx", false},
      {"no_idx_batch_differs", [](KvSetup&, A& a) { a.cache_batch_idx = {}; }, "k_cache", false},
      {"leftpad_past_len", [](KvSetup& s, A&) { s.left.write({31, 0}); }, "cache_leftpad", false},
      {"leftpad_negative", [](KvSetup& s, A&) { s.left.write({0, -1}); }, "cache_leftpad", false},
      {"leftpad_batch", [](KvSetup&, A& a) { a.cache_leftpad.shape[0] = 3; }, "cache_leftpad", false},
      {"rotary_sin_alone", [](KvSetup&, A& a) { a.rotary_cos = {}; }, "rotary_cos", false},
      {"rotary_cos_alone", [](KvSetup&, A& a) { a.rotary_sin = {}; }, "rotary_sin", false},
      {"rotary_without_append", [](KvSetup&, A& a) { a.k_new = a.v_new = {}; }, "rotary_cos", false},
      {"rotary_shapes_differ", [](KvSetup&, A& a) { a.rotary_sin.shape[1] = 8; }, "rotary_sin", false},
      {"rotary_dim_over_head_dim", [](KvSetup&, A& a) {
         a.rotary_cos.shape[1] = a.rotary_sin.shape[1] = 33;
         a.rotary_cos.shape[0] = a.rotary_sin.shape[0] = 16;
       }, "rotary_cos", false},
      {"rotary_dtype", [](KvSetup&, A& a) { a.rotary_cos.dtype = DType::BF16; }, "rotary_cos", false},
      {"rotary_not_contiguous", [](KvSetup&, A& a) { a.rotary_sin.stride[1] = 2; a.rotary_sin.shape[1] = 8;
                                                     a.rotary_cos.shape[1] = 8; }, "rotary_sin", false},
      {"rotary_too_few_positions", [](KvSetup&, A& a) { a.rotary_cos.shape[0] = a.rotary_sin.shape[0] = 47; },
       "rotary_cos", false},
      {"rotary_1d", [](KvSetup&, A& a) { a.rotary_cos.ndim = 1; }, "rotary_cos", false},
      {"rotary_overlaps_cache", [](KvSetup&, A& a) { a.rotary_cos.data = a.k_cache.data; }, "k_cache", false},
  };
}

class KvInvalid : public ::testing::TestWithParam<KvBad> {};

TEST_P(KvInvalid, ErrorNamesArgumentAndWritesNothing) {
  const bool paged = GetParam().paged;
  KvSetup s = kv_setup(paged);
  {
    KvSetup ok = kv_setup(paged);
    const flashattn::Status st = flashattn::forward_kvcache(ok.args());
    ASSERT_TRUE(st.ok()) << st.message;
  }
  flashattn::KvCacheArgs a = s.args();
  GetParam().edit(s, a);
  CallGuard g(s.inputs(), {&s.out, &s.lse});
  const flashattn::Status st = flashattn::forward_kvcache(a);
  EXPECT_EQ(st.code, ErrorCode::InvalidArgument) << st.message;
  EXPECT_TRUE(names(st.message, GetParam().arg)) << st.message;
  EXPECT_TRUE(g.untouched());
}

INSTANTIATE_TEST_SUITE_P(Cases, KvInvalid, ::testing::ValuesIn(kv_bad()),
                         [](const ::testing::TestParamInfo<KvBad>& i) { return i.param.label; });

}  // namespace
}  // namespace fa_test

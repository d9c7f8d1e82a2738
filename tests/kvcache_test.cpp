// KV-cache decoding (forward_kvcache) against the fp64 reference over each
// sequence's old cache plus the appended tokens: contiguous and paged caches
// (page sizes 16 / 48 / 256, pages shuffled), append then attend, GQA, causal
// with Sq > 1, zero-length caches, head dims 64 to 256, and split-KV piece
// counts from 1 to the most allowed (each merged result must pass the rule on
// its own); flash-attn's rotary embedding, cache_leftpad and cache_batch_idx;
// NaN in the cache rows a sequence does not see; query chunks long enough for
// the Hopper forward, with softcap and a window too, contiguous or paged,
// GQA packed into its tiles. Also the C ABI.
#include <gtest/gtest.h>

#include <cstring>

#include "flashattn/flashattn.h"
#include "support/c_abi.hpp"
#include "support/harness.hpp"
#include "support/rng.hpp"
#include "support/varlen.hpp"

namespace fa_test {
namespace {

KvCase kv(DType dt, int64_t sq, int64_t hq, int64_t hkv, int64_t d, std::vector<int64_t> lens,
          int64_t s_new, int64_t capacity, int64_t page, bool causal, int32_t splits = 0) {
  KvCase c;
  c.dtype = dt;
  c.seqlen_q = sq;
  c.heads_q = hq;
  c.heads_kv = hkv;
  c.head_dim = d;
  c.cache_lens = lens;
  c.s_new = s_new;
  c.capacity = capacity;
  c.page_size = page;
  c.causal = causal;
  c.num_splits = splits;
  return c;
}

KvCase rope(KvCase c, int64_t rotary_dim, bool interleaved) {
  c.rotary_dim = rotary_dim;
  c.rotary_interleaved = interleaved;
  return c;
}
KvCase leftpad(KvCase c, std::vector<int64_t> lp) {
  c.leftpad = std::move(lp);
  return c;
}
KvCase by_idx(KvCase c, int64_t extra_entries) {
  c.extra_entries = extra_entries;
  return c;
}
KvCase nan_rest(KvCase c) {
  c.nan_outside = true;
  return c;
}
KvCase softcap(KvCase c, float cap) {
  c.softcap = cap;
  return c;
}
KvCase window(KvCase c, int64_t left) {
  c.window_left = left;
  return c;
}

std::vector<KvCase> kv_cases() {
  std::vector<KvCase> v;
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    v.push_back(kv(dt, 1, 8, 1, 64, {17, 0, 300}, 0, 320, 0, false));
    v.push_back(kv(dt, 1, 8, 2, 128, {17, 0, 300}, 1, 320, 16, false));
  }
  for (int64_t page : {16, 48, 256}) {
    v.push_back(kv(DType::F16, 1, 8, 1, 128, {1000, 5, 47}, 1, 1100, page, true));
    v.push_back(kv(DType::BF16, 4, 8, 2, 128, {100, 0}, 3, 300, page, true));  // append then attend, causal
  }
  v.push_back(kv(DType::F16, 3, 4, 4, 128, {0, 29}, 3, 40, 0, true));        // cache empty before append
  v.push_back(kv(DType::F16, 100, 4, 1, 128, {150, 3}, 17, 200, 0, true));   // Sq*group > tile: per-head path
  v.push_back(kv(DType::F16, 100, 4, 1, 128, {150, 3}, 17, 208, 16, true));  // ... paged
  v.push_back(kv(DType::F16, 2, 2, 1, 128, {0, 0}, 0, 64, 0, true));         // nothing to see: O = 0
  for (int32_t s : {1, 2, 3, 5, 8, 64})
    v.push_back(kv(DType::F16, 1, 8, 1, 128, {2000, 777}, 1, 2048, 0, false, s));
  v.push_back(kv(DType::F32, 2, 16, 2, 64, {3000}, 2, 3072, 48, true, 7));
  v.push_back(kv(DType::BF16, 2, 16, 2, 128, {3000}, 2, 3072, 48, true, 7));
  v.push_back(kv(DType::F16, 1, 32, 4, 128, {5000, 1, 64}, 1, 5120, 256, false));  // heuristic split
  // Decode tiles at the other head dims (96 pads its shared rows; a 48-row
  // page puts a tile boundary inside a page).
  v.push_back(kv(DType::F16, 1, 8, 1, 256, {700, 33}, 1, 768, 48, false));
  v.push_back(kv(DType::BF16, 1, 4, 2, 192, {513, 0, 64}, 0, 520, 0, false, 5));
  v.push_back(kv(DType::BF16, 2, 8, 2, 96, {300}, 1, 320, 16, true));
  // fp32 decode steps whose query columns (Sq x group) are not a power of
  // two: the CPU's dot_rows pads them to 4 and 8 (zero rows), head dim 96.
  v.push_back(kv(DType::F32, 3, 2, 2, 128, {77, 5}, 0, 96, 0, true));
  v.push_back(kv(DType::F32, 3, 4, 2, 96, {77, 5}, 1, 96, 0, true));
  // More KV heads than the CPU decode path runs together (8): two head groups.
  v.push_back(kv(DType::F32, 1, 24, 12, 64, {500, 3}, 1, 512, 0, false));
  v.push_back(kv(DType::BF16, 2, 24, 12, 128, {300}, 2, 320, 16, true));
  // The most pieces a row may have (kMaxSplits = 128): every thread of the
  // combine block holds a piece's LSE.
  v.push_back(kv(DType::BF16, 1, 8, 1, 128, {8300, 9000}, 0, 9000, 0, false, 128));
  // flash-attn's optional inputs. Rotary: GPT-NeoX and GPT-J pairs over part
  // of or the whole head dim; causal puts q row i at cache_seqlens + i, non-
  // causal every row at cache_seqlens (Sq > 1 both ways); paged too.
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    v.push_back(rope(kv(dt, 1, 8, 2, 128, {17, 0, 300}, 1, 320, 0, false), 64, false));
  v.push_back(rope(kv(DType::BF16, 1, 8, 2, 128, {17, 0, 300}, 1, 320, 0, false), 64, true));
  v.push_back(rope(kv(DType::F16, 4, 8, 2, 128, {100, 0}, 3, 300, 0, true), 128, true));
  v.push_back(rope(kv(DType::F16, 4, 8, 2, 128, {100, 0}, 3, 300, 0, true), 128, false));
  v.push_back(rope(kv(DType::BF16, 3, 4, 4, 64, {50, 7}, 2, 80, 16, false), 32, true));
  v.push_back(rope(kv(DType::F16, 2, 8, 1, 96, {700, 1}, 1, 768, 48, false, 3), 96, false));
  v.push_back(rope(kv(DType::F32, 2, 4, 1, 64, {40}, 2, 64, 0, true), 6, false));  // CPU only (CUDA: 16s)
  // cache_leftpad: keys from row leftpad on (a sequence with none left: O = 0).
  v.push_back(leftpad(kv(DType::F16, 1, 8, 2, 128, {300, 17, 64}, 1, 320, 0, false), {100, 17, 3}));
  v.push_back(leftpad(kv(DType::BF16, 4, 8, 2, 128, {100, 9}, 3, 300, 0, true), {37, 9}));
  v.push_back(leftpad(kv(DType::F32, 2, 4, 1, 64, {100, 50}, 0, 128, 0, true), {99, 0}));
  v.push_back(leftpad(kv(DType::F16, 1, 8, 1, 128, {2000, 777}, 1, 2048, 0, false, 5), {1500, 0}));
  // cache_batch_idx: sequences on shuffled entries of a larger cache.
  v.push_back(by_idx(kv(DType::F16, 1, 8, 2, 128, {17, 0, 300}, 1, 320, 0, false), 3));
  v.push_back(by_idx(kv(DType::BF16, 4, 8, 2, 128, {100, 0}, 3, 300, 0, true), 0));
  v.push_back(by_idx(kv(DType::F32, 1, 16, 2, 64, {3000}, 2, 3072, 0, true, 7), 2));
  v.push_back(by_idx(kv(DType::F16, 100, 4, 1, 128, {150, 3}, 17, 200, 0, true), 1));
  // All three together.
  v.push_back(by_idx(leftpad(rope(kv(DType::BF16, 2, 8, 2, 128, {300, 40, 5}, 2, 320, 0, true), 64, false),
                             {12, 40, 0}),
                     2));
  // Cache rows outside a sequence's keys hold NaN (a cache from torch.empty).
  v.push_back(nan_rest(kv(DType::F16, 1, 8, 2, 128, {17, 0, 300}, 1, 320, 0, false)));
  v.push_back(nan_rest(leftpad(kv(DType::BF16, 4, 8, 2, 128, {100, 9}, 3, 300, 0, true), {37, 9})));
  v.push_back(nan_rest(kv(DType::F16, 40, 8, 2, 128, {150, 3}, 17, 200, 0, true)));  // 160 rows: not packed
  // Query rows the sm80 plan would not pack into one tile per GQA group run
  // on the Hopper forward (chunked prefill; dispatch.cpp
  // kvcache_fills_sm90_tiles): its tiles of 128 / 192 rows, the
  // tile head dims 64 / 128 / 192 / 256 and one between (96), a second query
  // tile (200 rows), GQA, Sq > or < the keys, empty caches, and the optional
  // inputs.
  v.push_back(kv(DType::F16, 100, 8, 2, 128, {150, 3, 0}, 17, 300, 0, true));
  v.push_back(nan_rest(kv(DType::BF16, 64, 4, 4, 64, {500, 70}, 0, 640, 0, false)));
  v.push_back(nan_rest(kv(DType::BF16, 200, 8, 1, 128, {1000, 1}, 5, 1100, 0, true)));
  v.push_back(kv(DType::F16, 77, 4, 2, 256, {300, 129}, 3, 320, 0, true));
  v.push_back(nan_rest(kv(DType::BF16, 65, 4, 1, 192, {250}, 0, 256, 0, false)));
  v.push_back(kv(DType::F16, 96, 2, 2, 96, {90, 33}, 1, 128, 0, true));
  v.push_back(nan_rest(leftpad(kv(DType::BF16, 128, 8, 2, 128, {300, 17, 64}, 1, 320, 0, false), {100, 17, 3})));
  v.push_back(rope(kv(DType::BF16, 80, 8, 2, 128, {100, 0}, 3, 300, 0, true), 128, false));
  v.push_back(by_idx(leftpad(rope(kv(DType::F16, 70, 8, 2, 64, {300, 40, 5}, 2, 320, 0, true), 64, true),
                             {12, 40, 0}),
                     2));
  v.push_back(softcap(kv(DType::F16, 96, 4, 1, 128, {400}, 2, 512, 0, true), 30.0f));
  v.push_back(window(kv(DType::BF16, 150, 4, 2, 64, {700}, 0, 768, 0, true), 100));
  // Split-KV asked for: the Hopper forward's pieces and the combine kernel;
  // with causal rows and 7 pieces, the top query tile's short key range
  // leaves some pieces empty.
  v.push_back(kv(DType::F16, 64, 4, 1, 128, {2000}, 0, 2048, 0, false, 4));
  v.push_back(nan_rest(kv(DType::BF16, 200, 4, 1, 128, {1000, 60}, 0, 1024, 0, true, 7)));
  v.push_back(kv(DType::F16, 64, 2, 1, 128, {0, 5}, 0, 64, 0, true, 3));  // pieces with no key: O = 0
  // Paged caches on the Hopper forward: a page of 16 rows, pages sharing no
  // more than 16 rows with the tile (48, 32, 64 at head dims 64, 192, 256:
  // tiles of 128, 112, 80 keys) -- these are gathered by cp.async
  // (paged_gather.cuh; head dim 96 zero-fills k's and v's last 32 columns)
  // --, pages of whole key tiles (128, 256) loaded as TMA boxes, split-KV,
  // rotary, softcap, a window, sequences with no keys; table entries past
  // each sequence's pages are -1 (check_kvcache). The GPU runs also force
  // every paged case through each path (FLASHATTN_SM90_PAGED_GATHER=1 / 0;
  // bench/results/h200-paged-gather-20261204/).
  v.push_back(kv(DType::BF16, 100, 4, 1, 128, {150, 3}, 17, 208, 16, true));
  v.push_back(nan_rest(kv(DType::F16, 64, 4, 4, 64, {500, 70}, 0, 640, 48, false)));
  v.push_back(nan_rest(kv(DType::BF16, 200, 8, 1, 128, {1000, 1}, 5, 1100, 256, true)));
  v.push_back(kv(DType::F16, 77, 4, 2, 256, {300, 129}, 3, 320, 64, true));
  v.push_back(nan_rest(kv(DType::BF16, 65, 4, 1, 192, {250}, 0, 256, 32, false)));
  v.push_back(kv(DType::F16, 96, 2, 2, 96, {90, 33}, 1, 128, 16, true));
  v.push_back(nan_rest(kv(DType::BF16, 200, 4, 1, 128, {1000, 60}, 0, 1024, 128, true, 7)));
  v.push_back(rope(kv(DType::BF16, 80, 8, 2, 128, {100, 0}, 3, 300, 16, true), 128, false));
  v.push_back(softcap(kv(DType::F16, 96, 4, 1, 128, {400}, 2, 512, 48, true), 30.0f));
  v.push_back(window(kv(DType::BF16, 150, 4, 2, 64, {700}, 0, 768, 16, true), 100));
  v.push_back(kv(DType::F16, 64, 2, 2, 128, {0, 5}, 0, 64, 16, true, 3));
  // GQA packed into the Hopper tiles (chunks of at most 64 rows, groups of
  // 2-16; sm90_forward.cu pack_heads_for): 128-row tiles of 8 positions x 16
  // heads to 64 x 2, head dims 64 / 128 / 192 / 256, causal rows (the first,
  // partial tile), split-KV asked for and by the heuristic, paged, the
  // optional inputs, softcap and a window.
  v.push_back(kv(DType::BF16, 16, 8, 1, 128, {1000, 5, 0}, 16, 1100, 0, true));
  v.push_back(nan_rest(kv(DType::F16, 32, 16, 4, 128, {700, 33}, 0, 768, 16, true)));
  v.push_back(kv(DType::BF16, 8, 16, 1, 64, {300, 1}, 2, 320, 0, true));
  v.push_back(kv(DType::F16, 48, 4, 2, 256, {300, 129}, 3, 320, 0, true));
  v.push_back(nan_rest(kv(DType::BF16, 16, 8, 1, 192, {250}, 0, 256, 0, false)));
  v.push_back(kv(DType::BF16, 32, 8, 2, 128, {5000}, 0, 5120, 0, false, 5));
  v.push_back(kv(DType::F16, 24, 32, 8, 128, {9000}, 0, 9216, 0, true));
  v.push_back(softcap(kv(DType::F16, 32, 8, 2, 128, {400}, 2, 512, 48, true), 30.0f));
  v.push_back(window(kv(DType::BF16, 40, 8, 2, 64, {700}, 0, 768, 0, true), 100));
  v.push_back(rope(kv(DType::BF16, 20, 16, 2, 128, {100, 0}, 3, 300, 0, true), 128, false));
  v.push_back(by_idx(leftpad(kv(DType::F16, 30, 8, 2, 128, {300, 40, 5}, 2, 320, 0, true), {12, 40, 0}), 2));
  // Groups that do not divide 128 rows (7, 3, 5, 6, 12: the tile's last 2-8
  // rows hold no query), paged, split-KV, head dims 64-256.
  v.push_back(kv(DType::BF16, 16, 28, 4, 128, {1000, 33}, 1, 1100, 0, true));
  v.push_back(nan_rest(kv(DType::F16, 40, 12, 4, 64, {500, 70}, 0, 640, 16, true)));
  v.push_back(kv(DType::BF16, 24, 40, 8, 128, {3000}, 0, 3072, 0, false, 3));
  v.push_back(kv(DType::F16, 20, 12, 2, 256, {300, 129}, 3, 320, 0, true));
  v.push_back(nan_rest(kv(DType::BF16, 10, 12, 1, 192, {250, 7}, 0, 256, 0, true)));
  return v;
}

using KvParam = std::tuple<Device, KvCase>;
std::string kv_name(const ::testing::TestParamInfo<KvParam>& info) {
  return std::string(device_name(std::get<0>(info.param))) + "_" + std::get<1>(info.param).name();
}

class KvCache : public ::testing::TestWithParam<KvParam> {};
TEST_P(KvCache, MatchesReference) { check_kvcache(std::get<0>(GetParam()), std::get<1>(GetParam())); }
INSTANTIATE_TEST_SUITE_P(Sweep, KvCache,
                         ::testing::Combine(::testing::ValuesIn(test_devices()), ::testing::ValuesIn(kv_cases())),
                         kv_name);

// The C ABI over the same data gives the same bits as the C++ API.
TEST(KvCacheCAbi, SameBitsAsCpp) {
  const Device dev = test_devices()[0];
  if (!device_usable(dev)) GTEST_SKIP() << "no usable device";
  const int64_t B = 2, Sq = 1, Hq = 4, Hkv = 1, D = 128, cap = 96;
  Tensor q = make_bshd(dev, DType::F16, Layout::BSHD, B, Sq, Hq, D);
  Tensor kc = make_bshd(dev, DType::F16, Layout::BSHD, B, cap, Hkv, D);
  Tensor vc = make_bshd(dev, DType::F16, Layout::BSHD, B, cap, Hkv, D);
  fill_randn(q);
  fill_randn(kc);
  fill_randn(vc);
  Tensor lens = make_i32(dev, {70, 9}, {B});
  Tensor out = make_bshd(dev, DType::F16, Layout::BSHD, B, Sq, Hq, D);
  Tensor lse = make_lse(dev, B, Hq, Sq);
  flashattn::KvCacheArgs a;
  a.q = q.view();
  a.k_cache = kc.view();
  a.v_cache = vc.view();
  a.cache_seqlens = lens.view();
  a.out = out.view();
  a.lse = lse.view();
  const flashattn::Status st = flashattn::forward_kvcache(a);
  if (skip_if_unsupported(dev, st)) GTEST_SKIP() << st.message;
  ASSERT_TRUE(st.ok()) << st.message;
  const auto o1 = out.read(), l1 = lse.read();
  out.write(std::vector<double>(o1.size(), 0.0));
  fa_kvcache_args c{};
  c.q = to_c(a.q);
  c.k_cache = to_c(a.k_cache);
  c.v_cache = to_c(a.v_cache);
  c.cache_seqlens = to_c(a.cache_seqlens);
  c.out = to_c(a.out);
  c.lse = to_c(a.lse);
  c.options = to_c(a.options);
  ASSERT_EQ(fa_forward_kvcache(&c), FA_OK) << fa_last_error();
  EXPECT_EQ(out.read(), o1);
  EXPECT_EQ(lse.read(), l1);
  size_t bytes = 1;
  ASSERT_EQ(fa_forward_kvcache_workspace_bytes(&c, &bytes), FA_OK) << fa_last_error();
  c.num_splits = -1;
  EXPECT_EQ(fa_forward_kvcache(&c), FA_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(fa_last_error(), "num_splits"), nullptr);
  EXPECT_EQ(fa_forward_kvcache(nullptr), FA_ERR_INVALID_ARGUMENT);
}

// A head dim that is not a multiple of 8 is refused by the KV cache (which
// the kernels read and append into in place; attention() pads such head dims
// into copies, which here would copy the whole cache per call), naming
// head_dim, with the cache and the outputs untouched.
TEST(KvCacheHeadDim, NotAMultipleOf8IsRefused) {
  const Device dev = test_devices()[0];
  if (!device_usable(dev)) GTEST_SKIP() << "no usable device";
  const int64_t B = 1, Hq = 4, Hkv = 2, D = 100, cap = 32;
  Tensor q = make_bshd(dev, DType::BF16, Layout::BSHD, B, 1, Hq, D);
  Tensor kc = make_bshd(dev, DType::BF16, Layout::BSHD, B, cap, Hkv, D);
  Tensor vc = make_bshd(dev, DType::BF16, Layout::BSHD, B, cap, Hkv, D);
  Tensor kn = make_bshd(dev, DType::BF16, Layout::BSHD, B, 1, Hkv, D);
  Tensor vn = make_bshd(dev, DType::BF16, Layout::BSHD, B, 1, Hkv, D);
  for (Tensor* t : {&q, &kc, &vc, &kn, &vn}) fill_randn(*t);
  Tensor lens = make_i32(dev, {20}, {B});
  Tensor out = make_bshd(dev, DType::BF16, Layout::BSHD, B, 1, Hq, D);
  Tensor lse = make_lse(dev, B, Hq, 1);
  flashattn::KvCacheArgs a;
  a.q = q.view();
  a.k_cache = kc.view();
  a.v_cache = vc.view();
  a.k_new = kn.view();
  a.v_new = vn.view();
  a.cache_seqlens = lens.view();
  a.out = out.view();
  a.lse = lse.view();
  CallGuard guard({&q, &kn, &vn, &lens}, {&kc, &vc, &out, &lse});
  const flashattn::Status st = flashattn::forward_kvcache(a);
  EXPECT_EQ(st.code, flashattn::ErrorCode::InvalidArgument) << st.message;
  EXPECT_NE(st.message.find("head_dim"), std::string::npos) << st.message;
  EXPECT_TRUE(guard.untouched());
}

// flash-attn's optional inputs through the C ABI: the same bits as the C++
// API (the append writes the same rows again, so the second call sees the
// cache the first one left).
TEST(KvCacheCAbi, OptionalInputsSameBitsAsCpp) {
  const Device dev = test_devices()[0];
  if (!device_usable(dev)) GTEST_SKIP() << "no usable device";
  const int64_t B = 2, Sq = 2, Hq = 4, Hkv = 2, D = 64, cap = 64, entries = 3, rd = 32;
  Tensor q = make_bshd(dev, DType::F16, Layout::BSHD, B, Sq, Hq, D);
  Tensor kc = make_bshd(dev, DType::F16, Layout::BSHD, entries, cap, Hkv, D);
  Tensor vc = make_bshd(dev, DType::F16, Layout::BSHD, entries, cap, Hkv, D);
  Tensor kn = make_bshd(dev, DType::F16, Layout::BSHD, B, 1, Hkv, D);
  Tensor vn = make_bshd(dev, DType::F16, Layout::BSHD, B, 1, Hkv, D);
  Tensor cs = make_contiguous(dev, DType::F16, {cap + Sq, rd / 2});
  Tensor sn = make_contiguous(dev, DType::F16, {cap + Sq, rd / 2});
  for (const Tensor* t : {&q, &kc, &vc, &kn, &vn, &cs, &sn}) fill_randn(*t);
  Tensor lens = make_i32(dev, {50, 9}, {B});
  Tensor idx = make_i32(dev, {2, 0}, {B});
  Tensor left = make_i32(dev, {11, 0}, {B});
  Tensor out = make_bshd(dev, DType::F16, Layout::BSHD, B, Sq, Hq, D);
  Tensor lse = make_lse(dev, B, Hq, Sq);
  flashattn::KvCacheArgs a;
  a.q = q.view();
  a.k_cache = kc.view();
  a.v_cache = vc.view();
  a.cache_seqlens = lens.view();
  a.k_new = kn.view();
  a.v_new = vn.view();
  a.cache_batch_idx = idx.view();
  a.cache_leftpad = left.view();
  a.rotary_cos = cs.view();
  a.rotary_sin = sn.view();
  a.rotary_interleaved = true;
  a.out = out.view();
  a.lse = lse.view();
  a.options.causal = true;
  const flashattn::Status st = flashattn::forward_kvcache(a);
  if (skip_if_unsupported(dev, st)) GTEST_SKIP() << st.message;
  ASSERT_TRUE(st.ok()) << st.message;
  const auto o1 = out.read(), l1 = lse.read(), k1 = kc.read();
  out.write(std::vector<double>(o1.size(), 0.0));
  fa_kvcache_args c{};
  c.q = to_c(a.q);
  c.k_cache = to_c(a.k_cache);
  c.v_cache = to_c(a.v_cache);
  c.cache_seqlens = to_c(a.cache_seqlens);
  c.k_new = to_c(a.k_new);
  c.v_new = to_c(a.v_new);
  c.cache_batch_idx = to_c(a.cache_batch_idx);
  c.cache_leftpad = to_c(a.cache_leftpad);
  c.rotary_cos = to_c(a.rotary_cos);
  c.rotary_sin = to_c(a.rotary_sin);
  c.rotary_interleaved = 1;
  c.out = to_c(a.out);
  c.lse = to_c(a.lse);
  c.options = to_c(a.options);
  ASSERT_EQ(fa_forward_kvcache(&c), FA_OK) << fa_last_error();
  EXPECT_EQ(out.read(), o1);
  EXPECT_EQ(lse.read(), l1);
  EXPECT_EQ(kc.read(), k1);
  c.rotary_interleaved = 0;  // the other pairing: different rotated keys
  ASSERT_EQ(fa_forward_kvcache(&c), FA_OK) << fa_last_error();
  EXPECT_NE(kc.read(), k1);
}

}  // namespace
}  // namespace fa_test

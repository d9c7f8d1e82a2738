// The Hopper backward's tile bookkeeping (src/cuda/sm90/bwd_tile_order.hpp),
// and the forward's split-KV pieces (split_kv.hpp) and tile choices
// (tile_rules.hpp) at the end,
// checked on the host against enumeration: for random lengths and masks
// (causal, windows, unbounded, Sq != Sk both ways), the key tiles whose
// query ranges contain a query tile form one contiguous run, and
// key_tiles_of_query_tile returns exactly that run. The deterministic
// backward orders each query tile's dQ additions by rank in this run; a
// wrong run would hang a CTA (waiting for a rank no one passes) or break
// the order.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "cuda/sm90/bwd_tile_order.hpp"
#include "cuda/sm90/split_kv.hpp"
#include "cuda/sm90/tile_rules.hpp"

namespace {

using flashattn::detail::cuda::sm90::bwd_tall_steps_pay;
using flashattn::detail::cuda::sm90::key_tiles_of_query_tile;
using flashattn::detail::cuda::sm90::KeyTileRun;
using flashattn::detail::cuda::sm90::query_tile_range;
using flashattn::detail::cuda::sm90::QueryTileRange;
using flashattn::detail::cuda::sm90::KeyTileRange;
using flashattn::detail::cuda::sm90::kMaxSplitPieces;
using flashattn::detail::cuda::sm90::kMinSplitKeyTiles;
using flashattn::detail::cuda::sm90::split_count;
using flashattn::detail::cuda::sm90::split_key_tiles;
using flashattn::detail::cuda::sm90::gqa_pack_heads;
using flashattn::detail::cuda::sm90::hd128_narrow_tiles_pay;
using flashattn::detail::cuda::sm90::short_masked_tiles_pay;
using flashattn::detail::cuda::sm90::hd64_turns_pay;
using flashattn::detail::cuda::sm90::paged_gather_pays;

struct Mask {
  int offset, left, right;
};

// The kernel's tiles (bwd_kernel_args.hpp: bwd_block_n(head dim) keys, 128
// but 64 at head dim 256; bwd_block_m(head dim) queries, 64 but 128 at 64,
// and the 80-row steps of head dim 128).
template <int kBlockM, int kBlockN>
void check_key_tile_runs(unsigned seed) {
  std::mt19937 gen(seed);
  int checked = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    const int sq = 1 + static_cast<int>(gen() % 700), sk = 1 + static_cast<int>(gen() % 700);
    const int left = gen() % 3 == 0 ? -1 : static_cast<int>(gen() % 300);
    const int right = gen() % 3 == 0 ? -1 : (gen() % 2 == 0 ? 0 : static_cast<int>(gen() % 300));
    const Mask m{sk - sq, left, right};
    const int n_tiles = (sk + kBlockN - 1) / kBlockN, m_tiles = (sq + kBlockM - 1) / kBlockM;
    for (int mt = 0; mt < m_tiles; ++mt) {
      int first = -1, last = -2;
      for (int n = 0; n < n_tiles; ++n) {
        const QueryTileRange r =
            query_tile_range<kBlockM>(m, sq, n * kBlockN, std::min(kBlockN, sk - n * kBlockN));
        if (r.count <= 0 || mt < r.first || mt >= r.first + r.count) continue;
        if (first >= 0) ASSERT_EQ(last, n - 1) << "visitors not contiguous";
        if (first < 0) first = n;
        last = n;
      }
      const KeyTileRun k = key_tiles_of_query_tile<kBlockM, kBlockN>(m, sq, sk, mt);
      SCOPED_TRACE(testing::Message() << "sq " << sq << " sk " << sk << " left " << left
                                      << " right " << right << " query tile " << mt);
      if (first < 0) {
        EXPECT_LT(k.last, k.first);
      } else {
        EXPECT_EQ(k.first, first);
        EXPECT_EQ(k.last, last);
      }
      if (testing::Test::HasFailure()) return;
      ++checked;
    }
  }
  EXPECT_GT(checked, 100000 * 64 / kBlockM);
}

TEST(Sm90TileOrder, KeyTileRunMatchesEnumerationHeadDim128) { check_key_tile_runs<64, 128>(20261129); }
TEST(Sm90TileOrder, KeyTileRunMatchesEnumerationHeadDim64) { check_key_tile_runs<128, 128>(20261130); }
TEST(Sm90TileOrder, KeyTileRunMatchesEnumerationHeadDim256) { check_key_tile_runs<64, 64>(20261131); }
TEST(Sm90TileOrder, KeyTileRunMatchesEnumerationHeadDim128Tall) { check_key_tile_runs<80, 128>(20261204); }

// Split-KV of the Hopper forward (src/cuda/sm90/split_kv.hpp): the pieces of
// a query tile's key range, taken in order, are exactly the range (each key
// tile once: a gap would drop keys from the output, an overlap count them
// twice), and no piece is longer than ceil(length / pieces).
TEST(Sm90SplitKv, PiecesPartitionTheKeyRange) {
  std::mt19937 gen(20261203);
  int checked = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    const int len = static_cast<int>(gen() % 300), begin = len == 0 ? 0 : static_cast<int>(gen() % 1000);
    const int splits = 1 + static_cast<int>(gen() % 130);
    const KeyTileRange r{begin, begin + len};
    int next = begin;
    for (int s = 0; s < splits; ++s) {
      const KeyTileRange piece = split_key_tiles(r, s, splits);
      if (piece.n_end <= piece.n_begin) continue;
      ASSERT_EQ(piece.n_begin, next) << "range [" << begin << ", " << begin + len << ") in " << splits
                                     << " pieces, piece " << s;
      ASSERT_LE(piece.n_end - piece.n_begin, (len + splits - 1) / splits);
      next = piece.n_end;
    }
    ASSERT_EQ(next, begin + len) << "range [" << begin << ", " << begin + len << ") in " << splits << " pieces";
    ++checked;
  }
  EXPECT_EQ(checked, 20000);
}

// How many pieces a call takes: the caller's count (clamped to 128), else a
// split only when the query tiles leave half the SMs idle, every piece in
// one wave and at least 4 key tiles long.
TEST(Sm90SplitKv, SplitCount) {
  EXPECT_EQ(split_count(32, 129, 132, 0), 4);   // chunk 128 of 32 heads at 16k keys
  EXPECT_EQ(split_count(64, 33, 132, 0), 2);
  EXPECT_EQ(split_count(32, 9, 132, 0), 2);     // short key range: 9 / 4
  EXPECT_EQ(split_count(32, 7, 132, 0), 1);
  EXPECT_EQ(split_count(67, 1000, 132, 0), 1);  // more than half the SMs busy
  EXPECT_EQ(split_count(1, 100000, 132, 0), 128);
  EXPECT_EQ(split_count(1000, 10, 132, 7), 7);  // asked for
  EXPECT_EQ(split_count(1, 10, 132, 500), kMaxSplitPieces);
  EXPECT_EQ(split_count(0, 10, 132, 0), 1);
  EXPECT_EQ(split_count(4, 10, 0, 0), 1);       // SM count unknown
  for (int64_t tiles = 1; tiles <= 200; ++tiles)
    for (int64_t keys : {1, 4, 8, 33, 129, 1000}) {
      const int s = split_count(tiles, keys, 132, 0);
      ASSERT_GE(s, 1);
      if (s > 1) {
        EXPECT_LE(tiles * s, 132) << tiles << " tiles, " << keys << " key tiles";
        EXPECT_GE(keys / s, kMinSplitKeyTiles) << tiles << " tiles, " << keys << " key tiles";
      }
    }
}

// Head dim 128, masked or per-sequence calls: 128-row tiles replace 192-row ones only where they pad at
// least 15% fewer rows and add no wave (the shapes bench/NOTES.md measured:
// 32 heads, 132 SMs; batch 1 x 640 rows lost 0.7x on 128-row tiles).
TEST(Sm90TileRules, ShortMaskedTiles) {
  for (int64_t d : {64, 128}) {
    EXPECT_TRUE(short_masked_tiles_pay(d, true, 512, 512)) << d;
    EXPECT_TRUE(short_masked_tiles_pay(d, true, 1024, 1024)) << d;
    EXPECT_FALSE(short_masked_tiles_pay(d, true, 1025, 1025)) << d;  // 2k: level at head dim 128
    EXPECT_FALSE(short_masked_tiles_pay(d, false, 512, 512)) << d;   // unmasked: the other rules
  }
  // A chunk of 512 queries against an 8k cache: head dim 64 as before, head
  // dim 128 keeps its 192-row tile (long rows).
  EXPECT_TRUE(short_masked_tiles_pay(64, true, 512, 8192));
  EXPECT_FALSE(short_masked_tiles_pay(128, true, 512, 8192));
  EXPECT_FALSE(short_masked_tiles_pay(96, true, 512, 512));
  EXPECT_FALSE(short_masked_tiles_pay(256, true, 512, 512));
}

TEST(Sm90TileRules, Hd128NarrowTiles) {
  EXPECT_TRUE(hd128_narrow_tiles_pay(256, 32, 132, false));      // 2 x 128 rows against 2 x 192
  EXPECT_TRUE(hd128_narrow_tiles_pay(200, 4 * 32, 132, false));
  EXPECT_TRUE(hd128_narrow_tiles_pay(256, 64 * 16, 132, false));  // padded self-attention, many tiles
  EXPECT_FALSE(hd128_narrow_tiles_pay(640, 32, 132, false));     // 160 tiles: a second wave; 192 rows: 128
  EXPECT_TRUE(hd128_narrow_tiles_pay(640, 4 * 32, 132, false));  // 5 waves x 128 rows against 4 x 192
  EXPECT_TRUE(hd128_narrow_tiles_pay(640, 25 * 16, 132, false));
  for (int64_t sq : {129, 192, 300, 384, 512, 1024, 2048, 16384})  // padding within 15%
    EXPECT_FALSE(hd128_narrow_tiles_pay(sq, 4 * 32, 132, false)) << sq;
  EXPECT_FALSE(hd128_narrow_tiles_pay(128, 32, 132, false));  // the caller's own case
  EXPECT_FALSE(hd128_narrow_tiles_pay(256, 32, 0, false));    // SM count unknown
}

// Unmasked padded calls (uniform tiles, round robin): the wave times alone,
// which picked the faster tile on each of the 18 shapes measured on the H200
// that were not a tie
// (bench/sm90/NOTES.md, "Head dim 128: the tile by the wave count";
// tiles_per_row = batch x heads).
TEST(Sm90TileRules, Hd128TilesByWaves) {
  struct Shape {
    int64_t seqlen, tiles_per_row;
    bool narrow;  // 128 rows measured faster
  };
  const Shape measured[] = {
      {512, 32 * 16, true},  {1024, 16 * 16, true}, {2048, 8 * 16, false}, {4096, 4 * 16, false},
      {8192, 2 * 16, false}, {16384, 16, false},    {1024, 32, true},      {2048, 32, true},
      {4096, 32, true},      {8192, 32, false},     {2048, 64, true},      {4096, 64, false},
      {4096, 24, false},     {4096, 48, false},     {8192, 8, true},       {3072, 32, false},
      {6144, 32, false},     {12288, 32, false}};
  for (const Shape& m : measured)
    EXPECT_EQ(hd128_narrow_tiles_pay(m.seqlen, m.tiles_per_row, 132, true), m.narrow)
        << m.seqlen << " x " << m.tiles_per_row;
  EXPECT_FALSE(hd128_narrow_tiles_pay(4096, 40, 132, true));  // equal wave times: 192 rows
  EXPECT_FALSE(hd128_narrow_tiles_pay(128, 32, 132, true));   // the caller's own case
  EXPECT_FALSE(hd128_narrow_tiles_pay(4096, 32, 0, true));    // SM count unknown
  // Where padding decides, both rules agree.
  EXPECT_TRUE(hd128_narrow_tiles_pay(256, 32, 132, true));
  EXPECT_FALSE(hd128_narrow_tiles_pay(640, 32, 132, true));
}

// Head dim 64's three warpgroups take turns on unmasked padded calls from
// 4096 keys (where they measured 2-5% faster), nowhere else.
TEST(Sm90TileRules, Hd64Turns) {
  EXPECT_TRUE(hd64_turns_pay(false, false, 4096));
  EXPECT_TRUE(hd64_turns_pay(false, false, 16384));
  EXPECT_FALSE(hd64_turns_pay(false, false, 4095));
  EXPECT_FALSE(hd64_turns_pay(false, false, 2048));
  EXPECT_FALSE(hd64_turns_pay(true, false, 16384));   // causal / window
  EXPECT_FALSE(hd64_turns_pay(false, true, 16384));   // varlen, KV cache: no such kernel
}

// Backward, head dim 128, unmasked: 80-row steps unless they pad more than
// 4% more rows than 64-row ones (measured on the H200: 512 slower, 1k level,
// 2k-16k faster; bench/sm90/NOTES.md).
TEST(Sm90TileRules, BwdTallSteps) {
  EXPECT_FALSE(bwd_tall_steps_pay(512));  // 560 rows against 512
  for (int64_t sq : {1024, 2048, 4096, 8192, 16384}) EXPECT_TRUE(bwd_tall_steps_pay(sq)) << sq;
  EXPECT_TRUE(bwd_tall_steps_pay(1030));   // 1040 against 1088
  EXPECT_TRUE(bwd_tall_steps_pay(80));
  EXPECT_FALSE(bwd_tall_steps_pay(64));    // 80 against 64
  EXPECT_FALSE(bwd_tall_steps_pay(113));   // 160 against 128
  EXPECT_TRUE(bwd_tall_steps_pay(267));    // 320 both
}

// GQA packing: groups of 2-16 with at most half a 128-row tile of query rows
// per head; never with ALiBi, fp8, other tiles, or no whole group.
TEST(Sm90TileRules, GqaPackHeads) {
  EXPECT_EQ(gqa_pack_heads(32, 8, 32, 128, false, false), 4);
  EXPECT_EQ(gqa_pack_heads(28, 4, 16, 128, false, false), 7);
  EXPECT_EQ(gqa_pack_heads(16, 1, 64, 128, false, false), 16);
  EXPECT_EQ(gqa_pack_heads(4, 2, 1, 128, false, false), 2);
  EXPECT_EQ(gqa_pack_heads(32, 8, 65, 128, false, false), 1);   // more than half a tile
  EXPECT_EQ(gqa_pack_heads(17, 1, 4, 128, false, false), 1);    // group above 16
  EXPECT_EQ(gqa_pack_heads(8, 8, 4, 128, false, false), 1);     // MHA
  EXPECT_EQ(gqa_pack_heads(32, 8, 32, 192, false, false), 1);   // 192-row tile
  EXPECT_EQ(gqa_pack_heads(32, 8, 32, 128, true, false), 1);    // ALiBi
  EXPECT_EQ(gqa_pack_heads(32, 8, 32, 128, false, true), 1);    // fp8
  EXPECT_EQ(gqa_pack_heads(30, 8, 32, 128, false, false), 1);   // not a whole group
  EXPECT_EQ(gqa_pack_heads(8, 0, 32, 128, false, false), 1);
  for (int g = 2; g <= 16; ++g) {  // a 128-row tile holds 128 / g whole groups of each head count
    const int pack = gqa_pack_heads(g * 3, 3, 20, 128, false, false);
    ASSERT_EQ(pack, g);
    EXPECT_LE(128 / pack * pack, 128);
    EXPECT_GE(128 / pack * pack, 128 - 15);
  }
}

// Paged caches gathered by cp.async where TMA boxes (gcd(page, key tile)
// rows) would hold 32 rows or fewer; the key tiles are 128 (head dims 64,
// 128), 112 (192) and 80 (256) rows.
TEST(Sm90TileRules, PagedGather) {
  EXPECT_TRUE(paged_gather_pays(16, 128));
  EXPECT_TRUE(paged_gather_pays(32, 128));
  EXPECT_TRUE(paged_gather_pays(48, 128));   // boxes of 16
  EXPECT_TRUE(paged_gather_pays(64, 80));    // head dim 256: boxes of 16
  EXPECT_TRUE(paged_gather_pays(32, 112));   // head dim 192: boxes of 16
  EXPECT_FALSE(paged_gather_pays(64, 128));  // 2 boxes per tile
  EXPECT_FALSE(paged_gather_pays(128, 128));
  EXPECT_FALSE(paged_gather_pays(256, 128));
  EXPECT_FALSE(paged_gather_pays(80, 80));
  EXPECT_FALSE(paged_gather_pays(0, 128));   // not paged
}

}  // namespace

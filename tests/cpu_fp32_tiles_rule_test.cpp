// The rule that sends fp32 calls to the AMX tiles (cpu/fp32_tiles_rule.hpp):
// plain integer code, checked on the host in every build, at the boundaries
// the measurements set (the forward from 256 visible keys a row on average,
// the backward from 1024).
#include <gtest/gtest.h>

#include <cstdint>

#include "cpu/fp32_tiles_rule.hpp"

namespace {

using flashattn::detail::AttnParams;
using flashattn::detail::cpu::Fp32TilesPass;
using flashattn::detail::cpu::fp32_tiles_pay;

AttnParams shape(int64_t sq, int64_t sk, int64_t left = -1, int64_t right = -1) {
  AttnParams p;
  p.batch = 1;
  p.heads_q = p.heads_kv = 1;
  p.head_dim = 128;
  p.seqlen_q = sq;
  p.seqlen_k = sk;
  p.window_left = left;
  p.window_right = right;
  return p;
}

bool fwd(const AttnParams& p) { return fp32_tiles_pay(p, Fp32TilesPass::Forward); }
bool bwd(const AttnParams& p) { return fp32_tiles_pay(p, Fp32TilesPass::Backward); }

TEST(Fp32TilesRule, Unmasked) {
  EXPECT_FALSE(fwd(shape(256, 255)));
  EXPECT_TRUE(fwd(shape(256, 256)));
  EXPECT_TRUE(fwd(shape(512, 512)));
  EXPECT_FALSE(bwd(shape(512, 512)));
  EXPECT_FALSE(bwd(shape(1024, 1023)));
  EXPECT_TRUE(bwd(shape(1024, 1024)));
  EXPECT_TRUE(fwd(shape(8192, 8192)));
  EXPECT_TRUE(bwd(shape(8192, 8192)));
  EXPECT_TRUE(fwd(shape(1, 1024)));  // (decode steps take their own path before the rule)
}

TEST(Fp32TilesRule, CausalCountsTheVisibleKeys) {
  // Causal 512: (512 + 1) / 2 keys a row on average.
  EXPECT_TRUE(fwd(shape(512, 512, -1, 0)));
  EXPECT_FALSE(bwd(shape(512, 512, -1, 0)));
  EXPECT_FALSE(fwd(shape(510, 510, -1, 0)));  // 255.5 on average
  EXPECT_TRUE(fwd(shape(511, 511, -1, 0)));   // exactly 256
  EXPECT_FALSE(bwd(shape(2046, 2046, -1, 0)));  // 1023.5
  EXPECT_TRUE(bwd(shape(2047, 2047, -1, 0)));   // exactly 1024
  EXPECT_FALSE(bwd(shape(1024, 1024, -1, 0)));
  // Bottom-right aligned: 256 queries on the last rows of 2048 keys see 1793-2048.
  EXPECT_TRUE(bwd(shape(256, 2048, -1, 0)));
}

TEST(Fp32TilesRule, WindowBoundsTheCost) {
  EXPECT_FALSE(fwd(shape(8192, 8192, 127, 0)));  // at most 128 keys a row
  EXPECT_TRUE(fwd(shape(8192, 8192, 300, 0)));   // ~300 a row
  EXPECT_FALSE(bwd(shape(8192, 8192, 300, 0)));
  EXPECT_TRUE(bwd(shape(8192, 8192, 1100, 0)));
}

// visible_pairs' closed form against the row walk it replaced, on every
// mask shape: no mask, causal and windows with Sq < Sk, Sq = Sk, Sq > Sk
// (rows that see nothing), windows wider than the keys, left / right only.
TEST(Fp32TilesRule, VisiblePairsMatchTheRowWalk) {
  const int64_t lens[] = {1, 2, 7, 64, 255, 256, 257, 1000};
  const int64_t wins[] = {-1, 0, 1, 5, 63, 300, 5000};
  int checked = 0;
  for (int64_t sq : lens)
    for (int64_t sk : lens)
      for (int64_t left : wins)
        for (int64_t right : wins) {
          const AttnParams p = shape(sq, sk, left, right);
          const flashattn::detail::WindowMask m(p);
          int64_t walk = 0;
          for (int64_t i = 0; i < sq; ++i) {
            const auto r = m.keys(i);
            walk += r.empty() ? 0 : r.end - r.begin;
          }
          ASSERT_TRUE(flashattn::detail::cpu::visible_pairs(p) == walk)
              << "sq " << sq << " sk " << sk << " window " << left << "," << right << ": walk " << walk
              << ", closed form " << int64_t(flashattn::detail::cpu::visible_pairs(p));
          ++checked;
        }
  EXPECT_EQ(checked, 8 * 8 * 7 * 7);
}

// The fuzzer's 2^31-row calls (an empty batch, or one the argument checks
// refuse later) decide in no time, and the sum does not overflow.
TEST(Fp32TilesRule, HugeRowCountsAreClosedForm) {
  const int64_t big = 2147483647;
  EXPECT_TRUE(flashattn::detail::cpu::visible_pairs(shape(big, big)) == __int128(big) * big);
  EXPECT_TRUE(fwd(shape(big, big)));
  EXPECT_FALSE(fwd(shape(big, 78)));
  EXPECT_TRUE(flashattn::detail::cpu::visible_pairs(shape(big, 11, -1, 0)) == 66);  // only the last 11 rows see keys
}

TEST(Fp32TilesRule, EmptyNever) {
  EXPECT_FALSE(fwd(shape(0, 4096)));
  EXPECT_FALSE(fwd(shape(4096, 0)));
  EXPECT_FALSE(bwd(shape(0, 0)));
}

}  // namespace

// The sm80 forward's plan (src/cuda/sm80/fwd_plan.hpp) is host code: the
// split-KV counts it picks for decode steps, checked without a GPU; and the
// backward grid's block order (kernel_traits.hpp bwd_block, bwd_group_units).
#include <gtest/gtest.h>

#include <set>
#include <tuple>

#include "common/params.hpp"
#include "sm80/fwd_plan.hpp"
#include "sm80/kernel_traits.hpp"

namespace {

namespace s8 = flashattn::detail::cuda::sm80;

flashattn::detail::FwdParams decode_step(int64_t batch, int64_t context, int64_t d) {
  flashattn::detail::FwdParams p;
  p.batch = batch;
  p.heads_q = 64;
  p.heads_kv = 8;
  p.seqlen_q = 1;
  p.seqlen_k = context;
  p.head_dim = d;
  return p;
}

// Two-warp decode blocks fit four per SM (registers): a split grid must stay
// within one wave of them, or its last blocks wait for a second (batch 8 x 8k
// on 132 SMs: 9 pieces x 64 blocks = 576 measured 15-17% slower than 8 x 64).
TEST(Sm80Plan, TwoWarpDecodeSplitsStayInOneWave) {
  for (int sms : {108, 114, 132})
    for (int64_t d : {64, 96, 128, 192, 256})
      for (int64_t batch : {1, 2, 3, 5, 8, 13, 16, 40})
        for (int64_t context : {1024, 8192, 32768, 131072}) {
          const auto p = decode_step(batch, context, d);
          const s8::FwdPlan f = s8::fwd_plan(p, sms, s8::FwdCfg<128>::BM, s8::FwdCfg<128>::BN);
          ASSERT_TRUE(f.decode);
          if (f.nsplit == 1) continue;
          EXPECT_LE(f.m_blocks * f.heads_y * batch * f.nsplit, 4 * sms)
              << "sms " << sms << " d " << d << " batch " << batch << " context " << context;
          if (context >= 8192)  // enough key tiles to split that far: the grid still fills the GPU
            EXPECT_GE(f.m_blocks * f.heads_y * batch * f.nsplit, 2 * sms)
                << "sms " << sms << " d " << d << " batch " << batch << " context " << context;
        }
}

// Every backward block is one (key tile, batch, kv head) and every one is
// some block's, for any group size (the last group partial or not); within
// a group the key tiles go in order, and a group's units are consecutive.
TEST(Sm80Plan, BackwardGridGroupsCoverEveryBlockOnce) {
  for (int batch : {1, 2, 3, 5})
    for (int heads : {1, 2, 4, 7})
      for (int nb : {1, 2, 9})
        for (int G = 1; G <= batch * heads; ++G) {
          std::set<std::tuple<int, int, int>> seen;
          int last_n = -1, last_u = -1;
          for (unsigned blk = 0; blk < unsigned(s8::bwd_blocks(nb, heads, batch)); ++blk) {
            const s8::BwdBlock x = s8::bwd_block(blk, G, nb, heads, batch);
            ASSERT_TRUE(x.n >= 0 && x.n < nb && x.b >= 0 && x.b < batch && x.hk >= 0 && x.hk < heads)
                << "G " << G << " block " << blk;
            ASSERT_TRUE(seen.insert({x.n, x.b, x.hk}).second) << "G " << G << " block " << blk << " twice";
            const int u = x.b * heads + x.hk;
            if (u / G == last_u / G && last_u >= 0) EXPECT_GE(x.n, last_n) << "G " << G << " block " << blk;
            last_n = x.n, last_u = u;
          }
          EXPECT_EQ(seen.size(), size_t(nb) * batch * heads);
        }
}

// A backward block's steps visit every (query head, query tile) of its group
// once, in each walk: rotate starts at the block's own tile and goes up,
// first goes up from the first tile, last down from the last.
TEST(Sm80Plan, BackwardWalksVisitEveryStepOnce) {
  for (s8::BwdWalk w : {s8::BwdWalk::rotate, s8::BwdWalk::first, s8::BwdWalk::last})
    for (int m_first : {0, 3})
      for (int m_count = 1; m_count <= 6; ++m_count)
        for (int group : {1, 2, 5})
          for (int n_block = 0; n_block < 8; ++n_block) {
            const s8::BwdSteps st(static_cast<int>(w), m_first, m_count, n_block);
            const int want_start = w == s8::BwdWalk::rotate ? m_first + n_block % m_count
                                   : w == s8::BwdWalk::first ? m_first
                                                             : m_first + m_count - 1;
            ASSERT_EQ(st.start, want_start) << "walk " << int(w) << " count " << m_count << " block " << n_block;
            std::set<std::pair<int, int>> seen;
            int h = 10, m = st.start;
            for (int it = 0; it < m_count * group; ++it) {
              ASSERT_TRUE(h >= 10 && h < 10 + group && m >= m_first && m < m_first + m_count)
                  << "walk " << int(w) << " step " << it;
              ASSERT_TRUE(seen.insert({h, m}).second) << "walk " << int(w) << " step " << it << " twice";
              const int prev = m;
              st.next(h, m);
              if (m_count > 1 && h == 10 + (it + 1) / m_count && (it + 1) % m_count != 0) {
                // within a head: one tile on in the walk's direction, wrapping for rotate
                const int want = w == s8::BwdWalk::last ? prev - 1
                                                        : (prev + 1 - m_first) % m_count + m_first;
                EXPECT_EQ(m, want) << "walk " << int(w) << " step " << it;
              }
            }
            EXPECT_EQ(h, 10 + group);
            EXPECT_EQ(seen.size(), size_t(m_count) * group);
          }
}

// Group sizes: all units when they fit half the L2 together, one per group
// when one alone does not, never zero or more than the units.
TEST(Sm80Plan, BackwardGroupUnitsByL2) {
  const long long l2 = 50ll << 20;
  EXPECT_EQ(s8::bwd_group_units(64, 1 << 20, l2), 25);         // 25 of 1 MiB in 25 MiB
  EXPECT_EQ(s8::bwd_group_units(8, 1 << 20, l2), 8);           // all fit
  EXPECT_EQ(s8::bwd_group_units(64, 64ll << 20, l2), 1);       // one is already too big
  EXPECT_EQ(s8::bwd_group_units(1, 1, l2), 1);
  EXPECT_EQ(s8::bwd_group_units(0, 1, l2), 1);
  // A unit's rows: head dim 256, 1k queries, 16-bit Q / dO and fp32 dQ: 2 MiB, so 12 in 25 MiB.
  EXPECT_EQ(s8::bwd_unit_bytes(1, 1024, 256, 2), 2ll << 20);
  EXPECT_EQ(s8::bwd_group_units(128, s8::bwd_unit_bytes(1, 1024, 256, 2), l2), 12);
}

}  // namespace

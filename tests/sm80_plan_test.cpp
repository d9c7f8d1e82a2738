// The sm80 forward's plan (src/cuda/sm80/fwd_plan.hpp) is host code: the
// split-KV counts it picks for decode steps, checked without a GPU; and the
// backward grid's block order (kernel_traits.hpp grid_block, bwd_group_units,
// grid_full_groups).
#include <gtest/gtest.h>

#include <algorithm>
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
// some block's, for any group size and any count K of full groups before the
// last (the last group the rest: fewer, as many or more units than G);
// within a group the key tiles go in order, and a group's units are
// consecutive.
TEST(Sm80Plan, BackwardGridGroupsCoverEveryBlockOnce) {
  for (int batch : {1, 2, 3, 5})
    for (int heads : {1, 2, 4, 7})
      for (int nb : {1, 2, 9})
        for (int G = 1; G <= batch * heads; ++G)
          for (int K = 0; K <= batch * heads / G; ++K) {
            std::set<std::tuple<int, int, int>> seen;
            int last_n = -1, last_g = -1;
            for (unsigned blk = 0; blk < unsigned(s8::bwd_blocks(nb, heads, batch)); ++blk) {
              const s8::GridBlock x = s8::grid_block(blk, G, K, nb, heads, batch);
              ASSERT_TRUE(x.n >= 0 && x.n < nb && x.b >= 0 && x.b < batch && x.hk >= 0 && x.hk < heads)
                  << "G " << G << " K " << K << " block " << blk;
              ASSERT_TRUE(seen.insert({x.n, x.b, x.hk}).second) << "G " << G << " K " << K << " block " << blk << " twice";
              const int u = x.b * heads + x.hk, g = std::min(u / G, K);
              ASSERT_GE(g, last_g) << "G " << G << " K " << K << " block " << blk;
              if (g == last_g) EXPECT_GE(x.n, last_n) << "G " << G << " K " << K << " block " << blk;
              last_n = x.n, last_g = g;
            }
            EXPECT_EQ(seen.size(), size_t(nb) * batch * heads);
          }
}

// The last group under a mask (backward and forward grids): enough units that its steps per SM slot
// reach its longest block's (the grid then ends on short blocks), never
// fewer than the remainder of units / G, never more than all units.
TEST(Sm80Plan, LastGroupCoversTheLongestBlock) {
  namespace fd = flashattn::detail;
  fd::AttnParams p;
  p.seqlen_q = p.seqlen_k = 4096;
  p.window_left = -1, p.window_right = 0;  // causal
  // 64-row query tiles, 128-key tiles: key tile n reaches query tiles 2n .. 63
  const s8::UnitSteps st = s8::bwd_unit_steps(fd::WindowMask(p), 4096, 4096, 64, 128);
  EXPECT_EQ(st.longest, 64);
  EXPECT_EQ(st.total, 64 * 32 - 32 * 31);  // sum of 64 - 2n, n < 32
  // 132 slots: 64 x 132 / 1056 = 8 units; 64 units in groups of 6: 9 groups, then 10
  EXPECT_EQ(s8::grid_last_group_min(st.total, st.longest, 132), 8);
  EXPECT_EQ(s8::grid_full_groups(64, 6, 8), 9);
  EXPECT_EQ(s8::grid_full_groups(64, 6, 0), 10);   // no mask: groups of 6 and a last of 4
  EXPECT_EQ(s8::grid_full_groups(64, 6, 64), 0);   // one group of all
  EXPECT_EQ(s8::grid_full_groups(64, 6, 100), 0);
  EXPECT_EQ(s8::grid_full_groups(64, 64, 8), 0);
  EXPECT_EQ(s8::grid_full_groups(64, 1, 8), 56);
  // No mask: every key tile sees every query tile.
  p.window_right = -1;
  const s8::UnitSteps full = s8::bwd_unit_steps(fd::WindowMask(p), 4096, 4096, 64, 128);
  EXPECT_EQ(full.longest, 64);
  EXPECT_EQ(full.total, 64 * 32);
  // The forward's units: 128-row query tiles over 64-key tiles, causal 4k:
  // query tile m sees key tiles 0 .. 2m + 1.
  p.window_right = 0;
  const s8::UnitSteps fwd = s8::fwd_unit_steps(fd::WindowMask(p), 4096, 128, 64);
  EXPECT_EQ(fwd.longest, 64);
  EXPECT_EQ(fwd.total, 32 * 33);  // sum of 2m + 2, m < 32
  EXPECT_EQ(s8::l2_group_units(64, 2 << 20, 50ll << 20), 12);  // 2 MiB of K and V each in 25 MiB
  // Rows past the keys' reach (Sq > Sk, causal): the first rows see nothing.
  p.seqlen_q = 300, p.seqlen_k = 100, p.window_right = 0;
  const s8::UnitSteps tall = s8::bwd_unit_steps(fd::WindowMask(p), 300, 100, 64, 128);
  EXPECT_EQ(tall.longest, 2);  // rows 200..299 of query tiles 3 and 4
  EXPECT_EQ(tall.total, 2);
}

// The launchers' group computation (fwd_grid_groups, bwd_grid_groups): the
// slot count is asked for only where a mask sizes the last group.
TEST(Sm80Plan, GridGroupsAskForSlotsOnlyUnderAMask) {
  namespace fd = flashattn::detail;
  fd::AttnParams p;
  p.seqlen_q = p.seqlen_k = 4096;
  p.window_left = -1, p.window_right = 0;  // causal
  int asked = 0;
  const auto slots = [&] { return ++asked, 132LL; };
  // Backward, 64 units of 4 MiB (Q, dO, dQ rows) in a 50 MB L2: groups of 6,
  // the last of at least 8 units (LastGroupCoversTheLongestBlock): 9 full groups.
  const long long unit = s8::bwd_unit_bytes(1, 4096, 128, 2);
  s8::GridGroups g = s8::bwd_grid_groups(fd::WindowMask(p), 64, 4096, unit, 50ll << 20,
                                         s8::BwdOrder::automatic, 64, 128, slots);
  EXPECT_EQ(g.group_units, 6);
  EXPECT_EQ(g.full_groups, 9);
  EXPECT_EQ(asked, 1);
  g = s8::bwd_grid_groups(fd::WindowMask(p), 64, 4096, unit, 50ll << 20, s8::BwdOrder::groups, 64, 128, slots);
  EXPECT_EQ(g.full_groups, 10);  // the fiftieth session's: the remainder last
  g = s8::bwd_grid_groups(fd::WindowMask(p), 64, 4096, unit, 50ll << 20, s8::BwdOrder::head, 64, 128, slots);
  EXPECT_EQ(g.group_units, 1);
  EXPECT_EQ(asked, 1);
  p.window_right = -1;  // no mask
  g = s8::bwd_grid_groups(fd::WindowMask(p), 64, 4096, unit, 50ll << 20, s8::BwdOrder::automatic, 64, 128, slots);
  EXPECT_EQ(g.full_groups, 10);
  EXPECT_EQ(asked, 1);
  // Forward (its caller checks the mask): 64 units of 2 MiB of K and V in groups
  // of 12; 264 slots x 64 steps / 1,056 steps a unit = a last group of 16.
  p.window_right = 0;
  g = s8::fwd_grid_groups(fd::WindowMask(p), 64, 4096, 2 << 20, 50ll << 20, 128, 64, [] { return 264LL; });
  EXPECT_EQ(g.group_units, 12);
  EXPECT_EQ(g.full_groups, 4);
}

// WindowMask::queries, the rows a key range reaches, against keys(i) row by row.
TEST(Sm80Plan, MaskQueriesAreTheRowsThatSeeTheKeys) {
  namespace fd = flashattn::detail;
  for (int sq : {1, 37, 130})
    for (int sk : {1, 50, 200})
      for (int wl : {-1, 0, 5, 64})
        for (int wr : {-1, 0, 3}) {
          fd::AttnParams p;
          p.seqlen_q = sq, p.seqlen_k = sk, p.window_left = wl, p.window_right = wr;
          const fd::WindowMask m(p);
          for (int c0 = 0; c0 < sk; c0 += 16) {
            const int c1 = std::min(sk, c0 + 16);
            const fd::KeyRange r = m.queries(c0, c1, sq);
            for (int i = 0; i < sq; ++i) {
              const fd::KeyRange k = m.keys(i);
              const bool sees = std::max<int64_t>(k.begin, c0) < std::min<int64_t>(k.end, c1);
              EXPECT_EQ(sees, i >= r.begin && i < r.end)
                  << "sq " << sq << " sk " << sk << " window (" << wl << ", " << wr << ") keys " << c0 << " row " << i;
            }
          }
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

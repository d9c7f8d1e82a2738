// The Hopper backward's tile bookkeeping (src/cuda/sm90/bwd_tile_order.hpp),
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

namespace {

using flashattn::detail::cuda::sm90::key_tiles_of_query_tile;
using flashattn::detail::cuda::sm90::KeyTileRun;
using flashattn::detail::cuda::sm90::query_tile_range;
using flashattn::detail::cuda::sm90::QueryTileRange;

struct Mask {
  int offset, left, right;
};

// The kernel's tiles (bwd_kernel_args.hpp: bwd_block_n(head dim) keys, 128
// but 64 at head dim 256; bwd_block_m(head dim) queries, 64 but 128 at 64).
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
  EXPECT_GT(checked, 100000 / (kBlockM / 64));
}

TEST(Sm90TileOrder, KeyTileRunMatchesEnumerationHeadDim128) { check_key_tile_runs<64, 128>(20261129); }
TEST(Sm90TileOrder, KeyTileRunMatchesEnumerationHeadDim64) { check_key_tile_runs<128, 128>(20261130); }
TEST(Sm90TileOrder, KeyTileRunMatchesEnumerationHeadDim256) { check_key_tile_runs<64, 64>(20261131); }

}  // namespace

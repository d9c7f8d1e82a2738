// SmemLayout::lane_addr (src/cuda/common/smem_tile.cuh), the shared address
// every sm80 ldmatrix lane uses, against the plain swizzle formula off():
// for every layout the kernels instantiate, every lane row (row8 + rin),
// every column chunk c8 (odd ones included: head dim 192's dQ chunks of
// three n-tiles start at odd chunks) and both lane column bits, the two must
// name the same byte, at tile bases 128-byte aligned as the kernels' are.
// Runs on the host through src/cuda/emu (shared addresses are offsets into
// the emulated shared memory); the GPU sweep covers the kernels themselves.
#include "cuda_emu.hpp"  // first: the CUDA keywords for the host compiler

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "common/smem_tile.cuh"

EMU_DEFINE_SMEM

namespace {

namespace cu = flashattn::detail::cuda;

template <int ROWS, int COLS>
void check_layout(int tile_offset_bytes) {
  using L = cu::SmemLayout<ROWS, COLS>;
  const auto* s = reinterpret_cast<const uint16_t*>(emu::g_smem + tile_offset_bytes);
  int checked = 0;
  for (int row8 = 0; row8 < ROWS; row8 += 8) {
    for (int rin = 0; rin < 16 && row8 + rin < ROWS; ++rin) {
      for (int c8 = 0; c8 < L::kChunks; ++c8) {
        for (int cb = 0; cb < 2 && c8 + cb < L::kChunks; ++cb) {
          const uint32_t want = cu::smem_u32(s + L::off(row8 + rin, 8 * (c8 + cb)));
          const uint32_t got = L::lane_addr(s, row8, rin, c8, cb);
          ASSERT_EQ(got, want) << ROWS << "x" << COLS << " at +" << tile_offset_bytes << ": row8 " << row8
                               << " rin " << rin << " c8 " << c8 << " cb " << cb;
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 0);
}

TEST(Sm80EmuSmemLayout, LaneAddrMatchesOff) {
  for (int base : {0, 128, 4096, 12416}) {  // 128-byte aligned tile bases
    SCOPED_TRACE("tile base " + std::to_string(base));
    check_layout<64, 64>(base);    // P / dS tiles (64 queries)
    check_layout<128, 64>(base);   // head dim 64 Q/K/V tiles
    check_layout<64, 96>(base);    // head dim 96: padded rows, no swizzle
    check_layout<128, 128>(base);  // head dim 128
    check_layout<64, 192>(base);   // head dim 192: 24 chunks per row
    check_layout<64, 256>(base);   // head dim 256
  }
}

}  // namespace

// The sm80 forward's plan (src/cuda/sm80/fwd_plan.hpp) is host code: the
// split-KV counts it picks for decode steps, checked without a GPU.
#include <gtest/gtest.h>

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

}  // namespace

// Tile scheduler: persistent CTAs, static round robin. CTA c takes the work
// tiles c, c + gridDim.x, ... so that its producer can load the next tile's
// Q/K/V while the consumers finish the current one, and no CTA launch or
// pipeline set-up sits between tiles. The host picks the grid
// (sm90_forward.cu): min(#work tiles, #SMs) without a mask; #work tiles (one
// each, dispatched in order by the hardware) with a causal/window mask.
//
// Work tile t = (m_block, head, batch) with m fastest: the CTAs working at
// the same time share a head's K/V in L2 (at seqlen 16k one head's K/V is
// 8 MB; 132 different heads at once would not fit). With a causal/window
// mask the m order is reversed, so that within a head the query tiles that
// see the most keys start first and the short ones fill the tail.
#pragma once

#include "kernel_args.hpp"

namespace flashattn::detail::cuda::sm90 {

struct WorkTile {
  int m_block, head, batch;
};

struct PersistentTileScheduler {
  static dim3 grid(const KernelArgs& a) { return dim3(static_cast<unsigned>(a.grid_ctas)); }

  __device__ static int first() { return static_cast<int>(blockIdx.x); }
  __device__ static int stride() { return static_cast<int>(gridDim.x); }

  __device__ static WorkTile decode(const KernelArgs& a, int t) {
    int m = t % a.num_m_blocks;
    const int hb = t / a.num_m_blocks;
    if (a.longest_first) m = a.num_m_blocks - 1 - m;
    return {m, hb % a.heads_q, hb / a.heads_q};
  }
};

}  // namespace flashattn::detail::cuda::sm90

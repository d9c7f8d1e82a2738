// Tile scheduler, first version: one CTA per (query tile, head, batch). The
// query tile is blockIdx.x, fastest-varying so that CTAs running together
// share a head's K/V in L2. With a causal/window mask the CTAs whose tiles see
// the most keys start first (largest m first for bottom-right causal), which
// shortens the tail of the wave.
#pragma once

#include "kernel_args.hpp"

namespace flashattn::detail::cuda::sm90 {

struct WorkTile {
  int m_block, head, batch;
};

struct SingleTileScheduler {
  static dim3 grid(const KernelArgs& a) {
    return dim3(static_cast<unsigned>(a.num_m_blocks), static_cast<unsigned>(a.heads_q),
                static_cast<unsigned>(a.batch));
  }
  __device__ static WorkTile get(const KernelArgs& a) {
    int m = static_cast<int>(blockIdx.x);
    if (a.longest_first) m = a.num_m_blocks - 1 - m;
    return {m, static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.z)};
  }
};

}  // namespace flashattn::detail::cuda::sm90

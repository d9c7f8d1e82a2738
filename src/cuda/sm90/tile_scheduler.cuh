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

// A work tile and its sequence: row offsets in the TMA maps (varlen: the
// packed rows, whose map batch is 0), and the sequence's lengths.
struct WorkTile {
  int m_block, head, batch;
  int q_off, k_off, map_batch;
  int seqlen_q, seqlen_k;
  // Varlen: query tiles past the sequence's end have no work (both roles
  // skip them, and count only the others for their barrier phases).
  __device__ bool active(int block_m) const { return m_block * block_m < seqlen_q; }
};

struct PersistentTileScheduler {
  static dim3 grid(const KernelArgs& a) { return dim3(static_cast<unsigned>(a.grid_ctas)); }

  __device__ static int first() { return static_cast<int>(blockIdx.x); }
  __device__ static int stride() { return static_cast<int>(gridDim.x); }

  template <bool kVarlen>
  __device__ static WorkTile decode(const KernelArgs& a, int t) {
    int m = t % a.num_m_blocks;
    const int hb = t / a.num_m_blocks;
    if (a.longest_first) m = a.num_m_blocks - 1 - m;
    WorkTile w{m, hb % a.heads_q, hb / a.heads_q, 0, 0, 0, a.seqlen_q, a.seqlen_k};
    if constexpr (kVarlen) {
      w.q_off = a.cu_seqlens_q[w.batch];
      w.seqlen_q = a.cu_seqlens_q[w.batch + 1] - w.q_off;
      w.k_off = a.cu_seqlens_k[w.batch];
      w.seqlen_k = a.cu_seqlens_k[w.batch + 1] - w.k_off;
    } else {
      w.map_batch = w.batch;
    }
    return w;
  }
};

}  // namespace flashattn::detail::cuda::sm90

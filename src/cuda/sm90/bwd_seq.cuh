// Per-sequence extent of a Hopper backward CTA (varlen batches, issue 8).
//
// Padded batches: every sequence has seqlen_q queries and seqlen_k keys,
// batch entry b is the TMA maps' batch coordinate, and the workspace rows of
// (b, h) start at (b * Hq + h) * seqlen_q_pad. Varlen: the CTA reads its
// sequence's lengths and first packed rows from cu_seqlens (one launch covers
// the packed batch: no host copy of the offsets, graph-capturable), the maps
// span the packed rows (batch 1), the workspace rows are bwd_varlen_row0's,
// and the mask's diagonal moves to the sequence (causal is bottom-right
// aligned per sequence, as everywhere else).
//
// Varlen tiles that run past a sequence's end hold the next sequence's rows
// (a TMA box is not clipped at a sequence boundary). Their P and dS are 0 by
// the mask (keys) or by the +inf LSE of the workspace's padding rows
// (queries), but 0 * NaN is NaN: a non-finite value in another sequence
// would reach this one's dK, dV (through P^T dO, dS^T Q) and dQ (dS K). So
// the consumers zero those rows of K and V once and of Q and dO on each
// step that needs it (zero_rows_past_end), before any wgmma reads them.
// Padded batches need none of this: TMA fills rows past the end with zeros.
#pragma once

#include <cstdint>

#include "block_mask.cuh"
#include "bwd_kernel_args.hpp"
#include "ptx.cuh"

namespace flashattn::detail::cuda::sm90 {

struct BwdSeq {
  int len_q, len_k;
  int q_row, k_row;  // the sequence's first row in the maps (0 when padded)
  int map_b;         // the maps' batch coordinate (0 when varlen)
  int64_t ws_row0;   // workspace row of (head 0, query 0)
  int64_t ws_head_rows;
  BlockMask mask;
  // Workspace row of query m0 of query head `head` (LSE/D, dQ accumulator,
  // and / kBlockM the deterministic mode's counter).
  __device__ __forceinline__ int64_t ws_row(int head, int m0) const {
    return ws_row0 + head * ws_head_rows + m0;
  }
};

template <int kBlockM, bool kVarlen>
__device__ __forceinline__ BwdSeq bwd_seq(const BwdKernelArgs& a, int b) {
  BwdSeq s;
  if constexpr (kVarlen) {
    const int q0 = a.cu_seqlens_q[b], k0 = a.cu_seqlens_k[b];
    s.len_q = a.cu_seqlens_q[b + 1] - q0;
    s.len_k = a.cu_seqlens_k[b + 1] - k0;
    s.q_row = q0;
    s.k_row = k0;
    s.map_b = 0;
    s.ws_row0 = bwd_varlen_row0(q0, b, kBlockM);
    s.ws_head_rows = a.ws_head_rows;
  } else {
    s.len_q = a.seqlen_q;
    s.len_k = a.seqlen_k;
    s.q_row = s.k_row = 0;
    s.map_b = b;
    s.ws_row0 = static_cast<int64_t>(b) * a.heads_q * a.seqlen_q_pad;
    s.ws_head_rows = a.seqlen_q_pad;
  }
  s.mask = BlockMask{s.len_k - s.len_q, a.window_left, a.window_right, s.len_k};
  return s;
}

// Zero rows [first, kRows) of the shared tiles t0 and t1 (kAtoms atom
// columns of kRows x 128 bytes each, the 128-byte swizzle keeping every
// row's chunks inside its own 128 bytes), spread over nthreads threads (ctid
// = 0 .. nthreads - 1), then publish the zeros to the wgmmas (async proxy)
// and meet the other zeroing threads at named barrier `bar`.
template <int kRows, int kAtoms>
__device__ __forceinline__ void zero_rows_past_end(uint32_t t0, uint32_t t1, int first, int ctid,
                                                   int nthreads, uint32_t bar) {
  constexpr int kChunks = 8;  // 16-byte chunks per 128-byte row
  const int rows = kRows - first;
  const int per_tile = rows * kAtoms * kChunks;
  for (int i = ctid; i < 2 * per_tile; i += nthreads) {
    const int r = i < per_tile ? i : i - per_tile;
    const int chunk = r % kChunks, row = first + (r / kChunks) % rows, at = r / (kChunks * rows);
    st_shared_zero16((i < per_tile ? t0 : t1) + at * kRows * 128 + row * 128 + chunk * 16);
  }
  fence_proxy_async_smem();  // st.shared -> wgmma reads (async proxy)
  named_barrier_sync_unaligned(bar, nthreads);
}

}  // namespace flashattn::detail::cuda::sm90

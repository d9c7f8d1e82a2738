// Per-sequence extent of a backward block (varlen batches, issue 8): every
// block of the backward kernels reads its sequence's lengths and first
// packed rows from cu_seqlens on the device, so that one launch covers the
// whole packed batch (no host copy of the offsets, no per-sequence loop:
// graph-capturable), with the mask's diagonal moved to the sequence (causal
// is bottom-right aligned per sequence: query i sees key j <= i + len_k -
// len_q, as the CPU backend does it).
//
// ON (compile time): the instantiation may see varlen batches (SEQ, VAR);
// without it the padded batch's values come back and the kernels keep using
// a.mask and the [B, Hq, Sq] row formula, so the default instantiations'
// code does not change.
#pragma once

#include <cstdint>

#include "sm80/kernel_args.hpp"

namespace flashattn::detail::cuda::sm80 {

struct BwdSeq {
  int len_q, len_k;
  int q_off, k_off;      // first packed row of the sequence in q / k (0 when padded; int32 like cu_seqlens)
  WindowMask mask;       // a.mask with this sequence's diagonal and key count
};

template <bool ON>
__device__ __forceinline__ BwdSeq bwd_seq(const BwdArgs& a, int b) {
  BwdSeq s{a.seqlen_q, a.seqlen_k, 0, 0, a.mask};
  if (ON && a.cu_q != nullptr) {
    const int32_t q0 = a.cu_q[b], q1 = a.cu_q[b + 1], k0 = a.cu_k[b], k1 = a.cu_k[b + 1];
    s.q_off = q0;
    s.k_off = k0;
    s.len_q = q1 - q0;
    s.len_k = k1 - k0;
    s.mask.offset = s.len_k - s.len_q;
    s.mask.seqlen_k = s.len_k;
  }
  return s;
}

// Row of (b, h, query 0) in the LSE, D and fp32 dQ-accumulator arrays
// (BwdArgs::row_sb / row_sh); add the query index.
template <bool ON>
__device__ __forceinline__ int64_t bwd_row0(const BwdArgs& a, const BwdSeq& s, int b, int h) {
  if constexpr (ON) {
    return b * a.row_sb + h * a.row_sh + s.q_off;
  } else {
    return (static_cast<int64_t>(b) * a.heads_q + h) * s.len_q;
  }
}

}  // namespace flashattn::detail::cuda::sm80

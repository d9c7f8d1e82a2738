// The fp8 forward's V operand. wgmma reads 8-bit operands K-major only, and
// in O += P V the reduction runs over keys, so V [batch, seqlen_k, heads_kv,
// head_dim] is first rewritten key-contiguous, V^T [batch, heads_kv,
// head_dim, keys_padded], by a small bandwidth-bound kernel (one read and one
// write of V; FlashAttention-3 transposes in shared memory instead, which
// saves that pass at the cost of producer-warp work in the kernel).
//
// Within every 16 keys the order is permuted so that V^T's byte k lines up
// with the register-A fragment of P (kernel.cuh convert_p): stored position
// L = 4t + e (t, e in 0..3) holds key (e / 2) * 8 + 2t + e % 2.
// Keys from seqlen_k up to keys_padded (a multiple of 128) are zero.
//
// Varlen batches: V^T [1, heads_kv, head_dim, fp8_vt_row_keys(p)], sequence
// b's keys from position fp8_vt_seq_start(cu_seqlens_k[b], b) on, zero from
// its length up to its last key tile's end; positions between the sequences'
// tiles are never written nor read.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/params.hpp"
#include "kernel_args.hpp"

namespace flashattn::detail::cuda::sm90 {

constexpr int64_t kFp8VtKeyAlign = kFp8BlockN;  // whole key tiles

inline int64_t fp8_vt_keys(int64_t seqlen_k) {
  return (seqlen_k + kFp8VtKeyAlign - 1) / kFp8VtKeyAlign * kFp8VtKeyAlign;
}
// Varlen: where sequence b (keys from packed row cu_k on) starts in V^T. A
// multiple of 128, so that each key tile's row is one 128-byte line for the
// transpose's stores and the kernel's V^T loads (bench/sm90/NOTES.md, "fp8
// varlen"), and the next sequence's start is at least
// len_b + 129 further (round_up(cu, 128) moves by at least len_b - 127, plus
// 256): room for len_b's last key tile, ceil(len_b / 128) * 128 <= len_b +
// 127 positions.
__host__ __device__ inline int64_t fp8_vt_seq_start(int64_t cu_k, int64_t b) {
  return (cu_k + 127) / 128 * 128 + 256 * b;
}
// V^T's keys per row: padded, seqlen_k rounded up to whole key tiles; varlen,
// the position where a sequence after the last would start (the last
// sequence's tiles end before it).
inline int64_t fp8_vt_row_keys(const AttnParams& p) {
  return p.varlen() ? fp8_vt_seq_start(p.total_k, p.batch) : fp8_vt_keys(p.seqlen_k);
}

inline size_t fp8_vt_bytes(const AttnParams& p) {
  const int64_t batches = p.varlen() ? 1 : p.batch;  // varlen: one row per (head, column) for all sequences
  return static_cast<size_t>(batches * p.heads_kv * p.head_dim * fp8_vt_row_keys(p));
}

// The key stored at position `pos` of V^T (the permutation above).
__host__ __device__ inline int fp8_vt_key_of(int pos) {
  const int l = pos % 16, t = l / 4, e = l % 4;
  return pos - l + (e / 2) * 8 + 2 * t + e % 2;
}

// V (p.v, p.v_str; 16-byte aligned rows) -> vt, padded or varlen (p.cu_seqlens_k
// read by the kernel). head_dim a multiple of 16.
Status launch_fp8_v_transpose(const AttnParams& p, uint8_t* vt, cudaStream_t stream);

}  // namespace flashattn::detail::cuda::sm90

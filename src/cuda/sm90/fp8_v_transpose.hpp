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
inline size_t fp8_vt_bytes(const AttnParams& p) {
  return static_cast<size_t>(p.batch * p.heads_kv * p.head_dim * fp8_vt_keys(p.seqlen_k));
}

// The key stored at position `pos` of V^T (the permutation above).
__host__ __device__ inline int fp8_vt_key_of(int pos) {
  const int l = pos % 16, t = l / 4, e = l % 4;
  return pos - l + (e / 2) * 8 + 2 * t + e % 2;
}

// V (p.v, p.v_str; 16-byte aligned rows) -> vt. head_dim a multiple of 16.
Status launch_fp8_v_transpose(const AttnParams& p, uint8_t* vt, cudaStream_t stream);

}  // namespace flashattn::detail::cuda::sm90

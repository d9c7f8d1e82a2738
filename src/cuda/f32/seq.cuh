// One sequence of a batch as the fp32 kernels see it: lengths and first rows
// from cu_seqlens (varlen) or the KV-cache lengths, K/V's batch entry, the
// mask re-anchored to the sequence's own lengths, and where key row j lives
// (paged or not). The same rules as the sm80 forward (sm80/fwd_kernel.cuh)
// and the CPU backend (common/sequence.hpp).
#pragma once

#include <cstdint>

#include "common/mask.hpp"
#include "f32/tiles.cuh"
#include "sm80/fwd_args.hpp"

namespace flashattn::detail::cuda::f32 {

struct Seq {
  int len_q, len_k;
  int64_t q_off, k_off;
  int kv_b;
  WindowMask mask;
};

// cu_q / cu_k: varlen offsets or nullptr; seqlens_k (+ add, - leftpad): the
// KV cache's lengths or nullptr.
__device__ __forceinline__ Seq sequence(const sm80::AttnArgs& a, int b, const int32_t* cu_q, const int32_t* cu_k,
                                        const int32_t* seqlens_k = nullptr, int seqlens_k_add = 0,
                                        const int32_t* leftpad_k = nullptr, const int32_t* kv_batch_idx = nullptr) {
  Seq s{a.seqlen_q, a.seqlen_k, 0, 0, b, a.mask};
  if (cu_q != nullptr) {
    s.q_off = cu_q[b];
    s.len_q = cu_q[b + 1] - cu_q[b];
    s.k_off = cu_k[b];
    s.len_k = cu_k[b + 1] - cu_k[b];
  }
  if (seqlens_k != nullptr) {
    const int left = leftpad_k != nullptr ? leftpad_k[b] : 0;
    s.len_k = seqlens_k[b] + seqlens_k_add - left;
    s.k_off = left;
    if (kv_batch_idx != nullptr) s.kv_b = kv_batch_idx[b];
  }
  s.mask.offset = s.len_k - s.len_q;
  s.mask.seqlen_k = s.len_k;
  return s;
}

__device__ __forceinline__ ScoreRule score_rule(const sm80::AttnArgs& a, const Seq& s, int b, int h) {
  return {a.scale, a.softcap, a.cap_scale, a.alibi != nullptr ? a.alibi[b * a.alibi_sb + h] : 0.f,
          static_cast<int64_t>(s.len_k) - s.len_q};
}

// Generator row of (b, h) as common/philox.hpp numbers it (b in the caller's batch).
__device__ __forceinline__ uint32_t drop_row(const sm80::AttnArgs& a, int b, int h) {
  return static_cast<uint32_t>((a.drop_b0 + b) * a.rng.heads + h);
}

// Whether any (query, key) of rows [q0, q1) x keys [k0, k1) is visible.
// Key ranges only move right as the query grows, so the union of the rows'
// ranges is [first row's begin, last row's end): outside it, no. Inside it a
// window narrower than the tile can still pass between rows, so the rows
// are then checked one by one (a few dozen integer compares per tile).
__device__ __forceinline__ bool any_visible(const WindowMask& m, int q0, int q1, int k0, int k1) {
  if (q0 >= q1 || k0 >= k1) return false;
  const KeyRange all = m.keys(q0, q1);
  if (all.end <= k0 || all.begin >= k1) return false;
  for (int q = q0; q < q1; ++q) {
    const KeyRange r = m.keys(q);
    if (r.begin < k1 && r.end > k0 && r.begin < r.end) return true;
  }
  return false;
}

}  // namespace flashattn::detail::cuda::f32

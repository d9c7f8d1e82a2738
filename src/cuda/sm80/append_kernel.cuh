// KV-cache append, run before the attention on the same stream: row s of
// k_new / v_new goes to cache row cache_seqlens[b] + s of cache entry
// kv_batch_idx[b] (or b; through the block table when paged). One thread per
// 16-byte chunk of a row. With rotary embedding (common/rotary.hpp) the k
// rows are rotated at that row's position on the way, and the same launch
// rotates q into a contiguous copy (q_out) that the attention then reads.
#pragma once

#include <cstdint>

#include "common/params.hpp"
#include "common/rotary.hpp"

namespace flashattn::detail::cuda::sm80 {

struct AppendArgs {
  const uint4 *k_new, *v_new;  // as 16-byte chunks; strides below in elements
  uint4 *k_cache, *v_cache;
  Strides kn, vn, kc, vc;
  const int32_t* seqlens;
  const int32_t* kv_batch_idx;  // nullptr = entry b
  const int32_t* block_table;
  int64_t bt_stride;
  int page_size, batch, s_new, heads_kv, chunks;  // 16-byte chunks per row (chunk_elems<T> elements each)
  // Rotary (rot_dim 0 = off; a multiple of 16, so that a chunk lies wholly
  // inside or outside the rotated dims and a GPT-NeoX partner is a whole chunk
  // away). q is [B, s_q, heads_q, D] with strides qs; q_out contiguous.
  const void *cos, *sin;
  int64_t cos_stride, sin_stride;
  int rot_dim;
  bool interleaved, q_per_row;
  const uint4* q;
  uint4* q_out;
  Strides qs;
  int s_q, heads_q;
};

// Elements of T in a 16-byte chunk: 8 of fp16 / bf16, 4 of fp32.
template <class T>
constexpr int chunk_elems = 16 / static_cast<int>(sizeof(T));

__device__ __forceinline__ int64_t append_cache_row(const AppendArgs& a, const Strides& st, int b, int t) {
  if (a.block_table != nullptr)
    return a.block_table[b * a.bt_stride + t / a.page_size] * st.batch + static_cast<int64_t>(t % a.page_size) * st.seq;
  const int e = a.kv_batch_idx != nullptr ? a.kv_batch_idx[b] : b;
  return e * st.batch + static_cast<int64_t>(t) * st.seq;
}

// Chunk c of a row (16-byte chunks from `row`), rotated at position pos.
template <class T>
__device__ __forceinline__ uint4 rotate_chunk(const AppendArgs& a, const uint4* row, int c, int64_t pos) {
  const uint4 x = row[c];
  constexpr int kEl = chunk_elems<T>;
  if (a.rot_dim == 0 || c * kEl >= a.rot_dim) return x;
  const int half_chunks = a.rot_dim / (2 * kEl);
  const uint4 other = a.interleaved ? x : row[c * kEl < a.rot_dim / 2 ? c + half_chunks : c - half_chunks];
  const T* xe = reinterpret_cast<const T*>(&x);
  const T* oe = reinterpret_cast<const T*>(&other);
  const T* cs = static_cast<const T*>(a.cos) + pos * a.cos_stride;
  const T* sn = static_cast<const T*>(a.sin) + pos * a.sin_stride;
  uint4 y;
  T* ye = reinterpret_cast<T*>(&y);
#pragma unroll
  for (int e = 0; e < kEl; ++e) {
    const RotaryPair r = rotary_pair(c * kEl + e, a.rot_dim, a.interleaved);
    const float partner = static_cast<float>(a.interleaved ? xe[e ^ 1] : oe[e]);
    ye[e] = T(rotary_apply(static_cast<float>(xe[e]), partner, static_cast<float>(cs[r.freq]),
                           static_cast<float>(sn[r.freq]), r.sign));
  }
  return y;
}

// Element strides are multiples of a chunk (checked by the dispatch), so a
// chunk index is an element offset / chunk_elems. Threads [0, kv) append,
// [kv, kv + q) rotate q.
template <class T>
__global__ void __launch_bounds__(256) append_kv_kernel(const AppendArgs a) {
  constexpr int kEl = chunk_elems<T>;
  int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t kv_total = static_cast<int64_t>(a.batch) * a.s_new * a.heads_kv * a.chunks;
  const int c = static_cast<int>(idx % a.chunks);
  if (idx >= kv_total) {  // q rotation
    idx -= kv_total;
    if (a.q_out == nullptr || idx >= static_cast<int64_t>(a.batch) * a.s_q * a.heads_q * a.chunks) return;
    int64_t r = idx / a.chunks;  // row of q_out: (b, i, h)
    const int h = static_cast<int>(r % a.heads_q);
    r /= a.heads_q;
    const int i = static_cast<int>(r % a.s_q), b = static_cast<int>(r / a.s_q);
    const int64_t qo = b * a.qs.batch + static_cast<int64_t>(i) * a.qs.seq + h * a.qs.head;
    const int64_t pos = rotary_q_position(a.q_per_row, a.seqlens[b], i);
    a.q_out[idx] = rotate_chunk<T>(a, a.q + qo / kEl, c, pos);
    return;
  }
  int64_t r = idx / a.chunks;
  const int hk = static_cast<int>(r % a.heads_kv);
  r /= a.heads_kv;
  const int s = static_cast<int>(r % a.s_new), b = static_cast<int>(r / a.s_new);
  const int t = a.seqlens[b] + s;
  const int64_t kc = append_cache_row(a, a.kc, b, t) + hk * a.kc.head;
  const int64_t vc = append_cache_row(a, a.vc, b, t) + hk * a.vc.head;
  const int64_t kn = b * a.kn.batch + static_cast<int64_t>(s) * a.kn.seq + hk * a.kn.head;
  const int64_t vn = b * a.vn.batch + static_cast<int64_t>(s) * a.vn.seq + hk * a.vn.head;
  a.k_cache[kc / kEl + c] = rotate_chunk<T>(a, a.k_new + kn / kEl, c, t);
  a.v_cache[vc / kEl + c] = a.v_new[vn / kEl + c];
}

}  // namespace flashattn::detail::cuda::sm80

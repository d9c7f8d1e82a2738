// KV-cache append, run before the attention on the same stream: row s of
// k_new / v_new goes to cache row cache_seqlens[b] + s (through the block
// table when paged). One thread per 16-byte chunk of a row.
#pragma once

#include <cstdint>

#include "common/params.hpp"

namespace flashattn::detail::cuda::sm80 {

struct AppendArgs {
  const uint4 *k_new, *v_new;  // as 16-byte chunks; strides below in elements
  uint4 *k_cache, *v_cache;
  Strides kn, vn, kc, vc;
  const int32_t* seqlens;
  const int32_t* block_table;
  int64_t bt_stride;
  int page_size, batch, s_new, heads_kv, chunks;  // chunks of 8 elements per row
};

__device__ __forceinline__ int64_t append_cache_row(const AppendArgs& a, const Strides& st, int b, int t) {
  if (a.block_table != nullptr)
    return a.block_table[b * a.bt_stride + t / a.page_size] * st.batch + static_cast<int64_t>(t % a.page_size) * st.seq;
  return b * st.batch + static_cast<int64_t>(t) * st.seq;
}

// Element strides are multiples of 8 (checked by the dispatch), so a chunk
// index is an element offset / 8. A template only so that every
// instantiation file may include it (one definition per program).
template <int kUnused = 0>
__global__ void __launch_bounds__(256) append_kv_kernel(const AppendArgs a) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t total = static_cast<int64_t>(a.batch) * a.s_new * a.heads_kv * a.chunks;
  if (idx >= total) return;
  const int c = static_cast<int>(idx % a.chunks);
  int64_t r = idx / a.chunks;
  const int hk = static_cast<int>(r % a.heads_kv);
  r /= a.heads_kv;
  const int s = static_cast<int>(r % a.s_new), b = static_cast<int>(r / a.s_new);
  const int t = a.seqlens[b] + s;
  const int64_t kc = append_cache_row(a, a.kc, b, t) + hk * a.kc.head;
  const int64_t vc = append_cache_row(a, a.vc, b, t) + hk * a.vc.head;
  const int64_t kn = b * a.kn.batch + static_cast<int64_t>(s) * a.kn.seq + hk * a.kn.head;
  const int64_t vn = b * a.vn.batch + static_cast<int64_t>(s) * a.vn.seq + hk * a.vn.head;
  a.k_cache[kc / 8 + c] = a.k_new[kn / 8 + c];
  a.v_cache[vc / 8 + c] = a.v_new[vn / 8 + c];
}

}  // namespace flashattn::detail::cuda::sm80

// Host launcher of the KV-cache append (sm80/append_kernel.cuh), shared by
// the sm80 forward (launch_fwd.cuh) and the fp32 one (f32/launch_f32.cuh).
#pragma once

#include <cuda_runtime.h>

#include "common/rotary.hpp"
#include "cuda_check.hpp"
#include "sm80/append_kernel.cuh"

namespace flashattn::detail::cuda::sm80 {

// Appends k_new / v_new and, with rotary, writes q's rotated copy to q_out.
template <class T>
Status launch_append(const FwdParams& p, void* q_out, cudaStream_t stream) {
  AppendArgs a{};
  a.k_new = static_cast<const uint4*>(p.k_new);
  a.v_new = static_cast<const uint4*>(p.v_new);
  a.k_cache = static_cast<uint4*>(const_cast<void*>(p.k));
  a.v_cache = static_cast<uint4*>(const_cast<void*>(p.v));
  a.kn = p.knew_str;
  a.vn = p.vnew_str;
  a.kc = p.k_str;
  a.vc = p.v_str;
  a.seqlens = p.seqlens_k;
  a.kv_batch_idx = p.kv_batch_idx;
  a.block_table = p.block_table;
  a.bt_stride = p.block_table_stride;
  a.page_size = static_cast<int>(p.page_size);
  a.batch = static_cast<int>(p.batch);
  a.s_new = static_cast<int>(p.seqlens_k_add);
  a.heads_kv = static_cast<int>(p.heads_kv);
  a.chunks = static_cast<int>(p.head_dim / chunk_elems<T>);
  int64_t total = p.batch * p.seqlens_k_add * p.heads_kv * a.chunks;
  if (p.rotary_cos != nullptr) {
    a.cos = p.rotary_cos;
    a.sin = p.rotary_sin;
    a.cos_stride = p.rotary_cos_stride;
    a.sin_stride = p.rotary_sin_stride;
    a.rot_dim = static_cast<int>(p.rotary_dim);
    a.interleaved = p.rotary_interleaved;
    a.q_per_row = rotary_q_per_row(p);
    a.q = static_cast<const uint4*>(p.q);
    a.q_out = static_cast<uint4*>(q_out);
    a.qs = p.q_str;
    a.s_q = static_cast<int>(p.seqlen_q);
    a.heads_q = static_cast<int>(p.heads_q);
    total += p.batch * p.seqlen_q * p.heads_q * a.chunks;
  }
  if (total == 0) return Status::Ok();
  append_kv_kernel<T><<<static_cast<unsigned>((total + 255) / 256), 256, 0, stream>>>(a);
  FA_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

}  // namespace flashattn::detail::cuda::sm80

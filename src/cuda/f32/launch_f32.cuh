// Host launchers of the fp32 path for one tile head dim: the KV-cache append
// (shared with the sm80 path, sm80/append_kernel.cuh) and the forward; the
// backward's three kernels. All on the caller's stream.
#pragma once

#include <cuda_runtime.h>

#include "cuda_check.hpp"
#include "f32/bwd_kernel.cuh"
#include "f32/fwd_kernel.cuh"
#include "f32/launch_f32.hpp"
#include "sm80/launch_append.cuh"

namespace flashattn::detail::cuda::f32 {

template <class Kernel>
Status set_smem(Kernel* kernel, size_t bytes) {
  FA_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  return Status::Ok();
}

template <int DT>
Status run_fwd(const FwdParams& p, void* workspace) {
  const cudaStream_t stream = static_cast<cudaStream_t>(p.stream);
  // KV-cache rotary: the append launch writes q's rotated copy, which the
  // attention then reads (the workspace holds only that copy here).
  void* q_rot = fwd_workspace_bytes(p) ? workspace : nullptr;
  if (p.k_new != nullptr && p.batch > 0 && p.heads_kv > 0) {
    if (Status s = sm80::launch_append<float>(p, q_rot, stream); !s.ok()) return s;
  }
  if (p.batch == 0 || p.heads_q == 0 || p.seqlen_q == 0) return Status::Ok();
  FwdParams pr = p;
  if (q_rot != nullptr) {
    pr.q = q_rot;
    pr.q_str = {p.seqlen_q * p.heads_q * p.head_dim, p.heads_q * p.head_dim, p.head_dim};
  }
  // Keys a row never visits keep 0 in the returned dropout mask.
  if (p.dropout_mask != nullptr)
    FA_CUDA_TRY(cudaMemsetAsync(p.dropout_mask, 0,
                                static_cast<size_t>(p.batch * p.heads_q * p.seqlen_q * p.seqlen_k) * sizeof(int32_t),
                                stream));
  using Tile = FwdTile<DT>;
  auto* kernel = &fwd_kernel<DT>;
  if (Status s = set_smem(kernel, Tile::smem()); !s.ok()) return s;
  const dim3 grid(static_cast<unsigned>((p.seqlen_q + Tile::BM - 1) / Tile::BM), static_cast<unsigned>(p.heads_q),
                  static_cast<unsigned>(p.batch));
  kernel<<<grid, kThreads, Tile::smem(), stream>>>(sm80::FwdSeqArgs(pr));
  FA_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

template <int DT>
Status run_bwd(const BwdParams& p, void* workspace) {
  if (p.batch == 0 || p.heads_q == 0 || (p.seqlen_q == 0 && p.seqlen_k == 0)) return Status::Ok();
  const cudaStream_t stream = static_cast<cudaStream_t>(p.stream);
  using Tile = BwdTile<DT>;
  sm80::BwdArgs a(p);
  a.dsum = static_cast<float*>(workspace);
  const unsigned hq = static_cast<unsigned>(p.heads_q), hkv = static_cast<unsigned>(p.heads_kv),
                 b = static_cast<unsigned>(p.batch);
  if (p.seqlen_q > 0) {
    constexpr int kRowsPerBlock = kThreads / 32;
    bwd_dsum_kernel<DT><<<dim3(static_cast<unsigned>((p.seqlen_q + kRowsPerBlock - 1) / kRowsPerBlock), hq, b), kThreads,
                      0, stream>>>(a);
    FA_CUDA_TRY(cudaGetLastError());
  }
  if (p.seqlen_k > 0) {
    auto* dkdv = &bwd_dkdv_kernel<DT>;
    if (Status s = set_smem(dkdv, Tile::dkdv_smem()); !s.ok()) return s;
    dkdv<<<dim3(static_cast<unsigned>((p.seqlen_k + Tile::BK - 1) / Tile::BK), hkv, b), kThreads, Tile::dkdv_smem(),
           stream>>>(a);
    FA_CUDA_TRY(cudaGetLastError());
  }
  if (p.seqlen_q > 0) {
    auto* dq = &bwd_dq_kernel<DT>;
    if (Status s = set_smem(dq, Tile::dq_smem()); !s.ok()) return s;
    dq<<<dim3(static_cast<unsigned>((p.seqlen_q + Tile::DQ_BQ - 1) / Tile::DQ_BQ), hq, b), kThreads, Tile::dq_smem(),
         stream>>>(a);
    FA_CUDA_TRY(cudaGetLastError());
  }
  return Status::Ok();
}

}  // namespace flashattn::detail::cuda::f32

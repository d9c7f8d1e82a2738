// Host launcher of the sm80 backward for one (element type, head dim):
//   1. D = rowsum(dO * O)                      (bwd_preprocess)
//   2. dK, dV (+ atomic fp32 dQ unless deterministic)  (bwd_kernel)
//   3. dQ: convert the fp32 accumulator (bwd_postprocess), or, when
//      deterministic, the atomic-free bwd_dq_kernel.
#pragma once

#include <cuda_runtime.h>

#include "cuda_check.hpp"
#include "sm80/bwd_dq_kernel.cuh"
#include "sm80/bwd_kernel.cuh"
#include "sm80/bwd_postprocess.cuh"
#include "sm80/bwd_preprocess.cuh"
#include "sm80/launch.hpp"

namespace flashattn::detail::cuda::sm80 {

template <class K>
Status set_smem(K* kernel, size_t bytes) {
  FA_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  return Status::Ok();
}

template <int E, int D>
Status run_bwd(const BwdParams& p, void* workspace) {
  using T = typename ElemType<E>::type;
  if (p.batch == 0 || p.heads_q == 0) return Status::Ok();
  const cudaStream_t stream = static_cast<cudaStream_t>(p.stream);
  const BwdWorkspace ws = bwd_workspace(p, D);
  BwdArgs args(p);
  const int64_t rows = p.batch * p.heads_q * p.seqlen_q;
  if (rows > 0) {
    args.dsum = reinterpret_cast<float*>(static_cast<char*>(workspace) + ws.dsum_offset);
    if (!p.deterministic) {
      args.dq_accum = reinterpret_cast<float*>(static_cast<char*>(workspace) + ws.dq_offset);
      FA_CUDA_TRY(cudaMemsetAsync(args.dq_accum, 0, ws.total - ws.dq_offset, stream));
    }
    const unsigned blocks = static_cast<unsigned>((rows + 7) / 8);
    bwd_preprocess_kernel<T><<<blocks, 256, 0, stream>>>(args);
    FA_CUDA_TRY(cudaGetLastError());
  }

  if (p.seqlen_k > 0) {
    using Cfg = BwdCfg<D>;
    const dim3 grid(static_cast<unsigned>((p.seqlen_k + Cfg::BN - 1) / Cfg::BN),
                    static_cast<unsigned>(p.heads_kv), static_cast<unsigned>(p.batch));
    if (p.deterministic) {
      auto* kernel = &bwd_kernel<T, D, true>;
      Status s = set_smem(kernel, Cfg::smem());
      if (!s.ok()) return s;
      kernel<<<grid, Cfg::NW * 32, Cfg::smem(), stream>>>(args);
    } else {
      auto* kernel = &bwd_kernel<T, D, false>;
      Status s = set_smem(kernel, Cfg::smem());
      if (!s.ok()) return s;
      kernel<<<grid, Cfg::NW * 32, Cfg::smem(), stream>>>(args);
    }
    FA_CUDA_TRY(cudaGetLastError());
  }

  if (rows > 0) {
    if (p.deterministic) {
      using Cfg = DqCfg<D>;
      auto* kernel = &bwd_dq_kernel<T, D>;
      Status s = set_smem(kernel, Cfg::smem());
      if (!s.ok()) return s;
      const dim3 grid(static_cast<unsigned>((p.seqlen_q + Cfg::BM - 1) / Cfg::BM),
                      static_cast<unsigned>(p.heads_q), static_cast<unsigned>(p.batch));
      kernel<<<grid, Cfg::NW * 32, Cfg::smem(), stream>>>(args);
    } else {
      const int64_t chunks = rows * (p.head_dim / 8);
      bwd_dq_convert_kernel<T><<<static_cast<unsigned>((chunks + 255) / 256), 256, 0, stream>>>(args, D);
    }
    FA_CUDA_TRY(cudaGetLastError());
  }
  return Status::Ok();
}

}  // namespace flashattn::detail::cuda::sm80

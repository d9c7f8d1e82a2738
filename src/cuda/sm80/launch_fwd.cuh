// Host launcher of the sm80 forward for one (element type, head dim).
#pragma once

#include <cuda_runtime.h>

#include "cuda_check.hpp"
#include "sm80/fwd_kernel.cuh"
#include "sm80/launch.hpp"

namespace flashattn::detail::cuda::sm80 {

template <int E, int D>
Status run_fwd(const FwdParams& p) {
  using T = typename ElemType<E>::type;
  using Cfg = FwdCfg<D>;
  if (p.batch == 0 || p.heads_q == 0 || p.seqlen_q == 0) return Status::Ok();
  const FwdArgs args(p);
  auto* kernel = &fwd_kernel<T, D>;
  constexpr size_t smem = Cfg::smem();
  FA_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  const dim3 grid(static_cast<unsigned>((p.seqlen_q + Cfg::BM - 1) / Cfg::BM), static_cast<unsigned>(p.heads_q),
                  static_cast<unsigned>(p.batch));
  kernel<<<grid, Cfg::NW * 32, smem, static_cast<cudaStream_t>(p.stream)>>>(args);
  FA_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

}  // namespace flashattn::detail::cuda::sm80

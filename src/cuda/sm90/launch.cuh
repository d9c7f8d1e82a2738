// Launch of one instantiation; included only by the inst/ translation units.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "kernel.cuh"
#include "launch.hpp"

namespace flashattn::detail::cuda::sm90 {

template <class Element, int kHeadDim, int kBlockM>
Status launch_fwd(const KernelArgs& args, cudaStream_t stream) {
  using T = FwdTraits<Element, kHeadDim, kBlockM>;
  // Varlen is a kernel of its own: with the lengths known to be the
  // arguments', the padded kernel keeps its constant mask and offsets (a
  // runtime switch cost it 3-5% at head dim 128, bench/sm90/NOTES.md).
  auto* kernel = args.cu_seqlens_q != nullptr ? &fwd_kernel<T, true> : &fwd_kernel<T, false>;
  cudaError_t e =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, T::kSmemBytes);
  if (e != cudaSuccess) {
    return Status::Error(ErrorCode::CudaError,
                         std::string("sm90 forward: cudaFuncSetAttribute: ") + cudaGetErrorString(e));
  }
  kernel<<<PersistentTileScheduler::grid(args), T::kThreads, T::kSmemBytes, stream>>>(args);
  e = cudaGetLastError();
  if (e != cudaSuccess) {
    return Status::Error(ErrorCode::CudaError,
                         std::string("sm90 forward: kernel launch: ") + cudaGetErrorString(e));
  }
  return Status::Ok();
}

}  // namespace flashattn::detail::cuda::sm90

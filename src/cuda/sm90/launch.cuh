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
  // The producer's barriers expect whole tiles: boxes of another shape would
  // never complete them (a hang, not an error), so refuse the mismatch here.
  if (args.block_m != T::kBlockM || args.block_n != T::kBlockN) {
    return Status::Error(ErrorCode::Internal, "sm90 forward: tensor-map boxes (" +
                                                  std::to_string(args.block_m) + " x " +
                                                  std::to_string(args.block_n) +
                                                  ") differ from the kernel's tile");
  }
  // Varlen is a kernel of its own: with the lengths known to be the
  // arguments', the padded kernel keeps its constant mask and offsets (a
  // runtime switch cost it 3-5% at head dim 128, bench/sm90/NOTES.md).
  auto* kernel = &fwd_kernel<T, false>;
  if constexpr (!T::kFp8) {  // fp8 takes padded batches only (can_implement)
    if (args.cu_seqlens_q != nullptr) kernel = &fwd_kernel<T, true>;
  }
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

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
  // Softcap likewise (its tanh would otherwise sit in every kernel's loop),
  // built for the tiles sm90_forward.cu's choose_block_m gives it: two
  // consumer warpgroups (head dims 64 and 128 on 128 rows, 256).
  auto* kernel = &fwd_kernel<T, false>;
  if constexpr (!T::kFp8) {  // fp8 takes padded batches only and no softcap (can_implement)
    const bool varlen = args.cu_seqlens_q != nullptr, softcap = args.softcap > 0.f;
    if constexpr (T::kConsumerWGs == 2) {
      if (softcap) kernel = varlen ? &fwd_kernel<T, true, true> : &fwd_kernel<T, false, true>;
    } else if (softcap) {
      return Status::Error(ErrorCode::Internal, "sm90 forward: no softcap kernel for " +
                                                    std::to_string(T::kBlockM) + "-row tiles");
    }
    if (varlen && !softcap) kernel = &fwd_kernel<T, true>;
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

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
  // Softcap and ALiBi likewise (score_mod.cuh; their work would otherwise
  // sit in every kernel's loop), built for the tiles sm90_forward.cu's
  // choose_block_m gives them: two consumer warpgroups (head dims 64 and 128
  // on 128 rows, 192, 256), and ALiBi alone also on head dim 64's 192 rows.
  // fp8 at head dim 128 runs padded calls on the per-sequence kernel too
  // (lengths from the arguments when cu_seqlens is null): its attention read
  // 0.95-0.97x the padded kernel's time unmasked at 512-4k tokens and
  // 0.96-0.99x at 16k, causal 0.95-1.02x (two H100 calls; bench/sm90/NOTES.md,
  // "fp8 varlen"), so the padded fp8 head-dim-128 kernel is not built.
  // FLASHATTN_SM90_FP8_PADDED_AS_VARLEN=0: the padded kernel as before (A/B).
#ifndef FLASHATTN_SM90_FP8_PADDED_AS_VARLEN
#define FLASHATTN_SM90_FP8_PADDED_AS_VARLEN 1
#endif
  constexpr bool kPerSequenceOnly = T::kFp8 && T::kHeadDim == 128 && FLASHATTN_SM90_FP8_PADDED_AS_VARLEN;
  void (*kernel)(KernelArgs) = nullptr;
  if constexpr (!kPerSequenceOnly) kernel = &fwd_kernel<T, false>;
  if constexpr (T::kConsumerWGs == 1) {
    // The single-warpgroup tile is built for plain padded calls only
    // (sm90_forward.cu choose_block_m gives it no others).
    if (args.cu_seqlens_q != nullptr || args.seqused_k != nullptr || args.num_splits > 1 || args.pack_heads > 1 ||
        score_mod_bits(args.softcap > 0.f, args.alibi != nullptr) != 0) {
      return Status::Error(ErrorCode::Internal,
                           "sm90 forward: the 64-row tile takes padded calls without softcap or ALiBi");
    }
  } else if constexpr (T::kFp8) {
    // fp8: padded or varlen batches (V^T laid out per sequence by the
    // transpose), no KV cache, split-KV, packing or score modification
    // (sm90_forward.cu can_implement).
    if (kPerSequenceOnly || args.cu_seqlens_q != nullptr) kernel = &fwd_kernel<T, true>;
  } else {
    // The per-sequence kernels take varlen batches, KV caches, split-KV and
    // GQA packing (kernel_args.hpp), so that the padded kernel keeps none of their
    // per-tile code: with it the padded kernel grew by 10% (its main loop
    // unchanged) and one alternated A/B read it 3-9% slower at 1k tokens
    // (bench/NOTES.md, "KV cache on the Hopper forward").
    const bool varlen = args.cu_seqlens_q != nullptr || args.seqused_k != nullptr || args.num_splits > 1 ||
                        args.pack_heads > 1;
    const int mod = score_mod_bits(args.softcap > 0.f, args.alibi != nullptr);
    if constexpr (T::kConsumerWGs == 2) {
      switch (mod) {
        case kModSoftcap: kernel = varlen ? &fwd_kernel<T, true, kModSoftcap> : &fwd_kernel<T, false, kModSoftcap>; break;
        case kModAlibi: kernel = varlen ? &fwd_kernel<T, true, kModAlibi> : &fwd_kernel<T, false, kModAlibi>; break;
        case kModSoftcap | kModAlibi:
          kernel = varlen ? &fwd_kernel<T, true, kModSoftcap | kModAlibi> : &fwd_kernel<T, false, kModSoftcap | kModAlibi>;
          break;
        default: break;
      }
    } else if (T::kHeadDim == 64 && mod == kModAlibi) {
      if constexpr (T::kHeadDim == 64) {
        kernel = varlen ? &fwd_kernel<T, true, kModAlibi> : &fwd_kernel<T, false, kModAlibi>;
      }
    } else if (mod != 0) {
      return Status::Error(ErrorCode::Internal, "sm90 forward: no softcap / ALiBi kernel for " +
                                                    std::to_string(T::kBlockM) + "-row tiles");
    }
    if (varlen && mod == 0) kernel = &fwd_kernel<T, true>;
    // Head dim 64's unmasked long calls: the warpgroups take turns
    // (sm90_forward.cu sets args.pingpong by tile_rules.hpp hd64_turns_pay).
    if constexpr (T::kConsumerWGs == 3 && T::kIntraWGOverlap && !T::kPingpong) {
      if (args.pingpong != 0 && !varlen && mod == 0) {
        kernel = &fwd_kernel<FwdTraits<Element, kHeadDim, kBlockM, true>, false>;
      }
    }
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

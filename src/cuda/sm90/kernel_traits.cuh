// Compile-time configuration of one instantiation: tile shape, pipeline depth,
// warp roles and register budgets, shared-memory map.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernel_args.hpp"
#include "wgmma.cuh"

namespace flashattn::detail::cuda::sm90 {

template <class Element>
struct ElementTraits;

template <>
struct ElementTraits<__nv_bfloat16> {
  using MmaTag = WgmmaBF16;
  __device__ __forceinline__ static uint32_t pack(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x (low half) = lo
    return *reinterpret_cast<uint32_t*>(&v);
  }
};

template <>
struct ElementTraits<__half> {
  using MmaTag = WgmmaF16;
  __device__ __forceinline__ static uint32_t pack(float lo, float hi) {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
};

template <class Element_, int kHeadDim_>
struct FwdTraits {
  using Element = Element_;
  using MmaTag = typename ElementTraits<Element>::MmaTag;

  static constexpr int kHeadDim = kHeadDim_;
  static_assert(kHeadDim % 64 == 0, "head_dim must be a whole number of 128-byte swizzle atoms");
  static constexpr int kAtoms = kHeadDim / 64;
  static constexpr int kBlockM = sm90::kBlockM;
  static constexpr int kBlockN = block_n_for(kHeadDim);
  static_assert(kBlockN % 16 == 0 && kBlockN <= 256, "S tile width must be a wgmma N");

  // One producer warpgroup (TMA) + two consumer warpgroups (wgmma + softmax),
  // each consumer owning 64 of the kBlockM query rows.
  static constexpr int kConsumerWGs = 2;
  static_assert(kConsumerWGs * 64 == kBlockM, "");
  static constexpr int kThreads = 128 * (1 + kConsumerWGs);
  // setmaxnreg budgets (FA3's): 24*128 + 240*256 = 64512 <= 65536 registers.
  static constexpr uint32_t kProducerRegs = 24;
  static constexpr uint32_t kConsumerRegs = 240;
  static_assert(kProducerRegs * 128 + kConsumerRegs * 128 * kConsumerWGs <= 65536, "");

  static constexpr int kStages = 2;

  // Shared memory (byte offsets from a 1024-aligned base).
  static constexpr int kQBytes = kBlockM * kHeadDim * 2;
  static constexpr int kKVBytes = kBlockN * kHeadDim * 2;  // one K or V stage
  static constexpr int kQOff = 0;
  static constexpr int kKOff = kQOff + kQBytes;
  static constexpr int kVOff = kKOff + kStages * kKVBytes;
  static constexpr int kBarOff = kVOff + kStages * kKVBytes;
  // Barriers: q_full, k_full[S], k_empty[S], v_full[S], v_empty[S].
  static constexpr int kNumBars = 1 + 4 * kStages;
  static constexpr int kSmemBytes = kBarOff + 8 * kNumBars + 1024;  // + alignment slack
  static_assert(kSmemBytes <= 227 * 1024, "exceeds the sm90 per-block shared memory");
  static_assert(kQBytes % 1024 == 0 && kKVBytes % 1024 == 0 && (kBlockN * 128) % 1024 == 0,
                "every atom column must stay 1024-byte aligned");

  // Consumer warps arrive on the empty barriers (one arrival per warp after
  // its wait_group), so the count is the number of consumer warps.
  static constexpr uint32_t kEmptyArrivals = 4 * kConsumerWGs;
};

}  // namespace flashattn::detail::cuda::sm90

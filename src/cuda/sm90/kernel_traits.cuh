// Compile-time configuration of one instantiation: tile shape, pipeline depth,
// warp roles and register budgets, shared-memory map.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "kernel_args.hpp"
#include "wgmma.cuh"

namespace flashattn::detail::cuda::sm90 {

template <class Element>
struct ElementTraits;

// Per input dtype: the wgmma flavour, its k per instruction, the output
// dtype (fp8 attention writes bf16) and, for 16-bit types, the packing of two
// floats into the output / register-A format.
template <>
struct ElementTraits<__nv_bfloat16> {
  using MmaTag = WgmmaBF16;
  using Out = __nv_bfloat16;
  static constexpr int kMmaK = 16;
  __device__ __forceinline__ static uint32_t pack(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x (low half) = lo
    return *reinterpret_cast<uint32_t*>(&v);
  }
};

template <>
struct ElementTraits<__half> {
  using MmaTag = WgmmaF16;
  using Out = __half;
  static constexpr int kMmaK = 16;
  __device__ __forceinline__ static uint32_t pack(float lo, float hi) {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
};

template <>
struct ElementTraits<__nv_fp8_e4m3> {
  using MmaTag = WgmmaE4M3;
  using Out = __nv_bfloat16;
  static constexpr int kMmaK = 32;
  // Four floats -> four e4m3 bytes (lowest byte = a), rounded to nearest,
  // saturating to +-448.
  __device__ __forceinline__ static uint32_t pack4(float a, float b, float c, float d) {
    uint16_t lo, hi;
    // cvt ...e4m3x2.f32 d, x, y puts x in the upper byte and y in the lower.
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(lo) : "f"(b), "f"(a));
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(hi) : "f"(d), "f"(c));
    return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
  }
};

// Three consumer warpgroups taking turns (kPingpong below): an A/B knob that
// turns them on in every three-warpgroup kernel.
#ifndef FLASHATTN_SM90_PINGPONG3
#define FLASHATTN_SM90_PINGPONG3 0
#endif

// The lazy kernels' exponentials before the row max on kept tiles
// (kernel.cuh softmax_tile, softmax.cuh exp_kept). -1 (the default): where
// it measured faster, the fp8 kernels and the lazy kernels whose loop
// overlaps S with P V (16-bit head dims 64, 192, 256), not the 16-bit head
// dim 128 on 192 rows (serial loop: 3-8% slower); 0 off; 1 every lazy
// kernel; 2 the fp8 kernels only (A/B builds; bench/sm90/NOTES.md, "Forward:
// the exponentials before the row max on kept tiles").
#ifndef FLASHATTN_SM90_FP8_LAZY
#define FLASHATTN_SM90_FP8_LAZY 1
#endif
#ifndef FLASHATTN_SM90_EXP_FIRST
#define FLASHATTN_SM90_EXP_FIRST -1
#endif

// kTurns3_: the three-warpgroup kernel with turns (launch.cuh instantiates it
// for head dim 64's unmasked long calls, tile_rules.hpp hd64_turns_pay).
template <class Element_, int kHeadDim_, int kBlockM_ = block_m_for(kHeadDim_),
          bool kTurns3_ = FLASHATTN_SM90_PINGPONG3 != 0>
struct FwdTraits {
  using Element = Element_;
  using MmaTag = typename ElementTraits<Element>::MmaTag;
  using OutElement = typename ElementTraits<Element>::Out;

  static constexpr int kElemBytes = static_cast<int>(sizeof(Element));
  static constexpr bool kFp8 = kElemBytes == 1;
  static constexpr int kHeadDim = kHeadDim_;
  // Q, K (and fp8's transposed V) rows are 128-byte swizzle atoms wide:
  // 64 16-bit or 128 fp8 elements per atom column.
  static constexpr int kAtomElems = 128 / kElemBytes;
  static_assert(kHeadDim % kAtomElems == 0, "head_dim must be a whole number of 128-byte swizzle atoms");
  static constexpr int kAtoms = kHeadDim / kAtomElems;
  static constexpr int kOAtoms = kHeadDim / 64;  // O is always 16-bit
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = kFp8 ? kFp8BlockN : fwd_block_n(kHeadDim, kBlockM);
  static_assert(kBlockN % 16 == 0 && kBlockN <= 256, "S tile width must be a wgmma N");
  static constexpr int kMmaK = ElementTraits<Element>::kMmaK;
  static constexpr int kQKSteps = kHeadDim / kMmaK;  // wgmmas per S = Q K^T
  static constexpr int kPVSteps = kBlockN / kMmaK;   // wgmmas per O += P V
  static_assert(kBlockN % kMmaK == 0, "");

  // One producer warpgroup (TMA) + kBlockM/64 consumer warpgroups (wgmma +
  // softmax), each consumer owning 64 of the kBlockM query rows. One
  // consumer (kSingleWGBlockM): two CTAs share an SM (kernel_args.hpp).
  static constexpr int kConsumerWGs = kBlockM / 64;
  static_assert(kConsumerWGs * 64 == kBlockM && kConsumerWGs >= 1 && kConsumerWGs <= 3, "");
  static_assert(kConsumerWGs > 1 || (!kFp8 && kHeadDim <= 128), "the single-warpgroup tile: 16-bit, head dim <= 128");
  static constexpr int kCtasPerSm = fwd_ctas_per_sm(kBlockM);
  static constexpr int kThreads = 128 * (1 + kConsumerWGs);
  // setmaxnreg budgets (FA3's): 2 consumers: 24*128 + 240*256 = 64512;
  // 3 consumers: 32*128 + 160*384 = 65536 (of 65536 registers); 1 consumer,
  // two CTAs per SM: 24*128 + 232*128 = 32768 each (launched at 128 a thread).
  static constexpr uint32_t kProducerRegs = kConsumerWGs == 3 ? 32 : 24;
  static constexpr uint32_t kConsumerRegs = kConsumerWGs == 1 ? 232 : kConsumerWGs == 2 ? 240 : 160;
  static_assert((kProducerRegs + kConsumerRegs * kConsumerWGs) * 128 * kCtasPerSm <= 65536, "");
  // Shared memory a CTA may take: 227 KB, or half the SM's 228 KB less the
  // 1 KB the hardware reserves per CTA when two share it.
  static constexpr int kSmemBudget = kCtasPerSm == 1 ? 227 * 1024 : (228 * 1024) / kCtasPerSm - 1024;

  static constexpr int kQBytes = kBlockM * kHeadDim * kElemBytes;
  static constexpr int kKVBytes = kBlockN * kHeadDim * kElemBytes;  // one K or V stage
  static constexpr int kOBytes = kBlockM * kHeadDim * 2;
#ifndef FLASHATTN_SM90_STAGES
#define FLASHATTN_SM90_STAGES 2
#endif
// fp8 tiles are half the bytes: a deeper ring costs no occupancy (head dim
// 128: 4 stages measured +3-5% over 2 at 2k-16k tokens, bench/sm90/NOTES.md;
// head dim 256 fits 2 beside its O buffer).
#ifndef FLASHATTN_SM90_FP8_STAGES
#define FLASHATTN_SM90_FP8_STAGES 4
#endif
  // K/V ring depth: the knob, capped by what fits beside Q in 227 KB.
  static constexpr int kStagesWanted = kFp8 ? FLASHATTN_SM90_FP8_STAGES : FLASHATTN_SM90_STAGES;
  // fp8 keeps a buffer of its own for O (bf16 O is larger than Q there).
  static constexpr int kStagesFit =
      (kSmemBudget - 2048 - kQBytes - (kFp8 ? kOBytes : 0)) / (2 * kKVBytes);
  static constexpr int kStages = kStagesWanted < kStagesFit ? kStagesWanted : kStagesFit;
  static_assert(kStages >= 2, "");

  // Pingpong (FA3 §3.2, "inter-warpgroup overlap"): the consumer warpgroups
  // take turns issuing their wgmmas (0, 1[, 2], 0, ...), so one's softmax
  // runs under the others' GEMMs. Two consumers: compiled in, switched on per
  // launch (KernelArgs::pingpong, chosen in sm90_forward.cu). Three: always
  // on where compiled in (kTurns3_: a run-time switch cost the 192-row
  // kernels 44-80 bytes of spills), which is a kernel of its own. Measured
  // (bench/sm90/NOTES.md, "Three warpgroups taking turns"): bf16 head dim 64
  // +2-5% unmasked from 4k keys, level or lower elsewhere; fp8 head dim 128
  // 4-8% slower at 8k-16k, bf16 128 level (causal -3%). The head-dim-64
  // kernel with turns (unmasked, >= 4k keys): 2-3% faster than without.
  static constexpr bool kPingpong = kConsumerWGs == 2 || (kConsumerWGs == 3 && kTurns3_);
  // FA3's intra-warpgroup overlap (kernel.cuh) keeps S, O and P live at once:
  // 144 accumulator registers for fp8 at head dim 128, more than three
  // consumer warpgroups' 160 per thread leave room for (ptxas spilled 144
  // bytes in the main loop; head dim 64's 128 fit). Where they do not fit
  // the consumers run S, softmax, P V in order and the third warpgroup
  // supplies the overlap instead.
  static constexpr int kAccRegs = kBlockN / 2 + kHeadDim / 2 + kPVSteps * 4;  // S + O + P
  static constexpr bool kIntraWGOverlap = kConsumerWGs < 3 || kAccRegs <= 128;

  // Conditional O rescale (OnlineSoftmax::kLazyRescale), where it measured
  // faster (bench/sm90/NOTES.md, 2026-11-30): fp8 at 16k tokens +7% (head
  // dim 128) and +3-12% (256); bf16 head dim 256 +4-8%; three-warpgroup
  // 16-bit kernels (head dim 64, 128 on 192 rows) +2-10%. The 128-row
  // 16-bit head dim 128 kernel measured 2% slower with it: there the O
  // rescale hides under the P V wgmma. Head dim 192 takes it as 256 does
  // (its O is 96 registers a thread).
  // FLASHATTN_SM90_FP8_LAZY=0 (A/B builds only) gives fp8 the exact-max step,
  // which rounds each row's largest P exactly (bench/sm90/NOTES.md, "fp8 at
  // every head dim").
  static constexpr bool kLazyRescale =
      kFp8 ? FLASHATTN_SM90_FP8_LAZY != 0 : kHeadDim >= 192 || kConsumerWGs == 3;
  static constexpr bool kExpFirst =
      kLazyRescale && (FLASHATTN_SM90_EXP_FIRST < 0 ? kFp8 || kIntraWGOverlap
                                                    : FLASHATTN_SM90_EXP_FIRST == 1 ||
                                                          (FLASHATTN_SM90_EXP_FIRST == 2 && kFp8));

  // The epilogue stages O in its own buffer when it fits (head_dim 64/128):
  // then Q's buffer is free for the next tile's Q as soon as the last
  // S = Q K^T of a tile has retired, and the O store overlaps the next tile.
  // Otherwise (head_dim 192, 256) O is staged in Q's buffer, which is released
  // once the TMA store has read it.
  static constexpr bool kSeparateO =
      kQBytes + 2 * kStages * kKVBytes + kOBytes + 2048 <= kSmemBudget;
  // Where no O buffer fits, the epilogue can instead store straight from
  // registers to global memory (4-byte stores), which frees Q's buffer right
  // after the last Q K^T as well.
#ifndef FLASHATTN_SM90_DIRECT_O
#define FLASHATTN_SM90_DIRECT_O 0
#endif
  static constexpr bool kDirectO = !kSeparateO && FLASHATTN_SM90_DIRECT_O;
  // Q's buffer is given back after the last Q K^T (else after the O store).
  static constexpr bool kEarlyQRelease = kSeparateO || kDirectO;
  static_assert(kSeparateO || kDirectO || kOBytes <= kQBytes, "O must fit where it is staged");

  // Shared memory (byte offsets from a 1024-aligned base).
  static constexpr int kQOff = 0;
  static constexpr int kKOff = kQOff + kQBytes;
  static constexpr int kVOff = kKOff + kStages * kKVBytes;
  static constexpr int kOOff = kVOff + kStages * kKVBytes;
  static constexpr int kBarOff = kOOff + (kSeparateO ? kOBytes : 0);
  // Barriers: q_full, q_empty, k_full[S], k_empty[S], v_full[S], v_empty[S],
  // tile_full[2], tile_empty[2]; then the two work-tile slots
  // (tile_scheduler.cuh).
  static constexpr int kNumBars = 2 + 4 * kStages + 4;
  static constexpr int kTileSlotOff = kBarOff + 8 * kNumBars;
  static constexpr int kSmemBytes = kTileSlotOff + 8 + 1024;  // + alignment slack
  static_assert(kSmemBytes <= kSmemBudget, "exceeds the sm90 per-block shared memory");
  static_assert(kQBytes % 1024 == 0 && kKVBytes % 1024 == 0 && (kBlockN * 128) % 1024 == 0,
                "every atom column must stay 1024-byte aligned");

  // Consumer warps arrive on the empty barriers (one arrival per warp after
  // its wait_group), so the count is the number of consumer warps.
  static constexpr uint32_t kEmptyArrivals = 4 * kConsumerWGs;
  // Q's buffer is released per warp after its last Q K^T (separate O), or by
  // one thread per warpgroup after the O store has read it (O staged in Q).
  static constexpr uint32_t kQEmptyArrivals = kEarlyQRelease ? 4 * kConsumerWGs : kConsumerWGs;

  // Named barrier ids (0 is __syncthreads).
  static constexpr uint32_t kBarEpilogue = 1;                     // + consumer warpgroup
  static constexpr uint32_t kBarScheduler = 1 + kConsumerWGs;      // + consumer warpgroup
  static constexpr uint32_t kBarVZero = 1 + 2 * kConsumerWGs;      // all consumers (varlen)
  static constexpr uint32_t kBarVote = 2 + 2 * kConsumerWGs;       // + consumer warpgroup
};

}  // namespace flashattn::detail::cuda::sm90

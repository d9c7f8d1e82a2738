// Where fp32 attention runs on the AMX tiles by default (FA_FP32_SPLIT: three
// bf16 pieces per value and six piece products per GEMM, forward_amx.hpp)
// instead of the AVX-512 FMA kernels: by the keys a query row sees on
// average, with a threshold per pass. The tiles' fixed costs (K and V split
// once per call, Q's pieces per task) weigh more against short rows, and the
// backward's tiles gain less than the forward's.
// Measured on a 2-core Xeon with AMX, the tiles forced against the FMA kernels
// (FLASHATTN_CPU_FP32_AMX=1 / 0, three alternated rounds, head dims 64 / 128 /
// 256, 512-2048 tokens; bench/NOTES.md, "fp32 split GEMM schedule", whose
// reordered tile GEMMs moved both thresholds down from 1024 and 2048):
// - forward: 256 keys a row (causal 512: 1.01-1.12x; unmasked 512: 1.00-1.18x;
//   from 1024 unmasked 1.17-1.34x);
// - backward: 1024 keys a row (unmasked 1024: 1.03-1.20x; causal 2048, 1024 a
//   row on average: 0.94 at head dim 64, 1.05-1.10 at 128 / 256), below that the
//   causal calls trail (causal 1024: 0.88-1.00x, 512: 0.82-0.87x) though
//   unmasked 512 gains (1.03-1.08x): the diagonal's masked work weighs on the
//   backward's tiles more than the average key count says.
// FLASHATTN_CPU_FP32_AMX=0 / 1 overrides both (bf16_table_impl.hpp).
#pragma once

#include <cstdint>

#include "common/mask.hpp"
#include "common/params.hpp"

namespace flashattn::detail::cpu {

enum class Fp32TilesPass { Forward, Backward };

constexpr int64_t kFp32TilesMinKeysForward = 256;
constexpr int64_t kFp32TilesMinKeysBackward = 1024;

inline bool fp32_tiles_pay(const AttnParams& p, Fp32TilesPass pass) {
  if (p.seqlen_q <= 0 || p.seqlen_k <= 0) return false;
  const WindowMask mask(p);
  int64_t visible = 0;
  for (int64_t i = 0; i < p.seqlen_q; ++i) {
    const KeyRange r = mask.keys(i);
    visible += r.empty() ? 0 : r.end - r.begin;
  }
  const int64_t min_keys = pass == Fp32TilesPass::Forward ? kFp32TilesMinKeysForward : kFp32TilesMinKeysBackward;
  return visible >= min_keys * p.seqlen_q;
}

}  // namespace flashattn::detail::cpu

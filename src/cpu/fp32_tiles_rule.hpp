// Where fp32 attention runs on the AMX tiles by default (FA_FP32_SPLIT: three
// bf16 pieces per value and six piece products per GEMM, forward_amx.hpp)
// instead of the AVX-512 FMA kernels: by the keys a query row sees on
// average, with a threshold per pass. The tiles' fixed costs (K and V split
// once per call, Q's pieces per task) weigh more against short rows, and the
// backward's tiles gain less than the forward's.
// Measured on a 2-core Xeon with AMX, the tiles forced against the FMA kernels
// (FLASHATTN_CPU_FP32_AMX=1 / 0, three alternated rounds, head dims 64 / 128 /
// 256; bench/NOTES.md, "fp32 on AMX tiles" and "fp32 forward on the tiles from
// 1024 keys"):
// - forward: 1024 keys a row (unmasked 1024: 1.06-1.10x; causal 2048: 1.01-1.10x;
//   from 2048 unmasked 1.09-1.21x), below that level or slower (causal 1024
//   0.94-1.02x, 512 tokens 0.83-0.98x);
// - backward: 2048 keys a row (unmasked 2048-8192: 0.95-1.25x), below that
//   slower (causal 2048 0.89-0.99x, causal 1024 0.82-0.90x).
// FLASHATTN_CPU_FP32_AMX=0 / 1 overrides both (bf16_table_impl.hpp).
#pragma once

#include <cstdint>

#include "common/mask.hpp"
#include "common/params.hpp"

namespace flashattn::detail::cpu {

enum class Fp32TilesPass { Forward, Backward };

constexpr int64_t kFp32TilesMinKeysForward = 1024;
constexpr int64_t kFp32TilesMinKeysBackward = 2048;

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

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

#include <algorithm>
#include <cstdint>

#include "common/mask.hpp"
#include "common/params.hpp"

namespace flashattn::detail::cpu {

enum class Fp32TilesPass { Forward, Backward };

constexpr int64_t kFp32TilesMinKeysForward = 256;
constexpr int64_t kFp32TilesMinKeysBackward = 1024;

// The (query, key) pairs the mask lets through, sum over rows i < seqlen_q of
// |WindowMask::keys(i)|, in closed form: a row's key range has its start
// 0 up to row b1 and rising one key a row after it, its end rising up to row b2
// and seqlen_k after it, so on each of the (at most three) stretches between
// 0, b1, b2 and seqlen_q its length is c + d i with d in {-1, 0, 1}, an
// arithmetic series where positive. (A walk over the rows took seconds for
// the fuzzer's calls of 2^31 query rows, before any argument check could
// refuse them.) 128-bit: the sum reaches 2^62 and a series' products more.
inline __int128 visible_pairs(const AttnParams& p) {
  const WindowMask m(p);
  const int64_t n = p.seqlen_q, o = m.offset, L = m.left, R = m.right, sk = m.seqlen_k;
  if (n <= 0 || sk <= 0) return 0;
  auto clamp_rows = [&](int64_t x) { return std::min<int64_t>(n, std::max<int64_t>(0, x)); };
  const int64_t b1 = L < 0 ? n : clamp_rows(L - o);          // rows from b1: start i + o - L
  const int64_t b2 = R < 0 ? 0 : clamp_rows(sk - o - R - 1);  // rows before b2: end i + o + R + 1
  int64_t cuts[4] = {0, std::min(b1, b2), std::max(b1, b2), n};
  __int128 total = 0;
  for (int s = 0; s < 3; ++s) {
    const int64_t i0 = cuts[s], i1 = cuts[s + 1];
    if (i0 >= i1) continue;
    // length(i) = end(i) - start(i) = d * i + c on [i0, i1).
    const int64_t start_d = L >= 0 && i0 >= b1 ? 1 : 0, start_c = start_d ? o - L : 0;
    const int64_t end_d = R >= 0 && i0 < b2 ? 1 : 0, end_c = end_d ? o + R + 1 : sk;
    const int64_t d = end_d - start_d, c = end_c - start_c;
    // Rows of [i0, i1) where d * i + c > 0, and the series over them.
    int64_t lo = i0, hi = i1;
    if (d == 0 && c <= 0) continue;
    if (d == 1) lo = std::max(lo, 1 - c);
    if (d == -1) hi = std::min(hi, c);
    if (lo >= hi) continue;
    const __int128 rows = hi - lo;
    total += rows * c + __int128(d) * (__int128(lo) + hi - 1) * rows / 2;
  }
  return total;
}

inline bool fp32_tiles_pay(const AttnParams& p, Fp32TilesPass pass) {
  if (p.seqlen_q <= 0 || p.seqlen_k <= 0) return false;
  const int64_t min_keys = pass == Fp32TilesPass::Forward ? kFp32TilesMinKeysForward : kFp32TilesMinKeysBackward;
  return visible_pairs(p) >= __int128(min_keys) * p.seqlen_q;
}

}  // namespace flashattn::detail::cpu

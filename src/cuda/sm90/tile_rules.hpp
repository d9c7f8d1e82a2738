// Tile and load choices of the Hopper forward's and backward's host adapters
// (sm90_forward.cu, bwd_sm90.cu), as plain integer code so that the host tests
// (tests/sm90_tile_order_test.cpp) pin the shapes each rule picks.
#pragma once

#include <cstdint>
#include <numeric>

namespace flashattn::detail::cuda::sm90 {

// Head dim 128, more than 128 query rows: true when 128-row tiles should
// replace 192-row ones. Time ~ waves x rows per tile, 192 rows ~5% faster
// per row; `tiles_per_row`: the (batch, head) pairs a query tile is
// repeated over; `sms`: the device's multiprocessors (one persistent CTA
// each). `uniform`: every tile costs the same and the CTAs take them round
// robin (no mask, padded batch): there the last wave's fill decides, and the
// wave times alone pick the tile. Measured on 19 non-causal shapes of 8-64
// heads and 512-16k tokens (bench/sm90/NOTES.md, "Head dim 128: the tile by
// the wave count"), the rule picked the faster tile on all 18 that were not
// a tie: 128 rows +5-23% where it picks them (32 heads x 1k-4k, 16 heads x 512-1k, 8 heads x
// 8k: a 192-row grid leaves most of its last wave idle), 192 rows +2-8%
// elsewhere. Otherwise (masked calls claim their tiles dynamically; varlen
// and KV-cache tiles past a sequence's end are skipped, so the counts are
// not the waves) 128-row tiles are taken only where they pad at least 15%
// fewer rows (193-256 rows: 384 on 192-row tiles, 256 on 128-row ones;
// 577-640) and add no wave. Measured (bench/NOTES.md, "Paged caches and GQA
// packing on the Hopper forward"): 193-256 rows 1.13-1.35x; 577-640 rows
// 1.05-1.11x with many tiles, but 0.68-0.73x where 32 heads x 5 tiles took a
// second wave of 132 SMs that 32 x 4 did not (hence the wave count).
inline bool hd128_narrow_tiles_pay(int64_t seqlen_q, int64_t tiles_per_row, int sms, bool uniform) {
  const int64_t rows128 = (seqlen_q + 127) / 128 * 128, rows192 = (seqlen_q + 191) / 192 * 192;
  if (seqlen_q <= 128 || sms <= 0) return false;
  if (!uniform && rows128 * 20 >= rows192 * 17) return false;
  auto waves = [&](int64_t rows, int64_t bm) { return (rows / bm * tiles_per_row + sms - 1) / sms; };
  return waves(rows128, 128) * 128 * 21 < waves(rows192, 192) * 192 * 20;
}

// Head dims 64 and 128 with a right mask bound (causal, windows) and at most
// kShortMaskedMaxSeqlenQ query rows: 128-row tiles (two consumer warpgroups)
// instead of 192, whose larger diagonal tiles waste more than the third
// warpgroup gains on so few key tiles. Head dim 64: the 192-row tile cost
// 14% at 512-1k tokens (H200). Head dim 128 (thirty-ninth session, ABBA runs
// of the CLI on an H100, bench/results/h100-fwd-short-causal-abba-20261205/):
// 128-row tiles took 0.925 / 0.951 of the 192-row tiles' time at 512 / 1k
// causal (the thirty-sixth session's two H200 rounds read the same way),
// 1.00 at 2k; with pingpong off too 0.94 / 0.94 / 0.975 at 512 / 1k / 2k and
// 1.05 at 4k. Head dim 128 was measured on self-attention only, so it also
// asks for at most as many keys: a KV-cache chunk against a long cache has
// long rows, where the 192-row tile pays as on unmasked calls.
constexpr int64_t kShortMaskedMaxSeqlenQ = 1024;
inline bool short_masked_tiles_pay(int64_t head_dim, bool right_bounded, int64_t seqlen_q, int64_t seqlen_k) {
  if (!right_bounded || seqlen_q > kShortMaskedMaxSeqlenQ) return false;
  return head_dim == 64 || (head_dim == 128 && seqlen_k <= kShortMaskedMaxSeqlenQ);
}

// Head dim 64 on 192-row tiles: whether the three consumer warpgroups take
// turns issuing their wgmmas (kernel_traits.cuh kTurns3_). Measured on the
// H200 (bench/sm90/NOTES.md, "Three warpgroups taking turns"; four rounds):
// unmasked calls +2.5% at 16k keys in every round, +2% at 8k, +5% at 4k, but
// -6% at 2k and level at 512-1k, and causal level or -2%: unmasked padded
// calls from 4096 keys only.
constexpr int64_t kTurns3MinSeqlenK = 4096;
inline bool hd64_turns_pay(bool masked, bool per_sequence, int64_t seqlen_k) {
  return !masked && !per_sequence && seqlen_k >= kTurns3MinSeqlenK;
}

// GQA packing (kernel_args.hpp pack_heads): the query heads of a group
// share a tile when a head's rows would fill at most half of it (a chunk of
// a chunked prefill, speculative decoding, short varlen sequences), so that
// one K/V load serves the group: groups of 2-16 (a 128-row tile holds
// 128 / group whole groups: 2 rows stay empty with groups of 7 or 6), 128-row
// tiles, no ALiBi (a slope per row), 16-bit inputs. Returns the group, or 1
// (no packing).
inline int gqa_pack_heads(int64_t heads_q, int64_t heads_kv, int64_t seqlen_q, int block_m, bool alibi,
                          bool fp8) {
  if (heads_kv <= 0 || heads_q % heads_kv != 0) return 1;
  const int64_t g = heads_q / heads_kv;
  if (g < 2 || g > 16 || alibi || fp8 || block_m != 128 || 2 * seqlen_q > block_m) return 1;
  return static_cast<int>(g);
}

// Paged KV caches: gather each K/V tile with cp.async by the producer
// warpgroup's spare warps (paged_gather.cuh) rather than load it as TMA
// boxes of gcd(page, key tile) rows (a box lies in one page), when those
// boxes hold 32 rows or fewer: 16-row pages (8 boxes per 128-key tile and
// atom column) took 1.5-2.3x the contiguous cache's kernel time by TMA and
// take 1.1-1.3x gathered, 32-row boxes 1.2-1.6x against 1.1-1.3x; 64-row
// boxes 1.02-1.2x by TMA, where gathering takes 1.1-1.3x (chunked prefill,
// bench/results/h200-paged-gather-20261204/).
inline bool paged_gather_pays(int64_t page_size, int block_n) {
  return page_size > 0 && std::gcd<int64_t>(page_size, block_n) <= 32;
}

// Backward, head dim 128, unmasked padded calls: true when 80-row steps
// (bwd_kernel_args.hpp, kBwdTallBlockM) should replace 64-row ones. A row
// costs ~4% less on 80-row steps (H200, 16k tokens: 538-541 -> 563 TFLOP/s),
// so they pay unless they pad more than 4% more rows (512: seven 80-row steps
// hold 560 rows against 512, measured 4-7% slower; 1k level, 2k +2%;
// bench/sm90/NOTES.md, "Backward: 80-row steps at head dim 128").
inline bool bwd_tall_steps_pay(int64_t seqlen_q) {
  const int64_t rows64 = (seqlen_q + 63) / 64 * 64, rows80 = (seqlen_q + 79) / 80 * 80;
  return rows80 * 24 <= rows64 * 25;
}

}  // namespace flashattn::detail::cuda::sm90

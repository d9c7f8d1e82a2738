// How the sm80 forward covers a problem (host-only, shared by the launcher
// and dispatch's workspace sizing): packed GQA or not, the split-KV count,
// and the fp32 workspace the split pieces need.
//
// Split heuristic (flash-decoding): blocks = query tiles x heads x batch.
// When they already fill most SMs a split only adds the combine pass; below
// that, split the key range so that about two (128-row) or four (decode
// tiles: kDecodeBlocksPerSm) blocks per SM are in flight,
// keeping each piece >= 2 key tiles (128 keys) so the fixed cost of loading Q
// and writing a partial row stays small beside it.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "common/device_info.hpp"
#include "common/params.hpp"
#include "sm80/kernel_traits.hpp"

namespace flashattn::detail::cuda::sm80 {

// Decode tiles: 16 query rows, one warp (two splitting the keys: FwdDecodeCfg
// below). With 128-row tiles a decode step
// (one token, a GQA group of 8 heads packed: 8 rows) would run 16x the
// tensor-core work it needs and become compute-bound (measured on the H200:
// batch 64, context 128k at 56 % of the copy bandwidth); a 16-row, one-warp
// block keeps the MMA work small and the many small blocks keep enough
// K/V loads in flight.
// The key tile is as wide as each head dim allows without costly spills: the
// one warp holds O (16 x d floats: d / 2 registers a thread) with the S, P
// and Q fragments. With 64 keys ptxas spilled 236 / 116 / 1,824 / 1,340
// bytes at head dims 96 / 128 / 192 / 256. Measured on the H200
// (bench/NOTES.md, "decode key tile"): 32 keys at 96 and 256 and 16 at 192
// took decode from 0.4-0.6 of the copy bandwidth to 0.6-1.0; head dim 128
// stays at 64, 4-9% faster than 32 despite its spills. With two warps per
// block (below) head dim 192 takes 32 keys too, no spills: against its
// one-warp 16-key blocks at 16 per SM, 0.81 -> 0.86 of copy at 8 x 8k, 0.61 ->
// 0.90 at 64 x 1k, 0.89 -> 0.94 at 64 x 128k, 8 x 128k 0.99 -> 0.97
// (bench/results/h200-decode-d192-20261204/).
constexpr int decode_key_tile(int d) { return d == 96 || d == 192 || d == 256 ? 32 : 64; }
// How many decode blocks per SM the split heuristic aims at, and the most
// that fit: two-warp blocks of 223-255 registers (the one-warp 16-key tiles
// head dim 192 had took 16; bench/NOTES.md).
constexpr int kDecodeBlocksPerSm = 4;
// Two warps share a decode block, each taking 16 keys or more of a tile:
// warp w takes keys [w BN/2, (w + 1) BN/2) of every tile with a softmax state
// of its own, and the two states merge once after the key loop (fwd_kernel's
// KEY_SPLIT). ncu of the one-warp block (bench/results/h200-decode-ncu-20261204/):
// one warp per scheduler, so every HMMA, MUFU and shared-load latency of a
// tile's S, softmax and P V was exposed (fixed-latency "wait" 22% of the
// samples, instruction fetch 15%, the K/V waits 31%); two warps on the same
// K/V tiles overlap those latencies without more shared memory per SM; each
// warp's S and P halve, so ptxas no longer spills (head dim 128: 223
// registers). Measured: level to +20% at every point of bench_decode.py at head dims
// 96, 128 and 256 (bench/NOTES.md, "KV-cache decode").
template <int D>
struct FwdDecodeCfg {
  static constexpr bool KEY_SPLIT = true;
  static constexpr int BM = 16, BN = decode_key_tile(D), NW = 2;
  static_assert(BN / NW >= 16, "a warp's keys are whole 16-key mma steps");
  static constexpr size_t smem() { return tile_bytes(BM, D) + 2 * tile_bytes(BN, D); }
};

// The most split pieces one row may have (the combine kernel's weights for
// them fit one block: combine_kernel.cuh).
constexpr int kMaxSplits = 128;

struct FwdPlan {
  bool decode = false;  // FwdDecodeCfg tiles
  int pack = 1, nsplit = 1;
  int64_t m_blocks = 0, heads_y = 0;
  size_t o_accum_bytes = 0, workspace_bytes = 0;
};

// The cached properties of `device`, all zero when they cannot be read (the
// error is cleared: callers fall back to safe defaults).
inline DeviceInfo device_info_or_zero(int device) {
  cudaError_t e = cudaSuccess;
  const DeviceInfo* info = device_info(device, &e);  // cached per device
  if (info == nullptr) {
    cudaGetLastError();
    return DeviceInfo{};
  }
  return *info;
}

inline int device_major(int device) { return device_info_or_zero(device).major; }

inline int sm_count(int device) {
  const int n = device_info_or_zero(device).sm_count;
  return n > 0 ? n : 1;
}

// SM slots of a grid of `kernel`: SMs x its blocks per SM at threads and
// smem (asked once per kernel and device: cached_blocks_per_sm); one block per
// SM where the occupancy query fails (the slots only size the grids' last
// group, grid_full_groups: the order, never the results).
template <class K>
long long grid_slots(K* kernel, int threads, size_t smem, const DeviceInfo& dev, int device) {
  const int per_sm = cached_blocks_per_sm(reinterpret_cast<const void*>(kernel), threads, smem, device);
  return static_cast<long long>(dev.sm_count > 0 ? dev.sm_count : 1) * (per_sm > 0 ? per_sm : 1);
}

inline FwdPlan fwd_plan(const FwdParams& p, int num_sms, int bm, int bn) {
  FwdPlan f;
  const int64_t g = p.heads_kv > 0 ? p.heads_q / p.heads_kv : 1;
  // Decode shapes: all query rows of a KV head fit one tile, so the group's
  // heads share each K/V tile instead of loading it g times.
  f.pack = (g > 1 && p.seqlen_q * g <= bm) ? static_cast<int>(g) : 1;
  f.decode = p.seqlen_q * g <= FwdDecodeCfg<64>::BM;
  // ALiBi / dropout run on the one variants kernel (128-row tiles, one head
  // per tile: fwd_kernel's VAR), decode shapes included, as on the CPU.
  if (p.has_variants()) f.pack = 1, f.decode = false;
  if (f.decode) bm = FwdDecodeCfg<64>::BM;
  f.m_blocks = (p.seqlen_q * f.pack + bm - 1) / bm;
  f.heads_y = f.pack > 1 ? p.heads_kv : p.heads_q;
  const int64_t blocks = f.m_blocks * f.heads_y * p.batch;
  const int64_t tiles = (p.seqlen_k + bn - 1) / bn;
  int64_t ns = 1;
  // Decode blocks: aim at ~4 per SM (several K/V tiles in flight
  // per SM); 128-row blocks: ~2 per SM.
  if (p.num_splits > 0) {
    ns = p.num_splits;
  } else if (blocks > 0 && blocks < num_sms * (f.decode ? kDecodeBlocksPerSm : 1) * 4 / 5) {
    const int64_t want = int64_t(num_sms) * (f.decode ? kDecodeBlocksPerSm : 2);
    // Two-warp decode blocks (223-255 registers) fit 4 per SM: rounding the
    // split count up put the blocks past `want` into a second wave (batch 8:
    // 64 blocks x 9 pieces = 576 > 528 on 132 SMs, 15-17% slower than 8
    // pieces), so those round down.
    ns = f.decode ? std::max<int64_t>(want / blocks, 1) : (want + blocks - 1) / blocks;
    ns = std::min(ns, (tiles + 1) / 2);
  }
  ns = std::min<int64_t>({ns, std::max<int64_t>(tiles, 1), kMaxSplits, 65535 / std::max<int64_t>(p.batch, 1)});
  f.nsplit = static_cast<int>(std::max<int64_t>(ns, 1));
  if (f.nsplit > 1) {
    const size_t rows = size_t(f.nsplit) * p.batch * p.heads_q * p.seqlen_q;
    f.o_accum_bytes = (rows * p.head_dim * sizeof(float) + 255) / 256 * 256;
    f.workspace_bytes = f.o_accum_bytes + rows * sizeof(float);
  }
  return f;
}

// KV-cache rotary embedding: the append launch writes q's rotated copy
// (contiguous [B, Sq, Hq, D], in the input dtype) after the split buffers.
inline size_t rotary_q_offset(const FwdPlan& f) { return (f.workspace_bytes + 255) / 256 * 256; }
inline size_t rotary_q_bytes(const FwdParams& p) {
  const size_t elem = p.dtype == DType::F32 ? 4 : 2;
  return p.rotary_cos != nullptr ? static_cast<size_t>(p.batch * p.seqlen_q * p.heads_q * p.head_dim) * elem : 0;
}
// Everything the sm80 forward needs from the workspace.
inline size_t fwd_workspace_total(const FwdParams& p, const FwdPlan& f) {
  const size_t rot = rotary_q_bytes(p);
  return rot ? rotary_q_offset(f) + rot : f.workspace_bytes;
}

// The plan runs fwd_kernel's PLAIN instantiation: 128-row tiles, one head
// per tile, one piece per row, and nothing the plain prefill does not need.
inline bool fwd_is_plain(const FwdParams& p, const FwdPlan& f) {
  return !f.decode && f.pack == 1 && f.nsplit == 1 && !p.has_variants() && p.softcap <= 0.f &&
         p.block_table == nullptr;
}

}  // namespace flashattn::detail::cuda::sm80

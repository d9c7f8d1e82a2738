// Tile shapes of the sm80 kernels per head dim, and their shared-memory
// footprints. Host-includable (no device code): dispatch uses the sizes in
// can_implement. Shapes follow FlashAttention-2's tuned A100 choices, sized
// to fit the A100's 163 KB of shared memory per block (the H100/H200 have 227).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "common/mask.hpp"

namespace flashattn::detail::cuda::sm80 {

// Bytes of a ROWS x COLS 16-bit shared tile (see SmemLayout: 16 B of padding
// per row when the row is not a multiple of 128 bytes).
constexpr size_t tile_bytes(int rows, int cols) {
  return static_cast<size_t>(rows) * ((cols / 8) % 8 == 0 ? cols : cols + 8) * 2;
}

// Forward: BM query rows per block, BN keys per step, NW warps each owning
// BM/NW full rows (so the online softmax never leaves registers).
template <int D>
struct FwdCfg {
  static constexpr int BM = 128, BN = 64;
  static constexpr int NW = D <= 128 ? 4 : 8;
  static constexpr bool KEY_SPLIT = false;  // warps own rows (FwdDecodeCfg: keys)
  static constexpr size_t smem() { return tile_bytes(BM, D) + 2 * tile_bytes(BN, D); }
};

// Backward main kernel: one block per BN keys, looping over BM-row query
// tiles of every query head in the kv head's group. Three warp tilings:
//   SdP: S^T = K Q^T and dP^T = V dO^T, a (BN x BM) tile, SDP_K x SDP_Q warps
//   KV : dV += P^T dO, dK += dS^T Q,    a (BN x D)  tile, KV_K x KV_D warps
//   DQ : dQ  = dS K,                    a (BM x D)  tile, DQ_Q x DQ_D warps
// QBUF = 2 prefetches the next Q/dO tile while the current one is used.
// BIG_SMEM: the variant for GPUs with more than the A100's 163 KB per block
// (H100/H200: 227 KB); it differs only where the A100 shape had to give up
// double buffering (head dim 256). BwdCfg<D> (false) is what every sm80+
// GPU can run, and what dispatch checks.
// Head dim 64 takes 128 x 128 tiles (twice the work per barrier and per
// K/V fragment of the 64-row tile; its accumulators are small enough).
template <int D, bool BIG_SMEM = false>
struct BwdCfg {
  static constexpr int BM = D <= 64 ? 128 : 64;
  static constexpr int BN = D <= 128 ? 128 : 64;
  static constexpr int NW = 8;
  static constexpr int SDP_K = (D <= 128 && BM == 64) ? 4 : 2, SDP_Q = NW / SDP_K;
  // S^T and dP^T in one k-loop (twice the fragments in flight), possible
  // without spills only where the S/dP accumulators are small (64-row
  // tiles). It measured faster when every ldmatrix recomputed its swizzled
  // address; with SmemLayout::lane_addr the two separate k-loops (FA2's
  // order) leave ptxas more registers for the hoisted addresses: head dim
  // 128 backward +1-6% on the H200 (bench/NOTES.md). Kept as a knob for A/B.
#ifndef FA_SM80_BWD_PAIR_SDP
#define FA_SM80_BWD_PAIR_SDP 0
#endif
  static constexpr bool PAIR_SDP = BM == 64 && FA_SM80_BWD_PAIR_SDP;
  static constexpr int KV_K = D <= 128 ? 4 : 2, KV_D = NW / KV_K;
  // dQ: for 64-row tiles 2 x 4 warps (32 queries x D/4 each) read fewer B
  // fragments than 4 x 2; for 128-row tiles 4 x 2 reads fewer A fragments.
  static constexpr int DQ_Q = BM == 128 ? 4 : 2, DQ_D = NW / DQ_Q;
  static constexpr int QBUF = (D <= 192 || BIG_SMEM) ? 2 : 1;
  static constexpr size_t smem() {
    return 2 * tile_bytes(BN, D) + 2 * QBUF * tile_bytes(BM, D) + 2 * tile_bytes(BN, BM) +
           2 * QBUF * BM * sizeof(float);
  }
};

// Blocks of the backward main kernel: one per (key tile n, kv head hk,
// batch entry b), on a 1-D grid, in groups of (b, hk) units: K groups of G
// units, then one last group of the other units (units - K * G of them,
// fewer or more than G). Block = start(g) + n * gs + j for unit u = g * G + j
// (b = u / heads_kv, hk = u % heads_kv) of group g of gs units. Within a
// group the grid is key-tile-major: under a causal mask the first key tiles
// have the most query tiles to visit, so the longest blocks go first and the
// group's last wave holds short ones. Across groups it is head-major: the
// blocks in flight together are a group's, so the Q / dO tiles they read and
// the fp32 dQ rows they add to are G heads' rather than the whole batch's.
// G = all units is the plain key-tile-major order, G = 1 FlashAttention-2's.
constexpr long long bwd_blocks(long long n_blocks, long long heads_kv, long long batch) {
  return n_blocks * heads_kv * batch;
}

// The grid order FLASHATTN_SM80_BWD_ORDER picks (read once per process):
// auto (default) groups of G units that fit half the L2 and a last group
// large enough to end on short blocks (grid_full_groups); groups: the same
// groups with the remainder as the last (the fiftieth session's order);
// tile: all units in one group; head: groups of one (FlashAttention-2's).
enum class BwdOrder : int { automatic = 0, groups = 1, tile = 2, head = 3 };
inline BwdOrder bwd_order() {
  static const BwdOrder o = [] {
    const char* e = std::getenv("FLASHATTN_SM80_BWD_ORDER");
    if (e != nullptr && std::strcmp(e, "groups") == 0) return BwdOrder::groups;
    if (e != nullptr && std::strcmp(e, "tile") == 0) return BwdOrder::tile;
    if (e != nullptr && std::strcmp(e, "head") == 0) return BwdOrder::head;
    return BwdOrder::automatic;
  }();
  return o;
}

// As many units (unit_bytes each) as fit half the L2, at least one, at most
// all (grid_block's groups, forward and backward).
inline long long l2_group_units(long long units, long long unit_bytes, long long l2_bytes) {
  const long long g = unit_bytes > 0 ? l2_bytes / 2 / unit_bytes : units;
  return g < 1 ? 1 : g > units ? units : g;
}

// The sm80 forward's block order under a causal / window mask,
// FLASHATTN_SM80_FWD_ORDER (read once per process): groups (default) runs the
// (batch, head) units in groups that fit half the L2 with their K and V rows,
// longest query tiles first across the group, and a last group large enough
// to end on short blocks (grid_block, grid_full_groups); head runs each unit's
// query tiles in turn, longest first (the order before the fifty-second
// session). Measured on an H100, causal, head dims 64-256, 1k-16k tokens:
// groups 1.00-1.11x the head order's speed (bench/NOTES.md, "The sm80
// forward's masked grid"). Unmasked calls always take the head order.
inline bool fwd_grouped_order() {
  static const bool g = [] {
    const char* e = std::getenv("FLASHATTN_SM80_FWD_ORDER");
    return e == nullptr || std::strcmp(e, "head") != 0;
  }();
  return g;
}

// G for a problem: all units (tile), one (head) or as many units as fit half
// the L2 with their Q, dO and dQ-accumulator rows (unit_bytes each).
// Measured on an H100 against the plain key-tile-major order: head dim 256
// at 1-2k tokens 1.4-1.6x, head dim 128 at 1k +8%, most cells level, head
// dim 128 causal 4k 4% slower (bench/NOTES.md, "The sm80 backward's grid in
// groups of heads"; the last group below is for that cell).
inline long long bwd_group_units(long long units, long long unit_bytes, long long l2_bytes,
                                 BwdOrder order = bwd_order()) {
  if (units <= 1 || order == BwdOrder::tile) return units < 1 ? 1 : units;
  if (order == BwdOrder::head) return 1;
  return l2_group_units(units, unit_bytes, l2_bytes);
}

// K, the groups of G units before the last group, which takes the rest and
// at least last_min units. Under a causal or window mask a block's length
// (its query tiles) depends on its key tile; a grid that ends on a group
// whose steps per SM slot are fewer than its longest block's leaves most
// SMs idle while those finish (a list-scheduling model of the H100 put that
// tail at 4.5-7% of the call at head dims 128 / 256, causal, 1k-4k tokens,
// where the groups measured up to 4% slower than the whole-batch order).
// last_min = 0: the remainder of units / G is the last group.
inline long long grid_full_groups(long long units, long long G, long long last_min) {
  if (G < 1) G = 1;
  long long k = units / G;
  if (last_min > 0) {
    const long long k2 = units > last_min ? (units - last_min) / G : 0;
    k = k2 < k ? k2 : k;
  }
  return k;
}

// A unit's steps under a mask, summed over its blocks, and the most one block
// takes (grid_last_group_min's inputs).
struct UnitSteps {
  long long total = 0, longest = 0;
};
// Backward: a block per key tile (BN keys), a step per query tile (BM rows)
// it visits (per query head; the kernel's own count, WindowMask::queries).
inline UnitSteps bwd_unit_steps(const WindowMask& mask, long long seqlen_q, long long seqlen_k, int BM, int BN) {
  UnitSteps u;
  for (long long c0 = 0; c0 < seqlen_k; c0 += BN) {
    const long long c1 = c0 + BN < seqlen_k ? c0 + BN : seqlen_k;
    const KeyRange r = mask.queries(c0, c1, seqlen_q);
    const long long tiles = r.begin < r.end ? (r.end + BM - 1) / BM - r.begin / BM : 0;
    u.total += tiles;
    u.longest = tiles > u.longest ? tiles : u.longest;
  }
  return u;
}

// Forward: a block per query tile (BM rows), a step per key tile (BN keys)
// its rows see (WindowMask::keys over the tile's rows, as the kernel skips).
inline UnitSteps fwd_unit_steps(const WindowMask& mask, long long seqlen_q, int BM, int BN) {
  UnitSteps u;
  for (long long r0 = 0; r0 < seqlen_q; r0 += BM) {
    const long long r1 = r0 + BM < seqlen_q ? r0 + BM : seqlen_q;
    const KeyRange k = mask.keys(r0, r1);
    const long long tiles = k.begin < k.end ? (k.end + BN - 1) / BN - k.begin / BN : 0;
    u.total += tiles;
    u.longest = tiles > u.longest ? tiles : u.longest;
  }
  return u;
}

// last_min for grid_full_groups: the units whose steps (unit_steps each) per
// SM slot (slots: SMs x blocks per SM) reach the longest block's steps.
inline long long grid_last_group_min(long long unit_steps, long long longest, long long slots) {
  if (unit_steps <= 0 || longest <= 0 || slots <= 0) return 0;
  return (longest * slots + unit_steps - 1) / unit_steps;
}

// Bytes a (sequence, kv head) unit's steps touch, bwd_group_units' unit_bytes:
// its `group` query heads' Q and dO rows (es bytes an element) and their fp32
// dQ-accumulator rows, seqlen_q rows of the tile's head dim d each.
constexpr long long bwd_unit_bytes(long long group, long long seqlen_q, long long d, long long es) {
  return group * seqlen_q * d * (2 * es + 4);
}

// The grid's groups for one call: G units a group, K full groups before the
// last (grid_block). One computation for the launchers (launch_fwd.cuh
// order_masked_grid, launch_bwd.cuh) and the emulator's harness
// (bench/gpu/sm80_emu_check.cpp), which passes a fixed L2 and slot count.
// slots() is called only under a mask (on a GPU it is an occupancy query).
struct GridGroups {
  long long group_units = 1, full_groups = 0;
};

// Forward, masked calls in groups (fwd_grouped_order): units of unit_bytes of
// K and V rows each.
template <class Slots>
GridGroups fwd_grid_groups(const WindowMask& mask, long long units, long long seqlen_q, long long unit_bytes,
                           long long l2_bytes, int BM, int BN, Slots slots) {
  GridGroups g;
  g.group_units = l2_group_units(units, unit_bytes, l2_bytes);
  const UnitSteps st = fwd_unit_steps(mask, seqlen_q, BM, BN);
  g.full_groups = grid_full_groups(units, g.group_units, grid_last_group_min(st.total, st.longest, slots()));
  return g;
}

// Backward, every call: units of bwd_unit_bytes each, in the order asked for;
// under a mask the automatic order sizes the last group (grid_full_groups).
template <class Slots>
GridGroups bwd_grid_groups(const WindowMask& mask, long long units, long long seqlen_q, long long unit_bytes,
                           long long l2_bytes, BwdOrder order, int BM, int BN, Slots slots) {
  GridGroups g;
  g.group_units = bwd_group_units(units, unit_bytes, l2_bytes, order);
  long long last_min = 0;
  if (order == BwdOrder::automatic && g.group_units < units && (mask.left >= 0 || mask.right >= 0)) {
    const UnitSteps st = bwd_unit_steps(mask, seqlen_q, mask.seqlen_k, BM, BN);
    last_min = grid_last_group_min(st.total, st.longest, slots());
  }
  g.full_groups = grid_full_groups(units, g.group_units, last_min);
  return g;
}

// The order of a backward block's (query head, query tile) steps: the
// group's query heads one after the other, each over its query tiles
// [first, first + count). BwdWalk::rotate (the default) starts every head at
// the block's own tile (n_block mod count) and wraps, so that the blocks of a
// wave add into different dQ rows (same-address atomics serialise in L2);
// first walks up from the first tile in every block; last walks down from
// the last (FlashAttention-2's order: the blocks of a unit then read each
// Q / dO tile at about the same moment, and under a causal mask the full
// tiles come before the diagonal one). FLASHATTN_SM80_BWD_WALK=rotate|first|
// last picks one for A/B runs (read once per process).
enum class BwdWalk : int { rotate = 0, first = 1, last = 2 };
inline BwdWalk bwd_walk() {
  static const BwdWalk w = [] {
    const char* e = std::getenv("FLASHATTN_SM80_BWD_WALK");
    if (e != nullptr && std::strcmp(e, "first") == 0) return BwdWalk::first;
    if (e != nullptr && std::strcmp(e, "last") == 0) return BwdWalk::last;
    return BwdWalk::rotate;
  }();
  return w;
}

struct BwdSteps {
  int first, count, start, dir;
#if defined(__CUDACC__)
  __host__ __device__
#endif
  BwdSteps(int walk, int m_first, int m_count, int n_block)
      : first(m_first), count(m_count), start(m_first), dir(1) {
    if (m_count <= 0) return;
    if (walk == static_cast<int>(BwdWalk::rotate)) start = m_first + n_block % m_count;
    if (walk == static_cast<int>(BwdWalk::last)) start = m_first + m_count - 1, dir = -1;
  }
  // The step after (h, m): the next tile of head h, or the start of head h + 1.
#if defined(__CUDACC__)
  __host__ __device__
#endif
  void next(int& h, int& m) const {
    m += dir;
    if (m == first + count) m = first;
    if (m < first) m = first + count - 1;
    if (m == start) ++h;
  }
};

// (tile n, batch entry b, head hk) of block `block` of a 1-D grid over
// n_blocks tiles of heads_kv x batch units (bwd_blocks): full_groups groups
// of group_units units, then a last group of the rest, tile-major within a
// group (the layout above; the sm80 forward's masked calls use it too, with
// query tiles for n, fwd_kernel.cuh).
struct GridBlock {
  int n, b, hk;
};
#if defined(__CUDACC__)
__host__ __device__
#endif
inline GridBlock grid_block(unsigned block, int group_units, int full_groups, int n_blocks, int heads_kv,
                            int batch) {
  const unsigned units = static_cast<unsigned>(heads_kv) * static_cast<unsigned>(batch);
  const unsigned G = static_cast<unsigned>(group_units), K = static_cast<unsigned>(full_groups);
  const unsigned per_group = G * static_cast<unsigned>(n_blocks);
  unsigned g = block / per_group;
  if (g > K) g = K;  // the last group starts at block K * per_group
  const unsigned r = block - g * per_group;
  const unsigned gs = g < K ? G : units - K * G;
  const unsigned n = r / gs, u = g * G + (r - n * gs);
  return {static_cast<int>(n), static_cast<int>(u / static_cast<unsigned>(heads_kv)),
          static_cast<int>(u % static_cast<unsigned>(heads_kv))};
}

// Deterministic dQ kernel: one block per BM query rows looping over key
// tiles, each warp owning 16 full rows (like the forward), no atomics.
template <int D>
struct DqCfg {
  static constexpr int BM = 64, BN = 64, NW = 4;
  static constexpr int KV_STAGES = D <= 192 ? 2 : 1;
  static constexpr size_t smem() { return 2 * tile_bytes(BM, D) + 2 * KV_STAGES * tile_bytes(BN, D); }
};

// Head dims with an instantiation, and the one a head dim runs on.
constexpr int kHeadDims[] = {64, 96, 128, 192, 256};
constexpr int tile_head_dim(long long d) {
  for (int h : kHeadDims)
    if (d <= h) return h;
  return 0;
}

}  // namespace flashattn::detail::cuda::sm80

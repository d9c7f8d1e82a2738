// Tile shapes of the fp32 CUDA kernels (the thread layout is in tiles.cuh):
// plain constexpr data, so that the host dispatch can size shared memory and
// grids without including device code.
#pragma once

#include <cstddef>

namespace flashattn::detail::cuda::f32 {

constexpr int kThreads = 128;
constexpr int kRowThreads = 16;  // distinct ty: rows of a tile step by 16
constexpr int kColThreads = 8;   // distinct tx: score columns step by 8

// Floats per shared-memory row of a tile read along its rows by float4: +4
// keeps 16-byte alignment and puts the 8 rows a warp reads at once in
// different banks.
constexpr int padded(int cols) { return cols + 4; }
// Floats per row of a score tile (P, dS; cols a multiple of 32). A warp
// stores 4 rows x 8 neighbouring columns at once (tiles.cuh's layout): +8
// puts those rows 8 banks apart, so the stores are conflict-free (+4 gave
// 2-way conflicts), and the float4 reads along a row stay aligned.
constexpr int score_pitch(int cols) { return cols + 8; }

// Forward: a thread's O and score registers stay at 32-64 each. K and V
// take turns in a ring of two tile buffers, each load running under the
// product that does not read it (fwd_kernel.cuh), so shared memory (Q, the
// two buffers, P) is 71 KB at head dim 64 (three blocks per SM), 78 KB at
// 128 and 105 KB at 256 (two).
template <int DT>
struct FwdTile {
  static constexpr int RM = DT == 256 ? 2 : 4;  // query rows per thread
  static constexpr int CN = DT == 64 ? 8 : 4;   // key columns per thread
  static constexpr int BM = kRowThreads * RM, BN = kColThreads * CN;
  // Blocks per SM the registers are capped for (shared memory allows 3 at 64).
  static constexpr int MIN_BLOCKS = DT == 64 ? 3 : 1;
  static constexpr int LD = padded(DT), LP = score_pitch(BN);
  static constexpr size_t smem() { return sizeof(float) * (BM * LD + 2 * BN * LD + BM * LP); }
};

// Backward: accumulators at 64 registers per thread in each kernel (dK + dV:
// 2 x rows x DT / 8; dQ: rows x DT / 8). Shared memory: dK/dV 90-112 KB, so
// two blocks share an SM at every head dim; dQ 88-112 KB up to 128, 138 KB
// (one block) at 256.
template <int DT>
struct BwdTile {
  // dK/dV kernel: key rows per thread, query columns per thread; the Q / dO
  // tiles stream through Q_STAGES buffers (two: the next tile loads while
  // this one is used; one at 256, where two would leave one block per SM).
  static constexpr int KRM = DT == 64 ? 4 : DT == 128 ? 2 : 1;
  static constexpr int QCN = 4;
  static constexpr int Q_STAGES = DT == 256 ? 1 : 2;
  static constexpr int BK = kRowThreads * KRM, BQ = kColThreads * QCN;
  // dQ kernel: query rows per thread, key columns per thread.
  static constexpr int QRM = DT == 256 ? 2 : 4;
  static constexpr int KCN = DT == 64 ? 8 : 4;
  static constexpr int DQ_BQ = kRowThreads * QRM, DQ_BK = kColThreads * KCN;
  static constexpr int LD = padded(DT);
  static constexpr size_t dkdv_smem() {
    return sizeof(float) * (2 * BK * LD + 2 * Q_STAGES * BQ * LD + 2 * BK * score_pitch(BQ));
  }
  static constexpr size_t dq_smem() {
    return sizeof(float) * (2 * DQ_BQ * LD + 2 * DQ_BK * LD + DQ_BQ * score_pitch(DQ_BK));
  }
  static constexpr size_t smem() { return dkdv_smem() > dq_smem() ? dkdv_smem() : dq_smem(); }
};

}  // namespace flashattn::detail::cuda::f32

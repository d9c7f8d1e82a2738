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

// Forward: a thread's O and score registers stay at 32-64 each, shared
// memory (Q, K, V and P tiles) at 102-110 KB.
template <int DT>
struct FwdTile {
  static constexpr int RM = DT == 256 ? 2 : 4;  // query rows per thread
  static constexpr int CN = DT == 64 ? 8 : 4;   // key columns per thread
  static constexpr int BM = kRowThreads * RM, BN = kColThreads * CN;
  // K / V buffers: two (the next tile loads while this one is used) where
  // that fits the 163 KB of an A100's block next to Q and P; one at 256.
  static constexpr int STAGES = DT == 256 ? 1 : 2;
  static constexpr int LD = padded(DT), LP = padded(BN);
  static constexpr size_t smem() { return sizeof(float) * (BM * LD + 2 * STAGES * BN * LD + BM * LP); }
};

// Backward: accumulators at 64 registers per thread in each kernel (dK + dV:
// 2 x rows x DT / 8; dQ: rows x DT / 8); shared memory at 87-138 KB.
template <int DT>
struct BwdTile {
  // dK/dV kernel: key rows per thread, query columns per thread.
  static constexpr int KRM = DT == 64 ? 4 : DT == 128 ? 2 : 1;
  static constexpr int QCN = DT == 256 ? 4 : 8;
  static constexpr int BK = kRowThreads * KRM, BQ = kColThreads * QCN;
  // dQ kernel: query rows per thread, key columns per thread.
  static constexpr int QRM = DT == 256 ? 2 : 4;
  static constexpr int KCN = DT == 64 ? 8 : 4;
  static constexpr int DQ_BQ = kRowThreads * QRM, DQ_BK = kColThreads * KCN;
  static constexpr int LD = padded(DT);
  static constexpr size_t dkdv_smem() {
    return sizeof(float) * (2 * BK * LD + 2 * BQ * LD + 2 * BK * padded(BQ) + 2 * BQ);
  }
  static constexpr size_t dq_smem() {
    return sizeof(float) * (2 * DQ_BQ * LD + 2 * DQ_BK * LD + DQ_BQ * padded(DQ_BK));
  }
  static constexpr size_t smem() { return dkdv_smem() > dq_smem() ? dkdv_smem() : dq_smem(); }
};

}  // namespace flashattn::detail::cuda::f32

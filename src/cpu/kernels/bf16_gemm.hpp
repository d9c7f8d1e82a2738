// Picks the engine of the bf16 pair-GEMMs for this translation unit: AMX
// tiles (kernels_amx.cpp) or AVX512-BF16 dot products
// (kernels_avx512bf16.cpp, FA_BF16_DOT), with the packings both read.
#pragma once

#if defined(FA_BF16_DOT) && FA_BF16_DOT
#include "dpbf16_gemm.hpp"
#else
#include "amx_tiles.hpp"
#endif
#include "bf16_pack.hpp"
#include "tiles.hpp"

namespace flashattn::detail::cpu::FA_ISA_NS {

// C (+)= A B on the tiles: bf16 operands, or (kSplit) three pieces each, piece
// planes pa / pb apart (amx_tiles.hpp).
template <bool kSplit>
inline void pair_gemm(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda, int64_t pa,
                      const uint16_t* B, int64_t ldb, int64_t pb, float* C, int64_t ldc, bool accumulate) {
  static_assert(!kSplit || FA_FP32_SPLIT, "split fp32 GEMMs exist on AMX tiles only (kernels_amx.cpp)");
#if FA_FP32_SPLIT
  if constexpr (kSplit) return tile_gemm<true>(M, N, K, A, lda, B, ldb, C, ldc, accumulate, pa, pb);
#endif
  tile_gemm(M, N, K, A, lda, B, ldb, C, ldc, accumulate);
}

// pair_gemm as a job issued step by step (amx_tiles.hpp, TileGemmJob).
template <bool kSplit>
inline TileGemmJob<kSplit> pair_gemm_job(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda,
                                         int64_t pa, const uint16_t* B, int64_t ldb, int64_t pb, float* C,
                                         int64_t ldc, bool accumulate) {
  static_assert(!kSplit || FA_FP32_SPLIT, "split fp32 GEMMs exist on AMX tiles only (kernels_amx.cpp)");
  return TileGemmJob<kSplit>(M, N, K, A, lda, pa, B, ldb, pb, C, ldc, accumulate);
}

// Runs the steps of two GEMM jobs, in order, spread evenly over a loop of
// `ticks` iterations that calls tick() once each; finish() runs what is left.
template <class Job>
class GemmPacer {
 public:
  GemmPacer(Job* first, Job* second, int64_t ticks)
      : jobs_{first, second}, total_(first->steps() + second->steps()), ticks_(ticks > 0 ? ticks : 1) {}
  void tick() {
    acc_ += total_;
    while (acc_ >= ticks_ && run_one()) acc_ -= ticks_;
  }
  void finish() {
    while (run_one()) {
    }
  }

 private:
  bool run_one() {
    for (Job* j : jobs_) {
      if (!j->done()) {
        j->step();
        return true;
      }
    }
    return false;
  }
  Job* jobs_[2];
  int64_t total_, ticks_, acc_ = 0;
};

}  // namespace flashattn::detail::cpu::FA_ISA_NS

// Picks the engine of the bf16 pair-GEMMs for this translation unit: AMX
// tiles (kernels_amx.cpp) or AVX512-BF16 dot products
// (kernels_avx512bf16.cpp, FA_BF16_DOT), with the packings both read.
#pragma once

#include <type_traits>

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

// pair_gemm as a job of one step: the engines' GEMMs that are not issued
// step by step (bf16 on either engine, and split fp32 without
// SplitGemmJob's schedule), with SplitGemmJob's interface.
template <bool kSplit>
class WholeGemmJob {
 public:
  WholeGemmJob() = default;  // no work
  WholeGemmJob(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda, int64_t pa, const uint16_t* B,
               int64_t ldb, int64_t pb, float* C, int64_t ldc, bool accumulate)
      : M_(M), N_(N), K_(K), A_(A), lda_(lda), pa_(pa), B_(B), ldb_(ldb), pb_(pb), C_(C), ldc_(ldc),
        accumulate_(accumulate), done_(M <= 0 || N <= 0) {}
  bool done() const { return done_; }
  int64_t steps() const { return done_ ? 0 : 1; }
  void step() {
    pair_gemm<kSplit>(M_, N_, K_, A_, lda_, pa_, B_, ldb_, pb_, C_, ldc_, accumulate_);
    done_ = true;
  }
  void finish() {
    if (!done_) step();
  }

 private:
  int64_t M_ = 0, N_ = 0, K_ = 0;
  const uint16_t* A_ = nullptr;
  int64_t lda_ = 0, pa_ = 0;
  const uint16_t* B_ = nullptr;
  int64_t ldb_ = 0, pb_ = 0;
  float* C_ = nullptr;
  int64_t ldc_ = 0;
  bool accumulate_ = false, done_ = true;
};

// The job pair_gemm_job makes: split fp32 step by step where the tiles have
// SplitGemmJob's schedule, else one step.
#if FA_FP32_SPLIT && FA_AMX_SPLIT_SCHEDULE
template <bool kSplit>
using PairGemmJob = std::conditional_t<kSplit, SplitGemmJob, WholeGemmJob<kSplit>>;
#else
template <bool kSplit>
using PairGemmJob = WholeGemmJob<kSplit>;
#endif

template <bool kSplit>
inline PairGemmJob<kSplit> pair_gemm_job(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda,
                                         int64_t pa, const uint16_t* B, int64_t ldb, int64_t pb, float* C,
                                         int64_t ldc, bool accumulate) {
  return PairGemmJob<kSplit>(M, N, K, A, lda, pa, B, ldb, pb, C, ldc, accumulate);
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

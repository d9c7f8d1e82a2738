// Launch of one backward instantiation (preprocess, main kernel, dQ
// postprocess on one stream); included only by the inst/ translation units.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "bwd_kernel.cuh"
#include "bwd_launch.hpp"
#include "bwd_prepost.cuh"

namespace flashattn::detail::cuda::sm90 {

template <class Element, int kHeadDim, bool kVarlen, int kBlockM>
Status launch_bwd(const BwdKernelArgs& args, const BwdPrepArgs& prep, cudaStream_t stream) {
  using T = BwdTraits<Element, kHeadDim, kBlockM>;
  auto fail = [](const char* what, cudaError_t e) {
    return Status::Error(ErrorCode::CudaError,
                         std::string("sm90 backward: ") + what + ": " + cudaGetErrorString(e));
  };
  cudaError_t e = cudaSuccess;
  // Workspace rows (bwd_seq.cuh): [B, Hq, seqlen_q_pad] or varlen [Hq, ws_head_rows].
  const int64_t rows = kVarlen ? prep.heads_q * prep.ws_head_rows
                               : static_cast<int64_t>(prep.batch) * prep.heads_q * prep.seqlen_q_pad;
  if (args.deterministic) {
    const size_t order_bytes = static_cast<size_t>(rows / T::kBlockM) * sizeof(int);
    if ((e = cudaMemsetAsync(args.dq_order, 0, order_bytes, stream)) != cudaSuccess) {
      return fail("cudaMemsetAsync", e);
    }
  }
  // D, LSE * log2(e), and the dQ accumulator zeroed (bwd_prepost.cuh).
  const int64_t rows_per_block = 256 / bwd_prep_lanes(kHeadDim);
  bwd_sm90_preprocess<Element, kHeadDim, kVarlen>
      <<<static_cast<unsigned>((rows + rows_per_block - 1) / rows_per_block), 256, 0, stream>>>(prep);
  if ((e = cudaGetLastError()) != cudaSuccess) return fail("preprocess launch", e);

  // Softcap / ALiBi: the score-mod kernels (score_mod.cuh); the 80-row
  // steps have none, nor a mask or the deterministic mode (bwd_sm90.cu's
  // block_m_of keeps those calls on 64 rows).
  auto* kernel = &bwd_kernel<T, kVarlen>;
  const int mods = score_mod_bits(args.softcap > 0.f, args.alibi != nullptr);
  if constexpr (T::kDQTransposed) {
    if (mods != 0 || args.window_left >= 0 || args.window_right >= 0 || args.deterministic) {
      return Status::Error(ErrorCode::Internal, "sm90 backward: the 80-row steps take unmasked calls only");
    }
  } else {
    switch (mods) {
      case kModSoftcap: kernel = &bwd_kernel<T, kVarlen, kModSoftcap>; break;
      case kModAlibi: kernel = &bwd_kernel<T, kVarlen, kModAlibi>; break;
      case kModSoftcap | kModAlibi: kernel = &bwd_kernel<T, kVarlen, kModSoftcap | kModAlibi>; break;
      default: break;
    }
  }
  e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, T::kSmemBytes);
  if (e != cudaSuccess) return fail("cudaFuncSetAttribute", e);
  const int interleave = 1 << args.heads_interleave_log2;
  const dim3 grid(static_cast<unsigned>((args.seqlen_k + T::kBlockN - 1) / T::kBlockN * interleave),
                  static_cast<unsigned>((args.heads_kv + interleave - 1) / interleave),
                  static_cast<unsigned>(args.batch));
  kernel<<<grid, T::kThreads, T::kSmemBytes, stream>>>(args);
  if ((e = cudaGetLastError()) != cudaSuccess) return fail("kernel launch", e);

  const int64_t chunks = (kVarlen ? prep.total_q : static_cast<int64_t>(prep.batch) * prep.seqlen_q) *
                         prep.heads_q * (prep.cols / 8);
  if (chunks == 0) return Status::Ok();
  bwd_sm90_postprocess<Element, kVarlen><<<static_cast<unsigned>((chunks + 255) / 256), 256, 0, stream>>>(prep);
  if ((e = cudaGetLastError()) != cudaSuccess) return fail("postprocess launch", e);
  return Status::Ok();
}

}  // namespace flashattn::detail::cuda::sm90

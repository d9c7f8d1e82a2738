// Host launcher of the sm80 backward for one (element type, head dim):
//   1. D = rowsum(dO * O)                      (bwd_preprocess)
//   2. dK, dV (+ atomic fp32 dQ unless deterministic)  (bwd_kernel)
//   3. dQ: convert the fp32 accumulator (bwd_postprocess), or, when
//      deterministic, the atomic-free bwd_dq_kernel.
// Varlen batches take the same three launches (SEQ instantiations, or VAR
// with ALiBi / dropout): grids sized by the longest sequence, each block
// reading its sequence's offsets from cu_seqlens on the device, so nothing
// here reads device memory or synchronises (graph-capturable).
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "cuda_check.hpp"
#include "sm80/bwd_dq_kernel.cuh"
#include "sm80/bwd_kernel.cuh"
#include "sm80/bwd_postprocess.cuh"
#include "sm80/bwd_preprocess.cuh"
#include "sm80/fwd_plan.hpp"
#include "sm80/launch.hpp"

namespace flashattn::detail::cuda::sm80 {

template <class K>
Status set_smem(K* kernel, size_t bytes) {
  FA_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  return Status::Ok();
}

template <class T, int D, bool BIG_SMEM>
Status launch_bwd_main(const BwdParams& p, const BwdArgs& grid_free_args, cudaStream_t stream) {
  using Cfg = BwdCfg<D, BIG_SMEM>;
  const long long n_blocks = (p.seqlen_k + Cfg::BN - 1) / Cfg::BN;
  const long long blocks = bwd_blocks(n_blocks, p.heads_kv, p.batch);
  BwdArgs args = grid_free_args;
  args.n_blocks = static_cast<int>(n_blocks);
  // A (sequence, kv head) unit's steps read its query heads' Q and dO rows
  // and add to their fp32 dQ rows; the grid keeps the units in flight
  // together to about half the L2 (kernel_traits.hpp bwd_group_units).
  const long long unit_bytes = bwd_unit_bytes(p.heads_q / p.heads_kv, p.seqlen_q, D, sizeof(T));
  const DeviceInfo dev = device_info_or_zero(p.device_index);
  const long long units = p.heads_kv * p.batch;
  args.walk = static_cast<int>(bwd_walk());
  if (blocks > 0x7fffffffLL)
    return Status::Error(ErrorCode::Unsupported, "CUDA backward: batch * heads_kv * ceil(seqlen_k / " +
                                                     std::to_string(Cfg::BN) + ") = " + std::to_string(blocks) +
                                                     " key tiles exceed the 2^31 - 1 blocks of one launch");
  const dim3 grid(static_cast<unsigned>(blocks));
  auto* kernel = bwd_kernel_for<T, D, BIG_SMEM>(p);
  Status s = set_smem(kernel, Cfg::smem());
  if (!s.ok()) return s;
  // Under a causal / window mask the blocks differ in length: the last group
  // takes enough units that the grid ends on short blocks (bwd_grid_groups;
  // varlen batches by their longest lengths).
  const GridGroups g =
      bwd_grid_groups(WindowMask(p), units, p.seqlen_q, unit_bytes, dev.l2_bytes, bwd_order(), Cfg::BM, Cfg::BN,
                      [&] { return grid_slots(kernel, Cfg::NW * 32, Cfg::smem(), dev, p.device_index); });
  args.group_units = static_cast<int>(g.group_units);
  args.full_groups = static_cast<int>(g.full_groups);
  kernel<<<grid, Cfg::NW * 32, Cfg::smem(), stream>>>(args);
  FA_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

template <int E, int D>
Status run_bwd(const BwdParams& p, void* workspace) {
  using T = typename ElemType<E>::type;
  if (p.batch == 0 || p.heads_q == 0) return Status::Ok();
  const cudaStream_t stream = static_cast<cudaStream_t>(p.stream);
  const BwdWorkspace ws = bwd_workspace(p, D);
  BwdArgs args(p);
  const bool varlen = p.varlen();
  // Rows of the LSE / D / dQ accumulator: varlen [Hq, total_q] (BwdArgs).
  const int64_t rows = varlen ? p.heads_q * p.total_q : p.batch * p.heads_q * p.seqlen_q;
  if (rows > 0) {
    args.dsum = reinterpret_cast<float*>(static_cast<char*>(workspace) + ws.dsum_offset);
    if (!p.deterministic) {
      args.dq_accum = reinterpret_cast<float*>(static_cast<char*>(workspace) + ws.dq_offset);
      FA_CUDA_TRY(cudaMemsetAsync(args.dq_accum, 0, ws.total - ws.dq_offset, stream));
    }
    const unsigned blocks = static_cast<unsigned>((rows + 7) / 8);
    if (varlen)
      bwd_preprocess_kernel<T, true><<<blocks, 256, 0, stream>>>(args);
    else
      bwd_preprocess_kernel<T><<<blocks, 256, 0, stream>>>(args);
    FA_CUDA_TRY(cudaGetLastError());
  }

  if (p.seqlen_k > 0) {
    // The BIG_SMEM shape only where it differs (else it is not instantiated)
    // and the GPU has the room.
    Status s = Status::Ok();
    if constexpr (BwdCfg<D, true>::smem() != BwdCfg<D>::smem()) {
      int dev = 0, optin = 0;
      FA_CUDA_TRY(cudaGetDevice(&dev));
      FA_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
      const bool big = static_cast<size_t>(optin) >= BwdCfg<D, true>::smem();
      s = big ? launch_bwd_main<T, D, true>(p, args, stream) : launch_bwd_main<T, D, false>(p, args, stream);
    } else {
      s = launch_bwd_main<T, D, false>(p, args, stream);
    }
    if (!s.ok()) return s;
  }

  if (rows > 0 && p.seqlen_q > 0) {
    if (p.deterministic) {
      using Cfg = DqCfg<D>;
      auto* kernel = bwd_dq_kernel_for<T, D>(p);
      Status s = set_smem(kernel, Cfg::smem());
      if (!s.ok()) return s;
      const dim3 grid(static_cast<unsigned>((p.seqlen_q + Cfg::BM - 1) / Cfg::BM),
                      static_cast<unsigned>(p.heads_q), static_cast<unsigned>(p.batch));
      kernel<<<grid, Cfg::NW * 32, Cfg::smem(), stream>>>(args);
    } else {
      const int64_t chunks = rows * (p.head_dim / 8);
      const unsigned blocks = static_cast<unsigned>((chunks + 255) / 256);
      if (varlen)
        bwd_dq_convert_kernel<T, true><<<blocks, 256, 0, stream>>>(args, D);
      else
        bwd_dq_convert_kernel<T><<<blocks, 256, 0, stream>>>(args, D);
    }
    FA_CUDA_TRY(cudaGetLastError());
  }
  return Status::Ok();
}

}  // namespace flashattn::detail::cuda::sm80

// Host launcher of the sm80 forward for one (element type, head dim): the
// KV-cache append first (when asked), then the attention kernel, then the
// split-KV combine (when the plan splits), all on the caller's stream.
#pragma once

#include <cuda_runtime.h>

#include "cuda_check.hpp"
#include "sm80/launch_append.cuh"
#include "sm80/combine_kernel.cuh"
#include "sm80/fwd_kernel.cuh"
#include "sm80/fwd_plan.hpp"
#include "sm80/launch.hpp"

namespace flashattn::detail::cuda::sm80 {

// Masked prefill (causal / window; not packed, split or decode) in the
// default FLASHATTN_SM80_FWD_ORDER=groups: the blocks in groups of (batch,
// head) units that fit half the L2 with their K and V rows, longest query
// tiles first within a group, and a last group large enough that the grid
// ends on short blocks (kernel_traits.hpp fwd_grouped_order, fwd_grid_groups).
// Varlen batches by their longest lengths. Else args keep the head order.
// Never fails: a device query that fails only changes the order (grid_slots).
template <class T, int D, class K>
void order_masked_grid(const FwdParams& p, const FwdPlan& plan, K* kernel, int threads, size_t smem,
                       FwdSeqArgs& args) {
  using Cfg = FwdCfg<D>;
  const long long units = static_cast<long long>(plan.heads_y) * p.batch;
  if (!fwd_grouped_order() || plan.decode || plan.pack != 1 || plan.nsplit != 1 || plan.m_blocks < 2 ||
      units < 2 || (p.window_left < 0 && p.window_right < 0))
    return;
  const DeviceInfo dev = device_info_or_zero(p.device_index);
  const long long kv_bytes = 2 * p.seqlen_k * D * static_cast<long long>(sizeof(T));  // a unit's K and V rows
  const GridGroups g = fwd_grid_groups(WindowMask(p), units, p.seqlen_q, kv_bytes, dev.l2_bytes, Cfg::BM, Cfg::BN,
                                       [&] { return grid_slots(kernel, threads, smem, dev, p.device_index); });
  args.group_units = static_cast<int>(g.group_units);
  args.full_groups = static_cast<int>(g.full_groups);
}

template <int E, int D>
Status run_fwd(const FwdParams& p, void* workspace) {
  using T = typename ElemType<E>::type;
  using Cfg = FwdCfg<D>;
  const cudaStream_t stream = static_cast<cudaStream_t>(p.stream);
  const bool empty = p.batch == 0 || p.heads_q == 0 || p.seqlen_q == 0;
  const FwdPlan plan = empty ? FwdPlan{} : fwd_plan(p, sm_count(p.device_index), Cfg::BM, Cfg::BN);
  // KV-cache rotary: the attention reads q's rotated copy (fwd_plan.hpp).
  void* q_rot = rotary_q_bytes(p) ? static_cast<char*>(workspace) + rotary_q_offset(plan) : nullptr;
  if (p.k_new != nullptr && p.batch > 0 && p.heads_kv > 0) {
    if (Status s = launch_append<T>(p, q_rot, stream); !s.ok()) return s;
  }
  if (empty) return Status::Ok();
  FwdParams pr = p;
  if (q_rot != nullptr) {
    pr.q = q_rot;
    pr.q_str = {p.seqlen_q * p.heads_q * p.head_dim, p.heads_q * p.head_dim, p.head_dim};
  }
  FwdSeqArgs args(pr);
  args.pack = plan.pack;
  args.nsplit = plan.nsplit;
  args.max_q = static_cast<int>(p.seqlen_q);
  if (plan.nsplit > 1) {
    args.o_accum = static_cast<float*>(workspace);
    args.lse_accum = reinterpret_cast<float*>(static_cast<char*>(workspace) + plan.o_accum_bytes);
  }
  const dim3 grid(static_cast<unsigned>(plan.m_blocks), static_cast<unsigned>(plan.heads_y),
                  static_cast<unsigned>(p.batch * plan.nsplit));
  if (p.has_variants()) {
    // Keys a row never visits keep 0 in the returned mask.
    if (p.dropout_mask != nullptr)
      FA_CUDA_TRY(cudaMemsetAsync(p.dropout_mask, 0,
                                  static_cast<size_t>(p.batch * p.heads_q * p.seqlen_q * p.seqlen_k) * sizeof(int32_t),
                                  stream));
    auto* kernel = fwd_kernel_for<T, D>(p, plan);
    constexpr size_t smem = Cfg::smem();
    FA_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    order_masked_grid<T, D>(p, plan, kernel, Cfg::NW * 32, smem, args);
    kernel<<<grid, Cfg::NW * 32, smem, stream>>>(args);
  } else if (plan.decode) {
    using Dc = FwdDecodeCfg<D>;
    auto* kernel = &fwd_kernel<T, D, Dc>;
    FA_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(Dc::smem())));
    kernel<<<grid, Dc::NW * 32, Dc::smem(), stream>>>(args);
  } else {
    auto* kernel = fwd_kernel_for<T, D>(p, plan);
    constexpr size_t smem = Cfg::smem();
    FA_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    order_masked_grid<T, D>(p, plan, kernel, Cfg::NW * 32, smem, args);
    kernel<<<grid, Cfg::NW * 32, smem, stream>>>(args);
  }
  FA_CUDA_TRY(cudaGetLastError());
  if (plan.nsplit > 1) {
    const int64_t rows = p.batch * p.heads_q * p.seqlen_q;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(combine_blocks(rows));
    cfg.blockDim = dim3(kCombineThreads);
    cfg.dynamicSmemBytes = kCombineSmem;
    cfg.stream = stream;
    // sm_90+: programmatic dependent launch (combine_kernel.cuh waits for the
    // attention grid with griddepcontrol.wait before it reads a partial).
    cudaLaunchAttribute pdl[1];
    pdl[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    pdl[0].val.programmaticStreamSerializationAllowed = 1;
    if (device_major(p.device_index) >= 9) {
      cfg.attrs = pdl;
      cfg.numAttrs = 1;
    }
    FA_CUDA_TRY(cudaLaunchKernelEx(&cfg, &combine_kernel<T>, args));
    FA_CUDA_TRY(cudaGetLastError());
  }
  return Status::Ok();
}

}  // namespace flashattn::detail::cuda::sm80

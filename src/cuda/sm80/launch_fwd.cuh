// Host launcher of the sm80 forward for one (element type, head dim): the
// KV-cache append first (when asked), then the attention kernel, then the
// split-KV combine (when the plan splits), all on the caller's stream.
#pragma once

#include <cuda_runtime.h>

#include "cuda_check.hpp"
#include "sm80/append_kernel.cuh"
#include "sm80/combine_kernel.cuh"
#include "sm80/fwd_kernel.cuh"
#include "sm80/fwd_plan.hpp"
#include "sm80/launch.hpp"

namespace flashattn::detail::cuda::sm80 {

inline Status launch_append(const FwdParams& p, cudaStream_t stream) {
  AppendArgs a;
  a.k_new = static_cast<const uint4*>(p.k_new);
  a.v_new = static_cast<const uint4*>(p.v_new);
  a.k_cache = static_cast<uint4*>(const_cast<void*>(p.k));
  a.v_cache = static_cast<uint4*>(const_cast<void*>(p.v));
  a.kn = p.knew_str;
  a.vn = p.vnew_str;
  a.kc = p.k_str;
  a.vc = p.v_str;
  a.seqlens = p.seqlens_k;
  a.block_table = p.block_table;
  a.bt_stride = p.block_table_stride;
  a.page_size = static_cast<int>(p.page_size);
  a.batch = static_cast<int>(p.batch);
  a.s_new = static_cast<int>(p.seqlens_k_add);
  a.heads_kv = static_cast<int>(p.heads_kv);
  a.chunks = static_cast<int>(p.head_dim / 8);
  const int64_t total = p.batch * p.seqlens_k_add * p.heads_kv * a.chunks;
  append_kv_kernel<><<<static_cast<unsigned>((total + 255) / 256), 256, 0, stream>>>(a);
  FA_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

template <int E, int D>
Status run_fwd(const FwdParams& p, void* workspace) {
  using T = typename ElemType<E>::type;
  using Cfg = FwdCfg<D>;
  const cudaStream_t stream = static_cast<cudaStream_t>(p.stream);
  if (p.k_new != nullptr && p.seqlens_k_add > 0 && p.batch > 0 && p.heads_kv > 0) {
    if (Status s = launch_append(p, stream); !s.ok()) return s;
  }
  if (p.batch == 0 || p.heads_q == 0 || p.seqlen_q == 0) return Status::Ok();
  const FwdPlan plan = fwd_plan(p, sm_count(p.device_index), Cfg::BM, Cfg::BN);
  FwdSeqArgs args(p);
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

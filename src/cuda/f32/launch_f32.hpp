// Host entry points of the fp32 CUDA path (f32/*.cuh), one explicit
// instantiation per tile head dim in src/cuda/inst/f32_hdim*.cu. Host-only
// declarations so that dispatch.cpp stays plain C++.
#pragma once

#include <cstddef>

#include "common/params.hpp"
#include "f32/tile_sizes.hpp"
#include "flashattn/flashattn.hpp"
#include "sm80/fwd_plan.hpp"

namespace flashattn::detail::cuda::f32 {

// Head dims run on the next tile size up: 64, 128 or 256 (0: none).
inline int tile_head_dim(int64_t d) { return d <= 64 ? 64 : d <= 128 ? 128 : d <= 256 ? 256 : 0; }

// Shared memory per block of the forward and of the larger backward kernel.
inline size_t fwd_smem(int tile) {
  return tile == 64 ? FwdTile<64>::smem() : tile == 128 ? FwdTile<128>::smem() : FwdTile<256>::smem();
}
inline size_t bwd_smem(int tile) {
  return tile == 64 ? BwdTile<64>::smem() : tile == 128 ? BwdTile<128>::smem() : BwdTile<256>::smem();
}

// The forward's workspace: q's rotated copy for KV-cache rotary (contiguous
// [B, Sq, Hq, D]), else none.
inline size_t fwd_workspace_bytes(const FwdParams& p) { return sm80::rotary_q_bytes(p); }
// The backward's workspace: D = rowsum(dO * O), one float per query row
// ([B, Hq, Sq], or [Hq, total_q] varlen, like the LSE).
inline size_t bwd_workspace_bytes(const BwdParams& p) {
  return static_cast<size_t>(p.heads_q * (p.varlen() ? p.total_q : p.batch * p.seqlen_q)) * sizeof(float);
}

template <int DT>
Status run_fwd(const FwdParams& p, void* workspace);
template <int DT>
Status run_bwd(const BwdParams& p, void* workspace);

}  // namespace flashattn::detail::cuda::f32

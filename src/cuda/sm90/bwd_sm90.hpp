// Hopper (sm_90a) backward: warp-specialised TMA + wgmma (bwd_kernel.cuh).
// Called by the CUDA dispatch after src/api's and dispatch.cpp's checks.
#pragma once

#include <cstddef>

#include "common/params.hpp"

namespace flashattn::detail::cuda::sm90 {

// Ok when this backward can run `p` on p.device_index. Unsupported (dispatch
// then runs the sm80 backward) for: device not sm_90, dtype other than
// fp16/bf16, q's or v's head_dim not a multiple of 8 up to 256 or the tile
// of the wider one (64, 128, 192, 256: the one at or above it, tma_desc.hpp
// bwd_tile_head_dim) not built, KV-cache
// lengths or block tables, dropout, an empty problem, lengths over 2^28,
// more than 2^31 rows, a pointer or stride that breaks TMA's 16-byte rule.
// Padded and varlen batches, softcap, ALiBi and the deterministic mode run
// here.
Status can_implement_bwd(const BwdParams& p) noexcept;

// Workspace bytes run_backward needs for `p` (call only when
// can_implement_bwd(p) is Ok): LSE*log2e and D over query rows padded to
// whole tiles (per sequence when varlen: bwd_kernel_args.hpp), the fp32 dQ
// accumulator over the same rows, and the deterministic mode's counters.
size_t bwd_workspace_bytes(const BwdParams& p) noexcept;

// Runs the backward on p.stream (asynchronous). Writes p.dq, p.dk, p.dv.
Status run_backward(const BwdParams& p, void* workspace) noexcept;

}  // namespace flashattn::detail::cuda::sm90

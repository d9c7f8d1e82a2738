// Hopper (sm_90a) forward: warp-specialised TMA + wgmma FlashAttention
// (FlashAttention-3's structure). Called by the CUDA dispatch on devices of
// compute capability 9.0 after src/api's checks have passed.
#pragma once

#include "common/params.hpp"

namespace flashattn::detail::cuda::sm90 {

// Ok when this kernel can run `p` on p.device_index. Unsupported (dispatch
// may fall back to the sm80 path) for: device not sm_90, dtype other than
// fp16/bf16/fp8 e4m3, head_dim not a multiple of 8 up to 256 (16-bit head
// dims run on the 64/128/192/256 tile at or above them; fp8 head dims,
// multiples of 16, on the 128 or 256 tile),
// scale <= 0, lengths over 2^28, dropout, fp8 with varlen, softcap or ALiBi. InvalidArgument
// naming the tensor when a pointer or stride breaks TMA's 16-byte alignment
// rule.
Status can_implement(const FwdParams& p) noexcept;

// True when run_forward packs the query heads of a GQA group into one tile
// (kernel_args.hpp pack_heads): calls of at most 64 query rows (padded,
// varlen or KV cache), groups of 2 to 16, no ALiBi, 16-bit.
bool packs_gqa(const FwdParams& p) noexcept;

// Device scratch run_forward needs: fp8's transposed V
// (fp8_v_transpose.hpp), and for causal / windowed problems the counter
// their work tiles are claimed from (tile_scheduler.cuh); 0 otherwise.
size_t workspace_bytes(const FwdParams& p) noexcept;

// Runs the forward on p.stream (asynchronous; no synchronisation). Writes
// p.out and, when non-null, p.lse. `workspace`: workspace_bytes(p) bytes of
// device memory (may be null when that is 0).
Status run_forward(const FwdParams& p, void* workspace) noexcept;

}  // namespace flashattn::detail::cuda::sm90

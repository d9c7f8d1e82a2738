// CPU backend entry points, called by src/api/dispatch.cpp after every check
// in src/api/checks.cpp has passed.
#pragma once

#include <cstddef>

#include "common/params.hpp"

namespace flashattn::detail::cpu {

Status forward(const FwdParams& p) noexcept;
Status backward(const BwdParams& p) noexcept;

// Host scratch bytes forward()/backward() allocate for these params
// (O(threads * tile) for the forward, O(N * d) at most for the backward).
size_t forward_workspace_bytes(const FwdParams& p) noexcept;
size_t backward_workspace_bytes(const BwdParams& p) noexcept;

// Name of the SIMD path forward()/backward() use now: "amx" (bf16 on AMX
// tiles, other dtypes as "avx512"), "avx512_bf16" (bf16 on VDPBF16PS, other
// dtypes as "avx512"), "avx512", "avx2" or "scalar"
// (FLASHATTN_CPU_ISA=scalar|avx2|avx512|avx512_bf16|amx caps it).
const char* isa_name() noexcept;

}  // namespace flashattn::detail::cpu

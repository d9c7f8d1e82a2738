// fp8 (e4m3) inputs on the CPU: the forward of the dequantised tensors,
// computed by the fp32 kernels (flashattn.hpp, Fp8Descale).
#pragma once

#include <cstddef>

#include "common/params.hpp"

namespace flashattn::detail::cpu {

// p.dtype is F8E4M3; `fp32_forward` runs the fp32 params this builds.
Status fp8_forward(const FwdParams& p, Status (*fp32_forward)(const FwdParams&) noexcept) noexcept;
// Bytes of the fp32 copies of q, k, v and O (the fp32 forward's own
// workspace comes on top).
size_t fp8_copy_bytes(const FwdParams& p) noexcept;
// The fp32 params fp8_forward hands on (pointers null): for workspace sizes.
FwdParams fp8_as_fp32_shape(const FwdParams& p) noexcept;

}  // namespace flashattn::detail::cpu

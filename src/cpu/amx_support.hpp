// Whether this process may run the AMX (bf16 tile) kernels: the CPU has
// AMX-TILE, AMX-BF16 and AVX512-BF16, the OS saves the tile state (XCR0), and
// Linux granted the tile-data permission (arch_prctl ARCH_REQ_XCOMP_PERM).
#pragma once

namespace flashattn::detail::cpu {

// Asks for the permission on the first call (once per process, thread-safe);
// later calls return the same answer.
bool amx_usable() noexcept;

// AVX512-BF16 (VDPBF16PS, VCVTNE2PS2BF16) on top of AVX-512 BW, with the OS
// saving the AVX-512 state: the dot-product path (kernels_avx512bf16.cpp).
bool avx512_bf16_usable() noexcept;

}  // namespace flashattn::detail::cpu

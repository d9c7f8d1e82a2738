// Whether this process may run the AMX (bf16 tile) kernels: the CPU has
// AMX-TILE, AMX-BF16 and AVX512-BF16, the OS saves the tile state (XCR0), and
// Linux granted the tile-data permission (arch_prctl ARCH_REQ_XCOMP_PERM).
#pragma once

namespace flashattn::detail::cpu {

// Asks for the permission on the first call (once per process, thread-safe);
// later calls return the same answer.
bool amx_usable() noexcept;

}  // namespace flashattn::detail::cpu

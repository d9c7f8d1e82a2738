// The per-ISA kernel entry points. Each kernels_<isa>.cpp compiles the same
// kernel headers with its own flags and exports one table; cpu_backend.cpp
// picks a table once per call from what the CPU supports.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/params.hpp"

namespace flashattn::detail::cpu {

struct KernelTable {
  const char* name;
  // Independent tasks (the most threads worth starting).
  int64_t (*forward_tasks)(const FwdParams&);
  int64_t (*backward_tasks)(const BwdParams&);
  // Scratch floats for `nthreads` threads; the kernel carves exactly this.
  size_t (*forward_workspace_floats)(const FwdParams&, int nthreads);
  size_t (*backward_workspace_floats)(const BwdParams&, int nthreads);
  void (*forward)(const FwdParams&, float* workspace, int nthreads);
  void (*backward)(const BwdParams&, float* workspace, int nthreads);
};

// Whether a decode step's software prefetches of the next K / V tile go to L2
// only (prefetcht1) rather than to L1 (prefetcht0): decode_prefetch_rule for
// this CPU and FLASHATTN_CPU_DECODE_PREFETCH (read on every call of this
// function: the kernels call it once per decode call). cpu_backend.cpp.
bool decode_prefetch_to_l2() noexcept;
// The rule, from measurements (bench/NOTES.md, "Decode prefetches into L2 on
// Zen 4"): L2 on AMD Zen 4 (family 0x19 with AVX-512), where decode read
// 10-53% faster from memory at 16k-64k keys; L1 elsewhere (level or slower
// into L2 on a Zen 5, 20-25% slower on an Intel Xeon). env "l1" / "l2"
// overrides it; nullptr or any other value leaves it.
bool decode_prefetch_rule(const char* env, bool amd, int family, bool avx512) noexcept;

const KernelTable& kernels_scalar();
#if defined(__x86_64__) || defined(_M_X64)
const KernelTable& kernels_avx2();
const KernelTable& kernels_avx512();
#if defined(FLASHATTN_CPU_AMX)
// bf16 on AMX tiles / on AVX512-BF16 dot products; other dtypes as kernels_avx512.
const KernelTable& kernels_amx();
const KernelTable& kernels_avx512bf16();
// kernels_avx512() with bf16 decode steps scored on AVX512-BF16 dot products:
// where kernels_avx512bf16() sends the calls it does not run on its pairs.
const KernelTable& kernels_avx512bf16_decode();
// kernels_avx512() with bf16 decode scores on AMX tiles: where kernels_amx()
// sends its decode calls.
const KernelTable& kernels_amx_decode();
#endif
#endif

}  // namespace flashattn::detail::cpu

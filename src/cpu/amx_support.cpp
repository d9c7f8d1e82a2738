// AMX detection and the Linux permission request. Since Linux 5.16 a process
// must ask for the 8 KiB tile-data state before its first tile instruction,
// or that instruction faults (SIGILL); the request is per process, so one
// successful call covers every OpenMP thread, present and future.
#include "amx_support.hpp"

#if defined(__x86_64__) && defined(__linux__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace flashattn::detail::cpu {
namespace {

#if defined(__x86_64__) && defined(__linux__)
constexpr int kArchReqXcompPerm = 0x1023;  // arch/x86/include/uapi/asm/prctl.h
constexpr int kXfeatureXtiledata = 18;

bool cpu_has_amx_bf16() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_max(0, nullptr) < 7) return false;
  __cpuid_count(7, 0, a, b, c, d);
  const bool tile = d & (1u << 24), amx_bf16 = d & (1u << 22);
  const bool osxsave = [] {
    unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
    return __get_cpuid(1, &a1, &b1, &c1, &d1) && (c1 & (1u << 27));
  }();
  __cpuid_count(7, 1, a, b, c, d);
  const bool avx512_bf16 = a & (1u << 5);
  if (!(tile && amx_bf16 && avx512_bf16 && osxsave)) return false;
  // XCR0 bits 17 (XTILECFG) and 18 (XTILEDATA): the OS context-switches tiles;
  // bits 5-7: it does the same for the AVX-512 state the kernels also use.
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  const unsigned need = (1u << 17) | (1u << 18) | 0xe0u;
  return (lo & need) == need;
}

bool request_permission() {
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}
#endif

}  // namespace

bool amx_usable() noexcept {
#if defined(__x86_64__) && defined(__linux__)
  // A function-local static is initialised once, under the compiler's guard.
  static const bool ok = cpu_has_amx_bf16() && request_permission();
  return ok;
#else
  return false;
#endif
}

}  // namespace flashattn::detail::cpu

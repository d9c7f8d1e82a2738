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

// XCR0 holds every bit of `need`: the OS saves that state on context switches.
bool os_saves(unsigned need) {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return false;  // OSXSAVE
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (lo & need) == need;
}

// CPUID leaf 7: EBX bit 30 AVX512BW, subleaf 1 EAX bit 5 AVX512-BF16; XCR0
// bits 5-7 the AVX-512 state (opmask, upper zmm halves, zmm16-31).
bool cpu_has_avx512_bf16() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_max(0, nullptr) < 7) return false;
  __cpuid_count(7, 0, a, b, c, d);
  const bool bw = b & (1u << 30);
  __cpuid_count(7, 1, a, b, c, d);
  return bw && (a & (1u << 5)) && os_saves(0xe0u);
}

// Leaf 7 EDX bit 24 AMX-TILE, bit 22 AMX-BF16; XCR0 bits 17 (XTILECFG) and
// 18 (XTILEDATA).
bool cpu_has_amx_bf16() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!cpu_has_avx512_bf16()) return false;
  __cpuid_count(7, 0, a, b, c, d);
  return (d & (1u << 24)) && (d & (1u << 22)) && os_saves((1u << 17) | (1u << 18));
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

bool avx512_bf16_usable() noexcept {
#if defined(__x86_64__) && defined(__linux__)
  static const bool ok = cpu_has_avx512_bf16();
  return ok;
#else
  return false;
#endif
}

}  // namespace flashattn::detail::cpu

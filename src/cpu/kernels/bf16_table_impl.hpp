// The kernel table of a bf16 pair-GEMM path (kernels_amx.cpp,
// kernels_avx512bf16.cpp): bf16 runs forward_amx.hpp / backward_amx.hpp
// compiled in this translation unit; fp32 and fp16 go to the AVX-512 kernels,
// bit for bit (rounding their operands to bf16 would break their accuracy).
// Included once by each, after it defines FA_ISA_NS, FA_ISA_NAME and
// FA_KERNEL_TABLE_FN.
#pragma once

#include "backward_amx.hpp"
#include "cpu/kernel_table.hpp"
#include "forward.hpp"

#ifndef FA_BF16_DECODE_AVX512
#define FA_BF16_DECODE_AVX512 0
#endif
// The table of every call this path does not run on its pairs: the AVX-512
// kernels, or with FA_BF16_DECODE_AVX512 the same kernels whose bf16 decode
// scores run on VDPBF16PS (kernels_avx512bf16_decode.cpp).
#if FA_BF16_DECODE_AVX512
#define FA_OTHER_KERNELS kernels_avx512bf16_decode
#else
#define FA_OTHER_KERNELS kernels_avx512
#endif

namespace flashattn::detail::cpu {
namespace {

// FA_BF16_DECODE_AVX512: decode steps (use_decode) go to the AVX-512 kernels
// (with VDPBF16PS scores), which read 16-bit K/V rows in place; this path's decode copies each tile
// into its pair layout first, and measured 1.4-1.7x slower for it
// (avx512_bf16 on a Zen 4, bench/NOTES.md).
bool pairs_fwd(const FwdParams& p) {
  if (p.dtype != DType::BF16) return false;
#if FA_BF16_DECODE_AVX512
  if (p.heads_kv > 0 && FA_ISA_NS::use_decode(p)) return false;  // (heads_kv 0: an empty call)
#endif
  return true;
}
bool pairs_bwd(const BwdParams& p) { return p.dtype == DType::BF16; }

int64_t fwd_tasks(const FwdParams& p) {
  return pairs_fwd(p) ? FA_ISA_NS::forward_tasks(p) : FA_OTHER_KERNELS().forward_tasks(p);
}
int64_t bwd_tasks(const BwdParams& p) {
  return pairs_bwd(p) ? FA_ISA_NS::backward_tasks(p) : FA_OTHER_KERNELS().backward_tasks(p);
}
size_t fwd_ws(const FwdParams& p, int nt) {
  return pairs_fwd(p) ? FA_ISA_NS::forward_workspace_floats(p, nt)
                      : FA_OTHER_KERNELS().forward_workspace_floats(p, nt);
}
size_t bwd_ws(const BwdParams& p, int nt) {
  return pairs_bwd(p) ? FA_ISA_NS::backward_workspace_floats_amx(p, nt)
                      : FA_OTHER_KERNELS().backward_workspace_floats(p, nt);
}
void fwd(const FwdParams& p, float* ws, int nt) {
  pairs_fwd(p) ? FA_ISA_NS::forward(p, ws, nt) : FA_OTHER_KERNELS().forward(p, ws, nt);
}
void bwd(const BwdParams& p, float* ws, int nt) {
  pairs_bwd(p) ? FA_ISA_NS::backward_amx(p, ws, nt) : FA_OTHER_KERNELS().backward(p, ws, nt);
}

}  // namespace

const KernelTable& FA_KERNEL_TABLE_FN() {
  static const KernelTable table = {FA_ISA_NAME, &fwd_tasks, &bwd_tasks, &fwd_ws, &bwd_ws, &fwd, &bwd};
  return table;
}

}  // namespace flashattn::detail::cpu

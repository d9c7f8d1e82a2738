// The kernel table of a bf16 pair-GEMM path (kernels_amx.cpp,
// kernels_avx512bf16.cpp): bf16 runs forward_amx.hpp / backward_amx.hpp
// compiled in this translation unit; fp16 goes to the AVX-512 kernels, bit
// for bit (rounding its operands to bf16 would break their accuracy), and so
// does fp32, except on AMX (FA_FP32_SPLIT), where fp32 forward and backward
// calls whose rows are long enough (cpu/fp32_tiles_rule.hpp) run
// forward_amx.hpp / backward_amx.hpp on three bf16 pieces per operand unless
// FLASHATTN_CPU_FP32_AMX=0.
// Included once by each, after it defines FA_ISA_NS, FA_ISA_NAME,
// FA_KERNEL_TABLE_FN and FA_OTHER_KERNELS.
#pragma once

#include <cstdlib>
#include <cstring>

#include "backward_amx.hpp"
#include "cpu/fp32_tiles_rule.hpp"
#include "cpu/kernel_table.hpp"
#include "forward.hpp"

// FA_OTHER_KERNELS (set by the including file): the table of every call
// this path does not run on its pairs: fp32, fp16, and bf16 decode steps.
#ifndef FA_OTHER_KERNELS
#error "define FA_OTHER_KERNELS before including bf16_table_impl.hpp"
#endif

namespace flashattn::detail::cpu {
namespace {

// Decode steps (use_decode) go to the AVX-512 kernels, which read 16-bit K/V
// rows in place with GQA groups packed and the next tile prefetched; this
// path's decode copies each tile into its pair layout, one head per task, and
// measured 1.4-1.7x slower on a Zen 4 (avx512_bf16) and 1.3-1.7x on a Xeon
// with AMX at 16k-64k keys (bench/NOTES.md).
// fp32 on the tiles (FA_FP32_SPLIT): FLASHATTN_CPU_FP32_AMX=0 never, =1
// always (tests, A/B runs), unset where it measured faster, per pass
// (cpu/fp32_tiles_rule.hpp). Read once per process.
bool fp32_on_tiles(const AttnParams& p, Fp32TilesPass pass) {
  static const int env = [] {
    const char* e = std::getenv("FLASHATTN_CPU_FP32_AMX");
    return e && !std::strcmp(e, "0") ? 0 : e && !std::strcmp(e, "1") ? 1 : -1;
  }();
  if (!FA_FP32_SPLIT || p.dtype != DType::F32 || env == 0) return false;
  return env == 1 || fp32_tiles_pay(p, pass);
}
// fp32 decode steps stay on the AVX-512 kernels like bf16's (one query row
// per head: six bf16 products per score would not pay there).
bool pairs_fwd(const FwdParams& p) {
  if (p.dtype != DType::BF16 && !fp32_on_tiles(p, Fp32TilesPass::Forward)) return false;
  return p.heads_kv == 0 || !FA_ISA_NS::use_decode(p);  // (heads_kv 0: an empty call)
}
bool pairs_bwd(const BwdParams& p) { return p.dtype == DType::BF16 || fp32_on_tiles(p, Fp32TilesPass::Backward); }

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

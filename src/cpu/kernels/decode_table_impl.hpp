// The kernel table of a decode-only variant of the AVX-512 kernels
// (kernels_avx512bf16_decode.cpp, kernels_amx_decode.cpp): forward.hpp's
// decode compiled with one of the bf16 decode options (FA_DECODE_DPBF16,
// FA_DECODE_AMX) runs the bf16 decode steps (use_decode); every other call is
// kernels_avx512()'s, bit for bit. Included once by each, after it defines
// FA_ISA_NS, FA_ISA_NAME and FA_DECODE_TABLE_FN.
#pragma once

#include "cpu/kernel_table.hpp"
#include "forward.hpp"

namespace flashattn::detail::cpu {
namespace {

namespace k = FA_ISA_NS;

bool bf16_decode(const FwdParams& p) {
  return p.dtype == DType::BF16 && p.heads_kv > 0 && k::use_decode(p);  // (heads_kv 0: an empty call)
}

int64_t fwd_tasks(const FwdParams& p) {
  return bf16_decode(p) ? k::forward_tasks(p) : kernels_avx512().forward_tasks(p);
}
size_t fwd_ws(const FwdParams& p, int nt) {
  return bf16_decode(p) ? k::forward_workspace_floats(p, nt) : kernels_avx512().forward_workspace_floats(p, nt);
}
void fwd(const FwdParams& p, float* ws, int nt) {
  if (!bf16_decode(p)) return kernels_avx512().forward(p, ws, nt);
  p.block_table ? k::decode<k::bf16_t, true>(p, ws, nt) : k::decode<k::bf16_t, false>(p, ws, nt);
}
int64_t bwd_tasks(const BwdParams& p) { return kernels_avx512().backward_tasks(p); }
size_t bwd_ws(const BwdParams& p, int nt) { return kernels_avx512().backward_workspace_floats(p, nt); }
void bwd(const BwdParams& p, float* ws, int nt) { kernels_avx512().backward(p, ws, nt); }

}  // namespace

const KernelTable& FA_DECODE_TABLE_FN() {
  static const KernelTable table = {FA_ISA_NAME, &fwd_tasks, &bwd_tasks, &fwd_ws, &bwd_ws, &fwd, &bwd};
  return table;
}

}  // namespace flashattn::detail::cpu

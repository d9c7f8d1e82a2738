// bf16 decode steps for the AVX512-BF16 path (kernels_avx512bf16.cpp): the
// AVX-512 kernels' decode (forward.hpp: K/V rows read in place, packed GQA,
// split KV) with its scores on VDPBF16PS dot products against the raw bf16 Q
// rows (gemm.hpp dot_rows_dpbf16) instead of widened K rows times scaled fp32
// Q. Everything else in the table (other dtypes, prefill, the backward) is
// kernels_avx512()'s, bit for bit.
#define FA_ISA_NS avx512bf16_decode
#define FA_VW 16
#define FA_MR 4
#define FA_NV 4
#define FA_DECODE_DPBF16 1
#include "cpu/kernel_table.hpp"
#include "kernels/forward.hpp"

namespace flashattn::detail::cpu {
namespace {

namespace k = FA_ISA_NS;

bool dpbf16_decode(const FwdParams& p) {
  return p.dtype == DType::BF16 && p.heads_kv > 0 && k::use_decode(p);  // (heads_kv 0: an empty call)
}

int64_t fwd_tasks(const FwdParams& p) {
  return dpbf16_decode(p) ? k::forward_tasks(p) : kernels_avx512().forward_tasks(p);
}
size_t fwd_ws(const FwdParams& p, int nt) {
  return dpbf16_decode(p) ? k::forward_workspace_floats(p, nt) : kernels_avx512().forward_workspace_floats(p, nt);
}
void fwd(const FwdParams& p, float* ws, int nt) {
  if (!dpbf16_decode(p)) return kernels_avx512().forward(p, ws, nt);
  p.block_table ? k::decode<k::bf16_t, true>(p, ws, nt) : k::decode<k::bf16_t, false>(p, ws, nt);
}
int64_t bwd_tasks(const BwdParams& p) { return kernels_avx512().backward_tasks(p); }
size_t bwd_ws(const BwdParams& p, int nt) { return kernels_avx512().backward_workspace_floats(p, nt); }
void bwd(const BwdParams& p, float* ws, int nt) { kernels_avx512().backward(p, ws, nt); }

}  // namespace

const KernelTable& kernels_avx512bf16_decode() {
  static const KernelTable table = {"avx512_bf16", &fwd_tasks, &bwd_tasks, &fwd_ws, &bwd_ws, &fwd, &bwd};
  return table;
}

}  // namespace flashattn::detail::cpu

// CPU kernels for AMX (AMX-TILE + AMX-BF16, with AVX512-BF16 for the fp32 ->
// bf16 packing): bf16 inputs run their GEMMs on the tile unit
// (kernels/forward_amx.hpp, kernels/backward_amx.hpp); fp32 and fp16 go to
// the AVX-512 kernels, bit for bit (bf16 tiles would round fp32 and fp16
// operands, breaking their accuracy).
#define FA_ISA_NS amx
#define FA_VW 16
#define FA_MR 4
#define FA_NV 4
#define FA_AMX 1
// 256-key forward tiles: each load and store of the O^T accumulator tiles is
// spread over 8 K-steps instead of 2 (64 keys); bench/NOTES.md, CPU / AMX.
#define FA_FWD_BC 256
// 256-query backward tiles: dK^T and dV^T (the accumulators of two of the
// five GEMMs) are loaded and stored once per 8 K-steps instead of 4.
#define FA_BR 256
#include "kernels/backward.hpp"
#include "kernels/backward_amx.hpp"
#include "kernels/forward.hpp"
#include "kernel_table.hpp"

namespace flashattn::detail::cpu {
namespace {

bool tiles_fwd(const FwdParams& p) { return p.dtype == DType::BF16; }
bool tiles_bwd(const BwdParams& p) { return p.dtype == DType::BF16; }

int64_t fwd_tasks(const FwdParams& p) {
  return tiles_fwd(p) ? amx::forward_tasks(p) : kernels_avx512().forward_tasks(p);
}
int64_t bwd_tasks(const BwdParams& p) {
  return tiles_bwd(p) ? amx::backward_tasks(p) : kernels_avx512().backward_tasks(p);
}
size_t fwd_ws(const FwdParams& p, int nt) {
  return tiles_fwd(p) ? amx::forward_workspace_floats(p, nt)
                      : kernels_avx512().forward_workspace_floats(p, nt);
}
size_t bwd_ws(const BwdParams& p, int nt) {
  return tiles_bwd(p) ? amx::backward_workspace_floats_amx(p, nt)
                      : kernels_avx512().backward_workspace_floats(p, nt);
}
void fwd(const FwdParams& p, float* ws, int nt) {
  tiles_fwd(p) ? amx::forward(p, ws, nt) : kernels_avx512().forward(p, ws, nt);
}
void bwd(const BwdParams& p, float* ws, int nt) {
  tiles_bwd(p) ? amx::backward_amx(p, ws, nt) : kernels_avx512().backward(p, ws, nt);
}

}  // namespace

const KernelTable& kernels_amx() {
  static const KernelTable table = {"amx", &fwd_tasks, &bwd_tasks, &fwd_ws, &bwd_ws, &fwd, &bwd};
  return table;
}

}  // namespace flashattn::detail::cpu

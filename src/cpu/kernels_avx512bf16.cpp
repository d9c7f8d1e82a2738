// CPU kernels for AVX512-BF16 without AMX (Cooper Lake, Zen 4): the AMX path's
// bf16 kernels with their GEMMs on VDPBF16PS dot products
// (kernels/dpbf16_gemm.hpp); fp32, fp16 and bf16 decode steps run the AVX-512
// kernels (bf16 decode with its scores on VDPBF16PS too:
// kernels_avx512bf16_decode.cpp). The default on AMD CPUs; elsewhere (Intel,
// where it measured slower, and any CPU with AMX) only when
// FLASHATTN_CPU_ISA=avx512_bf16 asks for it (cpu_backend.cpp says why).
#define FA_ISA_NS avx512bf16
#define FA_ISA_NAME "avx512_bf16"
#define FA_KERNEL_TABLE_FN kernels_avx512bf16
#define FA_VW 16
#define FA_MR 4
#define FA_NV 4
#define FA_AMX 1
#define FA_BF16_DOT 1
#define FA_OTHER_KERNELS kernels_avx512bf16_decode
// The AMX path's tile sizes (kernels_amx.cpp): the same operand packings.
#define FA_FWD_BC 256
#define FA_BR 256
#include "kernels/bf16_table_impl.hpp"

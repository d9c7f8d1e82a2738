// CPU kernels for AMX (AMX-TILE + AMX-BF16, with AVX512-BF16 for the fp32 ->
// bf16 packing): bf16 inputs run their GEMMs on the tile unit
// (kernels/forward_amx.hpp, kernels/backward_amx.hpp, kernels/amx_tiles.hpp),
// and so do the fp32 forward and backward where cpu/fp32_tiles_rule.hpp
// says so, on three bf16 pieces per operand (FA_FP32_SPLIT); fp16 and the
// other fp32 calls run the AVX-512 kernels (kernels/bf16_table_impl.hpp),
// bf16 decode steps the same kernels with their GEMMs on AMX tiles
// (kernels_amx_decode.cpp).
#define FA_ISA_NS amx
#define FA_ISA_NAME "amx"
#define FA_KERNEL_TABLE_FN kernels_amx
#define FA_VW 16
#define FA_MR 4
#define FA_NV 4
#define FA_AMX 1
#define FA_OTHER_KERNELS kernels_amx_decode
// fp32 forward on the tiles, each operand as three bf16 pieces
// (forward_amx.hpp): bench/NOTES.md, "fp32 on AMX tiles".
#define FA_FP32_SPLIT 1
// 256-key forward tiles: each load and store of the O^T accumulator tiles is
// spread over 8 K-steps instead of 2 (64 keys); bench/NOTES.md, CPU / AMX.
#define FA_FWD_BC 256
// 256-query backward tiles: dK^T and dV^T (the accumulators of two of the
// five GEMMs) are loaded and stored once per 8 K-steps instead of 4.
#define FA_BR 256
// No software prefetch of the next K/V tile in the forward: on a Xeon with
// AMX the prefetch instructions stalled on full fill buffers (11% of the
// samples) and the forward ran 5-10% faster without them (bench/NOTES.md).
#define FA_AMX_FWD_PF 0
#include "kernels/bf16_table_impl.hpp"

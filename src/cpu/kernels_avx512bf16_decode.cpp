// bf16 decode steps for the AVX512-BF16 path (kernels_avx512bf16.cpp): the
// AVX-512 kernels' decode (forward.hpp: K/V rows read in place, packed GQA,
// split KV) with its scores on VDPBF16PS dot products against the raw bf16 Q
// rows (gemm.hpp dot_rows_dpbf16) instead of widened K rows times scaled fp32
// Q, and its P V on VDPBF16PS (pv_dpbf16).
#define FA_ISA_NS avx512bf16_decode
#define FA_ISA_NAME "avx512_bf16"
#define FA_DECODE_TABLE_FN kernels_avx512bf16_decode
#define FA_VW 16
#define FA_MR 4
#define FA_NV 4
#define FA_DECODE_DPBF16 1
#include "kernels/decode_table_impl.hpp"

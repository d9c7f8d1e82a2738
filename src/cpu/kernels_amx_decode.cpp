// bf16 decode steps for the AMX path (kernels_amx.cpp): the AVX-512 kernels'
// decode (forward.hpp: K/V rows read in place, packed GQA, split KV) with its
// scores on AMX tiles reading the K rows in place (amx_decode.hpp); P V stays
// on the AVX-512 kernels' widening FMAs (on Intel VDPBF16PS issues at the rate
// of two FP32 FMAs, so pv_dpbf16 would not do more multiply-adds per cycle).
#define FA_ISA_NS amx_decode
#define FA_ISA_NAME "amx"
#define FA_DECODE_TABLE_FN kernels_amx_decode
#define FA_VW 16
#define FA_MR 4
#define FA_NV 4
#define FA_DECODE_AMX 1
#include "kernels/decode_table_impl.hpp"

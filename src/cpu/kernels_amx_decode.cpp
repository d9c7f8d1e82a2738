// bf16 decode steps for the AMX path (kernels_amx.cpp): the AVX-512 kernels'
// decode (forward.hpp: K/V rows read in place, packed GQA, split KV) with its
// scores on AMX tiles reading the K rows in place and, from 4 query rows per
// KV head, its P V on tiles too (amx_decode.hpp); fewer rows keep the
// widening FMAs (pv_in_chunks).
#define FA_ISA_NS amx_decode
#define FA_ISA_NAME "amx"
#define FA_DECODE_TABLE_FN kernels_amx_decode
#define FA_VW 16
#define FA_MR 4
#define FA_NV 4
#define FA_DECODE_AMX 1
#include "kernels/decode_table_impl.hpp"

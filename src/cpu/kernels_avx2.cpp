// CPU kernels compiled for AVX2 + FMA + F16C: 8-float vectors, 6 x 16
// register block (12 accumulators of the 16 ymm registers).
#define FA_ISA_NS avx2
#define FA_ISA_NAME "avx2"
#define FA_KERNEL_TABLE_FN kernels_avx2
#define FA_VW 8
#define FA_MR 6
#define FA_NV 2
#include "kernels/kernels_impl.hpp"

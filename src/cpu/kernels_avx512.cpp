// CPU kernels compiled for AVX-512 (F/BW/VL/DQ + FMA + F16C): 16-float
// vectors, 4 x 64 register block (16 accumulators of the 32 zmm registers).
#define FA_ISA_NS avx512
#define FA_ISA_NAME "avx512"
#define FA_KERNEL_TABLE_FN kernels_avx512
#define FA_VW 16
#define FA_MR 4
#define FA_NV 4
#include "kernels/kernels_impl.hpp"

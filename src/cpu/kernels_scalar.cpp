// CPU kernels for the baseline ISA (SSE2 on x86-64, whatever the compiler
// targets elsewhere): 4-float vectors, 4 x 8 register block.
#define FA_ISA_NS baseline
#define FA_ISA_NAME "scalar"
#define FA_KERNEL_TABLE_FN kernels_scalar
#define FA_VW 4
#define FA_MR 4
#define FA_NV 2
#include "kernels/kernels_impl.hpp"

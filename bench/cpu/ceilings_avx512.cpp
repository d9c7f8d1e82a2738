// Compiled with -mavx512f -mfma (bench/CMakeLists.txt); run only where the CPU has AVX-512F.
#define CEIL_VW 16
#define CEIL_FN ceilings_avx512
#define CEIL_ISA "avx512"
#include "ceilings_impl.hpp"

// Compiled with -mavx2 -mfma (bench/CMakeLists.txt).
#define CEIL_VW 8
#define CEIL_FN ceilings_avx2
#define CEIL_ISA "avx2"
#include "ceilings_impl.hpp"

// Picks the engine of the bf16 pair-GEMMs for this translation unit: AMX
// tiles (kernels_amx.cpp) or AVX512-BF16 dot products
// (kernels_avx512bf16.cpp, FA_BF16_DOT), with the packings both read.
#pragma once

#if defined(FA_BF16_DOT) && FA_BF16_DOT
#include "dpbf16_gemm.hpp"
#else
#include "amx_tiles.hpp"
#endif
#include "bf16_pack.hpp"

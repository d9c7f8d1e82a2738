// Element-type tags shared by host and device code (host files see no
// cuda_fp16.h / cuda_bf16.h; ElemType in mma_sm80.cuh maps them to types).
#pragma once

namespace flashattn::detail::cuda {

enum Elem : int { kF16 = 0, kBF16 = 1 };

}  // namespace flashattn::detail::cuda

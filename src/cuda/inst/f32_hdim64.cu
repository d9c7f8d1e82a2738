// fp32 kernels (CUDA cores, exact fp32), tile head dim 64.
#include "f32/launch_f32.cuh"

namespace flashattn::detail::cuda::f32 {
template Status run_fwd<64>(const FwdParams&, void*);
template Status run_bwd<64>(const BwdParams&, void*);
}  // namespace flashattn::detail::cuda::f32

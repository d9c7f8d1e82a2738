// fp32 kernels (CUDA cores, exact fp32), tile head dim 256.
#include "f32/launch_f32.cuh"

namespace flashattn::detail::cuda::f32 {
template Status run_fwd<256>(const FwdParams&, void*);
template Status run_bwd<256>(const BwdParams&, void*);
}  // namespace flashattn::detail::cuda::f32

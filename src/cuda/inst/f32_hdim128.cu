// fp32 kernels (CUDA cores, exact fp32), tile head dim 128.
#include "f32/launch_f32.cuh"

namespace flashattn::detail::cuda::f32 {
template Status run_fwd<128>(const FwdParams&, void*);
template Status run_bwd<128>(const BwdParams&, void*);
}  // namespace flashattn::detail::cuda::f32
